// Credentials at egress (docs/sandbox.md): a grant `"as": "header"` makes the egress proxy add
// the header to HTTPS requests to one host, terminating TLS with a CA of the sandbox's own and
// verifying the upstream against the system store plus TOOLCAGE_EGRESS_CA_FILE. The evidence:
// what the HTTPS upstreams (their own test CA, made here with openssl) received, and a search
// the sandboxed program runs over its environment, its files and its own memory for the value.
// It is given only the value's SHA-256, its length and its first 4 bytes (candidates are found
// by the prefix, confirmed by the hash), so the search itself never puts the value in the
// sandbox; a control run with the secret as an environment variable shows the search finds it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { setup } from './harness.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-inject-'));
const ssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
ssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=toolcage test upstream CA',
  '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
ssl('req', ...ec, '-keyout', 'up.key', '-out', 'up.csr', '-subj', '/CN=127.0.0.1');
fs.writeFileSync(path.join(dir, 'up.ext'), 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
ssl('x509', '-req', '-in', 'up.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'up.pem', '-days', '2', '-extfile', 'up.ext');
// a certificate no store trusts
ssl('req', '-x509', ...ec, '-keyout', 'rogue.key', '-out', 'rogue.pem', '-days', '2', '-subj', '/CN=127.0.0.1',
  '-addext', 'subjectAltName=IP:127.0.0.1');
const read = (f) => fs.readFileSync(path.join(dir, f));

async function upstream(name, cert, key) {
  const seen = [];
  const srv = https.createServer({ cert, key }, (req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      seen.push({ url: req.url, headers: req.headers, body });
      // /echo answers with the credential it got: the proxy must not let it reach the sandbox
      res.end(req.url.startsWith('/echo') ? `you sent: ${req.headers.authorization}` : `hello from ${name} ${req.url}`);
    });
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return { srv, seen, port: srv.address().port };
}
const U = await upstream('U', read('up.pem'), read('up.key')); // the granted host
const P = await upstream('P', read('up.pem'), read('up.key')); // allowed, no grant: tunnelled
const R = await upstream('R', read('rogue.pem'), read('rogue.key')); // granted, untrusted certificate

const SECRET = `tok-${crypto.randomBytes(18).toString('hex')}`;
const policyPath = path.join(dir, 'policy.json');
const python = {
  language: 'python', command: ['/usr/bin/python3', '-I', '-B', '{code_file}'], code_file: 'main.py',
  prescreen: { rules: 'none' },
  output: { redact: { disable: ['private_ip'] } },
  limits: { timeout_ms: { default: 60000, max: 60000 }, cpu_ms: { default: 30000, max: 60000 }, memory_mb: { default: 512, max: 512 } },
};
const allow = [`127.0.0.1:${U.port}`, `127.0.0.1:${P.port}`, `127.0.0.1:${R.port}`];
fs.writeFileSync(policyPath, JSON.stringify({
  version: 1,
  tools: {
    api: {
      description: 'calls an API with a credential it never sees', ...python, network: { allow },
      credentials: [
        { secret: 'apitok', as: 'header', host: '127.0.0.1', port: U.port, header: 'Authorization', format: 'Bearer {value}' },
        { secret: 'apitok', as: 'header', host: '127.0.0.1', port: R.port, header: 'X-Api-Key' },
      ],
    },
    envtool: { description: 'the control: the same secret in its environment', ...python, network: { allow },
      credentials: [{ secret: 'apitok', as: 'env', name: 'API_TOKEN' }] },
  },
}, null, 2));

const server = setup('egress-inject', { policy: policyPath, serveEnv: { TOOLCAGE_EGRESS_CA_FILE: path.join(dir, 'ca.pem') } });

after(async () => {
  for (const u of [U, P, R]) u.srv.closeAllConnections?.();
  await Promise.all([U, P, R].map((u) => new Promise((r) => u.srv.close(r))));
  fs.rmSync(dir, { recursive: true, force: true });
});

let stored = false;
async function storeSecret() {
  if (stored) return;
  const put = await server.request('PUT', '/v1/secrets/apitok', { key: server.keys.admin, json: { value: SECRET, allowed_tools: ['api', 'envtool'] } });
  assert.ok([200, 201].includes(put.status), put.text);
  stored = true;
}

const HASH = crypto.createHash('sha256').update(SECRET).digest('hex');
const SEARCH = `
import hashlib, os
H, P, L = ${JSON.stringify(HASH)}, ${JSON.stringify(SECRET.slice(0, 4))}.encode(), ${SECRET.length}
def scan(buf):
    i = buf.find(P)
    while i != -1:
        if hashlib.sha256(buf[i:i + L]).hexdigest() == H:
            return True
        i = buf.find(P, i + 1)
    return False
def search(extra=b""):
    where = []
    if scan("\\0".join(k + "=" + v for k, v in os.environ.items()).encode()):
        where.append("env")
    if scan(extra):
        where.append("answers")
    files = 0
    for root in ["/run", "/tmp", "/workspace", "/dev/shm", "/proc/self/environ"]:
        paths = [root] if os.path.isfile(root) else [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]
        for p in paths:
            try:
                with open(p, "rb") as fh:
                    data = fh.read(16 << 20)
            except OSError:
                continue
            files += 1
            if scan(data):
                where.append(p)
    regions = 0
    with open("/proc/self/maps") as m, open("/proc/self/mem", "rb", 0) as mem:
        for line in m:
            f = line.split()
            a, b = (int(x, 16) for x in f[0].split("-"))
            if "r" not in f[1] or b - a > (256 << 20):
                continue
            try:
                mem.seek(a)
                data = mem.read(b - a)
            except (OSError, ValueError, OverflowError):
                continue
            regions += 1
            if scan(data):
                where.append("memory")
    print("searched", "files" if files else "NO-FILES", "memory" if regions else "NO-MEMORY")
    print("found:", ",".join(sorted(set(where))) or "nowhere")
`;

test('the proxy adds the header to the granted host only; the upstream gets it; the sandbox finds the value nowhere', async () => {
  await storeSecret();
  const code = `${SEARCH}
import json, urllib.request
answers = b""
def get(url, headers={}):
    global answers
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
            answers += body
            return "%d %s" % (r.status, body.decode())
    except Exception as e:
        return "error %s" % e
print(get("https://127.0.0.1:${U.port}/api?x=1", {"Authorization": "Bearer forged-by-the-sandbox", "Host": "evil.example"}))
print(get("https://127.0.0.1:${U.port}/echo"))
print(get("https://127.0.0.1:${R.port}/rogue"))
import ssl
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
try:
    with urllib.request.urlopen("https://127.0.0.1:${P.port}/plain", timeout=30, context=ctx) as r:
        print(r.status, r.read().decode())
except Exception as e:
    print("error", e)
search(answers)
`;
  const res = await server.execute({ tool: 'api', code });
  const r = res.json;
  assert.equal(r.status, 'completed', res.text);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines[0], `200 hello from U /api?x=1`, r.stdout + r.stderr);
  assert.match(lines[1], /^200 you sent: Bearer \*+$/, 'the echoed credential is blanked on its way to the sandbox');
  assert.equal(lines[1].length, `200 you sent: Bearer ${SECRET}`.length, 'same length: the framing holds');
  assert.match(lines[2], /^error HTTP Error 502/, 'an upstream whose certificate does not verify gets nothing');
  assert.equal(lines[3], `200 hello from P /plain`);
  assert.equal(lines[4], 'searched files memory');
  assert.equal(lines[5], 'found: nowhere');

  // the upstream's side
  const api = U.seen.find((s) => s.url === '/api?x=1');
  assert.ok(api, JSON.stringify(U.seen));
  assert.equal(api.headers.authorization, `Bearer ${SECRET}`, 'the injected header replaced the forged one');
  assert.equal(api.headers.host, `127.0.0.1:${U.port}`, 'Host is the granted host, not what the sandbox said');
  assert.equal(api.headers.connection, 'close');
  assert.equal(U.seen.find((s) => s.url === '/echo').headers.authorization, `Bearer ${SECRET}`);
  assert.equal(R.seen.length, 0, 'the rogue upstream got no request (nor the key)');
  const plain = P.seen.find((s) => s.url === '/plain');
  assert.ok(plain);
  assert.equal(plain.headers.authorization, undefined, 'a host without a grant is tunnelled untouched');
  assert.equal(plain.headers['x-api-key'], undefined);

  // the record: which credential, which lease, how many bytes; never the value
  const net = r.network;
  const inj = net.filter((a) => a.credential);
  assert.equal(inj.length, 2, `a credential is recorded where it was sent, not where it was refused: ${JSON.stringify(net)}`);
  for (const a of inj) {
    assert.equal(a.credential.secret, 'apitok');
    assert.equal(a.credential.header, 'Authorization');
    assert.match(a.credential.lease_id, /^[0-9a-f-]{36}$/);
    assert.equal(a.reason, 'allowed');
    assert.ok(a.bytes_sent > 0 && a.bytes_received > 0, JSON.stringify(a));
  }
  const rogue = net.find((a) => a.port === R.port);
  assert.equal(rogue.reason, 'tls_upstream_failed');
  assert.equal(rogue.credential, undefined, 'nothing was sent to the upstream that did not verify');
  assert.equal(rogue.bytes_sent, 0);
  assert.ok(!res.text.includes(SECRET), 'the value is nowhere in the answer');
  const receipt = await server.request('GET', `/v1/executions/${r.id}/receipt`, { key: server.keys.auditor });
  const leases = receipt.json.statement.credentials;
  assert.ok(JSON.stringify(leases).includes('"header"'), JSON.stringify(leases));
  assert.ok(!receipt.text.includes(SECRET));
  const audit = await server.request('GET', '/v1/audit/export?format=jsonl', { key: server.keys.auditor });
  assert.ok(!audit.text.includes(SECRET), 'the value is nowhere in the audit trail');
  assert.ok(audit.text.includes(inj[0].credential.lease_id), 'the injection is in the trail with its lease');
});

test('the control: with the secret in its environment, the same search finds it (env and memory)', async () => {
  await storeSecret();
  const res = await server.execute({ tool: 'envtool', code: `${SEARCH}\nsearch()\n` });
  assert.equal(res.json.status, 'completed', res.text);
  const lines = res.json.stdout.trim().split('\n');
  assert.equal(lines[0], 'searched files memory');
  assert.match(lines[1], /^found: .*env/);
  assert.match(lines[1], /memory/);
});

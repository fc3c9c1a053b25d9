// `toolcage images pull` against a real registry: Debian's docker-registry (the CNCF
// distribution server) on 127.0.0.1 over TLS (a test CA made here by openssl), with token
// authentication: its 401 names a token service (a small one in this file, over TLS too,
// issuing RS256 JWTs the registry trusts, only to user:password). podman pushes a busybox image built here;
// toolcage pulls it by tag and by digest, and the tool runs on it. Without credentials the
// pull is refused; a blob tampered with in the registry's storage is refused and nothing is
// registered; a download that stopped is resumed from what images/partial/ holds (a partial
// file of the wrong bytes makes the resumed blob fail its digest, which only a resume can
// cause; it is then discarded and the next pull succeeds).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import https from 'node:https';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setup, BIN, LABEL, imagesCli, sleep } from './harness.mjs';

// The ASan lane runs this file (the pull's C code meets the network there); the release lane
// runs images.test.mjs.
const SKIP = LABEL === 'release' ? 'pulls run in the ASan lane (the release lane runs images.test.mjs)' : false;

const execFileP = promisify(execFile);
const WORK = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-pull-'));
const BB = `localhost/toolcage-pull-${LABEL}-${process.pid}/busybox:1`;
const POLICY = path.join(WORK, 'policy.json');
const USER = 'puller';
const PASS = crypto.randomBytes(12).toString('hex');
let regPort, tokPort, registry, tokens, pushedDigest, REF;
const tokenRequests = [];

fs.writeFileSync(POLICY, JSON.stringify({
  version: 1,
  tools: {
    pulled: { description: 'a tool on a pulled image', language: 'shell', command: ['/bin/sh', '{code_file}'], code_file: 'main.sh', image: 'placeholder:1', network: 'none' },
  },
}));
const server = SKIP ? null : setup('images-pull', { policy: POLICY });
const STATE = () => path.join(server.stateDir, 'state');

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

const b64url = (b) => Buffer.from(b).toString('base64url');

before(async () => {
  if (SKIP) return;
  const ssl = (...a) => execFileP('openssl', a, { cwd: WORK });
  // the registry's TLS: a CA and a certificate for 127.0.0.1
  await ssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=toolcage test registry CA');
  await ssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'reg.key', '-out', 'reg.csr', '-subj', '/CN=127.0.0.1');
  fs.writeFileSync(path.join(WORK, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1\n');
  await ssl('x509', '-req', '-in', 'reg.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'reg.pem', '-days', '2', '-extfile', 'ext.cnf');
  // the token service's signing key, trusted by the registry (rootcertbundle)
  await ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'tok.key', '-out', 'tok.pem', '-days', '2', '-subj', '/CN=toolcage test token issuer');
  const tokKey = crypto.createPrivateKey(fs.readFileSync(path.join(WORK, 'tok.key')));
  const tokDer = new crypto.X509Certificate(fs.readFileSync(path.join(WORK, 'tok.pem'))).raw;

  tokPort = await freePort();
  regPort = await freePort();
  // over TLS too (a client sends its credentials there), with the registry's certificate
  tokens = https.createServer({ cert: fs.readFileSync(path.join(WORK, 'reg.pem')), key: fs.readFileSync(path.join(WORK, 'reg.key')) }, (req, res) => {
    const u = new URL(req.url, 'http://x');
    const auth = req.headers.authorization ?? '';
    const ok = auth === `Basic ${Buffer.from(`${USER}:${PASS}`).toString('base64')}`;
    tokenRequests.push({ scope: u.searchParams.get('scope'), service: u.searchParams.get('service'), ok });
    if (!ok) {
      res.writeHead(401, { 'Content-Type': 'application/json' });
      res.end('{"errors":[{"code":"UNAUTHORIZED"}]}');
      return;
    }
    const [, name, actions] = (u.searchParams.get('scope') ?? '').split(':');
    const now = Math.floor(Date.now() / 1000);
    const head = b64url(JSON.stringify({ typ: 'JWT', alg: 'RS256', x5c: [tokDer.toString('base64')] }));
    const body = b64url(JSON.stringify({
      iss: 'toolcage-test-issuer', sub: USER, aud: 'toolcage-test-registry', exp: now + 300, nbf: now - 10, iat: now,
      jti: crypto.randomBytes(8).toString('hex'), access: name ? [{ type: 'repository', name, actions: (actions ?? 'pull').split(',') }] : [],
    }));
    const sig = crypto.sign('sha256', Buffer.from(`${head}.${body}`), tokKey);
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ token: `${head}.${body}.${b64url(sig)}`, expires_in: 300 }));
  });
  await new Promise((r) => tokens.listen(tokPort, '127.0.0.1', r));

  fs.writeFileSync(path.join(WORK, 'registry.yml'), [
    'version: 0.1',
    'log: {level: info, accesslog: {disabled: false}}',
    `storage: {filesystem: {rootdirectory: ${WORK}/storage}, delete: {enabled: true}}`,
    `http: {addr: 127.0.0.1:${regPort}, tls: {certificate: ${WORK}/reg.pem, key: ${WORK}/reg.key}}`,
    'auth:',
    '  token:',
    `    realm: https://127.0.0.1:${tokPort}/token`,
    '    service: toolcage-test-registry',
    '    issuer: toolcage-test-issuer',
    `    rootcertbundle: ${WORK}/tok.pem`,
    '',
  ].join('\n'));
  const log = fs.openSync(path.join(WORK, 'registry.log'), 'a');
  registry = spawn('docker-registry', ['serve', path.join(WORK, 'registry.yml')], { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  for (let i = 0; ; i++) {
    const up = await new Promise((r) => { const s = net.connect(regPort, '127.0.0.1', () => { s.destroy(); r(true); }); s.on('error', () => r(false)); });
    if (up) break;
    assert.ok(i < 100, `the registry did not start: ${fs.readFileSync(path.join(WORK, 'registry.log'), 'utf8')}`);
    await sleep(100);
  }

  // a busybox image, pushed by podman (which speaks the token protocol itself)
  const root = path.join(WORK, 'root');
  fs.mkdirSync(path.join(root, 'bin'), { recursive: true });
  fs.mkdirSync(path.join(root, 'etc'));
  fs.copyFileSync('/bin/busybox', path.join(root, 'bin/busybox'));
  for (const c of ['sh', 'cat']) fs.symlinkSync('busybox', path.join(root, 'bin', c));
  fs.writeFileSync(path.join(root, 'etc/os-release'), 'NAME="pulled over the registry API"\n');
  await execFileP('tar', ['-C', root, '-cf', path.join(WORK, 'root.tar'), '.']);
  await execFileP('podman', ['import', '--change', 'ENV PATH=/bin', path.join(WORK, 'root.tar'), BB]);
  fs.mkdirSync(path.join(WORK, 'certs'));
  fs.copyFileSync(path.join(WORK, 'ca.pem'), path.join(WORK, 'certs/ca.crt'));
  REF = `127.0.0.1:${regPort}/team/busybox:1`;
  await execFileP('podman', ['push', '--cert-dir', path.join(WORK, 'certs'), '--creds', `${USER}:${PASS}`,
    '--digestfile', path.join(WORK, 'digest'), '--format', 'oci', BB, `docker://${REF}`], { timeout: 120_000 });
  pushedDigest = fs.readFileSync(path.join(WORK, 'digest'), 'utf8').trim();
  fs.writeFileSync(path.join(WORK, 'creds'), `${USER}:${PASS}\n`, { mode: 0o600 });
});

after(async () => {
  if (SKIP) return fs.rmSync(WORK, { recursive: true, force: true });
  registry?.kill('SIGKILL');
  await new Promise((r) => tokens?.close(r));
  await execFileP('podman', ['rmi', '-f', BB]).catch(() => {});
  fs.rmSync(WORK, { recursive: true, force: true });
});

function pull(args, state = STATE()) {
  return execFileP(BIN, ['images', 'pull', '--ca-file', path.join(WORK, 'ca.pem'), ...args],
    { env: { ...process.env, TOOLCAGE_STATE_DIR: state }, timeout: 120_000 });
}

async function pullFails(args, state) {
  try {
    await pull(args, state);
  } catch (e) {
    assert.equal(e.code, 1, `${e.stdout}${e.stderr}`);
    return e.stderr;
  }
  assert.fail(`pull ${args.join(' ')} succeeded`);
}

test('images pull: a pull with the registry\'s token auth gets the image podman pushed, verified; the tool runs on it', { skip: SKIP }, async () => {
  const { stdout } = await pull(['--credentials-file', path.join(WORK, 'creds'), REF]);
  assert.match(stdout, new RegExp(`^pulled ${REF.replace(/[.]/g, '\\.')} ${pushedDigest} \\(\\d+ bytes in 1 layers;`));
  // the token service was asked for pull access to the repository, with the credentials
  assert.ok(tokenRequests.some((t) => t.ok && t.scope === 'repository:team/busybox:pull' && t.service === 'toolcage-test-registry'), JSON.stringify(tokenRequests));
  const pol = JSON.parse(fs.readFileSync(POLICY, 'utf8'));
  pol.tools.pulled.image = `${REF}@${pushedDigest}`;
  fs.writeFileSync(POLICY, JSON.stringify(pol));
  const res = await server.request('POST', '/v1/admin/policy/reload', { key: server.keys.operator });
  assert.equal(res.status, 200, res.text);
  const r = (await server.execute({ tool: 'pulled', code: 'cat /etc/os-release' })).json;
  assert.equal(r.status, 'completed', JSON.stringify(r));
  assert.equal(r.stdout, 'NAME="pulled over the registry API"\n');
});

test('images pull: by digest; a digest the registry does not have, no credentials, an untrusted CA: refused', { skip: SKIP }, async () => {
  const fresh = fs.mkdtempSync(path.join(WORK, 'state-'));
  const { stdout } = await pull(['--credentials-file', path.join(WORK, 'creds'), `127.0.0.1:${regPort}/team/busybox@${pushedDigest}`], fresh);
  assert.match(stdout, new RegExp(`${pushedDigest}`));
  const other = `sha256:${'0'.repeat(64)}`;
  assert.match(await pullFails(['--credentials-file', path.join(WORK, 'creds'), `127.0.0.1:${regPort}/team/busybox@${other}`], fresh), /answered 404/);
  const empty = fs.mkdtempSync(path.join(WORK, 'state-'));
  assert.match(await pullFails([REF], empty), /token service answered 401/);
  try {
    await execFileP(BIN, ['images', 'pull', '--credentials-file', path.join(WORK, 'creds'), REF], { env: { ...process.env, TOOLCAGE_STATE_DIR: empty } });
    assert.fail('pulled over TLS from a CA nobody trusts');
  } catch (e) {
    assert.match(e.stderr, /certificate|SSL/i);
  }
  const idx = JSON.parse((await execFileP(BIN, ['images', 'ls', '--json'], { env: { ...process.env, TOOLCAGE_STATE_DIR: empty } })).stdout);
  assert.deepEqual(idx.images, []);
});

function registryBlob(digest) {
  const hex = digest.slice(7);
  return path.join(WORK, 'storage/docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data');
}

async function layerDigest() {
  const idx = JSON.parse((await imagesCli(server, ['ls', '--json'])).stdout);
  return idx.images.find((i) => i.digest === pushedDigest).layers[0];
}

test('images pull: a stopped download resumes from images/partial/; wrong partial bytes fail the digest, are dropped, and the next pull succeeds', { skip: SKIP }, async () => {
  const layer = await layerDigest();
  const data = fs.readFileSync(registryBlob(layer));
  const fresh = fs.mkdtempSync(path.join(WORK, 'state-'));
  const partial = path.join(fresh, 'images/partial');
  fs.mkdirSync(partial, { recursive: true, mode: 0o700 });
  // half of it, right: the pull asks for the rest and gets the image
  fs.writeFileSync(path.join(partial, layer.slice(7)), data.subarray(0, data.length >> 1));
  await pull(['--credentials-file', path.join(WORK, 'creds'), REF], fresh);
  assert.ok(!fs.existsSync(path.join(partial, layer.slice(7))), 'the partial file stayed');
  // half of it, wrong: only a resumed download can end with the wrong digest
  const fresh2 = fs.mkdtempSync(path.join(WORK, 'state-'));
  fs.mkdirSync(path.join(fresh2, 'images/partial'), { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(fresh2, 'images/partial', layer.slice(7)), Buffer.alloc(data.length >> 1, 0x41));
  assert.match(await pullFails(['--credentials-file', path.join(WORK, 'creds'), REF], fresh2), /hashing to/);
  assert.ok(!fs.existsSync(path.join(fresh2, 'images/partial', layer.slice(7))), 'the bad partial file was kept');
  await pull(['--credentials-file', path.join(WORK, 'creds'), REF], fresh2);
});

test('images pull: a blob tampered with in the registry is refused; nothing is registered', { skip: SKIP }, async () => {
  const layer = await layerDigest();
  const file = registryBlob(layer);
  const data = fs.readFileSync(file);
  const bad = Buffer.from(data);
  bad[bad.length >> 1] ^= 0xff;
  fs.writeFileSync(file, bad);
  try {
    const fresh = fs.mkdtempSync(path.join(WORK, 'state-'));
    assert.match(await pullFails(['--credentials-file', path.join(WORK, 'creds'), REF], fresh), new RegExp(`blob ${layer}: the registry sent content hashing to`));
    const idx = JSON.parse((await execFileP(BIN, ['images', 'ls', '--json'], { env: { ...process.env, TOOLCAGE_STATE_DIR: fresh } })).stdout);
    assert.deepEqual(idx.images, []);
    assert.deepEqual(fs.readdirSync(path.join(fresh, 'images/roots')), []);
    assert.ok(!fs.existsSync(path.join(fresh, 'images/blobs/sha256', layer.slice(7))));
  } finally {
    fs.writeFileSync(file, data);
  }
});

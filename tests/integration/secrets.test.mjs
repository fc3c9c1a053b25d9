// Credential broker, sealed secrets and leases: values never leave (responses, logs, audit
// rows, the database), are redacted from sandbox output in every encoding, reach the
// sandbox as env vars and /run/secrets files for one execution, and are refused when a
// ciphertext was moved or altered, or a lease expired or was revoked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { setup, assertProblem, UUID_RE } from './harness.mjs';
import { writePolicy, encodings, assertAbsent, pgDump } from './secrets-helpers.mjs';

const server = setup('secrets', { policy: writePolicy(), freshDatabase: true });

// Characters that encode differently in URL, base64 and hex forms.
const SECRET = `tc-key/${crypto.randomBytes(12).toString('hex')}+=!`;
const CERT = `CERTDATA-${crypto.randomBytes(16).toString('hex')}`;
const OTHERS = []; // every other value stored by this file
const bodies = []; // every response body, scanned at the end

async function req(method, path, opts = {}) {
  const res = await server.request(method, path, opts);
  bodies.push(res.text);
  return res;
}

async function put(name, value, tools, extra = {}) {
  if (value !== SECRET && value !== CERT) OTHERS.push(value);
  const res = await req('PUT', `/v1/secrets/${name}`, {
    key: server.keys.admin,
    json: { value, allowed_tools: tools, ...extra },
  });
  assert.ok(res.status === 201 || res.status === 200, res.text);
  return res.json;
}

async function execute(tool, code, expect = 200) {
  const res = await req('POST', '/v1/execute', { key: server.keys.agent, json: { tool, code } });
  assert.equal(res.status, expect, res.text.slice(0, 800));
  return res;
}

const sql = async (q) => (await server.sql(q)).trim();
const tenantSql = () => `(SELECT id FROM tenants WHERE name = '${server.tenants.a}')`;

test('admin stores a secret; values are write-only; other roles may not', async () => {
  const meta = await put('api-key', SECRET, ['leaky'], { description: 'downstream API key' });
  assert.equal(meta.name, 'api-key');
  assert.deepEqual(meta.allowed_tools, ['leaky']);
  assert.equal(meta.max_ttl_seconds, 3600);
  assert.match(meta.key_id, /^[0-9a-f]{16}$/);
  assert.equal(meta.value, undefined);
  await put('ca-cert', CERT, ['leaky']);

  const again = await req('PUT', '/v1/secrets/api-key', {
    key: server.keys.admin, json: { value: SECRET, allowed_tools: ['leaky'] } });
  assert.equal(again.status, 200, 'a second PUT replaces');

  const one = await req('GET', '/v1/secrets/api-key', { key: server.keys.admin });
  assert.equal(one.status, 200);
  assert.equal(one.json.description, '', 'replaced without a description');
  const list = await req('GET', '/v1/secrets', { key: server.keys.admin });
  assert.deepEqual(list.json.secrets.map((s) => s.name), ['api-key', 'ca-cert']);
  for (const role of ['agent', 'reviewer', 'auditor']) {
    assertProblem(await req('GET', '/v1/secrets', { key: server.keys[role] }), 403, 'forbidden');
    assertProblem(await req('PUT', '/v1/secrets/x1', { key: server.keys[role], json: { value: 'abcdef', allowed_tools: [] } }), 403, 'forbidden');
  }
  // another tenant sees nothing
  const other = await req('GET', '/v1/secrets', { key: server.keys.otherAdmin });
  assert.deepEqual(other.json.secrets, []);
  assertProblem(await req('GET', '/v1/secrets/api-key', { key: server.keys.otherAdmin }), 404, 'not-found');
});

test('bad bodies are refused without echoing the value', async () => {
  // An invalid escape: the parser error must not quote the text around it.
  const bad = await req('PUT', '/v1/secrets/api-key', {
    key: server.keys.admin, body: `{"value": "${SECRET}\\q", "allowed_tools": []}` });
  assertProblem(bad, 400, 'invalid-json');
  const short = await req('PUT', '/v1/secrets/tiny', { key: server.keys.admin, json: { value: 'abc', allowed_tools: [] } });
  assertProblem(short, 400, 'validation');
  const name = await req('PUT', '/v1/secrets/.hidden', { key: server.keys.admin, json: { value: 'abcdef', allowed_tools: [] } });
  assertProblem(name, 400, 'validation');
  const tools = await req('PUT', '/v1/secrets/x2', { key: server.keys.admin, json: { value: 'abcdef', allowed_tools: ['Bad Tool'] } });
  assertProblem(tools, 400, 'validation');
  const unknown = await req('PUT', '/v1/secrets/x2', { key: server.keys.admin, json: { value: 'abcdef', allowed_tools: [], extra: 1 } });
  assertProblem(unknown, 400, 'validation');
});

let leakyResult;

test('a leased secret reaches the sandbox and is redacted in every encoding', async () => {
  const code = [
    'printf "%s\\n" "$API_KEY"',
    'printf "%s" "$API_KEY" | base64 -w0; echo',
    'printf "%s" "$API_KEY" | base64 -w0 | tr "+/" "-_" | tr -d "="; echo',
    'printf "%s" "$API_KEY" | xxd -p | tr -d "\\n"; echo',
    'printf "%s" "$API_KEY" | xxd -p -u | tr -d "\\n"; echo',
    '/usr/bin/python3 -c \'import os, urllib.parse; print(urllib.parse.quote(os.environ["API_KEY"], safe=""))\'',
    // split across two writes, some time apart
    'printf "%s" "${API_KEY:0:9}"; sleep 0.3; printf "%s\\n" "${API_KEY:9}"',
    'echo "$API_KEY" >&2',
    'cat /run/secrets/ca.pem; echo',
    'base64 -w0 /run/secrets/ca.pem; echo',
    'stat -c "%a %u %F %n" /run/secrets/ca.pem /run/secrets',
    'touch /run/secrets/new 2>/dev/null && echo writable || echo read-only',
    'printf "%s" "$API_KEY" | sha256sum | cut -c1-64',
    'printf "%s" "$(cat /run/secrets/ca.pem)" | sha256sum | cut -c1-64',
    'echo "prefix ${TOOLCAGE_TOKEN:0:10}"',
  ].join('\n');
  const { json: r } = await execute('leaky', code);
  leakyResult = r;
  assert.equal(r.status, 'completed', JSON.stringify(r).slice(0, 1500));
  assertAbsent(r.stdout + r.stderr, [SECRET, CERT], 'execution output');
  const lines = r.stdout.split('\n');
  // raw, base64, base64url, hex, HEX, url, split: every one replaced
  for (let i = 0; i < 7; i++) assert.match(lines[i], /^\[REDACTED:secret\]$/, `line ${i}: ${lines[i]}`);
  assert.match(r.stderr, /\[REDACTED:secret\]/);
  assert.equal(lines[7], '[REDACTED:secret]', 'file content');
  assert.equal(lines[8], '[REDACTED:secret]', 'file content, base64');
  assert.equal(lines[9], '400 1000 regular file /run/secrets/ca.pem');
  assert.equal(lines[10], '500 1000 directory /run/secrets');
  assert.equal(lines[11], 'read-only');
  // the values inside the sandbox were exactly the stored ones
  assert.equal(lines[12], crypto.createHash('sha256').update(SECRET).digest('hex'));
  assert.equal(lines[13], crypto.createHash('sha256').update(CERT).digest('hex'));
  assert.equal(lines[14], 'prefix v4.public.');
  assert.ok(r.redactions.secret >= 10, JSON.stringify(r.redactions));

  // the result lists what was leased, never the values
  assert.equal(r.credentials.leases.length, 2);
  for (const l of r.credentials.leases) assert.match(l.lease_id, UUID_RE);
  assert.deepEqual(r.credentials.leases.map((l) => [l.secret, l.as, l.name]),
    [['api-key', 'env', 'API_KEY'], ['ca-cert', 'file', 'ca.pem']]);
  assert.equal(r.credentials.tokens.length, 1);
  assert.equal(r.credentials.tokens[0].env, 'TOOLCAGE_TOKEN');
  assert.equal(r.credentials.tokens[0].audience, 'https://api.example.com');

  // everything was revoked when the execution ended
  const leases = await sql(`SELECT count(*) FILTER (WHERE revoked_at IS NULL), count(*),
    count(*) FILTER (WHERE used_at IS NOT NULL) FROM credential_leases WHERE execution_id = '${r.id}'`);
  assert.equal(leases, '0|2|2');
  const tokens = await sql(`SELECT count(*) FILTER (WHERE revoked_at IS NULL), count(*)
    FROM credential_tokens WHERE execution_id = '${r.id}'`);
  assert.equal(tokens, '0|1');
  // the stored execution (GET) carries the same, redacted
  const got = await req('GET', `/v1/executions/${r.id}`, { key: server.keys.agent });
  assert.equal(got.status, 200);
  assertAbsent(got.text, [SECRET, CERT], 'GET /v1/executions');

  // issue, use and revoke are audited; the value only as its keyed hash
  const actions = (await sql(`SELECT action FROM audit_log WHERE record->>'execution_id' = '${r.id}' ORDER BY seq`)).split('\n');
  for (const a of ['execute', 'credential.lease.issue', 'credential.token.issue', 'credential.lease.use',
    'credential.lease.revoke', 'credential.token.revoke', 'execution.complete']) {
    assert.ok(actions.includes(a), `no ${a} record: ${actions}`);
  }
  const hash = await req('POST', '/v1/audit/hash', { key: server.keys.auditor, json: { value: SECRET } });
  assert.equal(hash.status, 200);
  assert.match(hash.json.hash, /^[0-9a-f]{64}$/);
  const uses = await sql(`SELECT count(*) FROM audit_log WHERE record->>'value_hash' = '${hash.json.hash}'
    AND action IN ('secret.put', 'credential.lease.use')`);
  assert.ok(Number(uses) >= 3, `value_hash found ${uses} times`); // two puts and one use
  assertProblem(await req('POST', '/v1/audit/hash', { key: server.keys.agent, json: { value: SECRET } }), 403, 'forbidden');
});

test('a secret not stored, not allowed for the tool, or leased too long is refused with 422', async () => {
  let p = assertProblem(await execute('missing', 'echo hi', 422), 422, 'credential-unavailable');
  assert.match(p.detail, /never-stored/);
  p = assertProblem(await execute('other', 'echo hi', 422), 422, 'credential-unavailable');
  assert.match(p.detail, /not allowed for tool 'other'/);
  await put('brief', `brief-${crypto.randomBytes(8).toString('hex')}`, ['longrun'], { max_ttl_seconds: 5 });
  p = assertProblem(await execute('longrun', 'echo hi', 422), 422, 'credential-unavailable');
  assert.match(p.detail, /max_ttl_seconds 5/);
  // refusals are audited and nothing stays leased
  const open = await sql(`SELECT count(*) FROM credential_leases WHERE revoked_at IS NULL`);
  assert.equal(open, '0');
  const refused = await sql(`SELECT count(*) FROM audit_log WHERE action = 'credential.lease.refused'`);
  assert.ok(Number(refused) >= 3);
});

test('a ciphertext moved to another row, or altered, does not open', async () => {
  await put('victim', `victim-${crypto.randomBytes(8).toString('hex')}`, ['tamper']);
  await put('donor', `donor-${crypto.randomBytes(8).toString('hex')}`, ['tamper']);
  const { json: ok } = await execute('tamper', 'printf "%s" "$V" | wc -c');
  assert.equal(ok.stdout.trim(), String('victim-'.length + 16));

  // move: the donor's ciphertext, nonce and key id into the victim's row
  await server.sql(`UPDATE secrets v SET ciphertext = d.ciphertext, nonce = d.nonce, key_id = d.key_id
    FROM secrets d WHERE v.tenant_id = ${tenantSql()} AND d.tenant_id = v.tenant_id
    AND v.name = 'victim' AND d.name = 'donor'`);
  let p = assertProblem(await execute('tamper', 'echo ran', 422), 422, 'credential-unavailable');
  assert.match(p.detail, /cannot be opened/);

  // a ciphertext moved to another tenant's row of the same name does not open either
  await req('PUT', '/v1/secrets/victim', { key: server.keys.otherAdmin, json: { value: 'other-tenant-value', allowed_tools: ['tamper'] } });
  OTHERS.push('other-tenant-value');
  await put('victim', `victim-${crypto.randomBytes(8).toString('hex')}`, ['tamper']);
  await server.sql(`UPDATE secrets v SET ciphertext = o.ciphertext, nonce = o.nonce
    FROM secrets o WHERE v.tenant_id = ${tenantSql()} AND o.tenant_id <> v.tenant_id
    AND v.name = 'victim' AND o.name = 'victim'`);
  p = assertProblem(await execute('tamper', 'echo ran', 422), 422, 'credential-unavailable');
  assert.match(p.detail, /cannot be opened/);

  // alter one bit of the ciphertext
  await put('victim', `victim-${crypto.randomBytes(8).toString('hex')}`, ['tamper']);
  await execute('tamper', 'true');
  await server.sql(`UPDATE secrets SET ciphertext = set_byte(ciphertext, 3, get_byte(ciphertext, 3) # 1)
    WHERE tenant_id = ${tenantSql()} AND name = 'victim'`);
  p = assertProblem(await execute('tamper', 'echo ran', 422), 422, 'credential-unavailable');
  assert.match(p.detail, /cannot be opened/);
  const ran = await sql(`SELECT count(*) FROM executions WHERE tool = 'tamper' AND status = 'completed'`);
  assert.equal(ran, '2', 'the refused executions did not run');
});

test('an expired or revoked lease is never handed out', async () => {
  await put('short-lived', `short-${crypto.randomBytes(8).toString('hex')}`, ['expiring']);
  await put('revoked-one', `revoked-${crypto.randomBytes(8).toString('hex')}`, ['revoking']);
  // As the database superuser: every lease of these secrets is born expired / revoked, as if
  // time had passed (or an operator had revoked it) between issue and hand-out.
  await server.sql(`
    CREATE FUNCTION test_spoil_lease() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.secret_name = 'short-lived' THEN NEW.expires_at := now() - interval '1 second'; END IF;
      IF NEW.secret_name = 'revoked-one' THEN NEW.revoked_at := now(); NEW.revoke_reason := 'test'; END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER test_spoil_lease BEFORE INSERT ON credential_leases
      FOR EACH ROW EXECUTE FUNCTION test_spoil_lease();`);
  try {
    let p = assertProblem(await execute('expiring', 'echo "$S"', 422), 422, 'credential-unavailable');
    assert.match(p.detail, /expired or was revoked/);
    p = assertProblem(await execute('revoking', 'echo "$S"', 422), 422, 'credential-unavailable');
    assert.match(p.detail, /expired or was revoked/);
    const used = await sql(`SELECT count(*) FROM credential_leases WHERE secret_name IN ('short-lived', 'revoked-one') AND used_at IS NOT NULL`);
    assert.equal(used, '0');
  } finally {
    await server.sql('DROP TRIGGER test_spoil_lease ON credential_leases; DROP FUNCTION test_spoil_lease()');
  }
  // the same secret works once the lease is sound
  const { json: r } = await execute('expiring', 'echo "len=${#S}"');
  assert.equal(r.stdout, `len=${'short-'.length + 16}\n`);
});

test('deleting a secret: 204, then 404, and executions that need it are refused', async () => {
  const value = `gone-${crypto.randomBytes(8).toString('hex')}`;
  await put('gone-soon', value, ['*']);
  // While stored, the tool that needs it runs and gets it.
  const { json: before } = await execute('deleted', 'printf "%s" "$GONE" | sha256sum | cut -c1-64');
  assert.equal(before.status, 'completed', JSON.stringify(before).slice(0, 800));
  assert.equal(before.stdout.trim(), crypto.createHash('sha256').update(value).digest('hex'));
  const del = await req('DELETE', '/v1/secrets/gone-soon', { key: server.keys.admin });
  assert.equal(del.status, 204);
  assertProblem(await req('GET', '/v1/secrets/gone-soon', { key: server.keys.admin }), 404, 'not-found');
  assertProblem(await req('DELETE', '/v1/secrets/gone-soon', { key: server.keys.admin }), 404, 'not-found');

  // After the delete, the same tool is refused before anything runs.
  const marker = `ran-${crypto.randomBytes(6).toString('hex')}`;
  const p = assertProblem(await execute('deleted', `echo ${marker}; echo "$GONE"`, 422), 422, 'credential-unavailable');
  assert.match(p.detail, /secret 'gone-soon' is not stored/);
  assert.ok(!JSON.stringify(p).includes(marker), 'no output in the refusal');
  const rows = (await sql(`SELECT status || '|' || length(coalesce(result->>'stdout', '')) FROM executions
    WHERE tenant_id = ${tenantSql()} AND tool = 'deleted' ORDER BY created_at`)).split('\n');
  assert.deepEqual(rows, ['completed|65', 'error|0'], 'the refused execution is recorded as not run, with no output');
  const leases = await sql(`SELECT count(*) FROM credential_leases WHERE secret_name = 'gone-soon'
    AND tenant_id = ${tenantSql()} AND revoked_at IS NULL`);
  assert.equal(leases, '0', 'nothing stays leased');
  const refused = await sql(`SELECT count(*) FROM audit_log WHERE action = 'credential.lease.refused'
    AND record->>'tool' = 'deleted' AND record->>'reason' LIKE '%gone-soon%'`);
  assert.equal(refused, '1');
});

test('no secret value is in any response, the server log, the audit rows or pg_dump', async () => {
  const all = [SECRET, CERT, ...OTHERS];
  assertAbsent(bodies.join('\n'), all, 'API responses');
  const log = fs.readFileSync(server.logPath, 'utf8');
  assert.ok(log.length > 1000, 'the server log has content');
  assertAbsent(log, all, `server log ${server.logPath}`);
  const audit = await server.sql('SELECT * FROM audit_log');
  assert.ok(audit.includes('credential.lease.use'));
  assertAbsent(audit, all, 'audit_log');
  const dump = await pgDump(server);
  assert.ok(dump.includes('credential_leases') && dump.includes('secrets'), 'pg_dump has the tables');
  assertAbsent(dump, all, 'pg_dump');
  // and the ciphertexts are there (so the scan looked at the right database)
  const n = await sql(`SELECT count(*) FROM secrets WHERE tenant_id = ${tenantSql()}`);
  assert.ok(Number(n) >= 6);
  assert.ok(leakyResult, 'the leak test ran');
});

test('encodings() covers the forms the redactor promises', () => {
  const e = encodings('a/b+c');
  assert.deepEqual(Object.keys(e), ['raw', 'base64', 'base64url', 'hex', 'HEX', 'url']);
  assert.equal(e.url, 'a%2Fb%2Bc');
});

// Master-key rotation: servers restarted with the new key as current and the old one as
// previous keep opening every secret; `toolcage secrets rotate-master` re-seals them all;
// the old key can then be dropped; tokens signed before the rotation still verify.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup } from './harness.mjs';
import { writePolicy, restart, newKeyFile, verifyOffline, AUDIENCE } from './secrets-helpers.mjs';

const server = setup('secrets-rotation', { policy: writePolicy(), freshDatabase: true });

const VALUES = {
  r1: `rot-one-${crypto.randomBytes(10).toString('hex')}`,
  r2: `rot-two-${crypto.randomBytes(10).toString('hex')}`,
  r3: `rot-three-${crypto.randomBytes(10).toString('hex')}`,
};
const sha = (v) => crypto.createHash('sha256').update(v).digest('hex');
const CODE = [
  'printf "%s" "$R1" | sha256sum | cut -c1-64',
  'printf "%s" "$R2" | sha256sum | cut -c1-64',
  'sha256sum /run/secrets/r3 | cut -c1-64',
].join('\n');

async function readAll(label) {
  const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'rotate', code: CODE } });
  assert.equal(res.status, 200, `${label}: ${res.text.slice(0, 600)}`);
  assert.equal(res.json.status, 'completed', `${label}: ${res.text.slice(0, 600)}`);
  assert.deepEqual(res.json.stdout.trim().split('\n'), [sha(VALUES.r1), sha(VALUES.r2), sha(VALUES.r3)], label);
}

async function keyIds() {
  const res = await server.request('GET', '/v1/secrets', { key: server.keys.admin });
  assert.equal(res.status, 200);
  return [...new Set(res.json.secrets.map((s) => s.key_id))];
}

test('rotation keeps every secret readable, without downtime, and old tokens verify', async () => {
  for (const [name, value] of Object.entries(VALUES)) {
    const res = await server.request('PUT', `/v1/secrets/${name}`, { key: server.keys.admin, json: { value, allowed_tools: ['rotate'] } });
    assert.equal(res.status, 201, res.text);
  }
  await readAll('before');
  const [k1] = await keyIds();
  const tok = await server.request('POST', '/v1/credentials', { key: server.keys.agent, json: { tool: 'leaky', audience: AUDIENCE } });
  assert.equal(tok.status, 201);
  const kid1 = tok.json.kid;

  // 1. new key file; 2. restart with it as current and the old one as previous
  const oldKey = server.masterKey;
  const newKey = newKeyFile(server, 'master-2.key');
  await restart(server, { TOOLCAGE_MASTER_KEY_FILE: newKey, TOOLCAGE_PREVIOUS_MASTER_KEY_FILES: oldKey });
  await readAll('new current, old previous, nothing re-sealed yet');
  assert.deepEqual(await keyIds(), [k1]);
  // a secret written now is sealed under the new key
  const put = await server.request('PUT', '/v1/secrets/r2', { key: server.keys.admin, json: { value: VALUES.r2, allowed_tools: ['rotate'] } });
  assert.equal(put.status, 200);
  assert.notEqual(put.json.key_id, k1);
  const k2 = put.json.key_id;
  await readAll('mixed keys');

  // 3. re-seal what is left, while the server runs
  const env = { TOOLCAGE_MASTER_KEY_FILE: newKey, TOOLCAGE_PREVIOUS_MASTER_KEY_FILES: oldKey };
  const { stdout } = await server.cli(['secrets', 'rotate-master'], env);
  assert.match(stdout, new RegExp(`re-sealed 2 secret\\(s\\) under master key ${k2}; 0 could not`));
  assert.deepEqual(await keyIds(), [k2]);
  await readAll('all re-sealed, old key still configured');

  // 4. drop the old key
  await restart(server, { TOOLCAGE_MASTER_KEY_FILE: newKey });
  await readAll('old key dropped');
  const again = await server.cli(['secrets', 'rotate-master'], { TOOLCAGE_MASTER_KEY_FILE: newKey });
  assert.match(again.stdout, /re-sealed 0 secret\(s\)/);

  // tokens: the old one still verifies (offline and online); new ones use the new key
  const published = (await server.request('GET', '/v1/credentials/keys')).json;
  assert.equal(published.keys[0].current, true);
  assert.notEqual(published.keys[0].kid, kid1);
  assert.ok(published.keys.some((k) => k.kid === kid1 && !k.current), 'the old key is still published');
  verifyOffline(tok.json.token, published, { audience: AUDIENCE });
  const intro = await server.request('POST', '/v1/credentials/introspect', { key: server.keys.agent, json: { token: tok.json.token } });
  assert.equal(intro.json.active, true);
  const tok2 = await server.request('POST', '/v1/credentials', { key: server.keys.agent, json: { tool: 'leaky', audience: AUDIENCE } });
  assert.equal(tok2.json.kid, published.keys[0].kid);

  // the audit trail still verifies across the rotation, and records each re-seal
  const v = await server.request('GET', '/v1/audit/verify', { key: server.keys.auditor });
  assert.equal(v.status, 200, v.text);
  assert.equal(v.json.ok, true, v.text);
  const reseals = (await server.sql("SELECT count(*) FROM audit_log WHERE action = 'secret.reseal'")).trim();
  assert.equal(reseals, '2');
});

test('rotate-master --new-key-file re-seals under a key no server uses yet', async () => {
  const current = server.serveEnv.TOOLCAGE_MASTER_KEY_FILE;
  const third = newKeyFile(server, 'master-3.key');
  const { stdout } = await server.cli(['secrets', 'rotate-master', '--new-key-file', third], { TOOLCAGE_MASTER_KEY_FILE: current });
  assert.match(stdout, /re-sealed 3 secret\(s\)/);
  await restart(server, { TOOLCAGE_MASTER_KEY_FILE: third, TOOLCAGE_PREVIOUS_MASTER_KEY_FILES: current });
  await readAll('third key');
  // a server holding only a key that sealed nothing refuses, and says why
  await restart(server, { TOOLCAGE_MASTER_KEY_FILE: current });
  const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'rotate', code: 'true' } });
  assert.equal(res.status, 422, res.text);
  assert.match(res.json.detail, /sealed under master key [0-9a-f]{16}, which this server does not hold/);
  await restart(server, { TOOLCAGE_MASTER_KEY_FILE: third });
  await readAll('third key alone');
});

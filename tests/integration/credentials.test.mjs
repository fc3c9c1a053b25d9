// Scoped tokens: PASETO v4.public issued per request and per execution, verified offline with
// the published keys, refused for a wrong audience or after expiry, capped by the policy's
// TTL, introspected online (tenant-scoped, honouring revocation) and revoked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setup, assertProblem, createKey, UUID_RE, sleep } from './harness.mjs';
import { writePolicy, verifyOffline, AUDIENCE } from './secrets-helpers.mjs';

const server = setup('credentials', { policy: writePolicy() });

async function keys() {
  const res = await server.request('GET', '/v1/credentials/keys'); // no API key: public
  assert.equal(res.status, 200, res.text);
  return res.json;
}

async function issue(json, key = server.keys.agent, expect = 201) {
  const res = await server.request('POST', '/v1/credentials', { key, json });
  assert.equal(res.status, expect, res.text);
  return res;
}

async function introspect(token, extra = {}, key = server.keys.reviewer) {
  const res = await server.request('POST', '/v1/credentials/introspect', { key, json: { token, ...extra } });
  assert.equal(res.status, 200, res.text);
  return res.json;
}

test('published keys: public, current first, 32-byte Ed25519', async () => {
  const k = await keys();
  assert.ok(k.keys.length >= 1);
  assert.equal(k.keys[0].current, true);
  assert.match(k.keys[0].kid, /^[0-9a-f]{16}$/);
  assert.equal(Buffer.from(k.keys[0].x, 'base64url').length, 32);
  assert.equal(k.keys.filter((x) => x.current).length, 1);
});

test('a token verifies offline with the published key; wrong audience, expiry and tampering fail', async () => {
  const { json: t } = await issue({ tool: 'leaky', audience: AUDIENCE });
  assert.match(t.token, /^v4\.public\./);
  assert.match(t.token_id, UUID_RE);
  assert.equal(t.scope, 'deploy:read');
  assert.equal(t.execution_id, null);
  const life = Date.parse(t.expires_at) - Date.parse(t.issued_at);
  assert.equal(life, 300_000, 'default TTL is the policy\'s');
  const published = await keys();
  const claims = verifyOffline(t.token, published, { audience: AUDIENCE });
  assert.equal(claims.iss, 'toolcage');
  assert.equal(claims.aud, AUDIENCE);
  assert.equal(claims.jti, t.token_id);
  assert.equal(claims.tool, 'leaky');
  assert.equal(claims.scope, 'deploy:read');
  assert.match(claims.sub, UUID_RE);
  assert.equal(claims.exp, t.expires_at);
  assert.throws(() => verifyOffline(t.token, published, { audience: 'https://evil.example.com' }), /wrong audience/);
  assert.throws(() => verifyOffline(t.token, published, { audience: AUDIENCE, now: Date.parse(t.expires_at) + 1000 }), /expired/);
  // change one claim byte: the signature no longer verifies
  const [v, p, body, foot] = t.token.split('.');
  const raw = Buffer.from(body, 'base64url');
  raw[raw.indexOf('deploy:read') + 7] ^= 0x01; // deploy:read -> deploy:sead
  const forged = [v, p, raw.toString('base64url'), foot].join('.');
  assert.throws(() => verifyOffline(forged, published, { audience: AUDIENCE }), /bad signature/);
  assert.equal((await introspect(forged)).active, false);
  // another key: unknown kid
  assert.throws(() => verifyOffline(t.token, { keys: [] }), /unknown kid/);
});

test('introspection: active with claims; inactive for a wrong audience, another tenant, garbage', async () => {
  const { json: t } = await issue({ tool: 'leaky', audience: AUDIENCE, ttl_seconds: 60 });
  const a = await introspect(t.token);
  assert.equal(a.active, true);
  assert.equal(a.token_id, t.token_id);
  assert.equal(a.aud, AUDIENCE);
  assert.equal(a.tool, 'leaky');
  assert.equal((await introspect(t.token, { audience: AUDIENCE }, server.keys.agent)).active, true);
  assert.deepEqual(await introspect(t.token, { audience: 'https://evil.example.com' }), { active: false });
  assert.deepEqual(await introspect(t.token, {}, server.keys.otherAgent), { active: false });
  assert.deepEqual(await introspect('v4.public.not-a-token'), { active: false });
  assert.deepEqual(await introspect('garbage'), { active: false });
  const noAuth = await server.request('POST', '/v1/credentials/introspect', { json: { token: t.token } });
  assertProblem(noAuth, 401, 'unauthorized');
});

test('an expired token is inactive', async () => {
  // 2 s: the first introspection must come within the token's life even on a loaded machine;
  // the sleep outlasts what is left of it
  const { json: t } = await issue({ tool: 'tokens', audience: 'https://other.example.com', ttl_seconds: 2 });
  assert.equal(Date.parse(t.expires_at) - Date.parse(t.issued_at), 2000, 'lives its TTL to the millisecond');
  assert.equal((await introspect(t.token)).active, true);
  await sleep(2100);
  assert.deepEqual(await introspect(t.token), { active: false });
  const published = await keys();
  assert.throws(() => verifyOffline(t.token, published), /expired/);
});

test('TTL above the policy is 422; no grant for the audience is 422; unknown tool 404', async () => {
  let res = await issue({ tool: 'leaky', audience: AUDIENCE, ttl_seconds: 301 }, server.keys.agent, 422);
  assertProblem(res, 422, 'limit-exceeds-policy');
  res = await issue({ tool: 'leaky', audience: 'https://nope.example.com' }, server.keys.agent, 422);
  assertProblem(res, 422, 'credential-unavailable');
  res = await issue({ tool: 'leaky', audience: AUDIENCE, scope: 'deploy:write' }, server.keys.agent, 422);
  assertProblem(res, 422, 'credential-unavailable');
  res = await issue({ tool: 'nosuch', audience: AUDIENCE }, server.keys.agent, 404);
  assertProblem(res, 404, 'unknown-tool');
  res = await issue({ tool: 'leaky' }, server.keys.agent, 400);
  assertProblem(res, 400, 'validation');
  for (const role of ['reviewer', 'auditor']) {
    assertProblem(await server.request('POST', '/v1/credentials', { key: server.keys[role], json: { tool: 'leaky', audience: AUDIENCE } }), 403, 'forbidden');
  }
});

test('revocation: by the issuing key or an admin, not another agent; introspection honours it', async () => {
  const { json: t } = await issue({ tool: 'leaky', audience: AUDIENCE });
  const agent2 = await createKey(server.tenants.a, 'agent', server.env);
  assertProblem(await server.request('POST', `/v1/credentials/${t.token_id}/revoke`, { key: agent2 }), 403, 'forbidden');
  assertProblem(await server.request('POST', `/v1/credentials/${t.token_id}/revoke`, { key: server.keys.otherAdmin }), 404, 'not-found');
  assert.equal((await introspect(t.token)).active, true);
  const r = await server.request('POST', `/v1/credentials/${t.token_id}/revoke`, { key: server.keys.agent });
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.token_id, t.token_id);
  assert.deepEqual(await introspect(t.token), { active: false });
  const again = await server.request('POST', `/v1/credentials/${t.token_id}/revoke`, { key: server.keys.admin });
  assert.equal(again.status, 200, 'idempotent');
  assert.equal(again.json.revoked_at, r.json.revoked_at);
  // the signature still verifies offline: revocation is an online property (documented)
  verifyOffline(t.token, await keys(), { audience: AUDIENCE });
});

test('an execution gets its tokens in the environment; they die with it', async () => {
  const res = await server.request('POST', '/v1/execute', {
    key: server.keys.agent,
    json: { tool: 'tokens', code: 'echo "${#TOOLCAGE_TOKEN} ${#TOOLCAGE_TOKEN_1}"; printf "%s" "$TOOLCAGE_TOKEN" | base64 -w0; echo' },
  });
  assert.equal(res.status, 200, res.text);
  const r = res.json;
  assert.equal(r.status, 'completed', res.text);
  const [lens, b64] = r.stdout.split('\n');
  assert.match(lens, /^\d{3,} \d{3,}$/);
  assert.equal(b64, '[REDACTED:secret]');
  assert.deepEqual(r.credentials.tokens.map((t) => [t.env, t.audience]),
    [['TOOLCAGE_TOKEN', AUDIENCE], ['TOOLCAGE_TOKEN_1', 'https://other.example.com']]);
  const ids = r.credentials.tokens.map((t) => `'${t.token_id}'`).join(',');
  const open = (await server.sql(`SELECT count(*) FROM credential_tokens WHERE id IN (${ids}) AND revoked_at IS NULL`)).trim();
  assert.equal(open, '0');
  const claims = (await server.sql(`SELECT execution_id FROM credential_tokens WHERE id IN (${ids})`)).trim().split('\n');
  assert.deepEqual(claims, [r.id, r.id]);
});

test('issue, introspect and revoke are audited without the token', async () => {
  const res = await server.request('GET', '/v1/audit?action=credential.token.issue', { key: server.keys.auditor });
  assert.equal(res.status, 200, res.text);
  const n = (await server.sql(`SELECT count(*) FROM audit_log WHERE action IN
    ('credential.token.issue', 'credential.token.introspect', 'credential.token.revoke')`)).trim();
  assert.ok(Number(n) >= 10, n);
  const leaked = (await server.sql(`SELECT count(*) FROM audit_log WHERE record::text LIKE '%v4.public.%'`)).trim();
  assert.equal(leaked, '0');
});

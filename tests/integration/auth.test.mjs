// Authentication (API keys), authorisation (roles) and tenant isolation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setup, assertProblem } from './harness.mjs';

const server = setup();
const body = JSON.stringify({ tool: 'python', code: 'print("should not run")' });

function assertUnauthorized(res) {
  const p = assertProblem(res, 401, 'unauthorized');
  assert.match(res.headers.get('www-authenticate') || '', /^Bearer\b/);
  return p;
}

test('no Authorization header gives 401 with WWW-Authenticate: Bearer', async () => {
  assertUnauthorized(await server.request('POST', '/v1/execute', { body }));
  assertUnauthorized(await server.request('GET', '/v1/tools'));
  assertUnauthorized(await server.request('GET', '/v1/executions/00000000-0000-4000-8000-000000000000'));
});

test('an unknown key gives 401', async () => {
  assertUnauthorized(await server.request('POST', '/v1/execute', { key: 'tc_' + 'A'.repeat(40), body }));
  // A real key with one character changed is unknown too.
  const k = server.keys.agent;
  const flipped = k.slice(0, -1) + (k.at(-1) === 'a' ? 'b' : 'a');
  assertUnauthorized(await server.request('POST', '/v1/execute', { key: flipped, body }));
  // A prefix of a real key is not the key.
  assertUnauthorized(await server.request('POST', '/v1/execute', { key: k.slice(0, 12), body }));
});

test('malformed Authorization headers give 401', async () => {
  const k = server.keys.agent;
  for (const value of [
    `Basic ${Buffer.from('agent:' + k).toString('base64')}`,
    'Bearer',
    'Bearer ',
    `Bearer ${k} extra`,
    `Token ${k}`,
    k,
    `Bearer ${'x'.repeat(5000)}`,
  ]) {
    const res = await server.request('GET', '/v1/tools', { headers: { authorization: value } });
    assertUnauthorized(res);
  }
});

test('the 401 detail does not reveal whether a key prefix exists', async () => {
  const a = await server.request('GET', '/v1/tools', { key: server.keys.agent.slice(0, -2) + 'zz' });
  const b = await server.request('GET', '/v1/tools', { key: 'nonsense-key-value-1234567890' });
  assert.equal(a.json.detail, b.json.detail);
  assert.equal(a.json.title, b.json.title);
});

test('auditor and reviewer may not execute (403 forbidden), and nothing runs', async () => {
  for (const role of ['auditor', 'reviewer']) {
    const res = await server.request('POST', '/v1/execute', { key: server.keys[role], body });
    const p = assertProblem(res, 403, 'forbidden');
    assert.ok(!('stdout' in p));
  }
});

test('agent and admin may execute', async () => {
  for (const role of ['agent', 'admin']) {
    const res = await server.request('POST', '/v1/execute', { key: server.keys[role], body: JSON.stringify({ tool: 'shell', code: `echo ${role}` }) });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json.stdout, `${role}\n`);
  }
});

test('every role may list tools', async () => {
  for (const role of ['agent', 'reviewer', 'auditor', 'admin']) {
    const res = await server.request('GET', '/v1/tools', { key: server.keys[role] });
    assert.equal(res.status, 200, `${role}: ${res.text}`);
    assert.ok(res.json.tools.length > 0);
  }
});

test('tenant isolation: tenant B cannot read tenant A\'s execution, A can', async () => {
  const { json: run } = await server.execute({ tool: 'python', code: 'print("secret of tenant A")' });
  const id = run.id;

  const own = await server.request('GET', `/v1/executions/${id}`, { key: server.keys.auditor });
  assert.equal(own.status, 200, own.text);
  assert.equal(own.json.stdout, 'secret of tenant A\n');

  for (const key of [server.keys.otherAgent, server.keys.otherAdmin]) {
    const other = await server.request('GET', `/v1/executions/${id}`, { key });
    assertProblem(other, 404, 'not-found');
    assert.ok(!other.text.includes('secret of tenant A'));
  }

  // And the answer is the same as for an id that does not exist at all (no oracle).
  const missing = await server.request('GET', '/v1/executions/00000000-0000-4000-8000-000000000000', { key: server.keys.otherAgent });
  assertProblem(missing, 404, 'not-found');
  const other = await server.request('GET', `/v1/executions/${id}`, { key: server.keys.otherAgent });
  assert.equal(other.json.title, missing.json.title);
});

test('auth is checked before the body is parsed (no validation oracle without a key)', async () => {
  assertUnauthorized(await server.request('POST', '/v1/execute', { body: '{not json' }));
});

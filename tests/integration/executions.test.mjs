// GET /v1/executions/{id}: the stored result of an execution.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setup, assertProblem } from './harness.mjs';

const server = setup();

function sameInstant(a, b, field) {
  if (a === null || b === null) return assert.equal(a, b, field);
  assert.equal(Date.parse(a), Date.parse(b), `${field}: ${a} vs ${b}`);
}

function assertSameExecution(stored, returned) {
  const { created_at: c1, finished_at: f1, ...rest1 } = stored;
  const { created_at: c2, finished_at: f2, ...rest2 } = returned;
  assert.deepEqual(rest1, rest2);
  sameInstant(c1, c2, 'created_at');
  sameInstant(f1, f2, 'finished_at');
}

test('GET after execute returns the same stored result', async () => {
  const { json: run } = await server.execute({ tool: 'python', code: 'import sys\nprint("out")\nprint("err", file=sys.stderr)\nsys.exit(2)', stdin: 'ignored' });
  assert.equal(run.status, 'failed');
  const res = await server.request('GET', `/v1/executions/${run.id}`, { key: server.keys.agent });
  assert.equal(res.status, 200, res.text);
  assertSameExecution(res.json, run);
  assert.equal(res.json.stdout, 'out\n');
  assert.equal(res.json.stderr, 'err\n');
  assert.equal(res.json.exit_code, 2);
});

test('a timed-out execution is stored with its timeout status', async () => {
  const { json: run } = await server.execute({ tool: 'shell', code: 'sleep 20', limits: { timeout_ms: 500 } });
  assert.equal(run.status, 'timeout');
  const res = await server.request('GET', `/v1/executions/${run.id}`, { key: server.keys.admin });
  assert.equal(res.status, 200);
  assertSameExecution(res.json, run);
});

test('any role of the same tenant can read an execution', async () => {
  const { json: run } = await server.execute({ tool: 'shell', code: 'echo shared' });
  for (const role of ['agent', 'reviewer', 'auditor', 'admin']) {
    const res = await server.request('GET', `/v1/executions/${run.id}`, { key: server.keys[role] });
    assert.equal(res.status, 200, `${role}: ${res.text}`);
    assert.equal(res.json.stdout, 'shared\n');
  }
});

test('the id is a UUID in its canonical (lowercase) form: another spelling is not found', async () => {
  const { json: run } = await server.execute({ tool: 'shell', code: 'echo case' });
  assert.match(run.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  // ids are compared as the server wrote them (long-polls, cancels and webhooks key on them)
  assertProblem(await server.request('GET', `/v1/executions/${run.id.toUpperCase()}`, { key: server.keys.agent }), 404, 'not-found');
  assert.equal((await server.request('GET', `/v1/executions/${run.id}`, { key: server.keys.agent })).status, 200);
});

test('an unknown but well-formed id gives 404 not-found', async () => {
  assertProblem(await server.request('GET', '/v1/executions/6f1c1d7e-0d7a-4a8e-9a44-6c0f6c1b2a11', { key: server.keys.agent }), 404, 'not-found');
});

test('malformed ids give 404 not-found, never 400 or 500', async () => {
  for (const id of ['not-a-uuid', '1', "'%20OR%201=1--", '6f1c1d7e-0d7a-4a8e-9a44-6c0f6c1b2a1', '6f1c1d7e0d7a4a8e9a446c0f6c1b2a11zz', 'x'.repeat(2000), '%00', '%E2%9C%93']) {
    const res = await server.request('GET', `/v1/executions/${id}`, { key: server.keys.agent });
    assertProblem(res, 404, 'not-found');
  }
});

test('a wrong method on an execution gives 405', async () => {
  const res = await server.request('DELETE', '/v1/executions/6f1c1d7e-0d7a-4a8e-9a44-6c0f6c1b2a11', { key: server.keys.admin });
  assertProblem(res, 405, 'method-not-allowed');
  assert.match(res.headers.get('allow'), /GET/);
});

// /healthz, /readyz and /openapi.yaml: unauthenticated operational routes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import YAML from 'yaml';
import { setup, OPENAPI_PATH } from './harness.mjs';

const server = setup();

test('GET /healthz answers {"status":"ok"} without a key', async () => {
  const res = await server.request('GET', '/healthz');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^application\/json/);
  assert.deepEqual(res.json, { status: 'ok' });
});

test('GET /readyz reports the database and the launcher as ok', async () => {
  const res = await server.request('GET', '/readyz');
  assert.equal(res.status, 200, res.text);
  const { sandbox_uids: uids, ...rest } = res.json;
  assert.deepEqual(rest, { status: 'ready', checks: { database: 'ok', launcher: 'ok', instance_lock: 'ok' } });
  // the launcher's host uid range (sandbox/uidrange.h): 1024 uids of 1000000 + n * 1024
  assert.equal(uids.count, 1024);
  assert.equal((uids.first - 1000000) % 1024, 0);
  assert.ok(uids.first >= 1000000 && uids.first < 1000000 + 2000 * 1024, JSON.stringify(uids));
});

test('GET /openapi.yaml serves the contract this suite validates against', async () => {
  const res = await server.request('GET', '/openapi.yaml');
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^application\/yaml/);
  assert.equal(res.text, fs.readFileSync(OPENAPI_PATH, 'utf8'), 'served document differs from openapi/openapi.yaml (stale build?)');
  const doc = YAML.parse(res.text);
  assert.equal(doc.openapi, '3.1.0');
  assert.ok(doc.paths['/v1/execute'].post);
});

test('a key is accepted but not needed on the operational routes', async () => {
  for (const p of ['/healthz', '/readyz', '/openapi.yaml']) {
    const res = await server.request('GET', p, { key: 'not-a-real-key' });
    assert.equal(res.status, 200, `${p}: ${res.text.slice(0, 200)}`);
  }
});

test('every response has a unique X-Request-Id', async () => {
  const ids = new Set();
  for (let i = 0; i < 20; i++) {
    const res = await server.request('GET', '/healthz');
    ids.add(res.headers.get('x-request-id'));
  }
  assert.equal(ids.size, 20);
});

test('error responses carry the request id in the body too', async () => {
  const res = await server.request('GET', '/does-not-exist');
  assert.equal(res.status, 404);
  assert.equal(res.json.request_id, res.headers.get('x-request-id'));
});

test('HTTP keep-alive: many requests over reused connections', async () => {
  const results = await Promise.all(Array.from({ length: 50 }, () => server.request('GET', '/healthz')));
  assert.ok(results.every((r) => r.status === 200));
});

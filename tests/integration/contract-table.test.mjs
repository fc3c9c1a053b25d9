// The contract as a table: generated from openapi/openapi.yaml, so that a new operation is
// covered the day it is declared. Every secured operation answers 401 (with
// WWW-Authenticate) without a key, with a wrong key and with a malformed header, and writes no
// audit record; every operation with a request body answers 413 body-too-large past the cap,
// with a valid key of a role it allows, and writes no audit record either; every declared
// operation is reachable (a key of an allowed role never gets 404 for its path or 405).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import YAML from 'yaml';
import { setup, assertProblem, OPENAPI_PATH } from './harness.mjs';

const CAP = 4096;
// A database of its own: the audit rows counted are this file's only.
const server = setup('contract-table', { freshDatabase: true, serveEnv: { TOOLCAGE_MAX_BODY_BYTES: String(CAP) } });
const spec = YAML.parse(fs.readFileSync(OPENAPI_PATH, 'utf8'));
const METHODS = ['get', 'post', 'put', 'delete', 'patch'];

const ops = [];
for (const [template, item] of Object.entries(spec.paths)) {
  for (const m of METHODS) {
    const op = item[m];
    if (!op) continue;
    const security = op.security ?? spec.security ?? [];
    ops.push({
      method: m.toUpperCase(), template, op,
      secured: security.length > 0,
      body: Boolean(op.requestBody),
      // a concrete path: every parameter a well-formed value that names nothing
      path: template.replace(/\{[^}]+\}/g, (p) => (p === '{seq}' ? '1' : p === '{name}' ? 'contract-x' : crypto.randomUUID())),
    });
  }
}

async function auditCount() {
  return Number((await server.sql('SELECT count(*) FROM audit_log')).trim());
}

test('the table covers the contract: at least 25 operations, 20 of them secured, 8 with a body', () => {
  assert.ok(ops.length >= 25, `${ops.length} operations`);
  assert.ok(ops.filter((o) => o.secured).length >= 20);
  assert.ok(ops.filter((o) => o.body).length >= 8);
});

test('every secured operation: 401 without a key, with a wrong key, with a malformed header; no audit record', async () => {
  const before = await auditCount();
  for (const o of ops.filter((x) => x.secured)) {
    const where = `${o.method} ${o.template}`;
    assert.ok(o.op.responses['401'], `${where} does not declare 401`);
    const body = o.body ? '{}' : undefined;
    const headers = o.body ? { 'content-type': 'application/json' } : {};
    for (const auth of [undefined, `Bearer tc_${'A'.repeat(43)}`, 'Basic dXNlcjpwYXNz', 'Bearer']) {
      const res = await server.request(o.method, o.path, { body, headers: auth ? { ...headers, authorization: auth } : headers });
      assertProblem(res, 401, 'unauthorized');
      assert.match(res.headers.get('www-authenticate') || '', /^Bearer/, `${where}: WWW-Authenticate`);
    }
  }
  assert.equal(await auditCount(), before, 'a refused request wrote an audit record');
});

/** A key of a role the operation allows (read from its 403 description is not reliable: try them). */
function keysFor() {
  return [server.keys.admin, server.keys.agent, server.keys.reviewer, server.keys.auditor, server.keys.operator];
}

test('every operation with a body: 413 past the cap, whatever the key; no audit record', async () => {
  const before = await auditCount();
  const big = Buffer.from(JSON.stringify({ pad: 'x'.repeat(CAP * 2) }));
  for (const o of ops.filter((x) => x.body)) {
    const where = `${o.method} ${o.template}`;
    assert.ok(o.op.responses['413'], `${where} does not declare 413`);
    for (const key of [null, server.keys.admin]) {
      const headers = { 'content-type': 'application/json' };
      if (key) headers.authorization = `Bearer ${key}`;
      const res = await server.curlRequest(o.method, o.path, { headers, body: big });
      assertProblem(res, 413, 'body-too-large');
    }
  }
  assert.equal(await auditCount(), before, 'a refused body wrote an audit record');
});

test('every declared operation is routed: a key it allows never gets 404 for the path, nor 405', async () => {
  for (const o of ops) {
    const where = `${o.method} ${o.template}`;
    let routed = false;
    for (const key of o.secured ? keysFor() : [null]) {
      const opts = { validate: false };
      if (key) opts.key = key;
      if (o.body) opts.json = {};
      const res = await server.request(o.method, o.path, opts);
      assert.notEqual(res.status, 405, `${where}: 405 ${res.text}`);
      // 404 for the resource (the id names nothing) is fine; "no such route" is not
      if (res.status === 404 && /no such resource/.test(res.text)) assert.fail(`${where}: not routed`);
      if (res.status !== 403) { routed = true; break; }
    }
    assert.ok(routed, `${where}: every role got 403`);
  }
});

test('every path: a method it does not declare answers 405 with an Allow header naming those it does', async () => {
  const paths = [...new Set(ops.map((o) => o.template))];
  for (const template of paths) {
    const declared = ops.filter((o) => o.template === template).map((o) => o.method);
    const path = ops.find((o) => o.template === template).path;
    for (const m of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'].filter((x) => !declared.includes(x))) {
      const res = await server.request(m, path, { key: server.keys.admin }); // validates Allow
      assert.equal(res.status, 405, `${m} ${template}: ${res.status} ${res.text.slice(0, 300)}`);
      assertProblem(res, 405, 'method-not-allowed');
    }
  }
});

test('every operation that declares 403 refuses some role with a forbidden problem; 403 is never the answer to an allowed role', async () => {
  const roles = ['admin', 'agent', 'reviewer', 'auditor', 'operator'];
  for (const o of ops.filter((x) => x.secured)) {
    const where = `${o.method} ${o.template}`;
    const refused = [];
    for (const role of roles) {
      const opts = { key: server.keys[role] };
      if (o.body) opts.json = {};
      const res = await server.request(o.method, o.path, opts);
      if (res.status === 403 && res.json?.type === 'urn:toolcage:problem:forbidden') refused.push(role);
    }
    if (o.op.responses['403']) assert.ok(refused.length > 0, `${where} declares 403 but refuses no role`);
    else assert.deepEqual(refused, [], `${where} refuses ${refused} without declaring 403`);
  }
});

test('every operation with a JSON body: a body that is not JSON is a 400, never a 500', async () => {
  // (an upload's body is the file's bytes: any bytes are a valid body)
  for (const o of ops.filter((x) => x.body && x.op.requestBody.content['application/json'])) {
    const where = `${o.method} ${o.template}`;
    // an empty body is a valid request where the body is optional (approve without a reason)
    for (const body of ['{"unterminated', '\xff\xfe', '[]', ...(o.op.requestBody.required ? [''] : [])]) {
      let res;
      for (const key of keysFor()) {
        res = await server.request(o.method, o.path, { key, body, headers: { 'content-type': 'application/json' } });
        if (res.status !== 403) break;
      }
      assert.equal(res.status, 400, `${where} with ${JSON.stringify(body)}: ${res.status} ${res.text.slice(0, 300)}`);
    }
  }
});

test('every operation on a resource that declares 404 answers it for an id or name that names nothing', async () => {
  for (const o of ops.filter((x) => x.template.includes('{') && x.op.responses['404'])) {
    const where = `${o.method} ${o.template}`;
    const statuses = [];
    for (const key of o.secured ? keysFor() : [null]) {
      const opts = {};
      if (key) opts.key = key;
      // a body the operation takes, so that the lookup is what refuses it
      if (o.body) {
        opts.json = o.template.endsWith('/deny') ? { reason: 'contract table' }
          : o.template.endsWith('/decision') ? { decision: 'deny', reason: 'contract table' }
            : o.template.startsWith('/v1/admin/quotas/') ? { max_concurrent: null } : {};
      }
      const res = await server.request(o.method, o.template === '/v1/audit/{seq}' ? '/v1/audit/999999999' : o.path, opts);
      statuses.push(res.status);
      if (res.status === 404) {
        assert.match(res.json?.type ?? '', /^urn:toolcage:problem:(not-found|unknown-)/, `${where}: ${res.text.slice(0, 200)}`);
        break;
      }
    }
    assert.ok(statuses.includes(404), `${where}: ${statuses.join(', ')}`);
  }
});

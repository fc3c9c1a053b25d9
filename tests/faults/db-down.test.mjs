// PostgreSQL down: every operation of the contract that needs the database answers
// 503 unavailable (a problem with Retry-After) at once, never a 500, a hang or a crash, and
// writes nothing; the operations that need no database keep answering; once PostgreSQL is
// back every operation answers as before. The table is openapi/openapi.yaml itself, so a new
// operation is covered the day it is declared.
import { test, before, after } from 'node:test';
import { spawnSync } from 'node:child_process';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import YAML from 'yaml';
import { Server, OPENAPI_PATH, assertProblem } from '../integration/harness.mjs';
import { faultPolicy, tmpdir, pgStop, pgStart, report, SLOW } from './lib.mjs';

const dir = tmpdir('db-down');
const { policy } = faultPolicy(dir);
const server = new Server('faults-db-down', { freshDatabase: true, policy });

before(async () => { await server.start(); }, { timeout: 120_000 * SLOW });
after(async () => {
  await pgStart().catch(() => {});
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 120_000 * SLOW });

// What answers without the database: liveness, the contract, metrics. Everything with a key
// needs it (the key is looked up), and so do readiness and the public token keys.
const NO_DATABASE = new Set(['GET /healthz', 'GET /openapi.yaml', 'GET /metrics']);

const spec = YAML.parse(fs.readFileSync(OPENAPI_PATH, 'utf8'));
const ops = [];
for (const [template, item] of Object.entries(spec.paths)) {
  for (const m of ['get', 'post', 'put', 'delete', 'patch']) {
    const op = item[m];
    if (!op) continue;
    ops.push({
      name: `${m.toUpperCase()} ${template}`, method: m.toUpperCase(), op,
      secured: (op.security ?? spec.security ?? []).length > 0,
      body: Boolean(op.requestBody),
      path: template.replace(/\{[^}]+\}/g, (p) => (p === '{seq}' ? '1' : p === '{name}' ? 'db-down-x' : crypto.randomUUID())),
    });
  }
}

/** A request each operation would take (its role, a body it accepts the shape of). */
function requestFor(o) {
  const keyFor = { 'POST /v1/admin/policy/reload': server.keys.operator, 'PUT /v1/admin/quotas/{tenant}': server.keys.operator };
  const opts = {};
  if (o.secured) opts.key = keyFor[o.name] ?? (o.method === 'GET' ? server.keys.admin : server.keys.agent);
  if (/approvals|audit|secrets/.test(o.name)) opts.key = server.keys.admin;
  if (o.body) {
    opts.json = {
      'POST /v1/execute': { tool: 'mark', code: 'true' },
      'POST /v1/prescreen': { tool: 'mark', code: 'true' },
      'POST /mcp': { jsonrpc: '2.0', id: 1, method: 'ping' },
      'PUT /v1/secrets/{name}': { value: 'x', allowed_tools: ['mark'] },
      'POST /v1/audit/hash': { value: 'x' },
      'POST /v1/credentials': { tool: 'mark', audience: 'x' },
      'POST /v1/credentials/introspect': { token: 'x' },
      'PUT /v1/admin/quotas/{tenant}': { max_concurrent: null },
    }[o.name.replace(/\/[0-9a-f-]{36}/g, '/{id}')] ?? {};
  }
  return opts;
}

test('every operation: 503 unavailable while PostgreSQL is down (none needing it answers otherwise), then back', async (t) => {
  assert.ok(ops.length >= 25, `${ops.length} operations in the contract`);
  const up = {};
  for (const o of ops) up[o.name] = (await server.request(o.method, o.path, requestFor(o))).status;
  assert.ok(Object.values(up).every((s) => s !== 503 && s < 500), `before the fault: ${JSON.stringify(up)}`);

  await pgStop();
  const down = {};
  let slowest = 0;
  try {
    for (const o of ops) {
      const res = await server.request(o.method, o.path, { ...requestFor(o), timeout: 30_000 * SLOW });
      down[o.name] = res.status;
      slowest = Math.max(slowest, res.ms);
      if (NO_DATABASE.has(o.name)) {
        assert.equal(res.status, 200, `${o.name} needs no database: ${res.text.slice(0, 300)}`);
      } else if (o.name === 'GET /readyz') {
        assert.equal(res.status, 503, `${o.name}: ${res.text.slice(0, 300)}`);
      } else {
        assertProblem(res, 503, 'unavailable');
        assert.ok(Number(res.headers.get('retry-after')) >= 1, `${o.name}: Retry-After ${res.headers.get('retry-after')}`);
      }
    }
    // the public metrics need no database; an operator's (they name tenants) do
    assertProblem(await server.request('GET', '/metrics', { key: server.keys.operator }), 503, 'unavailable');
  } finally {
    await pgStart();
  }
  // Answered at once (the pool's wait for a connection, not a hang).
  assert.ok(slowest < 10_000 * SLOW, `the slowest answer took ${Math.round(slowest)} ms`);
  assert.equal(server.exited, null, 'the server exited');

  // Back: every operation answers as it did before (the pool reconnects by itself).
  const deadline = Date.now() + 30_000 * SLOW;
  for (const o of ops) {
    let status;
    for (;;) {
      status = (await server.request(o.method, o.path, requestFor(o))).status;
      if (status !== 503 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(status, up[o.name], `${o.name} after the restart`);
  }
  report(t, 'database down', { operations: ops.length, answered_503: Object.values(down).filter((s) => s === 503).length, slowest_ms: Math.round(slowest) });
});

test('a session that ends while PostgreSQL is down: its processes die at once, and its end is stored once PostgreSQL is back', async (t) => {
  const opened = await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'mark', idle_timeout_seconds: 2 } });
  assert.equal(opened.status, 201, opened.text);
  const id = opened.json.id;
  const tag = `keep-${crypto.randomBytes(6).toString('hex')}`;
  const call = await server.request('POST', `/v1/sessions/${id}/execute`, {
    key: server.keys.agent, json: { code: `(bash -c 'sleep 3000; : ${tag}' &) ; echo started` },
  });
  assert.equal(call.json.stdout, 'started\n', call.text);
  const procs = () => spawnSync('pgrep', ['-f', tag], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean);
  assert.ok(procs().length > 0, 'the background process runs');

  await pgStop();
  let gone = false;
  try {
    // the idle timeout ends it: the kill does not wait for the database
    const until = Date.now() + 15_000 * SLOW;
    while (!gone && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 200));
      gone = procs().length === 0;
    }
  } finally {
    await pgStart();
  }
  assert.ok(gone, 'the session\'s processes outlived its end');
  // the keeper retries the end until the database takes it
  let row = '';
  const until = Date.now() + 30_000 * SLOW;
  while (Date.now() < until) {
    row = (await server.sql(`SELECT status || ' ' || coalesce(ended_reason, '') FROM sessions WHERE id = '${id}'`).catch(() => '')).trim();
    if (row.startsWith('ended')) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.equal(row, 'ended idle_timeout');
  // and it was the retry that stored it: the first try met the database down
  const failed = server.logTail(400).split('\n').filter((l) => l.includes("recording a session's end failed") && l.includes(id));
  assert.ok(failed.length >= 1, 'the end was first tried while the database was down');
  const audit = (await server.sql(`SELECT count(*) FROM audit_log WHERE action = 'session.end' AND record->>'session_id' = '${id}'`)).trim();
  assert.equal(audit, '1', 'one session.end record');
  report(t, 'session end while the database was down', { stored: row });
});

test('a store that hangs in the database (a statement stuck behind a lock): the waiting client still hears within 10 s that the outcome is not stored yet, and it is stored once the statement ends', async (t) => {
  const tag = `hang-${crypto.randomBytes(6).toString('hex')}`;
  const code = `sleep 1; echo ${tag}`;
  const first = server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'mark', code }, timeout: 90_000 * SLOW });
  let id = '';
  for (const until = Date.now() + 20_000 * SLOW; !id && Date.now() < until;) {
    id = (await server.sql(`SELECT id FROM executions WHERE request->>'code' = '${code}' AND code_started_at IS NOT NULL`)).trim();
    if (!id) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(id, 'the call started');
  // the outcome's UPDATE of that row sleeps 20 s inside the database (both recorder threads
  // could be so stuck: the answer must not wait for them)
  await server.sql(`CREATE FUNCTION tc_test_hang() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN PERFORM pg_sleep(20); RETURN NEW; END $$;
    CREATE TRIGGER tc_test_hang BEFORE UPDATE ON executions FOR EACH ROW
      WHEN (OLD.id = '${id}' AND NEW.status <> 'running') EXECUTE FUNCTION tc_test_hang()`);
  const t0 = performance.now();
  const r = await first;
  const waited = performance.now() - t0;
  try {
    assertProblem(r, 503, 'unavailable');
    assert.match(r.json.detail, new RegExp(`not stored yet.*/v1/executions/${id}`));
    // 1 s of program, then at most 10 s (ANSWER_WITHIN_MS) and some slack, not the 20 s hang
    assert.ok(r.ms < 15_000 * SLOW, `answered after ${Math.round(r.ms)} ms`);
    let status = '';
    for (const until = Date.now() + 40_000 * SLOW; status !== 'completed' && Date.now() < until;) {
      await new Promise((res) => setTimeout(res, 250));
      status = (await server.sql(`SELECT status FROM executions WHERE id = '${id}'`)).trim();
    }
    assert.equal(status, 'completed', 'stored once the statement ended');
  } finally {
    await server.sql('DROP TRIGGER IF EXISTS tc_test_hang ON executions; DROP FUNCTION IF EXISTS tc_test_hang()');
  }
  report(t, 'a hung store', { answered_ms: Math.round(r.ms), after_trigger_ms: Math.round(waited) });
});

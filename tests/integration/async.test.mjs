// Asynchronous calls (issue 21): `"async": true` or `Prefer: respond-async` answers 202 with a
// Location as soon as the call is recorded; it runs all the same, is stored, audited, delivered
// to its callback_url, cancellable, survives a drain; GET /v1/executions lists a tenant's calls.
// Evidence: the time the 202 took against the program's own sleep, the stored outcome and its
// audit trail, the signed webhook, and what another tenant's list holds.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup, assertProblem, SLOW, UUID_RE } from './harness.mjs';
import { APPROVAL_POLICY, getExecution, waitFinished, until, auditOf, actions, lit } from './fixtures/approval-helpers.mjs';
import { startReceiver, verifySignature } from './fixtures/webhook-receiver.mjs';

const server = setup('async', { policy: APPROVAL_POLICY, serveEnv: { TOOLCAGE_WEBHOOK_ALLOW_PRIVATE: '1' } });
const tag = () => crypto.randomBytes(6).toString('hex');
const receivers = [];
after(async () => { for (const r of receivers) await r.close(); });

/** A 202 AcceptedExecution; Preference-Applied only when a Prefer header asked for it. */
function assertAccepted(res, { tool = 'shell', prefer = false } = {}) {
  assert.equal(res.status, 202, res.text.slice(0, 500));
  const j = res.json;
  assert.match(j.id, UUID_RE);
  assert.equal(j.tool, tool);
  assert.equal(j.status, 'running');
  assert.equal(res.headers.get('location'), `/v1/executions/${j.id}`);
  assert.equal(res.headers.get('preference-applied'), prefer ? 'respond-async' : null);
  return j;
}

test('"async": true answers 202 before the program has finished; the call runs, is stored and audited', async () => {
  const t = tag();
  const res = await server.request('POST', '/v1/execute', {
    key: server.keys.agent,
    json: { tool: 'shell', code: `sleep 2; echo done-${t}`, async: true },
  });
  const j = assertAccepted(res);
  // The program sleeps 2 s: an answer in less means it did not wait for the run.
  assert.ok(res.ms < 1800, `the 202 took ${res.ms.toFixed(0)} ms`);
  const now = await getExecution(server, j.id);
  assert.equal(now.status, 'running');
  const done = await waitFinished(server, j.id, 30 * SLOW);
  assert.equal(done.status, 'completed');
  assert.equal(done.stdout, `done-${t}\n`);
  assert.equal(done.id, j.id);
  assert.deepEqual(actions(await auditOf(server, j.id)), ['execute', 'execution.start', 'execution.complete']);
});

test('Prefer: respond-async among other preferences is honoured; other preferences alone are not', async () => {
  const t = tag();
  const res = await server.request('POST', '/v1/execute', {
    key: server.keys.agent,
    headers: { prefer: 'return=minimal, wait=10,Respond-Async ; x=y' },
    json: { tool: 'shell', code: `echo pref-${t}` },
  });
  const j = assertAccepted(res, { prefer: true });
  assert.equal((await waitFinished(server, j.id, 30 * SLOW)).stdout, `pref-${t}\n`);
  // A token that merely contains the word, and other preferences: a synchronous answer.
  for (const prefer of ['return=representation', 'respond-asynchronously', 'x=respond-async', 'foo="x, respond-async"', 'foo="a\\", respond-async"']) {
    const sync = await server.request('POST', '/v1/execute', {
      key: server.keys.agent, headers: { prefer }, json: { tool: 'shell', code: `echo sync-${t}` },
    });
    assert.equal(sync.status, 200, `${prefer}: ${sync.text.slice(0, 300)}`);
    assert.equal(sync.json.stdout, `sync-${t}\n`);
    assert.equal(sync.headers.get('preference-applied'), null);
  }
  // After a quoted value, a real preference is still seen.
  assertAccepted(await server.request('POST', '/v1/execute', {
    key: server.keys.agent, headers: { prefer: 'foo="a,b", respond-async' }, json: { tool: 'shell', code: 'echo q' },
  }), { prefer: true });
  // A synchronous answer replayed for the same Idempotency-Key never claims the preference.
  const idem = { 'idempotency-key': `pref-${t}` };
  const first = await server.request('POST', '/v1/execute', { key: server.keys.agent, headers: idem, json: { tool: 'shell', code: `echo idem-${t}` } });
  assert.equal(first.status, 200);
  const replay = await server.request('POST', '/v1/execute', { key: server.keys.agent, headers: { ...idem, prefer: 'respond-async' }, json: { tool: 'shell', code: `echo idem-${t}` } });
  assert.equal(replay.status, 200);
  assert.equal(replay.json.id, first.json.id);
  assert.equal(replay.headers.get('preference-applied'), null);
  // "async": false with no header: synchronous.
  const sync = await server.execute({ tool: 'shell', code: 'echo x', async: false });
  assert.equal(sync.json.status, 'completed');
});

test('async must be a boolean; a refused call answers its problem, not 202', async () => {
  for (const async of ['yes', 1, null, {}]) {
    const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'echo', async } });
    const p = assertProblem(res, 400, 'validation');
    assert.ok(p.errors.some((e) => e.path === 'async'), JSON.stringify(p.errors));
  }
  assertProblem(await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'nosuch', code: 'x', async: true } }), 404, 'unknown-tool');
  assertProblem(await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'x', async: true, limits: { timeout_ms: 999999999 } } }), 422, 'limit-exceeds-policy');
  assertProblem(await server.request('POST', '/v1/execute', { key: server.keys.reviewer, json: { tool: 'shell', code: 'x', async: true } }), 403, 'forbidden');
});

test('an Idempotency-Key replays the 202: one execution, run once', async () => {
  const t = tag();
  const key = `idem-${t}`;
  const json = { tool: 'shell', code: `echo once-${t} >> /workspace/count; cat /workspace/count`, async: true };
  const first = assertAccepted(await server.request('POST', '/v1/execute', { key: server.keys.agent, json, headers: { 'idempotency-key': key } }));
  const again = await server.request('POST', '/v1/execute', { key: server.keys.agent, json, headers: { 'idempotency-key': key } });
  assert.equal(again.status, 202, again.text);
  assert.equal(again.json.id, first.id);
  assert.equal(again.headers.get('location'), `/v1/executions/${first.id}`);
  await waitFinished(server, first.id, 30 * SLOW);
  const n = (await server.sql(`SELECT count(*) FROM audit_log WHERE action = 'execute' AND record->'params'->>'code' LIKE ${lit(`%once-${t}%`)}`)).trim();
  assert.equal(n, '1', 'the replay ran the call again');
});

test('a held call asked for asynchronously is held as usual (202 pending_approval)', async () => {
  const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: `echo held-${tag()}`, async: true } });
  assert.equal(res.status, 202, res.text);
  assert.equal(res.json.status, 'pending_approval');
  assert.match(res.json.approval_id, UUID_RE);
  assert.equal((await getExecution(server, res.json.id)).status, 'pending_approval');
});

test('an async call can be cancelled while it runs; its program stops', async () => {
  const t = tag();
  const j = assertAccepted(await server.request('POST', '/v1/execute', {
    key: server.keys.agent,
    json: { tool: 'shell', code: `echo before-${t}; sleep 30; echo after-${t}`, async: true, limits: { timeout_ms: 60000 } },
  }));
  await until(async () => (await server.sql(`SELECT code_started_at IS NOT NULL FROM executions WHERE id = ${lit(j.id)}`)).trim() === 't',
    20_000 * SLOW, 'the call to start');
  await new Promise((r) => setTimeout(r, 300));
  const c = await server.request('POST', `/v1/executions/${j.id}/cancel`, { key: server.keys.agent });
  assert.equal(c.status, 202, c.text);
  const done = await waitFinished(server, j.id, 30 * SLOW);
  assert.equal(done.status, 'cancelled');
  assert.equal(done.killed_reason, 'cancelled');
  assert.doesNotMatch(done.stdout, /after-/);
});

test('an async call with a callback_url is delivered there, signed', async () => {
  const { stdout } = await server.cli(['keys', 'webhook-secret', '--tenant', server.tenants.a]);
  const secret = stdout.trim();
  const rx = await startReceiver();
  receivers.push(rx);
  const t = tag();
  const j = assertAccepted(await server.request('POST', '/v1/execute', {
    key: server.keys.agent,
    json: { tool: 'shell', code: `echo hook-${t}`, async: true, callback_url: rx.url(`/cb/${t}`) },
  }));
  await until(() => rx.hits.length >= 1, 20_000 * SLOW, 'the webhook');
  const hit = rx.hits[0];
  assert.equal(hit.url, `/cb/${t}`);
  assert.equal(verifySignature(secret, hit.headers['x-toolcage-signature'], hit.body), null);
  const body = JSON.parse(hit.body.toString('utf8'));
  assert.equal(body.id, j.id);
  assert.equal(body.status, 'completed');
  assert.equal(body.stdout, `hook-${t}\n`);
});

test('SIGTERM drains: an async call in flight finishes and is stored before the server exits', async () => {
  const peer = await server.peer('async-drain');
  const t = tag();
  const j = assertAccepted(await peer.request('POST', '/v1/execute', {
    key: server.keys.agent, json: { tool: 'shell', code: `sleep 1.5; echo drained-${t}`, async: true },
  }));
  await peer.stop(); // asserts a clean exit (and no sanitizer report)
  const e = await getExecution(server, j.id);
  assert.equal(e.status, 'completed', JSON.stringify(e).slice(0, 500));
  assert.equal(e.stdout, `drained-${t}\n`);
});

test('GET /v1/executions: newest first, paged without gaps or repeats, filtered, one tenant only', async () => {
  const t = tag();
  const ids = [];
  for (let i = 0; i < 5; i++) {
    const r = await server.execute({ tool: 'shell', code: `echo list-${t}-${i}; exit ${i % 2}` });
    ids.push(r.json.id);
  }
  const since = (await server.sql(`SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') FROM executions WHERE id = ${lit(ids[0])}`)).trim();
  // Page through everything since the first of ours, two at a time.
  const seen = [];
  let cursor = null;
  let pages = 0;
  do {
    const q = new URLSearchParams({ since, limit: '2', tool: 'shell' });
    if (cursor) q.set('cursor', cursor);
    const res = await server.request('GET', `/v1/executions?${q}`, { key: server.keys.agent });
    assert.equal(res.status, 200, res.text);
    assert.ok(res.json.executions.length <= 2);
    seen.push(...res.json.executions);
    cursor = res.json.next_cursor;
    assert.ok(++pages < 50, 'paging does not end');
  } while (cursor);
  const ours = seen.filter((e) => ids.includes(e.id));
  assert.deepEqual(ours.map((e) => e.id), [...ids].reverse(), 'newest first, each once');
  assert.equal(new Set(seen.map((e) => e.id)).size, seen.length, 'an execution came twice');
  for (const e of seen) assert.ok(e.created_at >= since, `${e.created_at} is before ${since}`);
  const byId = Object.fromEntries(ours.map((e) => [e.id, e]));
  assert.equal(byId[ids[1]].status, 'failed');
  assert.equal(byId[ids[1]].exit_code, 1);
  assert.equal(byId[ids[2]].status, 'completed');
  assert.equal(byId[ids[2]].exit_code, 0);
  assert.ok(byId[ids[2]].finished_at >= byId[ids[2]].created_at);

  // status filter
  const failed = await server.request('GET', `/v1/executions?status=failed&since=${encodeURIComponent(since)}&limit=100`, { key: server.keys.agent });
  assert.ok(failed.json.executions.every((e) => e.status === 'failed'));
  assert.deepEqual(failed.json.executions.filter((e) => ids.includes(e.id)).map((e) => e.id), [ids[3], ids[1]]);
  // A held call shows its approval.
  const held = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: `echo list-held-${t}` } });
  const pending = await server.request('GET', '/v1/executions?status=pending_approval&tool=deploy&limit=1', { key: server.keys.agent });
  assert.equal(pending.json.executions[0].id, held.json.id);
  assert.equal(pending.json.executions[0].approval_id, held.json.approval_id);
  assert.equal(pending.json.executions[0].approval_status, 'pending');
  assert.equal(pending.json.executions[0].exit_code, null);

  // Another tenant sees none of these, whatever it asks for.
  for (const q of ['', `?since=${encodeURIComponent(since)}&limit=100`, `?cursor=${ids[4]}`]) {
    const other = await server.request('GET', `/v1/executions${q}`, { key: server.keys.otherAgent });
    assert.equal(other.status, 200);
    for (const e of other.json.executions) assert.ok(!ids.includes(e.id) && e.id !== held.json.id, `tenant b sees ${e.id}`);
  }
  // Any role of the tenant reads the list (like GET /v1/executions/{id}).
  const asAuditor = await server.request('GET', '/v1/executions?limit=100', { key: server.keys.auditor });
  assert.equal(asAuditor.status, 200);
  assert.ok(asAuditor.json.executions.some((e) => e.id === ids[4]));
});

test('GET /v1/executions refuses bad parameters, naming each', async () => {
  const cases = {
    status: 'finished', tool: 'x'.repeat(65), since: '2024-02-30', cursor: 'not-a-uuid', limit: '101',
  };
  for (const [k, v] of Object.entries(cases)) {
    const p = assertProblem(await server.request('GET', `/v1/executions?${k}=${encodeURIComponent(v)}`, { key: server.keys.agent }), 400, 'validation');
    assert.deepEqual(p.errors.map((e) => e.path), [k]);
  }
  for (const v of ['0', '-1', '1e2', ' 5', '']) {
    assertProblem(await server.request('GET', `/v1/executions?limit=${encodeURIComponent(v)}`, { key: server.keys.agent }), 400, 'validation');
  }
  for (const v of ['yesterday', '2024-01-01T00:00:00', '2024-01-01 00:00:00Z', '2024-01-01T25:00:00Z']) {
    assertProblem(await server.request('GET', `/v1/executions?since=${encodeURIComponent(v)}`, { key: server.keys.agent }), 400, 'validation');
  }
  // bytes that are not UTF-8 are the client's error, not a database failure
  const bad = assertProblem(await server.request('GET', '/v1/executions?tool=%FF', { key: server.keys.agent }), 400, 'validation');
  assert.deepEqual(bad.errors.map((e) => e.path), ['tool']);
  assertProblem(await server.request('GET', '/v1/approvals?tool=%FF', { key: server.keys.reviewer }), 400, 'validation');
  assertProblem(await server.request('GET', '/v1/executions'), 401, 'unauthorized');
  const all = new URLSearchParams(cases);
  const p = assertProblem(await server.request('GET', `/v1/executions?${all}`, { key: server.keys.agent }), 400, 'validation');
  assert.equal(p.errors.length, 5);
});

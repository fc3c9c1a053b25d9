// POST /v1/executions/{id}/cancel beyond the approval gate: a running call's sandbox is
// killed (status cancelled, audited, whichever replica runs it), an approved call that waits
// for a free slot closes at once and never runs, and another tenant cannot cancel anything.
// Evidence: the program's own output (it never prints what follows its sleep), the time the
// call took, the audit trail, and the launcher left without children.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { setup, assertProblem, SLOW, sleep } from './harness.mjs';
import { APPROVAL_POLICY, hold, decide, getExecution, waitFinished, until, auditOf, actions, lit } from './fixtures/approval-helpers.mjs';

// One sandbox slot: an approved call waits in the queue while another runs.
const server = setup('cancel', { policy: APPROVAL_POLICY, serveEnv: { TOOLCAGE_MAX_SANDBOXES: '1' } });
const tag = () => crypto.randomBytes(6).toString('hex');
let peer = null;
after(async () => { if (peer) await peer.stop(); });

/** The id of the running call whose code contains t (its `execute` record names the code). */
async function runningId(t) {
  let id = null;
  await until(async () => {
    const out = (await server.sql(`SELECT e.id FROM executions e JOIN audit_log l
      ON l.action = 'execute' AND l.record->>'execution_id' = e.id::text
      WHERE e.status = 'running' AND e.code_started_at IS NOT NULL
        AND l.record->'params'->>'code' LIKE ${lit(`%${t}%`)}`)).trim();
    id = out || null;
    return Boolean(id);
  }, 20_000 * SLOW, `the call ${t} to run`);
  // The program is past its first line once it printed it; give it that moment.
  await sleep(300);
  return id;
}

function launcherChildren() {
  const kids = [];
  for (const t of fs.readdirSync(`/proc/${server.proc.pid}/task`)) {
    const s = fs.readFileSync(`/proc/${server.proc.pid}/task/${t}/children`, 'utf8').trim();
    if (s) kids.push(...s.split(/\s+/).map(Number));
  }
  return kids;
}

test('a running call is killed: 202, then status cancelled, audited, its program stopped', async () => {
  const t = tag();
  const code = `echo before-${t}; sleep 30; echo after-${t}`;
  const t0 = performance.now();
  const call = server.execute({ tool: 'shell', code, limits: { timeout_ms: 60000 } }, { timeout: 90_000 * SLOW });
  const id = await runningId(t);

  // Another tenant's key: the id does not exist for it; the call goes on.
  assertProblem(await server.request('POST', `/v1/executions/${id}/cancel`, { key: server.keys.otherAgent }), 404, 'not-found');
  // Roles that do not execute cannot cancel.
  assertProblem(await server.request('POST', `/v1/executions/${id}/cancel`, { key: server.keys.reviewer }), 403, 'forbidden');
  assert.equal((await getExecution(server, id)).status, 'running');

  const res = await server.request('POST', `/v1/executions/${id}/cancel`, { key: server.keys.agent });
  assert.equal(res.status, 202, res.text);
  assert.deepEqual(res.json, { id, status: 'cancelling' });
  assert.equal(res.headers.get('location'), `/v1/executions/${id}`);

  const { json: r } = await call;
  const ms = performance.now() - t0;
  assert.equal(r.id, id);
  assert.equal(r.status, 'cancelled');
  assert.equal(r.killed_reason, 'cancelled');
  assert.match(r.stdout, new RegExp(`^before-${t}$`, 'm'));
  assert.doesNotMatch(r.stdout, /after-/, 'the program ran past its sleep');
  assert.ok(ms < 25_000 * SLOW, `the cancelled call took ${ms.toFixed(0)} ms`);
  const stored = await getExecution(server, id);
  assert.equal(stored.status, 'cancelled');
  assert.deepEqual(actions(await auditOf(server, id)), ['execute', 'execution.start', 'execution.cancel_requested', 'execution.complete']);
  const trail = await auditOf(server, id);
  assert.equal(trail[2].actor.id, (await server.sql(`SELECT record->'actor'->>'id' FROM audit_log WHERE action = 'execute' AND record->>'execution_id' = ${lit(id)}`)).trim());
  assert.equal(trail[3].status, 'cancelled');

  // Finished now: a second cancel is a conflict. Nothing is left running under the server.
  assertProblem(await server.request('POST', `/v1/executions/${id}/cancel`, { key: server.keys.agent }), 409, 'not-pending');
  await until(async () => launcherChildren().length === 1, 5000 * SLOW, 'only the launcher left under the server');
});

test('an approved call waiting for a slot closes at once and never runs', async () => {
  const t = tag();
  // The one slot is busy ...
  const busy = server.execute({ tool: 'shell', code: `echo busy-${t}; sleep 4` }, { timeout: 60_000 * SLOW });
  await runningId(`busy-${t}`);
  // ... so an approved call stays queued.
  const { json: held } = await hold(server, `echo deployed-${t}`);
  assert.equal((await decide(server, held.approval_id, 'approve')).status, 200);
  await until(async () => (await getExecution(server, held.id)).status === 'queued', 5000 * SLOW, 'the approved call to be queued');

  const res = await server.request('POST', `/v1/executions/${held.id}/cancel`, { key: server.keys.agent });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.json, { id: held.id, status: 'cancelled' });
  assert.equal((await busy).json.status, 'completed');
  // The slot is free now; the cancelled call must still not run.
  await sleep(2000);
  const e = await getExecution(server, held.id);
  assert.equal(e.status, 'cancelled');
  assert.doesNotMatch(e.stdout ?? '', /deployed-/);
  const trail = await auditOf(server, held.id);
  assert.deepEqual(actions(trail), ['execute', 'approval.approved', 'execution.complete']);
  assert.equal(trail[2].status, 'cancelled');
  assert.equal(trail[2].started, false);
});

test('the replica that runs the call kills it when another replica is asked', async () => {
  peer = await server.peer('cancel-peer');
  const t = tag();
  const call = server.execute({ tool: 'shell', code: `echo before-${t}; sleep 30; echo after-${t}`, limits: { timeout_ms: 60000 } }, { timeout: 90_000 * SLOW });
  const id = await runningId(t);
  const res = await peer.request('POST', `/v1/executions/${id}/cancel`, { key: server.keys.agent });
  assert.equal(res.status, 202, res.text);
  const { json: r } = await call;
  assert.equal(r.status, 'cancelled');
  assert.doesNotMatch(r.stdout, /after-/);
  assert.equal((await waitFinished(peer, id)).status, 'cancelled');
});

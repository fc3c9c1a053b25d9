// Two `toolcage serve` processes on one database: every approved call runs exactly once,
// whichever process claims it; a process killed (SIGKILL) in the middle of a run leaves the
// run marked failed ("interrupted_after_start", flagged for review) by the other one, never
// run a second time.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import crypto from 'node:crypto';
import { Server, SLOW, sleep, psql } from './harness.mjs';
import { APPROVAL_POLICY, hold, decide, waitFinished, until, sqlJson, auditOf, actions, lit } from './fixtures/approval-helpers.mjs';

const a = new Server('approvals-cluster-a', { policy: APPROVAL_POLICY });
let b = null;
const killed = new Set();

before(async () => {
  await a.start();
  b = await a.peer('approvals-cluster-b');
}, { timeout: 120_000 * SLOW });

after(async () => {
  for (const s of [b, a]) {
    if (!s) continue;
    if (killed.has(s)) fs.rmSync(s.stateDir, { recursive: true, force: true });
    else await s.stop();
  }
}, { timeout: 60_000 * SLOW });

const alive = () => [a, b].filter((s) => !killed.has(s));

test('20 calls approved across two processes each run exactly once', async (t) => {
  const n = 20;
  const tag = crypto.randomBytes(4).toString('hex');
  const held = [];
  for (let i = 0; i < n; i++) {
    const via = i % 2 ? b : a;
    held.push((await hold(via, `echo run-${tag}-${i}; sleep 0.2`)).json);
  }
  // Approve them all at once, half through each process.
  const decisions = await Promise.all(held.map((h, i) => decide(i % 2 ? a : b, h.approval_id, 'approve')));
  for (const d of decisions) assert.equal(d.status, 200, d.text);
  const done = await Promise.all(held.map((h, i) => waitFinished(i % 3 ? a : b, h.id, 60 * SLOW)));
  done.forEach((e, i) => {
    assert.equal(e.status, 'completed', JSON.stringify(e));
    assert.equal(e.stdout, `run-${tag}-${i}\n`);
  });
  const ids = held.map((h) => lit(h.id)).join(', ');
  const rows = await sqlJson(a, `SELECT json_agg(json_build_object('id', id, 'claimed_by', claimed_by)) FROM executions WHERE id IN (${ids})`);
  assert.equal(rows.length, n);
  for (const r of rows) assert.ok(Number.isInteger(r.claimed_by), JSON.stringify(r));
  const completes = await sqlJson(a, `SELECT json_object_agg(e, c) FROM (SELECT record->>'execution_id' AS e, count(*) AS c FROM audit_log WHERE action = 'execution.complete' AND record->>'execution_id' IN (${ids}) GROUP BY 1) x`);
  for (const h of held) assert.equal(completes[h.id], 1, `execution ${h.id}: ${completes[h.id]} execution.complete records`);
  const byInstance = {};
  for (const r of rows) byInstance[r.claimed_by] = (byInstance[r.claimed_by] || 0) + 1;
  t.diagnostic(`claims per instance: ${JSON.stringify(byInstance)}`);
});

test('kill -9 of the process running a claimed call: the other marks it interrupted, never re-runs it', async () => {
  const tag = crypto.randomBytes(4).toString('hex');
  const { json: held } = await hold(a, `echo started-${tag}; sleep 5; echo finished-${tag}`);
  assert.equal((await decide(b, held.approval_id, 'approve')).status, 200);
  await until(async () => (await sqlJson(a, `SELECT to_json(status) FROM executions WHERE id = ${lit(held.id)}`)) === 'running', 5000 * SLOW, 'the claim');
  // Which process claimed it? Its log says so.
  const owner = await until(() => [a, b].find((s) => fs.readFileSync(s.logPath, 'utf8').split('\n')
    .some((l) => l.includes('claimed approved execution') && l.includes(held.id))), 3000, 'the claim in a log');
  const survivor = owner === a ? b : a;
  // Another database of the same cluster (another toolcage, say) holds the lock of an instance
  // with the owner's number: it says nothing about this database's instance.
  const claim = fs.readFileSync(owner.logPath, 'utf8').split('\n').find((l) => l.includes('claimed approved execution') && l.includes(held.id));
  const ownerInstance = JSON.parse(claim).instance;
  const marker = `toolcage-it-foreign-lock-${tag}`;
  const foreign = psql(`SELECT pg_advisory_lock(7715, ${Number(ownerInstance)}), '${marker}'; SELECT pg_sleep(120)`, { db: 'postgres' }).catch(() => {});
  await until(async () => (await psql(`SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE d.datname = 'postgres' AND l.locktype = 'advisory' AND l.classid = 7715 AND l.objid = ${Number(ownerInstance)} AND l.granted`, { db: 'postgres' })).trim() === '1', 5000 * SLOW, 'the foreign lock');
  // the program has started (its execution.start is in: killed before it, the approved call
  // would rightly be queued again and run by the survivor), and runs `sleep 5`
  await until(async () => (await sqlJson(a, `SELECT to_json(code_started_at IS NOT NULL) FROM executions WHERE id = ${lit(held.id)}`)) === true, 10_000 * SLOW, 'the start record');
  await sleep(300);
  killed.add(owner);
  const tKill = performance.now();
  await owner.kill();
  assert.equal(owner.exited.signal, 'SIGKILL');

  const e = await waitFinished(survivor, held.id, 30);
  const lag = performance.now() - tKill;
  assert.equal(e.status, 'failed', JSON.stringify(e));
  assert.equal(e.error, 'interrupted_after_start');
  assert.equal(e.started, true);
  assert.equal(e.needs_review, true);
  assert.ok(lag < 5000 * SLOW, `marked interrupted ${lag.toFixed(0)} ms after the kill`);
  assert.ok(!e.stdout.includes(`finished-${tag}`));
  await psql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%${marker}%' AND pid <> pg_backend_pid()`, { db: 'postgres' });
  await foreign;

  // Past the point where the sleep would have ended: still one outcome, no second run.
  await sleep(6000);
  const trail = await auditOf(survivor, held.id);
  assert.deepEqual(actions(trail), ['execute', 'approval.approved', 'execution.start', 'execution.interrupted']);
  const row = await sqlJson(survivor, `SELECT json_build_object('status', status, 'error', result->>'error', 'needs_review', needs_review) FROM executions WHERE id = ${lit(held.id)}`);
  assert.deepEqual(row, { status: 'failed', error: 'interrupted_after_start', needs_review: true });
  const ran = fs.readFileSync(survivor.logPath, 'utf8').split('\n').filter((l) => l.includes('claimed approved execution') && l.includes(held.id));
  assert.equal(ran.length, 0, 'the survivor claimed the interrupted execution again');

  // The survivor keeps working.
  const { json: next } = await hold(survivor, `echo after-${tag}`);
  assert.equal((await decide(survivor, next.approval_id, 'approve')).status, 200);
  const done = await waitFinished(survivor, next.id);
  assert.equal(done.stdout, `after-${tag}\n`);
  assert.equal(alive().length, 1);
});

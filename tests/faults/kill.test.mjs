// kill -9 of a server in the middle of runs, alone and as one of two replicas: nothing stays
// running past the sweep interval, interrupted calls say whether they started (and the
// markers agree), approved calls that never started run once elsewhere, approved calls that
// started are never re-run and are flagged for a human.
import { test, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawn } from 'node:child_process';
import { Server, PSQL } from '../integration/harness.mjs';
import {
  faultPolicy, tmpdir, call, tag, checkCalls, checkAudit, report, settled, markers, sleep,
  consoleSession, consolePage,
  SLOW, SWEEP_WITHIN_MS,
} from './lib.mjs';

const dir = tmpdir('kill');
const { policy, markers: mdir } = faultPolicy(dir);
const servers = [];
/** Stop every server of the test (each test's servers would claim the next test's queue). */
async function stopAll() {
  const errors = [];
  for (const s of servers.splice(0).reverse()) {
    if (s.exited) fs.rmSync(s.stateDir, { recursive: true, force: true });
    else await s.stop().catch((e) => { errors.push(e); return s.kill(); });
  }
  if (errors.length) throw errors[0];
}
afterEach(stopAll, { timeout: 120_000 * SLOW });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

async function approve(server, approvalId) {
  const r = await server.request('POST', `/v1/approvals/${approvalId}/approve`, { key: server.keys.reviewer, json: {} });
  assert.equal(r.status, 200, r.text);
}

/** n approved deploy calls through `via`, decided; returns their call records. */
async function approved(via, decider, n, sleepS) {
  const held = [];
  for (let i = 0; i < n; i++) {
    const tg = tag();
    const r = await call(via, tg, { tool: 'deploy', sleepS });
    assert.equal(r.status, 202, JSON.stringify(r));
    held.push(r);
  }
  for (const h of held) await approve(decider, h.body.approval_id);
  return held;
}

test('kill -9 of a lone server mid-run; its successor sweeps and requeues', async (t) => {
  const t0 = performance.now();
  // TOOLCAGE_MAX_SANDBOXES=4: the worker claims at most 3, so some approved calls are still
  // queued (and some claimed but held before start) when the process dies.
  const a = new Server('faults-kill-lone', { freshDatabase: true, policy, serveEnv: { TOOLCAGE_MAX_SANDBOXES: '4' } });
  servers.push(a);
  await a.start();
  const held = await approved(a, a, 6, 4);
  for (let i = 0; i < 50 && held.filter((h) => markers(mdir, h.tag).start).length < 2; i++) await sleep(100);
  // The one free slot: one direct call runs, the others are refused (overloaded) or wait.
  const direct = Array.from({ length: 2 }, () => call(a, tag(), { sleepS: 4 }));
  await sleep(600);
  await a.kill();
  const tKill = performance.now();
  const directCalls = await Promise.all(direct);
  for (const c of directCalls) assert.ok(c.status === 'neterr' || c.status === 503, `${c.tag}: the killed server answered ${c.status}`);

  // A new process on the same database: it sweeps the dead instance, reruns what never started.
  const b = await a.peer('faults-kill-lone-successor');
  servers.push(b);
  const calls = [...directCalls, ...held];
  const rows = await settled(b, calls.map((c) => c.tag), SWEEP_WITHIN_MS + 10_000 * SLOW);
  const sweptMs = performance.now() - tKill;
  const counts = await checkCalls(b, calls, mdir);
  let requeuedRan = 0, flagged = 0;
  for (const h of held) {
    const row = rows.get(h.tag);
    const mk = markers(mdir, h.tag);
    if (row.status === 'completed') {
      requeuedRan += row.actions.includes('execution.requeued') ? 1 : 0;
    } else {
      assert.equal(row.result.error, 'interrupted_after_start', `${h.tag}: ${JSON.stringify(row)}`);
      assert.equal(row.needs_review, true, h.tag);
      assert.ok(mk.start === 1 && mk.end === 0, `${h.tag}: ${JSON.stringify(mk)}`);
      flagged++;
    }
  }
  assert.ok(flagged >= 2, `approved calls that had started: ${flagged}`);
  for (const c of directCalls.filter((d) => rows.has(d.tag))) {
    const row = rows.get(c.tag);
    assert.match(row.result.error, /^interrupted_(before|after)_start$/, JSON.stringify(row));
    assert.equal(row.needs_review, false);
  }
  // Flagged calls are visible to reviewers in the API.
  const f = held.find((h) => rows.get(h.tag).needs_review);
  const ap = await b.request('GET', `/v1/approvals/${f.body.approval_id}`, { key: b.keys.reviewer });
  assert.equal(ap.json.needs_review, true);
  const ex = await b.request('GET', `/v1/executions/${f.body.id}`, { key: b.keys.agent });
  assert.equal(ex.json.needs_review, true);
  assert.equal(ex.json.started, true);
  // ... and to humans in the console: the execution page, the approval page, the list.
  const cookie = await consoleSession(b, 'reviewer');
  assert.match(await consolePage(b, cookie, `/console/executions/${f.body.id}`), /id="needs-review"/);
  assert.match(await consolePage(b, cookie, `/console/approvals/${f.body.approval_id}`), /id="needs-review"/);
  assert.match(await consolePage(b, cookie, '/console/executions'), /needs review/);
  const fine = held.find((h) => rows.get(h.tag).status === 'completed');
  if (fine) assert.doesNotMatch(await consolePage(b, cookie, `/console/executions/${fine.body.id}`), /id="needs-review"/);
  // Long after: still one run each.
  await sleep(3500);
  for (const c of calls) assert.ok(markers(mdir, c.tag).start <= 1, c.tag);
  const checked = await checkAudit(b);
  report(t, 'kill -9 lone server', { ...counts, flagged, requeued_and_ran: requeuedRan, settled_after_kill_ms: Math.round(sweptMs), audit_records: checked, s: Math.round((performance.now() - t0) / 1000) });
});

test('kill -9 of one of two replicas mid-run: the other sweeps it live, its own calls unharmed', async (t) => {
  const t0 = performance.now();
  const a = new Server('faults-kill-replica-a', { freshDatabase: true, policy });
  servers.push(a);
  await a.start();
  const b = await a.peer('faults-kill-replica-b');
  servers.push(b);
  const onA = Array.from({ length: 4 }, () => call(a, tag(), { sleepS: 2 }));
  const onB = Array.from({ length: 4 }, () => call(b, tag(), { sleepS: 2 }));
  const held = await approved(a, b, 6, 2);
  await sleep(700);
  await b.kill();
  const tKill = performance.now();
  const [callsA, callsB] = [await Promise.all(onA), await Promise.all(onB)];
  for (const c of callsA) assert.equal(c.status, 200, JSON.stringify(c));
  const calls = [...callsA, ...callsB, ...held];
  const rows = await settled(a, calls.map((c) => c.tag), SWEEP_WITHIN_MS + 10_000 * SLOW);
  const settledMs = performance.now() - tKill;
  const counts = await checkCalls(a, calls, mdir);
  for (const c of callsA) assert.equal(rows.get(c.tag).status, 'completed');
  for (const c of callsB) {
    const row = rows.get(c.tag);
    assert.match(row.result?.error ?? '', /^interrupted_(before|after)_start$/, JSON.stringify(row));
  }
  // The sweep ran live (no restart of a), within the interval.
  assert.ok(settledMs < SWEEP_WITHIN_MS + 3000 * SLOW, `settled ${Math.round(settledMs)} ms after the kill`);
  await sleep(2500);
  for (const c of calls) assert.ok(markers(mdir, c.tag).start <= 1, c.tag);
  const checked = await checkAudit(a);
  report(t, 'kill -9 one of two replicas', { ...counts, settled_after_kill_ms: Math.round(settledMs), audit_records: checked, s: Math.round((performance.now() - t0) / 1000) });
});

test('kill -9 while claimed approved calls wait for their start record: requeued, run once', async (t) => {
  const t0 = performance.now();
  // Two slots, both taken by direct calls: approved calls stay queued until one is free.
  const a = new Server('faults-kill-unstarted', { freshDatabase: true, policy, serveEnv: { TOOLCAGE_MAX_SANDBOXES: '2' } });
  servers.push(a);
  await a.start();
  const dtags = [tag(), tag()];
  const direct = dtags.map((tg) => call(a, tg, { sleepS: 2 }));
  // Both programs running (their start records written) before anything else.
  assert.ok(await waitFor(() => dtags.every((tg) => markers(mdir, tg).start === 1), 10_000 * SLOW), 'the direct calls did not start');
  const held = await approved(a, a, 2, 0.5);
  // Hold the audit chain's head: nothing can append (the start records wait), claims can.
  const locker = lockAuditHead(a);
  try {
    await sleep(300);
    // The direct calls end, their slots free up, the worker claims the approved calls, the
    // launcher holds them ready, and their start records wait on the lock.
    const claimed = await waitFor(async () => Number((await a.sql(`SELECT count(*) FROM executions
      WHERE status = 'running' AND code_started_at IS NULL
      AND id IN (${held.map((h) => `'${h.body.id}'`).join(', ')})`)).trim()) === 2, 10_000 * SLOW);
    assert.ok(claimed, 'the approved calls were not claimed');
    await sleep(300);
    await a.kill();
  } finally {
    await locker.release();
  }
  const tKill = performance.now();
  const directCalls = await Promise.all(direct);
  for (const h of held) assert.equal(markers(mdir, h.tag).start, 0, `${h.tag} ran before the kill`);

  const b = await a.peer('faults-kill-unstarted-successor');
  servers.push(b);
  const calls = [...directCalls, ...held];
  const rows = await settled(b, calls.map((c) => c.tag), SWEEP_WITHIN_MS + 10_000 * SLOW);
  const counts = await checkCalls(b, calls, mdir);
  for (const h of held) {
    const row = rows.get(h.tag);
    assert.equal(row.status, 'completed', `${h.tag}: ${JSON.stringify(row)}`);
    assert.ok(row.actions.includes('execution.requeued'), JSON.stringify(row.actions));
    assert.equal(row.attempts, 2);
    assert.deepEqual(markers(mdir, h.tag), { start: 1, end: 1 });
  }
  const checked = await checkAudit(b);
  report(t, 'kill -9 before start (requeue)', { ...counts, requeued_and_ran: held.length, settled_after_kill_ms: Math.round(performance.now() - tKill), audit_records: checked, s: Math.round((performance.now() - t0) / 1000) });
});

/** A psql session holding audit_head's row lock until release() (or 60 s). */
function lockAuditHead(server) {
  const host = server.urls.owner.match(/host=(\S+)/)[1];
  const db = server.urls.owner.match(/dbname=(\S+)/)[1];
  const child = spawn(PSQL, ['-X', '-q', '-h', host, '-U', 'postgres', '-d', db, '-c',
    'BEGIN; SELECT 1 FROM audit_head FOR UPDATE; SELECT pg_sleep(60); COMMIT;'], {
    stdio: 'ignore', env: { ...process.env, PGAPPNAME: 'faults-locker' } });
  return {
    // A backend asleep does not notice its client leaving: end it from the server side.
    release: async () => {
      await server.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'faults-locker'");
      child.kill();
    },
  };
}

async function waitFor(fn, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await fn()) return true;
    await sleep(100);
  }
  return false;
}

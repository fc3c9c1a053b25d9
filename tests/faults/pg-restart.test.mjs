// PostgreSQL restarted under load, and in the middle of approved runs: no outcome is lost,
// rewritten or doubled; a live server never reports its own running calls as interrupted;
// every approved call runs exactly once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Server } from '../integration/harness.mjs';
import {
  faultPolicy, tmpdir, load, call, tag, pgRestart, checkCalls, checkAudit, report, settled,
  markers, logLines, sleep, SLOW,
} from './lib.mjs';

const dir = tmpdir('pg-restart');
const { policy, markers: mdir } = faultPolicy(dir);
const a = new Server('faults-pg-restart', { freshDatabase: true, policy });
let b = null;

before(async () => {
  await a.start();
  b = await a.peer('faults-pg-restart-b');
}, { timeout: 120_000 * SLOW });

after(async () => {
  if (b) await b.stop();
  await a.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 60_000 * SLOW });

async function decide(server, approvalId) {
  for (let i = 0; ; i++) {
    const r = await server.request('POST', `/v1/approvals/${approvalId}/approve`, { key: server.keys.reviewer, json: {} });
    if (r.status === 200) return r;
    assert.ok(r.status === 503 && i < 50, `approve: ${r.status} ${r.text.slice(0, 300)}`);
    await sleep(200);
  }
}

test('PostgreSQL restarted twice under load: every call keeps one true outcome', async (t) => {
  const t0 = performance.now();
  const gen = load(a, { clients: 6, sleepS: 0.3 });
  await sleep(1500);
  const r1 = await pgRestart();
  await sleep(1500);
  const r2 = await pgRestart();
  await sleep(2000);
  const calls = await gen.stop();
  // The server is itself again: a fresh call runs and is stored.
  const after1 = await call(a, tag());
  assert.equal(after1.status, 200, JSON.stringify(after1));
  calls.push(after1);
  const counts = await checkCalls(a, calls, mdir, { allowInterrupted: false });
  assert.ok(counts.byStatus.completed >= 10, JSON.stringify(counts));
  assert.ok(logLines(a, /the instance lock is held again/).length >= 1, 'the lock was not re-taken');
  const checked = await checkAudit(a);
  report(t, 'pg restart under load', { ...counts, restarts_ms: [Math.round(r1), Math.round(r2)], audit_records: checked, s: Math.round((performance.now() - t0) / 1000) });
});

test('PostgreSQL restarted while approved calls run on two servers: each runs exactly once', async (t) => {
  const t0 = performance.now();
  const held = [];
  for (let i = 0; i < 8; i++) {
    const tg = tag();
    const r = await call(i % 2 ? b : a, tg, { tool: 'deploy', sleepS: 1.5 });
    assert.equal(r.status, 202, JSON.stringify(r));
    held.push({ ...r, tag: tg });
  }
  await Promise.all(held.map((h, i) => decide(i % 2 ? a : b, h.body.approval_id)));
  // Wait until most have started (their start marker is on the host), then restart.
  for (let i = 0; i < 40 && held.filter((h) => markers(mdir, h.tag).start).length < 4; i++) await sleep(100);
  const ms = await pgRestart();
  // A long-poll that straddles nothing: ask after the restart, with wait.
  const rows = await settled(a, held.map((h) => h.tag), 30_000 * SLOW);
  for (const h of held) {
    const row = rows.get(h.tag);
    assert.equal(row.status, 'completed', `${h.tag}: ${JSON.stringify(row)}`);
    assert.deepEqual(markers(mdir, h.tag), { start: 1, end: 1 }, h.tag);
    assert.equal(row.needs_review, false);
  }
  const counts = await checkCalls(a, held, mdir, { allowInterrupted: false });
  // What a waiting agent learns is what is stored.
  for (const h of held) {
    const r = await a.request('GET', `/v1/executions/${h.body.id}?wait=5`, { key: a.keys.agent });
    assert.equal(r.status, 200);
    assert.equal(r.json.status, 'completed');
    assert.equal(r.json.started, true);
  }
  await checkAudit(a);
  report(t, 'pg restart mid-approval', { ...counts, restart_ms: Math.round(ms), s: Math.round((performance.now() - t0) / 1000) });
});

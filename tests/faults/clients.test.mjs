// Clients that hang up at random points, and overload bursts: a hang-up never leaves a call
// running (its result is stored and audited anyway); a refused call leaves nothing behind
// (no row, no audit record) and says when to retry.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Server } from '../integration/harness.mjs';
import {
  faultPolicy, tmpdir, call, tag, checkCalls, checkAudit, report, settled, markers, lit,
  sleep, SLOW,
} from './lib.mjs';

const dir = tmpdir('clients');
const { policy, markers: mdir } = faultPolicy(dir);
// Few slots, so that a burst overloads.
// TOOLCAGE_QUEUE_SECONDS=0: refused at once when full, as these overload tests expect (the
// queue for a slot is tested in tests/integration/slotq.test.mjs).
const a = new Server('faults-clients', { freshDatabase: true, policy, serveEnv: { TOOLCAGE_MAX_SANDBOXES: '4', TOOLCAGE_QUEUE_SECONDS: '0' } });

before(async () => { await a.start(); }, { timeout: 120_000 * SLOW });
after(async () => {
  await a.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 60_000 * SLOW });

test('60 clients, 4 at a time, hang up at random points (0-600 ms): every call is stored and audited', async (t) => {
  const t0 = performance.now();
  const calls = [];
  for (let round = 0; round < 15; round++) {
    // Every program outlives its client (0.6 s or more against a hang-up within 600 ms), so
    // each hang-up lands somewhere between sending the request and the end of the run.
    const batch = Array.from({ length: 4 }, (_, i) => call(a, tag(), {
      sleepS: 0.6 + (i % 3) * 0.15, abortAfterMs: Math.floor(Math.random() * 600) }));
    calls.push(...await Promise.all(batch));
    await sleep(1200); // the hung-up calls' sandboxes finish: the next round has its slots
  }
  const hungUp = calls.filter((c) => c.status === 'hangup').length;
  assert.ok(hungUp >= 30, `only ${hungUp} hang-ups`);
  const counts = await checkCalls(a, calls, mdir, { allowInterrupted: false });
  // A call that was accepted ran to its end and its outcome is stored, hang-up or not.
  const rows = await settled(a, calls.map((c) => c.tag));
  for (const c of calls.filter((x) => x.status === 'hangup' && rows.has(x.tag))) {
    const row = rows.get(c.tag);
    assert.equal(row.status, 'completed', `${c.tag}: ${JSON.stringify(row)}`);
    assert.ok(row.actions.includes('execution.complete'));
  }
  const checked = await checkAudit(a);
  report(t, 'client hang-ups', { ...counts, hung_up: hungUp, audit_records: checked, s: Math.round((performance.now() - t0) / 1000) });
});

test('overload bursts with TOOLCAGE_MAX_SANDBOXES=4: refusals leave no row, no audit record', async (t) => {
  const t0 = performance.now();
  const calls = [];
  for (let burst = 0; burst < 3; burst++) {
    calls.push(...await Promise.all(Array.from({ length: 16 }, () => call(a, tag(), { sleepS: 0.5 }))));
  }
  const refused = calls.filter((c) => c.status === 503);
  assert.ok(refused.length >= 12, `only ${refused.length} of ${calls.length} refused`);
  for (const c of refused) {
    assert.equal(c.body.type, 'urn:toolcage:problem:overloaded', JSON.stringify(c.body));
    assert.match(c.retryAfter ?? '', /^[0-9]+$/, 'Retry-After');
  }
  for (const c of calls.filter((x) => x.status !== 503)) assert.equal(c.status, 200, JSON.stringify(c));
  const counts = await checkCalls(a, calls, mdir, { allowInterrupted: false });
  assert.equal(counts.rejected, refused.length);
  // Not even an "execute" record for a refused call.
  const tags = refused.map((c) => lit(`%/markers/${c.tag}.start%`));
  const audited = (await a.sql(`SELECT count(*) FROM audit_log WHERE record->'params'->>'code' LIKE ANY (ARRAY[${tags.join(', ')}])`)).trim();
  assert.equal(audited, '0', 'refused calls left audit records');
  // Validation errors leave nothing either.
  const bad = await a.request('POST', '/v1/execute', { key: a.keys.agent, json: { tool: 'mark', code: 1 } });
  assert.equal(bad.status, 400);
  const checked = await checkAudit(a);
  report(t, 'overload bursts', { ...counts, audit_records: checked, s: Math.round((performance.now() - t0) / 1000) });
});

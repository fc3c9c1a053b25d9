// Every connection of the server cut under load (pg_terminate_backend): the pool drops the
// dead connections, the instance lock is taken back, no outcome is lost or rewritten, and no
// call is reported interrupted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Server } from '../integration/harness.mjs';
import {
  faultPolicy, tmpdir, load, call, tag, terminateBackends, checkCalls, checkAudit, report,
  logLines, sleep, SLOW,
} from './lib.mjs';

const dir = tmpdir('pg-terminate');
const { policy, markers: mdir } = faultPolicy(dir);
const a = new Server('faults-pg-terminate', { freshDatabase: true, policy });

before(async () => { await a.start(); }, { timeout: 120_000 * SLOW });
after(async () => {
  await a.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 60_000 * SLOW });

test('pooled, lock and listen connections terminated three times under load', async (t) => {
  const t0 = performance.now();
  const gen = load(a, { clients: 6, sleepS: 0.2 });
  let terminated = 0;
  for (let i = 0; i < 3; i++) {
    await sleep(1200);
    terminated += await terminateBackends(a);
  }
  await sleep(1500);
  const calls = await gen.stop();
  // The first call after the last cut is served by a fresh connection, not failed by a stale one.
  const next = await call(a, tag());
  assert.equal(next.status, 200, JSON.stringify(next));
  calls.push(next);
  const counts = await checkCalls(a, calls, mdir, { allowInterrupted: false });
  // A terminated pooled connection costs at most the requests using it at that instant.
  assert.ok((counts.told[503] || 0) <= 3 * 6, `too many refusals: ${JSON.stringify(counts)}`);
  assert.ok(logLines(a, /the instance lock is held again/).length >= 3, 'the lock was not re-taken each time');
  const checked = await checkAudit(a);
  report(t, 'pg_terminate_backend under load', { ...counts, backends_terminated: terminated, audit_records: checked, s: Math.round((performance.now() - t0) / 1000) });
});

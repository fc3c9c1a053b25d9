// A call waiting for a sandbox slot, and PostgreSQL frozen meanwhile (SIGSTOP of the cluster):
// its deadline (TOOLCAGE_QUEUE_SECONDS) needs no database, and it answers 503 overloaded on
// time. Before, the deadlines were kept by the worker thread, which also talks to the
// database: once it was held in a round trip (up to TOOLCAGE_DB_TIMEOUT_SECONDS + 5 s), the
// queued call waited that long too (server/worker.c, the deadlines' thread).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Server, assertProblem } from '../integration/harness.mjs';
import { faultPolicy, tmpdir, markCode, tag, pgFreeze, pgThaw, thawIfFrozen, report, sleep, SLOW } from './lib.mjs';

const dir = tmpdir('queue-frozen');
const { policy } = faultPolicy(dir);
const server = new Server('faults-queue-frozen', {
  freshDatabase: true, policy,
  serveEnv: { TOOLCAGE_DB_TIMEOUT_SECONDS: '2', TOOLCAGE_MAX_SANDBOXES: '1', TOOLCAGE_QUEUE_SECONDS: '2' },
});
const QUEUE_MS = 2000;

before(async () => { await server.start(); }, { timeout: 120_000 * SLOW });
after(async () => {
  thawIfFrozen();
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 120_000 * SLOW });

const execute = (code) =>
  server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'mark', code }, timeout: 120_000 });

test('a call queued for a slot answers 503 at its deadline while the database is frozen', async (t) => {
  // the only slot taken for 8 s
  const busy = execute(markCode(tag(), 8));
  await sleep(1500);
  const t0 = performance.now();
  const queued = execute('echo queued');
  await sleep(300 * SLOW); // (in the queue: the slot is busy)
  pgFreeze();
  let q, ms;
  try {
    q = await queued;
    ms = Math.round(performance.now() - t0);
  } finally {
    pgThaw();
  }
  assertProblem(q, 503, 'overloaded');
  assert.match(q.json.detail, /stayed busy while this call waited/);
  assert.ok(ms >= QUEUE_MS - 100, `answered in ${ms} ms, before its deadline`);
  assert.ok(ms < QUEUE_MS + 1500 * SLOW, `answered in ${ms} ms: ${ms - QUEUE_MS} ms after its deadline`);
  const b = await busy;
  assert.ok([200, 503].includes(b.status), `the busy call: ${b.status}`);
  assert.equal(server.exited, null, 'the server exited');
  report(t, 'queue-frozen', { queued_ms: ms, busy_status: b.status });
});

// PostgreSQL frozen (SIGSTOP of the whole cluster: a paused VM or an unreachable host looks
// the same to a client: connections open, nothing answers). statement_timeout cannot help
// (the server is not running to enforce it); every round trip is bounded on the server's own
// side (core/db.c): with TOOLCAGE_DB_TIMEOUT_SECONDS=2 a call that needs the database
// answers 503 within 2 + 5 s, its connection is given up, what needs no database answers
// within that bound too (an HTTP thread blocked in a round trip holds the other connections
// it serves), and once the cluster runs again calls run and are stored as before.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { Server, assertProblem } from '../integration/harness.mjs';
import { faultPolicy, tmpdir, pgFreeze, pgThaw, thawIfFrozen, report, logLines, SLOW } from './lib.mjs';

const dir = tmpdir('db-frozen');
const { policy } = faultPolicy(dir);
const server = new Server('faults-db-frozen', {
  freshDatabase: true, policy, serveEnv: { TOOLCAGE_DB_TIMEOUT_SECONDS: '2' },
});
const BOUND_MS = (2 + 5) * 1000; // the statement's bound and the reply's grace

before(async () => { await server.start(); }, { timeout: 120_000 * SLOW });
after(async () => {
  thawIfFrozen();
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 120_000 * SLOW });

const execute = (code, timeout = 60_000 * SLOW) =>
  server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'mark', code }, timeout });

test('a frozen PostgreSQL: calls answer 503 within the bound instead of hanging, liveness answers meanwhile, and calls run again once it thaws', async (t) => {
  const ok = await execute('echo before');
  assert.equal(ok.status, 200, ok.text.slice(0, 300));
  const givenUpBefore = logLines(server, /connection given up/).length;

  const pids = pgFreeze();
  let calls, live, again;
  try {
    // three at once: more than one connection of the pool meets the frozen server
    const t0 = performance.now();
    const pending = [1, 2, 3].map((i) => execute(`echo frozen-${i}`));
    await new Promise((r) => setTimeout(r, 500));
    // (an HTTP thread blocked in a round trip holds the other connections it serves: liveness
    // may wait for the bound too, once for each of the calls that thread serves before it)
    live = await server.request('GET', '/healthz', { timeout: (4 * BOUND_MS + 10_000) * SLOW });
    calls = await Promise.all(pending);
    const slowest = Math.max(...calls.map((c) => c.ms));
    const fastest = Math.min(...calls.map((c) => c.ms));
    for (const c of calls) {
      assertProblem(c, 503, 'unavailable');
      assert.ok(Number(c.headers.get('retry-after')) >= 1, `Retry-After ${c.headers.get('retry-after')}`);
    }
    // within the bound (twice: a call may wait for a connection another one holds until its
    // own bound), not for as long as the freeze
    assert.ok(slowest < (2 * BOUND_MS + 5_000) * SLOW, `the slowest answer took ${Math.round(slowest)} ms`);
    // each one gave up a round trip at the bound: not the pool's wait for a connection
    // (TC_DB_WAIT_MS, 5 s), which would say nothing of the round trips
    assert.ok(fastest >= BOUND_MS - 1_000, `a call answered in ${Math.round(fastest)} ms, before the bound`);
    assert.ok(performance.now() - t0 >= 2_000, 'answered before the statement bound: not the frozen server');
    assert.equal(live.status, 200, `/healthz while frozen: ${live.status}`);
    assert.ok(live.ms < (3 * BOUND_MS + 3_000) * SLOW, `/healthz took ${Math.round(live.ms)} ms`);
    assert.ok(logLines(server, /connection given up/).length > givenUpBefore, 'the log says a connection was given up');
    // still frozen, past the bound: no thread is held any more (before the bound, a thread
    // blocked in a round trip stayed there until the database answered again, and with it
    // every connection its HTTP thread served), so liveness answers at once
    again = await server.request('GET', '/healthz', { timeout: (BOUND_MS + 10_000) * SLOW });
    assert.equal(again.status, 200);
    assert.ok(again.ms < 1_500 * SLOW, `/healthz after the bound took ${Math.round(again.ms)} ms`);
  } finally {
    pgThaw();
  }
  assert.equal(server.exited, null, 'the server exited');

  // thawed: the pool makes its connections again; a call runs and is stored
  const tag = `thawed-${crypto.randomBytes(4).toString('hex')}`;
  let thawed;
  for (const until = Date.now() + 30_000 * SLOW; ;) {
    thawed = await execute(`echo ${tag}`);
    if (thawed.status !== 503 || Date.now() > until) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.equal(thawed.status, 200, thawed.text.slice(0, 300));
  assert.equal(thawed.json.status, 'completed');
  assert.match(thawed.json.stdout, new RegExp(tag));
  const stored = (await server.sql(`SELECT status FROM executions WHERE id = '${thawed.json.id}'`)).trim();
  assert.equal(stored, 'completed');
  report(t, 'a frozen database', { processes_frozen: pids.length, answers_ms: calls.map((c) => Math.round(c.ms)), healthz_ms: Math.round(live.ms), healthz_after_ms: Math.round(again.ms) });
});

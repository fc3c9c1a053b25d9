// The health listener (TOOLCAGE_HEALTH_PORT) while every HTTP thread is held. A frozen
// PostgreSQL holds an HTTP thread in a round trip for up to the bound (core/db.c), and with it
// every connection that thread serves: on the main port, a liveness probe may wait that long,
// and an orchestrator that restarts on failed liveness probes would restart a server whose
// sandboxes were running fine. The health listener has a thread of its own: /healthz answers at
// once whatever the HTTP threads wait for, /readyz answers 503 within its own short bound (not
// the round trips'), and both say so again once the database is back.
//
// One HTTP thread (TOOLCAGE_THREADS=1) and one call make "every thread held" certain; the
// main port's /healthz, asked at the same moment, is the control: it waits for the call.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Server, assertProblem } from '../integration/harness.mjs';
import { faultPolicy, tmpdir, pgFreeze, pgThaw, thawIfFrozen, report, freePort, SLOW } from './lib.mjs';

const dir = tmpdir('health-listener');
const { policy } = faultPolicy(dir);
const healthPort = await freePort();
const server = new Server('faults-health-listener', {
  freshDatabase: true, policy,
  serveEnv: { TOOLCAGE_DB_TIMEOUT_SECONDS: '2', TOOLCAGE_THREADS: '1', TOOLCAGE_HEALTH_PORT: String(healthPort) },
});
const BOUND_MS = (2 + 5) * 1000; // the statement's bound and the reply's grace
const READY_BOUND_MS = 1500; // api/health.c

before(async () => { await server.start(); }, { timeout: 120_000 * SLOW });
after(async () => {
  thawIfFrozen();
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 120_000 * SLOW });

async function health(p, timeout = 30_000 * SLOW) {
  const t0 = performance.now();
  const r = await fetch(`http://127.0.0.1:${healthPort}${p}`, { signal: AbortSignal.timeout(timeout) });
  const text = await r.text();
  return { status: r.status, ms: performance.now() - t0, json: text.startsWith('{') ? JSON.parse(text) : null, text };
}

test('with the database frozen and the only HTTP thread held, the health listener answers liveness at once and readiness 503 within its bound; the main port waits', async (t) => {
  // before: both ready, and the health listener serves nothing but health
  let h = await health('/readyz');
  assert.equal(h.status, 200, h.text);
  assert.equal(h.json.status, 'ready');
  const other = await health('/v1/tools');
  assert.equal(other.status, 404, 'the health listener answers only /healthz and /readyz');
  const ok = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'mark', code: 'echo before' } });
  assert.equal(ok.status, 200, ok.text.slice(0, 300));

  pgFreeze();
  let call, mainLive, live, ready, ready2;
  try {
    // the call takes the only HTTP thread into a round trip that will not be answered
    const pending = server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'mark', code: 'echo frozen' }, timeout: 60_000 * SLOW });
    await new Promise((r) => setTimeout(r, 500));
    const mainPending = server.request('GET', '/healthz', { timeout: 60_000 * SLOW });
    live = await health('/healthz');
    ready = await health('/readyz');
    // a failed answer is reused for a second (a flood of probes cannot keep the thread in
    // pings); the next one meets the connection the first gave up: its reconnect is bounded
    // the same way (a frozen server accepts, then says nothing)
    const again = await health('/readyz');
    assert.equal(again.status, 503);
    assert.ok(again.ms < 500 * SLOW, `a /readyz right after a failed one took ${Math.round(again.ms)} ms`);
    await new Promise((r) => setTimeout(r, 1_100));
    ready2 = await health('/readyz');
    assert.equal(ready2.status, 503);
    assert.ok(ready2.ms < READY_BOUND_MS + 1_500 * SLOW, `second /readyz took ${Math.round(ready2.ms)} ms`);
    [call, mainLive] = await Promise.all([pending, mainPending]);
    assertProblem(call, 503, 'unavailable');
    // the control: the main port's liveness waited for the held thread
    assert.ok(mainLive.ms >= 2_000, `main-port /healthz took ${Math.round(mainLive.ms)} ms: the thread was not held, the test proves nothing`);
    assert.equal(live.status, 200);
    assert.equal(live.json.status, 'ok');
    assert.ok(live.ms < 1_000 * SLOW, `health-listener /healthz took ${Math.round(live.ms)} ms while the HTTP thread was held`);
    assert.equal(ready.status, 503, ready.text);
    assert.equal(ready.json.checks.database, 'fail');
    assert.ok(ready.ms < READY_BOUND_MS + 1_500 * SLOW, `/readyz took ${Math.round(ready.ms)} ms (bound ${READY_BOUND_MS} ms)`);
    assert.ok(ready.ms < BOUND_MS - 2_000, 'readiness waited for the round trips\' bound');
  } finally {
    pgThaw();
  }
  // thawed: ready again
  for (const until = Date.now() + 30_000 * SLOW; ;) {
    h = await health('/readyz');
    if (h.status === 200 || Date.now() > until) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.equal(h.status, 200, h.text);
  assert.equal(server.exited, null, 'the server exited');
  report(t, 'the health listener', { call_ms: Math.round(call.ms), readyz2_ms: Math.round(ready2.ms), main_healthz_ms: Math.round(mainLive.ms), health_healthz_ms: Math.round(live.ms), readyz_ms: Math.round(ready.ms) });
});

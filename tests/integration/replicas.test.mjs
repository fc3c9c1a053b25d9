// Several replicas on one PostgreSQL (issue 15): three `toolcage serve` processes share the
// database, keys and master key. Any replica serves any execution, approval and long-poll; an
// approval decided on one runs exactly once somewhere; kill -9 of one replica mid-run leaves its
// started call interrupted (never run again) while the others keep serving; SIGTERM drains
// (running calls finish, new ones are refused with 503 draining, exit 0), and a drain that
// runs out kills what is left. The audit chain verifies afterwards.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { setup, SLOW, sleep } from './harness.mjs';
import { openEvents, joined } from './fixtures/sse.mjs';
import { APPROVAL_POLICY, hold, decide, getExecution, waitFinished, until, auditOf, actions, lit } from './fixtures/approval-helpers.mjs';

// A database of its own: `audit verify` walks the whole chain, made under this file's key only.
const a = setup('replicas', { policy: APPROVAL_POLICY, freshDatabase: true });
const peers = [];
after(async () => { for (const p of peers) if (!p.exited) await p.stop(); });
const tag = () => crypto.randomBytes(6).toString('hex');

async function peer(name, opts) {
  const p = await a.peer(name, opts);
  peers.push(p);
  return p;
}

/** The id of the running call whose code contains t (its `execute` record names the code). */
async function runningId(t) {
  let id = null;
  await until(async () => {
    id = (await a.sql(`SELECT e.id FROM executions e JOIN audit_log l
      ON l.action = 'execute' AND l.record->>'execution_id' = e.id::text
      WHERE e.status = 'running' AND e.code_started_at IS NOT NULL
        AND l.record->'params'->>'code' LIKE ${lit(`%${t}%`)}`)).trim() || null;
    return Boolean(id);
  }, 20_000 * SLOW, `the call ${t} to run`);
  return id;
}

const count = (trail, action) => trail.filter((r) => r.action === action).length;

test('any of three replicas serves any execution, approval and long-poll', async () => {
  const b = await peer('replicas-b');
  const c = await peer('replicas-c');
  const all = [a, b, c];
  // Calls spread over the three; each is read back from the other two.
  for (let i = 0; i < 9; i++) {
    const t = tag();
    const { json: r } = await all[i % 3].execute({ tool: 'shell', code: `echo ran-${t}` });
    assert.equal(r.status, 'completed');
    for (const other of [all[(i + 1) % 3], all[(i + 2) % 3]]) {
      const e = await getExecution(other, r.id);
      assert.equal(e.status, 'completed');
      assert.equal(e.stdout, `ran-${t}\n`);
    }
  }
  // Held on A, long-polled on C, approved on B: the poll on C wakes when the run ends,
  // wherever it ran, and it ran exactly once.
  const t = tag();
  const { json: held } = await hold(a, `echo deployed-${t}`);
  const poll = getExecution(c, held.id, { wait: 30, timeout: 60_000 * SLOW });
  await sleep(300);
  assert.equal((await decide(b, held.approval_id, 'approve')).status, 200);
  const done = await poll;
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.equal(done.stdout, `deployed-${t}\n`);
  const trail = await auditOf(a, held.id);
  assert.equal(count(trail, 'execution.start'), 1, JSON.stringify(actions(trail)));
  assert.equal(count(trail, 'execution.complete'), 1);
  await b.stop();
  await c.stop();
});

test('kill -9 of one replica mid-run: its started call ends interrupted, never runs again; the others serve', async () => {
  const b = await peer('replicas-kill-b');
  const c = await peer('replicas-kill-c');
  const t = tag();
  const call = c.execute({ tool: 'shell', code: `echo started-${t}; sleep 20; echo after-${t}`, limits: { timeout_ms: 60000 } }, { timeout: 90_000 * SLOW, expect: undefined }).catch((e) => e);
  const id = await runningId(t);
  await c.kill();
  const err = await call;
  assert.ok(err instanceof Error, 'the killed replica did not answer');
  // Another replica sweeps the dead one's row: final, interrupted, and not run again.
  const e = await waitFinished(b, id, 30);
  assert.notEqual(e.status, 'completed');
  assert.match(JSON.stringify(e), /interrupted/);
  await sleep(2000);
  const trail = await auditOf(a, id);
  assert.equal(count(trail, 'execution.start'), 1, JSON.stringify(actions(trail)));
  assert.equal(count(trail, 'execution.interrupted'), 1, JSON.stringify(actions(trail)));
  assert.equal(count(trail, 'execution.complete'), 0);
  // The two others keep serving.
  for (const s of [a, b]) assert.equal((await s.execute({ tool: 'shell', code: 'echo alive' })).json.stdout, 'alive\n');
  await b.stop();
});

/** A raw HTTP/1.1 POST /v1/execute over an already open socket; resolves {status, body}. */
function postOver(sock, key, payload) {
  const body = JSON.stringify(payload);
  return new Promise((resolve, reject) => {
    let got = '';
    sock.on('data', (d) => { got += d.toString('utf8'); });
    sock.on('close', () => {
      const m = got.match(/^HTTP\/1\.1 (\d{3})/);
      if (!m) return reject(new Error(`no answer: ${JSON.stringify(got)}`));
      resolve({ status: Number(m[1]), head: got.slice(0, got.indexOf('\r\n\r\n')), body: got.slice(got.indexOf('\r\n\r\n') + 4) });
    });
    sock.on('error', reject);
    sock.write(`POST /v1/execute HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
}

test('SIGTERM drains: the running call finishes, a new one is refused (503 draining), exit 0', async () => {
  const d = await peer('replicas-drain', { serveEnv: { TOOLCAGE_DRAIN_SECONDS: '30' } });
  const t = tag();
  const call = d.execute({ tool: 'shell', code: `echo started-${t}; sleep 3; echo finished-${t}` }, { timeout: 60_000 * SLOW });
  await runningId(t);
  // A connection opened before the signal (a new one would be refused: the listener is closed).
  const sock = net.connect(d.port, '127.0.0.1');
  await new Promise((r) => sock.on('connect', r));
  const t0 = performance.now();
  d.proc.kill('SIGTERM');
  await sleep(300);
  const refused = await postOver(sock, a.keys.agent, { tool: 'shell', code: 'echo never' });
  assert.equal(refused.status, 503, refused.head);
  assert.equal(JSON.parse(refused.body).type, 'urn:toolcage:problem:draining');
  assert.match(refused.head, /^Retry-After: \d+\r?$/mi);
  const { json: r } = await call;
  assert.equal(r.status, 'completed');
  assert.equal(r.stdout, `started-${t}\nfinished-${t}\n`);
  const exit = await d.exit;
  const ms = performance.now() - t0;
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(ms < 20_000 * SLOW, `the drain took ${ms.toFixed(0)} ms`);
  assert.match(d.logTail(40), /"msg":"drained"/);
  // nothing ran for the refused call
  assert.equal((await a.sql(`SELECT count(*) FROM audit_log WHERE action = 'execute' AND record->'params'->>'code' = 'echo never'`)).trim(), '0');
});

test('a drain that runs out kills what is left; the call ends, it is not left running', async () => {
  const d = await peer('replicas-drain-short', { serveEnv: { TOOLCAGE_DRAIN_SECONDS: '1' } });
  const t = tag();
  const call = d.execute({ tool: 'shell', code: `echo started-${t}; sleep 30; echo after-${t}`, limits: { timeout_ms: 60000 } }, { timeout: 60_000 * SLOW, expect: undefined }).catch((e) => e);
  const id = await runningId(t);
  const t0 = performance.now();
  d.proc.kill('SIGTERM');
  const exit = await d.exit;
  const ms = performance.now() - t0;
  assert.deepEqual(exit, { code: 0, signal: null });
  assert.ok(ms >= 900 && ms < 15_000 * SLOW, `exit after ${ms.toFixed(0)} ms (drain 1 s)`);
  await call;
  const e = await waitFinished(a, id, 30);
  assert.notEqual(e.status, 'running');
  assert.doesNotMatch(e.stdout ?? '', /after-/);
});

test('a streamed call is followed live from another replica through PostgreSQL; its shared output is removed after', async () => {
  const b = await peer('replicas-live');
  const t = tag();
  const code = `for i in 1 2 3; do echo live-${t}-$i; sleep 1; done; echo err-${t} >&2`;
  const res = await a.request('POST', '/v1/execute', { key: a.keys.agent, json: { tool: 'shell', code, stream: true, async: true } });
  assert.equal(res.status, 202, res.text);
  const id = res.json.id;
  const s = await openEvents(b, 'GET', `/v1/executions/${id}/events`, { key: a.keys.agent });
  assert.equal(s.status, 200);
  const first = await s.next((e) => e.event === 'stdout' && e.data.text.includes(`live-${t}-1`), 15_000 * SLOW);
  // the rows b reads exist while it runs
  assert.notEqual((await a.sql(`SELECT count(*) FROM execution_output WHERE execution_id = '${id}'`)).trim(), '0');
  const events = await s.rest();
  const result = events.at(-1);
  assert.equal(result.event, 'result', JSON.stringify(events.map((e) => e.event)));
  assert.equal(result.data.status, 'completed');
  // live: the first line long before the end; exactly the result's text, nothing twice
  assert.ok(first.at < result.at - 1000, `first line at ${first.at} ms, result at ${result.at} ms`);
  assert.equal(joined(events, 'stdout'), result.data.stdout);
  assert.equal(joined(events, 'stderr'), result.data.stderr);
  assert.equal(result.data.stdout, `live-${t}-1\nlive-${t}-2\nlive-${t}-3\n`);
  assert.ok(events.filter((e) => e.event === 'stdout').length >= 2, 'more than one output event: they came as written');
  // re-attached on b after the first line: the rest only
  const again = await openEvents(b, 'GET', `/v1/executions/${id}/events`, { key: a.keys.agent, headers: { 'last-event-id': first.id } });
  const rest = await again.rest();
  assert.equal(joined(rest, 'stdout'), result.data.stdout.slice(first.data.text.length));
  // another tenant cannot follow it
  const other = await b.request('GET', `/v1/executions/${id}/events`, { key: a.keys.otherAgent });
  assert.equal(other.status, 404);
  await until(async () => (await a.sql(`SELECT count(*) FROM execution_output WHERE execution_id = '${id}'`)).trim() === '0', 10_000 * SLOW, 'the shared rows to be removed');
  await b.stop();
});

test('the audit chain verifies after all of it', async () => {
  const { stdout } = await a.cli(['audit', 'verify']);
  assert.equal(JSON.parse(stdout).ok, true, stdout);
});

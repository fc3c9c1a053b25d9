// Streaming (issue 21): `Accept: text/event-stream` on POST /v1/execute answers Server-Sent
// Events as the program writes, redacted by the same rules as the result; a client that leaves
// does not end the call and re-attaches with Last-Event-ID (GET /v1/executions/{id}/events),
// also on another replica (through the database); held calls stream held/approved/result.
// Evidence: arrival times against the program's own sleeps, the concatenated events against
// the stored result, no piece of a secret written across writes in any event, the outcome
// stored after the client left, another tenant's 404.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup, assertProblem, assertSchema, SLOW, UUID_RE } from './harness.mjs';
import { APPROVAL_POLICY, getExecution, waitFinished, decide } from './fixtures/approval-helpers.mjs';
import { openEvents, joined } from './fixtures/sse.mjs';

const server = setup('stream', { policy: APPROVAL_POLICY, serveEnv: { TOOLCAGE_SSE_HEARTBEAT_SECONDS: '1' } });
const tag = () => crypto.randomBytes(6).toString('hex');
const ID_RE = /^\d+-\d+$/;

/** Every output event's id is the running count of stdout and stderr bytes. */
function assertOffsets(events) {
  let out = 0;
  let err = 0;
  for (const e of events.filter((x) => x.event === 'stdout' || x.event === 'stderr')) {
    assertSchema('StreamText', e.data, `${e.event} event`);
    if (e.event === 'stdout') out += Buffer.byteLength(e.data.text);
    else err += Buffer.byteLength(e.data.text);
    assert.match(e.id, ID_RE);
    assert.equal(e.id, `${out}-${err}`);
  }
}

test('Accept: text/event-stream streams output as the program writes it; the pieces are exactly the result', async () => {
  const t = tag();
  const s = await openEvents(server, 'POST', '/v1/execute', {
    key: server.keys.agent,
    json: { tool: 'shell', code: `echo first-${t}; sleep 2; echo second-${t}; echo err-${t} >&2` },
  });
  assert.equal(s.status, 200);
  assert.match(s.headers.get('content-type'), /^text\/event-stream/);
  const first = await s.next((e) => e.event === 'stdout' && e.data.text.includes(`first-${t}`));
  const events = await s.rest();
  assert.equal(events[0].event, 'execution');
  assertSchema('AcceptedExecution', events[0].data);
  assert.match(events[0].data.id, UUID_RE);
  const result = events.at(-1);
  assert.equal(result.event, 'result');
  assert.equal(result.id, 'end');
  assertSchema('Execution', result.data, 'result event');
  assert.equal(result.data.status, 'completed');
  // The first line was not held back until the end: it came while the program slept 2 s.
  assert.ok(result.at - first.at >= 1500, `first line at ${first.at.toFixed(0)} ms, result at ${result.at.toFixed(0)} ms`);
  assert.equal(joined(events, 'stdout'), `first-${t}\nsecond-${t}\n`);
  assert.equal(joined(events, 'stdout'), result.data.stdout);
  assert.equal(joined(events, 'stderr'), result.data.stderr);
  assertOffsets(events);
  const stored = await getExecution(server, events[0].data.id);
  assert.equal(stored.stdout, result.data.stdout);
  assert.equal(stored.status, 'completed');
});

test('a secret written in pieces never appears in any event, not even in part', async () => {
  const t = tag();
  const alnum = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  const rnd = (n) => Array.from(crypto.randomBytes(n), (b) => alnum[b % alnum.length]).join('');
  const gh = `ghp_${rnd(36)}`;
  const aws = `AKIA${rnd(16).toUpperCase().replace(/[^A-Z0-9]/g, 'Q')}`;
  const pw = rnd(20);
  // Each secret goes out in three writes, 0.3 s apart (separate chunks: the launcher sends at
  // most every 20 ms), on stdout and stderr.
  const pieces = (s) => [s.slice(0, 7), s.slice(7, 19), s.slice(19)];
  const script = [`echo start-${t}`, 'sleep 0.5'];
  for (const [fd, secret] of [['1', gh], ['2', aws], ['1', `password=${pw}`]]) {
    for (const p of pieces(secret)) script.push(`printf '%s' '${p}' >&${fd}`, 'sleep 0.3');
    script.push(`echo ' end' >&${fd}`);
  }
  const s = await openEvents(server, 'POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: script.join('\n') } });
  assert.equal(s.status, 200);
  const start = await s.next((e) => e.event === 'stdout' && e.data.text.includes(`start-${t}`));
  const events = await s.rest();
  const result = events.at(-1);
  assert.equal(result.event, 'result');
  assert.ok(result.at - start.at >= 1000, 'the first line came before the secrets were written');
  const out = events.filter((e) => e.event === 'stdout' || e.event === 'stderr');
  assert.ok(out.length >= 2, `output events: ${out.length}`);
  const secretBits = [gh.slice(4), aws.slice(4), pw].flatMap((s) => [s.slice(0, 6), s.slice(8, 14), s.slice(-6)]);
  for (const e of out) {
    for (const bit of secretBits) assert.ok(!e.data.text.includes(bit), `a piece of a secret (${bit}) in a ${e.event} event: ${JSON.stringify(e.data.text)}`);
    assert.ok(!e.data.text.includes('ghp_') && !e.data.text.includes('AKIA'), JSON.stringify(e.data.text));
  }
  // Nothing held back more than it had to: every event is final text, and together they are the result.
  assert.equal(joined(events, 'stdout'), result.data.stdout);
  assert.equal(joined(events, 'stderr'), result.data.stderr);
  assert.match(result.data.stdout, /\[REDACTED:github_token\] end\n/);
  assert.match(result.data.stdout, /password=\[REDACTED:assignment\] end\n/);
  assert.match(result.data.stderr, /\[REDACTED:aws_access_key\] end\n/);
  assertOffsets(events);
});

test('a client that leaves does not end the call; it re-attaches with Last-Event-ID and misses nothing', async () => {
  const t = tag();
  const s = await openEvents(server, 'POST', '/v1/execute', {
    key: server.keys.agent,
    json: { tool: 'shell', code: `echo one-${t}; sleep 1.5; echo two-${t}; sleep 0.5; echo three-${t}` },
  });
  const exec = await s.next((e) => e.event === 'execution');
  const one = await s.next((e) => e.event === 'stdout' && e.data.text.includes(`one-${t}`));
  assert.equal(one.data.text, `one-${t}\n`);
  s.abort();
  const id = exec.data.id;
  // The run went on without its client and its outcome is stored.
  const done = await waitFinished(server, id, 30 * SLOW);
  assert.equal(done.status, 'completed');
  assert.equal(done.stdout, `one-${t}\ntwo-${t}\nthree-${t}\n`);
  // Re-attach after the last event seen: only what was missed, then the result.
  const again = await openEvents(server, 'GET', `/v1/executions/${id}/events`, { key: server.keys.agent, headers: { 'last-event-id': one.id } });
  assert.equal(again.status, 200);
  const rest = await again.rest();
  assert.equal(joined(rest, 'stdout'), `two-${t}\nthree-${t}\n`);
  assert.equal(rest.at(-1).event, 'result');
  assert.equal(rest.at(-1).data.stdout, done.stdout);
  // From the start, and after the end.
  const all = await openEvents(server, 'GET', `/v1/executions/${id}/events`, { key: server.keys.reviewer });
  assert.equal(joined(await all.rest(), 'stdout'), done.stdout);
  const none = await openEvents(server, 'GET', `/v1/executions/${id}/events`, { key: server.keys.agent, headers: { 'last-event-id': 'end' } });
  assert.deepEqual((await none.rest()).map((e) => e.event), []);
});

test('another replica follows the call through the database; "stream": true with async keeps live events here', async () => {
  const t = tag();
  const peer = await server.peer();
  try {
    const res = await server.request('POST', '/v1/execute', {
      key: server.keys.agent,
      json: { tool: 'shell', code: `echo a-${t}; sleep 1.5; echo b-${t}`, async: true, stream: true },
    });
    assert.equal(res.status, 202);
    const id = res.json.id;
    // Here: the live log (its first output came before the end).
    const here = await openEvents(server, 'GET', `/v1/executions/${id}/events`, { key: server.keys.agent });
    const a = await here.next((e) => e.event === 'stdout');
    // There: the database, followed until the outcome.
    const there = await openEvents(peer, 'GET', `/v1/executions/${id}/events`, { key: server.keys.agent });
    const ev = await there.rest();
    assert.equal(ev[0].event, 'execution');
    assert.equal(ev[0].data.status, 'running');
    assert.equal(ev.at(-1).event, 'result');
    assert.equal(joined(ev, 'stdout'), `a-${t}\nb-${t}\n`);
    const hereEvents = await here.rest();
    assert.ok(hereEvents.at(-1).at - a.at >= 1000, 'the live log gave the first line before the end');
    assert.equal(joined(hereEvents, 'stdout'), `a-${t}\nb-${t}\n`);
    // Resuming on the other replica from an offset: the rest of the stored output.
    const tail = await openEvents(peer, 'GET', `/v1/executions/${id}/events`, { key: server.keys.agent, headers: { 'last-event-id': `${Buffer.byteLength(`a-${t}\n`)}-0` } });
    assert.equal(joined(await tail.rest(), 'stdout'), `b-${t}\n`);
  } finally {
    await peer.stop();
  }
});

test('a held call streams held, approved, its output as the approved run writes it, and the result; a denied one held and the result', async () => {
  const t = tag();
  const s = await openEvents(server, 'POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: `echo first-${t}; sleep 2; echo deployed-${t}` } });
  assert.equal(s.status, 200);
  const held = await s.next((e) => e.event === 'held');
  assertSchema('HeldExecution', held.data);
  assert.equal((await decide(server, held.data.approval_id, 'approve', { reason: 'ok' })).status, 200);
  const events = await s.rest();
  assert.deepEqual(events.map((e) => e.event).filter((e) => e !== 'stdout'), ['held', 'approved', 'result']);
  const result = events.at(-1);
  assert.equal(result.data.status, 'completed');
  assert.equal(joined(events, 'stdout'), `first-${t}\ndeployed-${t}\n`);
  // the worker ran it: its first line came while it slept, through the database
  const first = events.find((e) => e.event === 'stdout' && e.data.text.includes(`first-${t}`));
  assert.ok(first.at < result.at - 1000, `first line at ${first.at} ms, result at ${result.at} ms`);
  const rows = () => server.sql(`SELECT count(*) FROM execution_output WHERE execution_id = '${result.data.id}'`);
  for (let i = 0; i < 50 && (await rows()).trim() !== '0'; i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal((await rows()).trim(), '0', 'the shared rows are gone');

  const d = await openEvents(server, 'POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: `echo never-${t}` } });
  const h2 = await d.next((e) => e.event === 'held');
  assert.equal((await decide(server, h2.data.approval_id, 'deny', { reason: 'no' })).status, 200);
  const ev2 = await d.rest();
  assert.deepEqual(ev2.map((e) => e.event), ['held', 'result']);
  assert.equal(ev2.at(-1).data.status, 'denied');
});

test('idle streams get heartbeats; refusals are problems, not streams; another tenant sees nothing', async () => {
  const t = tag();
  const s = await openEvents(server, 'POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: `sleep 3; echo late-${t}` } });
  const events = await s.rest();
  assert.ok(s.comments >= 2, `heartbeats: ${s.comments}`);
  const id = events[0].data.id;
  assert.equal(joined(events, 'stdout'), `late-${t}\n`);

  for (const [json, status, type] of [
    [{ tool: 'shell' }, 400, 'validation'],
    [{ tool: 'nope', code: 'x' }, 404, 'unknown-tool'],
    [{ tool: 'shell', code: 'x', stream: 'yes' }, 400, 'validation'],
  ]) {
    const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json, headers: { accept: 'text/event-stream' } });
    assertProblem(res, status, type);
  }
  assertProblem(await server.request('GET', `/v1/executions/${id}/events`, { key: server.keys.otherAgent }), 404, 'not-found');
  assertProblem(await server.request('GET', `/v1/executions/${crypto.randomUUID()}/events`, { key: server.keys.agent }), 404, 'not-found');
  assertProblem(await server.request('GET', '/v1/executions/not-a-uuid/events', { key: server.keys.agent }), 404, 'not-found');
  for (const bad of ['x', '1-', '-1', '1-2-3', '99999999999999999999-0', 'a'.repeat(41)])
    assertProblem(await server.request('GET', `/v1/executions/${id}/events`, { key: server.keys.agent, headers: { 'last-event-id': bad } }), 400, 'validation');
  assertProblem(await server.request('GET', `/v1/executions/${id}/events`), 401, 'unauthorized');
  // Accept without the event stream, or refusing it (q=0): the JSON answer.
  for (const accept of ['application/json', 'text/event-stream;q=0, application/json', 'text/event-streams']) {
    const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'echo j' }, headers: { accept } });
    assert.equal(res.status, 200);
    assert.equal(res.json.stdout, 'j\n', accept);
  }
});

test('cancel_on_disconnect: a client that leaves its stream cancels its call (a held one is withdrawn, a session\'s call interrupted); it needs a stream', async () => {
  const key = server.keys.agent;
  const t = tag();
  const s = await openEvents(server, 'POST', '/v1/execute', { key, json: { tool: 'shell', code: `echo started-${t}; sleep 30; echo never-${t}`, cancel_on_disconnect: true } });
  assert.equal(s.status, 200);
  await s.next((e) => e.event === 'stdout' && e.data.text.includes(`started-${t}`));
  const id = s.events[0].data.id;
  const t0 = Date.now();
  s.abort();
  // noticed at the next event or heartbeat (1 s here), then killed
  const done = await waitFinished(server, id, 20 * SLOW);
  assert.equal(done.status, 'cancelled', JSON.stringify(done));
  assert.ok(Date.now() - t0 < 15_000 * SLOW, 'long before its sleep would have ended');
  assert.match(done.stdout, new RegExp(`started-${t}`));
  assert.doesNotMatch(done.stdout, /never/);

  // held: the request for approval is withdrawn
  const h = await openEvents(server, 'POST', '/v1/execute', { key, json: { tool: 'deploy', code: `echo held-${t}`, cancel_on_disconnect: true } });
  const held = await h.next((e) => e.event === 'held');
  h.abort();
  const withdrawn = await waitFinished(server, held.data.id, 20 * SLOW);
  assert.equal(withdrawn.status, 'cancelled', JSON.stringify(withdrawn));

  // a session's call: interrupted, the session lives on
  const opened = await server.request('POST', '/v1/sessions', { key, json: { tool: 'shell' } });
  assert.equal(opened.status, 201, opened.text);
  const sid = opened.json.id;
  const c = await openEvents(server, 'POST', `/v1/sessions/${sid}/execute`, { key, json: { code: `X=kept; echo in-${t}; sleep 30`, cancel_on_disconnect: true } });
  await c.next((e) => e.event === 'stdout' && e.data.text.includes(`in-${t}`));
  const cid = c.events[0].data.id;
  c.abort();
  const cd = await waitFinished(server, cid, 20 * SLOW);
  assert.equal(cd.status, 'cancelled', JSON.stringify(cd));
  const after = await server.request('POST', `/v1/sessions/${sid}/execute`, { key, json: { code: 'echo $X' } });
  assert.equal(after.json.stdout, 'kept\n');

  // without it (the default) a client that leaves does not end its call: the test above
  // ('a client that leaves...'); asked for without a stream it is refused
  for (const [p, json] of [['/v1/execute', { tool: 'shell', code: 'true', cancel_on_disconnect: true }],
    ['/v1/execute', { tool: 'shell', code: 'true', cancel_on_disconnect: 'yes' }],
    [`/v1/sessions/${sid}/execute`, { code: 'true', cancel_on_disconnect: true }]]) {
    assertProblem(await server.request('POST', p, { key, json }), 400, 'validation');
  }
  const stream = await server.request('POST', '/v1/execute', { key, json: { tool: 'shell', code: 'true', cancel_on_disconnect: true, async: true }, headers: { accept: 'text/event-stream' } });
  assertProblem(stream, 400, 'validation');
  assert.equal((await server.request('DELETE', `/v1/sessions/${sid}`, { key })).status, 200);
});

test('SIGTERM: a running stream gets its result (the drain lets the run end), a held one ends; the server exits cleanly', async () => {
  const t = tag();
  const peer = await server.peer();
  let stopped = false;
  try {
    const run = await openEvents(peer, 'POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: `echo a-${t}; sleep 1; echo b-${t}` } });
    const held = await openEvents(peer, 'POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: `echo x-${t}` } });
    await held.next((e) => e.event === 'held');
    await run.next((e) => e.event === 'stdout');
    const stopping = peer.stop(); // asserts exit code 0 and no sanitizer report
    const events = await run.rest();
    assert.equal(events.at(-1).event, 'result');
    assert.equal(events.at(-1).data.status, 'completed');
    assert.equal(joined(events, 'stdout'), `a-${t}\nb-${t}\n`);
    await held.rest(); // ended, without an outcome to give: a client re-attaches elsewhere
    assert.ok(!held.events.some((e) => e.event === 'result'));
    await stopping;
    stopped = true;
    // The held call is still held (any replica's GET .../events follows it).
    assert.equal((await getExecution(server, held.events[0].data.id)).status, 'pending_approval');
  } finally {
    if (!stopped) await peer.stop().catch(() => {});
  }
});

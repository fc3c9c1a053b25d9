// Webhook delivery off the worker (server/webhook.h): a thread of its own with a libcurl multi
// handle, claims with a lease, per-tenant caps, back-off kept in the table, bounded attempts,
// several servers on one database, a prompt shutdown. The receivers run on loopback, so this
// server allows private targets (TOOLCAGE_WEBHOOK_ALLOW_PRIVATE=1) - but never metadata - and
// its environment points http_proxy, https_proxy and ALL_PROXY at a trap that must never see
// a connection.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { setup, Server, SLOW, sleep, assertProblem, createKey } from './harness.mjs';
import { APPROVAL_POLICY, hold, decide, waitFinished, getExecution, until, sqlJson, lit } from './fixtures/approval-helpers.mjs';
import { startReceiver, verifySignature } from './fixtures/webhook-receiver.mjs';

/** A TCP server that accepts and never answers; counts connections. */
async function blackHole() {
  const socks = new Set();
  const st = { total: 0, open: () => socks.size, at: [] };
  const srv = net.createServer((s) => {
    st.total++;
    st.at.push(Date.now());
    socks.add(s);
    s.resume(); // read (and drop) the request, so that the client's FIN is seen
    s.on('close', () => socks.delete(s));
    s.on('error', () => {});
  });
  await new Promise((r) => srv.listen(0, '127.0.0.1', r));
  st.port = srv.address().port;
  st.close = () => new Promise((r) => { for (const s of socks) s.destroy(); srv.close(() => r()); });
  return st;
}

const trap = await blackHole(); // the "proxy"
const TRAP = `http://127.0.0.1:${trap.port}`;
const serveEnv = {
  TOOLCAGE_WEBHOOK_ALLOW_PRIVATE: '1',
  TOOLCAGE_WEBHOOK_MAX_ATTEMPTS: '3',
  TOOLCAGE_WEBHOOK_TENANT_CONCURRENCY: '4',
  http_proxy: TRAP, https_proxy: TRAP, HTTPS_PROXY: TRAP, ALL_PROXY: TRAP, all_proxy: TRAP, no_proxy: '', NO_PROXY: '',
};
const server = setup('webhook-delivery', { policy: APPROVAL_POLICY, serveEnv });
const cleanups = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
  await trap.close();
});

async function receiver(respond) {
  const r = await startReceiver(respond);
  cleanups.push(() => r.close());
  return r;
}

const row = (id) => sqlJson(server, `SELECT json_build_object('attempts', attempts, 'delivered', delivered_at IS NOT NULL,
  'gave_up', gave_up_at IS NOT NULL, 'last_error', last_error, 'last_status', last_status, 'leased', lease_until IS NOT NULL,
  'leased_by', leased_by, 'backoff_ms', round(extract(epoch FROM next_attempt_at - last_attempt_at) * 1000))
  FROM webhook_deliveries WHERE execution_id = ${lit(id)}`);

async function direct(key, callback, code = 'echo hooked') {
  const res = await server.request('POST', '/v1/execute', { key, json: { tool: 'shell', code, callback_url: callback } });
  assert.equal(res.status, 200, res.text.slice(0, 300));
  return res.json;
}

test('ten deliveries to a receiver that never answers stall neither another tenant nor long-polls', async (t) => {
  const hole = await blackHole();
  cleanups.push(() => hole.close());
  // a tenant of its own, so that its stuck deliveries (they go on in the background) keep
  // their cap to themselves in the later tests too
  const stormTenant = `${server.tenants.a}-storm`;
  const storm = await createKey(stormTenant, 'agent', server.env);
  const stuck = [];
  for (let i = 0; i < 10; i++) stuck.push((await direct(storm, `http://127.0.0.1:${hole.port}/never/${i}`)).id);
  // at most TOOLCAGE_WEBHOOK_TENANT_CONCURRENCY (4) of them in flight at once
  await until(() => hole.open() >= 4, 5000 * SLOW, 'the stuck deliveries to start');
  await sleep(700);
  assert.equal(hole.open(), 4, `${hole.open()} connections of one tenant at once`);
  const leased = Number((await server.sql(`SELECT count(*) FROM webhook_deliveries WHERE execution_id IN (${stuck.map(lit).join(',')}) AND lease_until > now()`)).trim());
  assert.equal(leased, 4);

  // another tenant's approved call starts at once (the worker used to spend up to 40 s
  // delivering first: one such approval started after 27 s)
  const rxB = await receiver();
  const { json: heldB } = await hold(server, 'echo tenant-b', { key: server.keys.otherAgent, extra: { callback_url: rxB.url('/b') } });
  const approvedAt = Date.now();
  const d = await decide(server, heldB.approval_id, 'approve', { key: server.keys.otherAdmin });
  assert.equal(d.status, 200, d.text);
  let doneB;
  for (let i = 0; i < 20 && !['completed', 'failed', 'error'].includes(doneB?.status); i++) {
    doneB = await getExecution(server, heldB.id, { wait: 5, key: server.keys.otherAgent });
  }
  const ranAfter = Date.now() - approvedAt;
  assert.equal(doneB.status, 'completed');
  assert.equal(doneB.stdout, 'tenant-b\n');
  const startLag = Number((await server.sql(`SELECT round(extract(epoch FROM e.started_at - a.decided_at) * 1000) FROM executions e JOIN approvals a ON a.execution_id = e.id WHERE e.id = ${lit(heldB.id)}`)).trim());
  assert.ok(startLag < 1000 * SLOW, `tenant B's approved call started ${startLag} ms after the approval`);
  assert.ok(ranAfter < 3000 * SLOW, `tenant B's approved call finished ${ranAfter} ms after the approval`);
  t.diagnostic(`with 4 deliveries stuck: tenant B's approved call started ${startLag} ms after the approval, finished after ${ranAfter} ms`);
  // and its webhook is delivered while tenant storm's are stuck
  await until(() => rxB.hits.length >= 1, 3000 * SLOW, "tenant B's webhook");
  assert.equal(JSON.parse(rxB.hits[0].body).id, heldB.id);

  // a long-poll ends at its deadline, not when the stuck deliveries let go
  const { json: pending } = await hold(server, 'echo waiting');
  const t0 = Date.now();
  const lp = await server.request('GET', `/v1/executions/${pending.id}?wait=1`, { key: server.keys.agent, timeout: 30_000 });
  const lpMs = Date.now() - t0;
  assert.equal(lp.json.status, 'pending_approval');
  assert.ok(lpMs >= 950 && lpMs < 1000 + 700 * SLOW, `?wait=1 answered after ${lpMs} ms`);
  t.diagnostic(`?wait=1 long-poll answered after ${lpMs} ms`);

  // the first four time out after 5 s; their rows show the attempt, the error and the back-off
  const first = await until(async () => {
    const rows = await Promise.all(stuck.map(row));
    const failed = rows.filter((x) => x.last_error);
    return failed.length >= 4 && failed;
  }, 12_000 * SLOW, 'the first attempts to time out');
  for (const x of first.slice(0, 4)) {
    assert.equal(x.delivered, false);
    assert.equal(x.gave_up, false);
    assert.match(x.last_error, /timed out/i);
    assert.equal(x.last_status, null);
    // due again 1 s after the end of a 5 s attempt (next_attempt_at - last_attempt_at)
    if (x.attempts === 1 && !x.leased) assert.ok(x.backoff_ms >= 5900 && x.backoff_ms < 6000 + 1000 * SLOW, JSON.stringify(x));
  }
  // the next four took their places: still at most four in flight
  await sleep(500);
  assert.ok(hole.open() <= 4, `${hole.open()} in flight`);
  assert.equal(trap.total, 0, 'the proxy from the environment was used');
});

test('a failing receiver is retried with growing back-off until the attempts run out', async () => {
  const rx = await receiver(() => 500);
  const run = await direct(server.keys.agent, rx.url('/fails'));
  const x = await until(async () => { const r = await row(run.id); return r?.gave_up && r; }, 15_000 * SLOW, 'the delivery to be given up');
  assert.deepEqual({ attempts: x.attempts, delivered: x.delivered, last_error: x.last_error, last_status: x.last_status, leased: x.leased },
    { attempts: 3, delivered: false, last_error: 'HTTP 500', last_status: 500, leased: false });
  assert.equal(rx.hits.length, 3);
  const gaps = [rx.hits[1].at - rx.hits[0].at, rx.hits[2].at - rx.hits[1].at];
  // due after 1 s, then 2 s; claimed at the next of the sender's 500 ms ticks (up to ~0.55 s
  // late, and a loaded host's stall on top): the lower bounds are the back-off's, and it grows
  assert.ok(gaps[0] >= 950 && gaps[0] < 1000 + 500 + 1000 * SLOW, `first back-off ${gaps[0]} ms (1 s)`);
  assert.ok(gaps[1] >= 1950 && gaps[1] < 2000 + 500 + 1000 * SLOW, `second back-off ${gaps[1]} ms (2 s)`);
  assert.ok(gaps[1] > gaps[0] + 400, `the back-off grows: ${gaps}`);
  for (const h of rx.hits) assert.deepEqual(h.body, rx.hits[0].body);
  await sleep(4500);
  assert.equal(rx.hits.length, 3, 'delivered again after it was given up');
});

test('http_proxy, https_proxy and ALL_PROXY in the server environment do not redirect deliveries', async () => {
  const rx = await receiver();
  const run = await direct(server.keys.agent, rx.url('/direct'));
  await until(() => rx.hits.length >= 1, 5000 * SLOW, 'the webhook');
  assert.equal(JSON.parse(rx.hits[0].body).id, run.id);
  const { stdout } = await server.cli(['keys', 'webhook-secret', '--tenant', server.tenants.a]);
  assert.equal(verifySignature(stdout.trim(), rx.hits[0].headers['x-toolcage-signature'], rx.hits[0].body), null);
  assert.equal(rx.hits[0].headers['proxy-connection'], undefined);
  assert.equal(trap.total, 0, 'the proxy from the environment was used');
});

test('cloud metadata targets stay refused with TOOLCAGE_WEBHOOK_ALLOW_PRIVATE=1, at the call and at connect time', async () => {
  for (const url of ['http://169.254.169.254/latest/meta-data/', 'http://[64:ff9b::a9fe:a9fe]/', 'http://[fd00:ec2::254]/',
    'http://100.100.100.200/', 'http://metadata.google.internal/', 'http://224.0.0.1/']) {
    const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: 'echo x', callback_url: url } });
    assertProblem(res, 422, 'callback-url-forbidden');
  }
  // loopback is allowed here (every receiver of this file is on it)...
  const { json: held } = await hold(server, 'echo meta', { extra: { callback_url: 'http://127.0.0.1:9/x' } });
  // ...but not a stored URL that now points at the metadata service
  await server.sql(`UPDATE executions SET callback_url = 'http://169.254.169.254/latest/meta-data/' WHERE id = ${lit(held.id)}`);
  assert.equal((await decide(server, held.approval_id, 'approve')).status, 200);
  await waitFinished(server, held.id);
  const x = await until(async () => { const r = await row(held.id); return r?.gave_up && r; }, 10_000 * SLOW, 'the refusal');
  assert.equal(x.attempts, 1);
  assert.equal(x.last_error, 'refused: 169.254.169.254 is a metadata address');
});

test('two servers on one database deliver each webhook exactly once', async () => {
  const peer = await server.peer('webhook-delivery-peer');
  cleanups.push(() => peer.stop());
  // A receiver that takes 100 ms per answer keeps a delivering process busy, so that the
  // other one claims what becomes due meanwhile: the two really compete for the rows.
  const rx = await receiver(async () => { await sleep(100); return 200; });
  const by = new Set();
  const all = [];
  // Until both processes have delivered (each batch must be exactly-once on its own); a loaded
  // machine may let one process take a whole batch, so up to eight batches.
  for (let batch = 0; batch < 8 && by.size < 2; batch++) {
    const ids = [];
    for (let i = 0; i < 24; i++) {
      const on = i % 2 ? peer : server;
      const res = await on.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: `echo ${batch}-${i}`, callback_url: rx.url(`/r/${batch}/${i}`) } });
      assert.equal(res.status, 200, res.text.slice(0, 200));
      ids.push(res.json.id);
    }
    all.push(...ids);
    await until(() => rx.hits.length >= all.length, 30_000 * SLOW, `${all.length} deliveries (got ${rx.hits.length})`);
    await sleep(2000);
    const got = rx.hits.map((h) => JSON.parse(h.body).id);
    assert.equal(got.length, all.length, 'a webhook was delivered twice');
    assert.deepEqual([...new Set(got)].sort(), [...all].sort());
    const rows = await Promise.all(ids.map(row));
    for (const r of rows) {
      assert.equal(r.delivered, true);
      assert.equal(r.attempts, 1);
      assert.equal(r.leased, false);
      by.add(r.leased_by);
    }
  }
  // both processes took part: one of them never claiming would make "exactly once" vacuous
  assert.equal(by.size, 2, `deliveries claimed by ${[...by].join(', ')} only`);
  assert.equal(trap.total, 0);
});

test('SIGTERM with deliveries in flight exits promptly; their rows are due again, attempt counted', async () => {
  const hole = await blackHole();
  cleanups.push(() => hole.close());
  // a database of its own: no other server may claim these rows
  const s2 = new Server('webhook-delivery-stop', { policy: APPROVAL_POLICY, serveEnv, freshDatabase: true });
  await s2.start();
  try {
    const ids = [];
    for (let i = 0; i < 3; i++) {
      const res = await s2.request('POST', '/v1/execute', { key: s2.keys.agent, json: { tool: 'shell', code: 'echo x', callback_url: `http://127.0.0.1:${hole.port}/stop/${i}` } });
      assert.equal(res.status, 200);
      ids.push(res.json.id);
    }
    await until(() => hole.open() >= 3, 5000 * SLOW, 'the deliveries to start');
    const t0 = Date.now();
    s2.proc.kill('SIGTERM');
    const exit = await s2.exit;
    const ms = Date.now() - t0;
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.ok(ms < 3000 * SLOW, `exit took ${ms} ms with 3 deliveries in flight`);
    for (const id of ids) {
      const r = await sqlJson(s2, `SELECT json_build_object('attempts', attempts, 'leased', lease_until IS NOT NULL, 'due', next_attempt_at <= now(),
        'last_error', last_error, 'delivered', delivered_at IS NOT NULL) FROM webhook_deliveries WHERE execution_id = ${lit(id)}`);
      assert.deepEqual(r, { attempts: 1, leased: false, due: true, last_error: 'interrupted: the server stopped', delivered: false });
    }
  } finally {
    await s2.stop(); // no sanitizer report; drops its database
  }
});

// callback_url: the finished execution is POSTed, signed with the tenant's webhook secret,
// and retried with backoff until the receiver accepts it. This server may call loopback
// (TOOLCAGE_WEBHOOK_ALLOW_PRIVATE=1); approvals-webhook-private.test.mjs checks the default.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup, SLOW } from './harness.mjs';
import { APPROVAL_POLICY, hold, decide, waitFinished, until, sqlJson, lit } from './fixtures/approval-helpers.mjs';
import { startReceiver, verifySignature } from './fixtures/webhook-receiver.mjs';

const server = setup('approvals-webhook', { policy: APPROVAL_POLICY, serveEnv: { TOOLCAGE_WEBHOOK_ALLOW_PRIVATE: '1' } });
let secret;
const receivers = [];

after(async () => { for (const r of receivers) await r.close(); });

async function receiver(respond) {
  if (!secret) {
    // The tenant exists once the server is up (not in a before hook: root hooks do not wait
    // for setup()'s).
    const { stdout } = await server.cli(['keys', 'webhook-secret', '--tenant', server.tenants.a]);
    secret = stdout.trim();
    assert.match(secret, /^[0-9a-f]{64}$/);
  }
  const r = await startReceiver(respond);
  receivers.push(r);
  return r;
}

const delivery = (id) => sqlJson(server,
  `SELECT json_build_object('attempts', attempts, 'delivered', delivered_at IS NOT NULL, 'last_error', last_error, 'url', url, 'leased', lease_until IS NOT NULL) FROM webhook_deliveries WHERE execution_id = ${lit(id)}`);

test('an approved call is delivered to its callback_url, signed with the tenant secret', async () => {
  const rx = await receiver();
  const t = crypto.randomBytes(4).toString('hex');
  const { json: held } = await hold(server, `echo hooked-${t}`, { extra: { callback_url: rx.url(`/cb/${t}`) } });
  assert.equal((await decide(server, held.approval_id, 'approve')).status, 200);
  const done = await waitFinished(server, held.id);
  assert.equal(done.status, 'completed');
  await until(() => rx.hits.length >= 1, 10_000 * SLOW, 'the webhook');
  const hit = rx.hits[0];
  assert.equal(hit.method, 'POST');
  assert.equal(hit.url, `/cb/${t}`);
  assert.match(hit.headers['content-type'], /^application\/json/);
  assert.equal(verifySignature(secret, hit.headers['x-toolcage-signature'], hit.body), null);
  const body = JSON.parse(hit.body.toString('utf8'));
  assert.equal(body.id, held.id);
  assert.equal(body.status, 'completed');
  assert.equal(body.stdout, `hooked-${t}\n`);
  // The verifier is not a rubber stamp: another body, secret or time fails.
  assert.equal(verifySignature(secret, hit.headers['x-toolcage-signature'], Buffer.from(hit.body.toString().replace('hooked', 'hacked'))), 'signature mismatch');
  assert.equal(verifySignature('0'.repeat(64), hit.headers['x-toolcage-signature'], hit.body), 'signature mismatch');
  assert.match(verifySignature(secret, hit.headers['x-toolcage-signature'], hit.body, { now: Date.now() + 3600_000 }), /not recent/);
  // The other tenant's secret differs.
  const { stdout: other } = await server.cli(['keys', 'webhook-secret', '--tenant', server.tenants.b]);
  assert.notEqual(other.trim(), secret);
  const d = await until(async () => { const x = await delivery(held.id); return x?.delivered && x; }, 5000, 'delivered_at');
  assert.equal(d.attempts, 1);
  assert.equal(d.last_error, null);
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(rx.hits.length, 1, 'delivered more than once');
});

test('a receiver that fails first gets the delivery again after a backoff', async () => {
  const rx = await receiver((n) => (n === 1 ? 500 : 200));
  const { json: held } = await hold(server, 'echo retried', { extra: { callback_url: rx.url() } });
  assert.equal((await decide(server, held.approval_id, 'approve')).status, 200);
  await until(() => rx.hits.length >= 1, 10_000 * SLOW, 'the first attempt');
  // attempts counts claimed attempts; the outcome (last_error) follows when the answer is in
  const failed = await until(async () => { const x = await delivery(held.id); return x?.last_error && x; }, 5000 * SLOW, 'attempt 1 recorded');
  // (read up to ~1 s after it, the retry may be claimed already: attempts 2, leased, the
  // first attempt's error still there; the end below pins the total at 2)
  assert.ok(failed.attempts === 1 || (failed.attempts === 2 && failed.leased), JSON.stringify(failed));
  assert.equal(failed.delivered, false);
  assert.match(failed.last_error, /500/);
  await until(() => rx.hits.length >= 2, 15_000 * SLOW, 'the retry');
  const gap = rx.hits[1].at - rx.hits[0].at;
  assert.ok(gap >= 900, `retried after ${gap} ms (backoff is 1 s, then 2 s, ...)`);
  for (const h of rx.hits) assert.equal(verifySignature(secret, h.headers['x-toolcage-signature'], h.body), null);
  assert.deepEqual(rx.hits[1].body, rx.hits[0].body);
  const d = await until(async () => { const x = await delivery(held.id); return x?.delivered && x; }, 5000, 'delivered_at');
  assert.equal(d.attempts, 2);
  assert.equal(d.last_error, null);
});

test('a call that runs at once is delivered too; no callback_url, no delivery', async () => {
  const rx = await receiver();
  const { json: run } = await server.execute({ tool: 'shell', code: 'echo direct', callback_url: rx.url('/direct') });
  await until(() => rx.hits.length >= 1, 10_000 * SLOW, 'the webhook');
  assert.equal(JSON.parse(rx.hits[0].body).id, run.id);
  assert.equal(verifySignature(secret, rx.hits[0].headers['x-toolcage-signature'], rx.hits[0].body), null);
  const { json: quiet } = await server.execute({ tool: 'shell', code: 'echo quiet' });
  assert.equal(await delivery(quiet.id), null);
});

test('callback_url must be an http(s) URL without credentials', async () => {
  for (const url of ['ftp://127.0.0.1/x', 'http://user:pw@127.0.0.1/x', 'not a url', 'file:///etc/passwd']) {
    const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: 'echo x', callback_url: url } });
    assert.equal(res.status, 400, `${url}: ${res.text}`);
  }
});

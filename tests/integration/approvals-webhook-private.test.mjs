// By default (TOOLCAGE_WEBHOOK_ALLOW_PRIVATE unset) a callback_url that names or resolves to
// loopback, a private network, link-local, a cloud metadata service, or one of those behind an
// IPv6 wrapper (v4-mapped, NAT64 64:ff9b::/96, 6to4) is refused when the call is made (422),
// and nothing is stored or run. An address that only becomes internal later (a stored URL or
// a name's DNS answer that changes after the call) is refused again at connect time, after
// DNS: the delivery is given up and says why. webhook-delivery.test.mjs covers the rest.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup, SLOW, sleep, assertProblem } from './harness.mjs';
import { APPROVAL_POLICY, hold, decide, waitFinished, until, sqlJson, lit } from './fixtures/approval-helpers.mjs';
import { startReceiver } from './fixtures/webhook-receiver.mjs';

const server = setup('approvals-webhook-private', { policy: APPROVAL_POLICY });
const receivers = [];
after(async () => { for (const r of receivers) await r.close(); });

async function receiver() {
  const r = await startReceiver();
  receivers.push(r);
  return r;
}

const executions = async () => Number((await server.sql(
  `SELECT count(*) FROM executions e JOIN tenants t ON t.id = e.tenant_id WHERE t.name = ${lit(server.tenants.a)}`)).trim());

test('internal targets are refused when the call is made, held or not, and nothing is stored', async () => {
  const rx = await receiver();
  const port = new URL(rx.url()).port;
  const cases = [
    [`http://127.0.0.1:${port}/hook`, 'loopback'],
    [`http://localhost:${port}/hook`, 'loopback'],
    [`http://LOCALHOST.:${port}/hook`, 'loopback'],
    [`http://app.localhost:${port}/hook`, 'loopback'],
    [`http://[::1]:${port}/hook`, 'loopback'],
    [`http://[::ffff:127.0.0.1]:${port}/hook`, 'loopback'], // v4-mapped
    [`http://[64:ff9b::7f00:1]:${port}/hook`, 'loopback'], // NAT64 of 127.0.0.1
    [`http://[2002:7f00:1::1]:${port}/hook`, 'loopback'], // 6to4 of 127.0.0.1
    [`http://2130706433:${port}/hook`, 'loopback'], // 127.0.0.1 as one number
    [`http://0x7f.1:${port}/hook`, 'loopback'],
    [`http://0.0.0.0:${port}/hook`, 'unspecified'],
    ['http://169.254.169.254/latest/meta-data/iam/security-credentials/', 'metadata'],
    ['http://[64:ff9b::a9fe:a9fe]/latest/meta-data/', 'metadata'], // NAT64 of the metadata address
    ['http://[::ffff:169.254.169.254]/', 'metadata'],
    ['http://[fd00:ec2::254]/latest/meta-data/', 'metadata'], // AWS IPv6 metadata
    ['http://100.100.100.200/latest/meta-data/', 'metadata'], // Alibaba
    ['http://metadata.google.internal/computeMetadata/v1/', 'metadata'],
    ['http://10.1.2.3/hook', 'private'],
    ['https://172.16.0.1/hook', 'private'],
    ['http://192.168.0.1/hook', 'private'],
    ['http://[fd12:3456::1]/hook', 'private'],
    ['http://169.254.10.10/hook', 'link_local'],
    ['http://[fe80::1]/hook', 'link_local'],
    ['http://100.64.0.1/hook', 'cgnat'],
    ['http://198.18.0.1/hook', 'reserved'], // benchmarking
    ['http://192.0.0.8/hook', 'reserved'], // IETF protocol assignments
    ['http://224.0.0.1/hook', 'multicast'],
    ['http://printer.local/hook', 'local network name'],
    ['http://db.internal/hook', 'local network name'],
    ['http://intranet/hook', 'local network name'],
  ];
  const before = await executions();
  for (const [url, cls] of cases) {
    for (const [tool, key] of [['deploy', server.keys.agent], ['shell', server.keys.agent]]) {
      const res = await server.request('POST', '/v1/execute', { key, json: { tool, code: 'echo x', callback_url: url } });
      const p = assertProblem(res, 422, 'callback-url-forbidden');
      assert.equal(p.errors?.[0]?.path, 'callback_url', res.text);
      assert.ok(p.errors[0].message.includes(`(${cls})`), `${url}: ${p.errors[0].message}`);
    }
  }
  assert.equal(await executions(), before, 'a refused call left an execution behind');
  await sleep(1500);
  assert.equal(rx.hits.length, 0, 'a loopback receiver was called');
});

test('a public target is accepted when the call is made', async () => {
  for (const url of ['https://93.184.215.14/hook', 'https://[2606:2800:21f:cb07:6820:80da:af6b:8b2c]/x', 'https://hooks.example.invalid/x']) {
    const t0 = Date.now();
    const { json: held } = await hold(server, 'echo public', { extra: { callback_url: url } });
    // a name is looked up, but a resolver that does not answer costs at most a second
    assert.ok(Date.now() - t0 < 1500 * SLOW, `${url}: the call took ${Date.now() - t0} ms`);
    const c = await server.request('POST', `/v1/executions/${held.id}/cancel`, { key: server.keys.agent, json: {} });
    assert.equal(c.status, 200, c.text);
  }
});

// A URL that passed the call-time check but points inside when it is delivered (its name
// now resolves to loopback, or, simulated here, the stored URL changed): the connection is
// refused after DNS, when the socket would be opened, and the delivery is given up at once.
test('the address is checked again at connect time, after DNS, and a refusal is final', async () => {
  const rx = await receiver();
  const port = new URL(rx.url()).port;
  const cases = [
    [`http://localhost:${port}/hook`, /^refused: (127\.0\.0\.1|::1) is a loopback address$/],
    [`http://127.0.0.1:${port}/hook`, /^refused: 127\.0\.0\.1 is a loopback address$/],
    [`http://[64:ff9b::7f00:1]:${port}/hook`, /^refused: 64:ff9b::7f00:1 is a loopback address$/],
    [`http://169.254.169.254:${port}/hook`, /^refused: 169\.254\.169\.254 is a metadata address$/],
  ];
  for (const [url, want] of cases) {
    const { json: held } = await hold(server, 'echo later', { extra: { callback_url: 'https://hooks.example.invalid/x' } });
    await server.sql(`UPDATE executions SET callback_url = ${lit(url)} WHERE id = ${lit(held.id)}`);
    assert.equal((await decide(server, held.approval_id, 'approve')).status, 200);
    assert.equal((await waitFinished(server, held.id)).status, 'completed');
    const d = await until(async () => {
      const x = await sqlJson(server, `SELECT json_build_object('attempts', attempts, 'delivered', delivered_at IS NOT NULL,
        'gave_up', gave_up_at IS NOT NULL, 'last_error', last_error) FROM webhook_deliveries WHERE execution_id = ${lit(held.id)}`);
      return x?.gave_up && x;
    }, 10_000 * SLOW, `${url}: the delivery was not given up`);
    assert.equal(d.delivered, false);
    assert.equal(d.attempts, 1, `${url}: retried a refused target: ${JSON.stringify(d)}`);
    assert.match(d.last_error, want, url);
  }
  await sleep(1500);
  assert.equal(rx.hits.length, 0, 'a loopback receiver was called');
});

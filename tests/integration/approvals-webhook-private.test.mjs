// By default (TOOLCAGE_WEBHOOK_ALLOW_PRIVATE unset) a callback_url that points at loopback is
// never delivered: the connection is refused after DNS, and the delivery records why.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup, SLOW } from './harness.mjs';
import { APPROVAL_POLICY, hold, decide, waitFinished, until, sqlJson, lit } from './fixtures/approval-helpers.mjs';
import { startReceiver } from './fixtures/webhook-receiver.mjs';

const server = setup('approvals-webhook-private', { policy: APPROVAL_POLICY });
const receivers = [];
after(async () => { for (const r of receivers) await r.close(); });

test('a loopback callback_url is refused without TOOLCAGE_WEBHOOK_ALLOW_PRIVATE', async () => {
  const rx = await startReceiver();
  receivers.push(rx);
  const { json: held } = await hold(server, 'echo private', { extra: { callback_url: rx.url() } });
  assert.equal((await decide(server, held.approval_id, 'approve')).status, 200);
  assert.equal((await waitFinished(server, held.id)).status, 'completed');
  const { json: run } = await server.execute({ tool: 'shell', code: 'echo private-direct', callback_url: rx.url().replace('127.0.0.1', 'localhost') });
  for (const id of [held.id, run.id]) {
    const d = await until(async () => {
      const x = await sqlJson(server, `SELECT json_build_object('attempts', attempts, 'delivered', delivered_at IS NOT NULL, 'last_error', last_error) FROM webhook_deliveries WHERE execution_id = ${lit(id)}`);
      return x?.attempts >= 1 && x;
    }, 10_000 * SLOW, 'a failed attempt');
    assert.equal(d.delivered, false);
    assert.ok(d.last_error && d.last_error.length > 0, JSON.stringify(d));
  }
  await new Promise((r) => setTimeout(r, 2500));
  assert.equal(rx.hits.length, 0, 'a loopback receiver was called');
});

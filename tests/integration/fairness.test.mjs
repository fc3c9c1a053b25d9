// Fair sharing of the approved queue (issue 19): when sandbox slots are scarce, a tenant with
// one approved call waiting is served before another tenant's older backlog once that tenant
// already has calls running. Evidence: the start times the database recorded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup, createKey, SLOW } from './harness.mjs';
import { APPROVAL_POLICY, hold, decide, until, lit } from './fixtures/approval-helpers.mjs';

// Two slots: the worker runs at most two approved calls at once (max_sandboxes / 2 + 1).
const server = setup('fairness', { policy: APPROVAL_POLICY, serveEnv: { TOOLCAGE_MAX_SANDBOXES: '2' } });
const tag = () => crypto.randomBytes(4).toString('hex');

test('a slot that frees goes to the tenant with fewer calls running, not to the oldest queued call', async () => {
  const t = tag();
  // Tenant a fills both slots with direct calls that end at different times.
  const direct = [3, 8].map((s) => server.execute({ tool: 'shell', code: `sleep ${s * SLOW}; echo d${s}-${t}`, limits: { timeout_ms: 60000 } }, { timeout: 120_000 * SLOW }));
  await until(async () => Number((await server.sql(`SELECT count(*) FROM executions WHERE status = 'running' AND request->>'code' LIKE ${lit(`%-${t}`)}`)).trim()) === 2, 10_000 * SLOW, 'both slots taken');
  // Then a's backlog (older) and b's single call (newer) are approved and wait for a slot.
  const aHeld = [];
  for (let i = 0; i < 2; i++) aHeld.push((await hold(server, `echo a${i}-${t}`)).json);
  const bHeld = (await hold(server, `echo b-${t}`, { key: server.keys.otherAgent })).json;
  for (const h of aHeld) assert.equal((await decide(server, h.approval_id, 'approve')).status, 200);
  const bReviewer = await createKey(server.tenants.b, 'reviewer', server.env);
  assert.equal((await decide(server, bHeld.approval_id, 'approve', { key: bReviewer })).status, 200);
  for (const h of [...aHeld, bHeld]) assert.equal((await server.request('GET', `/v1/executions/${h.id}`, { key: h === bHeld ? server.keys.otherAgent : server.keys.agent })).json.status, 'queued');

  await Promise.all(direct);
  const done = async (id) => (await server.sql(`SELECT status FROM executions WHERE id = ${lit(id)}`)).trim() === 'completed';
  for (const h of [...aHeld, bHeld]) await until(() => done(h.id), 60_000 * SLOW, `${h.id} to complete`);
  const startedAt = async (id) => (await server.sql(`SELECT extract(epoch FROM started_at) FROM executions WHERE id = ${lit(id)}`)).trim();
  const bStart = Number(await startedAt(bHeld.id));
  const aStarts = await Promise.all(aHeld.map((h) => startedAt(h.id).then(Number)));
  // The first slot freed while a still had a call running: b's call took it, although a's
  // backlog was older.
  assert.ok(bStart < Math.min(...aStarts), `b started at ${bStart}, a's approved calls at ${aStarts}`);
});

// Tenant quotas (issue 19): executions one tenant may have running at once, decided by the
// database so that every replica enforces the same number. Evidence: the 429 and what was
// (not) stored or audited, another tenant's calls succeeding meanwhile, the limit holding
// across two server processes, and changes taking effect without a restart.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup, assertProblem, SLOW } from './harness.mjs';
import { APPROVAL_POLICY, waitFinished, until, lit } from './fixtures/approval-helpers.mjs';

const server = setup('quota', { policy: APPROVAL_POLICY, serveEnv: { TOOLCAGE_TENANT_MAX_CONCURRENT: '3' } });
const tag = () => crypto.randomBytes(5).toString('hex');
let peer = null;
after(async () => { if (peer) await peer.stop(); });

const submit = (code, key = server.keys.agent, via = server) => via.request('POST', '/v1/execute', { key, json: { tool: 'shell', code, async: true, limits: { timeout_ms: 30000 } } });
const quotaOf = async (key = server.keys.agent) => (await server.request('GET', '/v1/quota', { key })).json;
async function setQuota(n, field = 'max_concurrent') {
  const res = await server.request('PUT', `/v1/admin/quotas/${server.tenants.a}`, { key: server.keys.operator, json: { [field]: n } });
  assert.equal(res.status, 200, res.text);
  return res.json;
}
const storedWith = async (t) => Number((await server.sql(`SELECT count(*) FROM executions WHERE request->>'code' LIKE ${lit(`%${t}%`)}`)).trim());
const auditedWith = async (t) => Number((await server.sql(`SELECT count(*) FROM audit_log WHERE record->'params'->>'code' LIKE ${lit(`%${t}%`)}`)).trim());

test('the CLI sets a tenant\'s limit; beyond it 429 quota-exceeded, nothing stored; the other tenant runs on', async () => {
  const { stdout } = await server.cli(['tenants', 'quota', '--tenant', server.tenants.a, '--max-concurrent', '2']);
  assert.match(stdout, /^tenant \S+\n/);
  assert.match(stdout, /^ {2}concurrent \{"max_concurrent":2,"source":"tenant","running":0\}$/m);
  assert.match(stdout, /^ {2}rate \{"rate_per_minute":null,"source":"default","key_rate_per_minute":null\}$/m);
  const t = tag();
  const long = [];
  for (let i = 0; i < 2; i++) {
    const r = await submit(`sleep 4; echo long-${t}-${i}`);
    assert.equal(r.status, 202, r.text);
    long.push(r.json.id);
  }
  await until(async () => (await quotaOf()).concurrent.running === 2, 10_000 * SLOW, 'two running');
  const q = await quotaOf();
  assert.deepEqual(q.concurrent, { max_concurrent: 2, source: 'tenant', running: 2 });
  assert.equal(q.tenant, server.tenants.a);

  const refused = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: `echo third-${t}` } });
  const p = assertProblem(refused, 429, 'quota-exceeded');
  assert.equal(refused.headers.get('retry-after'), '1');
  assert.match(p.detail, /2 executions running, its limit max_concurrent \(set for the tenant\)/);
  assert.equal(await storedWith(`third-${t}`), 0, 'the refused call left an execution row');
  assert.equal(await auditedWith(`third-${t}`), 0, 'the refused call left an audit record');

  // The other tenant (default limit 3) is not held back: its call runs at once.
  const t0 = performance.now();
  const other = await server.execute({ tool: 'shell', code: `echo other-${t}` }, { key: server.keys.otherAgent });
  assert.equal(other.json.stdout, `other-${t}\n`);
  assert.ok(performance.now() - t0 < 3000 * SLOW, 'the other tenant waited');
  assert.deepEqual((await quotaOf(server.keys.otherAgent)).concurrent, { max_concurrent: 3, source: 'default', running: 0 });

  // A held call is not refused: it counts when it runs, not while it waits for a human.
  const held = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: `echo held-${t}` } });
  assert.equal(held.status, 202, held.text);
  assert.equal(held.json.status, 'pending_approval');

  for (const id of long) assert.equal((await waitFinished(server, id, 30 * SLOW)).status, 'completed');
  assert.equal((await server.execute({ tool: 'shell', code: `echo after-${t}` })).json.stdout, `after-${t}\n`);
});

test('an operator changes the limit over the API, audited, and it holds at once; null is the default again', async () => {
  const set0 = await setQuota(0);
  assert.deepEqual(set0.concurrent, { max_concurrent: 0, source: 'tenant', running: 0 });
  assertProblem(await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'echo zero' } }), 429, 'quota-exceeded');
  const cleared = await setQuota(null);
  assert.deepEqual(cleared.concurrent, { max_concurrent: 3, source: 'default', running: 0 });
  assert.deepEqual(cleared.rate, { rate_per_minute: null, source: 'default', key_rate_per_minute: null });
  assert.equal((await server.execute({ tool: 'shell', code: 'echo back' })).json.stdout, 'back\n');
  const records = (await server.sql(`SELECT record->'quota'->>'max_concurrent', record->'actor'->>'role'
    FROM audit_log WHERE action = 'tenant.quota_set' AND tenant_id = (SELECT id::text FROM tenants WHERE name = ${lit(server.tenants.a)}) ORDER BY seq`)).trim().split('\n');
  assert.deepEqual(records.slice(-3), ['2|', '0|operator', '|operator']);
  // An operator reads any tenant's quota by name; the tenant's own keys only their own.
  const op = await server.request('GET', `/v1/quota?tenant=${encodeURIComponent(server.tenants.b)}`, { key: server.keys.operator });
  assert.equal(op.json.tenant, server.tenants.b);
});

test('two server processes enforce one limit', async () => {
  await setQuota(1);
  peer = await server.peer('quota-peer');
  const t = tag();
  const first = await submit(`sleep 3; echo one-${t}`);
  assert.equal(first.status, 202);
  await until(async () => (await quotaOf()).concurrent.running === 1, 10_000 * SLOW, 'one running');
  const viaPeer = await peer.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: `echo two-${t}` } });
  assertProblem(viaPeer, 429, 'quota-exceeded');
  // Concurrent admissions through both processes: at most the limit run at once.
  await waitFinished(server, first.json.id, 30 * SLOW);
  const burst = await Promise.all(Array.from({ length: 6 }, (_, i) => submit(`sleep 2; echo burst-${t}-${i}`, server.keys.agent, i % 2 ? peer : server)));
  const accepted = burst.filter((r) => r.status === 202);
  assert.equal(accepted.length, 1, `statuses ${burst.map((r) => r.status)}`);
  assert.ok(burst.every((r) => r.status === 202 || r.status === 429));
  await waitFinished(server, accepted[0].json.id, 30 * SLOW);
  await setQuota(null);
});

test('quota routes refuse what they must', async () => {
  assertProblem(await server.request('GET', `/v1/quota?tenant=${server.tenants.b}`, { key: server.keys.agent }), 400, 'validation');
  assertProblem(await server.request('GET', '/v1/quota', { key: server.keys.operator }), 400, 'validation');
  assertProblem(await server.request('GET', '/v1/quota?tenant=nosuch-tenant', { key: server.keys.operator }), 404, 'not-found');
  assertProblem(await server.request('PUT', `/v1/admin/quotas/${server.tenants.a}`, { key: server.keys.admin, json: { max_concurrent: 5 } }), 403, 'forbidden');
  assertProblem(await server.request('PUT', '/v1/admin/quotas/nosuch-tenant', { key: server.keys.operator, json: { max_concurrent: 5 } }), 404, 'not-found');
  for (const json of [{}, { max_concurrent: -1 }, { max_concurrent: 4097 }, { max_concurrent: '2' }, { max_concurrent: 1, x: 1 }]) {
    assertProblem(await server.request('PUT', `/v1/admin/quotas/${server.tenants.a}`, { key: server.keys.operator, json }), 400, 'validation');
  }
  await assert.rejects(server.cli(['tenants', 'quota', '--tenant', 'nosuch-tenant']), /failed \(1\)[^]*no tenant named 'nosuch-tenant'/);
  await assert.rejects(server.cli(['tenants', 'quota', '--tenant', server.tenants.a, '--max-concurrent', 'lots']), /failed \(2\)/);
});

test('calls per minute: the tenant\'s token bucket (set over the API) and the key\'s (a server setting), shared by replicas', async () => {
  const t = tag();
  const set = await setQuota(3, 'rate_per_minute');
  assert.deepEqual(set.rate, { rate_per_minute: 3, source: 'tenant', key_rate_per_minute: null });
  assert.equal(set.concurrent.max_concurrent, 3, 'an absent field stays as it was');
  for (let i = 0; i < 3; i++) assert.equal((await server.execute({ tool: 'shell', code: `echo r-${t}-${i}` })).status, 200);
  const refused = await server.request('POST', '/v1/execute', { key: server.keys.admin, json: { tool: 'shell', code: `echo r-${t}-over` } });
  const p = assertProblem(refused, 429, 'quota-exceeded');
  assert.match(p.detail, /^rate_per_minute: 3 calls per minute \(set for the tenant\); a call can start again in \d+ s$/);
  const retry = Number(refused.headers.get('retry-after'));
  assert.ok(retry >= 1 && retry <= 20, `Retry-After ${retry}`);
  assert.equal(await storedWith(`r-${t}-over`), 0);
  // through another process too: one bucket
  if (!peer) peer = await server.peer('quota-peer');
  assertProblem(await peer.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'echo via-peer' } }), 429, 'quota-exceeded');
  // the other tenant is not drawn from
  assert.equal((await server.execute({ tool: 'shell', code: 'echo b' }, { key: server.keys.otherAgent })).status, 200);
  await setQuota(null, 'rate_per_minute');
  assert.equal((await server.execute({ tool: 'shell', code: `echo r-${t}-again` })).status, 200);

  // A key's rate (TOOLCAGE_KEY_RATE_PER_MINUTE on this process): the agent key runs dry, the
  // admin key of the same tenant does not.
  const keyed = await server.peer('quota-keyrate', { serveEnv: { TOOLCAGE_KEY_RATE_PER_MINUTE: '2' } });
  try {
    for (let i = 0; i < 2; i++) assert.equal((await keyed.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'echo k' } })).status, 200);
    const k = assertProblem(await keyed.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'echo k' } }), 429, 'quota-exceeded');
    assert.match(k.detail, /^key_rate_per_minute: 2 calls per minute \(for this API key\)/);
    assert.equal((await keyed.request('POST', '/v1/execute', { key: server.keys.admin, json: { tool: 'shell', code: 'echo k' } })).status, 200);
    assert.equal((await keyed.request('GET', '/v1/quota', { key: server.keys.agent })).json.rate.key_rate_per_minute, 2);
  } finally {
    await keyed.stop();
  }
});

test('an approved call waits in the queue while its tenant is at its limit, and runs once a slot of the tenant frees', async () => {
  await setQuota(1);
  const t = tag();
  const long = await submit(`sleep 3; echo busy-${t}`);
  assert.equal(long.status, 202);
  await until(async () => (await quotaOf()).concurrent.running === 1, 10_000 * SLOW, 'one running');
  const held = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: `echo approved-${t}` } });
  assert.equal(held.status, 202);
  const ok = await server.request('POST', `/v1/approvals/${held.json.approval_id}/approve`, { key: server.keys.reviewer, json: {} });
  assert.equal(ok.status, 200, ok.text);
  await new Promise((r) => setTimeout(r, 1000));
  const mid = (await server.request('GET', `/v1/executions/${held.json.id}`, { key: server.keys.agent })).json;
  assert.equal(mid.status, 'queued', 'the approved call ran past its tenant\'s limit');
  const first = await waitFinished(server, long.json.id, 30 * SLOW);
  const done = await waitFinished(server, held.json.id, 30 * SLOW);
  assert.equal(done.status, 'completed');
  assert.equal(done.stdout, `approved-${t}\n`);
  const started = (await server.sql(`SELECT started_at >= ${lit(first.finished_at)}::timestamptz - interval '50 ms' FROM executions WHERE id = ${lit(held.json.id)}`)).trim();
  assert.equal(started, 't', 'it started before the tenant\'s running call finished');
  await setQuota(null);
});

test('daily budgets: CPU seconds in a rolling day, counted from what ran; beyond it 429 until the window moves', async () => {
  const res = await server.request('PUT', `/v1/admin/quotas/${server.tenants.a}`, { key: server.keys.operator, json: { cpu_seconds_per_day: 1 } });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.daily.cpu_seconds_per_day, 1);
  assert.equal(res.json.daily.source, 'tenant');
  const before = res.json.daily.cpu_seconds_used;
  // A program that burns 1.2 s of CPU, measured by its own clock (utime + stime in
  // /proc/$$/stat, in ticks of 10 ms): on a busy machine it takes longer, not less CPU.
  const burn = await server.execute({
    tool: 'shell',
    code: 'while :; do for ((i = 0; i < 20000; i++)); do :; done; read -r -a f < /proc/$$/stat; (( f[13] + f[14] >= 120 )) && break; done; echo burnt',
  });
  assert.equal(burn.json.stdout, 'burnt\n');
  assert.ok(burn.json.cpu_ms >= 1000, `cpu_ms ${burn.json.cpu_ms}`);
  const q = await quotaOf();
  assert.ok(q.daily.cpu_seconds_used >= before + burn.json.cpu_ms / 1000 - 0.01, JSON.stringify(q.daily));
  assert.ok(q.daily.wall_seconds_used >= burn.json.duration_ms / 1000 - 0.01, JSON.stringify(q.daily));
  const refused = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'echo over-budget' } });
  const p = assertProblem(refused, 429, 'quota-exceeded');
  assert.match(p.detail, /^cpu_seconds_per_day: tenant '\S+' used \d+ s of its 1 s in the last 24 hours \(set for the tenant\)$/);
  const retry = Number(refused.headers.get('retry-after'));
  assert.ok(retry > 3000 && retry <= 86400, `Retry-After ${retry}`);
  assert.equal(await storedWith('over-budget'), 0);
  // the other tenant's budget is its own
  assert.equal((await server.execute({ tool: 'shell', code: 'echo b' }, { key: server.keys.otherAgent })).status, 200);
  const cleared = await server.request('PUT', `/v1/admin/quotas/${server.tenants.a}`, { key: server.keys.operator, json: { cpu_seconds_per_day: null } });
  assert.equal(cleared.json.daily.cpu_seconds_per_day, null);
  assert.equal((await server.execute({ tool: 'shell', code: 'echo fine' })).json.stdout, 'fine\n');
});

test('/metrics: the public page names no tenant; an operator key adds each tenant\'s quota, use and refusals', async () => {
  await setQuota(0);
  const refused = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'echo no' } });
  assert.equal(refused.status, 429, refused.text);
  const idA = (await server.sql(`SELECT id FROM tenants WHERE name = ${lit(server.tenants.a)}`)).trim();

  const pub = await server.request('GET', '/metrics');
  assert.equal(pub.status, 200);
  assert.match(pub.text, /^toolcage_quota_rejections_total [1-9]/m);
  assert.doesNotMatch(pub.text, /toolcage_tenant_|tenant_id=/, 'the public page names no tenant');

  const op = await server.request('GET', '/metrics', { key: server.keys.operator });
  assert.equal(op.status, 200, op.text.slice(0, 300));
  assert.match(op.text, new RegExp(`^toolcage_tenant_info\\{tenant_id="${idA}",tenant="${server.tenants.a}"\\} 1$`, 'm'));
  assert.match(op.text, new RegExp(`^toolcage_tenant_max_concurrent\\{tenant_id="${idA}"\\} 0$`, 'm'));
  assert.match(op.text, new RegExp(`^toolcage_tenant_executions_running\\{tenant_id="${idA}"\\} 0$`, 'm'));
  assert.match(op.text, new RegExp(`^toolcage_tenant_cpu_seconds_day\\{tenant_id="${idA}"\\} [0-9.e+-]+$`, 'm'));
  const m = op.text.match(new RegExp(`^toolcage_tenant_quota_rejections_total\\{tenant_id="${idA}",limit="max_concurrent"\\} (\\d+)$`, 'm'));
  assert.ok(m && Number(m[1]) >= 1, op.text.split('\n').filter((l) => l.includes('rejections')).join('\n'));
  assert.match(op.text, /^toolcage_tenant_metrics_complete 1$/m);

  // a tenant's key never sees other tenants; a wrong key is refused, not served the public page
  assertProblem(await server.request('GET', '/metrics', { key: server.keys.admin }), 403, 'forbidden');
  assertProblem(await server.request('GET', '/metrics', { key: `tc_${'A'.repeat(43)}` }), 401, 'unauthorized');
  await setQuota(null);
});

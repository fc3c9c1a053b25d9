// The audit trail through the API: one record per event, gap-free and chained; filters,
// keyset pagination, roles, tenant isolation, export and offline verification, /metrics.
// Runs on a database of its own (setup freshDatabase) so that sequence numbers start at 1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setup, assertProblem, BIN, SLOW } from './harness.mjs';

const execFileP = promisify(execFile);
const server = setup('audit', { freshDatabase: true });
const HEX64 = /^[0-9a-f]{64}$/;

function qs(params) {
  const s = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined)).toString();
  return s ? `?${s}` : '';
}

async function list(params = {}, key = server.keys.auditor) {
  const res = await server.request('GET', `/v1/audit${qs(params)}`, { key });
  assert.equal(res.status, 200, res.text);
  return res.json;
}

/** Every record matching params, following next_cursor; newest first. */
async function listAll(params = {}, key = server.keys.auditor) {
  const out = [];
  let cursor;
  for (let i = 0; i < 1000; i++) {
    const page = await list({ ...params, limit: params.limit ?? 500, cursor }, key);
    out.push(...page.records);
    if (page.next_cursor === null) return out;
    cursor = page.next_cursor;
  }
  assert.fail('pagination did not end');
}

async function exportText(format, params = {}, key = server.keys.operator) {
  const res = await server.request('GET', `/v1/audit/export${qs({ format, ...params })}`, { key });
  assert.equal(res.status, 200, res.text);
  return res;
}

function parseJsonl(text) {
  const lines = text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  return {
    checkpoints: lines.filter((l) => l.checkpoint).map((l) => l.checkpoint),
    records: lines.filter((l) => !l.checkpoint && !l.withheld),
    withheld: lines.filter((l) => l.withheld),
  };
}

async function publicKey() {
  const { stdout } = await server.cli(['audit', 'public-key']);
  const lines = stdout.trim().split('\n');
  const hex = lines[lines.length - 1].trim();
  assert.match(hex, HEX64, stdout);
  assert.match(lines[0], /^key_id [0-9a-f]{16}$/, stdout);
  return { hex, keyId: lines[0].split(' ')[1] };
}

/** toolcage audit verify ARGS; resolves {code, verdict} (exit status 0 or 3 expected). */
async function verifyCli(args) {
  try {
    const { stdout } = await execFileP(BIN, ['audit', 'verify', ...args], { env: { ...process.env, ...server.env }, timeout: 60_000 * SLOW });
    return { code: 0, verdict: JSON.parse(stdout) };
  } catch (e) {
    if (e.code !== 3) throw new Error(`audit verify ${args.join(' ')}: exit ${e.code}: ${e.stdout}\n${e.stderr}`);
    return { code: 3, verdict: JSON.parse(e.stdout) };
  }
}

function writeTmp(name, text) {
  const f = path.join(server.stateDir, name);
  fs.writeFileSync(f, text);
  return f;
}

/** The execute and execution.complete records of one execution, via the API. */
async function recordsOf(executionId, key = server.keys.auditor) {
  const all = await listAll({}, key);
  return all.filter((e) => e.record.execution_id === executionId).sort((a, b) => a.seq - b.seq);
}

async function metric(name, labels = {}) {
  const res = await server.request('GET', '/metrics');
  assert.equal(res.status, 200);
  let total = 0;
  for (const line of res.text.split('\n')) {
    if (!line.startsWith(name + '{') && !line.startsWith(name + ' ')) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) total += Number(line.split(' ').pop());
  }
  return total;
}

test('an execute leaves an execute record, an execution.start record, then an execution.complete record with the result', async () => {
  const code = 'echo hi; echo oops >&2; exit 3';
  const res = await server.execute({ tool: 'shell', code, stdin: 'some input' });
  const run = res.json;
  assert.equal(run.status, 'failed');
  const [ex, start, done, ...more] = await recordsOf(run.id);
  assert.equal(more.length, 0, 'exactly three records per execution');
  assert.ok(ex && start && done, 'all records present');
  assert.ok(ex.seq < start.seq && start.seq < done.seq, 'execute, then execution.start, then execution.complete');
  // the start is recorded before the program may run, by the instance that runs it
  assert.equal(start.record.action, 'execution.start');
  assert.equal(start.record.execution_id, run.id);
  assert.ok(Number.isInteger(start.record.instance), JSON.stringify(start.record));
  assert.equal(done.record.started, true);
  assert.match(ex.hash, HEX64);

  const r = ex.record;
  assert.equal(r.action, 'execute');
  assert.equal(r.seq, ex.seq);
  assert.match(r.ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.match(r.prev_hash, HEX64);
  assert.equal(r.tool, 'shell');
  assert.equal(r.execution_id, run.id);
  assert.equal(r.request_id, res.headers.get('x-request-id'));
  assert.equal(r.decision, 'allowed');
  assert.equal(r.actor.type, 'api_key');
  assert.equal(r.actor.role, 'agent');
  assert.ok(r.actor.id);
  assert.ok(r.tenant_id);
  assert.equal(r.params.code, code);
  assert.match(r.params.code_hash, HEX64);
  assert.equal(r.params.stdin, 'some input');
  assert.match(r.params.stdin_hash, HEX64);
  assert.notEqual(r.params.stdin_hash, r.params.code_hash);
  assert.deepEqual(r.params.files, []);
  assert.deepEqual(r.params.limits, run.limits);

  const d = done.record;
  assert.equal(d.action, 'execution.complete');
  assert.equal(d.execution_id, run.id);
  assert.equal(d.tenant_id, r.tenant_id);
  assert.deepEqual(d.actor, r.actor);
  assert.equal(d.tool, 'shell');
  assert.equal(d.request_id, r.request_id);
  assert.equal(d.status, 'failed');
  assert.equal(d.exit_code, 3);
  assert.equal(d.killed_reason, null);
  assert.equal(d.duration_ms, run.duration_ms);
  assert.equal(d.cpu_ms, run.cpu_ms);
  assert.equal(d.memory_peak_bytes, run.memory_peak_bytes);
  assert.equal(d.output_bytes, Buffer.byteLength('hi\n') + Buffer.byteLength('oops\n'));
  assert.deepEqual(d.enforced, run.enforced);
  assert.deepEqual(d.policy_violations, run.policy_violations);
  assert.equal(d.params, undefined, 'the completion record does not repeat the code');

  // Each record links to its predecessor's hash.
  const prev = await server.request('GET', `/v1/audit/${done.seq - 1}`, { key: server.keys.admin });
  assert.equal(prev.status, 200);
  assert.equal(d.prev_hash, prev.json.hash);
  const one = await server.request('GET', `/v1/audit/${ex.seq}`, { key: server.keys.auditor });
  assert.equal(one.status, 200);
  assert.deepEqual(one.json, ex);
});

test('key and console user creation are audited, without the key or the password', async () => {
  // the harness created one key per role for tenant a at start-up (toolcage keys create)
  const keys = (await listAll({ action: 'key.create' })).map((r) => r.record);
  const roles = keys.map((r) => r.key.role).sort();
  for (const role of ['admin', 'agent', 'auditor', 'reviewer']) assert.ok(roles.includes(role), `no key.create for ${role}: ${roles}`);
  const mine = keys.find((r) => r.key.prefix === server.keys.agent.slice(0, 11));
  assert.ok(mine, 'the agent key\'s record (by prefix)');
  assert.deepEqual(mine.actor, { type: 'cli', id: 'keys create' });
  assert.equal(mine.status, 'ok');
  const everything = JSON.stringify(keys);
  for (const k of Object.values(server.keys)) assert.ok(!everything.includes(k), 'a key is in the trail');

  const name = `audited-${crypto.randomBytes(4).toString('hex')}`;
  const password = `pw-${crypto.randomBytes(8).toString('hex')}`;
  await new Promise((resolve, reject) => {
    const child = execFile(BIN, ['users', 'add', '--name', name, '--role', 'reviewer', '--tenant', server.tenants.a],
      { env: { ...process.env, ...server.env } }, (err) => (err ? reject(err) : resolve()));
    child.stdin.end(`${password}\n`);
  });
  const users = (await listAll({ action: 'user.create' })).map((r) => r.record);
  const u = users.find((r) => r.user.name === name);
  assert.ok(u, 'the user.create record');
  assert.equal(u.user.role, 'reviewer');
  assert.deepEqual(u.actor, { type: 'cli', id: 'users add' });
  assert.ok(!JSON.stringify(users).includes(password), 'the password is in the trail');
  // another tenant's auditor does not see them
  const other = await listAll({ action: 'user.create', tenant: server.tenants.b }, server.keys.otherAdmin);
  assert.ok(!other.some((r) => r.record.user.name === name));
});

test('a timed-out execution is recorded with its status and killed reason', async () => {
  const { json: run } = await server.execute({ tool: 'shell', code: 'sleep 20', limits: { timeout_ms: 300 } });
  assert.equal(run.status, 'timeout');
  const [, , done] = await recordsOf(run.id);
  assert.equal(done.record.status, 'timeout');
  assert.equal(done.record.killed_reason, 'timeout');
  assert.equal(done.record.exit_code, run.exit_code);
});

test('code_hash is a stable 32-byte hash: equal for equal code, different for different code', async () => {
  const a = (await server.execute({ tool: 'shell', code: 'echo same' })).json;
  const b = (await server.execute({ tool: 'shell', code: 'echo same' })).json;
  const c = (await server.execute({ tool: 'shell', code: 'echo other' })).json;
  const [ha, hb, hc] = await Promise.all([a, b, c].map(async (x) => (await recordsOf(x.id))[0].record.params.code_hash));
  for (const h of [ha, hb, hc]) assert.match(h, HEX64);
  assert.equal(ha, hb);
  assert.notEqual(ha, hc);
  const [ra] = await recordsOf(a.id);
  assert.equal(ra.record.params.stdin, null, 'no stdin given');
  assert.equal(ra.record.params.stdin_hash, undefined);
});

test('sequence numbers are gap-free from 1 and every record links to the previous hash', async () => {
  await server.execute({ tool: 'python', code: 'print(1)' });
  const { records } = parseJsonl((await exportText('jsonl')).text);
  assert.ok(records.length >= 2);
  let prevHash = '0'.repeat(64);
  records.forEach((e, i) => {
    assert.equal(e.seq, i + 1, 'gap-free from 1');
    assert.equal(e.record.seq, e.seq);
    assert.equal(e.record.prev_hash, prevHash, `seq ${e.seq} links to its predecessor`);
    assert.match(e.hash, HEX64);
    prevHash = e.hash;
  });
  // The API's newest-first view (an operator's: every tenant) is the same set.
  const viaList = await listAll({}, server.keys.operator);
  assert.deepEqual(viaList.map((e) => e.seq), records.map((e) => e.seq).reverse());
});

test('filters: actor, tool, action, status, since/until, q (each result matches, none is missed)', async () => {
  const agentRun = (await server.execute({ tool: 'python', code: 'print("filter me")' })).json;
  const adminRun = (await server.execute({ tool: 'shell', code: 'exit 1' }, { key: server.keys.admin })).json;
  assert.equal(adminRun.status, 'failed');
  const all = await listAll({}, server.keys.auditor);
  const check = async (params, pred, what) => {
    const got = await listAll(params, server.keys.auditor);
    const want = all.filter(pred);
    assert.ok(want.length > 0, `${what}: the fixture has matching records`);
    assert.deepEqual(got.map((e) => e.seq), want.map((e) => e.seq), `${what}: exactly the matching records`);
  };

  const [adminEx] = await recordsOf(adminRun.id);
  const [agentEx] = await recordsOf(agentRun.id);
  const adminKeyId = adminEx.record.actor.id;
  assert.notEqual(adminKeyId, agentEx.record.actor.id);
  await check({ actor: adminKeyId }, (e) => e.record.actor?.id === adminKeyId, 'actor');
  await check({ tool: 'python' }, (e) => e.record.tool === 'python', 'tool');
  await check({ action: 'execution.complete' }, (e) => e.record.action === 'execution.complete', 'action');
  await check({ status: 'failed' }, (e) => e.record.status === 'failed', 'status');
  await check({ tool: 'shell', status: 'failed', actor: adminKeyId },
    (e) => e.record.tool === 'shell' && e.record.status === 'failed' && e.record.actor?.id === adminKeyId, 'combined');

  // Time window around the agent's python execution, at millisecond and second precision.
  const ts = agentEx.record.ts;
  await check({ since: ts }, (e) => e.record.ts >= ts, 'since (ms)');
  await check({ until: ts }, (e) => e.record.ts < ts, 'until (ms)');
  const sec = ts.slice(0, 19) + 'Z';
  const secMs = sec.replace('Z', '.000Z');
  await check({ since: sec }, (e) => e.record.ts >= secMs, 'since (s)');
  const inWindow = await listAll({ since: sec }, server.keys.auditor);
  assert.ok(inWindow.some((e) => e.seq === agentEx.seq), `since=${sec} includes a record at ${ts}`);
  const day = ts.slice(0, 10);
  await check({ since: day }, (e) => e.record.ts >= day, 'since (date)');
  assert.deepEqual(await listAll({ until: day }), [], 'until=today excludes today');
  const nextSec = new Date(Date.parse(sec) + 1000).toISOString().replace('.000Z', 'Z');
  await check({ since: sec, until: nextSec }, (e) => e.record.ts >= secMs && e.record.ts < nextSec.replace('Z', '.000Z'), 'since+until window');

  // q: case-insensitive substring of tool / actor / reason.
  await check({ q: 'PYTH' }, (e) => /pyth/i.test(e.record.tool ?? '') || /pyth/i.test(e.record.actor?.id ?? ''), 'q tool');
  await check({ q: adminKeyId.slice(2, 10) }, (e) => (e.record.actor?.id ?? '').includes(adminKeyId.slice(2, 10)), 'q actor');
  // LIKE metacharacters match themselves only.
  assert.deepEqual((await list({ q: '%' })).records, []);
  assert.deepEqual((await list({ q: '_' })).records, []);
  assert.deepEqual((await list({ q: 'a' + '_'.repeat(40) })).records, [], 'a long q of metacharacters');
  assert.deepEqual((await list({ q: '\\'.repeat(64) })).records, []);
  assert.deepEqual((await list({ tool: 'no-such-tool' })).records, []);
  assert.deepEqual((await list({ action: "execute' OR '1'='1" })).records, []);
});

test('bad query parameters give 400 validation', async () => {
  const bad = [
    { since: 'yesterday' }, { since: '2026-01-31T12:00:00' }, { since: '2026-01-31T12:00:00+02:00' }, { until: '2026-1-31' },
    { until: '2026-01-31T12:00:00.1Z' }, { limit: '0' }, { limit: '501' }, { limit: 'ten' }, { limit: '10x' },
    { cursor: '0' }, { cursor: '-5' }, { cursor: 'abc' }, { q: '' }, { q: 'x'.repeat(65) }, { actor: 'x'.repeat(65) },
    { tool: 't'.repeat(65) }, { action: 'a'.repeat(65) }, { status: 's'.repeat(65) },
  ];
  for (const p of bad) {
    assertProblem(await server.request('GET', `/v1/audit${qs(p)}`, { key: server.keys.auditor }), 400, 'validation');
  }
  for (const p of [{ format: 'xml' }, { format: 'csv', since: 'soon' }, { format: 'jsonl', q: '' }]) {
    assertProblem(await server.request('GET', `/v1/audit/export${qs(p)}`, { key: server.keys.auditor }), 400, 'validation');
  }
  assertProblem(await server.request('GET', `/v1/audit${qs({ tenant: 'x'.repeat(65) })}`, { key: server.keys.admin }), 400, 'validation');
});

test('cursor pages are stable while new records arrive: no duplicates, no omissions', async () => {
  for (let i = 0; i < 3; i++) await server.execute({ tool: 'shell', code: `echo page ${i}` });
  const before = (await listAll({})).map((e) => e.seq);
  assert.ok(before.length >= 10);
  const page1 = await list({ limit: 4 });
  assert.equal(page1.records.length, 4);
  assert.deepEqual(page1.records.map((e) => e.seq), before.slice(0, 4));
  assert.equal(page1.next_cursor, String(page1.records[3].seq));

  // New records arrive between pages.
  await server.execute({ tool: 'shell', code: 'echo arrives' });
  await server.execute({ tool: 'python', code: 'print("arrives")' });

  const rest = [];
  let cursor = page1.next_cursor;
  while (cursor !== null) {
    const p = await list({ limit: 4, cursor });
    assert.ok(p.records.length <= 4);
    rest.push(...p.records.map((e) => e.seq));
    cursor = p.next_cursor;
  }
  const seen = [...page1.records.map((e) => e.seq), ...rest];
  assert.equal(new Set(seen).size, seen.length, 'no duplicates');
  assert.deepEqual(seen, before, 'page 2 onwards continue exactly where page 1 ended');
  // And the new records are on a fresh page 1.
  const fresh = await list({ limit: 4 });
  assert.ok(fresh.records[0].seq > before[0]);
  // A filtered walk is stable too.
  const f1 = await list({ action: 'execute', limit: 2 });
  const f2 = await list({ action: 'execute', limit: 2, cursor: f1.next_cursor });
  assert.ok(f2.records.every((e) => e.seq < f1.records[1].seq && e.record.action === 'execute'));
  // A cursor past the end gives an empty last page.
  assert.deepEqual(await list({ cursor: '1' }), { records: [], next_cursor: null });
});

test('only auditors, admins and operators may read the trail (agent and reviewer: 403; no key: 401)', async () => {
  // a record of this tenant's (seq 1 may be the other tenant's: the harness makes its keys at
  // once, and each key's creation is a record)
  const seq = (await list()).records[0].seq;
  const paths = ['/v1/audit', `/v1/audit/${seq}`, '/v1/audit/export', '/v1/audit/export?format=csv', '/v1/audit/verify'];
  for (const p of paths) {
    for (const role of ['agent', 'reviewer']) {
      assertProblem(await server.request('GET', p, { key: server.keys[role] }), 403, 'forbidden');
    }
    assertProblem(await server.request('GET', p, {}), 401, 'unauthorized');
    for (const role of ['auditor', 'admin', 'operator']) {
      const res = await server.request('GET', p, { key: server.keys[role] });
      assert.equal(res.status, 200, `${role} ${p}: ${res.text.slice(0, 300)}`);
    }
  }
  const res = await server.request('POST', '/v1/audit', { key: server.keys.admin, json: {} });
  assertProblem(res, 405, 'method-not-allowed');
});

test("one tenant never sees another tenant's records (list, get by seq, export)", async () => {
  const { json: other } = await server.execute({ tool: 'shell', code: 'echo tenant b' }, { key: server.keys.otherAgent });
  const bRecords = (await listAll({}, server.keys.otherAdmin)).filter((e) => e.record.execution_id === other.id);
  assert.equal(bRecords.length, 3); // execute, execution.start, execution.complete
  const bTenant = bRecords[0].record.tenant_id;

  const mine = await listAll({}, server.keys.auditor);
  assert.ok(mine.length > 0);
  const aTenant = mine[0].record.tenant_id;
  assert.notEqual(aTenant, bTenant);
  assert.ok(mine.every((e) => e.record.tenant_id === aTenant), 'list: own tenant only');
  for (const e of bRecords) {
    assertProblem(await server.request('GET', `/v1/audit/${e.seq}`, { key: server.keys.auditor }), 404, 'not-found');
  }
  for (const p of [{ q: 'shell' }, { tool: 'shell' }, { since: '2000-01-01' }]) {
    const got = await listAll(p, server.keys.auditor);
    assert.ok(got.every((e) => e.record.tenant_id === aTenant), `filter ${JSON.stringify(p)} stays in the tenant`);
  }
  for (const format of ['jsonl', 'csv']) {
    const res = await exportText(format, {}, server.keys.auditor);
    assert.ok(!res.text.includes(bTenant), `${format} export of tenant a mentions tenant b`);
    assert.ok(!res.text.includes(other.id));
  }
  // An auditor may not name another tenant; naming its own is allowed.
  assertProblem(await server.request('GET', `/v1/audit?tenant=${server.tenants.b}`, { key: server.keys.auditor }), 403, 'forbidden');
  assertProblem(await server.request('GET', `/v1/audit?tenant=${bTenant}`, { key: server.keys.auditor }), 403, 'forbidden');
  assertProblem(await server.request('GET', `/v1/audit/export?tenant=${server.tenants.b}`, { key: server.keys.auditor }), 403, 'forbidden');
  const own = await listAll({ tenant: server.tenants.a }, server.keys.auditor);
  assert.deepEqual(own.map((e) => e.seq), mine.map((e) => e.seq));
  // Admins act on their own tenant only (asking for another is 403, as for auditors);
  // operators see every tenant, or one by name or id.
  assertProblem(await server.request('GET', `/v1/audit?tenant=${server.tenants.a}`, { key: server.keys.otherAdmin }), 403, 'forbidden');
  const adminB = await listAll({}, server.keys.otherAdmin);
  assert.ok(adminB.length >= 2 && adminB.every((e) => e.record.tenant_id === bTenant));
  const opA = await listAll({ tenant: server.tenants.a }, server.keys.operator);
  assert.deepEqual(opA.map((e) => e.seq), mine.map((e) => e.seq));
  const opB = await listAll({ tenant: bTenant }, server.keys.operator);
  assert.deepEqual(opB.map((e) => e.seq), adminB.map((e) => e.seq));
  assert.deepEqual(await listAll({ tenant: 'no-such-tenant' }, server.keys.operator), []);
  // Unknown and malformed sequence numbers are 404 too.
  for (const s of ['999999999', '0', '-1', 'abc', '1.5', '99999999999999999999999']) {
    assertProblem(await server.request('GET', `/v1/audit/${s}`, { key: server.keys.operator }), 404, 'not-found');
  }
});

test('exports (jsonl and csv) verify offline with the public key, and detect an edited line', async () => {
  // Enough records for a signed checkpoint (every 100), so the key is actually exercised.
  const need = 102 - (await listAll({}, server.keys.operator)).length;
  for (let i = 0; i < need; i += 16) {
    await Promise.all(Array.from({ length: 8 }, () => server.execute({ tool: 'shell', code: 'true' })));
  }
  const { hex, keyId } = await publicKey();
  const jsonl = await exportText('jsonl');
  assert.match(jsonl.headers.get('content-type'), /^application\/x-ndjson/);
  assert.match(jsonl.headers.get('content-disposition'), /audit\.jsonl/);
  const parsed = parseJsonl(jsonl.text);
  assert.ok(parsed.checkpoints.length >= 1, 'a checkpoint was signed at seq 100');
  assert.ok(parsed.checkpoints.some((c) => c.seq === 100));
  for (const c of parsed.checkpoints) assert.equal(c.key_id, keyId);
  const n = parsed.records.length;

  const jf = writeTmp('audit.jsonl', jsonl.text);
  let v = await verifyCli(['--file', jf, '--public-key', hex]);
  assert.equal(v.code, 0, JSON.stringify(v.verdict));
  assert.equal(v.verdict.ok, true);
  assert.equal(v.verdict.checked, n);
  assert.ok(v.verdict.checkpoint.seq >= 100);

  const csv = await exportText('csv');
  assert.match(csv.headers.get('content-type'), /^text\/csv/);
  assert.equal(csv.text.split('\n')[0], 'kind,seq,ts,tenant_id,actor,action,tool,status,hash,key_id,signature,record,digest');
  const cf = writeTmp('audit.csv', csv.text);
  v = await verifyCli(['--file', cf, '--public-key', hex]);
  assert.equal(v.code, 0, JSON.stringify(v.verdict));
  assert.ok(v.verdict.checked >= n);

  // The same export against another key: the checkpoints do not verify.
  v = await verifyCli(['--file', jf, '--public-key', crypto.randomBytes(32).toString('hex')]);
  assert.equal(v.code, 3);
  assert.equal(v.verdict.ok, false);
  assert.match(v.verdict.reason, /signature/);

  // One edited record in each format: found, with its seq.
  const victim = parsed.records[41];
  // Edit only the victim's line (its execute and completion records share request_id).
  // Records are exported as PostgreSQL prints jsonb: '"key": "value"'.
  const editLine = (text, prefix, re, to) => text.split('\n').map((l) => (l.startsWith(prefix) ? l.replace(re, to) : l)).join('\n');
  const edited = editLine(jsonl.text, `{"seq":${victim.seq},`, /"request_id": ?"[^"]*"/, '"request_id": "forged"');
  assert.notEqual(edited, jsonl.text);
  v = await verifyCli(['--file', writeTmp('edited.jsonl', edited), '--public-key', hex]);
  assert.equal(v.code, 3);
  assert.equal(v.verdict.first_bad_seq, victim.seq);
  assert.match(v.verdict.reason, /altered/);
  const editedCsv = editLine(csv.text, `record,${victim.seq},`, /""request_id"": ?""[^"]*""/, '""request_id"": ""forged""');
  assert.notEqual(editedCsv, csv.text);
  v = await verifyCli(['--file', writeTmp('edited.csv', editedCsv), '--public-key', hex]);
  assert.equal(v.code, 3);
  assert.equal(v.verdict.first_bad_seq, victim.seq);
  // A dropped line.
  const lines = jsonl.text.split('\n');
  const dropAt = lines.findIndex((l) => l.startsWith(`{"seq":${victim.seq},`));
  v = await verifyCli(['--file', writeTmp('dropped.jsonl', [...lines.slice(0, dropAt), ...lines.slice(dropAt + 1)].join('\n')), '--public-key', hex]);
  assert.equal(v.code, 3);
  assert.equal(v.verdict.first_bad_seq, victim.seq);

  // A tenant's or a filtered export withholds what it does not show, and still verifies.
  await server.execute({ tool: 'shell', code: 'echo b' }, { key: server.keys.otherAgent });
  for (const [what, params, key] of [['tenant b, its admin', {}, server.keys.otherAdmin],
    ['tenant b, by an operator', { tenant: server.tenants.b }, server.keys.operator],
    ['executes of tenant a', { action: 'execute' }, server.keys.auditor]]) {
    const text = (await exportText('jsonl', params, key)).text;
    const ff = writeTmp('filtered.jsonl', text);
    v = await verifyCli(['--file', ff, '--public-key', hex]);
    assert.equal(v.code, 0, `${what}: ${JSON.stringify(v.verdict)}`);
    assert.ok(v.verdict.withheld > 0, what);
    const p = parseJsonl(text);
    assert.ok(p.records.length > 0 && p.withheld.every((w) => !w.record && Object.keys(w).sort().join() === 'digest,hash,seq,withheld'), what);
  }

  // The online check agrees, and the CLI's database mode too.
  const online = await server.request('GET', '/v1/audit/verify', { key: server.keys.auditor });
  assert.equal(online.status, 200);
  assert.equal(online.json.ok, true, online.text);
  assert.equal(online.json.first_bad_seq, null);
  assert.equal(online.json.reason, null);
  assert.ok(online.json.checked >= n);
  assert.equal(online.json.checkpoint.key_id, keyId);
  v = await verifyCli([]);
  assert.equal(v.code, 0);
  assert.equal(v.verdict.ok, true);
});

test('an export streams records in seq order identical to the API view', async () => {
  const { records } = parseJsonl((await exportText('jsonl', { action: 'execute' }, server.keys.auditor)).text);
  const viaList = await listAll({ action: 'execute' }, server.keys.auditor);
  assert.deepEqual(records.map(({ digest, ...r }) => r), [...viaList].reverse());
  assert.ok(records.every((r) => /^[0-9a-f]{64}$/.test(r.digest)));
});

test('/metrics counts requests and executions, and they increase', async () => {
  const req0 = await metric('toolcage_http_requests_total');
  const ex0 = await metric('toolcage_executions_total', { tool: 'shell', status: 'completed' });
  const lat0 = await metric('toolcage_execution_duration_seconds_count', { tool: 'shell' });
  await server.execute({ tool: 'shell', code: 'echo metrics' });
  await server.execute({ tool: 'shell', code: 'echo metrics' });
  const req1 = await metric('toolcage_http_requests_total');
  const ex1 = await metric('toolcage_executions_total', { tool: 'shell', status: 'completed' });
  const lat1 = await metric('toolcage_execution_duration_seconds_count', { tool: 'shell' });
  assert.ok(req1 >= req0 + 3, `requests ${req0} -> ${req1}`);
  assert.equal(ex1, ex0 + 2);
  assert.equal(lat1, lat0 + 2);
  const res = await server.request('GET', '/metrics');
  assert.match(res.headers.get('content-type'), /^text\/plain/);
  assert.match(res.text, /^# TYPE toolcage_audit_write_failures_total counter$/m);
  assert.match(res.text, /^toolcage_audit_write_failures_total 0$/m);
});

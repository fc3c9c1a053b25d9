// Authorization attacks from issue 11, each performed against the real server, asserting the
// evidence that it fails:
// - an agent asks POST /v1/credentials for a token of a tool whose calls are held for a human
//   (irreversible/human_approve, manual_only, a pre-screen that holds): no token exists until
//   an approved execution runs;
// - an admin of tenant A reads tenant B's audit trail, or confirms a guess of B's secret with
//   POST /v1/audit/hash; operators (no tenant, CLI-made keys) are the only cross-tenant role;
// - one reviewer supplies both approvals of a two-person rule with an API key and a console
//   login: keys and console users bound to one person count once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setup, assertProblem, createKey, cli } from './harness.mjs';
import { hold, decide, getExecution, waitFinished, lit } from './fixtures/approval-helpers.mjs';
import { addUser, signIn, postForm } from './fixtures/console-http.mjs';

const AUDIENCE = 'https://deploy.example.com';
const LIMITS = { timeout_ms: { default: 20000, max: 60000 }, cpu_ms: { default: 20000, max: 60000 }, memory_mb: 256, pids: 64, output_bytes: 1048576 };
const TOKEN = { token: { audience: AUDIENCE, scope: 'deploy:write', ttl_seconds: 300 } };

function tool(extra = {}) {
  return {
    description: 'authz test tool',
    language: 'shell',
    command: ['/bin/bash', '--noprofile', '--norc', '{code_file}'],
    code_file: 'main.sh',
    network: 'none',
    limits: LIMITS,
    prescreen: { rules: 'none' },
    ...extra,
  };
}

function writePolicy() {
  const policy = {
    version: 1,
    tools: {
      shell: tool(),
      free: tool({ credentials: [TOKEN] }),
      deploy: tool({ tier: 'human_approve', irreversible: true, approval: { approvers: 1 }, credentials: [TOKEN] }),
      manual: tool({ tier: 'manual_only', credentials: [TOKEN] }),
      screened: tool({ prescreen: { rules: 'shell', actions: { high: 'approve' } }, credentials: [TOKEN] }),
      dual: tool({ tier: 'manual_only', approval: { approvers: 2 } }),
    },
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-authz-policy-'));
  const file = path.join(dir, 'policy.json');
  fs.writeFileSync(file, JSON.stringify(policy, null, 2));
  return file;
}

const server = setup('authz', { policy: writePolicy() });
const tag = () => crypto.randomBytes(4).toString('hex');

async function tokensOf(toolName) {
  return Number((await server.sql(`SELECT count(*) FROM credential_tokens WHERE tool = ${lit(toolName)}`)).trim());
}

async function auditCount(where) {
  return Number((await server.sql(`SELECT count(*) FROM audit_log WHERE ${where}`)).trim());
}

// ---------------------------------------------------------------------------
// 1. Tokens of held tools

test('no token for a tool whose calls are held: 403 approval-required, audited, nothing issued', async () => {
  for (const [name, why] of [['deploy', /irreversible.*tier:human_approve/], ['manual', /tier:manual_only/], ['screened', /prescreen:high/]]) {
    for (const key of [server.keys.agent, server.keys.admin]) {
      const res = await server.request('POST', '/v1/credentials', { key, json: { tool: name, audience: AUDIENCE } });
      assertProblem(res, 403, 'approval-required');
      assert.match(res.json.detail, why);
      assert.ok(!/v4\.public\./.test(res.text), 'no token in the answer');
    }
    assert.equal(await tokensOf(name), 0, `a token of ${name} was recorded`);
    assert.equal(await auditCount(`action = 'credential.token.issue' AND tool = ${lit(name)}`), 0);
    assert.equal(await auditCount(`action = 'credential.token.refused' AND tool = ${lit(name)}`), 2);
  }
  // The same request for a tool that runs without a person is served.
  const ok = await server.request('POST', '/v1/credentials', { key: server.keys.agent, json: { tool: 'free', audience: AUDIENCE } });
  assert.equal(ok.status, 201, ok.text);
  assert.equal(await tokensOf('free'), 1);
});

test("a held tool's token exists only inside its approved execution", async () => {
  const before = await tokensOf('deploy');
  const { json: held } = await hold(server, 'echo "token:${TOOLCAGE_TOKEN:+yes}"', { tool: 'deploy' });
  assert.equal(await tokensOf('deploy'), before, 'a token was issued before approval');
  assert.equal((await getExecution(server, held.id)).status, 'pending_approval');
  const ok = await decide(server, held.approval_id, 'approve', { key: server.keys.reviewer });
  assert.equal(ok.status, 200, ok.text);
  const done = await waitFinished(server, held.id);
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.equal(done.stdout, 'token:yes\n');
  const rows = (await server.sql(`SELECT execution_id, revoked_at IS NOT NULL FROM credential_tokens WHERE tool = 'deploy'`)).trim().split('\n');
  assert.deepEqual(rows, [`${held.id}|t`], 'one token, the approved execution\'s, revoked when it ended');
});

// ---------------------------------------------------------------------------
// 2. Admins and other tenants; operators

test("an admin of tenant A cannot read tenant B's trail (list, one record, export)", async () => {
  // Something of B's worth reading: a secret (its keyed hash is in the trail) and a run.
  const secret = `b-secret-${tag()}`;
  const put = await server.request('PUT', '/v1/secrets/b-only', { key: server.keys.otherAdmin, json: { value: secret, allowed_tools: [] } });
  assert.equal(put.status, 201, put.text);
  await server.execute({ tool: 'shell', code: 'echo tenant-b-run' }, { key: server.keys.otherAgent });
  const bTrail = (await server.request('GET', '/v1/audit?limit=500', { key: server.keys.otherAdmin })).json.records;
  const bPut = bTrail.find((r) => r.record.action === 'secret.put');
  assert.ok(bPut, 'B sees its own secret.put');
  const bTenant = bPut.record.tenant_id;

  for (const q of [`tenant=${server.tenants.b}`, `tenant=${bTenant}`]) {
    assertProblem(await server.request('GET', `/v1/audit?${q}`, { key: server.keys.admin }), 403, 'forbidden');
    assertProblem(await server.request('GET', `/v1/audit/export?${q}`, { key: server.keys.admin }), 403, 'forbidden');
  }
  assertProblem(await server.request('GET', `/v1/audit/${bPut.seq}`, { key: server.keys.admin }), 404, 'not-found');
  const mine = (await server.request('GET', '/v1/audit?limit=500', { key: server.keys.admin })).json.records;
  assert.ok(mine.length > 0 && mine.every((r) => r.record.tenant_id !== bTenant));
  for (const format of ['jsonl', 'csv']) {
    const exp = await server.request('GET', `/v1/audit/export?format=${format}`, { key: server.keys.admin });
    assert.equal(exp.status, 200);
    assert.ok(!exp.text.includes(bTenant), `${format}: B's tenant id in A's export`);
    assert.ok(!exp.text.includes(bPut.record.value_hash), `${format}: B's value_hash in A's export`);
    assert.ok(!exp.text.includes('tenant-b-run'), `${format}: B's code in A's export`);
  }
  // B's record is in A's export only as a withheld line: seq, hash, digest.
  const line = (await server.request('GET', '/v1/audit/export', { key: server.keys.admin })).text
    .split('\n').find((l) => l.startsWith(`{"seq":${bPut.seq},`));
  assert.deepEqual(Object.keys(JSON.parse(line)).sort(), ['digest', 'hash', 'seq', 'withheld']);
});

test("POST /v1/audit/hash is keyed per tenant: A cannot confirm a guess of B's secret", async () => {
  const secret = `guess-me-${tag()}`;
  const put = await server.request('PUT', '/v1/secrets/guessable', { key: server.keys.otherAdmin, json: { value: secret, allowed_tools: [] } });
  assert.equal(put.status, 201, put.text);
  const bHash = (await server.sql(`SELECT record->>'value_hash' FROM audit_log WHERE action = 'secret.put' AND record->>'secret' = 'guessable'`)).trim();
  assert.match(bHash, /^[0-9a-f]{64}$/);
  // A's admin and auditor hash the right guess: the answer matches nothing of B's.
  for (const key of [server.keys.admin, server.keys.auditor]) {
    const a = await server.request('POST', '/v1/audit/hash', { key, json: { value: secret } });
    assert.equal(a.status, 200, a.text);
    assert.notEqual(a.json.hash, bHash);
    assert.equal(await auditCount(`record->>'value_hash' = ${lit(a.json.hash)} AND action <> 'audit.hash'`), 0);
  }
  // B's own admin gets the hash its records carry.
  const b = await server.request('POST', '/v1/audit/hash', { key: server.keys.otherAdmin, json: { value: secret } });
  assert.equal(b.json.hash, bHash);
  assertProblem(await server.request('POST', '/v1/audit/hash', { key: server.keys.operator, json: { value: secret } }), 403, 'forbidden');
});

test('operator keys: CLI only, no tenant; read every tenant, reload; act in no tenant', async () => {
  await assert.rejects(cli(['keys', 'create', '--role', 'operator', '--tenant', server.tenants.a], server.env), /failed \(2\)/);
  await assert.rejects(cli(['keys', 'create', '--role', 'operator', '--person', 'x'], server.env), /failed \(2\)/);
  const op = server.keys.operator;
  // tenant work is not an operator's
  assertProblem(await server.request('POST', '/v1/execute', { key: op, json: { tool: 'shell', code: 'true' } }), 403, 'forbidden');
  assertProblem(await server.request('GET', '/v1/approvals', { key: op }), 403, 'forbidden');
  assertProblem(await server.request('GET', '/v1/secrets', { key: op }), 403, 'forbidden');
  assertProblem(await server.request('POST', '/v1/credentials', { key: op, json: { tool: 'free', audience: AUDIENCE } }), 403, 'forbidden');
  // every tenant's trail, and the records of no tenant (its own key.create among them)
  const all = (await server.request('GET', '/v1/audit?limit=500', { key: op })).json.records;
  const tenants = new Set(all.map((r) => r.record.tenant_id));
  assert.ok(tenants.size >= 3, `tenant a, tenant b and none: ${[...tenants]}`);
  const opCreate = all.find((r) => r.record.action === 'key.create' && r.record.key.role === 'operator');
  assert.ok(opCreate && opCreate.record.tenant_id === undefined);
  for (const key of [server.keys.admin, server.keys.otherAdmin, server.keys.auditor]) {
    assertProblem(await server.request('GET', `/v1/audit/${opCreate.seq}`, { key }), 404, 'not-found');
  }
  assert.equal((await server.request('GET', `/v1/audit/${opCreate.seq}`, { key: op })).status, 200);
});

// ---------------------------------------------------------------------------
// 6. Two-person rule: persons, not credentials

test('one person with an API key and a console login supplies one approval, not two', async () => {
  const t = tag();
  const alice = `alice-${t}`;
  const aliceKey = await createKey(server.tenants.a, 'reviewer', server.env, { person: alice });
  const aliceLogin = await addUser(server, `alice-console-${t}`, 'reviewer', ['--person', alice]);
  const { json: held } = await hold(server, `echo two-people-${t}`, { tool: 'dual' });

  const first = await decide(server, held.approval_id, 'approve', { key: aliceKey });
  assert.equal(first.status, 200, first.text);
  assert.deepEqual([first.json.status, first.json.approvals, first.json.required_approvals], ['pending', 1, 2]);

  // The same person through the console: refused, and nothing is counted.
  const s = await signIn(server.base, aliceLogin);
  assert.equal(s.status, 303, JSON.stringify(s));
  const second = await postForm(server.base, s.session, `/console/approvals/${held.approval_id}`, `/console/approvals/${held.approval_id}/approve`);
  assert.equal(second.status, 409, second.text.slice(0, 300));
  assert.match(second.text, /already decided/);
  const a = await server.request('GET', `/v1/approvals/${held.approval_id}`, { key: server.keys.reviewer });
  assert.equal(a.json.status, 'pending');
  assert.equal(a.json.approvals, 1);
  assert.equal((await getExecution(server, held.id)).status, 'pending_approval', 'it ran on one person\'s say-so');
  assert.equal(Number((await server.sql(`SELECT count(*) FROM approval_decisions WHERE approval_id = ${lit(held.approval_id)}`)).trim()), 1);

  // A second person makes it two.
  const third = await decide(server, held.approval_id, 'approve', { key: server.keys.reviewer });
  assert.equal(third.status, 200, third.text);
  assert.deepEqual([third.json.status, third.json.approvals], ['approved', 2]);
  assert.equal((await waitFinished(server, held.id)).stdout, `two-people-${t}\n`);
});

test('a console user is the person of its name by default; a person cannot approve what their own key asked for', async () => {
  const t = tag();
  const carol = `carol-${t}`;
  await addUser(server, carol, 'reviewer'); // person "carol-…" by default
  const carolKey = await createKey(server.tenants.a, 'reviewer', server.env, { person: carol });
  const { json: held } = await hold(server, `echo carol-${t}`, { tool: 'dual' });
  const s = await signIn(server.base, carol);
  const viaConsole = await postForm(server.base, s.session, `/console/approvals/${held.approval_id}`, `/console/approvals/${held.approval_id}/approve`);
  assert.equal(viaConsole.status, 303, viaConsole.text.slice(0, 300));
  assertProblem(await decide(server, held.approval_id, 'approve', { key: carolKey }), 409, 'already-decided');
  assert.equal((await getExecution(server, held.id)).status, 'pending_approval');

  // maker is not checker, by person: bob's agent key asks, bob's reviewer key may not decide
  const bob = `bob-${t}`;
  const bobAgent = await createKey(server.tenants.a, 'agent', server.env, { person: bob });
  const bobReviewer = await createKey(server.tenants.a, 'reviewer', server.env, { person: bob });
  const { json: mine } = await hold(server, `echo bob-${t}`, { tool: 'deploy', key: bobAgent });
  assertProblem(await decide(server, mine.approval_id, 'approve', { key: bobReviewer }), 403, 'maker-checker');
  assertProblem(await decide(server, mine.approval_id, 'deny', { key: bobReviewer, reason: 'mine' }), 403, 'maker-checker');
  assert.equal((await getExecution(server, mine.id)).status, 'pending_approval');
  // the person is recorded with the key
  const rec = (await server.sql(`SELECT record->'key'->'person'->>'name' FROM audit_log WHERE action = 'key.create' ORDER BY seq DESC LIMIT 1`)).trim();
  assert.equal(rec, bob);
});

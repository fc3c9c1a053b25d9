// Signed execution receipts (issue 18): GET /v1/executions/{id}/receipt states what a finished
// call was asked (hashes of its code, stdin, files), under which tool definition, who asked and
// who approved it, which credentials it was leased, what it produced (hashes of stdout, stderr,
// collected files as the API returns them) and which audit records tell it; signed with the
// audit key. Evidence: the hashes recomputed here from what the API returned, the audit
// records' hashes read from the trail, `toolcage receipt verify` accepting the receipt with the
// published key and refusing it with any value changed, another key, or another tenant.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { setup, assertProblem, assertSchema, BIN, ROOT } from './harness.mjs';
import { decide, waitFinished, sqlJson, lit } from './fixtures/approval-helpers.mjs';
import { addUser, signIn } from './fixtures/console-http.mjs';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-receipts-'));
const POLICY = path.join(DIR, 'policy.json');
{
  const p = JSON.parse(fs.readFileSync(path.join(ROOT, 'examples/policy.json'), 'utf8'));
  p.tools.leased = { ...p.tools.shell, description: 'shell with a leased secret', session: undefined,
    credentials: [{ secret: 'receipt-key', as: 'env', name: 'RECEIPT_KEY' }] };
  delete p.tools.leased.session;
  fs.writeFileSync(POLICY, JSON.stringify(p));
}
after(() => fs.rmSync(DIR, { recursive: true, force: true }));
const server = setup('receipts', { policy: POLICY });
const sha256 = (s) => crypto.createHash('sha256').update(s).digest('hex');
const tag = () => crypto.randomBytes(4).toString('hex');

async function receipt(id, key = server.keys.agent) {
  const res = await server.request('GET', `/v1/executions/${id}/receipt`, { key });
  assert.equal(res.status, 200, res.text);
  assertSchema('Receipt', res.json);
  return res.json;
}
async function publicKey() {
  const r = await server.cli(['audit', 'public-key']);
  return r.stdout.trim().split('\n').at(-1);
}
/** `toolcage receipt verify` on doc (an object, or text as written): {code, verdict}. */
async function verify(doc, pk) {
  const f = path.join(DIR, `r-${tag()}.json`);
  fs.writeFileSync(f, typeof doc === 'string' ? doc : JSON.stringify(doc, null, 2));
  const r = spawnSync(BIN, ['receipt', 'verify', f, '--public-key', pk], { encoding: 'utf8', env: { ...process.env, ...server.env } });
  let verdict = null;
  try { verdict = JSON.parse(r.stdout); } catch { /* the test says */ }
  return { code: r.status, verdict, stderr: r.stderr };
}

test('a call\'s receipt binds what it was asked, what it returned and its audit records; it verifies offline', async () => {
  const t = tag();
  const files = [{ path: 'data.txt', content: `data-${t}\n` }, { path: 'bin.dat', content: Buffer.from([0, 1, 2, 255]).toString('base64'), encoding: 'base64' }];
  const code = `cat data.txt; echo out-${t}; echo err-${t} >&2; mkdir -p out; echo made-${t} > out/r.txt`;
  const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code, stdin: `in-${t}`, files, collect: ['out/*.txt'] } });
  assert.equal(res.status, 200, res.text);
  const e = res.json;
  assert.equal(e.status, 'completed');
  const doc = await receipt(e.id);
  const st = doc.statement;
  assert.equal(st.format, 'toolcage.receipt/1');
  assert.equal(st.execution_id, e.id);
  assert.equal(st.tool, 'shell');
  assert.equal(st.status, 'completed');
  assert.equal(st.exit_code, 0);
  assert.equal(st.started, true);
  assert.equal(st.approval, null);
  assert.deepEqual(st.credentials, []);
  // what it was asked
  assert.equal(st.request.code_sha256, sha256(code));
  assert.equal(st.request.stdin_sha256, sha256(`in-${t}`));
  assert.deepEqual(st.request.files, [
    { path: 'data.txt', size: `data-${t}\n`.length, sha256: sha256(`data-${t}\n`) },
    { path: 'bin.dat', size: 4, sha256: sha256(Buffer.from([0, 1, 2, 255])) },
  ]);
  // what it returned, as the API returned it
  assert.equal(st.output.stdout_sha256, sha256(e.stdout));
  assert.equal(st.output.stderr_sha256, sha256(e.stderr));
  assert.equal(st.output.stdout_bytes, Buffer.byteLength(e.stdout));
  assert.equal(st.output.files.length, 1);
  assert.equal(st.output.files[0].path, e.files[0].path);
  assert.equal(e.files[0].encoding, 'utf8');
  assert.equal(st.output.files[0].sha256, sha256(e.files[0].content));
  // under which definition of the tool: the digest its "execute" record carries
  const exec = await sqlJson(server, `SELECT record FROM audit_log WHERE record->>'execution_id' = ${lit(e.id)} AND record->>'action' = 'execute'`);
  assert.match(st.tool_policy, /^[0-9a-f]{64}$/);
  assert.equal(exec.tool_policy, st.tool_policy);
  // the audit records that tell it, by seq and chain hash
  const trail = await sqlJson(server, `SELECT json_agg(json_build_object('seq', seq, 'action', action, 'hash', encode(hash, 'hex')) ORDER BY seq) FROM audit_log WHERE record->>'execution_id' = ${lit(e.id)}`);
  assert.deepEqual(st.audit, trail);
  assert.deepEqual(st.audit.map((a) => a.action), ['execute', 'execution.start', 'execution.complete']);

  // offline: the published key accepts it, in any layout
  const pk = await publicKey();
  assert.equal(doc.signature.public_key, pk);
  let v = await verify(doc, pk);
  assert.equal(v.code, 0, JSON.stringify(v));
  assert.deepEqual([v.verdict.ok, v.verdict.execution_id], [true, e.id]);
  v = await verify(JSON.stringify(doc), pk);
  assert.equal(v.code, 0);
  // any changed value fails: a hash, the status, an audit hash, a dropped record, an added field
  const mutations = [
    (d) => { d.statement.output.stdout_sha256 = sha256('something else'); },
    (d) => { d.statement.status = 'failed'; },
    (d) => { d.statement.audit[1].hash = d.statement.audit[0].hash; },
    (d) => { d.statement.audit.pop(); },
    (d) => { d.statement.approval = { id: crypto.randomUUID() }; },
    (d) => { d.statement.request.code_sha256 = d.statement.request.code_sha256.replace(/^./, (c) => (c === '0' ? '1' : '0')); },
    (d) => { d.signature.value = Buffer.alloc(64, 7).toString('base64'); },
  ];
  for (const [i, m] of mutations.entries()) {
    const d = structuredClone(doc);
    m(d);
    v = await verify(d, pk);
    assert.equal(v.code, 3, `mutation ${i} verified: ${JSON.stringify(v)}`);
    assert.equal(v.verdict.ok, false);
  }
  // another key: refused, even with the file naming it
  const other = crypto.randomBytes(32).toString('hex');
  v = await verify({ ...doc, signature: { ...doc.signature, public_key: other } }, other);
  assert.equal(v.code, 3);
  v = await verify(doc, other);
  assert.equal(v.code, 3);
  assert.match(v.verdict.error, /another key/);
});

test('a held call\'s receipt names its approval and every decision; a leased secret appears by name only', async () => {
  const t = tag();
  const secret = `s3cr3t-${t}-${crypto.randomBytes(8).toString('hex')}`;
  const put = await server.request('PUT', '/v1/secrets/receipt-key', { key: server.keys.admin, json: { value: secret, allowed_tools: ['leased'] } });
  assert.ok([200, 201].includes(put.status), put.text);
  const leased = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'leased', code: 'test -n "$RECEIPT_KEY" && echo has-key' } });
  assert.equal(leased.status, 200, leased.text);
  assert.equal(leased.json.stdout, 'has-key\n');
  const r1 = await receipt(leased.json.id);
  assert.equal(r1.statement.credentials.length, 1);
  assert.equal(r1.statement.credentials[0].secret, 'receipt-key');
  assert.equal(r1.statement.credentials[0].delivered_as, 'env');
  const lease = await sqlJson(server, `SELECT to_json(id) FROM credential_leases WHERE execution_id = ${lit(leased.json.id)}`);
  assert.equal(r1.statement.credentials[0].lease_id, lease);
  assert.ok(!JSON.stringify(r1).includes(secret), 'the receipt holds the secret');

  const h = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: `echo deployed-${t}` } });
  assert.equal(h.status, 202, h.text);
  // no outcome yet: no receipt
  assertProblem(await server.request('GET', `/v1/executions/${h.json.id}/receipt`, { key: server.keys.agent }), 409, 'not-finished');
  assert.equal((await decide(server, h.json.approval_id, 'approve', { reason: `ok ${t}` })).status, 200);
  const done = await waitFinished(server, h.json.id);
  assert.equal(done.status, 'completed');
  const r2 = await receipt(h.json.id, server.keys.auditor);
  const ap = r2.statement.approval;
  assert.equal(ap.id, h.json.approval_id);
  assert.equal(ap.status, 'approved');
  assert.equal(ap.decisions.length, 1);
  assert.equal(ap.decisions[0].decision, 'approve');
  assert.equal(ap.decisions[0].reason, `ok ${t}`);
  const hash = await sqlJson(server, `SELECT to_json(encode(payload_hash, 'hex')) FROM approvals WHERE id = ${lit(h.json.approval_id)}`);
  assert.equal(ap.payload_hash, hash);
  const approvalPolicy = await sqlJson(server, `SELECT payload->'tool_policy' FROM approvals WHERE id = ${lit(h.json.approval_id)}`);
  assert.equal(r2.statement.tool_policy, approvalPolicy);
  assert.deepEqual(r2.statement.audit.map((a) => a.action), ['execute', 'approval.approved', 'execution.start', 'execution.complete']);
  assert.equal((await verify(r2, await publicKey())).code, 0);

  // a denied call has a receipt too: it never started
  const d = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'deploy', code: 'echo never' } });
  assert.equal((await decide(server, d.json.approval_id, 'deny', { reason: 'no' })).status, 200);
  await waitFinished(server, d.json.id);
  const r3 = await receipt(d.json.id);
  assert.equal(r3.statement.status, 'denied');
  assert.equal(r3.statement.started, false);
  assert.equal(r3.statement.approval.decisions[0].decision, 'deny');
});

test('another tenant gets no receipt; the console offers it as a download', async () => {
  const res = await server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'echo mine' } });
  assert.equal(res.status, 200);
  const id = res.json.id;
  assertProblem(await server.request('GET', `/v1/executions/${id}/receipt`, { key: server.keys.otherAgent }), 404, 'not-found');
  assertProblem(await server.request('GET', `/v1/executions/${crypto.randomUUID()}/receipt`, { key: server.keys.agent }), 404, 'not-found');
  assertProblem(await server.request('GET', '/v1/executions/nope/receipt', { key: server.keys.agent }), 404, 'not-found');
  assertProblem(await server.request('GET', `/v1/executions/${id}/receipt`), 401, 'unauthorized');

  const login = await addUser(server, `receipt-auditor-${tag()}`, 'auditor');
  const si = await signIn(server.base, login);
  assert.equal(si.status, 303);
  const cookie = { cookie: `tc_session=${si.session}` };
  const page = await (await fetch(`${server.base}/console/executions/${id}`, { headers: cookie })).text();
  assert.match(page, new RegExp(`href="/console/executions/${id}/receipt"`));
  const dl = await fetch(`${server.base}/console/executions/${id}/receipt`, { headers: cookie });
  assert.equal(dl.status, 200);
  assert.match(dl.headers.get('content-disposition'), new RegExp(`attachment; filename="receipt-${id}.json"`));
  const doc = await dl.json();
  assert.equal(doc.statement.execution_id, id);
  assert.equal((await verify(doc, await publicKey())).code, 0);
  // without a console session: the sign-in page, not the receipt
  const anon = await fetch(`${server.base}/console/executions/${id}/receipt`, { redirect: 'manual' });
  assert.notEqual(anon.status, 200);
});

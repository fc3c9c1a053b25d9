// Held calls in a session (issue 21: "a tool whose calls are held for approval cannot be opened
// as a session ... unless its policy says otherwise"). With session.held_calls "hold", a call
// the gate holds (the tool's tier, or code its pre-screen holds) is held like a one-shot call:
// 202, an approval whose payload names the session, the session busy for it. Approved, the
// approved payload runs in the session (evidence: state set before it is read by it, and state
// it sets is read after it); denied, cancelled or withdrawn with the session's end, it never
// runs (evidence: no execution.start record, the state it would set is absent) and the
// session is free again. Without the option the refusals stay (sessions.test.mjs).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setup, assertProblem, assertSchema, SLOW, ROOT } from './harness.mjs';
import { openEvents, joined } from './fixtures/sse.mjs';
import { decide, getExecution, waitFinished, until, auditOf, actions, sqlJson, lit } from './fixtures/approval-helpers.mjs';
import { addUser, signIn, postForm } from './fixtures/console-http.mjs';

const DIR = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-held-sessions-'));
const POLICY = path.join(DIR, 'policy.json');
{
  const p = JSON.parse(fs.readFileSync(path.join(ROOT, 'examples/policy.json'), 'utf8'));
  const session = { enabled: true, max_ttl_seconds: 600, max_idle_seconds: 300, held_calls: 'hold' };
  // every call held (a person approves each)
  p.tools.ops = { ...p.tools.shell, description: 'shell, every call approved', tier: 'human_approve', session };
  // only what the pre-screen holds (high findings) waits
  p.tools['python-screened'] = { ...p.tools.python, description: 'python, risky code approved', session };
  fs.writeFileSync(POLICY, JSON.stringify(p));
}
after(() => fs.rmSync(DIR, { recursive: true, force: true }));
const server = setup('sessions-held', { policy: POLICY });
const tag = () => crypto.randomBytes(4).toString('hex');

async function open(tool) {
  const res = await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool } });
  assert.equal(res.status, 201, res.text);
  return res.json;
}
const call = (id, body) => server.request('POST', `/v1/sessions/${id}/execute`, { key: server.keys.agent, json: body });
async function held(id, code) {
  const res = await call(id, { code });
  assert.equal(res.status, 202, res.text);
  assert.equal(res.headers.get('location'), `/v1/executions/${res.json.id}`);
  assertSchema('HeldExecution', res.json);
  assert.equal(res.json.status, 'pending_approval');
  assert.equal(res.json.session_id, id);
  return res.json;
}
const started = async (execId) => actions(await auditOf(server, execId)).filter((a) => a === 'execution.start').length;

test('every call of a human_approve tool waits in its session for a person, then runs there, once', async () => {
  const t = tag();
  const tools = await server.request('GET', '/v1/tools', { key: server.keys.agent });
  assert.equal(tools.status, 200, tools.text);
  const list = tools.json.tools ?? tools.json.items ?? tools.json;
  assert.equal(list.find((x) => x.name === 'ops').session.held_calls, 'hold');
  assert.equal(list.find((x) => x.name === 'shell').session.held_calls, 'refuse');
  const s = await open('ops');

  // files enter only with a call, in what a person approves
  const up = await server.request('PUT', `/v1/sessions/${s.id}/files/run.sh`, { key: server.keys.agent, body: 'echo sneaky' });
  assertProblem(up, 422, 'approval-required');
  assertProblem(await server.request('DELETE', `/v1/sessions/${s.id}/files/run.sh`, { key: server.keys.agent }), 422, 'approval-required');
  const h1 = await held(s.id, `X=${t}; cd /tmp; echo set-${t}`);
  assert.deepEqual(h1.reasons, ['tier:human_approve']);
  // the session waits for it: another call is refused, and names the held one
  const busy = await call(s.id, { code: 'echo other' });
  assertProblem(busy, 409, 'session-busy');
  assert.match(busy.json.detail, new RegExp(h1.id));
  // the reviewer sees exactly what will run, and where
  const a = await server.request('GET', `/v1/approvals/${h1.approval_id}`, { key: server.keys.reviewer });
  assert.equal(a.status, 200, a.text);
  assert.equal(a.json.payload.session_id, s.id);
  assert.equal(a.json.payload.code, `X=${t}; cd /tmp; echo set-${t}`);
  assert.equal(a.json.payload.tool, 'ops');
  // nothing ran yet
  assert.equal((await getExecution(server, h1.id)).status, 'pending_approval');
  assert.equal(await started(h1.id), 0);

  // a person approves it in the console, where the session is named
  const login = await addUser(server, `held-reviewer-${t}`, 'reviewer');
  const si = await signIn(server.base, login);
  assert.equal(si.status, 303, JSON.stringify(si));
  const page = await fetch(`${server.base}/console/approvals/${h1.approval_id}`, { headers: { cookie: `tc_session=${si.session}` } });
  const html = await page.text();
  assert.equal(page.status, 200);
  assert.match(html, new RegExp(`<code id="session-id">${s.id}</code>`));
  const ok = await postForm(server.base, si.session, `/console/approvals/${h1.approval_id}`, `/console/approvals/${h1.approval_id}/approve`);
  assert.ok([200, 303].includes(ok.status), ok.text?.slice(0, 300));
  const r1 = await waitFinished(server, h1.id, 30 * SLOW);
  assert.equal(r1.status, 'completed', JSON.stringify(r1));
  assert.equal(r1.stdout, `set-${t}\n`);
  assert.equal(r1.session_id, s.id);
  assert.equal(await started(h1.id), 1);
  const start = (await auditOf(server, h1.id)).find((r) => r.action === 'execution.start');
  assert.equal(start.session_id, s.id);
  assert.equal(start.approved, true);

  // the next call sees the shell's state the approved one left (it ran in this session)
  const h2 = await held(s.id, 'echo "$X $PWD"');
  assert.equal((await decide(server, h2.approval_id, 'approve')).status, 200);
  const r2 = await waitFinished(server, h2.id, 30 * SLOW);
  assert.equal(r2.stdout, `${t} /tmp\n`);
  // and the session counted both calls, and is still open
  const view = await server.request('GET', `/v1/sessions/${s.id}`, { key: server.keys.agent });
  assert.equal(view.json.status, 'active');
  assert.equal(view.json.calls, 2);
  await server.request('DELETE', `/v1/sessions/${s.id}`, { key: server.keys.agent });
});

test('a denied, a cancelled and an expired-by-end held call never run, and free the session', async () => {
  const t = tag();
  const s = await open('ops');
  // denied: never runs; the session takes the next call
  const h1 = await held(s.id, `Y=denied-${t}`);
  assert.equal((await decide(server, h1.approval_id, 'deny', { reason: 'no' })).status, 200);
  assert.equal((await waitFinished(server, h1.id, 20 * SLOW)).status, 'denied');
  // cancelled by the agent (a held call can be withdrawn): the same
  const h2 = await until(async () => {
    const res = await call(s.id, { code: `Y=cancelled-${t}` });
    return res.status === 202 ? res.json : null;
  }, 10_000 * SLOW, 'the session to take a call after the denial');
  const c = await server.request('POST', `/v1/executions/${h2.id}/cancel`, { key: server.keys.agent });
  assert.ok([200, 202].includes(c.status), c.text);
  assert.equal((await waitFinished(server, h2.id, 20 * SLOW)).status, 'cancelled');
  // what ran in the session since: neither
  const h3 = await until(async () => {
    const res = await call(s.id, { code: 'echo "[${Y:-unset}]"' });
    return res.status === 202 ? res.json : null;
  }, 10_000 * SLOW, 'the session to take a call after the cancel');
  assert.equal((await decide(server, h3.approval_id, 'approve')).status, 200);
  assert.equal((await waitFinished(server, h3.id, 30 * SLOW)).stdout, '[unset]\n');
  for (const h of [h1, h2]) assert.equal(await started(h.id), 0, `${h.id} started`);

  // the session's end withdraws what it holds: cancelled, the approval too, and too late to approve
  const h4 = await until(async () => {
    const res = await call(s.id, { code: 'echo never' });
    return res.status === 202 ? res.json : null;
  }, 10_000 * SLOW, 'the session to take a call');
  assert.equal((await server.request('DELETE', `/v1/sessions/${s.id}`, { key: server.keys.agent })).status, 200);
  const w = await waitFinished(server, h4.id, 20 * SLOW);
  assert.equal(w.status, 'cancelled');
  assert.equal(w.stdout, '');
  assertProblem(await decide(server, h4.approval_id, 'approve'), 409, 'not-pending');
  const ap = await sqlJson(server, `SELECT to_json(status) FROM approvals WHERE id = ${lit(h4.approval_id)}`);
  assert.equal(ap, 'cancelled');
  assert.equal(await started(h4.id), 0);
  const rec = (await auditOf(server, h4.id)).find((r) => r.action === 'approval.cancelled');
  assert.equal(rec?.reason, 'the session ended');
});

test('only what the pre-screen holds waits; the approved code runs with the state around it, streamed', async () => {
  const t = tag();
  // the probe: this code is what the screen holds (high), that code is not
  const risky = 'exec("y = x * 7")\nprint(y)';
  const probe = await server.request('POST', '/v1/prescreen', { key: server.keys.agent, json: { tool: 'python-screened', code: risky } });
  assert.equal(probe.status, 200, probe.text);
  assert.equal(probe.json.action, 'approve', probe.text);
  const s = await open('python-screened');
  const a = await call(s.id, { code: 'x = 6' });
  assert.equal(a.status, 200, a.text);
  assert.equal(a.json.status, 'completed');
  // held, followed as events: held, approved, the output, the result
  const ev = await openEvents(server, 'POST', `/v1/sessions/${s.id}/execute`, { key: server.keys.agent, json: { code: `${risky}\nimport time\ntime.sleep(1.5)\nprint("done-${t}")` } });
  assert.equal(ev.status, 200);
  const h = await ev.next((e) => e.event === 'held');
  assert.equal(h.data.session_id, s.id);
  assert.deepEqual(h.data.reasons, ['prescreen']);
  // the approved code runs in the workspace as it was when it was held
  const up = await server.request('PUT', `/v1/sessions/${s.id}/files/x.py`, { key: server.keys.agent, body: 'x = 1000' });
  assertProblem(up, 409, 'session-busy');
  assert.equal((await server.request('GET', `/v1/sessions/${s.id}/files`, { key: server.keys.agent })).status, 200);
  assert.equal((await decide(server, h.data.approval_id, 'approve')).status, 200);
  const events = await ev.rest();
  assert.deepEqual(events.map((e) => e.event).filter((e) => e !== 'stdout'), ['held', 'approved', 'result']);
  assert.equal(joined(events, 'stdout'), `42\ndone-${t}\n`);
  const result = events.at(-1).data;
  assert.equal(result.status, 'completed');
  assert.equal(result.session_id, s.id);
  // free again: uploads work (pre-screened), and what it set lives on in the session
  const up2 = await server.request('PUT', `/v1/sessions/${s.id}/files/x.py`, { key: server.keys.agent, body: 'x = 1000' });
  assert.ok([200, 201].includes(up2.status), up2.text);
  const b = await call(s.id, { code: 'y + 1' });
  assert.equal(b.status, 200, b.text);
  assert.equal(b.json.result, '43');
  await server.request('DELETE', `/v1/sessions/${s.id}`, { key: server.keys.agent });
});

test('the example tools keep refusing: a held tool is no session, held code in a refusing session is 422', async () => {
  const r = await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'deploy' } });
  assertProblem(r, 422, 'session-not-allowed');
  assert.match(r.json.detail, /held_calls/);
  const s = await open('python');
  const res = await call(s.id, { code: 'exec("z = 1")' });
  assertProblem(res, 422, 'approval-required');
  assert.match(res.json.detail, /held_calls/);
  // refused, the session is free at once
  const ok = await call(s.id, { code: '1 + 1' });
  assert.equal(ok.status, 200, ok.text);
  await server.request('DELETE', `/v1/sessions/${s.id}`, { key: server.keys.agent });
});

test('an approved payload altered in the database is refused at run time; the session is free again', async () => {
  const t = tag();
  const s = await open('ops');
  const h = await held(s.id, `echo honest-${t}`);
  await server.sql(`UPDATE approvals SET payload = jsonb_set(payload, '{code}', '"echo pwned"') WHERE id = ${lit(h.approval_id)}`);
  assert.equal((await decide(server, h.approval_id, 'approve')).status, 200);
  const e = await waitFinished(server, h.id, 20 * SLOW);
  assert.equal(e.status, 'error', JSON.stringify(e));
  assert.match(e.error, /hash/);
  assert.ok(!e.stdout.includes('pwned') && !e.stderr.includes('pwned'));
  assert.deepEqual(actions(await auditOf(server, h.id)), ['execute', 'approval.approved', 'execution.refused']);
  // the session is part of what was approved: re-pointed at another session, the hash fails
  const other = await open('ops');
  const h2 = await until(async () => {
    const res = await call(s.id, { code: `echo moved-${t}` });
    return res.status === 202 ? res.json : null;
  }, 10_000 * SLOW, 'the session to take a call after the refusal');
  await server.sql(`UPDATE approvals SET payload = jsonb_set(payload, '{session_id}', to_jsonb(${lit(other.id)}::text)) WHERE id = ${lit(h2.approval_id)}`);
  assert.equal((await decide(server, h2.approval_id, 'approve')).status, 200);
  const e2 = await waitFinished(server, h2.id, 20 * SLOW);
  assert.equal(e2.status, 'error', JSON.stringify(e2));
  assert.match(e2.error, /hash/);
  assert.doesNotMatch(e2.stdout, /moved/);
  for (const id of [s.id, other.id]) await server.request('DELETE', `/v1/sessions/${id}`, { key: server.keys.agent });
});

test('a held call stops the idle clock (the TTL runs on); a dead server withdraws what its sessions held', async () => {
  const res = await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'ops', idle_timeout_seconds: 1 } });
  assert.equal(res.status, 201, res.text);
  const s = res.json;
  const h = await held(s.id, 'echo waited');
  await new Promise((r) => setTimeout(r, 2500));
  assert.equal((await server.request('GET', `/v1/sessions/${s.id}`, { key: server.keys.agent })).json.status, 'active');
  assert.equal((await decide(server, h.approval_id, 'approve')).status, 200);
  assert.equal((await waitFinished(server, h.id, 20 * SLOW)).stdout, 'waited\n');
  // free again, idle again: it ends
  const g = await until(async () => {
    const j = (await server.request('GET', `/v1/sessions/${s.id}`, { key: server.keys.agent })).json;
    return j.status === 'ended' && j;
  }, 8000 * SLOW, 'the idle session to end');
  assert.equal(g.ended_reason, 'idle_timeout');

  const peer = await server.peer('sessions-held-peer');
  const o = await peer.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'ops' } });
  assert.equal(o.status, 201, o.text);
  const p = await peer.request('POST', `/v1/sessions/${o.json.id}/execute`, { key: server.keys.agent, json: { code: 'echo orphan' } });
  assert.equal(p.status, 202, p.text);
  await peer.kill();
  const w = await waitFinished(server, p.json.id, 30 * SLOW);
  assert.equal(w.status, 'cancelled', JSON.stringify(w));
  const ended = (await server.request('GET', `/v1/sessions/${o.json.id}`, { key: server.keys.agent })).json;
  assert.equal(ended.ended_reason, 'server_restart');
  assertProblem(await decide(server, p.json.approval_id, 'approve'), 409, 'not-pending');
  assert.equal(await started(p.json.id), 0);
});

test('a policy reloaded after the hold refuses the approved call (the reviewer saw the new one); the session goes on', async () => {
  const t = tag();
  const s = await open('ops');
  const h = await held(s.id, `echo before-reload-${t}`);
  const p = JSON.parse(fs.readFileSync(POLICY, 'utf8'));
  const saved = JSON.stringify(p);
  p.tools.ops.description = `shell, every call approved (reloaded ${t})`;
  fs.writeFileSync(POLICY, JSON.stringify(p));
  try {
    const before = Number((await server.sql("SELECT count(*) FROM audit_log WHERE record->>'action' = 'policy.reload'")).trim());
    process.kill(server.proc.pid, 'SIGHUP');
    await until(async () => Number((await server.sql("SELECT count(*) FROM audit_log WHERE record->>'action' = 'policy.reload'")).trim()) > before,
      10_000 * SLOW, 'the reload');
    assert.equal((await decide(server, h.approval_id, 'approve')).status, 200);
    const e = await waitFinished(server, h.id, 20 * SLOW);
    assert.equal(e.status, 'error', JSON.stringify(e));
    assert.match(e.error, /policy changed/);
    assert.doesNotMatch(e.stdout, /before-reload/);
    assert.deepEqual(actions(await auditOf(server, h.id)), ['execute', 'approval.approved', 'execution.refused']);
    // the session lives on; a call held now carries the new definition, and runs
    const h2 = await until(async () => {
      const res = await call(s.id, { code: `echo after-reload-${t}` });
      return res.status === 202 ? res.json : null;
    }, 10_000 * SLOW, 'the session to take a call after the refusal');
    assert.equal((await decide(server, h2.approval_id, 'approve')).status, 200);
    const e2 = await waitFinished(server, h2.id, 20 * SLOW);
    // the session's own definition is the one it opened with: still not the one approved now
    assert.equal(e2.status, 'error', JSON.stringify(e2));
    assert.match(e2.error, /policy changed/);
  } finally {
    fs.writeFileSync(POLICY, saved);
    process.kill(server.proc.pid, 'SIGHUP');
  }
  await server.request('DELETE', `/v1/sessions/${s.id}`, { key: server.keys.agent });
});

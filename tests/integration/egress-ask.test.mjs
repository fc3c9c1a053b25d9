// Ask on egress (docs/approvals.md): a tool with "network": {"allow": [...], "ask": true} has
// each connection to a host its list does not name held at the egress proxy while a reviewer
// answers through GET/POST /v1/egress-asks. The evidence is on the upstream's side (what it
// received, or that it received nothing), in the result's network attempts, in the asks' rows
// and in the audit trail of the execution (its receipt).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setup, sleep, SLOW } from './harness.mjs';
import { addUser, signIn, postForm } from './fixtures/console-http.mjs';
import { startReceiver, verifySignature } from './fixtures/webhook-receiver.mjs';

async function upstream(name) {
  const seen = [];
  const srv = http.createServer((req, res) => {
    seen.push({ method: req.method, url: req.url });
    res.end(`hello from ${name} ${req.url}`);
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return { srv, seen, port: srv.address().port, saw: (p) => seen.filter((s) => s.url.startsWith(p)) };
}

const A = await upstream('A'); // listed
const B = await upstream('B'); // asked about

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-egress-ask-'));
const policyPath = path.join(dir, 'policy.json');
const common = {
  language: 'shell',
  command: ['/bin/bash', '--noprofile', '--norc', '{code_file}'],
  code_file: 'main.sh',
  prescreen: { rules: 'none' },
  output: { redact: { disable: ['private_ip'] } },
  limits: { timeout_ms: { default: 60000, max: 60000 }, cpu_ms: { default: 30000, max: 60000 } },
};
fs.writeFileSync(policyPath, JSON.stringify({
  version: 1,
  tools: {
    // ask_private: a reviewer may allow loopback literals (these upstreams); never metadata
    asker: { description: 'asks about hosts it does not list', ...common, network: { allow: [`127.0.0.1:${A.port}`], ask: true, ask_timeout_seconds: 30, ask_private: true } },
    impatient: { description: 'asks, and waits 5 s', ...common, network: { allow: [], ask: true, ask_timeout_seconds: 5, ask_private: true } },
    public_only: { description: 'asks about public hosts only', ...common, network: { allow: [], ask: true, ask_timeout_seconds: 30 } },
  },
}, null, 2));

const server = setup('egress-ask', {
  policy: policyPath,
  serveEnv: { TOOLCAGE_WEBHOOK_ALLOW_PRIVATE: '1', TOOLCAGE_PUBLIC_URL: 'https://toolcage.test.example' },
});

after(async () => {
  A.srv.closeAllConnections?.();
  B.srv.closeAllConnections?.();
  await Promise.all([new Promise((r) => A.srv.close(r)), new Promise((r) => B.srv.close(r))]);
  fs.rmSync(dir, { recursive: true, force: true });
});

// curl through the proxy even for loopback literals (NO_PROXY names them)
const get = (url) => `curl -sS --max-time 50 -x http://127.0.0.1:3128 --noproxy '' -w ' %{http_code}\\n' "${url}"`;

/** The pending asks of one execution, waited for until there are n. */
async function pendingAsks(executionId, n = 1, key = server.keys.reviewer) {
  for (let i = 0; i < 400 * SLOW; i++) {
    const res = await server.request('GET', '/v1/egress-asks?status=pending', { key });
    assert.equal(res.status, 200, res.text);
    const mine = res.json.egress_asks.filter((a) => a.execution_id === executionId);
    if (mine.length >= n) return mine;
    await sleep(50);
  }
  assert.fail(`no ${n} pending ask(s) for ${executionId}`);
}

/** Starts an execution in the background; its id comes from the execution list. */
async function start(tool, code, key = server.keys.agent) {
  const before = new Set((await server.request('GET', '/v1/executions?limit=50', { key })).json.executions.map((e) => e.id));
  const done = server.request('POST', '/v1/execute', { key, json: { tool, code }, timeout: 120_000 * SLOW });
  for (let i = 0; i < 400 * SLOW; i++) {
    const list = (await server.request('GET', '/v1/executions?limit=50', { key })).json.executions;
    const fresh = list.find((e) => !before.has(e.id) && e.tool === tool);
    if (fresh) return { id: fresh.id, done };
    await sleep(50);
  }
  assert.fail('the execution did not appear');
}

const decide = (id, json, key = server.keys.reviewer) =>
  server.request('POST', `/v1/egress-asks/${id}/decision`, { key, json });

async function auditActions(executionId) {
  const res = await server.request('GET', `/v1/executions/${executionId}/receipt`, { key: server.keys.auditor });
  assert.equal(res.status, 200, res.text);
  return res.json.statement.audit.map((a) => a.action);
}

test('allow once: the held connection reaches the upstream; the next one to the same host is asked about again and a deny refuses it', async () => {
  const code = `${get(`http://127.0.0.1:${A.port}/listed`)}\n${get(`http://127.0.0.1:${B.port}/first`)}\n${get(`http://127.0.0.1:${B.port}/second`)}\n`;
  const run = await start('asker', code);
  const [ask] = await pendingAsks(run.id);
  assert.equal(ask.host, '127.0.0.1');
  assert.equal(ask.port, B.port);
  assert.equal(ask.tool, 'asker');
  assert.equal(ask.code, null, 'lists leave the code out');
  assert.equal(B.saw('/first').length, 0, 'nothing reached B before the answer');
  const one = await server.request('GET', `/v1/egress-asks/${ask.id}`, { key: server.keys.admin });
  assert.equal(one.status, 200);
  assert.equal(one.json.code, code, 'the reviewer sees the code that asks');
  assert.deepEqual({ ...one.json, code: null }, ask);

  const ok = await decide(ask.id, { decision: 'allow_once', reason: 'the docs say so' });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.status, 'allowed_once');
  assert.match(ok.json.decider, /^key:/);
  const again = await decide(ask.id, { decision: 'deny', reason: 'changed my mind' });
  assert.equal(again.status, 409, 'an answered ask takes no second answer');
  assert.equal(again.json.type.endsWith('not-pending'), true, again.text);

  const asks = await pendingAsks(run.id, 1);
  const second = asks.find((a) => a.id !== ask.id);
  assert.ok(second, 'the second connection to the same host is a new ask');
  const noReason = await decide(second.id, { decision: 'deny' });
  assert.equal(noReason.status, 400, 'a deny needs a reason');
  const denied = await decide(second.id, { decision: 'deny', reason: 'once was enough' });
  assert.equal(denied.status, 200, denied.text);
  assert.equal(denied.json.status, 'denied');

  const res = await run.done;
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.status, 'completed');
  const lines = res.json.stdout.trim().split('\n');
  assert.equal(lines[0], `hello from A /listed 200`, res.json.stdout);
  assert.equal(lines[1], `hello from B /first 200`, res.json.stdout);
  assert.match(res.json.stdout, /127\.0\.0\.1:\d+ was not allowed by a reviewer\n 403\n$/, res.json.stdout);
  assert.equal(B.saw('/first').length, 1, 'B got the allowed request');
  assert.equal(B.saw('/second').length, 0, 'B never got the denied one');
  const reasons = res.json.network.map((a) => `${a.port === B.port ? 'B' : 'A'}:${a.allowed}:${a.reason}`);
  assert.deepEqual(reasons, ['A:true:allowed', 'B:true:allowed', 'B:false:denied_by_reviewer']);

  const actions = await auditActions(run.id);
  assert.equal(actions.filter((a) => a === 'egress.ask').length, 2, actions.join());
  assert.equal(actions.filter((a) => a === 'egress.decision').length, 2, actions.join());
});

test('allow for the execution: later connections to that host and port pass without asking; a name that resolves to loopback stays refused', async () => {
  const code = [get(`http://127.0.0.1:${B.port}/x1`), get(`http://127.0.0.1:${B.port}/x2`), get(`http://127.0.0.1:${B.port}/x3`),
    get(`http://localhost:${B.port}/named`)].join('\n');
  const run = await start('asker', code);
  const [ask] = await pendingAsks(run.id);
  const ok = await decide(ask.id, { decision: 'allow_execution' });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.status, 'allowed_execution');
  const named = (await pendingAsks(run.id, 1)).find((a) => a.host === 'localhost');
  assert.ok(named, 'another host is asked about');
  assert.equal((await decide(named.id, { decision: 'allow_once' })).status, 200);

  const res = await run.done;
  assert.equal(res.json.status, 'completed', res.text);
  const lines = res.json.stdout.trim().split('\n');
  assert.deepEqual(lines.slice(0, 3), [`hello from B /x1 200`, `hello from B /x2 200`, `hello from B /x3 200`]);
  assert.match(res.json.stdout, /localhost:\d+ resolves to an address that is not allowed\n 403\n$/,
    'localhost resolves to loopback: refused like an allowlist entry naming it');
  assert.equal(B.saw('/named').length, 0);
  assert.deepEqual(res.json.network.map((a) => a.reason), ['allowed', 'allowed', 'allowed', 'blocked_loopback']);
  const all = (await server.request('GET', '/v1/egress-asks?limit=200', { key: server.keys.reviewer })).json.egress_asks
    .filter((a) => a.execution_id === run.id);
  assert.equal(all.length, 2, 'one ask for B, one for localhost: x2 and x3 were not asked about');
});

test('no answer within ask_timeout_seconds is a deny; the ask expires and takes no late answer', async () => {
  const code = `${get(`http://127.0.0.1:${B.port}/late`)}\n`;
  const t0 = Date.now();
  const run = await start('impatient', code);
  const [ask] = await pendingAsks(run.id);
  const res = await run.done;
  const took = Date.now() - t0;
  assert.equal(res.json.status, 'completed', res.text);
  assert.match(res.json.stdout, /403\n$/);
  assert.ok(took >= 4500, `the proxy waited its 5 s (${took} ms)`);
  assert.equal(res.json.network[0].reason, 'ask_timeout');
  assert.equal(B.saw('/late').length, 0);
  let status;
  for (let i = 0; i < 100 * SLOW; i++) {
    status = (await server.request('GET', `/v1/egress-asks/${ask.id}`, { key: server.keys.reviewer })).json.status;
    if (status !== 'pending') break;
    await sleep(100);
  }
  assert.ok(status === 'expired' || status === 'withdrawn', status);
  const late = await decide(ask.id, { decision: 'allow_once' });
  assert.equal(late.status, 409, late.text);
  assert.equal(B.saw('/late').length, 0, 'a late answer lets nothing through');
});

test('who may answer: not the key that asked for the execution (maker-checker), not another tenant, not an agent', async () => {
  const code = `${get(`http://127.0.0.1:${B.port}/mc`)}\n`;
  const run = await start('asker', code, server.keys.admin);
  const [ask] = await pendingAsks(run.id);
  const own = await decide(ask.id, { decision: 'allow_once' }, server.keys.admin);
  assert.equal(own.status, 403, own.text);
  assert.match(own.json.type, /maker-checker$/);
  const other = await decide(ask.id, { decision: 'allow_once' }, server.keys.otherAdmin);
  assert.equal(other.status, 404, 'another tenant does not see it');
  assert.equal((await server.request('GET', `/v1/egress-asks/${ask.id}`, { key: server.keys.otherAdmin })).status, 404);
  const agent = await decide(ask.id, { decision: 'allow_once' }, server.keys.agent);
  assert.equal(agent.status, 403);
  const bad = await decide(ask.id, { decision: 'allow_forever' });
  assert.equal(bad.status, 400);
  for (const q of ['status=maybe', 'limit=0', 'limit=201']) {
    const r = await server.request('GET', `/v1/egress-asks?${q}`, { key: server.keys.reviewer });
    assert.equal(r.status, 400, `${q}: ${r.text}`);
  }
  const extra = await decide(ask.id, { decision: 'allow_once', host: 'evil.example' });
  assert.equal(extra.status, 400);
  assert.equal((await decide(ask.id, { decision: 'deny', reason: 'no' })).status, 200);
  const res = await run.done;
  assert.match(res.json.stdout, /403\n$/);
  assert.equal(B.saw('/mc').length, 0);
});

test('an ask its execution outlives is withdrawn; the proxy lets nothing through after the sandbox ends', async () => {
  // curl gives up after 2 s; the program ends; nobody answered
  const code = `curl -sS --max-time 2 -x http://127.0.0.1:3128 --noproxy '' "http://127.0.0.1:${B.port}/gone" || echo gave-up\n`;
  const run = await start('asker', code);
  const [ask] = await pendingAsks(run.id);
  const res = await run.done;
  assert.match(res.json.stdout, /gave-up/);
  let status;
  for (let i = 0; i < 100 * SLOW; i++) {
    status = (await server.request('GET', `/v1/egress-asks/${ask.id}`, { key: server.keys.reviewer })).json.status;
    if (status !== 'pending') break;
    await sleep(100);
  }
  assert.equal(status, 'withdrawn');
  assert.equal((await decide(ask.id, { decision: 'allow_execution' })).status, 409);
  assert.equal(B.saw('/gone').length, 0);
  const actions = await auditActions(run.id);
  assert.ok(actions.includes('egress.withdrawn'), actions.join());
});

test('the console: a reviewer sees the ask with its code (escaped) and allows it for the execution; CSRF and role are enforced', async () => {
  const t = Date.now().toString(36);
  const code = `# <script>alert("ask-${t}")</script>\n${get(`http://127.0.0.1:${B.port}/console-${t}`)}\n`;
  const run = await start('asker', code);
  const [ask] = await pendingAsks(run.id);
  const reviewer = await signIn(server.base, await addUser(server, `egress-reviewer-${t}`, 'reviewer'));
  const auditor = await signIn(server.base, await addUser(server, `egress-auditor-${t}`, 'auditor'));
  assert.equal(reviewer.status, 303);
  const page = (p, session) => fetch(`${server.base}${p}`, { headers: { cookie: `tc_session=${session}` } });

  const list = await page('/console/egress-asks?status=pending', reviewer.session);
  const listHtml = await list.text();
  assert.equal(list.status, 200);
  assert.ok(listHtml.includes(`href="/console/egress-asks/${ask.id}"`), 'the pending ask is listed');
  const one = await page(`/console/egress-asks/${ask.id}`, reviewer.session);
  const html = await one.text();
  assert.equal(one.status, 200);
  assert.match(html, new RegExp(`<code id="ask-host">127\\.0\\.0\\.1:${B.port}</code>`));
  assert.ok(!html.includes(`<script>alert("ask-${t}")`), 'the code is escaped');
  assert.ok(html.includes(`&lt;script&gt;alert(`), 'the code is shown');
  assert.ok(html.includes('id="allow-execution"'));

  // an auditor reads but cannot answer; a POST without the session's CSRF token is refused
  assert.match(await (await page(`/console/egress-asks/${ask.id}`, auditor.session)).text(), /id="no-decide"/);
  const byAuditor = await postForm(server.base, auditor.session, `/console/egress-asks/${ask.id}`, `/console/egress-asks/${ask.id}/decision`, { decision: 'allow_once' });
  assert.equal(byAuditor.status, 403);
  const forged = await fetch(`${server.base}/console/egress-asks/${ask.id}/decision`, {
    method: 'POST', redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `tc_session=${reviewer.session}` },
    body: new URLSearchParams({ csrf: 'x'.repeat(43), decision: 'allow_once' }).toString(),
  });
  assert.equal(forged.status, 403);
  assert.equal((await server.request('GET', `/v1/egress-asks/${ask.id}`, { key: server.keys.reviewer })).json.status, 'pending');

  const ok = await postForm(server.base, reviewer.session, `/console/egress-asks/${ask.id}`, `/console/egress-asks/${ask.id}/decision`, { decision: 'allow_execution' });
  assert.equal(ok.status, 303, ok.text.slice(0, 300));
  assert.equal(ok.location, `/console/egress-asks/${ask.id}?done=allowed_execution`);
  const res = await run.done;
  assert.match(res.json.stdout, new RegExp(`hello from B /console-${t} 200`));
  const after = (await server.request('GET', `/v1/egress-asks/${ask.id}`, { key: server.keys.reviewer })).json;
  assert.equal(after.status, 'allowed_execution');
  assert.equal(after.decider, `user:egress-reviewer-${t}`);
});

test('the tenant\'s notification sinks are told of an ask (signed webhook, Slack text) with a console link and no code', async () => {
  const rx = await startReceiver();
  try {
    const secret = (await server.cli(['keys', 'webhook-secret', '--tenant', server.tenants.a])).stdout.trim();
    const put = await server.request('PUT', '/v1/notifications', { key: server.keys.admin,
      json: { sinks: [{ type: 'webhook', url: rx.url('/hook') }, { type: 'slack', url: rx.url('/slack') }] } });
    assert.equal(put.status, 200, put.text);
    const t = Date.now().toString(36);
    const run = await start('asker', `# marker-${t}\n${get(`http://127.0.0.1:${B.port}/n-${t}`)}\n`);
    const [ask] = await pendingAsks(run.id);
    for (let i = 0; rx.hits.filter((h) => h.body.includes(ask.id)).length < 2; i++) {
      assert.ok(i < 300 * SLOW, `two notices for ${ask.id}: ${rx.hits.length} hits`);
      await sleep(50);
    }
    const mine = rx.hits.filter((h) => h.body.includes(ask.id));
    const hook = mine.find((h) => h.url === '/hook');
    assert.equal(verifySignature(secret, hook.headers['x-toolcage-signature'], hook.body), null);
    const b = JSON.parse(hook.body.toString('utf8'));
    assert.equal(b.event, 'egress.ask');
    assert.equal(b.ask_id, ask.id);
    assert.equal(b.execution_id, run.id);
    assert.equal(b.host, '127.0.0.1');
    assert.equal(b.port, B.port);
    assert.equal(b.tool, 'asker');
    assert.equal(b.link, `https://toolcage.test.example/console/egress-asks/${ask.id}`);
    const slack = JSON.parse(mine.find((h) => h.url === '/slack').body.toString('utf8'));
    assert.match(slack.text, new RegExp(`asks to reach 127\\.0\\.0\\.1:${B.port}`));
    for (const h of mine) assert.ok(!h.body.includes(`marker-${t}`), 'no code in a notice');
    assert.equal((await decide(ask.id, { decision: 'deny', reason: 'not today' })).status, 200);
    await run.done;
  } finally {
    await server.request('PUT', '/v1/notifications', { key: server.keys.admin, json: { sinks: [] } });
    await rx.close();
  }
});

test('without ask_private a non-public address is refused without asking; metadata is refused even with it', async () => {
  const r1 = (await server.execute({ tool: 'public_only', code: `${get(`http://127.0.0.1:${B.port}/private`)}\n${get('http://10.1.2.3/p')}\n` })).json;
  assert.deepEqual(r1.network.map((a) => a.reason), ['blocked_loopback', 'blocked_private'], JSON.stringify(r1.network));
  const r2 = (await server.execute({ tool: 'asker', code: `${get('http://169.254.169.254/latest/meta-data/')}\n` })).json;
  assert.deepEqual(r2.network.map((a) => a.reason), ['blocked_metadata']);
  for (const r of [r1, r2]) {
    const asks = (await server.request('GET', '/v1/egress-asks?limit=200', { key: server.keys.reviewer })).json.egress_asks;
    assert.equal(asks.filter((a) => a.execution_id === r.id).length, 0, 'nobody was asked');
  }
  assert.equal(B.saw('/private').length, 0);
});

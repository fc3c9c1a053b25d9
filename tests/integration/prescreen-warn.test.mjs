// The pre-screen's `warn` action: the code runs (200), the findings come back in the result,
// and the `execute` and `execution.complete` audit records carry them (and, for a tool with
// an egress allowlist, the network attempts).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setup, ROOT } from './harness.mjs';
import { openEvents } from './fixtures/sse.mjs';

const seen = [];
const upstream = http.createServer((req, res) => {
  seen.push(req.url);
  res.end(`upstream saw ${req.url}\n`);
});
await new Promise((resolve) => upstream.listen(0, '127.0.0.1', resolve));
const PORT = upstream.address().port;

// The example policy (python: medium -> warn), plus a shell tool with an allowlist whose
// medium findings warn too.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-warn-'));
const policyPath = path.join(dir, 'policy.json');
const policy = JSON.parse(fs.readFileSync(path.join(ROOT, 'examples/policy.json'), 'utf8'));
policy.tools.fetchwarn = {
  description: 'curl through the egress proxy; medium findings warn',
  language: 'shell',
  command: ['/bin/bash', '--noprofile', '--norc', '{code_file}'],
  code_file: 'main.sh',
  network: { allow: [`127.0.0.1:${PORT}`] },
  output: { redact: { disable: ['private_ip'] } },
  limits: { timeout_ms: { default: 30000, max: 60000 }, cpu_ms: { default: 30000, max: 60000 } },
  prescreen: { rules: 'shell', actions: { low: 'warn', medium: 'warn', high: 'block', critical: 'block' } },
};
fs.writeFileSync(policyPath, JSON.stringify(policy, null, 2));

const server = setup('prescreen-warn', { policy: policyPath });

after(async () => {
  upstream.closeAllConnections?.();
  await new Promise((r) => upstream.close(r));
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The execute and execution.complete records of one execution, via GET /v1/audit. */
async function auditOf(tool, id) {
  const out = {};
  for (const action of ['execute', 'execution.complete']) {
    const res = await server.request('GET', `/v1/audit?action=${action}&tool=${tool}&limit=500`, { key: server.keys.auditor });
    assert.equal(res.status, 200, res.text);
    const mine = res.json.records.filter((r) => r.record.execution_id === id);
    assert.equal(mine.length, 1, `one ${action} record for ${id}: ${JSON.stringify(res.json.records).slice(0, 500)}`);
    out[action] = mine[0].record;
  }
  return out;
}

test('warn: python code with a medium finding runs, and the findings are in the result and the audit records', async () => {
  const code = 'import subprocess\nr = subprocess.run(["echo", "warned but ran"], capture_output=True)\nprint(r.stdout.decode(), end="")\n';
  // The pre-screen's own verdict for this code is warn (not run, not approve).
  const pre = await server.request('POST', '/v1/prescreen', { key: server.keys.agent, json: { tool: 'python', code } });
  assert.equal(pre.status, 200);
  assert.equal(pre.json.action, 'warn', JSON.stringify(pre.json));

  const res = await server.execute({ tool: 'python', code });
  const run = res.json;
  assert.equal(run.status, 'completed', JSON.stringify(run).slice(0, 800));
  assert.equal(run.stdout, 'warned but ran\n');
  const f = run.findings.find((x) => x.rule === 'py_shell');
  assert.ok(f, `py_shell finding in the result: ${JSON.stringify(run.findings)}`);
  assert.equal(f.severity, 'medium');
  assert.equal(f.line, 2);
  assert.equal(f.column, 5);
  assert.match(f.excerpt, /^subprocess\.run\(/);
  assert.ok(run.findings.every((x) => ['low', 'medium'].includes(x.severity)), 'only warn-level findings');
  assert.deepEqual(run.findings, pre.json.findings, 'the same findings as POST /v1/prescreen');

  const rec = await auditOf('python', run.id);
  assert.equal(rec.execute.decision, 'allowed', 'warn does not hold or block');
  assert.deepEqual(rec.execute.findings, run.findings);
  assert.equal(rec['execution.complete'].status, 'completed');
  assert.deepEqual(rec['execution.complete'].findings, run.findings);
  assert.deepEqual(rec['execution.complete'].network, []);

  // the stored execution carries them too
  const got = await server.request('GET', `/v1/executions/${run.id}`, { key: server.keys.agent });
  assert.equal(got.status, 200);
  assert.deepEqual(got.json.findings, run.findings);
});

test('code without findings records an empty findings list (the field is not always filled)', async () => {
  const { json: run } = await server.execute({ tool: 'python', code: 'print(6 * 7)' });
  assert.equal(run.stdout, '42\n');
  assert.deepEqual(run.findings, []);
  const rec = await auditOf('python', run.id);
  assert.deepEqual(rec['execution.complete'].findings, []);
});

test('warn on an egress tool: it runs, and the findings and network attempts are in execution.complete', async () => {
  const code = [
    `cmd="curl -sS --max-time 10 http://127.0.0.1:${PORT}/warned"`,
    'eval "$cmd"',
    `curl -s -o /dev/null -w '%{http_code}\\n' "http://127.0.0.1:${PORT + (PORT < 65535 ? 1 : -1)}/refused"`,
  ].join('\n');
  const { json: run } = await server.execute({ tool: 'fetchwarn', code });
  assert.equal(run.status, 'completed', JSON.stringify(run).slice(0, 1500));
  assert.equal(run.stdout, 'upstream saw /warned\n403\n');
  assert.deepEqual(seen, ['/warned'], 'the upstream saw exactly the allowed request');

  const evalFinding = run.findings.find((x) => x.rule === 'sh_eval');
  assert.ok(evalFinding, JSON.stringify(run.findings));
  assert.equal(evalFinding.severity, 'medium');
  assert.equal(evalFinding.line, 2, 'the line of the eval, not the line before');
  assert.equal(evalFinding.column, 1);

  assert.equal(run.network.length, 2, JSON.stringify(run.network));
  assert.equal(run.network[0].host, '127.0.0.1');
  assert.equal(run.network[0].port, PORT);
  assert.equal(run.network[0].allowed, true);
  assert.ok(run.network[0].bytes_received > 0);
  assert.equal(run.network[1].allowed, false);
  assert.equal(run.network[1].reason, 'port_not_allowed');

  const rec = await auditOf('fetchwarn', run.id);
  assert.equal(rec.execute.decision, 'allowed');
  const done = rec['execution.complete'];
  assert.equal(done.status, 'completed');
  assert.deepEqual(done.findings, run.findings);
  assert.deepEqual(done.network, run.network);
});

test('streamed (Accept: text/event-stream): each finding right after execution, each network attempt as the proxy decides it', async () => {
  const code = [
    `cmd="curl -sS --max-time 10 http://127.0.0.1:${PORT}/streamed"`,
    'eval "$cmd"',
    `curl -s -o /dev/null -w '%{http_code}\\n' "http://127.0.0.1:${PORT + (PORT < 65535 ? 1 : -1)}/refused"`,
    'sleep 2',
    'echo the-end',
  ].join('\n');
  const s = await openEvents(server, 'POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'fetchwarn', code } });
  assert.equal(s.status, 200);
  const events = await s.rest();
  const names = events.map((e) => e.event);
  const result = events.at(-1);
  assert.equal(result.event, 'result');
  const findings = events.filter((e) => e.event === 'finding').map((e) => e.data);
  assert.ok(findings.some((f) => f.rule === 'sh_eval'), JSON.stringify(findings));
  assert.deepEqual(findings, result.data.findings, 'the finding events are the result\'s findings');
  assert.deepEqual(names.slice(0, 1 + findings.length), ['execution', ...findings.map(() => 'finding')]);
  const net = events.filter((e) => e.event === 'network');
  assert.equal(net.length, 2, JSON.stringify(net));
  // each once, as the result lists it but for the byte counts (known when it ends)
  const strip = ({ bytes_sent, bytes_received, ...rest }) => rest;
  assert.deepEqual(net.map((e) => e.data), result.data.network.map(strip));
  assert.equal(net[1].data.reason, 'port_not_allowed');
  assert.ok(result.data.network[0].bytes_received > 0, JSON.stringify(result.data.network));
  // live: both came while the program slept, before what it printed after
  const end = events.find((e) => e.event === 'stdout' && e.data.text.includes('the-end'));
  assert.ok(end, JSON.stringify(names));
  for (const e of net) assert.ok(e.at < end.at - 1000, `network at ${e.at} ms, the-end at ${end.at} ms`);
});

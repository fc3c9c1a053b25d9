// SIGHUP reloads the policy file: the new policy is served, a `policy.reload` record is
// written (actor system/SIGHUP), a bad file is refused and the old policy stays, and an
// execution already running finishes under the policy it started with.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setup, assertProblem, sleep, SLOW } from './harness.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-sighup-'));
const policyPath = path.join(dir, 'policy.json');

function tool(description, mark, timeout) {
  return {
    description,
    language: 'shell',
    command: ['/bin/bash', '--noprofile', '--norc', '{code_file}'],
    code_file: 'main.sh',
    network: 'none',
    prescreen: { rules: 'none' },
    env: { MARK: mark },
    limits: { timeout_ms: timeout, cpu_ms: { default: 10000, max: 60000 } },
  };
}

// Before: `slow` may run for up to 60 s and sees MARK=old; `retired` exists.
const OLD = {
  version: 1,
  tools: {
    slow: tool('slow, first policy', 'old', { default: 10000, max: 60000 }),
    retired: tool('removed by the reload', 'old', { default: 10000, max: 60000 }),
  },
};
// After: `slow` is cut to 2 s and sees MARK=new; `retired` is gone, `added` is new.
const NEW = {
  version: 1,
  tools: {
    slow: tool('slow, second policy', 'new', { default: 2000, max: 2000 }),
    added: tool('added by the reload', 'new', { default: 10000, max: 60000 }),
  },
};
fs.writeFileSync(policyPath, JSON.stringify(OLD, null, 2));

const server = setup('policy-sighup', { policy: policyPath });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

async function tools() {
  const res = await server.request('GET', '/v1/tools', { key: server.keys.agent });
  assert.equal(res.status, 200);
  return Object.fromEntries(res.json.tools.map((t) => [t.name, t]));
}

async function reloadRecords() {
  const res = await server.request('GET', '/v1/audit?action=policy.reload&limit=50', { key: server.keys.operator });
  assert.equal(res.status, 200, res.text);
  return res.json.records; // newest first
}

async function hup() {
  const newest = async () => (await reloadRecords()).find((r) => r.record.policy === policyPath);
  const before = (await newest())?.seq ?? 0;
  process.kill(server.proc.pid, 'SIGHUP');
  // The reload is done when its record is written.
  for (let i = 0; i < 200 * SLOW; i++) {
    const rec = await newest();
    if (rec && rec.seq > before) return rec;
    await sleep(50);
  }
  assert.fail(`no policy.reload record after SIGHUP:\n${server.logTail()}`);
}

test('SIGHUP reloads the policy; a running execution finishes under the policy it started with', async () => {
  const t0 = await tools();
  assert.deepEqual(Object.keys(t0).sort(), ['retired', 'slow']);
  assert.equal(t0.slow.description, 'slow, first policy');

  // Start a run that outlives the reload and asks for more time than the new policy allows.
  const sleepS = 4 * SLOW;
  const inflight = server.request('POST', '/v1/execute', {
    key: server.keys.agent,
    json: { tool: 'slow', code: `sleep ${sleepS}\necho "mark=$MARK"`, limits: { timeout_ms: 30000 } },
  });
  // Wait until it is recorded as running (its sandbox spec is built before that).
  const tenant = `(SELECT id FROM tenants WHERE name = '${server.tenants.a}')`;
  for (let i = 0; ; i++) {
    const n = (await server.sql(`SELECT count(*) FROM executions WHERE tenant_id = ${tenant}
      AND tool = 'slow' AND status = 'running'`)).trim();
    if (n === '1') break;
    assert.ok(i < 200 * SLOW, 'the execution did not start');
    await sleep(25);
  }

  fs.writeFileSync(policyPath, JSON.stringify(NEW, null, 2));
  const rec = await hup();
  assert.equal(rec.record.action, 'policy.reload');
  assert.equal(rec.record.status, 'applied', JSON.stringify(rec.record));
  assert.deepEqual(rec.record.actor, { type: 'system', id: 'SIGHUP' });
  assert.equal(rec.record.policy, policyPath);
  assert.equal(rec.record.tools, 2);
  assert.match(rec.record.digest, /^[0-9a-f]{64}$/);

  // The new policy is served.
  const t1 = await tools();
  assert.deepEqual(Object.keys(t1).sort(), ['added', 'slow']);
  assert.equal(t1.slow.description, 'slow, second policy');
  // ... while the first run is still going.
  const status = (await server.sql(`SELECT status FROM executions WHERE tenant_id = ${tenant}
    AND tool = 'slow' ORDER BY created_at LIMIT 1`)).trim();
  assert.equal(status, 'running', 'the reload happened while the execution ran');

  // The running execution kept its policy: its 30 s limit (not 2 s) and MARK=old.
  const res = await inflight;
  assert.equal(res.status, 200, res.text);
  const run = res.json;
  assert.equal(run.status, 'completed', JSON.stringify(run).slice(0, 800));
  assert.equal(run.stdout, 'mark=old\n');
  assert.equal(run.limits.timeout_ms, 30000);
  assert.ok(run.duration_ms >= sleepS * 1000 - 100, `ran ${run.duration_ms} ms`);
  const done = (await server.request('GET', `/v1/audit?action=execution.complete&tool=slow`, { key: server.keys.auditor }))
    .json.records.find((r) => r.record.execution_id === run.id);
  assert.ok(done && done.seq > rec.seq, 'execution.complete comes after the reload record');

  // New executions get the new policy.
  const now = await server.execute({ tool: 'slow', code: 'echo "mark=$MARK"' });
  assert.equal(now.json.stdout, 'mark=new\n');
  assert.equal(now.json.limits.timeout_ms, 2000);
  const cut = await server.execute({ tool: 'slow', code: 'sleep 5', limits: { timeout_ms: 30000 } }, { expect: 422 });
  assertProblem(cut, 422, 'limit-exceeds-policy');
  assertProblem(await server.execute({ tool: 'retired', code: 'true' }, { expect: 404 }), 404, 'unknown-tool');
  assert.equal((await server.execute({ tool: 'added', code: 'echo "mark=$MARK"' })).json.stdout, 'mark=new\n');
});

test('SIGHUP with a broken policy file: refused, recorded, and the old policy stays', async () => {
  const before = await tools();
  fs.writeFileSync(policyPath, JSON.stringify({ version: 1, tools: { slow: { ...NEW.tools.slow, bogus: true } } }));
  const rec = await hup();
  assert.equal(rec.record.status, 'refused', JSON.stringify(rec.record));
  assert.deepEqual(rec.record.actor, { type: 'system', id: 'SIGHUP' });
  assert.ok(rec.record.errors.some((e) => /tools\.slow\.bogus/.test(e)), JSON.stringify(rec.record.errors));
  assert.deepEqual(await tools(), before, 'the served policy did not change');
  assert.equal(server.exited, null, 'the server is still running');
  assert.equal((await server.execute({ tool: 'added', code: 'echo still' })).json.stdout, 'still\n');
  // Restore a valid file so the server stops cleanly with a sane policy.
  fs.writeFileSync(policyPath, JSON.stringify(NEW, null, 2));
});

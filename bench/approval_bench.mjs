// Approval gate latency: from the reviewer's decision to the start of the approved process,
// against a baseline measured in the same run (a plain POST /v1/execute of the same code,
// from the request to the start of its process). Run through bench/approval_bench.sh.
//
// "Start" is the first thing the sandboxed bash does: print $EPOCHREALTIME (a builtin, same
// host clock). Decision = the moment the client sends POST /v1/approvals/{id}/approve.
// Also printed: decision commit -> claim as PostgreSQL saw it
// (executions.started_at - approval_decisions.created_at).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Server } from '../tests/integration/harness.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const N = Number(process.argv[2] || process.env.TOOLCAGE_BENCH_N || 50);
const WARMUP = 3;
const TARGET_MS = 50;
const CODE = 'echo "t=$EPOCHREALTIME"';

const nowMs = () => performance.timeOrigin + performance.now();
const startOf = (stdout) => {
  const m = /t=(\d+)[.,](\d+)/.exec(stdout);
  if (!m) throw new Error(`no start time in ${JSON.stringify(stdout)}`);
  return Number(m[1]) * 1000 + Number(`0.${m[2]}`) * 1000;
};

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)];
  return { median: q(0.5), p95: q(0.95), min: s[0], max: s[s.length - 1] };
}

async function req(server, method, p, key, json) {
  const res = await server.request(method, p, { key, json, validate: false });
  return res;
}

async function baselineOnce(server) {
  const t0 = nowMs();
  const res = await req(server, 'POST', '/v1/execute', server.keys.agent, { tool: 'shell', code: CODE });
  if (res.status !== 200 || res.json.status !== 'completed') throw new Error(`baseline: ${res.status} ${res.text}`);
  return startOf(res.json.stdout) - t0;
}

async function gatedOnce(server) {
  const held = await req(server, 'POST', '/v1/execute', server.keys.agent, { tool: 'deploy', code: CODE });
  if (held.status !== 202) throw new Error(`hold: ${held.status} ${held.text}`);
  const { id, approval_id: aid } = held.json;
  const poll = req(server, 'GET', `/v1/executions/${id}?wait=30`, server.keys.agent);
  const t0 = nowMs();
  const ok = await req(server, 'POST', `/v1/approvals/${aid}/approve`, server.keys.reviewer);
  if (ok.status !== 200) throw new Error(`approve: ${ok.status} ${ok.text}`);
  let e = (await poll).json;
  while (['pending_approval', 'queued', 'running'].includes(e.status)) e = (await req(server, 'GET', `/v1/executions/${id}?wait=30`, server.keys.agent)).json;
  if (e.status !== 'completed') throw new Error(`gated run: ${JSON.stringify(e)}`);
  return { id, ms: startOf(e.stdout) - t0 };
}

const server = new Server('approval-bench', { policy: path.join(ROOT, 'tests/integration/fixtures/approval-policy.json') });
let code = 0;
try {
  await server.start();
  const base = [];
  const gated = [];
  const ids = [];
  for (let i = 0; i < WARMUP + N; i++) {
    const b = await baselineOnce(server);
    const g = await gatedOnce(server);
    if (i >= WARMUP) {
      base.push(b);
      gated.push(g.ms);
      ids.push(g.id);
    }
  }
  const dbMs = JSON.parse((await server.sql(
    `SELECT json_agg(extract(epoch FROM e.started_at - d.created_at) * 1000) FROM executions e
       JOIN approvals a ON a.execution_id = e.id JOIN approval_decisions d ON d.approval_id = a.id
      WHERE e.id IN (${ids.map((x) => `'${x}'`).join(', ')})`)).trim());
  const sb = stats(base);
  const sg = stats(gated);
  const sd = stats(dbMs);
  const f = (x) => x.toFixed(1).padStart(7);
  console.log(`approval_bench: ${N} decisions (+${WARMUP} warm-up), one server, bash \`${CODE}\``);
  console.log(`                                         median      p95      min      max  (ms)`);
  console.log(`  baseline  POST /v1/execute -> start  ${f(sb.median)}  ${f(sb.p95)}  ${f(sb.min)}  ${f(sb.max)}`);
  console.log(`  gated     approve sent -> start      ${f(sg.median)}  ${f(sg.p95)}  ${f(sg.min)}  ${f(sg.max)}`);
  console.log(`  gated     decision commit -> claim   ${f(sd.median)}  ${f(sd.p95)}  ${f(sd.min)}  ${f(sd.max)}  (PostgreSQL clock)`);
  const met = sg.median <= TARGET_MS;
  console.log(`  ratio gated/baseline (median) ${(sg.median / sb.median).toFixed(2)}x; the gate adds ${(sg.median - sb.median).toFixed(1)} ms`);
  console.log(`  decision -> execution start median ${sg.median.toFixed(1)} ms (target <= ${TARGET_MS} ms: ${met ? 'met' : 'MISSED'})`);
  if (!met && process.env.TOOLCAGE_BENCH_ENFORCE === '1') code = 1;
} catch (e) {
  console.error(`approval_bench: ${e.stack || e}`);
  code = 2;
} finally {
  await server.stop().catch((e) => { console.error(String(e)); code ||= 2; });
}
process.exit(code);

// A warm session's call against a cold interpreter (issue 21: target <= 0.3x). Each round runs
// the baseline, bare `python3 -c pass` as a child process of this script (fork, exec, the
// interpreter's start-up and exit), then `print(1)` in one open python session over HTTP
// (POST /v1/sessions/{id}/execute: admission, the pre-screen, the recorded start, the driver,
// the outcome stored with its audit record, the answer). Run through bench/session_bench.sh.
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Server } from '../tests/integration/harness.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const N = Number(process.argv[2] || process.env.TOOLCAGE_BENCH_N || 40);
const WARMUP = 3;
const TARGET = 0.3;

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)];
  return { median: q(0.5), p95: q(0.95), min: s[0] };
}

function bareOnce() {
  const t0 = performance.now();
  const r = spawnSync('/usr/bin/python3', ['-c', 'pass']);
  if (r.status !== 0) throw new Error('python3 -c pass failed');
  return performance.now() - t0;
}

async function sessionOnce(server, id) {
  const t0 = performance.now();
  const res = await fetch(`${server.base}/v1/sessions/${id}/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.keys.agent}`, 'content-type': 'application/json' },
    body: JSON.stringify({ code: 'print(1)' }),
  });
  const j = await res.json();
  const ms = performance.now() - t0;
  if (res.status !== 200 || j.stdout !== '1\n') throw new Error(`session call: ${res.status} ${JSON.stringify(j)}`);
  return ms;
}

const server = new Server('session-bench', { policy: path.join(ROOT, 'examples/policy.json') });
let code = 0;
try {
  await server.start();
  const open = await fetch(`${server.base}/v1/sessions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.keys.agent}`, 'content-type': 'application/json' },
    body: JSON.stringify({ tool: 'python' }),
  });
  const session = await open.json();
  if (open.status !== 201) throw new Error(`open: ${open.status} ${JSON.stringify(session)}`);
  const bare = [];
  const warm = [];
  for (let i = 0; i < WARMUP + N; i++) {
    const b = bareOnce();
    const w = await sessionOnce(server, session.id);
    if (i >= WARMUP) {
      bare.push(b);
      warm.push(w);
    }
  }
  const sb = stats(bare);
  const sw = stats(warm);
  const ratio = sw.median / sb.median;
  const f = (x) => x.toFixed(1).padStart(7);
  console.log(`session_bench: ${N} rounds (+${WARMUP} warm-up), alternating`);
  console.log(`  baseline python3 -c pass (cold)      median ${f(sb.median)} ms  p95 ${f(sb.p95)} ms`);
  console.log(`  print(1) in a warm session (HTTP)    median ${f(sw.median)} ms  p95 ${f(sw.p95)} ms`);
  console.log(`  ratio ${ratio.toFixed(2)}x (target <= ${TARGET}x: ${ratio <= TARGET ? 'met' : 'MISSED'})`);
  if (process.env.TOOLCAGE_BENCH_ENFORCE === '1' && ratio > TARGET) code = 1;
  await fetch(`${server.base}/v1/sessions/${session.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${server.keys.agent}` } });
} catch (e) {
  console.error(e);
  code = 2;
} finally {
  await server.stop();
}
process.exit(code);

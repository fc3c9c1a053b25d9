// Two servers that differ only in their environment or binary, timed turn about in one run (issue 16):
// python `pass` over POST /v1/execute, one keep-alive client (warm: after a rest, so that a
// warm sandbox waits) and 8 concurrent clients. Run through bench/node_bench.sh:
//   A='{"TOOLCAGE_DB_PREPARE":"0"}' B='{}' bench/node_bench.sh bench/ab.mjs [N] [ROUNDS]
//   A_BIN=/old/build/toolcage-server bench/node_bench.sh bench/ab.mjs    (B: TOOLCAGE_BIN's)
// Both servers share one database (as replicas do) and run one at a time. Prints medians, the
// Server-Timing phases and B/A ratios; enforces nothing. LOAD=0 leaves the 8-client rounds out
// (they disturb the pools the next one-client calls use: the calmer comparison of one call's
// time); GAP_MS sets the rest before each one-client call (default 150); COLD=1 gives each call
// limits of its own (no warm sandbox fits: a fresh interpreter per call, as bench/e2e's cold row).
import http from 'node:http';
import { Server } from '../tests/integration/harness.mjs';

const N = Number(process.argv[2] || 30);
const ROUNDS = Number(process.argv[3] || 3);
const SECS = Number(process.env.SECS || 6);
const LOAD = process.env.LOAD !== '0';
const GAP_MS = Number(process.env.GAP_MS || 150);
const COLD = process.env.COLD === '1';
const now = () => performance.now();
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor((s.length - 1) / 2)]; };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function executor(server) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const url = new URL(`${server.base}/v1/execute`);
  let distinct = 5000;
  return () => new Promise((resolve, reject) => {
    // COLD=1: each call's limits differ (a CPU limit of its own), so none finds a warm sandbox
    const body = JSON.stringify({ tool: 'python', code: 'pass', ...(COLD ? { limits: { cpu_ms: distinct++ } } : {}) });
    const t0 = now();
    const req = http.request({ agent, host: url.hostname, port: url.port, path: url.pathname, method: 'POST',
      headers: { authorization: `Bearer ${server.keys.agent}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`${res.statusCode}: ${text.slice(0, 300)}`));
        const timing = {};
        for (const part of (res.headers['server-timing'] || '').split(',')) {
          const m = /^\s*([a-z]+);dur=([0-9.]+)/.exec(part);
          if (m) timing[m[1]] = Number(m[2]);
        }
        resolve({ ms: now() - t0, timing });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function rate(fn) {
  let n = 0;
  const end = now() + SECS * 1000;
  await Promise.all(Array.from({ length: 8 }, async () => { while (now() < end) { await fn(); n++; } }));
  return n / SECS;
}

const envs = { A: JSON.parse(process.env.A || '{}'), B: JSON.parse(process.env.B || '{}') };
const servers = {}, calls = {};
const one = { A: [], B: [] }, rates = { A: [], B: [] }, phases = { A: {}, B: {} };
try {
  for (const k of ['A', 'B']) {
    servers[k] = new Server(`ab-${k.toLowerCase()}`, { serveEnv: envs[k], bin: process.env[`${k}_BIN`] });
    await servers[k].start();
    calls[k] = executor(servers[k]);
    for (let i = 0; i < 5; i++) await calls[k]();
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < Math.ceil(N / ROUNDS); i++)
      for (const k of (i % 2 ? ['B', 'A'] : ['A', 'B'])) {
        await sleep(GAP_MS);
        const r = await calls[k]();
        one[k].push(r.ms);
        for (const [p, v] of Object.entries(r.timing)) (phases[k][p] ??= []).push(v);
      }
    if (LOAD) for (const k of (round % 2 ? ['B', 'A'] : ['A', 'B'])) rates[k].push(await rate(calls[k]));
  }
  const f = (x) => x.toFixed(2).padStart(7);
  console.log(`bench/ab: A=${servers.A.bin} ${JSON.stringify(envs.A)} B=${servers.B.bin} ${JSON.stringify(envs.B)}; ${one.A.length} calls each, ${GAP_MS} ms apart${LOAD ? `, ${ROUNDS} rounds of ${SECS} s at 8 clients` : ''}`);
  for (const k of ['A', 'B']) {
    const ph = Object.entries(phases[k]).map(([p, v]) => `${p} ${median(v).toFixed(2)}`).join('  ');
    const load = LOAD ? `   8 clients ${rates[k].map((r) => r.toFixed(1)).join(' / ')} /s` : '';
    console.log(`  ${k}: 1 client ${f(median(one[k]))} ms${load}   ${ph}`);
  }
  const sum = (xs) => xs.reduce((a, b) => a + b, 0);
  const load = LOAD ? `; 8 clients ${(sum(rates.B) / sum(rates.A)).toFixed(2)}x the rate` : '';
  console.log(`  B/A: 1 client ${(median(one.B) / median(one.A)).toFixed(2)}x the time${load}`);
} finally {
  for (const s of Object.values(servers)) await s.stop();
}

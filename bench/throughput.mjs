// Throughput alone (issue 16): bare `python3 -I -c pass` spawned 8 at a time, then 8 keep-alive
// clients POSTing /v1/execute of python `pass`, turn about, ROUNDS times (default 2), SECS
// seconds each (default 10): rates, their ratio, and the Server-Timing phases' medians under
// that load (where a call waits). Run through bench/node_bench.sh:
//   ROUNDS=3 bench/node_bench.sh bench/throughput.mjs
// TOOLCAGE_BIN=other/toolcage compares another build the same way.
import { spawn } from 'node:child_process';
import http from 'node:http';
import { Server } from '../tests/integration/harness.mjs';
const now = () => performance.now();
const PY = ['/usr/bin/python3', '-I', '-c', 'pass'];
const SECONDS = Number(process.env.SECS || 10);
function stats(xs) { const s = [...xs].sort((a, b) => a - b); const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]; return { median: q(0.5), p99: q(0.99), n: s.length }; }
function spawnOnce(argv) { return new Promise((res, rej) => { const p = spawn(argv[0], argv.slice(1), { stdio: 'ignore' }); p.on('exit', (c) => c === 0 ? res() : rej(new Error('exit ' + c))); }); }
const phases = {};
let warmN = 0, total = 0;
function executor(server, tool) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const url = new URL(`${server.base}/v1/execute`);
  return () => new Promise((resolve, reject) => {
    const body = JSON.stringify({ tool, code: 'pass' });
    const req = http.request({ agent, host: url.hostname, port: url.port, path: url.pathname, method: 'POST',
      headers: { authorization: `Bearer ${server.keys.agent}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = ''; res.setEncoding('utf8'); res.on('data', (d) => { text += d; });
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new Error(`${res.statusCode}: ${text.slice(0, 300)}`));
        const j = JSON.parse(text); total++; warmN += j.warm === true;
        for (const part of (res.headers['server-timing'] || '').split(',')) { const m = /^\s*([a-z]+);dur=([0-9.]+)/.exec(part); if (m) (phases[m[1]] ??= []).push(Number(m[2])); }
        resolve();
      });
    });
    req.on('error', reject); req.end(body);
  });
}
async function throughput(fn, c, s) { const lat = []; const end = now() + s * 1000;
  await Promise.all(Array.from({ length: c }, async () => { while (now() < end) { const t0 = now(); await fn(); lat.push(now() - t0); } }));
  return { rate: lat.length / s, ...stats(lat) }; }
const server = new Server('thr', {});
await server.start();
try {
  const exec = executor(server, 'python');
  for (let i = 0; i < 5; i++) await exec();
  for (let round = 0; round < Number(process.env.ROUNDS || 2); round++) {
    const b = await throughput(() => spawnOnce(PY), 8, SECONDS);
    for (const k of Object.keys(phases)) delete phases[k]; warmN = 0; total = 0;
    const t = await throughput(exec, 8, SECONDS);
    const med = (k) => phases[k] ? stats(phases[k]).median.toFixed(1) : '-';
    console.log(`bare ${b.rate.toFixed(1)}/s  toolcage ${t.rate.toFixed(1)}/s p50 ${t.median.toFixed(0)} p99 ${t.p99.toFixed(0)}  ratio ${(t.rate / b.rate).toFixed(2)}  warm ${warmN}/${total}`);
    console.log('  phases: ' + ['screen', 'admit', 'lease', 'setup', 'run', 'record', 'total'].map((k) => `${k} ${med(k)}`).join('  '));
  }
} finally { await server.stop(); }

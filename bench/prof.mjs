// 8 keep-alive clients calling python `pass` for SECS seconds (default 8); with PERF=1, `perf record
// -a -g` of the whole machine meanwhile (/tmp/perf.data): where the CPU of a loaded server goes
// (bench/README, 8 clients). Run through bench/node_bench.sh bench/prof.mjs; prints the rate.
import http from 'node:http';
import { spawn, spawnSync } from 'node:child_process';
import { Server } from '../tests/integration/harness.mjs';
const SECS = Number(process.env.SECS || 8);
const now = () => performance.now();
const server = new Server('prof', {});
await server.start();
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const url = new URL(`${server.base}/v1/execute`);
const body = JSON.stringify({ tool: 'python', code: 'pass' });
const call = () => new Promise((resolve, reject) => {
  const req = http.request({ agent, host: url.hostname, port: url.port, path: url.pathname, method: 'POST',
    headers: { authorization: `Bearer ${server.keys.agent}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
    res.resume(); res.on('end', () => res.statusCode === 200 ? resolve() : reject(new Error(String(res.statusCode))));
  });
  req.on('error', reject); req.end(body);
});
for (let i = 0; i < 10; i++) await call();
const perf = process.env.PERF ? spawn('perf', ['record', '-a', '-F', '999', '-g', '-o', '/tmp/perf.data', '--', 'sleep', String(SECS)], { stdio: 'inherit' }) : null;
let n = 0; const end = now() + SECS * 1000;
await Promise.all(Array.from({ length: 8 }, async () => { while (now() < end) { await call(); n++; } }));
console.log(`rate ${(n / SECS).toFixed(1)}/s`);
if (perf) await new Promise((r) => perf.on('exit', r));
await server.stop();

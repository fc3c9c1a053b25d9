// Streaming latency: from the moment a sandboxed program writes a line to the moment its
// `stdout` event reaches the client (POST /v1/execute with Accept: text/event-stream), for
// python `print(...)` followed by `time.sleep(2)`. Target: < 50 ms after the write.
// Baseline in the same run: the same program as a bare `python3 -I -c` process on this host,
// write -> its pipe read by this script (what any pipe costs). Run through bench/stream_bench.sh.
//
// The program prints time.time() (the host's clock, shared with the sandbox) right before it
// writes; the client notes the arrival on the same clock.
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Server } from '../tests/integration/harness.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const N = Number(process.argv[2] || process.env.TOOLCAGE_BENCH_N || 20);
const WARMUP = 2;
const TARGET_MS = 50;
const CODE = 'import time\nprint(f"t={time.time():.6f}", flush=True)\ntime.sleep(2)\n';

const nowMs = () => performance.timeOrigin + performance.now();
const writeOf = (text) => {
  const m = /t=(\d+\.\d+)/.exec(text);
  if (!m) throw new Error(`no write time in ${JSON.stringify(text)}`);
  return Number(m[1]) * 1000;
};

function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)];
  return { median: q(0.5), p95: q(0.95), min: s[0], max: s[s.length - 1] };
}

/** Bare: the program as a child process; write -> data on its stdout pipe here. */
function bareOnce() {
  return new Promise((resolve, reject) => {
    const p = spawn('python3', ['-I', '-c', CODE], { stdio: ['ignore', 'pipe', 'inherit'] });
    let got = false;
    p.stdout.on('data', (d) => {
      if (got) return;
      got = true;
      resolve(nowMs() - writeOf(d.toString()));
      p.kill('SIGKILL');
    });
    p.on('error', reject);
  });
}

/** toolcage: the first stdout event of the stream. The call runs on (sleep 2) after. */
async function streamOnce(server) {
  const ac = new AbortController();
  const res = await fetch(`${server.base}/v1/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.keys.agent}`, 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify({ tool: 'python', code: CODE }),
    signal: ac.signal,
  });
  if (res.status !== 200) throw new Error(`execute: ${res.status} ${await res.text()}`);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended without output: ${text}`);
    text += dec.decode(value, { stream: true });
    const i = text.indexOf('event: stdout\n');
    if (i >= 0 && text.indexOf('\n\n', i) > 0) {
      const at = nowMs();
      ac.abort(); // the call runs to its end without us
      return at - writeOf(text.slice(i));
    }
  }
}

const server = new Server('stream-bench', { policy: path.join(ROOT, 'examples/policy.json') });
let code = 0;
try {
  await server.start();
  const bare = [];
  const streamed = [];
  for (let i = 0; i < WARMUP + N; i++) {
    const b = await bareOnce();
    const s = await streamOnce(server);
    if (i >= WARMUP) {
      bare.push(b);
      streamed.push(s);
    }
  }
  const sb = stats(bare);
  const ss = stats(streamed);
  const f = (x) => x.toFixed(1).padStart(7);
  console.log(`stream_bench: python print() then sleep(2), write -> client, ${N} runs (+${WARMUP} warm-up)`);
  console.log(`  baseline bare python3 pipe   median ${f(sb.median)} ms  p95 ${f(sb.p95)} ms  max ${f(sb.max)} ms`);
  console.log(`  toolcage text/event-stream   median ${f(ss.median)} ms  p95 ${f(ss.p95)} ms  max ${f(ss.max)} ms`);
  console.log(`  (target: median < ${TARGET_MS} ms after the write: ${ss.median < TARGET_MS ? 'met' : 'MISSED'})`);
  if (process.env.TOOLCAGE_BENCH_ENFORCE === '1' && ss.median >= TARGET_MS) code = 1;
} catch (e) {
  console.error(e);
  code = 2;
} finally {
  await server.stop();
}
process.exit(code);

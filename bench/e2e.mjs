// The whole path against a bare process, side by side in one run (issue 16). Run through
// bench/e2e.sh (a private PostgreSQL, a release server with the example policy).
//
// Baseline: `python3 -I -c pass` spawned here, cold (one at a time, and 8 at a time for the
// throughput comparison). Also timed with the same code: bubblewrap (`bwrap --unshare-all`),
// firejail (`--noprofile --net=none`) and gVisor directly (`runsc do`), when installed.
// toolcage: POST /v1/execute of python `pass` with one keep-alive client (with the server's
// Server-Timing breakdown of where the time goes), 8 concurrent clients, the one-shot CLI
// (`toolcage exec --tool python`), the gvisor tool, and the python tool on a tool image (the
// test image of Python from this host's packages, tests/images/host-image.sh) against the same
// tool on the host's /usr: the image's cost once it is in the store.
//
// Prints medians (and p99 for the concurrent runs) and ratios against the baseline; the targets
// are the issue's; nothing is enforced (the machines are noisy): read the ratios.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import { Server, BIN, corpusImage, imagesCli, CORPUS_IMAGE_NAME } from '../tests/integration/harness.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// the example policy, and its python tool again on a tool image
const POLICY = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-e2e-')), 'policy.json');
{
  const pol = JSON.parse(fs.readFileSync(path.join(ROOT, 'examples/policy.json'), 'utf8'));
  pol.tools['python-image'] = { ...pol.tools.python, image: CORPUS_IMAGE_NAME };
  fs.writeFileSync(POLICY, JSON.stringify(pol));
}
const N = Number(process.argv[2] || process.env.TOOLCAGE_BENCH_N || 30);
const SECONDS = Number(process.env.TOOLCAGE_BENCH_SECONDS || 10);
const PY = ['/usr/bin/python3', '-I', '-c', 'pass'];

const now = () => performance.now();
function stats(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))];
  return { median: q(0.5), p99: q(0.99), n: s.length };
}
const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

function spawnOnce(argv, stdin) {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const p = spawn(argv[0], argv.slice(1), { stdio: [stdin ? 'pipe' : 'ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => { err += d; });
    if (stdin) p.stdin.end(stdin);
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve(now() - t0) : reject(new Error(`${argv.join(' ')}: exit ${code}: ${err.slice(0, 400)}`))));
  });
}

async function timeSpawns(argv, n, stdin) {
  await spawnOnce(argv, stdin); // warm the page cache
  const xs = [];
  for (let i = 0; i < n; i++) xs.push(await spawnOnce(argv, stdin));
  return stats(xs);
}

/** Runs fn in c parallel loops for s seconds: completions per second and latency stats. */
async function throughput(fn, c, s) {
  const lat = [];
  const end = now() + s * 1000;
  await Promise.all(Array.from({ length: c }, async () => {
    while (now() < end) {
      const t0 = now();
      await fn();
      lat.push(now() - t0);
    }
  }));
  return { rate: lat.length / s, ...stats(lat) };
}

/** Bursts: c calls at once after a second of rest (the pool refills meanwhile), rounds times:
 * each call's latency. */
async function bursts(fn, c, rounds) {
  const lat = [];
  for (let r = 0; r < rounds; r++) {
    await new Promise((res) => setTimeout(res, 1000));
    await Promise.all(Array.from({ length: c }, async () => {
      const t0 = now();
      await fn();
      lat.push(now() - t0);
    }));
  }
  return stats(lat);
}

/**
 * POST /v1/execute on a keep-alive agent; resolves {ms, timing, warm} (Server-Timing parsed;
 * warm: the call took a warm sandbox). limits(): the call's limits, or undefined.
 */
function executor(server, tool, limits = () => undefined) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const url = new URL(`${server.base}/v1/execute`);
  return () => new Promise((resolve, reject) => {
    const body = JSON.stringify({ tool, code: 'pass', limits: limits() });
    const t0 = now();
    const req = http.request({ agent, host: url.hostname, port: url.port, path: url.pathname, method: 'POST',
      headers: { authorization: `Bearer ${server.keys.agent}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => { text += d; });
      res.on('end', () => {
        const ms = now() - t0;
        if (res.statusCode !== 200) return reject(new Error(`${res.statusCode}: ${text.slice(0, 300)}`));
        const j = JSON.parse(text);
        if (j.status !== 'completed') return reject(new Error(`not completed: ${text.slice(0, 300)}`));
        const timing = {};
        for (const part of (res.headers['server-timing'] || '').split(',')) {
          const m = /^\s*([a-z]+);dur=([0-9.]+)/.exec(part);
          if (m) timing[m[1]] = Number(m[2]);
        }
        resolve({ ms, timing, warm: j.warm === true });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** GET path on a keep-alive agent; resolves its time in ms (the HTTP floor: no database, no sandbox). */
function getter(server, path) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const url = new URL(`${server.base}${path}`);
  return () => new Promise((resolve, reject) => {
    const t0 = now();
    const req = http.request({ agent, host: url.hostname, port: url.port, path: url.pathname, method: 'GET' }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(now() - t0) : reject(new Error(`${path}: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

const f = (x) => (x === undefined ? '      -' : x.toFixed(1).padStart(7));
const rows = [];
const row = (name, ms, base, note = '') => rows.push(`  ${name.padEnd(44)} ${f(ms)} ms  ${base ? `${(ms / base).toFixed(2)}x`.padStart(7) : '       '}  ${note}`);

const server = new Server('e2e-bench', { policy: POLICY });
let code = 0;
try {
  await server.start();
  const bare = await timeSpawns(PY, N);
  row('bare python3 -I -c pass (cold spawn)', bare.median, bare.median, 'baseline');
  if (have('bwrap')) {
    const b = await timeSpawns(['bwrap', '--unshare-all', '--die-with-parent', '--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', ...PY], N);
    row('bubblewrap --unshare-all', b.median, bare.median);
  } else rows.push('  bubblewrap: not installed (apt-get install bubblewrap)');
  if (have('firejail')) {
    const fj = await timeSpawns(['firejail', '--quiet', '--noprofile', '--net=none', ...PY], N);
    row('firejail --noprofile --net=none', fj.median, bare.median);
  } else rows.push('  firejail: not installed (apt-get install firejail)');
  if (have('runsc')) {
    try {
      const rs = await timeSpawns(['runsc', '--network=none', '--ignore-cgroups', 'do', ...PY], Math.min(N, 10));
      row('runsc do (gVisor directly)', rs.median, bare.median);
    } catch (e) {
      rows.push(`  runsc do: failed here (${e.message.split('\n')[0].slice(0, 120)})`);
    }
  }

  const exec = executor(server, 'python');
  // cold: each call's limits differ (a CPU limit of its own), so none finds a warm sandbox
  let distinct = 5000;
  const cold = executor(server, 'python', () => ({ cpu_ms: distinct++ }));
  for (let i = 0; i < 5; i++) await exec(); // warm the pool and the connection
  for (let i = 0; i < 3; i++) await cold();
  const healthz = getter(server, '/healthz');
  await healthz();
  const one = [], coldMs = [], floor = [];
  const phases = {};
  let warmN = 0;
  for (let i = 0; i < N; i++) { // turn about: a cold call, then (after a rest) a warm one
    coldMs.push((await cold()).ms);
    await new Promise((res) => setTimeout(res, 100)); // the warm sandbox is made while idle
    const r = await exec();
    one.push(r.ms);
    warmN += r.warm;
    for (const [k, v] of Object.entries(r.timing)) (phases[k] ??= []).push(v);
    await new Promise((res) => setTimeout(res, 25));
    floor.push(await healthz()); // after a rest too, as the warm call
  }
  const so = stats(one);
  row('toolcage POST /v1/execute, 1 client (cold)', stats(coldMs).median, bare.median, 'a fresh interpreter per call');
  row('toolcage POST /v1/execute, 1 client (warm)', so.median, bare.median, `target <= 1.15x (and <= 0.6x warm); ${warmN} of ${N} warm`);
  const med = (k) => (phases[k] ? stats(phases[k]).median : undefined);
  const http = so.median - (med('total') ?? 0);
  rows.push(`    where it goes (medians, Server-Timing): request ${f(med('request'))} (auth ${f(med('auth'))})  screen ${f(med('screen'))}  admit ${f(med('admit'))}`);
  rows.push(`                                            lease ${f(med('lease'))}  setup ${f(med('setup'))}  run ${f(med('run'))} (start ${f(med('start'))}  program ${f(med('program'))})  record ${f(med('record'))}`);
  rows.push(`                                            server total ${f(med('total'))}  HTTP + client ${f(http)}  (GET /healthz, the same client: ${f(stats(floor).median)})`);

  const bare8 = await throughput(() => spawnOnce(PY), 8, SECONDS);
  const tc8 = await throughput(exec, 8, SECONDS);
  rows.push(`  bare python3, 8 at a time for ${SECONDS} s             ${bare8.rate.toFixed(1).padStart(6)} /s  p50 ${f(bare8.median)}  p99 ${f(bare8.p99)} ms`);
  rows.push(`  toolcage, 8 concurrent clients for ${SECONDS} s       ${tc8.rate.toFixed(1).padStart(6)} /s  p50 ${f(tc8.median)}  p99 ${f(tc8.p99)} ms  ${(tc8.rate / bare8.rate).toFixed(2)}x throughput (target >= 0.9x, p99 < 2x p50: ${(tc8.p99 / tc8.median).toFixed(2)}x)`);

  // a burst bigger than the pool (2 shells by default, grown by misses up to 8): 8 calls at
  // once, after a rest
  const ROUNDS = Math.max(3, Math.min(10, Math.round(N / 3)));
  const bareB = await bursts(() => spawnOnce(PY), 8, ROUNDS);
  const tcB = await bursts(exec, 8, ROUNDS);
  rows.push(`  bare python3, bursts of 8 at once (${ROUNDS} bursts)       p50 ${f(bareB.median)}  p99 ${f(bareB.p99)} ms`);
  rows.push(`  toolcage, bursts of 8 calls at once (pool ${process.env.TOOLCAGE_POOL || 2}, grows to ${process.env.TOOLCAGE_POOL_MAX || 8})   p50 ${f(tcB.median)}  p99 ${f(tcB.p99)} ms  ${(tcB.median / bareB.median).toFixed(2)}x (target <= 1.3x)`);

  const cli = await timeSpawns([BIN, 'exec', '--tool', 'python', '--policy', POLICY], Math.min(N, 15), 'pass\n');
  row('toolcage exec --tool python (one-shot CLI)', cli.median, bare.median, 'target <= 1.5x');

  try {
    const gv = executor(server, 'python-gvisor');
    let gdistinct = 7000;
    const gvCold = executor(server, 'python-gvisor', () => ({ cpu_ms: gdistinct++ }));
    await gv();
    await gv();
    const g = [], gc = [];
    let gw = 0;
    for (let i = 0; i < Math.min(N, 10); i++) { // turn about, as the python rows: cold, then warm after a rest
      gc.push((await gvCold()).ms);
      await new Promise((res) => setTimeout(res, 600)); // runsc boots the warm one meanwhile
      const r = await gv();
      g.push(r.ms);
      gw += r.warm;
    }
    row('toolcage gvisor tool, 1 client (cold)', stats(gc).median, bare.median, 'runsc booted for the call');
    row('toolcage gvisor tool, 1 client (warm)', stats(g).median, bare.median, `target <= 100 ms; ${gw} of ${g.length} warm`);
  } catch (e) {
    rows.push(`  toolcage gvisor tool: failed here (${e.message.slice(0, 120)})`);
  }

  // microvm (docs/sandbox.md): a guest kernel under qemu, emulated (TCG) here. Cold: a
  // distinct cpu_ms each time, so that no warm guest fits; warm: the same call after a rest
  // long enough for the guest it left behind to boot (the interpreter at its gate inside).
  try {
    const vm = executor(server, 'python-microvm');
    let vdistinct = 9000;
    const vmCold = executor(server, 'python-microvm', () => ({ cpu_ms: vdistinct++ }));
    await vm();
    await vm();
    const v = [], vc = [];
    let vw = 0;
    const VN = Math.min(N, 3);
    for (let i = 0; i < VN; i++) {
      vc.push((await vmCold()).ms);
      // the warm guest boots meanwhile (~7 s under TCG); under the 30 s after which the server
      // cuts an idle keep-alive connection, which this agent would otherwise reuse as it closes
      await new Promise((res) => setTimeout(res, 20_000));
      const r = await vm();
      v.push(r.ms);
      vw += r.warm;
    }
    row('toolcage microvm tool (TCG), 1 client (cold)', stats(vc).median, bare.median, 'a guest booted for the call');
    row('toolcage microvm tool (TCG), 1 client (warm)', stats(v).median, bare.median, `target with KVM <= 300 ms; ${vw} of ${v.length} warm`);
  } catch (e) {
    rows.push(`  toolcage microvm tool: failed here (${e.message.slice(0, 120)})`);
  }

  try {
    await imagesCli(server, ['import', await corpusImage()]);
    const im = executor(server, 'python-image');
    for (let i = 0; i < 3; i++) await im();
    const a = [], b = [];
    for (let i = 0; i < N; i++) { // interleaved: the host root and the image root, turn about
      a.push((await exec()).ms);
      b.push((await im()).ms);
    }
    const host = stats(a).median, img = stats(b).median;
    row('toolcage python on a tool image, 1 client', img, bare.median, `${(img / host).toFixed(2)}x the host-root tool (${host.toFixed(1)} ms) in the same turns`);
  } catch (e) {
    rows.push(`  toolcage image tool: failed here (${e.message.slice(0, 160)})`);
  }

  const cpu = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/)?.[1] ?? '?';
  console.log(`bench/e2e: python3 -I -c pass, ${N} runs each, medians; ${cpu}, ${(fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^processor/gm) || []).length} cores`);
  for (const r of rows) console.log(r);
} catch (e) {
  console.error(e);
  code = 2;
} finally {
  await server.stop();
}
process.exit(code);

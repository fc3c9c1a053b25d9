// The attack corpus (tests/attacks/NNN-name.{py,sh}) through `toolcage exec`: no server, no
// PostgreSQL, so that it runs inside the cgroup v2 guest of scripts/test-cgroup2. The same
// headers as tests/integration/attacks.test.mjs (which runs the corpus through the HTTP
// service on the development hosts): each "# expect:" line is asserted on the result, and
// on the host no process is left in the sandbox uid range, no sandbox cgroup is left, a
// {PWNED} path was not created and the {PORT} listener got no connection. Every result must
// say that memory, pids and CPU were enforced by cgroup v2.
//   node tests/cgroup2/attacks-exec.mjs BUILD_DIR [NAME_FILTER]
// Env: TOOLCAGE_SLOW multiplies the *_ms bounds (an emulated CPU); TOOLCAGE_ATTACKS lists the
// files to run (comma-separated prefixes such as 013,016), default all; TOOLCAGE_ATTACKS_SKIP
// lists prefixes to skip and TOOLCAGE_ATTACKS_SKIP_REASON says why (reported as skipped).
// Native backend only: gVisor under an emulated CPU exceeds the corpus's CPU limits.
// Prints "ok"/"not ok" per attack and ends with "N passed, N failed, N skipped".
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { hostExpect } from '../attacks/hostprobe.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BUILD = path.resolve(process.argv[2] || path.join(ROOT, 'build'));
const DIR = path.join(ROOT, 'tests/attacks');
const SLOW = Number(process.env.TOOLCAGE_SLOW || 1);
const ONLY = (process.env.TOOLCAGE_ATTACKS || '').split(',').filter(Boolean);
const SKIP = (process.env.TOOLCAGE_ATTACKS_SKIP || '').split(',').filter(Boolean);
const SKIP_REASON = process.env.TOOLCAGE_ATTACKS_SKIP_REASON || 'skipped';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sha256 = (p) => crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
const STATE = fs.mkdtempSync('/tmp/toolcage-attacks-');
fs.chmodSync(STATE, 0o700);

function parse(file) {
  const text = fs.readFileSync(path.join(DIR, file), 'utf8');
  const meta = { file, attack: null, expect: [], probe: [], probeRefused: [], limits: undefined, host: [], runner: null, code: text };
  for (const line of text.split('\n')) {
    if (!line.startsWith('#')) break;
    const m = line.match(/^#\s*(attack|expect|limits|host|runner|probe|probe-refused-expect):\s*(.*)$/);
    if (!m) continue;
    const [, key, value] = m;
    if (key === 'attack') meta.attack = value;
    else if (key === 'expect') meta.expect.push(value);
    else if (key === 'probe') meta.probe.push(value);
    else if (key === 'probe-refused-expect') meta.probeRefused.push(value);
    else if (key === 'limits') meta.limits = JSON.parse(value);
    else if (key === 'host') meta.host.push(value);
    else meta.runner = value;
  }
  return meta;
}

function parseValue(v) {
  if (v === 'null') return null;
  if (v === 'true') return true;
  if (v === 'false') return false;
  if (/^-?\d+$/.test(v)) return Number(v);
  return v;
}

function checkExpect(r, e) {
  let m;
  if ((m = e.match(/^violation=(\S+)$/))) {
    const names = (r.policy_violations || []).map((v) => v.syscall);
    if (!names.includes(m[1])) return `expected a policy violation for ${m[1]}, got ${JSON.stringify(names)}`;
  } else if ((m = e.match(/^(\w+)!~=(.*)$/))) {
    if (new RegExp(m[2], 'm').test(String(r[m[1]]))) return `${m[1]} must not match /${m[2]}/`;
  } else if ((m = e.match(/^(\w+)~=(.*)$/))) {
    if (!new RegExp(m[2], 'm').test(String(r[m[1]]))) return `${m[1]} must match /${m[2]}/`;
  } else if ((m = e.match(/^(\w+)([<>])(\d+)$/))) {
    const v = r[m[1]];
    const bound = Number(m[3]) * (m[1].endsWith('_ms') ? SLOW : 1);
    if (typeof v !== 'number' || !(m[2] === '<' ? v < bound : v > bound)) return `${m[1]}=${v} not ${m[2]} ${bound}`;
  } else if ((m = e.match(/^(\w+)=(.*)$/))) {
    if (JSON.stringify(r[m[1]]) !== JSON.stringify(parseValue(m[2]))) return `${m[1]}=${JSON.stringify(r[m[1]])}, expected ${m[2]}`;
  } else {
    return `unparsable expectation "${e}"`;
  }
  return null;
}

function hostIp() {
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list || []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

/** The attack policy with the file's requested limits as the defaults (`exec` takes no limits). */
function policyFor(meta) {
  const pol = JSON.parse(fs.readFileSync(path.join(DIR, 'policy.json'), 'utf8'));
  for (const [k, asked] of Object.entries(meta.limits || {})) {
    for (const tool of Object.values(pol.tools)) {
      const cur = tool.limits[k];
      let v = asked;
      if (cur && typeof cur === 'object') {
        if (v > cur.max) throw new Error(`${meta.file}: ${k}=${v} is above the policy's maximum`);
        // a wall limit stretches a little under an emulated CPU (python takes 1-1.5 s to start
        // there: 058 must reach its second print before the limit it then sleeps past); not by
        // all of SLOW, which would only lengthen the attacks that sleep past their limit
        if (k === 'timeout_ms' && SLOW > 1) v = Math.min(v * Math.min(SLOW, 3), cur.max);
        cur.default = v;
      } else {
        tool.limits[k] = v;
      }
    }
  }
  // An attack that asks for no CPU budget of its own runs under the tool's default, which is
  // host seconds: under an emulated CPU the same work takes several times the CPU (018's dd
  // used 10.2 s against 10 s), so the default stretches with the emulation, within the maximum.
  // An attack that asks for a budget (023, 024: the budget is what they test) keeps it.
  // The same for the wall clock: no attack that asks for no limit of its own ends by its
  // timeout, and 061's scan of 65534 pids (a signal each, through the seccomp filter) took
  // 9.4 s of emulated CPU once, and its 10 s ran out before its last lines.
  for (const k of ['cpu_ms', 'timeout_ms']) {
    if (SLOW > 1 && !(meta.limits && k in meta.limits)) {
      for (const tool of Object.values(pol.tools)) {
        const cur = tool.limits[k];
        if (cur && typeof cur === 'object') cur.default = Math.min(cur.default * Math.min(SLOW, 3), cur.max);
      }
    }
  }
  const f = path.join(STATE, `policy-${meta.file}.json`);
  fs.writeFileSync(f, JSON.stringify(pol));
  return f;
}

function exec(tool, policy, code) {
  return new Promise((resolve) => {
    const p = spawn(path.join(BUILD, 'toolcage'), ['exec', '--tool', tool, '--policy', policy, '--json'], {
      env: { ...process.env, TOOLCAGE_STATE_DIR: STATE },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), 300_000 * SLOW);
    p.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
    p.stdin.end(code);
  });
}

/** Processes whose real uid is in the sandboxes' range (1000000 and up, docs/sandbox.md). */
function sandboxProcs() {
  const found = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const m = fs.readFileSync(`/proc/${d}/status`, 'utf8').match(/^Uid:\s+(\d+)/m);
      if (m && Number(m[1]) >= 1000000) found.push(`${d} uid=${m[1]}`);
    } catch { /* gone */ }
  }
  return found;
}

/** Groups a launcher made (toolcage/L<pid>/...) anywhere in the v2 hierarchy. */
function launcherGroups(dir = '/sys/fs/cgroup', depth = 0) {
  const found = [];
  let ents = [];
  try { ents = fs.readdirSync(dir, { withFileTypes: true }); } catch { return found; }
  for (const e of ents) {
    if (!e.isDirectory()) continue;
    const p = path.join(dir, e.name);
    if (path.basename(dir) === 'toolcage' && /^L\d+$/.test(e.name)) found.push(p);
    else if (depth < 6) found.push(...launcherGroups(p, depth + 1));
  }
  return found;
}

const listener = net.createServer((sock) => {
  connections.push(`${sock.remoteAddress}:${sock.remotePort}`);
  sock.destroy();
});
let connections = [];
await new Promise((resolve) => listener.listen(0, '::', resolve));
const PORT = listener.address().port;
const HOSTIP = hostIp();

const files = fs.readdirSync(DIR).filter((f) => /^\d{3}-[a-z0-9-]+\.(py|sh)$/.test(f)).sort()
  .filter((f) => !ONLY.length || ONLY.some((p) => f.startsWith(p)))
  .filter((f) => !process.argv[3] || f.includes(process.argv[3]));
let passed = 0;
let failed = 0;
let skipped = 0;
for (const file of files) {
  const meta = parse(file);
  const name = `attack ${file}: ${meta.attack}`;
  if (SKIP.some((p) => file.startsWith(p))) {
    console.log(`ok - ${name} # SKIP ${SKIP_REASON}`);
    skipped++;
    continue;
  }
  if (meta.runner === 'marker') {
    // Its runs talk to each other through the program's stdin, which `exec` uses for the code.
    console.log(`ok - ${name} # SKIP needs program stdin (runs in tests/integration/attacks.test.mjs)`);
    skipped++;
    continue;
  }
  const t0 = Date.now();
  connections = [];
  const pwned = `/tmp/toolcage-pwned-${crypto.randomBytes(8).toString('hex')}`;
  const subst = (s) => s.replaceAll('{PWNED}', pwned).replaceAll('{PORT}', String(PORT)).replaceAll('{HOSTIP}', HOSTIP).replaceAll('{ABSTRACT}', 'toolcage-attack-none').replaceAll('{BIN}', path.join(BUILD, 'toolcage')).replaceAll('{HOSTKERNEL}', os.release());
  const problems = [];
  const hashes = {};
  for (const h of meta.host.map(subst)) {
    const m = h.match(/^unchanged=(\S+)$/);
    if (m) hashes[m[1]] = sha256(m[1]);
  }
  const { code, out, err } = await exec(file.endsWith('.py') ? 'python' : 'shell', policyFor(meta), subst(meta.code));
  let r = null;
  try { r = JSON.parse(out); } catch { problems.push(`exec exit ${code}, no JSON result: ${err.slice(0, 500)}`); }
  if (r) {
    const { expect, refused } = hostExpect(meta, (res, e) => !checkExpect(res, e));
    if (refused) console.log(`# ${file}: this host's kernel refuses the attack unsandboxed (probe); asserting ${expect.join(', ')}`);
    for (const e of expect.map(subst)) {
      const p = checkExpect(r, e);
      if (p) problems.push(p);
    }
    const enf = r.enforced || {};
    if (enf.memory_mb !== 'cgroup_v2') problems.push(`enforced.memory_mb=${enf.memory_mb}, expected cgroup_v2`);
    if (enf.pids !== 'cgroup_v2') problems.push(`enforced.pids=${enf.pids}, expected cgroup_v2`);
    if (!String(enf.cpu_ms).startsWith('cgroup_v2')) problems.push(`enforced.cpu_ms=${enf.cpu_ms}, expected cgroup_v2`);
  }
  let procs = [];
  let groups = [];
  for (let i = 0; i < 40; i++) {
    procs = sandboxProcs();
    groups = launcherGroups();
    if (!procs.length && !groups.length) break;
    await sleep(50 * SLOW);
  }
  if (procs.length) problems.push(`processes left in the sandbox uid range: ${procs.join(', ')}`);
  if (groups.length) problems.push(`cgroups left: ${groups.join(', ')}`);
  for (const h of meta.host.map(subst)) {
    let m;
    if ((m = h.match(/^absent=(\S+)$/))) {
      await sleep(3500); // a delayed writer the attack planted gets time to (fail to) fire
      if (fs.existsSync(m[1])) problems.push(`${m[1]} exists on the host`);
    } else if ((m = h.match(/^unchanged=(\S+)$/))) {
      if (hashes[m[1]] !== sha256(m[1])) problems.push(`${m[1]} changed on the host`);
    } else if (h === 'listener') {
      if (connections.length) problems.push(`the host listener received connections: ${connections.join(', ')}`);
    } else if (h !== 'healthz') {
      problems.push(`unknown host check "${h}"`);
    }
  }
  const secs = ((Date.now() - t0) / 1000).toFixed(1);
  if (problems.length) {
    failed++;
    console.log(`not ok - ${name} (${secs} s)`);
    for (const p of problems) console.log(`    ${p}`);
    if (r) console.log(`    result: ${JSON.stringify({ ...r, stdout: String(r.stdout).slice(0, 1500), stderr: String(r.stderr).slice(0, 1500) })}`);
  } else {
    passed++;
    console.log(`ok - ${name} (${secs} s)`);
  }
}
listener.close();
fs.rmSync(STATE, { recursive: true, force: true });
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed ? 1 : 0);

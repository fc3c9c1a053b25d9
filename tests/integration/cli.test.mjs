// The command line: version and help, `policy check`, `exec` (one sandboxed run without a
// server), start-up refusals (a bad environment value, a master key others can read), and
// two `migrate` runs at once on a fresh database (serialised by the advisory lock).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ASAN, BIN, ROOT, SLOW, PSQL, psql, sleep } from './harness.mjs';

const EXAMPLE_POLICY = path.join(ROOT, 'examples/policy.json');
const MIGRATE_LOCK_KEY = '7715923601'; // core/migrate.c

/**
 * Runs toolcage ARGS with the test database's environment plus env; resolves
 * {code, signal, stdout, stderr}. Killed (SIGKILL) after timeout ms: code null then.
 */
function run(args, { env = {}, input = '', timeout = 30_000 * SLOW } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(BIN, args, {
      env: {
        ...process.env,
        TOOLCAGE_DATABASE_URL: process.env.TOOLCAGE_DATABASE_URL,
        TOOLCAGE_MIGRATE_DATABASE_URL: process.env.TOOLCAGE_MIGRATE_DATABASE_URL,
        ...env,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => { stdout += d; });
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    const timer = setTimeout(() => child.kill('SIGKILL'), timeout);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
    child.stdin.on('error', () => {}); // the program may exit before reading it all
    child.stdin.end(input);
  });
}

function tmpDir(name) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `toolcage-cli-${name}-`));
}

function masterKey(dir, mode = 0o600) {
  const file = path.join(dir, 'master.key');
  fs.writeFileSync(file, crypto.randomBytes(32), { mode: 0o600 });
  fs.chmodSync(file, mode); // explicit: writeFileSync's mode is filtered by the umask
  return file;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** True if something accepts TCP connections on 127.0.0.1:port. */
function listening(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('connect', () => { s.destroy(); resolve(true); });
    s.on('error', () => resolve(false));
  });
}

/** A valid `serve` environment on a free port, with its own state dir and master key. */
async function serveEnv(dir, keyMode = 0o600) {
  const port = await freePort();
  return {
    port,
    env: {
      TOOLCAGE_LISTEN: `127.0.0.1:${port}`,
      TOOLCAGE_POLICY: EXAMPLE_POLICY,
      TOOLCAGE_STATE_DIR: path.join(dir, 'state'),
      TOOLCAGE_MASTER_KEY_FILE: masterKey(dir, keyMode),
      TOOLCAGE_LOG_LEVEL: 'info',
    },
  };
}

const lines = (s) => s.split('\n').filter((l) => l !== '');

test('toolcage version prints the project version', async () => {
  const want = fs.readFileSync(path.join(ROOT, 'CMakeLists.txt'), 'utf8').match(/project\(toolcage VERSION ([0-9.]+)/)[1];
  const r = await run(['version']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, `toolcage ${want}\n`);
  assert.equal(r.stderr, '');
});

test('toolcage --help lists every command and the environment; no command is a usage error', async () => {
  const commands = ['serve', 'migrate', 'keys', 'policy', 'exec', 'audit', 'receipt', 'users', 'secrets', 'version'];
  for (const flag of ['--help', '-h', 'help']) {
    const r = await run([flag]);
    assert.equal(r.code, 0, `${flag}: ${r.stderr}`);
    assert.match(r.stdout, /^usage: toolcage COMMAND/);
    const listed = [...r.stdout.matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]);
    for (const c of commands) assert.ok(listed.includes(c), `${flag} does not list ${c}:\n${r.stdout}`);
    for (const v of ['TOOLCAGE_DATABASE_URL', 'TOOLCAGE_LISTEN', 'TOOLCAGE_THREADS', 'TOOLCAGE_MASTER_KEY_FILE']) {
      assert.ok(r.stdout.includes(v), `${flag} does not document ${v}`);
    }
  }
  const none = await run([]);
  assert.equal(none.code, 2);
  assert.equal(none.stdout, '');
  assert.match(none.stderr, /^usage: toolcage COMMAND/);
  const unknown = await run(['frobnicate']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /^toolcage: unknown command 'frobnicate'/);
  const one = await run(['policy', '--help']);
  assert.equal(one.code, 0);
  assert.match(one.stdout, /^usage: toolcage policy check FILE\n/);
});

test('the README\'s configuration table lists what toolcage --help lists, in order, with the same defaults', async () => {
  const help = (await run(['--help'])).stdout;
  const env = help.slice(help.indexOf('\nEnvironment'));
  const fromHelp = [...env.matchAll(/^ {2}(TOOLCAGE_\w+) \(default: (.*)\)$/gm)].map((m) => [m[1], m[2]]);
  assert.ok(fromHelp.length >= 30, `only ${fromHelp.length} variables in --help:\n${env}`);
  // every variable's help line follows it, indented
  for (const [name] of fromHelp) assert.match(env, new RegExp(`^  ${name} \\(default: .*\\)\\n {6}\\S`, 'm'), name);
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const table = readme.slice(readme.indexOf('| variable | default | meaning |'));
  const rows = [];
  for (const line of table.split('\n').slice(2)) {
    const m = line.match(/^\| `(TOOLCAGE_\w+)` \| (.*?) \| .+ \|$/);
    if (!m) break;
    rows.push([m[1], m[2] === '(unset)' ? 'unset' : m[2].replace(/^`(.*)`$/, '$1')]);
  }
  assert.deepEqual(rows, fromHelp);
  // and no TOOLCAGE_ variable is read anywhere but the table (core/config.c)
  const readers = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.c$/.test(e.name) && /getenv\("TOOLCAGE_/.test(fs.readFileSync(p, 'utf8'))) readers.push(path.relative(ROOT, p));
    }
  };
  for (const d of ['common', 'core', 'sandbox', 'policy', 'audit', 'broker', 'execution', 'approval', 'server', 'api', 'console', 'main']) walk(path.join(ROOT, d));
  assert.deepEqual(readers, [], 'TOOLCAGE_ variables read outside core/config.c');
});

test('policy check: the example policy is ok; a broken one fails with every error and its JSON path', async () => {
  const ok = await run(['policy', 'check', EXAMPLE_POLICY]);
  assert.equal(ok.code, 0, ok.stderr);
  const ntools = Object.keys(JSON.parse(fs.readFileSync(EXAMPLE_POLICY, 'utf8')).tools).length;
  assert.equal(ok.stdout, `ok: ${ntools} tools\n`);

  const dir = tmpDir('policy');
  try {
    const p = JSON.parse(fs.readFileSync(EXAMPLE_POLICY, 'utf8'));
    p.tools.python.limits.memory_mb.default = 4096; // above its max (1024)
    p.tools.shell.network = 'sometimes';
    p.tools.deploy.bogus = true;
    const bad = path.join(dir, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify(p, null, 2));
    const r = await run(['policy', 'check', bad]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.equal(r.stdout, '', 'nothing on stdout (no "ok")');
    const errs = lines(r.stderr);
    assert.equal(errs.length, 3, r.stderr);
    for (const l of errs) assert.ok(l.startsWith(`${bad}: tools.`), l);
    assert.ok(errs.some((l) => /tools\.python\.limits\.memory_mb: .*4096.*1024/.test(l)), r.stderr);
    assert.ok(errs.some((l) => l.includes('tools.shell.network: ')), r.stderr);
    assert.ok(errs.some((l) => l.includes('tools.deploy.bogus: ')), r.stderr);

    // not JSON at all, and a file that is not there
    const broken = path.join(dir, 'broken.json');
    fs.writeFileSync(broken, '{"version": 1, "tools": {');
    const j = await run(['policy', 'check', broken]);
    assert.equal(j.code, 1);
    assert.ok(lines(j.stderr).length >= 1 && lines(j.stderr).every((l) => l.startsWith(`${broken}: `)), j.stderr);
    const missing = await run(['policy', 'check', path.join(dir, 'absent.json')]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /absent\.json: /);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('exec runs code from stdin in the tool sandbox and prints its output and exit status', async () => {
  const dir = tmpDir('exec');
  const env = { TOOLCAGE_STATE_DIR: path.join(dir, 'state') };
  try {
    const code = 'import os, sys\nprint(sum(range(10)))\nprint("uid", os.getuid(), os.getcwd())\nprint("to stderr", file=sys.stderr)\nsys.exit(3)\n';
    const r = await run(['exec', '--tool', 'python', '--policy', EXAMPLE_POLICY], { env, input: code });
    assert.equal(r.code, 3, `exit status is the program's: ${r.stdout}${r.stderr}`);
    assert.equal(r.stdout, '45\nuid 1000 /workspace\n', 'ran as the sandbox user in /workspace');
    assert.equal(r.stderr, 'to stderr\n');

    // --json: the same view as the API's, with the pre-screen's findings
    const j = await run(['exec', '--tool', 'python', '--policy', EXAMPLE_POLICY, '--json'], {
      env, input: 'import subprocess\nprint(subprocess.run(["echo", "hi"], capture_output=True).stdout.decode(), end="")\n',
    });
    assert.equal(j.code, 0, j.stderr);
    const v = JSON.parse(j.stdout);
    assert.equal(v.tool, 'python');
    assert.equal(v.status, 'completed');
    assert.equal(v.exit_code, 0);
    assert.equal(v.stdout, 'hi\n');
    assert.equal(v.limits.timeout_ms, 10000, 'the policy default');
    assert.ok(v.findings.some((f) => f.rule === 'py_shell' && f.severity === 'medium' && f.line === 2), JSON.stringify(v.findings));

    // the scratch space is left empty
    assert.deepEqual(fs.readdirSync(path.join(dir, 'state', 'run')), []);

    const unknown = await run(['exec', '--tool', 'nope', '--policy', EXAMPLE_POLICY], { env, input: 'x' });
    assert.equal(unknown.code, 125);
    assert.match(unknown.stderr, /no tool named 'nope'/);
    const noTool = await run(['exec'], { env });
    assert.equal(noTool.code, 2);
    assert.match(noTool.stderr, /--tool NAME is required/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

/** Whether needle (a string) is in the writable memory of process pid (root reads /proc). */
function inMemory(pid, needle) {
  const want = Buffer.from(needle);
  const fd = fs.openSync(`/proc/${pid}/mem`, 'r');
  try {
    for (const line of fs.readFileSync(`/proc/${pid}/maps`, 'utf8').split('\n')) {
      const m = line.match(/^([0-9a-f]+)-([0-9a-f]+) rw/);
      if (!m) continue;
      const start = parseInt(m[1], 16);
      const len = parseInt(m[2], 16) - start;
      if (len > 64 << 20) continue; // (bounded: heaps and stacks here are far smaller)
      const buf = Buffer.alloc(len);
      let got = 0;
      try { got = fs.readSync(fd, buf, 0, len, start); } catch { continue; }
      if (buf.subarray(0, got).includes(want)) return true;
    }
  } finally {
    fs.closeSync(fd);
  }
  return false;
}

test('exec: signals its caller ignored are not ignored in the sandbox (every disposition reset, the C library\'s own real-time signals too)', async () => {
  const dir = tmpDir('exec-signals');
  // the caller ignores SIGPIPE, 34 (glibc's SIGRTMIN, one of musl's own) and 40; the forked
  // launcher and the shell inherit that; PID 1 must reset it before the program starts
  const py = `import os, signal, sys
for s in (signal.SIGPIPE, 34, 40): signal.signal(s, signal.SIG_IGN)
os.execv(sys.argv[1], sys.argv[1:])`;
  const r = await new Promise((resolve) => {
    const c = spawn('/usr/bin/python3', ['-c', py, BIN, 'exec', '--tool', 'shell', '--policy', EXAMPLE_POLICY],
      { env: { ...process.env, TOOLCAGE_STATE_DIR: path.join(dir, 'state') }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '', err = '';
    c.stdout.on('data', (d) => { out += d; });
    c.stderr.on('data', (d) => { err += d; });
    c.on('close', (code) => resolve({ code, out, err }));
    c.stdin.end('grep -E "^SigIgn" /proc/self/status; grep -E "^SigIgn" /proc/$PPID/status\n');
  });
  assert.equal(r.code, 0, r.err);
  const masks = [...r.out.matchAll(/^SigIgn:\s+([0-9a-f]+)$/gm)].map((m) => BigInt('0x' + m[1]));
  assert.equal(masks.length, 2, r.out);
  for (const m of masks) assert.equal(m, 0n, `ignored in the sandbox: 0x${m.toString(16)}`);
});

test('exec: its launcher (a fork of the CLI for a tool without network) holds none of the CLI\'s database or mail credentials', async () => {
  const dir = tmpDir('exec-creds');
  const marks = ['Mk1' + crypto.randomBytes(6).toString('hex'), 'Mk2' + crypto.randomBytes(6).toString('hex'),
    'Mk3' + crypto.randomBytes(6).toString('hex')];
  const env = {
    ...process.env,
    TOOLCAGE_STATE_DIR: path.join(dir, 'state'),
    TOOLCAGE_DATABASE_URL: `dbname=nothing password=${marks[0]}`,
    PGPASSWORD: marks[1],
    TOOLCAGE_SMTP_URL: `smtp://u:${marks[2]}@localhost:25`,
  };
  const cli = spawn(BIN, ['exec', '--tool', 'python', '--policy', EXAMPLE_POLICY], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  cli.stdout.on('data', (d) => { out += d; });
  const done = new Promise((resolve) => cli.on('close', resolve));
  cli.stdin.end('import time\ntime.sleep(3)\nprint("done")\n');
  try {
    let launcher = 0;
    for (const until = Date.now() + 10_000 * SLOW; !launcher && Date.now() < until;) {
      await sleep(50);
      const kids = fs.readFileSync(`/proc/${cli.pid}/task/${cli.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
      launcher = Number(kids[0] || 0);
    }
    assert.ok(launcher > 0, 'the launcher started');
    // past its start-up (name, environment): it has started the sandbox (a fixed 300 ms sleep
    // can be too short under ASan on a loaded machine)
    const childrenOf = (pid) => { try { return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim(); } catch { return ''; } };
    for (const until = Date.now() + 10_000 * SLOW; !childrenOf(launcher) && Date.now() < until;) await sleep(20);
    assert.ok(childrenOf(launcher), 'the launcher started the sandbox');
    // a fork, not an exec: it runs the CLI's binary
    assert.equal(fs.readlinkSync(`/proc/${launcher}/exe`), fs.readlinkSync(`/proc/${cli.pid}/exe`));
    // named as an exec'd launcher would be (ps -C toolcage-launch finds it)
    assert.equal(fs.readFileSync(`/proc/${launcher}/comm`, 'utf8').trim(), 'toolcage-launch');
    const environ = fs.readFileSync(`/proc/${launcher}/environ`, 'latin1');
    for (const m of marks) {
      assert.ok(inMemory(cli.pid, m), `positive control: the CLI itself holds ${m}`);
      assert.ok(!environ.includes(m), `the launcher's environment shows ${m}`);
      // (not under ASan: its runtime keeps a copy of the environment it read at start, in
      // memory of its own, which every fork inherits; the release lane checks the memory)
      if (!ASAN) assert.ok(!inMemory(launcher, m), `the launcher's memory holds ${m}`);
    }
  } finally {
    const code = await done;
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(code, 0);
    assert.equal(out, 'done\n');
  }
});

/** The example policy plus "shell-net" (the shell tool with a network allowlist), in dir. */
function netPolicy(dir) {
  const policy = path.join(dir, 'policy.json');
  const pol = JSON.parse(fs.readFileSync(EXAMPLE_POLICY, 'utf8'));
  pol.tools['shell-net'] = { ...pol.tools.shell, network: { allow: ['example.invalid:443'] } };
  fs.writeFileSync(policy, JSON.stringify(pol));
  return policy;
}

test('exec: a tool with network gets an exec\'d launcher (its egress proxy holds nothing of the CLI); the one forked at start, before the policy was read, has gone', async () => {
  const dir = tmpDir('exec-net');
  const policy = netPolicy(dir);
  const cli = spawn(BIN, ['exec', '--tool', 'shell-net', '--policy', policy],
    { env: { ...process.env, TOOLCAGE_STATE_DIR: path.join(dir, 'state') }, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '', err = '';
  cli.stdout.on('data', (d) => { out += d; });
  cli.stderr.on('data', (d) => { err += d; });
  const done = new Promise((resolve) => cli.on('close', resolve));
  cli.stdin.end('sleep 2; echo "proxy at $HTTPS_PROXY"\n');
  // (an exec'd launcher is a child of the CLI's reader thread: every thread's children)
  const childrenOf = (pid) => {
    try {
      return fs.readdirSync(`/proc/${pid}/task`).flatMap((t) => fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
    } catch { return []; }
  };
  const exeOf = (pid) => { try { return path.basename(fs.readlinkSync(`/proc/${pid}/exe`)); } catch { return ''; } };
  // (the spare, told to go as soon as the policy was read, is reaped at the end: a zombie till then)
  const running = (pid) => { try { return !/^\d+ \(.*\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')); } catch { return false; } };
  try {
    // the launcher that runs the call: toolcage-launcher, exec'd; the CLI's only child by then
    let kids = [];
    for (const until = Date.now() + 10_000 * SLOW; Date.now() < until; await sleep(20)) {
      kids = childrenOf(cli.pid).filter(running);
      if (kids.length === 1 && exeOf(kids[0]) === 'toolcage-launcher' && childrenOf(kids[0]).length >= 2) break;
    }
    assert.equal(kids.length, 1, `the CLI's children: ${kids.map((k) => `${k} ${exeOf(k)}`).join(', ')}`);
    assert.equal(exeOf(kids[0]), 'toolcage-launcher', 'exec\'d, not a fork of the CLI');
    assert.ok(childrenOf(kids[0]).length >= 2, 'it runs its egress proxy beside the sandbox');
  } finally {
    const code = await done;
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(code, 0, err);
    assert.match(out, /^proxy at http:\/\/127\.0\.0\.1:\d+\n$/);
  }
});

test('exec: a launcher that cannot set up is reported once, in its own words (a tool with network: not also by the spare it turned away)', async () => {
  const dir = tmpDir('exec-nosetup');
  const policy = netPolicy(dir);
  // the uid registry under a plain file: every launcher's setup fails, root or not
  fs.writeFileSync(path.join(dir, 'file'), '');
  try {
    for (const tool of ['shell', 'shell-net']) {
      const r = await run(['exec', '--tool', tool, '--policy', policy], {
        input: 'echo ran\n',
        env: { TOOLCAGE_STATE_DIR: path.join(dir, 'state'), TOOLCAGE_UID_REGISTRY: path.join(dir, 'file', 'uids') },
      });
      assert.equal(r.code, 125, `${tool}: ${r.stderr}`);
      assert.equal(r.stdout, '', tool);
      const lines = r.stderr.split('\n').filter(Boolean);
      assert.equal(lines.length, 1, `${tool}: ${r.stderr}`);
      assert.match(lines[0], /^toolcage exec: the sandbox did not run: launcher setup failed: .*registry/, tool);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('serve: a bad environment value stops start-up with one line naming the variable', async () => {
  const dir = tmpDir('badenv');
  try {
    const { port, env } = await serveEnv(dir);
    const cases = [
      ['TOOLCAGE_LISTEN', 'nonsense'],
      ['TOOLCAGE_LISTEN', '127.0.0.1:70000'],
      ['TOOLCAGE_THREADS', '0'],
      ['TOOLCAGE_THREADS', 'many'],
      ['TOOLCAGE_DB_POOL', '-1'],
      ['TOOLCAGE_MAX_SANDBOXES', '4097'],
      ['TOOLCAGE_LOG_LEVEL', 'loud'],
      ['TOOLCAGE_WEBHOOK_ALLOW_PRIVATE', 'yes'],
      // the console's and the launcher's settings are in the same table (they used to fall
      // back to defaults, or be read deep in sandbox/ with no check)
      ['TOOLCAGE_SESSION_IDLE_SECONDS', '0'],
      ['TOOLCAGE_SIGNIN_MAX_FAILURES', 'lots'],
      ['TOOLCAGE_COOKIE_SECURE', 'yes'],
      ['TOOLCAGE_POOL', '17'],
      ['TOOLCAGE_POOL_MAX', '-1'],
      ['TOOLCAGE_GVISOR_PLATFORM', 'kvmm'],
      ['TOOLCAGE_UID_REGISTRY', 'relative/dir'],
      ['TOOLCAGE_INIT', 'toolcage-init'],
      ['TOOLCAGE_NO_CGROUP', 'true'],
      // a value with a line break must not split the message (or forge a second line)
      ['TOOLCAGE_THREADS', '1\ntoolcage: serving'],
    ];
    for (const [name, value] of cases) {
      const what = `${name}=${JSON.stringify(value)}`;
      const r = await run(['serve'], { env: { ...env, [name]: value }, timeout: 20_000 * SLOW });
      assert.equal(r.code, 2, `${what}: exit ${r.code} ${r.signal ?? ''} (a killed serve means it started)\n${r.stderr}`);
      assert.equal(r.stdout, '', what);
      assert.ok(r.stderr.endsWith('\n'), `${what}: ${JSON.stringify(r.stderr)}`);
      const out = lines(r.stderr);
      assert.equal(out.length, 1, `${what}: one line, got ${JSON.stringify(r.stderr)}`);
      assert.ok(out[0].startsWith(`toolcage: invalid configuration: ${name}="`), `${what}: ${out[0]}`);
      assert.match(out[0], /": must be /, what);
    }
    assert.equal(await listening(port), false, 'nothing was left listening');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('serve refuses a master key file that group or others can read or write', async () => {
  const dir = tmpDir('keymode');
  let child;
  try {
    const { port, env } = await serveEnv(dir, 0o644);
    const key = env.TOOLCAGE_MASTER_KEY_FILE;
    for (const mode of [0o644, 0o640, 0o604, 0o620]) {
      fs.chmodSync(key, mode);
      const r = await run(['serve'], { env, timeout: 20_000 * SLOW });
      const m = mode.toString(8);
      assert.equal(r.code, 1, `mode ${m}: exit ${r.code} ${r.signal ?? ''}\n${r.stderr}`);
      assert.ok(r.stderr.includes(`toolcage: TOOLCAGE_MASTER_KEY_FILE=${key}: is readable or writable by group or others; chmod 0600 it`),
        `mode ${m}: ${r.stderr}`);
      assert.doesNotMatch(r.stderr, /"msg":"serving"/, `mode ${m}`);
      assert.equal(await listening(port), false, `mode ${m}: nothing listening`);
    }

    // The same file and environment at 0600: serve starts (so the mode was the reason).
    fs.chmodSync(key, 0o600);
    child = spawn(BIN, ['serve'], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    let ready = false;
    for (const deadline = Date.now() + 30_000 * SLOW; Date.now() < deadline && child.exitCode === null;) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2000) });
        if (res.status === 200) { ready = true; break; }
      } catch { /* not yet */ }
      await sleep(100);
    }
    assert.ok(ready, `serve did not start with the key at 0600:\n${stderr.slice(-3000)}`);
    child.kill('SIGTERM');
    assert.deepEqual(await exited, { code: 0, signal: null }, stderr.slice(-3000));
    child = null;
  } finally {
    if (child && child.exitCode === null) child.kill('SIGKILL');
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('two migrate runs started at once on a fresh database both succeed; each migration is applied once', async () => {
  const db = `toolcage_it_cli_migrate_${crypto.randomBytes(4).toString('hex')}`;
  const withDb = (url) => url.replace(/(^|\s)dbname=\S+/, `$1dbname=${db}`);
  const env = {
    TOOLCAGE_DATABASE_URL: withDb(process.env.TOOLCAGE_DATABASE_URL),
    TOOLCAGE_MIGRATE_DATABASE_URL: withDb(process.env.TOOLCAGE_MIGRATE_DATABASE_URL),
  };
  const host = process.env.TOOLCAGE_MIGRATE_DATABASE_URL.match(/(?:^|\s)host=(\S+)/)[1];
  const migrations = fs.readdirSync(path.join(ROOT, 'migrations')).filter((f) => f.endsWith('.sql')).sort();
  assert.ok(migrations.length >= 2);
  await psql(`CREATE DATABASE "${db}" OWNER toolcage_owner`, { db: 'postgres' });
  // A session of our own holds the migration lock first, so that both runs are certainly
  // inside tc_migrate at the same time, waiting; then it lets go and they race.
  const holder = spawn(PSQL, ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', host, '-U', 'postgres', '-d', db],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  let holderOut = '';
  holder.stdout.on('data', (d) => { holderOut += d; });
  holder.stderr.on('data', (d) => { holderOut += d; });
  const holderExit = new Promise((resolve) => holder.on('exit', resolve));
  try {
    holder.stdin.write(`SELECT pg_advisory_lock(${MIGRATE_LOCK_KEY}); SELECT 'locked';\n`);
    for (let i = 0; !holderOut.includes('locked'); i++) {
      assert.ok(i < 200 * SLOW, `psql did not take the lock: ${holderOut}`);
      await sleep(50);
    }
    const waiting = () => psql(`SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
      WHERE d.datname = '${db}' AND l.locktype = 'advisory' AND NOT l.granted`, { db: 'postgres' });
    const runs = [run(['migrate'], { env }), run(['migrate'], { env })];
    for (let i = 0; Number(await waiting()) < 2; i++) {
      assert.ok(i < 300 * SLOW, `both migrate runs should wait on the advisory lock (waiting: ${await waiting()})`);
      await sleep(50);
    }
    holder.stdin.end(`SELECT pg_advisory_unlock(${MIGRATE_LOCK_KEY});\n\\q\n`);
    const results = await Promise.all(runs);
    for (const r of results) assert.equal(r.code, 0, `migrate failed:\n${r.stdout}\n${r.stderr}`);
    const applied = results.map((r) => Number(r.stdout.match(/^(\d+) migration\(s\) applied$/m)?.[1])).sort((a, b) => a - b);
    assert.deepEqual(applied, [0, migrations.length], `one run applied all, the other none: ${results.map((r) => r.stdout.trim())}`);

    const rows = (await psql('SELECT version FROM schema_migrations ORDER BY version', { db })).trim().split('\n');
    assert.deepEqual(rows, migrations);
    // The schema is there and usable: a third run applies nothing.
    assert.equal((await psql("SELECT to_regclass('public.executions') IS NOT NULL", { db })).trim(), 't');
    const again = await run(['migrate'], { env });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /^0 migration\(s\) applied$/m);
  } finally {
    if (holder.exitCode === null) holder.kill('SIGKILL');
    await holderExit;
    await psql(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`, { db: 'postgres' }).catch(() => {});
  }
});

test('the runtime role alone: migrate refuses a fresh schema, and finds nothing pending once the owner migrated', async () => {
  // Deployments keep the owner's credentials for their migration step (docker-compose.yml's
  // setup, the Kubernetes init container); the server starts with the runtime role only.
  const db = `toolcage_it_cli_approle_${crypto.randomBytes(4).toString('hex')}`;
  const withDb = (url) => url.replace(/(^|\s)dbname=\S+/, `$1dbname=${db}`);
  const app = withDb(process.env.TOOLCAGE_DATABASE_URL);
  const appOnly = { TOOLCAGE_DATABASE_URL: app, TOOLCAGE_MIGRATE_DATABASE_URL: app };
  await psql(`CREATE DATABASE "${db}" OWNER toolcage_owner`, { db: 'postgres' });
  try {
    const fresh = await run(['migrate'], { env: appOnly });
    assert.equal(fresh.code, 1, 'the runtime role cannot create the schema');
    assert.match(fresh.stderr, /permission denied/);
    const owner = await run(['migrate'], { env: { TOOLCAGE_DATABASE_URL: app,
      TOOLCAGE_MIGRATE_DATABASE_URL: withDb(process.env.TOOLCAGE_MIGRATE_DATABASE_URL) } });
    assert.equal(owner.code, 0, owner.stderr);
    const again = await run(['migrate'], { env: appOnly });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /^0 migration\(s\) applied$/m);
    // and it still may not change the schema
    await assert.rejects(psql('CREATE TABLE intruder (x int)', { conninfo: app }), /permission denied/);
  } finally {
    await psql(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`, { db: 'postgres' }).catch(() => {});
  }
});

test('keys create and users add for one new tenant, started at once: every one succeeds, under one tenant', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-cli-keys-'));
  const keyFile = path.join(dir, 'master.key');
  fs.writeFileSync(keyFile, crypto.randomBytes(32), { mode: 0o600 });
  const env = { TOOLCAGE_MASTER_KEY_FILE: keyFile };
  const tenant = `it-cli-race-${crypto.randomBytes(4).toString('hex')}`;
  try {
    const m = await run(['migrate'], { env });
    assert.equal(m.code, 0, m.stderr);
    // Each insert of the new tenant waits for the first one's commit; before the fix the
    // losers' snapshot saw no tenant row and created nothing ("keys create" failed).
    const runs = [];
    for (let i = 0; i < 6; i++) runs.push(run(['keys', 'create', '--tenant', tenant, '--role', i % 2 ? 'agent' : 'reviewer'], { env }));
    for (let i = 0; i < 2; i++) {
      runs.push(run(['users', 'add', '--tenant', tenant, '--name', `race-${i}-${crypto.randomBytes(3).toString('hex')}`, '--role', 'reviewer'],
        { env, input: 'correct horse battery\n' }));
    }
    const results = await Promise.all(runs);
    for (const r of results) assert.equal(r.code, 0, `a concurrent create failed:\n${r.stdout}\n${r.stderr}`);
    const counts = (await psql(`SELECT (SELECT count(*) FROM tenants WHERE name = '${tenant}'),
      (SELECT count(*) FROM api_keys k JOIN tenants t ON t.id = k.tenant_id WHERE t.name = '${tenant}'),
      (SELECT count(*) FROM console_users u JOIN tenants t ON t.id = u.tenant_id WHERE t.name = '${tenant}')`)).trim();
    assert.equal(counts, '1|6|2', 'one tenant row, six keys and two console users in it');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

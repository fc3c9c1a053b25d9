// `cmake --install` and the systemd unit it installs (deploy/systemd/toolcage.service.in).
// The installed tree runs a sandbox from another directory (it finds toolcage-launcher and
// toolcage-init in ../libexec/toolcage); the unit passes `systemd-analyze verify` and keeps
// the hardening it documents, and none of the settings that would stop the launcher.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BUILD = path.dirname(path.resolve(ROOT, process.env.TOOLCAGE_BIN || 'build/toolcage'));
let prefix;
let unitText;

before(() => {
  prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-install-'));
  execFileSync('cmake', ['--install', BUILD, '--prefix', prefix], { stdio: 'pipe' });
  unitText = fs.readFileSync(path.join(prefix, 'lib/systemd/system/toolcage.service'), 'utf8');
});
after(() => fs.rmSync(prefix, { recursive: true, force: true }));

/** [Section] -> [[key, value], ...] */
function parseUnit(text) {
  const out = {};
  let sec = null;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = line.match(/^\[(\w+)\]$/);
    if (m) { sec = out[m[1]] = []; continue; }
    const i = line.indexOf('=');
    sec.push([line.slice(0, i), line.slice(i + 1)]);
  }
  return out;
}

test('cmake --install: the binary, toolcage-server, toolcage-init, the microvm programs and toolcage-launcher in libexec, the example policy and its schema', () => {
  for (const f of ['bin/toolcage', 'libexec/toolcage/toolcage-server', 'libexec/toolcage/toolcage-init', 'libexec/toolcage/toolcage-launcher',
    'libexec/toolcage/toolcage-vminit', 'libexec/toolcage/toolcage-vmrun',
    'share/toolcage/policy.json', 'share/toolcage/policy.schema.json', 'lib/systemd/system/toolcage.service']) {
    assert.ok(fs.existsSync(path.join(prefix, f)), `${f} installed`);
  }
  assert.ok(fs.statSync(path.join(prefix, 'libexec/toolcage/toolcage-init')).mode & 0o111);
  assert.ok(fs.statSync(path.join(prefix, 'libexec/toolcage/toolcage-launcher')).mode & 0o111);
  for (const p of ['toolcage-vminit', 'toolcage-vmrun', 'toolcage-init']) { // static: they run in a guest and in any sandbox root
    const l = spawnSync('ldd', [path.join(prefix, 'libexec/toolcage', p)], { encoding: 'utf8' });
    assert.match(l.stdout + l.stderr, /not a dynamic executable|statically linked/, p);
  }
  // PID 1 is built against musl where musl-gcc is (scripts/lib.sh installs it): no glibc start-up
  // (its CPU and cache detection, dozens of trapping CPUID instructions in a VM) in every sandbox.
  // A static glibc carries its tunables' names ("glibc.cpu.", "glibc.malloc.").
  if (spawnSync('sh', ['-c', 'command -v musl-gcc']).status === 0) {
    const init = fs.readFileSync(path.join(prefix, 'libexec/toolcage/toolcage-init')).toString('latin1');
    assert.ok(!/glibc\.(cpu|malloc)\./.test(init), 'toolcage-init is linked against glibc');
    assert.ok(fs.statSync(path.join(prefix, 'libexec/toolcage/toolcage-init')).size < 300_000);
  }
  // the launcher alone links only what it uses: none of the server's libraries (PostgreSQL,
  // HTTP, curl, archives) is loaded by the process that forks every sandbox
  const needed = execFileSync('ldd', [path.join(prefix, 'libexec/toolcage/toolcage-launcher')], { encoding: 'utf8' });
  for (const lib of ['libpq', 'libmicrohttpd', 'libcurl', 'libarchive', 'libpcre2', 'libgnutls']) {
    assert.ok(!needed.includes(lib), `toolcage-launcher needs ${lib}:\n${needed}`);
  }
  assert.ok(needed.trim().split('\n').length <= 12, needed);
  // and so does the command users run (exec, policy check, version): a one-shot exec loads
  // none of the server's libraries either, nor OpenSSL (only the egress proxy uses it, and
  // the launcher a one-shot exec forks runs none: sandbox/egress.h)
  const front = execFileSync('ldd', [path.join(prefix, 'bin/toolcage')], { encoding: 'utf8' });
  for (const lib of ['libpq', 'libmicrohttpd', 'libcurl', 'libarchive', 'libgnutls', 'libssl', 'libcrypto']) {
    assert.ok(!front.includes(lib), `bin/toolcage needs ${lib}:\n${front}`);
  }
  assert.ok(front.trim().split('\n').length <= 12, front);
});

test('the other commands run as libexec/toolcage/toolcage-server (argv unchanged), and only if others than root could not have written it',
  { skip: process.getuid() !== 0 && 'needs root' }, () => {
    const bin = path.join(prefix, 'bin/toolcage');
    const libexec = path.join(prefix, 'libexec/toolcage');
    const run = (...args) => spawnSync('strace', ['-f', '-qq', '-y', '-e', 'trace=execve,execveat', '-e', 'signal=none', bin, ...args],
      { cwd: os.tmpdir(), encoding: 'utf8' });
    // exec, policy and version: in the binary itself
    let r = run('policy', 'check', path.join(prefix, 'share/toolcage/policy.json'));
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^ok: \d+ tools/);
    assert.doesNotMatch(r.stderr, /toolcage-server/, r.stderr);
    // migrate: the server binary, exec'ed by the fd checked
    r = run('migrate', '--help');
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^usage: toolcage migrate/);
    assert.match(r.stderr, /execveat\(\d+<[^>]*\/libexec\/toolcage\/toolcage-server>, "", \[[^\]]*"migrate", "--help"\]/, r.stderr);
    // a folder others may write: refused, and nothing from it runs
    fs.chmodSync(libexec, 0o775);
    try {
      r = run('migrate', '--help');
    } finally {
      fs.chmodSync(libexec, 0o755);
    }
    assert.equal(r.status, 125, r.stdout);
    assert.match(r.stderr, /migrate runs in toolcage-server, which others than root could have written/);
    assert.doesNotMatch(r.stderr, /execveat\(\d+<[^>]*toolcage-server>/, r.stderr);
    // an unknown command: the usage, from the binary itself
    r = run('no-such-command');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /unknown command 'no-such-command'/);
  });

test('the installed binary runs a sandbox from anywhere (it finds toolcage-init and toolcage-launcher itself; without the launcher binary, or with one others may write, its own `launcher`; for a tool without network the launcher is a fork of it)',
  { skip: process.getuid() !== 0 && 'needs root' }, () => {
    const state = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-state-'));
    // the shell tool with a network allowlist: its launcher is exec'd (it starts the egress
    // proxy, which must inherit nothing of the CLI); the example's, without network, is forked
    const netPolicy = path.join(state, 'policy-net.json');
    const pol = JSON.parse(fs.readFileSync(path.join(prefix, 'share/toolcage/policy.json'), 'utf8'));
    pol.tools.shell.network = { allow: ['example.com:443'] };
    fs.writeFileSync(netPolicy, JSON.stringify(pol));
    const run = (policy = netPolicy) => {
      const r = spawnSync('strace', ['-f', '-qq', '-y', '-e', 'trace=execve,execveat', '-e', 'signal=none', path.join(prefix, 'bin/toolcage'),
        'exec', '--tool', 'shell', '--policy', policy, '--json'],
      { input: 'echo installed; ls /usr/libexec 2>&1 | head -n 0', cwd: os.tmpdir(), encoding: 'utf8',
        env: { ...process.env, TOOLCAGE_STATE_DIR: state, TOOLCAGE_INIT: '' } });
      assert.equal(r.status, 0, r.stderr);
      const res = JSON.parse(r.stdout);
      assert.equal(res.status, 'completed');
      assert.equal(res.stdout, 'installed\n');
      return r.stderr.split('\n').filter((l) => /execve(at)?\(/.test(l) && !l.includes('ENOENT')).join('\n');
    };
    const moved = path.join(prefix, 'launcher.away');
    const libexec = path.join(prefix, 'libexec/toolcage');
    try {
      // no network: no launcher is exec'd (a fork of the CLI), and toolcage-init is the one
      // beside the launcher binary an exec would have run, in libexec/toolcage/
      let execs = run(path.join(prefix, 'share/toolcage/policy.json'));
      assert.doesNotMatch(execs, /toolcage-launcher|"launcher", "--fd"/, execs);
      assert.match(execs, /execveat\(\d+<[^>]*\/libexec\/toolcage\/toolcage-init>, ""/, execs);
      // the launcher binary, exec'ed by the fd the server opened (and checked) at start
      execs = run();
      assert.match(execs, /execveat\(4<[^>]*\/libexec\/toolcage\/toolcage-launcher>, ""/, execs);
      // a launcher binary others may write: not trusted, the server's own binary is the launcher
      fs.chmodSync(path.join(libexec, 'toolcage-launcher'), 0o775);
      execs = run();
      fs.chmodSync(path.join(libexec, 'toolcage-launcher'), 0o755);
      assert.doesNotMatch(execs, /toolcage-launcher/, execs);
      // (bin/toolcage has no egress proxy, and no OpenSSL: it execs toolcage-server for it)
      assert.match(execs, /execveat\(\d+<[^>]*\/libexec\/toolcage\/toolcage-server>, "", \[[^\]]*"launcher", "--fd"/, execs);
      // PID 1 of every sandbox has no such fallback: a toolcage-init others may write, or in a
      // folder others may write, is refused, and no sandbox starts (it would run the program
      // with capabilities in the sandbox's namespaces, and load its seccomp filter)
      for (const [target, mode] of [[path.join(libexec, 'toolcage-init'), 0o775], [libexec, 0o775]]) {
        fs.chmodSync(target, mode);
        let r;
        try {
          r = spawnSync(path.join(prefix, 'bin/toolcage'), ['exec', '--tool', 'shell', '--policy', path.join(prefix, 'share/toolcage/policy.json')],
            { input: 'echo ran', cwd: os.tmpdir(), encoding: 'utf8', env: { ...process.env, TOOLCAGE_STATE_DIR: state, TOOLCAGE_INIT: '' } });
        } finally {
          fs.chmodSync(target, 0o755);
        }
        assert.notEqual(r.status, 0, r.stdout);
        assert.doesNotMatch(r.stdout, /ran/);
        assert.match(r.stderr, /toolcage-init: not trusted: it or its folder is writable by others than root/, r.stderr);
      }
      assert.match(run(path.join(prefix, 'share/toolcage/policy.json')), /toolcage-init/); // (and back)
      // not there at all: the same
      fs.renameSync(path.join(libexec, 'toolcage-launcher'), moved);
      execs = run();
      assert.doesNotMatch(execs, /toolcage-launcher/, execs);
      assert.match(execs, /execveat\(\d+<[^>]*\/libexec\/toolcage\/toolcage-server>, "", \[[^\]]*"launcher", "--fd"/, execs);
    } finally {
      fs.chmodSync(libexec, 0o755);
      if (fs.existsSync(moved)) fs.renameSync(moved, path.join(prefix, 'libexec/toolcage/toolcage-launcher'));
      fs.rmSync(state, { recursive: true, force: true });
    }
  });

test('the unit passes systemd-analyze verify', () => {
  const unit = path.join(prefix, 'lib/systemd/system/toolcage.service');
  const r = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stderr.trim(), '', 'no warnings');
});

test('the unit: ExecStart at the install prefix, state and configuration directories, restarts', () => {
  const u = parseUnit(unitText);
  const svc = new Map(u.Service);
  const all = (k) => u.Service.filter(([key]) => key === k).map(([, v]) => v);
  assert.equal(svc.get('ExecStart'), `${prefix}/bin/toolcage serve`);
  assert.equal(svc.get('StateDirectory'), 'toolcage');
  assert.equal(svc.get('StateDirectoryMode'), '0700');
  assert.equal(svc.get('ConfigurationDirectory'), 'toolcage');
  assert.equal(svc.get('Restart'), 'on-failure');
  assert.equal(svc.get('KillMode'), 'mixed');
  assert.equal(svc.get('LoadCredential'), 'master.key:/etc/toolcage/master.key');
  assert.ok(all('Environment').includes('TOOLCAGE_MASTER_KEY_FILE=%d/master.key'));
  assert.ok(all('Environment').includes('TOOLCAGE_STATE_DIR=/var/lib/toolcage'));
  assert.ok(all('Environment').includes('TOOLCAGE_POLICY=/etc/toolcage/policy.json'));
  assert.equal(svc.get('ExecReload'), '/bin/kill -HUP $MAINPID');
  assert.equal(new Map(u.Install).get('WantedBy'), 'multi-user.target');
});

test('the unit: the hardening that keeps the launcher working, and nothing that stops it', () => {
  const svc = new Map(parseUnit(unitText).Service);
  for (const [k, v] of Object.entries({
    Delegate: 'yes', NoNewPrivileges: 'yes', ProtectSystem: 'strict', ProtectHome: 'yes', PrivateTmp: 'yes',
    ProtectKernelModules: 'yes', LockPersonality: 'yes', RestrictRealtime: 'yes', RestrictSUIDSGID: 'yes',
    SystemCallArchitectures: 'native', UMask: '0077',
  })) assert.equal(svc.get(k), v, k);
  // Each of these breaks the sandboxes (the unit's header says why).
  for (const k of ['ProtectKernelTunables', 'ProtectKernelLogs', 'ProtectProc', 'ProcSubset', 'ProtectControlGroups',
    'ProtectHostname', 'PrivateUsers', 'RestrictNamespaces', 'MemoryDenyWriteExecute', 'User', 'DynamicUser']) {
    assert.ok(!svc.has(k), `${k} must not be set`);
  }
});

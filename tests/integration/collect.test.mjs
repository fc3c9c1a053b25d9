// POST /v1/execute with `collect`: files the program leaves in /workspace come back in
// `files`, text redacted like stdout, binaries byte-exact or withheld; symlinks are never
// followed; caps are flagged; bad patterns are refused. Also `pids_limit_hit` and
// `workspace_full`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setup, assertProblem } from './harness.mjs';
import { assertAbsent, pgDump } from './secrets-helpers.mjs';
import { hold, decide, waitFinished } from './fixtures/approval-helpers.mjs';

const LIMITS = {
  timeout_ms: { default: 20000, max: 60000 },
  cpu_ms: { default: 20000, max: 60000 },
  memory_mb: { default: 256, max: 512 },
  pids: { default: 64, max: 128 },
  output_bytes: { default: 1048576, max: 8388608 },
  file_size_mb: { default: 16, max: 64 },
  workspace_mb: { default: 16, max: 64 },
  tmp_mb: { default: 16, max: 64 },
  open_files: { default: 256, max: 1024 },
};

function tool(language, extra = {}) {
  const py = language === 'python';
  return {
    description: `collect test tool (${language})`,
    language,
    command: py ? ['/usr/bin/python3', '-I', '-B', '{code_file}'] : ['/bin/bash', '--noprofile', '--norc', '{code_file}'],
    code_file: py ? 'main.py' : 'main.sh',
    env: py ? { PYTHONDONTWRITEBYTECODE: '1' } : { PATH: '/usr/bin:/bin' },
    network: 'none',
    limits: LIMITS,
    prescreen: { rules: 'none' },
    ...extra,
  };
}

function writePolicy() {
  const policy = {
    version: 1,
    tools: {
      sh: tool('shell'),
      py: tool('python'),
      leaky: tool('shell', { credentials: [{ secret: 'collect-key', as: 'env', name: 'API_KEY' }] }),
      held: tool('shell', { tier: 'human_approve' }),
    },
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-collect-policy-'));
  const file = path.join(dir, 'policy.json');
  fs.writeFileSync(file, JSON.stringify(policy, null, 2));
  return file;
}

const server = setup('collect', { policy: writePolicy(), freshDatabase: true });

// No '/', '+' or '=' so that the value also makes a plain file name.
const SECRET = `ck-${crypto.randomBytes(16).toString('hex')}`;
const bodies = []; // every response body of this file, scanned for the secret at the end

async function run(payload, expect = 200) {
  const res = await server.execute(payload, { expect });
  bodies.push(res.text);
  return res.json;
}

const byPath = (r) => Object.fromEntries(r.files.map((f) => [f.path, f]));
const auditOf = async (id, action) =>
  JSON.parse(await server.sql(`SELECT record::text FROM audit_log WHERE record->>'execution_id' = '${id}'` +
    ` AND record->>'action' = '${action}'`));

test('a text file comes back as utf8, with its size; the audit record names it without its content', async () => {
  const text = 'héllo ✓ collected\nline two\n';
  const r = await run({
    tool: 'sh',
    code: `printf '%s' '${text}' > out.txt; echo done`,
    collect: ['out.txt'],
  });
  assert.equal(r.status, 'completed', r.stderr);
  assert.equal(r.stdout, 'done\n');
  assert.deepEqual(r.files, [{
    path: 'out.txt', size: Buffer.byteLength(text), truncated: false, encoding: 'utf8', content: text, withheld: false,
  }]);
  assert.equal(r.files_truncated, false);
  assert.equal(r.pids_limit_hit, false);
  assert.equal(r.workspace_full, false);

  // The stored execution carries the same files.
  const stored = await server.request('GET', `/v1/executions/${r.id}`, { key: server.keys.agent });
  assert.equal(stored.status, 200);
  assert.deepEqual(stored.json.files, r.files);

  // Audit: the request's patterns, then names and sizes of what came back, never content.
  const exec = await auditOf(r.id, 'execute');
  assert.deepEqual(exec.params.collect, ['out.txt']);
  const done = await auditOf(r.id, 'execution.complete');
  assert.deepEqual(done.files, [{ path: 'out.txt', size: Buffer.byteLength(text), truncated: false, encoding: 'utf8', withheld: false }]);
  assert.ok(!JSON.stringify(done).includes('collected'), 'the audit record holds the file content');
});

test('a binary file comes back byte-exact as base64; a request without collect gets no files', async () => {
  const input = Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 7) % 256));
  const r = await run({
    tool: 'py',
    code: [
      'data = open("in.bin", "rb").read()',
      'open("out.bin", "wb").write(bytes(reversed(data)))',
      'open("nul.txt", "wb").write(b"text\\x00with a NUL")',
      'open("latin1.txt", "wb").write("café".encode("latin-1"))',
    ].join('\n'),
    files: [{ path: 'in.bin', content: input.toString('base64'), encoding: 'base64' }],
    collect: ['*.bin', '*.txt'],
  });
  assert.equal(r.status, 'completed', r.stderr);
  const f = byPath(r);
  assert.deepEqual(Object.keys(f), ['in.bin', 'latin1.txt', 'nul.txt', 'out.bin'], 'sorted by path');
  assert.equal(f['in.bin'].encoding, 'base64');
  assert.ok(Buffer.from(f['in.bin'].content, 'base64').equals(input));
  assert.ok(Buffer.from(f['out.bin'].content, 'base64').equals(Buffer.from(input).reverse()));
  assert.equal(f['out.bin'].size, 512);
  // not UTF-8, or a NUL: binary, whatever the name says
  assert.equal(f['nul.txt'].encoding, 'base64');
  assert.equal(Buffer.from(f['nul.txt'].content, 'base64').toString('latin1'), 'text\x00with a NUL');
  assert.equal(f['latin1.txt'].encoding, 'base64');
  assert.deepEqual(Buffer.from(f['latin1.txt'].content, 'base64'), Buffer.from([0x63, 0x61, 0x66, 0xe9]));
  for (const x of r.files) assert.equal(x.withheld, false);

  const plain = await run({ tool: 'sh', code: 'echo x > a.txt' });
  assert.deepEqual(plain.files, []);
  assert.equal(plain.files_truncated, false);
});

test('glob patterns: * crosses directories, a leading dot must be explicit, one entry per file', async () => {
  const r = await run({
    tool: 'sh',
    code: [
      'mkdir -p sub/deep logs',
      'for f in a.txt sub/b.txt sub/deep/c.txt .hidden.txt d.log e.txt.bak logs/x.log report-1.csv report-22.csv; do',
      '  echo "$f" > "$f"',
      'done',
    ].join('\n'),
    collect: ['*.txt', 'logs/*', 'report-?.csv', '*.txt'],
  });
  assert.equal(r.status, 'completed', r.stderr);
  assert.deepEqual(r.files.map((f) => f.path), ['a.txt', 'logs/x.log', 'report-1.csv', 'sub/b.txt', 'sub/deep/c.txt']);
  for (const f of r.files) assert.equal(f.content, `${f.path}\n`);

  const dot = await run({ tool: 'sh', code: 'echo h > .hidden.txt; echo v > visible.txt', collect: ['.*'] });
  assert.deepEqual(dot.files.map((f) => f.path), ['.hidden.txt']);
  const none = await run({ tool: 'sh', code: 'echo v > visible.txt', collect: ['nothing-*'] });
  assert.deepEqual(none.files, []);
});

test('a leased secret in a collected file is redacted (text) or the file withheld (binary), path included', async () => {
  const put = await server.request('PUT', '/v1/secrets/collect-key', {
    key: server.keys.admin, json: { value: SECRET, allowed_tools: ['leaky'] } });
  assert.equal(put.status, 201, put.text);
  const input = Buffer.from('PNG-ish\x00\x01\x02 clean bytes \xff', 'latin1');
  const r = await run({
    tool: 'leaky',
    code: [
      'printf "token=%s\\nafter\\n" "$API_KEY" > secret.txt',
      'printf "%s" "$API_KEY" | base64 -w0 > enc.txt',
      'printf "%s" "$API_KEY" | xxd -p | tr -d "\\n" > hex.txt',
      'printf "\\x00\\x01%s\\x02\\xff" "$API_KEY" > secret.bin',
      'printf "\\x00\\xfe" > enc.bin; printf "%s" "$API_KEY" | base64 -w0 >> enc.bin',
      'echo named > "$API_KEY.txt"',
      'echo "ok ${#API_KEY}"',
    ].join('\n'),
    files: [{ path: 'clean.bin', content: input.toString('base64'), encoding: 'base64' }],
    collect: ['*.txt', '*.bin'],
  });
  assert.equal(r.status, 'completed', r.stderr);
  assert.equal(r.stdout, `ok ${SECRET.length}\n`, 'the secret reached the sandbox');
  const f = byPath(r);
  assert.deepEqual(Object.keys(f).sort(), ['[REDACTED:secret].txt', 'clean.bin', 'enc.bin', 'enc.txt', 'hex.txt', 'secret.bin', 'secret.txt']);
  assert.equal(f['secret.txt'].encoding, 'utf8');
  assert.equal(f['secret.txt'].content, 'token=[REDACTED:secret]\nafter\n');
  assert.equal(f['secret.txt'].size, `token=${SECRET}\nafter\n`.length, 'size is the file on disk');
  assert.equal(f['enc.txt'].content, '[REDACTED:secret]');
  assert.equal(f['hex.txt'].content, '[REDACTED:secret]');
  for (const name of ['secret.bin', 'enc.bin']) {
    assert.equal(f[name].encoding, 'base64', name);
    assert.equal(f[name].withheld, true, name);
    assert.equal(f[name].content, '', name);
    assert.ok(f[name].size > SECRET.length, name);
  }
  assert.equal(f['[REDACTED:secret].txt'].content, 'named\n');
  // a binary without a match is untouched
  assert.equal(f['clean.bin'].withheld, false);
  assert.ok(Buffer.from(f['clean.bin'].content, 'base64').equals(input));
  // 3 text files + 2 withheld binaries + 1 path
  assert.ok(r.redactions.secret >= 6, `redactions ${JSON.stringify(r.redactions)}`);
  assertAbsent(JSON.stringify(r), [SECRET], 'the execution');

  const done = await auditOf(r.id, 'execution.complete');
  assert.equal(done.files.find((x) => x.path === 'secret.bin').withheld, true);
  assertAbsent(JSON.stringify(done), [SECRET], 'the audit record');
});

test('symlinks planted in the workspace are not followed: nothing of /etc/passwd comes back', async () => {
  const hostPasswd = fs.readFileSync('/etc/passwd', 'utf8');
  const r = await run({
    tool: 'sh',
    code: [
      'ln -s /etc/passwd passwd.txt',
      'ln -s /etc etc',
      'ln -s / root',
      'mkdir d; ln -s ../passwd.txt d/p.txt; ln -s /etc/passwd d/abs.txt',
      'ln /etc/passwd hard.txt 2>/dev/null || echo "hardlink refused"',
      'mkfifo fifo.txt',
      'echo mine > real.txt',
      'head -n1 passwd.txt',  // the link works inside the sandbox: it was a real attempt
      'readlink d/abs.txt',
    ].join('\n'),
    collect: ['*', 'etc/passwd', 'root/etc/*', 'd/*', '*.txt'],
  });
  assert.equal(r.status, 'completed', r.stderr);
  assert.match(r.stdout, /^hardlink refused\nroot:x:0:0:/, 'the links resolved inside the sandbox');
  assert.match(r.stdout, /\n\/etc\/passwd\n$/);
  // only the one regular file the program wrote, and main.sh (the code file)
  assert.deepEqual(r.files.map((f) => f.path), ['main.sh', 'real.txt']);
  assert.equal(byPath(r)['real.txt'].content, 'mine\n');
  const all = JSON.stringify(r.files);
  for (const needle of ['root:x:0:0', 'sandbox:x:1000', 'nologin', hostPasswd.split('\n')[0]]) {
    assert.ok(!all.includes(needle), `collected files contain ${JSON.stringify(needle)}`);
  }
  // nor in base64 form
  assert.ok(!all.includes(Buffer.from('root:x:0:0').toString('base64').slice(0, 12)));
});

// Races and depth: a process left behind keeps swapping race.txt between a symlink to
// /etc/passwd and a regular file while the program exits; a chain 40 directories deep hides a
// match. The launcher collects only after every process of the sandbox is gone (reap, then
// collect), opens with O_NOFOLLOW and checks what it opened, and walks at most 32 levels.
test('a process racing symlinks against the collector, and a tree deeper than the walk: nothing of the host, the cut said', async () => {
  const hostPasswd = fs.readFileSync('/etc/passwd', 'utf8').split('\n')[0];
  // the racer's command line names this run (the other lane runs this file beside this one)
  const mark = `racer-${crypto.randomBytes(6).toString('hex')}`;
  const t0 = performance.now();
  const r = await run({
    tool: 'sh',
    code: [
      'echo regular > race.txt',
      `( setsid sh -c 'while :; do : ${mark}; ln -sf /etc/passwd r1 && mv -f r1 race.txt; echo regular > r2 && mv -f r2 race.txt; done' </dev/null >/dev/null 2>&1 & )`,
      'p=.; for i in $(seq 40); do p=$p/d; done; mkdir -p $p && echo deep > $p/leaf.txt',
      'sleep 0.3',
      'echo started',
    ].join('\n'),
    collect: ['race.txt', '**/leaf.txt', '*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/*/leaf.txt'],
  });
  const ms = performance.now() - t0;
  assert.equal(r.status, 'completed', r.stderr);
  assert.equal(r.stdout, 'started\n');
  const files = byPath(r);
  // race.txt is either the regular file (collected, its own content) or was a link then (skipped)
  if (files['race.txt']) assert.equal(files['race.txt'].content, 'regular\n');
  assert.ok(!Object.keys(files).some((p) => p.endsWith('leaf.txt')), 'a file 41 levels down was collected');
  assert.equal(r.files_truncated, true, 'the walk stopped at its depth without saying so');
  assert.ok(!JSON.stringify(r.files).includes(hostPasswd), 'a host file came back');
  assert.ok(ms < 15_000, `collect took ${ms.toFixed(0)} ms`);
  // The racer is gone with its sandbox: no process of it is left on the host.
  const racers = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((d) => {
    try { return fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(mark); } catch { return false; }
  });
  assert.deepEqual(racers, [], 'the racing process outlived its sandbox');
});

test('caps: a file over 1 MiB is cut and flagged; a cut inside a character keeps the text utf8', async () => {
  const r = await run({
    tool: 'py',
    code: [
      'open("big.txt", "w").write("a" * (1024 * 1024 + 500000))',
      'open("cut.txt", "w").write("a" * (1024 * 1024 - 1) + "\\u2713" * 10)',
      'open("small.txt", "w").write("small")',
    ].join('\n'),
    limits: { output_bytes: 8388608 },
    collect: ['*.txt'],
  });
  assert.equal(r.status, 'completed', r.stderr);
  const f = byPath(r);
  assert.equal(f['big.txt'].truncated, true);
  assert.equal(f['big.txt'].size, 1024 * 1024 + 500000);
  assert.equal(f['big.txt'].content.length, 1024 * 1024);
  assert.equal(f['cut.txt'].truncated, true);
  assert.equal(f['cut.txt'].encoding, 'utf8', 'a character cut at the cap is dropped, not a reason to go binary');
  assert.equal(f['cut.txt'].content, 'a'.repeat(1024 * 1024 - 1));
  assert.equal(f['small.txt'].truncated, false);
  assert.equal(r.files_truncated, false);
});

test('caps: all files together stay within output_bytes', async () => {
  const r = await run({
    tool: 'sh',
    code: 'head -c 3000 /dev/zero | tr "\\0" x > one.txt; head -c 3000 /dev/zero | tr "\\0" y > two.txt',
    limits: { output_bytes: 4096 },
    collect: ['*.txt'],
  });
  assert.equal(r.status, 'completed', r.stderr);
  assert.equal(r.files.length, 2);
  const total = r.files.reduce((n, f) => n + f.content.length, 0);
  assert.equal(total, 4096);
  assert.deepEqual(r.files.map((f) => f.truncated).sort(), [false, true]);
  for (const f of r.files) {
    assert.equal(f.size, 3000);
    assert.equal(f.truncated, f.content.length < 3000);
  }
});

test('caps: at most 256 files, and files_truncated says more matched', async () => {
  const r = await run({
    tool: 'sh',
    code: 'mkdir many; for i in $(seq 1 300); do echo "$i" > "many/f$i.txt"; done; ls many | wc -l',
    collect: ['many/*'],
  });
  assert.equal(r.status, 'completed', r.stderr);
  assert.equal(r.stdout, '300\n');
  assert.equal(r.files.length, 256);
  assert.equal(r.files_truncated, true);
  for (const f of r.files) assert.equal(f.content, `${f.path.match(/f(\d+)\.txt$/)[1]}\n`);
  const exact = await run({
    tool: 'sh',
    code: 'mkdir many; for i in $(seq 1 256); do echo "$i" > "many/f$i.txt"; done',
    collect: ['many/*'],
  });
  assert.equal(exact.files.length, 256);
  assert.equal(exact.files_truncated, false, 'exactly the cap is not truncation');
});

test('invalid collect patterns are refused with 400 validation, naming the entry', async () => {
  const cases = [
    [['/etc/passwd'], 'collect[0]'],
    [['ok', '../outside'], 'collect[1]'],
    [['a/../../b'], 'collect[0]'],
    [['..'], 'collect[0]'],
    [['sub/..'], 'collect[0]'],
    [[''], 'collect[0]'],
    [['x'.repeat(257)], 'collect[0]'],
    [['a\u0000b'], 'collect[0]'],
    [[5], 'collect[0]'],
    [[], 'collect'],
    [Array.from({ length: 33 }, (_, i) => `f${i}`), 'collect'],
    ['*.txt', 'collect'],
    [{ pattern: '*' }, 'collect'],
  ];
  for (const [collect, where] of cases) {
    const res = await server.request('POST', '/v1/execute', {
      key: server.keys.agent, json: { tool: 'sh', code: 'echo ran > ran.txt', collect } });
    const p = assertProblem(res, 400, 'validation');
    assert.ok(p.errors.some((e) => e.path === where), `${JSON.stringify(collect).slice(0, 60)}: ${JSON.stringify(p.errors)}`);
  }
  // the edges that are fine
  const ok = await run({ tool: 'sh', code: 'echo x > ..x', collect: ['x'.repeat(256), '..x', ...Array.from({ length: 30 }, (_, i) => `n${i}`)] });
  assert.deepEqual(ok.files.map((f) => f.path), ['..x']);
});

test('collect is part of an approval payload and the approved run returns the files', async () => {
  const { json: held } = await hold(server, 'echo approved > result.txt', { tool: 'held', extra: { collect: ['result.txt'] } });
  const a = await server.request('GET', `/v1/approvals/${held.approval_id}`, { key: server.keys.reviewer });
  assert.equal(a.status, 200, a.text);
  assert.deepEqual(a.json.payload.collect, ['result.txt']);
  const d = await decide(server, held.approval_id, 'approve');
  assert.equal(d.status, 200, d.text);
  const e = await waitFinished(server, held.id, 60);
  assert.equal(e.status, 'completed', JSON.stringify(e).slice(0, 500));
  assert.deepEqual(e.files.map((f) => [f.path, f.content]), [['result.txt', 'approved\n']]);
});

test('pids_limit_hit: a fork bomb meets the pids limit and the result says so', async () => {
  const r = await run({
    tool: 'py',
    code: [
      'import errno, os, time',
      'n = 0',
      'while True:',
      '    try:',
      '        pid = os.fork()',
      '    except OSError as e:',
      '        print(f"stopped {errno.errorcode[e.errno]} after {n} forks", flush=True)',
      '        break',
      '    if pid == 0:',
      '        time.sleep(60)',
      '        os._exit(0)',
      '    n += 1',
    ].join('\n'),
    limits: { pids: 16 },
  });
  assert.equal(r.status, 'completed', r.stderr);
  const m = r.stdout.match(/^stopped EAGAIN after (\d+) forks$/m);
  assert.ok(m, `stdout: ${r.stdout}`);
  assert.ok(Number(m[1]) < 16, `${m[1]} forks with pids 16`);
  // the host decides (the launcher's report at start), not the result under test
  if ((server.hostReport().controllers || []).includes('pids')) {
    assert.match(r.enforced.pids, /cgroup/);
    assert.equal(r.pids_limit_hit, true, `enforced.pids ${r.enforced.pids}`);
  } else {
    assert.equal(r.pids_limit_hit, false, 'without the pids cgroup nothing counts refused forks');
  }
  const calm = await run({ tool: 'sh', code: 'for i in 1 2 3; do (true) & done; wait', limits: { pids: 16 } });
  assert.equal(calm.pids_limit_hit, false);
});

test('workspace_full: filling /workspace is reported, and what was written can still be collected', async () => {
  const r = await run({
    tool: 'sh',
    code: [
      'err=$(dd if=/dev/zero of=/workspace/fill.bin bs=1M count=16 2>&1 >/dev/null | grep -o "No space left on device" | head -n1)',
      'echo "dd: $err"',
      'echo "avail=$(df --output=avail /workspace | tail -n1 | tr -d " ")"',
    ].join('\n'),
    limits: { workspace_mb: 2 },
    collect: ['fill.bin'],
  });
  assert.equal(r.status, 'completed', r.stderr);
  assert.match(r.stdout, /^dd: No space left on device$/m);
  assert.match(r.stdout, /^avail=0$/m);
  assert.equal(r.workspace_full, true);
  assert.equal(r.files.length, 1);
  assert.ok(r.files[0].size > 1024 * 1024 && r.files[0].size <= 2 * 1024 * 1024, `size ${r.files[0].size}`);
  assert.equal(r.files[0].truncated, true);
  const calm = await run({ tool: 'sh', code: 'echo small > s.txt', limits: { workspace_mb: 2 } });
  assert.equal(calm.workspace_full, false);
});

test('the secret appears in no response and nowhere in the database', async () => {
  assertAbsent(bodies.join('\n'), [SECRET], 'a response body');
  const dump = await pgDump(server);
  assert.ok(dump.includes('[REDACTED:secret]'), 'the dump holds the redacted result');
  assertAbsent(dump, [SECRET], 'pg_dump');
});

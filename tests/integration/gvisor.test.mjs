// The gvisor backend through the service: the same request and result schema as the native
// backend (every response is validated against the OpenAPI document by the harness), the
// limits held, and nothing of runsc left behind. The attack corpus (attacks.test.mjs) runs
// against this backend too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { setup, SLOW } from './harness.mjs';

const server = setup('gvisor');

test('runsc is installed (scripts/lib.sh installs it) and the example policy has a gvisor tool', async () => {
  assert.ok(['/usr/bin/runsc', '/usr/sbin/runsc', '/usr/local/bin/runsc'].some((p) => fs.existsSync(p)));
  const res = await server.request('GET', '/v1/tools', { key: server.keys.agent });
  const t = res.json.tools.find((x) => x.name === 'python-gvisor');
  assert.ok(t, 'python-gvisor listed');
  assert.equal(t.backend, 'gvisor');
});

test('python under gVisor: output, exit code, stdin, and which mechanism held each limit', async () => {
  const { json: r } = await server.execute({
    tool: 'python-gvisor',
    code: 'import os, sys\nprint(6*7)\nprint(sys.stdin.read().upper(), end="")\nprint(os.uname().sysname, os.getuid() != 0)\nsys.exit(4)',
    stdin: 'from stdin\n',
  });
  assert.equal(r.status, 'failed');
  assert.equal(r.exit_code, 4);
  assert.equal(r.signal, null);
  assert.equal(r.stdout, '42\nFROM STDIN\nLinux True\n');
  assert.equal(r.tool, 'python-gvisor');
  assert.deepEqual(r.policy_violations, []);
  assert.equal(r.enforced.pids, 'rlimit', 'gVisor enforces RLIMIT_NPROC itself');
  assert.equal(r.enforced.timeout_ms, 'launcher');
  assert.equal(r.enforced.tmp_mb, 'tmpfs');
  assert.match(r.enforced.memory_mb, /^(cgroup_v1|cgroup_v2|rlimit)$/);
  // gVisor's kernel answers the program: its dmesg is gVisor's, not the host's
  const { json: k } = await server.execute({
    tool: 'python-gvisor',
    code: 'import subprocess\nprint(subprocess.run(["/usr/bin/dmesg"], capture_output=True, text=True).stdout[:400])',
  });
  assert.equal(k.status, 'completed');
  assert.match(k.stdout, /gVisor/, 'the sandbox kernel is gVisor');
});

test('gVisor: the wall-clock timeout kills the whole sandbox and reports it', async () => {
  const t0 = Date.now();
  const { json: r } = await server.execute({
    tool: 'python-gvisor',
    code: 'import os, time\nif os.fork() == 0:\n    time.sleep(60)\ntime.sleep(60)',
    limits: { timeout_ms: 1500 },
  });
  assert.equal(r.status, 'timeout');
  assert.equal(r.killed_reason, 'timeout');
  assert.equal(r.signal, 'SIGKILL');
  assert.ok(Date.now() - t0 < 15_000 * SLOW, 'answered soon after the timeout');
  // no runsc process survives its sandbox
  const left = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let cmd = '';
    try { cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8'); } catch { continue; }
    if (cmd.includes(r.id)) left.push(`${d} ${cmd.replaceAll('\0', ' ')}`);
  }
  assert.deepEqual(left, [], 'runsc processes of this execution left behind');
});

test('gVisor: a memory bomb is killed by the cgroup that holds the whole sandbox', async () => {
  const { json: r } = await server.execute({
    tool: 'python-gvisor',
    code: 'b = bytearray(1 << 30)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\nprint("survived")',
    limits: { memory_mb: 128 },
  });
  assert.equal(r.status, 'killed');
  assert.equal(r.killed_reason, 'memory');
  assert.doesNotMatch(r.stdout, /survived/);
  assert.ok(r.memory_peak_bytes <= 128 * 1024 * 1024 + 4096, `memory_peak_bytes ${r.memory_peak_bytes}`);
});

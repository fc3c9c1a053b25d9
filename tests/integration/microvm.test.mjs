// The microvm backend through the service (docs/sandbox.md, microvm backend): the example
// policy's python-microvm tool, the same request and result schema as the other backends
// (every response is validated against the OpenAPI document by the harness), the guest's
// kernel and limits named in the result, and nothing of qemu left on the host afterwards.
// The attack corpus (attacks.test.mjs) runs its host-evidence attacks against it too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { setup, SLOW, statFields } from './harness.mjs';

const server = setup('microvm');

/**
 * qemu processes of this server (its descendants: the launcher's guests), not the host's: the
 * other lane's calls, and the cgroup v2 guest, run qemu beside this file, starting and ending
 * as they will (a host-wide count once saw one end during the call: 1 before, 0 after).
 */
function qemus() {
  const parent = new Map();
  const isQemu = new Set();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      parent.set(Number(d), Number(statFields(d)[1]));
      if (fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').startsWith('/usr/bin/qemu-system-x86_64\0')) isQemu.add(Number(d));
    } catch { /* gone */ }
  }
  const ours = (pid) => {
    for (let p = pid, hops = 0; p > 1 && hops < 64; p = parent.get(p) ?? 0, hops++) if (p === server.proc.pid) return true;
    return false;
  };
  return [...isQemu].filter(ours).length;
}

test('qemu and a guest kernel are installed (scripts/lib.sh) and the example policy has a microvm tool', async () => {
  assert.ok(fs.existsSync('/usr/bin/qemu-system-x86_64'), 'qemu-system-x86 not installed');
  const res = await server.request('GET', '/v1/tools', { key: server.keys.agent });
  const t = res.json.tools.find((x) => x.name === 'python-microvm');
  assert.ok(t, 'python-microvm listed');
  assert.equal(t.backend, 'microvm');
});

test('python in a guest: output, exit code, stdin, a kernel of its own, and who held each limit', { timeout: 300_000 * SLOW }, async () => {
  const before = qemus();
  // the guest's qemu is seen among the server's processes while the call runs (so that the
  // count after it, which must be back to before, counts what it should)
  let most = before;
  const look = setInterval(() => { most = Math.max(most, qemus()); }, 100);
  const { json: r } = await server.execute({
    tool: 'python-microvm',
    code: 'import os, sys\nprint(6*7)\nprint(sys.stdin.read().upper(), end="")\n'
      + 'print(os.getuid(), open("/proc/1/cmdline").read().strip("\\0"), sorted(os.listdir("/sys/class/net")))\n'
      + 'print(sorted(os.listdir("/etc")), os.path.exists("/boot"))\nsys.exit(4)',
    stdin: 'from stdin\n',
  }, { timeout: 240_000 * SLOW }).finally(() => clearInterval(look));
  assert.ok(most > before, 'no qemu process of this server was seen during the call');
  assert.equal(r.status, 'failed', JSON.stringify(r));
  assert.equal(r.exit_code, 4);
  assert.equal(r.signal, null);
  // the guest's own /etc (nothing of the host's), no /boot, no network device but loopback
  assert.equal(r.stdout, "42\nFROM STDIN\n1000 /init ['lo']\n"
    + "['group', 'hostname', 'hosts', 'nsswitch.conf', 'passwd', 'resolv.conf'] False\n");
  assert.equal(r.tool, 'python-microvm');
  assert.deepEqual(r.policy_violations, [], 'qemu\'s own probes are not the call\'s violations');
  assert.match(r.enforced.isolation, /^microvm_(tcg|kvm)$/);
  assert.equal(r.enforced.memory_mb, 'guest_cgroup_v2');
  assert.equal(r.enforced.pids, 'guest_cgroup_v2');
  assert.equal(r.enforced.timeout_ms, 'launcher');
  assert.equal(r.enforced.tmp_mb, 'guest_tmpfs');
  // the audit record is the same as for any execution
  const a = await server.request('GET', `/v1/executions/${r.id}`, { key: server.keys.agent });
  assert.equal(a.status, 200);
  assert.equal(a.json.status, 'failed');
  // qemu is gone with the call
  for (let i = 0; i < 100 && qemus() > before; i++) await new Promise((res) => setTimeout(res, 100));
  assert.equal(qemus(), before, 'a qemu process outlived its call');
});

test('a request for the microvm tool with limits above its policy is refused like any other', async () => {
  const res = await server.request('POST', '/v1/execute', {
    key: server.keys.agent,
    json: { tool: 'python-microvm', code: 'print(1)', limits: { timeout_ms: 120_001 } },
  });
  assert.equal(res.status, 422);
  assert.equal(res.json.type.endsWith('limit-exceeds-policy'), true, res.text);
});

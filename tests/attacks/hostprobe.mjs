// Host probes for the attack corpus. Some attacks depend on what the host kernel offers at
// all (int 0x80 needs the kernel's i386 emulation, which a host may have switched off). Such
// a file says what the attack shows when it runs unsandboxed:
//   # probe: stdout~=^after$                the attack, run unsandboxed, reaches this
//   # probe-refused-expect: stdout!~=after  asserted instead of the expect lines when it does not
// The probe is the attack's own code, run once, unsandboxed, as this test's user with a short
// timeout: only files whose unsandboxed run is harmless declare one. When the host refuses,
// the sandboxed run is still made and still has to show that the attack failed.
import { spawnSync } from 'node:child_process';
import os from 'node:os';

const cache = new Map();

/** Run `code` (python or shell by `file`'s extension) unsandboxed; the result as execute names it. */
export function probeRun(file, code) {
  if (cache.has(file)) return cache.get(file);
  const cmd = file.endsWith('.py') ? ['python3', ['-I', '-c', code]] : ['/bin/sh', ['-c', code]];
  const p = spawnSync(cmd[0], cmd[1], { encoding: 'utf8', timeout: 10_000, input: '' });
  const r = {
    stdout: p.stdout || '',
    stderr: p.stderr || '',
    exit_code: p.status,
    signal: p.signal || null,
    signal_number: p.signal ? os.constants.signals[p.signal] : null,
  };
  cache.set(file, r);
  return r;
}

/**
 * The expectations to assert for `meta` on the native backend: its expect lines, or, when its
 * probe shows the host itself refuses the attack, its probe-refused-expect lines. `check(r, e)`
 * returns true when result r meets expectation e. Returns { expect, refused, probe }.
 */
export function hostExpect(meta, check) {
  if (!meta.probe.length) return { expect: meta.expect, refused: false, probe: null };
  const probe = probeRun(meta.file, meta.code);
  const allowed = meta.probe.every((e) => check(probe, e));
  if (allowed) return { expect: meta.expect, refused: false, probe };
  if (!meta.probeRefused.length) throw new Error(`${meta.file}: the host refuses the attack and the file has no probe-refused-expect line`);
  return { expect: meta.probeRefused, refused: true, probe };
}

// The README's first command: `scripts/run` sets up a private PostgreSQL, prints the demo API
// keys and the console logins, and serves. Run as a user would (its own var/ directory and
// port), then: the README's curl works with the printed agent key, the printed reviewer login
// signs in to the console, Ctrl-C (SIGINT) stops the server and the cluster, and a second run
// finds the same keys and logins.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const VAR = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-run-'));
after(() => fs.rmSync(VAR, { recursive: true, force: true }));

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

/** p, or instead after ms; the timer goes with it (a pending one kept this process alive for
 * its whole bound after the last test). */
async function within(p, ms, instead) {
  let timer;
  try {
    return await Promise.race([p, new Promise((r) => { timer = setTimeout(() => r(instead), ms); })]);
  } finally {
    clearTimeout(timer);
  }
}

/** scripts/run until it listens; returns {proc, out(), base, exited}. */
async function start() {
  const port = await freePort();
  const proc = spawn(path.join(ROOT, 'scripts/run'), [], {
    cwd: ROOT, detached: true, stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TOOLCAGE_RUN_VAR: VAR, TOOLCAGE_LISTEN: `127.0.0.1:${port}`, TOOLCAGE_LOG_LEVEL: 'warn' },
  });
  let out = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { out += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + 300_000;
  while (!/Listening on /.test(out)) {
    assert.ok(Date.now() < deadline, `scripts/run did not listen:\n${out}`);
    const done = await within(exited, 200, null);
    assert.equal(done, null, `scripts/run exited ${JSON.stringify(done)}:\n${out}`);
  }
  // the server itself prints nothing more once ready: wait for /readyz
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const ok = await fetch(`${base}/readyz`).then((r) => r.status === 200, () => false);
    if (ok) break;
    assert.ok(i < 100, `not ready:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { proc, out: () => out, base, exited };
}

async function stop(run) {
  process.kill(-run.proc.pid, 'SIGINT'); // Ctrl-C reaches the whole foreground group
  const e = await within(run.exited, 60_000, 'timeout');
  assert.notEqual(e, 'timeout', `scripts/run did not stop:\n${run.out()}`);
  assert.ok(!fs.existsSync(path.join(VAR, 'pg/data/postmaster.pid')), 'the cluster is still running');
}

const field = (out, re) => { const m = out.match(re); assert.ok(m, `${re} not in:\n${out}`); return m[1]; };

test('scripts/run: keys and console logins that work, a clean stop, the same ones next time', { timeout: 600_000 }, async () => {
  const run = await start();
  let keys;
  try {
    const out = run.out();
    keys = {
      agent: field(out, /^ {2}agent +(tc_\S+)$/m),
      reviewerLogin: field(out, /^ {2}demo-reviewer +(\S+)/m),
      auditorLogin: field(out, /^ {2}demo-auditor +(\S+)/m),
    };
    assert.match(out, new RegExp(`Web console: ${run.base}/console/`));
    // The README's curl.
    const res = await fetch(`${run.base}/v1/execute`, {
      method: 'POST', headers: { authorization: `Bearer ${keys.agent}` }, body: '{"tool":"python","code":"print(6*7)"}',
    });
    const body = await res.json();
    assert.equal(res.status, 200, JSON.stringify(body));
    assert.equal(body.stdout, '42\n');
    // The reviewer signs in with what was printed, and reaches the approvals page.
    for (const [name, pw] of [['demo-reviewer', keys.reviewerLogin], ['demo-auditor', keys.auditorLogin]]) {
      const form = await fetch(`${run.base}/console/signin`);
      const pre = form.headers.getSetCookie().find((c) => c.startsWith('tc_signin=')).split(';')[0];
      const csrf = (await form.text()).match(/name="csrf" value="([^"]+)"/)[1];
      const signin = await fetch(`${run.base}/console/signin`, {
        method: 'POST', redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: pre },
        body: new URLSearchParams({ csrf, name, password: pw }).toString(),
      });
      assert.equal(signin.status, 303, `${name}: ${await signin.text()}`);
      const session = signin.headers.getSetCookie().find((c) => c.startsWith('tc_session=')).split(';')[0];
      const page = await fetch(`${run.base}/console/approvals`, { headers: { cookie: session } });
      assert.equal(page.status, 200, name);
    }
    const mode = fs.statSync(path.join(VAR, 'demo-console.env')).mode & 0o777;
    assert.equal(mode, 0o600, 'var/demo-console.env is readable by others');
  } finally {
    await stop(run);
  }
  const again = await start();
  try {
    assert.equal(field(again.out(), /^ {2}agent +(tc_\S+)$/m), keys.agent);
    assert.equal(field(again.out(), /^ {2}demo-reviewer +(\S+)/m), keys.reviewerLogin);
  } finally {
    await stop(again);
  }
});

// The fault suite's tools: a policy whose tools leave evidence on the host, load, faults
// against real processes (PostgreSQL restarts, terminated backends, kill -9, hang-ups, a full
// disk) and the invariants every experiment ends with.
//
// Evidence, not the server's word: every call writes a line to /markers/<tag>.start before
// it does anything else and to /markers/<tag>.end when it is done. /markers is a host
// directory bind-mounted read-write into the sandbox (policy "filesystem"), so the test sees
// whether and how often a program really ran, whatever the database says.
//
// The suite needs a PostgreSQL cluster of its own (scripts/test gives it one): it restarts it.
import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { BIN, ROOT, SLOW, sleep } from '../integration/harness.mjs';

const execFileP = promisify(execFile);
export const PG_BIN = process.env.PG_BIN || '/usr/lib/postgresql/15/bin';
export const GRACE_MS = 2000; // TC_SWEEP_GRACE_MS (server/worker.h)
/** An orphaned `running` row is closed within this long of its process's death. */
export const SWEEP_WITHIN_MS = (GRACE_MS + 3000) * SLOW;

export const lit = (s) => `'${String(s).replaceAll("'", "''")}'`;
export const tag = () => `t${crypto.randomBytes(6).toString('hex')}`;

// ---------------------------------------------------------------------------
// The policy: `mark` runs at once, `deploy` is irreversible (held for one approver).

const LIMITS = Object.fromEntries(Object.entries({
  timeout_ms: [15000, 60000], cpu_ms: [10000, 60000], memory_mb: [128, 1024], pids: [64, 256],
  output_bytes: [65536, 8388608], file_size_mb: [16, 64], workspace_mb: [16, 256],
  tmp_mb: [16, 256], open_files: [256, 1024],
}).map(([k, [d, m]]) => [k, { default: d, max: m }]));

/** Writes the policy and the markers directory; returns {policy, markers}. */
export function faultPolicy(dir) {
  const markers = path.join(dir, 'markers');
  fs.mkdirSync(markers, { recursive: true, mode: 0o777 });
  fs.chmodSync(markers, 0o777); // the sandbox's mapped uid writes here
  const tool = (extra) => ({
    description: 'Fault-suite tool: writes its markers to /markers.',
    language: 'shell',
    command: ['/bin/bash', '--noprofile', '--norc', '{code_file}'],
    code_file: 'main.sh',
    network: 'none',
    filesystem: [{ source: markers, target: '/markers', mode: 'rw' }],
    limits: LIMITS,
    prescreen: { rules: 'shell', actions: { low: 'warn', medium: 'warn', high: 'warn', critical: 'block' } },
    ...extra,
  });
  const policy = path.join(dir, 'policy.json');
  fs.writeFileSync(policy, JSON.stringify({
    version: 1,
    tools: {
      mark: tool({ session: { enabled: true, max_ttl_seconds: 600, max_idle_seconds: 600 } }),
      deploy: tool({ tier: 'human_approve', irreversible: true, approval: { ttl_seconds: 3600, approvers: 1 } }),
    },
  }, null, 2));
  return { policy, markers };
}

/** The code of one call: start marker, work, end marker, output. */
export function markCode(t, sleepS = 0.2) {
  return `echo "$$" >> /markers/${t}.start\nsleep ${sleepS}\necho done >> /markers/${t}.end\necho ${t}\n`;
}

/** How many times the call tagged t started and ended, by the markers on the host. */
export function markers(dir, t) {
  const count = (f) => {
    try {
      return fs.readFileSync(path.join(dir, f), 'utf8').split('\n').filter(Boolean).length;
    } catch (e) {
      if (e.code === 'ENOENT') return 0;
      throw e;
    }
  };
  return { start: count(`${t}.start`), end: count(`${t}.end`) };
}

export function tmpdir(name) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), `toolcage-faults-${name}-`));
  fs.chmodSync(d, 0o755);
  return d;
}

// ---------------------------------------------------------------------------
// PostgreSQL: the suite's own cluster (scripts/lib.sh layout: BASE/socket, BASE/data).

function pgBase() {
  const url = process.env.TOOLCAGE_MIGRATE_DATABASE_URL || '';
  const m = url.match(/(?:^|\s)host=(\S+)/);
  assert.ok(m, 'TOOLCAGE_MIGRATE_DATABASE_URL has no host= (run through scripts/test)');
  return path.dirname(m[1]);
}

async function pgCtl(...args) {
  const base = pgBase();
  return execFileP('runuser', ['-u', 'postgres', '--', path.join(PG_BIN, 'pg_ctl'), '-D',
    path.join(base, 'data'), '-l', path.join(base, 'postgresql.log'), ...args], { timeout: 120_000 });
}

/** pg_ctl restart -m fast: every connection is cut, every advisory lock released. ms taken. */
export async function pgRestart() {
  const t0 = performance.now();
  await pgCtl('-m', 'fast', '-w', '-t', '60', 'restart');
  return performance.now() - t0;
}
export async function pgStop() { await pgCtl('-m', 'fast', '-w', '-t', '60', 'stop'); }
export async function pgStart() { await pgCtl('-w', '-t', '60', 'start'); }

/**
 * Freezes (SIGSTOP) or thaws (SIGCONT) the whole cluster: its postmaster and every process it
 * started, as a paused VM or an unreachable host looks to a client (connections open, no
 * answer). The pids signalled.
 */
export function pgSignal(sig) {
  const pidFile = path.join(pgBase(), 'data', 'postmaster.pid');
  const postmaster = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  assert.ok(postmaster > 1, `postmaster pid in ${pidFile}`);
  const kill = (pid) => {
    try { process.kill(pid, sig); } catch (e) { if (e.code !== 'ESRCH') throw e; } // (gone meanwhile)
  };
  // the postmaster first: a stopped postmaster forks no child after the list is taken
  kill(postmaster);
  const children = spawnSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' }).stdout
    .split('\n').filter(Boolean).map(Number);
  for (const pid of children) kill(pid);
  return [postmaster, ...children];
}

let pgFrozen = false;
/**
 * pgSignal('SIGSTOP'), remembered before it is sent (a signal that fails half way still gets
 * its SIGCONT): pgThaw() thaws, and thawIfFrozen() (a file's after hook) thaws what a failed
 * test left frozen. The pids signalled.
 */
export function pgFreeze() {
  pgFrozen = true;
  return pgSignal('SIGSTOP');
}
export function pgThaw() {
  pgSignal('SIGCONT');
  pgFrozen = false;
}
export function thawIfFrozen() {
  if (pgFrozen) pgThaw();
}

/** pg_terminate_backend of every connection of the runtime role; how many. */
export async function terminateBackends(server) {
  const out = await server.sql(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
    WHERE usename = 'toolcage_app' AND pid <> pg_backend_pid()`);
  return Number(out.trim());
}

// ---------------------------------------------------------------------------
// Calls

/**
 * One call that may meet a fault: never throws. Returns {tag, tool, status (HTTP, or
 * 'hangup'/'neterr'), body, ms, retryAfter}.
 */
export async function call(server, t, { tool = 'mark', sleepS = 0.2, abortAfterMs, timeoutMs = 60_000 * SLOW, key } = {}) {
  const t0 = performance.now();
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), abortAfterMs ?? timeoutMs);
  try {
    const r = await fetch(`${server.base}/v1/execute`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key ?? server.keys.agent}`, 'content-type': 'application/json' },
      body: JSON.stringify({ tool, code: markCode(t, sleepS) }),
      signal: ctl.signal,
    });
    const text = await r.text();
    let body;
    try { body = JSON.parse(text); } catch { body = undefined; }
    return { tag: t, tool, status: r.status, body, ms: performance.now() - t0, retryAfter: r.headers.get('retry-after') };
  } catch (e) {
    return { tag: t, tool, status: abortAfterMs !== undefined && ctl.signal.aborted ? 'hangup' : 'neterr', error: String(e.cause?.code || e.message), ms: performance.now() - t0 };
  } finally {
    clearTimeout(timer);
  }
}

/** `clients` loops of calls until stop() is called; resolves to every call's outcome. */
export function load(server, { clients = 4, sleepS = 0.2, tool = 'mark' } = {}) {
  let stopping = false;
  const calls = [];
  const loops = Array.from({ length: clients }, async () => {
    while (!stopping) {
      const c = await call(server, tag(), { tool, sleepS });
      calls.push(c);
      if (c.status !== 200) await sleep(50); // a client backs off on errors (Retry-After: 1 is for people)
    }
  });
  return { calls, stop: async () => { stopping = true; await Promise.all(loops); return calls; } };
}

// ---------------------------------------------------------------------------
// Invariants

/** Rows (and their outcome records) of the calls tagged `tags`, by tag. */
export async function rowsByTag(server, tags) {
  if (tags.length === 0) return new Map();
  const list = tags.map(lit).join(', ');
  const out = (await server.sql(`SELECT coalesce(json_agg(x), '[]') FROM (
      SELECT substring(e.request->>'code' from '/markers/(t[0-9a-f]{12})\\.start') AS tag,
             e.id, e.status, e.result, e.code_started_at IS NOT NULL AS started_col,
             e.needs_review, e.late_result, e.claimed_by, e.attempts,
             (SELECT json_agg(a.record->>'action' ORDER BY a.seq) FROM audit_log a
               WHERE a.record->>'execution_id' = e.id::text) AS actions
        FROM executions e
       WHERE substring(e.request->>'code' from '/markers/(t[0-9a-f]{12})\\.start') IN (${list})) x`)).trim();
  const rows = JSON.parse(out);
  const m = new Map();
  for (const r of rows) {
    assert.ok(!m.has(r.tag), `two executions for one call ${r.tag}`);
    m.set(r.tag, r);
  }
  return m;
}

const FINAL = ['completed', 'failed', 'timeout', 'killed', 'error', 'denied', 'expired', 'cancelled'];
const OUTCOMES = ['execution.complete', 'execution.interrupted', 'execution.refused', 'approval.denied', 'approval.expired', 'approval.cancelled'];

/** Waits until none of the calls' rows is running/queued (the sweep interval), then returns them. */
export async function settled(server, tags, withinMs = SWEEP_WITHIN_MS) {
  const deadline = Date.now() + withinMs;
  for (;;) {
    const rows = await rowsByTag(server, tags);
    const open = [...rows.values()].filter((r) => !FINAL.includes(r.status) && r.status !== 'pending_approval');
    if (open.length === 0) return rows;
    assert.ok(Date.now() < deadline, `${open.length} execution(s) still open after ${withinMs} ms: ` +
      JSON.stringify(open.slice(0, 3).map((r) => ({ tag: r.tag, status: r.status, claimed_by: r.claimed_by }))));
    await sleep(200);
  }
}

/**
 * The invariants of every run, over the calls (as call() returns them) and the markers:
 * - every accepted call ends in exactly one final state, with exactly one outcome record;
 * - a 200 answer matches what is stored (status, exit code, output);
 * - a rejected call (503 before recording, 429, 4xx) leaves no row, and every 503 has Retry-After;
 * - every call ran at most once (markers), and the record says whether it started:
 *   never started by the record => no start marker; a start marker => the record says started;
 *   completed => started and ended exactly once.
 * Returns counts by outcome for the report.
 */
export async function checkCalls(server, calls, markerDir, { allowInterrupted = true } = {}) {
  const rows = await settled(server, calls.map((c) => c.tag));
  const counts = { calls: calls.length, stored: 0, rejected: 0, byStatus: {}, told: {} };
  for (const c of calls) {
    const row = rows.get(c.tag);
    const mk = markers(markerDir, c.tag);
    const where = `call ${c.tag} (${c.tool}, told ${c.status}${c.body?.status ? ' ' + c.body.status : ''}${c.body?.type ? ' ' + c.body.type : ''})`;
    counts.told[c.status] = (counts.told[c.status] || 0) + 1;
    assert.ok(mk.start <= 1, `${where}: ran ${mk.start} times`);
    if (typeof c.status === 'number' && c.status >= 500) assert.ok(c.retryAfter, `${where}: ${c.status} without Retry-After`);
    if (!row) {
      // Never recorded: it must not have run, and it must not have been told it ran.
      assert.equal(mk.start, 0, `${where}: ran without any record`);
      assert.ok(c.status !== 200 && c.status !== 202, `${where}: told ${c.status} but nothing is stored`);
      counts.rejected++;
      continue;
    }
    counts.stored++;
    counts.byStatus[row.status] = (counts.byStatus[row.status] || 0) + 1;
    assert.ok(FINAL.includes(row.status) || row.status === 'pending_approval', `${where}: left ${row.status}`);
    const outcomes = (row.actions || []).filter((a) => OUTCOMES.includes(a));
    if (row.status !== 'pending_approval') assert.equal(outcomes.length, 1, `${where}: outcome records ${JSON.stringify(row.actions)}`);
    const starts = (row.actions || []).filter((a) => a === 'execution.start').length;
    assert.ok(starts <= 1, `${where}: ${starts} start records`);
    assert.equal(starts === 1, row.started_col, `${where}: start record and code_started_at disagree`);
    if (row.result && 'started' in row.result) assert.equal(row.result.started, row.started_col, `${where}: result.started disagrees with the row`);
    // The record says whether it started; the markers are the evidence.
    if (!row.started_col) assert.equal(mk.start, 0, `${where}: the record says it never started, but it ran`);
    if (mk.start > 0) assert.ok(row.started_col, `${where}: it ran but the record says it never started`);
    if (row.status === 'completed') {
      assert.deepEqual(mk, { start: 1, end: 1 }, `${where}: completed but markers say ${JSON.stringify(mk)}`);
      assert.equal(row.result.stdout, `${c.tag}\n`, `${where}: stored stdout`);
    }
    const err = row.result?.error;
    if (err === 'interrupted_before_start') assert.equal(mk.start, 0, `${where}: interrupted_before_start but it ran`);
    if (!allowInterrupted) assert.ok(!/^interrupted/.test(err || ''), `${where}: interrupted (${err}) although no process died`);
    if (c.status === 200) {
      // What the client was told is what is stored.
      assert.equal(c.body.id, row.id, `${where}: id`);
      assert.equal(c.body.status, row.status, `${where}: told ${c.body.status}, stored ${row.status}`);
      assert.equal(c.body.exit_code, row.result.exit_code, `${where}: exit code`);
      assert.equal(c.body.stdout, row.result.stdout, `${where}: stdout`);
    }
    if (c.status === 202) assert.ok(row.status, `${where}`);
  }
  return counts;
}

/** No execution of the database has two outcome records, and the whole chain verifies. */
export async function checkAudit(server) {
  const dup = (await server.sql(`SELECT count(*) FROM (SELECT record->>'execution_id' FROM audit_log
    WHERE action IN (${OUTCOMES.map(lit).join(', ')}) GROUP BY 1 HAVING count(*) > 1) x`)).trim();
  assert.equal(dup, '0', 'executions with two outcome records');
  const running = (await server.sql(`SELECT count(*) FROM executions e WHERE e.status IN ('running', 'queued')
    AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = 7715
                     AND l.objid = e.claimed_by AND l.objsubid = 2 AND l.granted)
    AND e.status = 'running'`)).trim();
  assert.equal(running, '0', 'rows running under a dead instance');
  const { stdout } = await execFileP(BIN, ['audit', 'verify'], { env: { ...process.env, ...server.env }, timeout: 120_000 * SLOW })
    .catch((e) => assert.fail(`toolcage audit verify failed (${e.code}): ${e.stdout}\n${e.stderr}`));
  const v = JSON.parse(stdout);
  assert.equal(v.ok, true, `audit verify: ${stdout}`);
  return v.checked;
}

/** A line for the report (t.diagnostic) and the artifacts log. */
export function report(t, name, data) {
  const line = `${name}: ${JSON.stringify(data)}`;
  t.diagnostic(line);
  const f = path.join(ROOT, 'tests/artifacts', process.env.TOOLCAGE_IT_LABEL || 'local', 'faults-report.txt');
  fs.mkdirSync(path.dirname(f), { recursive: true });
  fs.appendFileSync(f, line + '\n');
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Lines of the server's log that match re (parsed JSON). */
export function logLines(server, re) {
  return fs.readFileSync(server.logPath, 'utf8').split('\n').filter((l) => re.test(l)).map((l) => {
    try { return JSON.parse(l); } catch { return { raw: l }; }
  });
}

/** A console session cookie for a new user of tenant a with `role`. */
export async function consoleSession(server, role) {
  const name = `${role}-${crypto.randomBytes(4).toString('hex')}`;
  const child = spawn(BIN, ['users', 'add', '--name', name, '--role', role, '--tenant', server.tenants.a],
    { env: { ...process.env, ...server.env }, stdio: ['pipe', 'ignore', 'inherit'] });
  child.stdin.end('correct horse battery staple\n');
  assert.equal(await new Promise((resolve) => child.on('exit', resolve)), 0);
  const page = await fetch(`${server.base}/console/signin`);
  const pre = page.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
  const csrf = (await page.text()).match(/name="csrf" value="([^"]+)"/)[1];
  const res = await fetch(`${server.base}/console/signin`, {
    method: 'POST', redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: pre, origin: server.base },
    body: new URLSearchParams({ csrf, name, password: 'correct horse battery staple' }),
  });
  assert.equal(res.status, 303, await res.text());
  return res.headers.getSetCookie().map((c) => c.split(';')[0]).join('; ');
}

/** A console page's HTML (asserting 200). */
export async function consolePage(server, cookie, p) {
  const res = await fetch(`${server.base}${p}`, { headers: { cookie } });
  const html = await res.text();
  assert.equal(res.status, 200, html.slice(0, 300));
  return html;
}

export { sleep, SLOW };

// A full state disk and a full log disk (small tmpfs mounts), and outcomes that cannot be
// stored when the server stops: the real cause is named, dropped log lines are counted and
// reported, and an unstored outcome waits on disk for the next start instead of being lost.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import { BIN, Server, psql } from '../integration/harness.mjs';
import {
  faultPolicy, tmpdir, call, tag, checkCalls, checkAudit, report, markers, freePort,
  pgStop, pgStart, logLines, sleep, SLOW,
} from './lib.mjs';

const execFileP = promisify(execFile);
const dir = tmpdir('disk');
const { policy, markers: mdir } = faultPolicy(dir);
const a = new Server('faults-disk', { freshDatabase: true, policy });
const mounts = [];

/** A tmpfs of `size` with at most `inodes` inodes, mounted under the test directory. */
async function tmpfs(name, size, inodes) {
  const m = path.join(dir, name);
  fs.mkdirSync(m);
  await execFileP('mount', ['-t', 'tmpfs', '-o', `size=${size},nr_inodes=${inodes},mode=0755`, 'tmpfs', m]);
  mounts.push(m);
  return m;
}

/** Fill a filesystem: blocks with one file, inodes with empty ones. Returns the block file. */
function fill(m) {
  const big = path.join(m, 'fill');
  const fd = fs.openSync(big, 'w');
  const chunk = Buffer.alloc(64 << 10);
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch (e) {
    assert.equal(e.code, 'ENOSPC');
  } finally {
    fs.closeSync(fd);
  }
  try {
    for (let i = 0; ; i++) fs.writeFileSync(path.join(m, `i${i}`), '');
  } catch (e) {
    assert.equal(e.code, 'ENOSPC');
  }
  return big;
}

before(async () => { await a.start(); }, { timeout: 120_000 * SLOW });
after(async () => {
  for (const m of mounts) await execFileP('umount', ['-l', m]).catch(() => {});
  await a.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 60_000 * SLOW });

/** A second `toolcage serve` on a's database, with its own state dir and log file. */
async function serveWith(name, { stateDir, logPath, serveEnv = {} }) {
  const s = new Server(name, { policy, serveEnv });
  s.env = { ...a.env };
  s.database = a.database;
  s.keys = a.keys;
  s.tenants = a.tenants;
  s.stateDir = stateDir;
  s.masterKey = path.join(dir, `${name}.key`);
  fs.copyFileSync(a.masterKey, s.masterKey);
  fs.chmodSync(s.masterKey, 0o600);
  s.env.TOOLCAGE_MASTER_KEY_FILE = s.masterKey;
  s.logPath = logPath;
  await s.spawnAndWait(await freePort());
  return s;
}

/** SIGTERM; the exit status, after checking the log for sanitizer reports. */
async function sigterm(s) {
  s.proc.kill('SIGTERM');
  const e = await s.exit;
  const report = fs.readFileSync(s.logPath, 'utf8').match(/^.*(ERROR: (Address|Leak)Sanitizer|runtime error:).*$/m);
  assert.ok(!report, `sanitizer report in ${s.logPath}: ${report?.[0]}`);
  return e;
}

test('a server on a full state disk refuses to start and names the cause', async (t) => {
  const m = await tmpfs('state-full', '256k', 32);
  fill(m);
  const env = { ...process.env, ...a.env, TOOLCAGE_STATE_DIR: path.join(m, 'state'), TOOLCAGE_POLICY: policy,
    TOOLCAGE_LISTEN: `127.0.0.1:${await freePort()}`, TOOLCAGE_MASTER_KEY_FILE: a.masterKey };
  const r = await execFileP(BIN, ['serve'], { env, timeout: 30_000 * SLOW }).then(
    (x) => ({ code: 0, ...x }), (e) => e);
  assert.notEqual(r.code, 0, 'it started on a full disk');
  const out = `${r.stdout}\n${r.stderr}`;
  assert.match(out, /No space left on device/, out);
  assert.doesNotMatch(out, /Input\/output error/, out);
  report(t, 'full state disk at start', { exit: r.code, cause: out.match(/"error":"([^"]*)"/)?.[1] });
});

test('a full log disk: lines are dropped, counted, and the count is reported later', async (t) => {
  const m = await tmpfs('logs', '1m', 64);
  const stateDir = tmpdir('disk-log-state');
  const s = await serveWith('faults-disk-log', { stateDir, logPath: path.join(m, 'server.log') });
  try {
    const big = fill(m);
    const calls = [];
    for (let i = 0; i < 8; i++) calls.push(await call(s, tag()));
    for (const c of calls) assert.equal(c.status, 200, JSON.stringify(c)); // serving goes on
    fs.rmSync(big);
    calls.push(await call(s, tag()));
    await sleep(200);
    const notes = logLines(s, /log lines were dropped/);
    assert.equal(notes.length, 1, 'no report of dropped lines');
    // The file's last page took a few lines more; then every line of those calls was lost.
    const finished = logLines(s, /"execution finished"/).filter((l) => calls.slice(0, 8).some((c) => c.body.id === l.execution_id));
    assert.ok(finished.length < 8, `${finished.length} of 8 calls logged on a full disk`);
    // Each call not logged as finished lost that line at least (its shorter "request" line may
    // still fit in the last page's few bytes, so not always two).
    assert.ok(notes[0].dropped >= 8 - finished.length, `dropped ${notes[0].dropped}, ${finished.length} of 8 logged`);
    const counts = await checkCalls(s, calls, mdir, { allowInterrupted: false });
    report(t, 'full log disk', { ...counts, dropped_reported: notes[0].dropped });
  } finally {
    await sigterm(s);
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
});

async function waitFor(fn, ms, what) {
  const end = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

test('outcomes not stored at shutdown (PostgreSQL down) wait on disk and are stored at the next start', async (t) => {
  const t0 = performance.now();
  const stateDir = tmpdir('disk-spill-state');
  const s = await serveWith('faults-disk-spill', { stateDir, logPath: path.join(path.dirname(a.logPath), 'faults-disk-spill.server.log') });
  const tags = [tag(), tag(), tag()];
  let holder = null; // the session that holds the old instance's lock (below)
  const release = async () => {
    if (!holder) return;
    await a.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%toolcage-faults-hold-%' AND pid <> pg_backend_pid()");
    await holder;
    holder = null;
  };
  // Started (their start recorded: the program itself marks it), then the database goes away
  // while they run: a fixed pause lost the race on a loaded host, where a start came late.
  const pending = tags.map((tg) => call(s, tg, { sleepS: 5 }));
  await waitFor(() => tags.every((tg) => markers(mdir, tg).start === 1), 30_000 * SLOW, 'the programs to start');
  await pgStop();
  let restarted = false;
  try {
    // the programs end; their outcomes cannot be stored
    await waitFor(() => tags.every((tg) => markers(mdir, tg).end === 1), 30_000 * SLOW, 'the programs to end');
    const exit = await sigterm(s);
    assert.deepEqual(exit, { code: 0, signal: null }, s.logTail());
    const calls = await Promise.all(pending);
    for (const c of calls) assert.equal(c.status, 503, JSON.stringify(c)); // not stored: not handed out
    const spilled = fs.readdirSync(path.join(stateDir, 'state', 'outcomes')).filter((f) => f.endsWith('.json'));
    assert.equal(spilled.length, 3, `on disk: ${spilled}`);
    await pgStart();
    restarted = true;
    // `a` lives on this database too: it would sweep the old process's three running rows as
    // interrupted 2 s after it sees their instance's lock free, and the new process stores them
    // only after its migrations and start-up (~2 s apart in a run's log). Their instance is held
    // alive (its lock, in a session of the test's) until the new process has stored them.
    const old = (await a.sql("SELECT string_agg(DISTINCT claimed_by::text, ',') FROM executions WHERE status = 'running'")).trim();
    assert.match(old, /^[0-9]+$/, `the old process's instance: ${old}`);
    const marker = `toolcage-faults-hold-${tag()}`;
    holder = psql(`SELECT pg_advisory_lock(7715, ${old}), '${marker}'; SELECT pg_sleep(50)`, { db: a.database }).catch(() => {});
    for (const end = Date.now() + 10_000 * SLOW; ;) {
      const n = (await a.sql(`SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database
        WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.classid = 7715
        AND l.objid = ${old} AND l.objsubid = 2 AND l.granted`)).trim();
      if (n === '1') break;
      assert.ok(Date.now() < end, 'the old instance\'s lock, held by the test');
      await sleep(20);
    }
    // The same state directory, a new process: it stores them first thing.
    await s.spawnAndWait(await freePort());
    const counts = await checkCalls(s, calls, mdir, { allowInterrupted: false });
    await release();
    assert.deepEqual(counts.byStatus, { completed: 3 }, JSON.stringify(counts));
    for (const tg of tags) assert.deepEqual(markers(mdir, tg), { start: 1, end: 1 });
    assert.deepEqual(fs.readdirSync(path.join(stateDir, 'state', 'outcomes')).filter((f) => f.endsWith('.json')), []);
    const checked = await checkAudit(s);
    report(t, 'spill at shutdown, stored at next start', { ...counts, spilled: 3, audit_records: checked, s: Math.round((performance.now() - t0) / 1000) });
  } finally {
    if (!restarted) await pgStart();
    await release();
    if (!s.exited) await sigterm(s);
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
});

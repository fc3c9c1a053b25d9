// A tenant's own export verifies offline although the chain is global: three tenants'
// records interleave, and each tenant's export shows its own records and withholds the others'
// (seq, hash and digest only), so `toolcage audit verify --file --public-key` checks it end to
// end; a changed, removed or reordered record of the tenant's own is still found. And
// GET /v1/audit/verify walks off the request threads: concurrent calls share one walk while
// /healthz keeps answering. Runs on a database of its own (setup freshDatabase).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setup, createKey, BIN, SLOW } from './harness.mjs';

const execFileP = promisify(execFile);
const server = setup('audit-tenants', { freshDatabase: true });

async function verifyFile(text, name) {
  const file = path.join(server.stateDir, name);
  fs.writeFileSync(file, text);
  const { stdout: pkOut } = await server.cli(['audit', 'public-key']);
  const pk = pkOut.trim().split('\n').pop();
  try {
    const { stdout } = await execFileP(BIN, ['audit', 'verify', '--file', file, '--public-key', pk], { env: { ...process.env, ...server.env }, timeout: 60_000 * SLOW });
    return { code: 0, verdict: JSON.parse(stdout) };
  } catch (e) {
    if (e.code !== 3) throw new Error(`audit verify: exit ${e.code}: ${e.stdout}\n${e.stderr}`);
    return { code: 3, verdict: JSON.parse(e.stdout) };
  }
}

/** Digest and chain hash of a record after prevHex (Python's hashlib; ASCII records). */
async function seal(prevHex, record) {
  const py = [
    'import sys, json, hashlib',
    'd = json.load(sys.stdin)',
    'c = json.dumps(d["record"], separators=(",", ":"), sort_keys=True, ensure_ascii=True).encode()',
    'dg = hashlib.blake2b(c, digest_size=32).digest()',
    'h = hashlib.blake2b(bytes.fromhex(d["prev"]) + dg, digest_size=32).digest()',
    'print(json.dumps({"digest": dg.hex(), "hash": h.hex()}))',
  ].join('\n');
  const child = execFile('python3', ['-c', py]);
  child.stdin.end(JSON.stringify({ prev: prevHex, record }));
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, out);
  return JSON.parse(out);
}

const tenantC = `it-audit-tenants-c-${crypto.randomBytes(4).toString('hex')}`;
let keysC;
const runs = { a: [], b: [], c: [] };

async function interleave() {
  if (keysC) return;
  keysC = {
    agent: await createKey(tenantC, 'agent', server.env),
    auditor: await createKey(tenantC, 'auditor', server.env),
  };
  const agents = { a: server.keys.agent, b: server.keys.otherAgent, c: keysC.agent };
  for (let i = 0; i < 12; i++) {
    for (const t of ['a', 'b', 'c']) {
      const { json } = await server.execute({ tool: 'shell', code: `echo ${t}-secret-${i}` }, { key: agents[t] });
      runs[t].push(json.id);
    }
  }
}

const exporters = () => ({ a: server.keys.auditor, b: server.keys.otherAdmin, c: keysC.auditor });

test("each of three interleaved tenants' exports verifies offline and shows nothing of the others", async () => {
  await interleave();
  for (const [t, key] of Object.entries(exporters())) {
    for (const format of ['jsonl', 'csv']) {
      const res = await server.request('GET', `/v1/audit/export?format=${format}`, { key });
      assert.equal(res.status, 200);
      const v = await verifyFile(res.text, `${t}.${format}`);
      assert.equal(v.code, 0, `${t} ${format}: ${JSON.stringify(v.verdict)}`);
      assert.ok(v.verdict.withheld > 0 && v.verdict.withheld < v.verdict.checked, JSON.stringify(v.verdict));
      for (const other of ['a', 'b', 'c'].filter((o) => o !== t)) {
        for (const id of runs[other]) assert.ok(!res.text.includes(id), `${t}'s ${format} export names ${other}'s execution ${id}`);
        assert.ok(!res.text.includes(`${other}-secret-`), `${t}'s ${format} export holds ${other}'s code`);
      }
      for (const id of runs[t]) assert.ok(res.text.includes(id), `${t}'s own execution ${id} is missing`);
    }
  }
});

test("a changed, removed or reordered record of the tenant's own is found in its export", async () => {
  await interleave();
  const text = (await server.request('GET', '/v1/audit/export', { key: server.keys.auditor })).text;
  const lines = text.split('\n').filter(Boolean);
  const parsed = lines.map((l) => JSON.parse(l));
  const ownIdx = parsed.map((l, i) => (l.record ? i : -1)).filter((i) => i >= 0);
  // an own record in the middle whose next line is another tenant's (withheld), and on which
  // no checkpoint was signed (checkpoints come every 100 records and every minute, so where
  // they fall depends on the machine's speed; at a checkpoint's seq a resealed record is
  // caught there, by the checkpoint, not one line later)
  const cpSeqs = new Set(parsed.filter((l) => l.checkpoint).map((l) => l.checkpoint.seq));
  const i = ownIdx.find((k) => k > ownIdx[2] && parsed[k + 1]?.withheld && !cpSeqs.has(parsed[k].seq));
  assert.ok(i, 'an own record followed by a withheld one');
  const victim = parsed[i];
  const join = (ls) => `${ls.join('\n')}\n`;

  // 1. the content changed
  const changed = { ...victim, record: { ...victim.record, request_id: 'forged' } };
  let v = await verifyFile(join(lines.map((l, k) => (k === i ? JSON.stringify(changed) : l))), 'changed.jsonl');
  assert.equal(v.code, 3);
  assert.equal(v.verdict.first_bad_seq, victim.seq);
  assert.match(v.verdict.reason, /altered/);

  // 2. changed, with its digest and hash recomputed as anyone could: the next line (another
  //    tenant's, withheld) no longer links to it
  const prevHash = parsed[i - 1].hash ?? parsed[i - 1].checkpoint?.hash;
  const s = await seal(prevHash, changed.record);
  const resealed = { ...changed, digest: s.digest, hash: s.hash };
  v = await verifyFile(join(lines.map((l, k) => (k === i ? JSON.stringify(resealed) : l))), 'resealed.jsonl');
  assert.equal(v.code, 3);
  assert.equal(v.verdict.first_bad_seq, victim.seq + 1);

  // 3. removed
  v = await verifyFile(join(lines.filter((_, k) => k !== i)), 'removed.jsonl');
  assert.equal(v.code, 3);
  assert.equal(v.verdict.first_bad_seq, victim.seq);
  assert.match(v.verdict.reason, /missing/);

  // 4. two own records swapped
  const j = ownIdx[ownIdx.indexOf(i) + 1];
  const swapped = [...lines];
  [swapped[i], swapped[j]] = [swapped[j], swapped[i]];
  v = await verifyFile(join(swapped), 'swapped.jsonl');
  assert.equal(v.code, 3);
  assert.equal(v.verdict.first_bad_seq, victim.seq);

  // 5. a withheld line of another tenant changed
  const w = parsed.findIndex((l) => l.withheld);
  const other = { ...parsed[w], digest: crypto.randomBytes(32).toString('hex') };
  v = await verifyFile(join(lines.map((l, k) => (k === w ? JSON.stringify(other) : l))), 'withheld.jsonl');
  assert.equal(v.code, 3);
  assert.equal(v.verdict.first_bad_seq, parsed[w].seq);

  // 6. a record appended after the export's last checkpoint
  const last = parsed[parsed.length - 1];
  const extra = { seq: last.seq + 1, hash: crypto.randomBytes(32).toString('hex'), digest: crypto.randomBytes(32).toString('hex'), withheld: true };
  const e = await seal(last.hash, { seq: last.seq + 1 });
  v = await verifyFile(join([...lines, JSON.stringify({ ...extra, digest: e.digest, hash: e.hash })]), 'appended.jsonl');
  assert.equal(v.code, 3);
  assert.equal(v.verdict.first_bad_seq, last.seq + 1);
  assert.match(v.verdict.reason, /not covered by a signed checkpoint/);

  // and the unchanged export verifies
  v = await verifyFile(text, 'intact.jsonl');
  assert.equal(v.code, 0, JSON.stringify(v.verdict));
});

test('a filtered export (since, action) is a stretch anchored at a signed checkpoint and verifies', async () => {
  await interleave();
  const since = new Date(Date.now() - 1000).toISOString().replace(/\.\d+Z$/, 'Z');
  await server.execute({ tool: 'shell', code: 'echo recent' });
  for (const q of [`since=${since}`, 'action=execution.complete', `tenant=${tenantC}`]) {
    const key = q.startsWith('tenant') ? server.keys.operator : server.keys.auditor;
    const res = await server.request('GET', `/v1/audit/export?${q}`, { key });
    const lines = res.text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const recs = lines.filter((l) => !l.checkpoint);
    assert.ok(recs.some((l) => l.record), q);
    const v = await verifyFile(res.text, 'filtered.jsonl');
    assert.equal(v.code, 0, `${q}: ${JSON.stringify(v.verdict)}`);
    assert.equal(v.verdict.checked, recs.length);
  }
});

test('GET /v1/audit/verify walks off the request threads: concurrent calls share one walk, /healthz keeps answering', async (t) => {
  await interleave();
  // 30,000 records, so that a walk takes a while (bench/audit_seed: the server's own format).
  const seedBin = path.join(path.dirname(BIN), 'bench', 'audit_seed');
  assert.ok(fs.existsSync(seedBin), `${seedBin} (built with the tree)`);
  const tenantA = (await server.sql(`SELECT id FROM tenants WHERE name = '${server.tenants.a}'`)).trim();
  await execFileP(seedBin, ['seed', server.urls.owner, server.masterKey, '30000', tenantA], { timeout: 300_000 * SLOW });
  await server.sql('ANALYZE audit_log');

  const t0 = performance.now();
  const verifies = Array.from({ length: 8 }, () => server.request('GET', '/v1/audit/verify', { key: server.keys.auditor, timeout: 300_000 * SLOW })
    .then((r) => ({ ...r, doneAt: performance.now() })));
  const health = [];
  let lastHealthAt = 0;
  for (let k = 0; k < 10; k++) {
    const h = await server.request('GET', '/healthz');
    assert.equal(h.status, 200);
    health.push(h.ms);
    lastHealthAt = performance.now();
  }
  const done = await Promise.all(verifies);
  for (const r of done) {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.ok, true, r.text);
    assert.ok(r.json.checked > 30000);
  }
  const walks = new Set(done.map((r) => r.json.verified_at));
  assert.ok(walks.size <= 2, `8 concurrent calls made ${walks.size} walks: ${[...walks]}`);
  const firstVerify = Math.min(...done.map((r) => r.doneAt));
  const walkMs = firstVerify - t0;
  health.sort((x, y) => x - y);
  t.diagnostic(`8 concurrent verifies over ${done[0].json.checked} records: ${walks.size} walk(s), first verdict after ${Math.round(walkMs)} ms;`
    + ` /healthz meanwhile: median ${health[5].toFixed(1)} ms, max ${health[9].toFixed(1)} ms`);
  // /healthz answered while the walks ran, and quickly (before: it queued behind them).
  assert.ok(lastHealthAt < firstVerify || health[health.length - 1] < 200 * SLOW,
    `healthz ${health.map(Math.round)} ms; first verdict after ${Math.round(walkMs)} ms`);
  assert.ok(health[Math.floor(health.length / 2)] < 100 * SLOW, `healthz median ${Math.round(health[5])} ms (walk ${Math.round(walkMs)} ms)`);

  // max_age: a recent verdict comes back at once, without a walk
  const cached = await server.request('GET', '/v1/audit/verify?max_age=3600', { key: server.keys.auditor });
  assert.equal(cached.status, 200);
  assert.ok(walks.has(cached.json.verified_at), `${cached.json.verified_at} is one of ${[...walks]}`);
  assert.ok(cached.ms < walkMs, `cached answer took ${Math.round(cached.ms)} ms, a walk ${Math.round(walkMs)} ms`);
  for (const bad of ['-1', 'x', '86401']) {
    const r = await server.request('GET', `/v1/audit/verify?max_age=${bad}`, { key: server.keys.auditor });
    assert.equal(r.status, 400);
  }
});

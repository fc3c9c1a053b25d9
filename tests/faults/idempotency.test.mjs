// Idempotency-Key under faults (docs/approvals.md, Idempotency): a repeat of a request never
// runs its call again, whatever became of the first answer: an outcome that could not be
// stored in time, a first request whose process died after it recorded its execution (the
// repeat is pointed at that execution), or before (its claim is taken over once stale). The
// evidence is the markers the program writes on the host: how many times it ran.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { Server, assertProblem } from '../integration/harness.mjs';
import { faultPolicy, tmpdir, tag, markCode, markers, lit, report, sleep, SLOW } from './lib.mjs';

const dir = tmpdir('idempotency');
const { policy, markers: mdir } = faultPolicy(dir);
const server = new Server('faults-idempotency', { freshDatabase: true, policy });

before(async () => { await server.start(); }, { timeout: 120_000 * SLOW });
after(async () => {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 60_000 * SLOW });

const post = (code, key, opts = {}) => server.request('POST', '/v1/execute', {
  key: server.keys.agent, json: { tool: 'mark', code }, headers: { 'idempotency-key': key }, ...opts,
});
const executionsOf = async (code) => Number((await server.sql(
  `SELECT count(*) FROM executions WHERE request->>'code' = ${lit(code)}`)).trim());

async function until(what, fn, ms = 30_000 * SLOW) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

test('an outcome not stored in time: the synchronous call answers 503, and a repeat with its key is pointed at that execution instead of running it again', async (t) => {
  const t0 = tag(), key = `k-${t0}`, code = markCode(t0, 3);
  const first = post(code, key, { timeout: 90_000 * SLOW });
  // once its start is recorded, its outcome cannot be stored (the database refuses it, as it
  // would while full or broken) for longer than the 10 s a waiting client is answered within
  const id = await until('the start record', async () => (await server.sql(
    `SELECT id FROM executions WHERE request->>'code' = ${lit(code)} AND code_started_at IS NOT NULL`)).trim());
  await server.sql(`CREATE FUNCTION tc_test_refuse() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN RAISE EXCEPTION 'test: not now'; END $$;
    CREATE TRIGGER tc_test_refuse BEFORE UPDATE ON executions FOR EACH ROW
      WHEN (OLD.id = ${lit(id)} AND NEW.status <> 'running') EXECUTE FUNCTION tc_test_refuse()`);
  const r1 = await first;
  console.log("r1", r1.status, r1.ms, r1.text.slice(0, 200));
  assertProblem(r1, 503, 'unavailable');
  assert.match(r1.json.detail, new RegExp(`/v1/executions/${id}`));
  assert.equal(markers(mdir, t0).start, 1, 'it ran');
  // while the outcome is still not stored: the repeat is the execution's
  const r2 = await post(code, key);
  assert.equal(r2.status, 202, r2.text);
  assert.equal(r2.json.id, id);
  assert.equal(r2.headers.get('location'), `/v1/executions/${id}`);
  await server.sql('DROP TRIGGER tc_test_refuse ON executions; DROP FUNCTION tc_test_refuse()');
  const done = await until('the stored outcome', async () => {
    const g = await server.request('GET', `/v1/executions/${id}`, { key: server.keys.agent });
    return g.json?.status === 'completed' ? g.json : null;
  });
  assert.equal(done.stdout, `${t0}\n`);
  const r3 = await post(code, key);
  assert.equal(r3.status, 202, r3.text);
  assert.equal(r3.json.id, id);
  assert.deepEqual(markers(mdir, t0), { start: 1, end: 1 }, 'ran once, repeats and all');
  assert.equal(await executionsOf(code), 1);
  report(t, 'idempotency: outcome stored late', { id, first: r1.status, repeats: [r2.status, r3.status] });
});

test('a first request that never answered: after it recorded its execution a repeat is pointed at it (409 with its Location); before, its claim is taken over once 5 minutes old', async (t) => {
  const t0 = tag(), key = `k-${t0}`;
  // each run leaves a file of its own (runs are different uids: one file could not be shared)
  const code = `mktemp /markers/${t0}.run.XXXXXX >/dev/null\necho ${t0}\n`;
  const runs = () => fs.readdirSync(mdir).filter((f) => f.startsWith(`${t0}.run.`)).length;
  const r1 = await post(code, key);
  assert.equal(r1.status, 200, r1.text);
  const id1 = r1.json.id;
  const where = `WHERE key = ${lit(key)}`;
  assert.equal((await server.sql(`SELECT execution_id FROM idempotency_keys ${where}`)).trim(), id1);

  // its process died after the execution was recorded, before it answered
  await server.sql(`UPDATE idempotency_keys SET status = NULL, response = NULL, location = NULL ${where}`);
  const r2 = await post(code, key);
  assertProblem(r2, 409, 'idempotency-in-progress');
  assert.equal(r2.headers.get('location'), `/v1/executions/${id1}`);
  assert.match(r2.json.detail, new RegExp(id1));
  // the same an hour on: an execution is never run twice for one key
  await server.sql(`UPDATE idempotency_keys SET created_at = now() - interval '1 hour' ${where}`);
  assertProblem(await post(code, key), 409, 'idempotency-in-progress');
  assert.equal(runs(), 1);

  // it died before its execution was recorded: in flight for all we know, for 5 minutes
  await server.sql(`UPDATE idempotency_keys SET execution_id = NULL, created_at = now() - interval '4 minutes' ${where}`);
  const r3 = await post(code, key);
  assertProblem(r3, 409, 'idempotency-in-progress');
  assert.equal(r3.headers.get('location'), null);
  assert.equal(runs(), 1);
  // then its claim is stale: taken over, the call runs (its first request never did)
  await server.sql(`UPDATE idempotency_keys SET created_at = now() - interval '6 minutes' ${where}`);
  // another body under that key is still another request
  assertProblem(await post(`${code}#other\n`, key), 422, 'idempotency-key-reused');
  const r4 = await post(code, key);
  assert.equal(r4.status, 200, r4.text);
  assert.notEqual(r4.json.id, id1);
  assert.equal(runs(), 2);
  // and the key answers with that one from now on
  const r5 = await post(code, key);
  assert.equal(r5.status, 200);
  assert.equal(r5.json.id, r4.json.id);
  assert.equal(runs(), 2);
  assert.equal(await executionsOf(code), 2);
  report(t, 'idempotency: dead first requests', { id1, id2: r4.json.id });
});

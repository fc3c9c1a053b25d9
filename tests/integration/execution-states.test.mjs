// The execution state machine is PostgreSQL's, not only the server's (migration 0008): even
// the runtime role cannot rewrite an outcome, skip a state, unstart a call, or append a
// second outcome record.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup, psql } from './harness.mjs';

const server = setup();

/** SQL as the runtime role (toolcage_app), like the server; rejects with psql's error. */
const asApp = (sql) => psql(sql, { conninfo: server.urls.app });

async function refused(sql, re) {
  await assert.rejects(asApp(sql), (e) => {
    assert.match(e.stderr || e.message, re);
    return true;
  }, sql);
}

test('a final execution keeps its outcome; transitions outside the machine are refused', async () => {
  const { json: run } = await server.execute({ tool: 'shell', code: 'echo once' });
  assert.equal(run.status, 'completed');
  assert.equal(run.started, true);
  const id = `'${run.id}'`;
  await refused(`UPDATE executions SET status = 'failed' WHERE id = ${id}`, /is final/);
  await refused(`UPDATE executions SET result = '{}' WHERE id = ${id}`, /is final/);
  await refused(`UPDATE executions SET code_started_at = NULL WHERE id = ${id}`, /is final/);
  // A late result is kept once, beside the outcome.
  await asApp(`UPDATE executions SET late_result = '{"status":"completed"}' WHERE id = ${id}`);
  await refused(`UPDATE executions SET late_result = '{"status":"failed"}' WHERE id = ${id}`, /is final/);
  // Exactly one outcome record per execution, one start: the trail's own unique indexes,
  // tried on a scratch copy of the table (the trail itself is append-only and sealed).
  const trail = (x, y) => server.sql(`CREATE TEMP TABLE t (LIKE audit_log INCLUDING INDEXES);
    INSERT INTO t (seq, record, hash, action) VALUES
      (900000001, '{"execution_id":"${run.id}"}', '\\x00', '${x}'),
      (900000002, '{"execution_id":"${run.id}"}', '\\x00', '${y}')`);
  await assert.rejects(trail('execution.complete', 'execution.interrupted'), /duplicate key value violates unique constraint/);
  await assert.rejects(trail('execution.refused', 'approval.cancelled'), /duplicate key value violates unique constraint/);
  await assert.rejects(trail('execution.start', 'execution.start'), /duplicate key value violates unique constraint/);
  await trail('execution.start', 'execution.complete'); // one of each is the rule
  const idx = await server.sql("SELECT count(*) FROM pg_indexes WHERE indexname IN ('audit_one_outcome', 'audit_one_start') AND indexdef LIKE 'CREATE UNIQUE INDEX%'");
  assert.equal(idx.trim(), '2');
});

test('held, queued and running rows move only along the machine', async () => {
  const { json: done } = await server.request('POST', '/v1/execute', {
    key: server.keys.agent, json: { tool: 'shell', code: 'echo x' } });
  assert.equal(done.status, 'completed');
  // a fresh row in every state, as the server would make it
  const tenant = (await server.sql(`SELECT tenant_id FROM executions WHERE id = '${done.id}'`)).trim();
  // Running rows are claimed by the live server's own instance (the one that ran done), whose
  // lock is held: a dead instance's (this lane's first server was instance 1) would be closed
  // as interrupted by the live server's sweep 2-3.4 s later, in the middle of the statements.
  const me = Number((await server.sql(`SELECT claimed_by FROM executions WHERE id = '${done.id}'`)).trim());
  assert.ok(me > 0, 'the instance that ran it');
  const mk = async (status, claimed) => {
    const id = crypto.randomUUID();
    await asApp(`INSERT INTO executions (id, tenant_id, tool, status, request, limits, claimed_by)
      VALUES ('${id}', '${tenant}', 'shell', '${status}', '{}', '{}', ${claimed ?? 'NULL'})`);
    return `'${id}'`;
  };
  await refused(`INSERT INTO executions (id, tenant_id, tool, status, request, limits)
    VALUES ('${crypto.randomUUID()}', '${tenant}', 'shell', 'completed', '{}', '{}')`, /cannot be created/);
  await refused(`INSERT INTO executions (id, tenant_id, tool, status, request, limits)
    VALUES ('${crypto.randomUUID()}', '${tenant}', 'shell', 'running', '{}', '{}')`, /cannot be created/);
  const p = await mk('pending_approval');
  await refused(`UPDATE executions SET status = 'running', claimed_by = ${me} WHERE id = ${p}`, /not a transition/);
  // queued, then claimed, in one transaction: the server's worker (it claims queued rows, and
  // would close this one, which has no approval, as an error) never sees it queued
  await asApp(`UPDATE executions SET status = 'queued' WHERE id = ${p};
    UPDATE executions SET status = 'running', claimed_by = ${me} WHERE id = ${p}`);
  await refused(`UPDATE executions SET status = 'completed' WHERE id = ${p}`, /not a transition/); // no result
  await refused(`UPDATE executions SET claimed_by = ${me + 1} WHERE id = ${p}`, /claimed_by changes only/);
  await asApp(`UPDATE executions SET code_started_at = now() WHERE id = ${p}`);
  await refused(`UPDATE executions SET code_started_at = now() WHERE id = ${p}`, /starts once/);
  // started: never back to the queue
  await refused(`UPDATE executions SET status = 'queued', claimed_by = NULL WHERE id = ${p}`, /not a transition/);
  await asApp(`UPDATE executions SET status = 'failed', result = '{"error":"interrupted_after_start"}' WHERE id = ${p}`);
  // not started: may go back once to the queue (the first statement; the second's refusal
  // rolls it back, so the worker never claims this row either)
  const r = await mk('running', me);
  await refused(`UPDATE executions SET status = 'queued', claimed_by = NULL WHERE id = ${r};
    UPDATE executions SET late_result = '{}' WHERE id = ${r}`, /needs a final row/);
});

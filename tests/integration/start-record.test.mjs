// The start record (server/recorder.c, write_start): a held sandbox's program goes only once
// execution.start is stored, and the record's rare paths keep that promise. A test trigger
// holds the app's start back (the recorder retries every 100 ms), then the row is changed
// under it as the cases it must tell apart would leave it:
//  - started already (an earlier attempt committed, its answer lost): the program goes, and
//    no second start is recorded;
//  - no longer this instance's to start (another outcome stored meanwhile): the sandbox is
//    cancelled unrun, and the stored outcome is the one the client gets.
// Evidence: the program's own output (it ran or it did not), the row, and the trail.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { setup, SLOW } from './harness.mjs';
import { until, lit } from './fixtures/approval-helpers.mjs';

// a database of its own: the test trigger is on executions, which other files' servers use
const server = setup('start-record', { freshDatabase: true });

/** The call with code `code`, sent now; its start held back until release(). */
async function heldStart(code) {
  await server.sql(`CREATE OR REPLACE FUNCTION tc_test_hold_start() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN
        IF OLD.code_started_at IS NULL AND NEW.code_started_at IS NOT NULL
           AND current_user = 'toolcage_app' AND NEW.request->>'code' = ${lit(code)} THEN
          RAISE EXCEPTION 'test: the start record is held back';
        END IF;
        RETURN NEW;
      END $$;
    CREATE TRIGGER tc_test_hold_start BEFORE UPDATE ON executions FOR EACH ROW
      EXECUTE FUNCTION tc_test_hold_start()`);
  const pending = server.request('POST', '/v1/execute', { key: server.keys.agent, json: { tool: 'shell', code }, timeout: 60_000 * SLOW });
  const id = await until(async () => (await server.sql(`SELECT id FROM executions WHERE request->>'code' = ${lit(code)}`)).trim(), 10_000 * SLOW, 'the row');
  // the recorder has tried, been refused, and waits to try again
  await until(() => fs.readFileSync(server.logPath, 'utf8').split('\n')
    .some((l) => l.includes('recording a start failed') && l.includes(id)), 10_000 * SLOW, 'a refused start');
  return { pending, id };
}

const release = () => server.sql('DROP TRIGGER IF EXISTS tc_test_hold_start ON executions; DROP FUNCTION IF EXISTS tc_test_hold_start()');
const startRecords = async (id) => Number((await server.sql(`SELECT count(*) FROM audit_log
  WHERE action = 'execution.start' AND record->>'execution_id' = ${lit(id)}`)).trim());

test('a start recorded already (an earlier attempt committed, its answer lost): the program goes, and no second start is recorded', async () => {
  const tag = crypto.randomBytes(4).toString('hex');
  const code = `echo ran-${tag}`;
  let held;
  try {
    held = await heldStart(code);
    assert.equal((await server.sql(`SELECT code_started_at IS NULL FROM executions WHERE id = ${lit(held.id)}`)).trim(), 't');
    // the earlier attempt's commit, as it would have left the row
    await server.sql(`UPDATE executions SET code_started_at = now() WHERE id = ${lit(held.id)}`);
  } finally {
    await release();
  }
  const res = await held.pending;
  assert.equal(res.status, 200, res.text.slice(0, 300));
  assert.equal(res.json.status, 'completed');
  assert.equal(res.json.stdout, `ran-${tag}\n`, 'the program ran once its start was found recorded');
  assert.equal(res.json.started, true);
  assert.equal(await startRecords(held.id), 0, 'no start record of its own: the retry wrote none');
});

test('a start no longer this instance\'s (another outcome stored meanwhile): the sandbox is cancelled unrun, and the client gets the stored outcome', async () => {
  const tag = crypto.randomBytes(4).toString('hex');
  const code = `echo ran-${tag}`;
  const { json: template } = await server.execute({ tool: 'shell', code: 'echo template' });
  let held;
  try {
    held = await heldStart(code);
    // another outcome, stored meanwhile (as a sweeper's would be: a whole Execution)
    await server.sql(`UPDATE executions SET status = 'failed', finished_at = now(),
        result = (SELECT result FROM executions WHERE id = ${lit(template.id)}) || jsonb_build_object(
          'id', id::text, 'status', 'failed', 'error', 'interrupted_before_start', 'exit_code', null,
          'stdout', '', 'stderr', 'taken-${tag}', 'started', false)
      WHERE id = ${lit(held.id)}`);
  } finally {
    await release();
  }
  const res = await held.pending;
  assert.ok(!res.text.includes(`ran-${tag}`), `the program ran: ${res.text.slice(0, 300)}`);
  assert.equal(res.status, 200, res.text.slice(0, 300));
  assert.equal(res.json.status, 'failed');
  assert.equal(res.json.stderr, `taken-${tag}`, 'the outcome stored first is the answer');
  const row = JSON.parse((await server.sql(`SELECT json_build_object('status', status, 'started', code_started_at IS NOT NULL,
    'late', late_result) FROM executions WHERE id = ${lit(held.id)}`)).trim());
  assert.equal(row.status, 'failed');
  assert.equal(row.started, false, 'never started');
  assert.ok(!JSON.stringify(row.late ?? {}).includes(`ran-${tag}`), `a late result with the program's output: ${JSON.stringify(row.late)}`);
  assert.equal(await startRecords(held.id), 0);
});

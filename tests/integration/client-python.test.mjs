// clients/python (issue 14): installed with `pip install ./clients/python` into a fresh venv
// with no package index (what a user behind a firewall does), then its own test suite
// (tests/clients/test_python_client.py) against this live server. Evidence: pip's exit and
// the import, and every Python test by name (a test lost at load time fails here too).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setup, ROOT, SLOW } from './harness.mjs';
import { APPROVAL_POLICY } from './fixtures/approval-helpers.mjs';

const run = promisify(execFile);
// A client of the server, not server code: the release lane runs it; under ASan it would repeat
// server paths the ASan lane's own files cover (execute, sessions, stream, approvals, mcp).
const SKIP = process.env.TOOLCAGE_IT_LABEL === 'asan' ? 'a client against the server: run in the release lane' : false;
const server = SKIP ? null : setup('client-python', { policy: APPROVAL_POLICY });
const venv = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-pyclient-'));
after(() => fs.rmSync(venv, { recursive: true, force: true }));
const PY = path.join(venv, 'bin/python');
const EXPECTED = [
  'test_a_call_may_outlast_the_client_timeout_up_to_its_limit',
  'test_egress_asks_listed_and_answers_checked', 'test_execute_returns_the_execution', 'test_executions_are_listed_page_by_page_for_this_tenant_only',
  'test_held_call_approved_then_denied', 'test_problems_are_typed_exceptions',
  'test_session_files_both_ways', 'test_session_keeps_state_until_closed', 'test_stream_and_reattach', 'test_submit_and_wait',
  'test_tools_for_a_model',
];

test('pip installs clients/python offline into a fresh venv', { skip: SKIP }, async () => {
  await run('/usr/bin/python3', ['-m', 'venv', venv]);
  // No index at all: the package and its build backend need nothing from one.
  await run(path.join(venv, 'bin/pip'), ['install', '--no-index', '--no-cache-dir', path.join(ROOT, 'clients/python')],
    { timeout: 120_000, env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1' } });
  const { stdout } = await run(PY, ['-c', 'import toolcage, os; print(toolcage.__version__, os.path.dirname(toolcage.__file__))'], { cwd: os.tmpdir() });
  assert.match(stdout, new RegExp(`^0\\.1\\.0 ${venv}/lib/python3[.0-9]*/site-packages/toolcage$`, 'm'), 'imported from the venv, not the checkout');
});

test('the Python client\'s own tests pass against this server', { skip: SKIP }, async () => {
  const env = {
    ...process.env,
    TOOLCAGE_URL: server.base,
    TOOLCAGE_AGENT_KEY: server.keys.agent,
    TOOLCAGE_REVIEWER_KEY: server.keys.reviewer,
    TOOLCAGE_OTHER_AGENT_KEY: server.keys.otherAgent,
  };
  let out;
  try {
    out = await run(PY, [path.join(ROOT, 'tests/clients/test_python_client.py')], { env, cwd: os.tmpdir(), timeout: 300_000 * SLOW });
  } catch (e) {
    assert.fail(`python tests failed (${e.code}):\n${e.stderr}\n${e.stdout}`);
  }
  const passed = [...out.stderr.matchAll(/^(test_\w+) \(.*\) \.\.\. ok$/gm)].map((m) => m[1]).sort();
  assert.deepEqual(passed, EXPECTED, out.stderr);
  assert.match(out.stderr, new RegExp(`Ran ${EXPECTED.length} tests`));
});

test('examples/agent_loop.py: a scripted model\'s tool call runs in toolcage and its answer comes back', { skip: SKIP }, async () => {
  const { stdout, stderr } = await run(PY, [path.join(ROOT, 'examples/agent_loop.py')], {
    env: { ...process.env, TOOLCAGE_URL: server.base, TOOLCAGE_KEY: server.keys.agent }, cwd: os.tmpdir(), timeout: 120_000 * SLOW,
  });
  assert.equal(stdout, 'The sum of 1..100 is 5050.\n', stderr);
  assert.match(stderr, /^tool shell: \{"status": "completed", "exit_code": 0, "stdout": "5050\\n"/m);
  const stored = (await server.sql("SELECT count(*) FROM executions WHERE request->>'code' LIKE 'echo $(( $(seq -s+ 1 100) ))' AND status = 'completed'")).trim();
  assert.ok(Number(stored) >= 1, 'the tool call is not stored');
});

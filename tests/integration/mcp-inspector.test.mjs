// A smoke test of /mcp with another client nobody here wrote: the MCP Inspector's CLI mode
// (@modelcontextprotocol/inspector), as a user would run it against `scripts/run`. Evidence:
// the tool list it prints and the output of a call it makes, stored as an execution.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { setup, ROOT, SLOW } from './harness.mjs';
import { getExecution } from './fixtures/approval-helpers.mjs';

// A client of the server, not server code: the release lane runs it; under ASan it would repeat
// server paths the ASan lane's own files cover (execute, sessions, stream, approvals, mcp).
const SKIP = process.env.TOOLCAGE_IT_LABEL === 'asan' ? 'a client against the server: run in the release lane' : false;
const server = SKIP ? null : setup('mcp-inspector');
const run = promisify(execFile);
const INSPECTOR = path.join(ROOT, 'tests/node_modules/.bin/mcp-inspector');

async function inspector(args) {
  const home = path.join(os.tmpdir(), `toolcage-inspector-${crypto.randomBytes(4).toString('hex')}`);
  const { stdout } = await run(INSPECTOR, ['--cli', `${server.base}/mcp`, '--transport', 'http',
    '--header', `Authorization: Bearer ${server.keys.agent}`, ...args], {
    timeout: 60_000 * SLOW,
    env: { ...process.env, HOME: home, MCP_CATALOG_PATH: path.join(home, 'mcp.json') },
  });
  return JSON.parse(stdout);
}

test('the MCP Inspector CLI lists the tools and calls one', { skip: SKIP }, async () => {
  const { tools } = await inspector(['--method', 'tools/list']);
  const names = tools.map((t) => t.name);
  assert.ok(names.includes('python') && names.includes('toolcage_wait'), names.join(', '));
  const t = crypto.randomBytes(4).toString('hex');
  const r = await inspector(['--method', 'tools/call', '--tool-name', 'python', '--tool-arg', `code=print("inspected-${t}")`]);
  assert.equal(r.isError, false, JSON.stringify(r).slice(0, 500));
  assert.match(r.content[0].text, new RegExp(`inspected-${t}`));
  const stored = await getExecution(server, r.structuredContent.id);
  assert.equal(stored.stdout, `inspected-${t}\n`);
});

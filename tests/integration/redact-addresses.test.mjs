// Redaction removes secrets, not ordinary output an agent needs to read (issue 21): loopback,
// link-local and documentation addresses pass by default, private ones do not, and a tool's
// policy chooses more classes (output.redact.enable). Evidence: the stdout the agent gets,
// the redaction counts of the result, and the audit record of the input.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setup, ROOT } from './harness.mjs';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-addr-'));
const policyPath = path.join(dir, 'policy.json');
const policy = JSON.parse(fs.readFileSync(path.join(ROOT, 'examples/policy.json'), 'utf8'));
policy.tools.strict = {
  ...policy.tools.shell,
  description: 'shell, with loopback and link-local addresses redacted too',
  output: { redact: { enable: ['loopback_ip', 'link_local_ip'] } },
};
fs.writeFileSync(policyPath, JSON.stringify(policy, null, 2));
const server = setup('redact-addresses', { policy: policyPath });
after(() => fs.rmSync(dir, { recursive: true, force: true }));

const LINE = 'proxy 127.0.0.1:3128 meta 169.254.169.254 v6 [::1]:8080 ll fe80::1:2:3:4 doc 192.0.2.7 2001:db8::5 lan 10.20.30.40 fd00:1:2:3::9';

test('by default only private addresses are redacted; loopback, link-local and documentation ones reach the agent', async () => {
  const r = (await server.execute({ tool: 'shell', code: 'cat', stdin: `${LINE}\n` })).json;
  assert.equal(r.stdout,
    'proxy 127.0.0.1:3128 meta 169.254.169.254 v6 [::1]:8080 ll fe80::1:2:3:4 doc 192.0.2.7 2001:db8::5 lan [REDACTED:private_ip] [REDACTED:private_ip]\n');
  assert.deepEqual(r.redactions, { private_ip: 2 });
});

test('a tool that enables loopback_ip and link_local_ip gets those redacted, with their own rule names', async () => {
  const r = (await server.execute({ tool: 'strict', code: 'cat', stdin: `${LINE}\n` })).json;
  assert.equal(r.stdout,
    'proxy [REDACTED:loopback_ip]:3128 meta [REDACTED:link_local_ip] v6 [[REDACTED:loopback_ip]]:8080 ll [REDACTED:link_local_ip] doc 192.0.2.7 2001:db8::5 lan [REDACTED:private_ip] [REDACTED:private_ip]\n');
  assert.deepEqual(r.redactions, { loopback_ip: 2, link_local_ip: 2, private_ip: 2 });
  // The audit record of the input is redacted by the same rules.
  const code = (await server.sql(`SELECT record->'params'->>'stdin' FROM audit_log WHERE action = 'execute' AND record->>'execution_id' = '${r.id}'`)).trim();
  assert.match(code, /\[REDACTED:loopback_ip\]:3128/);
  assert.doesNotMatch(code, /127\.0\.0\.1|169\.254/);
});

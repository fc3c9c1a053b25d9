// docs/policy.schema.json against the policy files the project ships and tests with: each
// one validates (and `toolcage policy check` accepts it), and the schema is not vacuous
// (broken variants of the example are rejected at the right place).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { ROOT, BIN, SLOW } from './harness.mjs';
import { writePolicy } from './secrets-helpers.mjs';

const execFileP = promisify(execFile);
const addFormats = addFormatsModule.default ?? addFormatsModule;

const schema = JSON.parse(fs.readFileSync(path.join(ROOT, 'docs/policy.schema.json'), 'utf8'));
// As the harness does for the OpenAPI document: draft 2020-12, formats checked, not strict
// (the schema's if/then branches name properties defined elsewhere, which strict mode flags).
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats(ajv);
const validate = ajv.compile(schema);

const fixtures = path.join(ROOT, 'tests/integration/fixtures');
const FILES = [
  'examples/policy.json',
  'tests/attacks/policy.json',
  ...fs.readdirSync(fixtures).filter((f) => f.endsWith('.json')).sort().map((f) => `tests/integration/fixtures/${f}`),
];

const fmt = (errors) => (errors || []).map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`).join('\n');

test('the schema is a draft 2020-12 schema for policy version 1', () => {
  assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
  assert.equal(schema.properties.version.const, 1);
  assert.ok(FILES.includes('tests/integration/fixtures/approval-policy.json'), FILES.join(', '));
});

for (const rel of FILES) {
  test(`${rel} validates against docs/policy.schema.json and passes policy check`, async () => {
    const policy = JSON.parse(fs.readFileSync(path.join(ROOT, rel), 'utf8'));
    assert.ok(validate(policy), `${rel}:\n${fmt(validate.errors)}`);
    assert.ok(Object.keys(policy.tools).length >= 1);
    const { stdout } = await execFileP(BIN, ['policy', 'check', path.join(ROOT, rel)], { timeout: 30_000 * SLOW });
    assert.equal(stdout, `ok: ${Object.keys(policy.tools).length} tools\n`);
  });
}

test('the credential broker tests\' generated policy validates too (credentials, tokens)', () => {
  const file = writePolicy();
  try {
    const policy = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert.ok(policy.tools.leaky.credentials.length >= 3);
    assert.ok(validate(policy), fmt(validate.errors));
  } finally {
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
});

test('broken variants of the example policy are rejected by the schema at the right path', () => {
  const base = JSON.parse(fs.readFileSync(path.join(ROOT, 'examples/policy.json'), 'utf8'));
  const variants = [
    ['an unknown top-level key', (p) => { p.bogus = 1; }, ''],
    ['version 2', (p) => { p.version = 2; }, '/version'],
    ['an unknown tool key', (p) => { p.tools.python.bogus = 1; }, '/tools/python'],
    ['a bad tool name', (p) => { p.tools['Bad Name'] = p.tools.shell; }, '/tools'],
    ['a relative command', (p) => { p.tools.shell.command = ['bash', '{code_file}']; }, '/tools/shell/command'],
    ['network "sometimes"', (p) => { p.tools.shell.network = 'sometimes'; }, '/tools/shell/network'],
    ['an invalid env name', (p) => { p.tools.python.env['1BAD'] = 'x'; }, '/tools/python/env'],
    ['a limit that is a string', (p) => { p.tools.python.limits.memory_mb = 'lots'; }, '/tools/python/limits/memory_mb'],
    ['a prescreen action that does not exist', (p) => { p.tools.python.prescreen.actions.low = 'ignore'; }, '/tools/python/prescreen/actions/low'],
    ['no tools', (p) => { p.tools = {}; }, '/tools'],
  ];
  for (const [what, mutate, where] of variants) {
    const p = structuredClone(base);
    mutate(p);
    assert.equal(validate(p), false, `${what}: the schema accepted it`);
    assert.ok(validate.errors.some((e) => e.instancePath === where || e.instancePath.startsWith(`${where}/`)),
      `${what}: no error at ${where || '/'}:\n${fmt(validate.errors)}`);
  }
});

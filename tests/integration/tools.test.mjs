// GET /v1/tools: what the policy declares, and nothing it should not show.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { setup, ROOT, LIMIT_NAMES } from './harness.mjs';

const server = setup();
const policy = JSON.parse(fs.readFileSync(path.join(ROOT, 'examples/policy.json'), 'utf8'));

test('lists exactly the tools of the policy file, sorted by name', async () => {
  const res = await server.request('GET', '/v1/tools', { key: server.keys.agent });
  assert.equal(res.status, 200);
  const names = res.json.tools.map((t) => t.name);
  assert.deepEqual(names, Object.keys(policy.tools).sort());
  assert.ok(names.includes('python') && names.includes('shell'));
});

test('each tool reports the declared description, language, backend, tier and network', async () => {
  const res = await server.request('GET', '/v1/tools', { key: server.keys.agent });
  for (const tool of res.json.tools) {
    const declared = policy.tools[tool.name];
    assert.equal(tool.description, declared.description, tool.name);
    assert.equal(tool.language, declared.language, tool.name);
    assert.equal(tool.backend, declared.backend ?? 'native', `${tool.name}: backend (default native)`);
    assert.equal(tool.irreversible, declared.irreversible ?? false, `${tool.name}: irreversible`);
    if (declared.tier) assert.equal(tool.tier, declared.tier, `${tool.name}: tier`);
    if (declared.network === 'none') assert.equal(tool.network, 'none', `${tool.name}: network`);
  }
});

test('every limit is reported with default <= max, matching the policy', async () => {
  const res = await server.request('GET', '/v1/tools', { key: server.keys.agent });
  for (const tool of res.json.tools) {
    assert.deepEqual(Object.keys(tool.limits).sort(), [...LIMIT_NAMES].sort(), tool.name);
    for (const name of LIMIT_NAMES) {
      const l = tool.limits[name];
      assert.ok(l.default >= 1 && l.default <= l.max, `${tool.name}.${name}: ${JSON.stringify(l)}`);
      const declared = policy.tools[tool.name].limits?.[name];
      if (typeof declared === 'object') assert.deepEqual(l, declared, `${tool.name}.${name}`);
      else if (typeof declared === 'number') assert.ok(l.max === declared || l.default === declared, `${tool.name}.${name}: ${JSON.stringify(l)} vs ${declared}`);
    }
  }
});

test('internals of the policy (command, env, mounts) are not exposed', async () => {
  const res = await server.request('GET', '/v1/tools', { key: server.keys.agent });
  assert.doesNotMatch(res.text, /PYTHONDONTWRITEBYTECODE|\/usr\/bin\/python3|code_file|"command"|"env"/);
});

test('the tool list needs a key', async () => {
  const res = await server.request('GET', '/v1/tools');
  assert.equal(res.status, 401);
});

// Bad input to POST /v1/execute and bad routes: each gives the right problem+json,
// and none of them hurts the server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setup, assertProblem } from './harness.mjs';

const server = setup();

const post = (body, opts = {}) =>
  server.request('POST', '/v1/execute', { key: server.keys.agent, body, ...opts });

function assertErrorAt(problem, pathPart) {
  assert.ok(Array.isArray(problem.errors) && problem.errors.length > 0, `errors[] missing: ${JSON.stringify(problem)}`);
  assert.ok(problem.errors.some((e) => e.path.includes(pathPart)),
    `no error at a path containing "${pathPart}": ${JSON.stringify(problem.errors)}`);
}

test('malformed JSON gives 400 invalid-json', async () => {
  const p = assertProblem(await post('{"tool": "python", "code": '), 400, 'invalid-json');
  assert.ok(p.detail.length > 0);
});

test('trailing garbage after the JSON object gives 400 invalid-json', async () => {
  assertProblem(await post('{"tool":"python","code":"print(1)"} x'), 400, 'invalid-json');
});

test('empty body gives 400 invalid-json', async () => {
  assertProblem(await post(''), 400, 'invalid-json');
});

test('an array instead of an object gives 400 validation', async () => {
  assertProblem(await post('[{"tool":"python","code":"print(1)"}]'), 400, 'validation');
});

test('a bare string or number instead of an object gives 400 validation', async () => {
  assertProblem(await post('"python"'), 400, 'validation');
  assertProblem(await post('42'), 400, 'validation');
});

test('wrong types give 400 validation listing each offending field', async () => {
  const p = assertProblem(await post(JSON.stringify({ tool: 5, code: ['print(1)'], stdin: true })), 400, 'validation');
  assertErrorAt(p, 'tool');
  assertErrorAt(p, 'code');
  assertErrorAt(p, 'stdin');
  assert.ok(p.errors.length >= 3, JSON.stringify(p.errors));
});

test('missing tool gives 400 validation at tool', async () => {
  assertErrorAt(assertProblem(await post(JSON.stringify({ code: 'print(1)' })), 400, 'validation'), 'tool');
});

test('missing code gives 400 validation at code', async () => {
  assertErrorAt(assertProblem(await post(JSON.stringify({ tool: 'python' })), 400, 'validation'), 'code');
});

test('an unknown top-level field gives 400 validation naming it', async () => {
  const p = assertProblem(await post(JSON.stringify({ tool: 'python', code: 'print(1)', sudo: true })), 400, 'validation');
  assertErrorAt(p, 'sudo');
});

test('an unknown field inside limits gives 400 validation naming it', async () => {
  const p = assertProblem(await post(JSON.stringify({ tool: 'python', code: 'print(1)', limits: { timeout_ms: 1000, gpus: 1 } })), 400, 'validation');
  assertErrorAt(p, 'gpus');
});

test('an unknown field inside a file entry gives 400 validation', async () => {
  const p = assertProblem(await post(JSON.stringify({ tool: 'python', code: 'print(1)', files: [{ path: 'a', content: 'b', mode: 511 }] })), 400, 'validation');
  assertErrorAt(p, 'mode');
});

test('zero, negative, fractional and string limits give 400 validation', async () => {
  for (const v of [0, -1, 1.5, '1000', null, 1e300]) {
    const res = await post(JSON.stringify({ tool: 'python', code: 'print(1)', limits: { timeout_ms: v } }));
    const p = assertProblem(res, 400, 'validation');
    assertErrorAt(p, 'timeout_ms');
  }
});

test('a limit above the policy maximum gives 422 limit-exceeds-policy', async () => {
  const tools = await server.request('GET', '/v1/tools', { key: server.keys.agent });
  const max = tools.json.tools.find((t) => t.name === 'python').limits.timeout_ms.max;
  const p = assertProblem(await post(JSON.stringify({ tool: 'python', code: 'print(1)', limits: { timeout_ms: max + 1 } })), 422, 'limit-exceeds-policy');
  // The client must be told which limit: in detail or in errors[].
  assert.ok(p.detail.includes('timeout_ms') || (p.errors || []).some((e) => e.path.includes('timeout_ms')),
    `422 does not say which limit: ${JSON.stringify(p)}`);
  // Exactly the maximum is allowed.
  const ok = await post(JSON.stringify({ tool: 'python', code: 'print(1)', limits: { timeout_ms: max } }));
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.json.limits.timeout_ms, max);
});

test('an unknown tool gives 404 unknown-tool', async () => {
  assertProblem(await post(JSON.stringify({ tool: 'nosuchtool', code: 'print(1)' })), 404, 'unknown-tool');
});

test('an ill-formed tool name gives 400 validation, not a lookup', async () => {
  for (const tool of ['', 'Python', '../python', 'py thon', 'a'.repeat(65), 'python\n']) {
    assertErrorAt(assertProblem(await post(JSON.stringify({ tool, code: 'print(1)' })), 400, 'validation'), 'tool');
  }
});

test('invalid UTF-8 bytes in the body give 400 invalid-encoding', async () => {
  const body = Buffer.concat([Buffer.from('{"tool":"python","code":"print(\''), Buffer.from([0xff, 0xfe, 0xc3, 0x28]), Buffer.from('\')"}')]);
  assertProblem(await post(body), 400, 'invalid-encoding');
  // An overlong encoding of "/" and a UTF-16 surrogate encoded in UTF-8 are invalid too.
  assertProblem(await post(Buffer.concat([Buffer.from('{"tool":"python","code":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')])), 400, 'invalid-encoding');
  assertProblem(await post(Buffer.concat([Buffer.from('{"tool":"python","code":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}')])), 400, 'invalid-encoding');
});

test('a NUL character (\\u0000) in code gives 400 validation', async () => {
  const p = assertProblem(await post('{"tool":"python","code":"print(1)\\u0000rm -rf /"}'), 400, 'validation');
  assertErrorAt(p, 'code');
});

const bigBody = () => Buffer.from(JSON.stringify({ tool: 'python', code: 'x'.repeat(4 * 1024 * 1024 + 16) }));

test('a body over 4 MiB gives 413 body-too-large', async () => {
  // The server answers 413 before it has read the body and closes; a client still sending
  // can see its send fail (EPIPE) and, rarely, lose the answer to the reset that follows
  // (libmicrohttpd 0.9.75 closes without a lingering drain). That is the only other outcome
  // allowed, and the answer must come at least once in eight tries (three were lost in a row
  // once under ASan with the other lane beside it).
  let res;
  for (let i = 0; i < 8 && !res; i++) {
    try {
      res = await server.curlRequest('POST', '/v1/execute', {
        headers: { authorization: `Bearer ${server.keys.agent}`, expect: '' },
        body: bigBody(),
      });
    } catch (e) {
      assert.match(e.message, /curl: \(55\) Send failure: (Broken pipe|Connection reset by peer)/);
    }
  }
  assert.ok(res, 'eight tries, no answer');
  assertProblem(res, 413, 'body-too-large');
});

test('with Expect: 100-continue an oversized body is refused before it is sent', async () => {
  const res = await server.curlRequest('POST', '/v1/execute', {
    headers: { authorization: `Bearer ${server.keys.agent}`, expect: '100-continue' },
    body: bigBody(),
  });
  assertProblem(res, 413, 'body-too-large');
});

test('a chunked body over 4 MiB (no Content-Length) gives 413 body-too-large', async () => {
  const res = await server.curlRequest('POST', '/v1/execute', {
    headers: { authorization: `Bearer ${server.keys.agent}`, 'transfer-encoding': 'chunked', expect: '' },
    body: bigBody(),
  });
  assertProblem(res, 413, 'body-too-large');
});

test('a body of exactly 4 MiB is accepted by the size check', async () => {
  const prefix = '{"tool":"python","code":"#';
  const suffix = '"}';
  const body = Buffer.from(prefix + 'x'.repeat(4 * 1024 * 1024 - prefix.length - suffix.length) + suffix);
  assert.equal(body.length, 4 * 1024 * 1024);
  const res = await server.curlRequest('POST', '/v1/execute', { headers: { authorization: `Bearer ${server.keys.agent}`, expect: '' }, body });
  // Not too large; the code field is over 1 MiB, so validation refuses it.
  assertErrorAt(assertProblem(res, 400, 'validation'), 'code');
});

test('code over 1 MiB (body under 4 MiB) gives 400 validation at code', async () => {
  const p = assertProblem(await post(JSON.stringify({ tool: 'python', code: '#'.repeat(1024 * 1024 + 1) })), 400, 'validation');
  assertErrorAt(p, 'code');
});

test('more than 64 files gives 400 validation', async () => {
  const files = Array.from({ length: 65 }, (_, i) => ({ path: `f${i}.txt`, content: 'x' }));
  assertErrorAt(assertProblem(await post(JSON.stringify({ tool: 'python', code: 'print(1)', files })), 400, 'validation'), 'files');
});

test('absolute and parent-escaping file paths give 400 validation', async () => {
  for (const p of ['/etc/passwd', '../escape', 'a/../../b', '', 'a\u0000b']) {
    const res = await post(JSON.stringify({ tool: 'python', code: 'print(1)', files: [{ path: p, content: 'x' }] }));
    assertErrorAt(assertProblem(res, 400, 'validation'), 'files');
  }
});

test('invalid base64 file content and an unknown encoding give 400 validation', async () => {
  assertProblem(await post(JSON.stringify({ tool: 'python', code: 'print(1)', files: [{ path: 'a', content: '!!!notbase64', encoding: 'base64' }] })), 400, 'validation');
  assertProblem(await post(JSON.stringify({ tool: 'python', code: 'print(1)', files: [{ path: 'a', content: 'x', encoding: 'latin1' }] })), 400, 'validation');
});

test('10000 nested arrays give 400, not a crash', async () => {
  const res = await post('['.repeat(10000) + ']'.repeat(10000));
  assert.equal(res.status, 400, res.text.slice(0, 300));
  assert.ok(['urn:toolcage:problem:invalid-json', 'urn:toolcage:problem:validation'].includes(res.json.type), res.json.type);
  const unterminated = await post('['.repeat(10000));
  assertProblem(unterminated, 400, 'invalid-json');
});

test('deep nesting inside a field gives 400, not a crash', async () => {
  const res = await post('{"tool":"python","code":"x","limits":' + '{"a":'.repeat(5000) + '1' + '}'.repeat(5001));
  assert.equal(res.status, 400, res.text.slice(0, 300));
});

test('duplicate keys are refused (no ambiguity about which value was approved)', async () => {
  const res = await post('{"tool":"python","code":"print(1)","code":"print(2)"}');
  assert.equal(res.status, 400, res.text.slice(0, 300));
});

test('an unknown route gives 404 not-found', async () => {
  assertProblem(await server.request('GET', '/v1/nope', { key: server.keys.agent }), 404, 'not-found');
  assertProblem(await server.request('GET', '/nope'), 404, 'not-found');
  assertProblem(await server.request('POST', '/v1/execute/extra', { key: server.keys.agent, body: '{}' }), 404, 'not-found');
});

test('a wrong method on a known path gives 405 with an Allow header', async () => {
  const r1 = await server.request('GET', '/v1/execute', { key: server.keys.agent });
  assertProblem(r1, 405, 'method-not-allowed');
  assert.match(r1.headers.get('allow'), /POST/);
  const r2 = await server.request('DELETE', '/v1/tools', { key: server.keys.agent });
  assertProblem(r2, 405, 'method-not-allowed');
  assert.match(r2.headers.get('allow'), /GET/);
  const r3 = await server.request('POST', '/healthz', { body: '{}' });
  assertProblem(r3, 405, 'method-not-allowed');
});

test('problem details never echo stack traces or internal paths', async () => {
  const res = await post('{"tool": 1}');
  assert.doesNotMatch(res.text, /\/work\/|\.c:\d+|0x[0-9a-f]{8,}/i);
});

test('after all the bad input the server still answers /healthz and executes', async () => {
  const h = await server.request('GET', '/healthz');
  assert.equal(h.status, 200);
  assert.deepEqual(h.json, { status: 'ok' });
  const { json: r } = await server.execute({ tool: 'python', code: 'print(6*7)' });
  assert.equal(r.stdout, '42\n');
});

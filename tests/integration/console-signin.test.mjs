// Console sign-in, over plain HTTP: the throttle cannot be raced (concurrent wrong passwords:
// at most TOOLCAGE_SIGNIN_MAX_FAILURES of them are evaluated per name), and cookies carry
// Secure by default unless the server listens on loopback (TOOLCAGE_COOKIE_SECURE overrides).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup } from './harness.mjs';
import { addUser, signIn } from './fixtures/console-http.mjs';

const MAX = 3;
const server = setup('console-signin', {
  serveEnv: { TOOLCAGE_SIGNIN_MAX_FAILURES: String(MAX), TOOLCAGE_SIGNIN_MAX_SOURCE_FAILURES: '1000' },
});

async function failures(name) {
  const out = (await server.sql(`SELECT record->>'reason', count(*) FROM audit_log
    WHERE action = 'console.signin_failed' AND record->'actor'->>'name' = '${name}' GROUP BY 1 ORDER BY 1`)).trim();
  return Object.fromEntries(out.split('\n').filter(Boolean).map((l) => { const [k, v] = l.split('|'); return [k, Number(v)]; }));
}

test(`concurrent wrong passwords: at most ${MAX} are evaluated, the rest are throttled`, async () => {
  const name = await addUser(server, `raced-${crypto.randomBytes(4).toString('hex')}`, 'reviewer');
  const N = 24;
  const results = await Promise.all(Array.from({ length: N }, (_, i) => signIn(server.base, name, `wrong-${i}`)));
  const statuses = results.map((r) => r.status).sort();
  assert.equal(statuses.filter((s) => s === 401).length, MAX, `statuses ${statuses}`);
  assert.equal(statuses.filter((s) => s === 429).length, N - MAX, `statuses ${statuses}`);
  // The evidence: the password was checked (and the failure recorded) exactly MAX times.
  assert.deepEqual(await failures(name), { bad_credentials: MAX, throttled: N - MAX });
  const attempts = Number((await server.sql(`SELECT count(*) FROM console_signin_attempts WHERE name = '${name}'`)).trim());
  assert.equal(attempts, MAX);
  // and the right password is refused too while the window lasts
  const right = await signIn(server.base, name);
  assert.equal(right.status, 429);
  assert.equal(right.session, null);
});

test('a right password after fewer failures signs in, and resets the count', async () => {
  const name = await addUser(server, `ok-${crypto.randomBytes(4).toString('hex')}`, 'reviewer');
  for (let i = 0; i < MAX - 1; i++) assert.equal((await signIn(server.base, name, 'nope')).status, 401);
  const ok = await signIn(server.base, name);
  assert.equal(ok.status, 303);
  assert.ok(ok.session);
  for (let i = 0; i < MAX - 1; i++) assert.equal((await signIn(server.base, name, 'nope')).status, 401);
  assert.equal((await signIn(server.base, name)).status, 303);
  assert.equal(Number((await server.sql(`SELECT count(*) FROM console_signin_attempts WHERE name = '${name}' AND ok`)).trim()), 2);
});

function secureFlags(setCookies) {
  return setCookies.map((c) => [c.split('=')[0], /;\s*Secure(;|$)/i.test(c)]);
}

test('cookies: no Secure on a loopback listener (plain-HTTP development, browser tests)', async () => {
  const name = await addUser(server, `loop-${crypto.randomBytes(4).toString('hex')}`, 'reviewer');
  const s = await signIn(server.base, name);
  assert.equal(s.status, 303);
  assert.deepEqual(secureFlags(s.formCookies), [['tc_signin', false]]);
  assert.deepEqual(secureFlags(s.setCookies).sort(), [['tc_session', false], ['tc_signin', false]]);
});

test('cookies: Secure by default on any other listener; TOOLCAGE_COOKIE_SECURE=0|1 decides when set', async () => {
  const name = await addUser(server, `wide-${crypto.randomBytes(4).toString('hex')}`, 'reviewer');
  for (const [listenHost, env, secure] of [
    ['0.0.0.0', {}, true],
    ['0.0.0.0', { TOOLCAGE_COOKIE_SECURE: '0' }, false],
    ['127.0.0.1', { TOOLCAGE_COOKIE_SECURE: '1' }, true],
  ]) {
    const peer = await server.peer(`console-signin-${listenHost === '0.0.0.0' ? 'wide' : 'loop'}-${secure}`, { listenHost, serveEnv: env });
    try {
      const s = await signIn(peer.base, name);
      assert.equal(s.status, 303, `${listenHost} ${JSON.stringify(env)}`);
      assert.deepEqual(secureFlags(s.formCookies), [['tc_signin', secure]], `${listenHost} ${JSON.stringify(env)}`);
      for (const [cookie, flag] of secureFlags(s.setCookies)) assert.equal(flag, secure, `${cookie} on ${listenHost} ${JSON.stringify(env)}`);
      for (const c of s.setCookies) assert.match(c, /HttpOnly; SameSite=Strict/);
    } finally {
      await peer.stop();
    }
  }
});

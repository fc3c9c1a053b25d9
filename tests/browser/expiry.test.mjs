// Session expiry: a server with a 2 s idle and a 6 s absolute limit.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup, sleep } from '../integration/harness.mjs';
import { addUser, launch, newContext, newPage, signIn, shot } from './lib.mjs';

// Registered before setup() so that the browser closes before the server stops.
let browser;
after(async () => { await browser?.close(); });
const server = setup('console-expiry');
server.env.TOOLCAGE_SESSION_IDLE_SECONDS = '2';
server.env.TOOLCAGE_SESSION_MAX_SECONDS = '6';
let user;

before(async () => {
  await server.ready();
  browser = await launch();
  user = await addUser(server, 'reviewer');
}, { timeout: 60_000 });

test('an idle session expires: the next page goes to sign-in', async () => {
  const ctx = await newContext(browser);
  const page = await newPage(ctx);
  await signIn(page, server.base, user);
  assert.match(page.url(), /\/console\/approvals$/);
  await sleep(3500);
  await page.goto(`${server.base}/console/executions`);
  assert.match(page.url(), /\/console\/signin\?expired=1$/);
  assert.match(await page.locator('main').textContent(), /session ended/);
  await shot(page, '14-session-expired');
  await ctx.close();
});

test('an active session still ends at its absolute limit', async () => {
  const ctx = await newContext(browser);
  const page = await newPage(ctx);
  await signIn(page, server.base, user);
  const start = Date.now();
  let expiredAt = null;
  while (Date.now() - start < 12_000) {
    await sleep(1000);
    await page.goto(`${server.base}/console/approvals`);
    if (/\/console\/signin/.test(page.url())) {
      expiredAt = Date.now() - start;
      break;
    }
  }
  assert.ok(expiredAt !== null, 'never expired');
  assert.ok(expiredAt >= 4000, `expired too early (${expiredAt} ms), idle expiry should not have hit`);
  await ctx.close();
});

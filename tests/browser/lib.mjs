// Browser test helpers: console users through the CLI, headless Chromium (playwright-core,
// Debian's /usr/bin/chromium), sign-in, screenshots into tests/artifacts/browser/.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { BIN, ROOT } from '../integration/harness.mjs';

export const ARTIFACTS = path.join(ROOT, 'tests/artifacts/browser');
export const PASSWORD = 'correct horse battery staple';
export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

/** `toolcage users add` with the password on stdin; resolves the unique name it created. */
export async function addUser(server, role, { name, password = PASSWORD } = {}) {
  // (CI once created these users in a tenant named "undefined": say so if it happens again)
  assert.equal(typeof server.tenants.a, 'string', `the server's tenants are not made yet: ${JSON.stringify(server.tenants)}`);
  const unique = name ?? `${role}-${crypto.randomBytes(4).toString('hex')}`;
  const child = spawn(BIN, ['users', 'add', '--name', unique, '--role', role, '--tenant', server.tenants.a], {
    env: { ...process.env, ...server.env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  child.stdin.end(`${password}\n`);
  const code = await new Promise((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, `users add ${unique}: ${out}`);
  return unique;
}

export async function launch() {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic'],
  });
}

/**
 * A fresh browser context at 1280x800 whose pages record every dialog (an XSS that ran would
 * open one) and every console message (Chromium reports CSP violations there).
 */
export async function newContext(browser) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  ctx.dialogs = [];
  ctx.consoleMessages = [];
  ctx.on('page', (p) => watch(ctx, p));
  return ctx;
}

function watch(ctx, page) {
  page.on('dialog', async (d) => { ctx.dialogs.push(d.message()); await d.dismiss().catch(() => {}); });
  page.on('console', (m) => ctx.consoleMessages.push(m.text()));
}

export async function newPage(ctx) {
  const page = await ctx.newPage();
  if (!page.__watched) page.__watched = true;
  return page;
}

export async function signIn(page, base, name, password = PASSWORD) {
  await page.goto(`${base}/console/signin`);
  await page.getByLabel('Name').fill(name);
  await page.getByLabel('Password').fill(password);
  const [res] = await Promise.all([
    page.waitForNavigation(),
    page.getByRole('button', { name: 'Sign in' }).click(),
  ]);
  return res;
}

export async function shot(page, name) {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** The CSRF token of the signed-in page (every form carries it). */
export async function csrfOf(page) {
  return page.locator('input[name=csrf]').first().getAttribute('value');
}

/** Asserts that nothing the model wrote became markup or ran. */
export async function assertNoInjection(page, ctx, { figures = 0 } = {}) {
  // The only images a page may hold: the figures an execution returned (figure.output, a
  // data: PNG), exactly as many as the caller expects.
  const figs = await page.locator('figure.output > img[src^="data:image/png;base64,"]').count();
  assert.equal(figs, figures, 'figures on the page');
  const injected = await page.evaluate(() => ({
    scripts: document.querySelectorAll('script').length,
    imgs: document.querySelectorAll('img').length - document.querySelectorAll('figure.output > img[src^="data:image/png;base64,"]').length,
    iframes: document.querySelectorAll('iframe, object, embed').length,
    handlers: [...document.querySelectorAll('*')].filter((e) => [...e.attributes].some((a) => /^on/i.test(a.name))).length,
    jsLinks: [...document.querySelectorAll('[href], [src], [action]')]
      .filter((e) => /^\s*javascript:/i.test(e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('action') || '')).length,
    pwned: window.__pwned === true,
  }));
  assert.deepEqual(injected, { scripts: 0, imgs: 0, iframes: 0, handlers: 0, jsLinks: 0, pwned: false },
    `injection on ${page.url()}`);
  assert.deepEqual(ctx.dialogs, [], 'a dialog opened: script ran');
}

/** A held call of the demo's irreversible `deploy` tool; resolves the 202 body. */
export async function holdCall(server, payload) {
  const res = await fetch(`${server.base}/v1/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${server.keys.agent}`, 'content-type': 'application/json' },
    body: JSON.stringify({ tool: 'deploy', ...payload }),
  });
  const body = await res.json();
  assert.equal(res.status, 202, JSON.stringify(body));
  return body;
}

export async function getExecution(server, id, wait = 0) {
  const res = await fetch(`${server.base}/v1/executions/${id}${wait ? `?wait=${wait}` : ''}`, {
    headers: { authorization: `Bearer ${server.keys.agent}` },
  });
  return res.json();
}

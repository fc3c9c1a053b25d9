// The web console in headless Chromium: sign-in, the approvals queue, approve and deny,
// untrusted text shown as text under a strict CSP, CSRF, roles, keyboard and labels.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setup } from '../integration/harness.mjs';
import {
  addUser, launch, newContext, newPage, signIn, shot, csrfOf, assertNoInjection, holdCall,
  getExecution, PASSWORD,
} from './lib.mjs';

// Registered before setup() so that the browser closes before the server stops.
let browser;
after(async () => { await browser?.close(); });
const server = setup('console');
const users = {};

const XSS = {
  img: '<img src=x onerror="window.__pwned=true;alert(1)">',
  script: '"><script>window.__pwned=true;alert(1)</script>',
  textarea: '</textarea><script>alert(1)</script>',
  js: 'javascript:alert(1)',
};
const CODE = [
  `echo '${XSS.img.replaceAll("'", '')}'`,
  `echo '${XSS.script}'`,
  'wc -l < /etc/passwd',
  `# ${XSS.textarea}`,
  'echo deployed',
].join('\n');

before(async () => {
  await server.ready();
  browser = await launch();
  users.reviewer = await addUser(server, 'reviewer');
  users.auditor = await addUser(server, 'auditor');
  users.admin = await addUser(server, 'admin');
  users.throttled = await addUser(server, 'reviewer');
}, { timeout: 120_000 });


async function reviewerPage() {
  const ctx = await newContext(browser);
  const page = await newPage(ctx);
  await signIn(page, server.base, users.reviewer);
  assert.match(page.url(), /\/console\/approvals$/);
  return { ctx, page };
}

test('sign-in: labelled form, wrong password refused, then the approvals queue', async () => {
  const ctx = await newContext(browser);
  const page = await newPage(ctx);
  const res = await page.goto(`${server.base}/console/signin`);
  const h = res.headers();
  assert.match(h['content-security-policy'], /default-src 'none'/);
  assert.match(h['content-security-policy'], /frame-ancestors 'none'/);
  assert.doesNotMatch(h['content-security-policy'], /unsafe-inline|script-src/);
  assert.equal(h['x-content-type-options'], 'nosniff');
  assert.equal(h['x-frame-options'], 'DENY');
  assert.ok(h['referrer-policy']);
  await shot(page, '01-signin');
  const bad = await signIn(page, server.base, users.reviewer, 'not the password');
  assert.equal(bad.status(), 401);
  assert.match(await page.locator('#signin-error').textContent(), /Wrong name or password/);
  await shot(page, '02-signin-failed');
  const ok = await signIn(page, server.base, users.reviewer);
  assert.equal(ok.status(), 200);
  assert.match(page.url(), /\/console\/approvals$/);
  const cookies = await ctx.cookies();
  const session = cookies.find((c) => c.name === 'tc_session');
  assert.ok(session, 'session cookie set');
  assert.equal(session.httpOnly, true);
  assert.equal(session.sameSite, 'Strict');
  assert.equal(session.path, '/console');
  await ctx.close();
});

test('approvals queue: pending first, oldest first, with tool, tier, requester, findings, time left', async () => {
  const ids = [];
  for (let i = 0; i < 3; i++) ids.push((await holdCall(server, { code: `echo queued ${i}` })).approval_id);
  const { ctx, page } = await reviewerPage();
  await page.goto(`${server.base}/console/approvals?status=pending`);
  const rows = await page.locator('#approvals tbody tr[data-id]').evaluateAll((trs) => trs.map((tr) => tr.dataset.id));
  const mine = rows.filter((id) => ids.includes(id));
  assert.deepEqual(mine, ids, 'oldest first');
  const cells = await page.locator(`#approvals tr[data-id="${ids[0]}"] td`).allTextContents();
  assert.equal(cells[0].trim(), 'deploy');
  assert.equal(cells[1].trim(), 'human_approve');
  assert.match(cells[3], /tc_[\w-]+/);
  assert.match(cells[6], /min/);
  await page.goto(`${server.base}/console/approvals`);
  const all = await page.locator('#approvals tbody tr[data-id]').evaluateAll((trs) => trs.map((tr) => tr.className));
  const firstDone = all.findIndex((c) => !c.includes('pending'));
  if (firstDone >= 0) assert.ok(all.slice(firstDone).every((c) => !c.includes('pending')), 'pending rows come first');
  await shot(page, '03-approvals-queue');
  await ctx.close();
});

test('detail shows untrusted code, stdin, file names as text with line numbers and findings; approve completes the long-poll', async () => {
  const held = await holdCall(server, {
    code: CODE,
    stdin: `${XSS.textarea}${XSS.img}`,
    files: [{ path: `a${XSS.img.replace(/[ "=/;()]/g, '_')}.txt`, content: XSS.script }, { path: 'javascript:alert(1)', content: XSS.js }],
  });
  const { ctx, page } = await reviewerPage();
  await page.goto(`${server.base}/console/approvals/${held.approval_id}`);
  await assertNoInjection(page, ctx);
  // The code, line by line, exactly as text.
  const lines = await page.locator('table.code td.src code').allTextContents();
  assert.deepEqual(lines, CODE.split('\n'));
  const numbers = await page.locator('table.code th.ln').allTextContents();
  assert.deepEqual(numbers.map(Number), [1, 2, 3, 4, 5]);
  // The pre-screen finding sits on its line.
  assert.equal(await page.locator('#L3.flagged .finding').count(), 1);
  assert.match(await page.locator('#L3 .finding').textContent(), /system_passwd_read/);
  assert.equal(await page.locator('tr.flagged').count(), 1);
  assert.equal(await page.locator('#stdin-text').textContent(), `${XSS.textarea}${XSS.img}`);
  const fileNames = await page.locator('h3.filename code').allTextContents();
  assert.ok(fileNames.includes('javascript:alert(1)'));
  assert.match(await page.locator('#payload-hash').textContent(), /^[0-9a-f]{64}$/);
  assert.match(await page.locator('#h-policy').locator('..').textContent(), /none \(loopback only\)/);
  await shot(page, '04-approval-detail');

  // The agent waits; the reviewer approves; the wait ends with the result.
  const poll = getExecution(server, held.id, 30);
  await new Promise((r) => setTimeout(r, 300));
  await Promise.all([page.waitForNavigation(), page.locator('#approve').click()]);
  assert.match(await page.locator('#flash').textContent(), /Approved/);
  const done = await poll;
  assert.equal(done.status, 'completed', JSON.stringify(done));
  assert.match(done.stdout, /deployed/);
  await page.goto(`${server.base}/console/executions/${held.id}`);
  await assertNoInjection(page, ctx);
  assert.equal(await page.locator('#execution-status').textContent(), 'completed');
  assert.match(await page.locator('#stdout-text').textContent(), /<img src=x onerror=/);
  await shot(page, '05-execution-detail');
  await page.goto(`${server.base}/console/executions`);
  await assertNoInjection(page, ctx);
  await shot(page, '06-executions');
  await ctx.close();
});

test('a figure the code drew with matplotlib shows on the execution page, under the CSP', async () => {
  const e = (await server.execute({ tool: 'python', code: 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()\n', limits: { timeout_ms: 30000 } })).json;
  assert.equal(e.status, 'completed', e.stderr);
  assert.equal(e.outputs.length, 1);
  const { ctx, page } = await reviewerPage();
  await page.goto(`${server.base}/console/executions/${e.id}`);
  await assertNoInjection(page, ctx, { figures: 1 });
  const img = page.locator('figure.output img');
  assert.equal(await img.count(), 1);
  const size = await img.evaluate((el) => el.decode().then(() => [el.naturalWidth, el.naturalHeight]));
  assert.deepEqual(size, [640, 480]);
  await shot(page, '07-execution-figure');
  await ctx.close();
});

test('collect patterns from the request render as text on the approval page; nothing runs', async () => {
  // Valid patterns (relative, no '..' part, 1..256 bytes) that are markup.
  const collect = [XSS.img, XSS.script, XSS.textarea, XSS.js, `out/${XSS.img}*.txt`];
  for (const p of collect) {
    assert.ok(!p.startsWith('/') && !p.split('/').includes('..') && Buffer.byteLength(p) <= 256, p);
  }
  const held = await holdCall(server, { code: 'echo collect', collect });
  const { ctx, page } = await reviewerPage();
  const res = await page.goto(`${server.base}/console/approvals/${held.approval_id}`);
  assert.equal(res.status(), 200);
  await assertNoInjection(page, ctx);
  // Exactly the patterns, in order, as text.
  assert.deepEqual(await page.locator('p.collect code').allTextContents(), collect);
  assert.equal(await page.locator('#h-collect + p.hint').count(), 0, 'not the "None" hint');
  // Escaped in the markup the server sent, not just neutralised by the CSP.
  const html = await res.text();
  for (const p of collect.filter((x) => x.includes('<'))) assert.ok(!html.includes(p), `served unescaped: ${p}`);
  assert.ok(html.includes('&lt;img src=x onerror='), 'the payload is there, escaped');
  await shot(page, '04b-approval-collect');
  await ctx.close();
});

test('deny needs a reason; the reason is stored and shown as text; the agent sees denied', async () => {
  const held = await holdCall(server, { code: 'echo deny me' });
  const { ctx, page } = await reviewerPage();
  await page.goto(`${server.base}/console/approvals/${held.approval_id}`);
  const csrf = await csrfOf(page);
  // Without a reason (bypassing the browser's `required`): refused, still pending.
  const empty = await page.request.post(`${server.base}/console/approvals/${held.approval_id}/deny`, {
    form: { csrf, reason: '   ' }, maxRedirects: 0,
  });
  assert.equal(empty.status(), 400);
  assert.match(await empty.text(), /reason is required/);
  assert.equal((await getExecution(server, held.id)).status, 'pending_approval');
  // With a hostile reason.
  const reason = `too risky ${XSS.img} ${XSS.script}`;
  await page.getByLabel(/Reason for denying/).fill(reason);
  await Promise.all([page.waitForNavigation(), page.locator('#deny').click()]);
  assert.match(await page.locator('#flash').textContent(), /Denied/);
  await assertNoInjection(page, ctx);
  assert.equal(await page.locator('#decisions td.reason').first().textContent(), reason);
  const ex = await getExecution(server, held.id);
  assert.equal(ex.status, 'denied');
  await shot(page, '07-denied');
  await ctx.close();
});

test('CSRF: POSTs without the token, with a wrong one, or from another origin are refused', async () => {
  const held = await holdCall(server, { code: 'echo csrf' });
  const { ctx, page } = await reviewerPage();
  await page.goto(`${server.base}/console/approvals/${held.approval_id}`);
  const csrf = await csrfOf(page);
  const url = `${server.base}/console/approvals/${held.approval_id}/approve`;
  for (const form of [{}, { csrf: '' }, { csrf: 'x'.repeat(43) }, { csrf: csrf.slice(0, -1) }]) {
    const r = await page.request.post(url, { form, maxRedirects: 0 });
    assert.equal(r.status(), 403, `form ${JSON.stringify(form)}`);
  }
  const cross = await page.request.post(url, { form: { csrf }, headers: { origin: 'http://evil.example' }, maxRedirects: 0 });
  assert.equal(cross.status(), 403);
  // Sign-out is a state change too.
  const so = await page.request.post(`${server.base}/console/signout`, { form: {}, maxRedirects: 0 });
  assert.equal(so.status(), 403);
  assert.equal((await getExecution(server, held.id)).status, 'pending_approval');
  // A plain fetch from Node with the session cookie but no token.
  const cookie = (await ctx.cookies()).find((c) => c.name === 'tc_session');
  const r = await fetch(url, { method: 'POST', redirect: 'manual', headers: { cookie: `tc_session=${cookie.value}`, 'content-type': 'application/x-www-form-urlencoded' }, body: '' });
  assert.equal(r.status, 403);
  assert.equal((await getExecution(server, held.id)).status, 'pending_approval');
  await ctx.close();
});

test('an auditor reads but cannot decide; a forged approve is refused; audit and dashboard render', async () => {
  const held = await holdCall(server, { code: 'echo auditor' });
  const ctx = await newContext(browser);
  const page = await newPage(ctx);
  await signIn(page, server.base, users.auditor);
  assert.match(page.url(), /\/console\/dashboard$/);
  await page.goto(`${server.base}/console/approvals/${held.approval_id}`);
  assert.equal(await page.locator('#approve').count(), 0);
  assert.equal(await page.locator('#deny').count(), 0);
  assert.equal(await page.locator('#no-decide').count(), 1);
  const csrf = await csrfOf(page); // the auditor's own, valid token (sign-out form)
  const r = await page.request.post(`${server.base}/console/approvals/${held.approval_id}/approve`, { form: { csrf }, maxRedirects: 0 });
  assert.equal(r.status(), 403);
  assert.equal((await getExecution(server, held.id)).status, 'pending_approval');
  await shot(page, '08-auditor-approval');

  await page.goto(`${server.base}/console/audit`);
  assert.match(await page.locator('#verdict').textContent(), /Verified/);
  // one walk of the chain serves page loads for a minute, and says how old it is
  const checked = Number((await page.locator('#verdict').textContent()).match(/the hash chain of (\d+) records/)[1]);
  assert.match(await page.locator('#verdict-age').textContent(), /^Checked \d+ s ago/);
  const newest = async () => Number(await page.locator('#audit tbody tr td').first().textContent());
  await server.execute({ tool: 'python', code: 'print(1)' }); // appends audit records
  await page.reload();
  assert.equal(Number((await page.locator('#verdict').textContent()).match(/the hash chain of (\d+) records/)[1]), checked,
    'a reload within the minute reuses the verdict');
  assert.ok(await newest() > checked, 'the table shows records newer than the verdict');
  assert.ok(await page.locator('#audit tbody tr').count() > 3);
  // the denial reason with markup, and sign-ins, are in the trail as text
  assert.ok(await page.locator('#audit td.reason', { hasText: '<img src=x' }).count() >= 1);
  await assertNoInjection(page, ctx);
  await shot(page, '09-audit');
  // Filters round-trip as text and into export links percent-encoded, never as javascript:.
  await page.goto(`${server.base}/console/audit?q=${encodeURIComponent(XSS.js)}&tool=${encodeURIComponent(XSS.script.slice(0, 60))}`);
  await assertNoInjection(page, ctx);
  assert.equal(await page.getByLabel('Text').inputValue(), XSS.js);
  const href = await page.locator('#export-jsonl').getAttribute('href');
  assert.match(href, /^\/console\/audit\/export\?format=jsonl&q=javascript%3Aalert%281%29/);
  await page.goto(`${server.base}/console/audit?action=console.signin`);
  assert.ok(await page.locator('#audit tbody tr', { hasText: 'console.signin' }).count() >= 1, await page.locator('#audit').innerHTML());
  const exp = await page.request.get(`${server.base}/console/audit/export?format=jsonl`);
  assert.equal(exp.status(), 200);
  assert.match(exp.headers()['content-type'], /ndjson/);
  assert.match(await exp.text(), /"action": ?"console\.signin"/);

  await page.goto(`${server.base}/console/dashboard`);
  assert.ok(await page.locator('#chart-hourly rect').count() >= 1);
  assert.equal(await page.locator('#chart-gate rect').count(), 4);
  assert.equal(await page.locator('#chart-latency rect').count(), 3);
  // The tenant's quota and use: the server's defaults here (32 at once, no other limit).
  assert.deepEqual(await page.locator('#quota tbody tr').evaluateAll((trs) => trs.map((tr) => tr.dataset.limit)),
    ['max_concurrent', 'rate_per_minute', 'cpu_seconds_per_day', 'wall_seconds_per_day', 'max_sessions']);
  assert.match(await page.locator('#quota tr[data-limit="max_concurrent"]').innerText(), /running\s+32 \(default\)/);
  assert.match(await page.locator('#quota tr[data-limit="max_sessions"]').innerText(), /\d+ open\s+8 \(default\)/);
  assert.match(await page.locator('#quota tr[data-limit="cpu_seconds_per_day"]').innerText(), /s used\s+no limit/);
  await shot(page, '10-dashboard');
  // Admin-only pages are closed to auditors.
  const sec = await page.goto(`${server.base}/console/admin/secrets`);
  assert.equal(sec.status(), 403);
  await ctx.close();
});

test('secrets: an admin sees names and metadata only; a reviewer sees no secret page at all', async () => {
  const canary = `CANARY-${Date.now()}`;
  const exists = (await server.sql("SELECT to_regclass('secrets') IS NOT NULL")).trim() === 't';
  const tenantId = (await server.sql(`SELECT id FROM tenants WHERE name = '${server.tenants.a}'`)).trim();
  if (exists) {
    await server.sql(`INSERT INTO secrets (tenant_id, name, ciphertext, nonce, key_id, description, max_ttl_seconds)
      VALUES ('${tenantId}', 'deploy-token', convert_to('${canary}', 'UTF8'), decode(repeat('00', 24), 'hex'),
              '0123456789abcdef', 'token for <b>deploys</b>', 300)`);
  }
  const ctx = await newContext(browser);
  const page = await newPage(ctx);
  await signIn(page, server.base, users.admin);
  await page.goto(`${server.base}/console/admin/secrets`);
  const html = await page.content();
  assert.ok(!html.includes(canary), 'the sealed value (or its bytes) never appears');
  if (exists) {
    assert.equal(await page.locator('#secrets td code').first().textContent(), 'deploy-token');
    assert.ok(html.includes('token for &lt;b&gt;deploys&lt;/b&gt;'));
  }
  await assertNoInjection(page, ctx);
  await shot(page, '11-admin-secrets');
  await page.goto(`${server.base}/console/admin/users`);
  assert.ok(await page.locator('#users td', { hasText: users.reviewer }).count() === 1);
  await shot(page, '12-admin-users');
  await ctx.close();

  const { ctx: rctx, page: rpage } = await reviewerPage();
  const res = await rpage.goto(`${server.base}/console/admin/secrets`);
  assert.equal(res.status(), 403);
  for (const p of ['/console/approvals', '/console/executions']) {
    await rpage.goto(server.base + p);
    assert.ok(!(await rpage.content()).includes(canary));
  }
  await rctx.close();
});

test('keyboard: Tab reaches every control in order; every field has a label', async () => {
  const held = await holdCall(server, { code: 'echo keys' });
  const { ctx, page } = await reviewerPage();
  await page.goto(`${server.base}/console/approvals/${held.approval_id}`);
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
    .filter((e) => e.labels.length === 0 && !e.getAttribute('aria-label')).map((e) => e.outerHTML));
  assert.deepEqual(unlabelled, []);
  const seen = [];
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press('Tab');
    const desc = await page.evaluate(() => {
      const e = document.activeElement;
      return e ? `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}:${(e.textContent || '').trim().slice(0, 30)}` : '';
    });
    seen.push(desc);
  }
  const idx = (re) => seen.findIndex((s) => re.test(s));
  const order = [/^a:Skip to content/, /^a:Approvals/, /^a:Executions/, /^button:Sign out/, /^button#approve/, /^textarea#reason/, /^button#deny/];
  const positions = order.map(idx);
  assert.ok(positions.every((p) => p >= 0), `not all reached: ${JSON.stringify(seen)}`);
  assert.deepEqual([...positions].sort((a, b) => a - b), positions, `out of order: ${JSON.stringify(seen)}`);
  // Deny by keyboard alone.
  await page.locator('#reason').focus();
  await page.keyboard.type('denied from the keyboard');
  await page.keyboard.press('Tab');
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
  assert.match(await page.locator('#flash').textContent(), /Denied/);
  for (const p of ['/console/signin']) {
    const c2 = await newContext(browser);
    const p2 = await newPage(c2);
    await p2.goto(server.base + p);
    assert.equal(await p2.evaluate(() => [...document.querySelectorAll('input:not([type=hidden])')].filter((e) => e.labels.length === 0).length), 0);
    await c2.close();
  }
  await ctx.close();
});

test('CSP holds even if markup were injected: an inline handler does not run and is reported', async () => {
  const { ctx, page } = await reviewerPage();
  await page.goto(`${server.base}/console/executions`);
  await page.evaluate(() => {
    const d = document.createElement('div');
    d.innerHTML = '<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" onload="window.__pwned=true" onerror="window.__pwned=true">';
    document.body.appendChild(d);
  });
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(await page.evaluate(() => window.__pwned === true), false);
  assert.ok(ctx.consoleMessages.some((m) => /Content Security Policy/i.test(m)), `no CSP report: ${ctx.consoleMessages.join(' | ')}`);
  assert.deepEqual(ctx.dialogs, []);
  await ctx.close();
});

test('sign-out ends the session; the old cookie is refused', async () => {
  const { ctx, page } = await reviewerPage();
  const cookie = (await ctx.cookies()).find((c) => c.name === 'tc_session');
  await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Sign out' }).click()]);
  assert.match(page.url(), /\/console\/signin$/);
  const r = await fetch(`${server.base}/console/approvals`, { redirect: 'manual', headers: { cookie: `tc_session=${cookie.value}` } });
  assert.equal(r.status, 303);
  assert.match(r.headers.get('location'), /\/console\/signin/);
  await ctx.close();
});

test('sign-in throttling: after 5 failures for a name even the right password is refused (429)', async () => {
  const ctx = await newContext(browser);
  const page = await newPage(ctx);
  for (let i = 0; i < 5; i++) {
    const r = await signIn(page, server.base, users.throttled, `wrong-${i}`);
    assert.equal(r.status(), 401);
  }
  const r = await signIn(page, server.base, users.throttled, PASSWORD);
  assert.equal(r.status(), 429);
  assert.match(await page.locator('#signin-error').textContent(), /Too many failed sign-ins/);
  assert.ok(r.headers()['retry-after']);
  await shot(page, '13-signin-throttled');
  // Another user from the same address is not locked out by it.
  const ok = await signIn(page, server.base, users.reviewer);
  assert.equal(ok.status(), 200);
  await ctx.close();
});

// The reviewer sees what runs (issue 11): Trojan Source bidi controls, zero-width and other
// invisible characters in code, stdin and files are visible markers (never the raw character),
// base64 files that are text are shown as text with their findings, and binary files as a hex
// view with their size and SHA-256.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { setup } from '../integration/harness.mjs';
import { addUser, launch, newContext, newPage, signIn, shot, assertNoInjection, holdCall } from './lib.mjs';

let browser;
after(async () => { await browser?.close(); });
const server = setup('console-hidden');
let user;

before(async () => {
  await server.ready();
  browser = await launch();
  user = await addUser(server, 'reviewer');
}, { timeout: 120_000 });

const RLO = '\u202e', LRI = '\u2066', PDI = '\u2069', ZWSP = '\u200b', LS = '\u2028';
const TAGS = '\u{E0069}\u{E0064}'; // invisible "id"
const HANGUL = '\u3164';
// Line 2 reads as a comment about the admin check in an editor that obeys the controls.
const CODE = [
  'access="user"',
  `if [ "$access" != "none${RLO} ${LRI}# admin check${PDI} ${LRI}" ]; then echo granted; fi`,
  `is${ZWSP}admin=false`,
  'echo done',
].join('\n');
const STDIN = `first line${LS}second${TAGS}\n`;
const SCRIPT = `#!/bin/bash\necho setup ${HANGUL}\ncat ~/.ssh/id_rsa\n`;
const ELF = Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]), Buffer.from('<script>alert(1)</script>'), Buffer.alloc(40, 0xff)]);
const RAW = [RLO, LRI, PDI, ZWSP, LS, HANGUL, '\u{E0069}'];

test('bidi and invisible characters are visible markers in code, stdin, files; files that are text are shown; binary as hex, size and SHA-256', async () => {
  const held = await holdCall(server, {
    code: CODE,
    stdin: STDIN,
    files: [
      { path: 'setup.sh', content: Buffer.from(SCRIPT).toString('base64'), encoding: 'base64' },
      { path: 'tool.bin', content: ELF.toString('base64'), encoding: 'base64' },
    ],
  });
  // the pre-screen flagged them in the API already
  const rules = held.findings.map((f) => `${f.source}:${f.rule}`);
  for (const want of ['code:bidi_control', 'code:invisible_character', 'file:hidden_text', 'file:credential_read', 'file:opaque_executable', 'stdin:invisible_character']) {
    assert.ok(rules.includes(want), `${want} in ${JSON.stringify(rules)}`);
  }

  const ctx = await newContext(browser);
  const page = await newPage(ctx);
  await signIn(page, server.base, user);
  const res = await page.goto(`${server.base}/console/approvals/${held.approval_id}`);
  assert.equal(res.status(), 200);
  await assertNoInjection(page, ctx);

  // No raw control or invisible character anywhere in the page the server sent.
  const html = await res.text();
  for (const ch of RAW) assert.ok(!html.includes(ch), `raw U+${ch.codePointAt(0).toString(16)} in the page`);

  // Code: line 2 shows the controls as visible, labelled markers.
  const line2 = page.locator('#L2 td.src code');
  const markers = await line2.locator('.uc.uc-bidi').allTextContents();
  assert.deepEqual(markers, ['\u27eaU+202E\u27eb', '\u27eaU+2066\u27eb', '\u27eaU+2069\u27eb', '\u27eaU+2066\u27eb']);
  const rlo = line2.locator('.uc.uc-bidi').first();
  assert.ok(await rlo.isVisible());
  const box = await rlo.boundingBox();
  assert.ok(box && box.width > 10 && box.height > 5, `the marker takes room on screen: ${JSON.stringify(box)}`);
  assert.equal(await rlo.getAttribute('title'), 'U+202E RIGHT-TO-LEFT OVERRIDE');
  // The reader sees the text in storage order: "none" then the markers then the comment.
  assert.match(await line2.innerText(), /none⟪U\+202E⟫ ⟪U\+2066⟫# admin check⟪U\+2069⟫ ⟪U\+2066⟫/);
  assert.match(await page.locator('#L2 .finding').textContent(), /bidi_control/);
  assert.equal(await page.locator('#L3 td.src .uc-invisible').textContent(), '\u27eaU+200B\u27eb');
  assert.match(await page.locator('#L3 .finding').textContent(), /invisible_character/);

  // stdin: the line separator and the tag characters are visible.
  const stdin = page.locator('#stdin-text');
  assert.equal(await stdin.locator('.uc-separator').textContent(), '\u27eaU+2028\u27eb');
  assert.deepEqual(await stdin.locator('.uc-tag').allTextContents(), ['\u27eaU+E0069\u27eb', '\u27eaU+E0064\u27eb']);

  // The base64 script is shown as text, line by line, with its findings on their lines.
  const f0 = page.locator('#f0-file');
  assert.match(await f0.locator('h3').textContent(), /setup\.sh.*decoded from base64/s);
  assert.equal(await f0.locator('#f0-L3 td.src code').textContent(), 'cat ~/.ssh/id_rsa');
  assert.match(await f0.locator('#f0-L3 .finding').textContent(), /credential_read/);
  assert.equal(await f0.locator('#f0-L2 .uc-filler').textContent(), '\u27eaU+3164\u27eb');
  assert.match(await f0.locator('#f0-L2 .finding').textContent(), /hidden_text/);
  assert.equal(await f0.locator('text=Binary content').count(), 0, 'no "not shown" placeholder');

  // The binary file: hex view of its bytes, its size and the SHA-256 of exactly those bytes.
  const f1 = page.locator('#f1-file');
  assert.match(await f1.locator('h3').textContent(), new RegExp(`tool\\.bin.*${ELF.length} bytes.*binary`, 's'));
  assert.equal(await f1.locator('code.hash').textContent(), crypto.createHash('sha256').update(ELF).digest('hex'));
  const hex = await f1.locator('pre.hex').textContent();
  assert.match(hex, /^00000000  7f 45 4c 46 02 01 01 00  3c 73 63 72 69 70 74 3e \|\.ELF\.\.\.\.<script>\|/);
  assert.match(await f1.locator('.finding').first().textContent(), /opaque_executable/);

  // The findings list says where each finding is and links to its line.
  const links = await page.locator('#h-findings ~ p.finding a').evaluateAll((as) => as.map((a) => a.getAttribute('href')));
  assert.ok(links.includes('#L2') && links.includes('#f0-L3') && links.includes('#stdin'), JSON.stringify(links));
  await shot(page, '15-approval-hidden-characters');
  await ctx.close();
});

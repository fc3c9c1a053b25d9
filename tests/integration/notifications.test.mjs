// Reviewer notifications (issue 18): when a call is held, every sink its tenant configured is
// told (a signed JSON webhook, a Slack-compatible incoming webhook, an e-mail over SMTP), and
// again before the approval expires when the tenant asked for reminders; deliveries are retried
// with backoff off the request path, counted in the metrics, and never carry code. Evidence:
// what a local HTTP receiver and a local SMTP server (speaking the protocol to libcurl)
// received, the signature checked with the tenant's secret, the code's marker absent from
// every message, one reminder per approval, the other tenant told nothing.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { setup, assertProblem, SLOW } from './harness.mjs';
import { APPROVAL_POLICY, hold, until } from './fixtures/approval-helpers.mjs';
import { startReceiver, verifySignature } from './fixtures/webhook-receiver.mjs';

/** A minimal SMTP server (RFC 5321: greeting, EHLO/HELO, MAIL, RCPT, DATA, QUIT). */
function startSmtp() {
  const mails = [];
  const srv = net.createServer((sock) => {
    let buf = '';
    let inData = false;
    let mail = null;
    sock.write('220 sink.test ESMTP\r\n');
    sock.on('data', (d) => {
      buf += d.toString('utf8');
      for (;;) {
        if (inData) {
          const end = buf.indexOf('\r\n.\r\n');
          if (end < 0) return;
          mail.data = buf.slice(0, end).replace(/\r\n\.\./g, '\r\n.');
          buf = buf.slice(end + 5);
          inData = false;
          mails.push(mail);
          sock.write('250 queued\r\n');
          continue;
        }
        const i = buf.indexOf('\r\n');
        if (i < 0) return;
        const line = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const cmd = line.slice(0, 4).toUpperCase();
        if (cmd === 'EHLO' || cmd === 'HELO') sock.write('250 sink.test\r\n');
        else if (cmd === 'MAIL') { mail = { from: line.slice(10).trim(), rcpt: [] }; sock.write('250 ok\r\n'); }
        else if (cmd === 'RCPT') { mail.rcpt.push(line.slice(8).trim()); sock.write('250 ok\r\n'); }
        else if (cmd === 'DATA') { inData = true; sock.write('354 go ahead\r\n'); }
        else if (cmd === 'QUIT') { sock.end('221 bye\r\n'); return; }
        else if (cmd === 'RSET' || cmd === 'NOOP') sock.write('250 ok\r\n');
        else sock.write('502 not here\r\n');
      }
    });
    sock.on('error', () => {});
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve({
    mails, port: srv.address().port, close: () => new Promise((r) => srv.close(r)),
  })));
}

const smtp = await startSmtp();
const server = setup('notifications', {
  policy: APPROVAL_POLICY,
  serveEnv: {
    TOOLCAGE_WEBHOOK_ALLOW_PRIVATE: '1',
    TOOLCAGE_SMTP_URL: `smtp://127.0.0.1:${smtp.port}`,
    TOOLCAGE_SMTP_FROM: 'toolcage@test.example',
    TOOLCAGE_PUBLIC_URL: 'https://toolcage.test.example/',
  },
});
const receivers = [];
after(async () => { for (const r of receivers) await r.close(); await smtp.close(); });
const tag = () => crypto.randomBytes(4).toString('hex');
const put = (json, key = server.keys.admin) => server.request('PUT', '/v1/notifications', { key, json });

test('a held call tells every sink: a signed webhook, a Slack message, an e-mail; no code in any', async () => {
  const rx = await startReceiver();
  receivers.push(rx);
  const secret = (await server.cli(['keys', 'webhook-secret', '--tenant', server.tenants.a])).stdout.trim();
  const res = await put({ sinks: [{ type: 'webhook', url: rx.url('/hook') }, { type: 'slack', url: rx.url('/slack') }, { type: 'email', to: 'reviewers@test.example' }] });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.json.sinks.length, 3);
  assert.equal(res.json.remind_before_seconds, null);
  const got = await server.request('GET', '/v1/notifications', { key: server.keys.admin });
  assert.deepEqual(got.json.sinks, res.json.sinks);

  const t = tag();
  const mailsBefore = smtp.mails.length;
  const { json: held } = await hold(server, `echo secret-marker-${t}`);
  const link = `https://toolcage.test.example/console/approvals/${held.approval_id}`;
  await until(() => rx.hits.filter((h) => h.body.includes(held.approval_id)).length >= 2 && smtp.mails.length > mailsBefore,
    15_000 * SLOW, 'the three notifications');
  const mine = rx.hits.filter((h) => h.body.includes(held.approval_id));
  const hook = mine.find((h) => h.url === '/hook');
  assert.equal(verifySignature(secret, hook.headers['x-toolcage-signature'], hook.body), null);
  const b = JSON.parse(hook.body.toString('utf8'));
  assert.equal(b.event, 'approval.pending');
  assert.equal(b.approval_id, held.approval_id);
  assert.equal(b.execution_id, held.id);
  assert.equal(b.tool, 'deploy');
  assert.equal(b.tenant, server.tenants.a);
  assert.equal(b.link, link);
  assert.deepEqual(b.reasons.sort(), held.reasons.sort());
  assert.equal(b.expires_at, held.expires_at);
  const slack = JSON.parse(mine.find((h) => h.url === '/slack').body.toString('utf8'));
  assert.deepEqual(Object.keys(slack), ['text']);
  assert.match(slack.text, /Approval needed: a call of tool deploy/);
  assert.ok(slack.text.includes(link));
  const mail = smtp.mails.at(-1);
  assert.equal(mail.from, '<toolcage@test.example>');
  assert.deepEqual(mail.rcpt, ['<reviewers@test.example>']);
  assert.match(mail.data, /^Subject: \[toolcage\] approval needed: deploy/m);
  assert.match(mail.data, /^To: reviewers@test\.example\r$/m);
  assert.ok(mail.data.includes(link));
  // never the code
  for (const text of [...mine.map((h) => h.body.toString('utf8')), mail.data])
    assert.ok(!text.includes(`secret-marker-${t}`), 'a notification carries the code');
  // counted
  const m = await server.request('GET', '/metrics');
  assert.match(m.text, /toolcage_deliveries_total\{kind="email",outcome="delivered"\} [1-9]/);
  assert.match(m.text, /toolcage_deliveries_total\{kind="slack",outcome="delivered"\} [1-9]/);
  // audited, without the URLs themselves (a Slack URL is a credential): origin and keyed hash
  const rec = await server.request('GET', '/v1/audit?action=notifications.update&limit=1', { key: server.keys.auditor });
  const audited = rec.json.records[0].record.sinks;
  assert.equal(audited.length, 3);
  assert.deepEqual(audited.map((x) => x.type), ['webhook', 'slack', 'email']);
  assert.equal(audited[1].origin, new URL(rx.url('/slack')).origin);
  assert.equal(audited[2].domain, 'test.example');
  assert.ok(audited.every((x) => /^[0-9a-f]{64}$/.test(x.value_hash)));
  assert.ok(!JSON.stringify(rec.json).includes('/slack') && !JSON.stringify(rec.json).includes('reviewers@'));
  assert.equal((await put({ sinks: [] })).status, 200);
});

test('reminders before expiry: one per approval; a failing receiver is retried; another tenant hears nothing', async () => {
  let fail = 2;
  const statuses = []; // the answer to each hit, in order
  const rx = await startReceiver(() => { const st = fail-- > 0 ? 500 : 200; statuses.push(st); return st; });
  receivers.push(rx);
  // deploy's approvals live an hour: a reminder 3590 s before expiry is due at once
  assert.equal((await put({ sinks: [{ type: 'webhook', url: rx.url('/r') }], remind_before_seconds: 3590 })).status, 200);
  const other = await startReceiver();
  receivers.push(other);
  assert.equal((await put({ sinks: [{ type: 'webhook', url: other.url('/other') }] }, server.keys.otherAdmin)).status, 200);
  const { json: held } = await hold(server, `echo remind-${tag()}`);
  const events = () => rx.hits.filter((h, i) => statuses[i] === 200 && h.body.includes(held.approval_id)).map((h) => JSON.parse(h.body).event);
  await until(() => events().includes('approval.pending') && events().includes('approval.reminder'), 30_000 * SLOW, 'the notice and the reminder');
  // the receiver failed twice first: those attempts were retried
  assert.equal(statuses.filter((st) => st === 500).length, 2);
  await new Promise((r) => setTimeout(r, 2500)); // sweeps run every second: none reminds again
  assert.deepEqual(events().sort(), ['approval.pending', 'approval.reminder']);
  assert.equal(other.hits.length, 0, 'the other tenant was told of this tenant\'s call');
  const m = await server.request('GET', '/metrics');
  assert.match(m.text, /toolcage_deliveries_total\{kind="webhook",outcome="failed"\} [1-9]/);
  for (const key of [server.keys.admin, server.keys.otherAdmin]) assert.equal((await put({ sinks: [] }, key)).status, 200);
});

test('bad settings are refused; only admins set them', async () => {
  for (const [body, path] of [
    [{ sinks: [{ type: 'webhook' }] }, 'sinks[0]'],
    [{ sinks: [{ type: 'webhook', url: 'ftp://x.example' }] }, 'sinks[0]'],
    [{ sinks: [{ type: 'webhook', url: 'http://169.254.169.254/latest' }] }, 'sinks[0]'],
    [{ sinks: [{ type: 'email', to: 'a@b\r\nBcc: x@y' }] }, 'sinks[0]'],
    [{ sinks: [{ type: 'email', to: 'no-at-sign' }] }, 'sinks[0]'],
    [{ sinks: [{ type: 'pager', url: 'https://x.example' }] }, 'sinks[0]'],
    [{ sinks: [{ type: 'slack', url: 'https://x.example', extra: 1 }] }, 'sinks[0]'],
    [{ sinks: Array.from({ length: 11 }, () => ({ type: 'slack', url: 'https://x.example' })) }, 'sinks'],
    [{ sinks: [], remind_before_seconds: 5 }, 'remind_before_seconds'],
    [{ sinks: [], other: true }, 'other'],
  ]) {
    const res = await put(body);
    assertProblem(res, 400, 'validation');
    assert.ok(res.json.errors.some((e) => e.path === path), `${JSON.stringify(body).slice(0, 80)}: ${res.text}`);
  }
  for (const role of ['agent', 'reviewer', 'auditor'])
    assertProblem(await put({ sinks: [] }, server.keys[role]), 403, 'forbidden');
  // a Slack URL is a credential: only admins read the setting
  for (const role of ['agent', 'reviewer', 'auditor'])
    assertProblem(await server.request('GET', '/v1/notifications', { key: server.keys[role] }), 403, 'forbidden');
});

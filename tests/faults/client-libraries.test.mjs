// The client libraries (clients/typescript, clients/python) when the server dies under them.
// - A stream cut before its `result` is an error the caller sees (TransportError), not a loop
//   that just ends as if the call had finished: the server killed mid-stream (the chunked body
//   is cut: "broke"), and a response ended cleanly before its result, as a reverse proxy with
//   a stream timeout ends it (no proxy runs in this stack: a pass-through proxy of our own
//   relays the real server's answer and ends it, properly, after the first output event):
//   "ended before its result". Before, that second case ended the loop silently.
// - wait() rides out a server that is gone for a moment (killed and started again on the same
//   port): it asks again within its deadline and returns the call's final state.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import http from 'node:http';
import { Server, ROOT } from '../integration/harness.mjs';
import { faultPolicy, tmpdir, report, sleep, SLOW } from './lib.mjs';

const { Client, TransportError, FINAL_STATUSES } = await import(path.join(ROOT, 'clients/typescript/dist/index.js'));
const PY = '/usr/bin/python3';
const dir = tmpdir('client-libraries');
const { policy } = faultPolicy(dir);
const server = new Server('faults-client-libraries', { freshDatabase: true, policy });

before(async () => { await server.start(); }, { timeout: 120_000 * SLOW });
after(async () => {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 120_000 * SLOW });

/** Kill the server, then start it again on the same port (its database, keys and state kept). */
async function restartLater(pauseMs) {
  const port = server.port;
  await server.kill();
  await sleep(pauseMs);
  for (let i = 0; ; i++) {
    try {
      await server.spawnAndWait(port);
      return;
    } catch (e) {
      await server.kill();
      if (i >= 20) throw e;
      await sleep(250); // (the port may still be held for a moment)
    }
  }
}

/** A Python script with the client on its path; lines on stdout as they come. */
function python(code, env) {
  const child = spawn(PY, ['-c', code], {
    env: { ...process.env, PYTHONPATH: path.join(ROOT, 'clients/python'), TOOLCAGE_URL: server.base, TOOLCAGE_KEY: server.keys.agent, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = [];
  let out = '', err = '', waiters = [];
  child.stdout.on('data', (d) => {
    out += d;
    let nl;
    while ((nl = out.indexOf('\n')) >= 0) { lines.push(out.slice(0, nl)); out = out.slice(nl + 1); }
    waiters = waiters.filter((w) => !w());
  });
  child.stderr.on('data', (d) => { err += d; });
  const exit = new Promise((r) => child.on('exit', (code) => r(code)));
  return {
    lines,
    line: (re, ms = 30_000 * SLOW) => new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`no line ${re} in ${JSON.stringify(lines)}; stderr ${err}`)), ms);
      const check = () => { const l = lines.find((x) => re.test(x)); if (l) { clearTimeout(t); resolve(l); return true; } return false; };
      if (!check()) waiters.push(check);
    }),
    done: async () => { const code = await exit; return { code, lines, err }; },
  };
}

const STREAM_CODE = 'echo first\nsleep 3\necho second\n';

/** A reverse proxy to the server that ends an event stream, cleanly, after its first stdout
 * event (everything else passes through). Its base URL. */
async function cuttingProxy() {
  const proxy = http.createServer((req, res) => {
    const up = http.request(`${server.base}${req.url}`, { method: req.method, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      if (!String(ur.headers['content-type']).startsWith('text/event-stream')) { ur.pipe(res); return; }
      let seen = '';
      ur.on('data', (d) => {
        seen += d;
        res.write(d);
        const at = seen.indexOf('event: stdout');
        if (at >= 0 && seen.indexOf('\n\n', at) >= 0) { res.end(); ur.destroy(); }
      });
      ur.on('end', () => res.end());
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
  after(() => proxy.close());
  return `http://127.0.0.1:${proxy.address().port}`;
}

test('typescript: a stream cut before its result throws TransportError; wait() returns the final state across a restart of the server', async (t) => {
  // ended cleanly before its result (a proxy's stream timeout)
  const viaProxy = new Client(await cuttingProxy(), server.keys.agent);
  const proxied = [];
  let cut = null;
  try {
    for await (const ev of viaProxy.stream({ tool: 'mark', code: STREAM_CODE })) proxied.push(ev.event);
  } catch (e) {
    cut = e;
  }
  assert.ok(proxied.includes('stdout') && !proxied.includes('result'), JSON.stringify(proxied));
  assert.ok(cut instanceof TransportError, `the loop ended without an error: ${cut}`);
  assert.match(cut.message, /ended before its result/);

  // the server killed mid-stream
  let tc = new Client(server.base, server.keys.agent);
  const seen = [];
  let thrown = null;
  try {
    for await (const ev of tc.stream({ tool: 'mark', code: STREAM_CODE })) {
      seen.push(ev.event);
      if (ev.event === 'stdout') await server.kill(); // the server dies mid-stream
    }
  } catch (e) {
    thrown = e;
  }
  assert.ok(seen.includes('stdout') && !seen.includes('result'), JSON.stringify(seen));
  assert.ok(thrown instanceof TransportError, `the loop ended without an error: ${thrown}`);
  assert.match(thrown.message, /broke|ended before its result/);
  await restartLater(0);

  // wait() across a restart: the call is cut with the server (its sandbox dies with the
  // launcher); the restarted server closes it, and wait() returns that final state
  tc = new Client(server.base, server.keys.agent);
  const job = await tc.submit({ tool: 'mark', code: 'sleep 3\necho late\n' });
  const waiting = tc.wait(job.id, 90_000 * SLOW);
  await sleep(500);
  const t0 = performance.now();
  await restartLater(1500);
  const final = await waiting;
  assert.ok(FINAL_STATUSES.has(final.status), `wait() returned ${final.status}`);
  assert.equal(final.id, job.id);
  report(t, 'typescript client', { proxied_cut: cut.message.slice(0, 80), killed_cut: thrown.message.slice(0, 80), stream_events: seen, waited_final: final.status, after_restart_ms: Math.round(performance.now() - t0) });
});

const PY_STREAM = (code) => `
import os, sys
from toolcage import Client, TransportError
tc = Client(os.environ["TOOLCAGE_URL"], os.environ["TOOLCAGE_KEY"])
seen = []
try:
    for ev in tc.stream("mark", ${JSON.stringify(code)}):
        seen.append(ev.event)
        if ev.event == "stdout":
            print("FIRST", flush=True)
    print("SILENT " + ",".join(seen), flush=True)
except TransportError as e:
    print("RAISED " + ",".join(seen) + " " + str(e), flush=True)
`;

test('python: a stream cut before its result raises TransportError; wait() returns the final state across a restart of the server', async (t) => {
  // ended cleanly before its result (a proxy's stream timeout)
  const viaProxy = python(PY_STREAM(STREAM_CODE), { TOOLCAGE_URL: await cuttingProxy() });
  const p = await viaProxy.done();
  assert.equal(p.code, 0, p.err);
  assert.match(p.lines.at(-1), /^RAISED .*ended before its result/, `the loop ended without an error: ${p.lines.at(-1)}`);
  assert.doesNotMatch(p.lines.at(-1), /result,|,result/);

  // the server killed mid-stream
  const stream = python(PY_STREAM(STREAM_CODE));
  await stream.line(/^FIRST$/);
  await server.kill();
  const s = await stream.done();
  assert.equal(s.code, 0, s.err);
  const last = s.lines.at(-1);
  assert.match(last, /^RAISED /, `the loop ended without an error: ${last}`);
  assert.match(last, /broke|ended before its result/);
  assert.doesNotMatch(last, /result,|,result/);
  await restartLater(0);

  const wait = python(`
import os, json
from toolcage import Client
tc = Client(os.environ["TOOLCAGE_URL"], os.environ["TOOLCAGE_KEY"])
job = tc.submit("mark", "sleep 3\\necho late\\n")
print("SUBMITTED " + job["id"], flush=True)
e = tc.wait(job["id"], timeout=90)
print("FINAL " + json.dumps({"id": e["id"], "status": e["status"]}), flush=True)
`);
  const id = (await wait.line(/^SUBMITTED /)).split(' ')[1];
  await sleep(500);
  await restartLater(1500);
  const w = await wait.done();
  assert.equal(w.code, 0, w.err);
  const fin = JSON.parse(w.lines.find((l) => l.startsWith('FINAL ')).slice(6));
  assert.equal(fin.id, id);
  assert.ok(FINAL_STATUSES.has(fin.status), `wait() returned ${fin.status}`);
  report(t, 'python client', { proxied_cut: p.lines.at(-1).slice(0, 80), killed_cut: last.slice(0, 80), waited_final: fin.status });
});

// The database reached by a host name, and the resolver stops answering: the server's calls
// and readiness answer 503 within the lookup's bound (min(5 s, TOOLCAGE_DB_TIMEOUT_SECONDS):
// 2 s here) instead of waiting for libc's lookup (this resolver: 30 s a try, two tries), and
// once the name resolves again the server serves again by itself (core/db.c, "Host names,
// looked up within a bound"). The server runs in a mount namespace of its own whose
// /etc/hosts, resolv.conf and nsswitch.conf are this file's; it reaches the database through
// a relay on the loopback (the suite's cluster listens on a Unix socket only); the resolver
// is a UDP socket that takes queries and never answers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { Server, BIN } from '../integration/harness.mjs';
import { faultPolicy, tmpdir, call, tag, terminateBackends, report, logLines, sleep, SLOW } from './lib.mjs';

const NAME = 'tcdb.toolcage-dns.test';
const dir = tmpdir('dns');
const { policy } = faultPolicy(dir);
const files = {
  hosts: path.join(dir, 'hosts'),
  resolv: path.join(dir, 'resolv.conf'),
  nsswitch: path.join(dir, 'nsswitch.conf'),
};
const withName = `127.0.0.1 localhost\n127.0.0.1 ${NAME}\n`;
const withoutName = '127.0.0.1 localhost\n';
fs.writeFileSync(files.hosts, withName);
fs.writeFileSync(files.nsswitch, 'hosts: files dns\n');
// toolcage serve in the mount namespace (exec'd: the server finds its launcher beside itself)
const wrapper = path.join(dir, 'serve-in-ns.sh');
fs.writeFileSync(wrapper, `#!/bin/sh
exec unshare -m --propagation private sh -c 'mount --bind "$1" /etc/hosts &&
  mount --bind "$2" /etc/resolv.conf && mount --bind "$3" /etc/nsswitch.conf &&
  shift 4 && exec "$0" "$@"' "${BIN}" "${files.hosts}" "${files.resolv}" "${files.nsswitch}" - "$@"
`, { mode: 0o755 });

let queries = 0;
let resolver = null;
/** The silent resolver: port 53 of a loopback address nobody else uses (probed). */
async function silentResolver() {
  for (const addr of ['127.0.0.153', '127.0.0.154', '127.0.0.155', '127.0.0.156']) {
    const sock = dgram.createSocket('udp4');
    try {
      await new Promise((resolve, reject) => { sock.once('error', reject); sock.bind(53, addr, resolve); });
    } catch (e) {
      sock.close();
      if (e.code === 'EADDRINUSE') continue;
      throw e;
    }
    sock.on('message', () => { queries++; });
    fs.writeFileSync(files.resolv, `nameserver ${addr}\noptions timeout:30 attempts:2\n`);
    return sock;
  }
  throw new Error('port 53 is taken on every loopback address tried');
}
const relays = new Set();
const relay = net.createServer((c) => {
  const m = (process.env.TOOLCAGE_DATABASE_URL || '').match(/(?:^|\s)host=(\S+)/);
  const pg = net.connect({ path: path.join(m[1], '.s.PGSQL.5432') });
  relays.add(c);
  c.on('close', () => relays.delete(c));
  c.pipe(pg).pipe(c);
  const end = () => { c.destroy(); pg.destroy(); };
  c.on('error', end);
  pg.on('error', end);
});
const server = new Server('faults-dns', {
  freshDatabase: true, policy, bin: wrapper,
  serveEnv: { TOOLCAGE_DB_TIMEOUT_SECONDS: '2' },
  // the database's name is known once the server has made it: its conninfo, by the name
  beforeMigrate: async (s) => {
    s.serveEnv.TOOLCAGE_DATABASE_URL = s.env.TOOLCAGE_DATABASE_URL
      .replace(/(^|\s)host=\S+/, `$1host=${NAME} port=${relay.address().port}`);
  },
});

before(async () => {
  resolver = await silentResolver();
  await new Promise((resolve) => relay.listen(0, '127.0.0.1', resolve));
  await server.start();
}, { timeout: 120_000 * SLOW });
after(async () => {
  await server.stop();
  resolver?.close();
  for (const c of relays) c.destroy();
  relay.close();
  fs.rmSync(dir, { recursive: true, force: true });
}, { timeout: 60_000 * SLOW });

async function readyz() {
  const t0 = performance.now();
  const r = await fetch(`${server.base}/readyz`, { signal: AbortSignal.timeout(120_000) });
  await r.text();
  return { status: r.status, ms: Math.round(performance.now() - t0) };
}

test('a resolver that stops answering costs calls and readiness the lookup\'s bound, and the server comes back by itself', async (t) => {
  // served through the name
  const first = await call(server, tag());
  assert.equal(first.status, 200, JSON.stringify(first));
  assert.equal(queries, 0, 'the name was in /etc/hosts: no query should have gone out');

  // the name gone from /etc/hosts (lookups go to the silent resolver), every connection cut
  fs.writeFileSync(files.hosts, withoutName);
  assert.ok(await terminateBackends(server) >= 1);
  for (let i = 0; i < 50; i++) { // (pg_terminate_backend does not wait for the backends' end)
    const left = await server.sql(`SELECT count(*) FROM pg_stat_activity WHERE usename = 'toolcage_app'`);
    if (Number(left.trim()) === 0) break;
    await sleep(100);
  }
  const during = [];
  for (let i = 0; i < 3; i++) during.push(await call(server, tag(), { timeoutMs: 120_000 }));
  const ready = await readyz();
  for (const c of during) {
    assert.equal(c.status, 503, JSON.stringify(c));
    assert.ok(c.ms < 8000 * SLOW, `a call waited ${c.ms} ms for the resolver`);
  }
  assert.equal(ready.status, 503);
  assert.ok(ready.ms < 5000 * SLOW, `readiness waited ${ready.ms} ms for the resolver`);
  assert.ok(queries >= 1, 'no query reached the resolver: the name was not looked up there');
  // (each lookup is two queries, A and AAAA; the calls, readiness, the worker, the recorder and
  // the webhook sender all looked the name up meanwhile: they joined a few lookups)
  assert.ok(queries <= 8, `${queries} queries: the lookups of one name were not shared`);
  const sent = queries;

  // the name back: served again, without a restart, once the pending lookup is not fresh
  fs.writeFileSync(files.hosts, withName);
  const t0 = performance.now();
  let back = null;
  while (performance.now() - t0 < 30_000 * SLOW) {
    back = await call(server, tag(), { timeoutMs: 60_000 });
    if (back.status === 200) break;
    await sleep(250);
  }
  const backMs = Math.round(performance.now() - t0);
  assert.equal(back.status, 200, JSON.stringify(back));
  assert.ok(backMs < 15_000 * SLOW, `served again only after ${backMs} ms`);
  assert.equal((await readyz()).status, 200);
  assert.equal(server.exited, null, 'the server exited');
  // the operator is told why, naming the host
  const why = logLines(server, /could not be made again/).map((l) => l.error || '');
  assert.ok(why.some((e) => e.includes(`could not translate host name "${NAME}"`)), JSON.stringify(why));
  report(t, 'dns', {
    calls_ms: during.map((c) => c.ms), readyz_ms: ready.ms, queries: sent, served_again_ms: backMs,
    reasons_logged: why.length,
  });
});

// Test harness: starts one toolcage server per test file, creates tenants and keys,
// and validates every HTTP response against openapi/openapi.yaml.
//
// Environment (set by scripts/test):
//   TOOLCAGE_BIN                    binary to test (default build/toolcage)
//   TOOLCAGE_DATABASE_URL           runtime role's connection string (required)
//   TOOLCAGE_MIGRATE_DATABASE_URL   owner role's connection string (required)
//   TOOLCAGE_IT_LABEL               names the artifacts directory (default "local")
//   PG_BIN                          PostgreSQL binaries (default /usr/lib/postgresql/15/bin)
// setup(name, {freshDatabase: true}) gives the file a database of its own (created as the
// superuser over the same socket, dropped afterwards), for tests that tamper with it.
// setup(name, {policy: 'tests/integration/fixtures/x.json', serveEnv: {VAR: '1'}}) starts the
// server with another policy file (relative to the repository root) and extra environment;
// server.peer() starts a second `toolcage serve` on the same database, keys and master key.
// setup(name, {freshDatabase: true, beforeMigrate: async (server) => ...}) runs a function on
// the fresh database before `toolcage migrate` (to build an older schema's data).
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import net from 'node:net';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

const execFileP = promisify(execFile);
const addFormats = addFormatsModule.default ?? addFormatsModule;

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = path.resolve(ROOT, process.env.TOOLCAGE_BIN || 'build/toolcage');
export const LABEL = process.env.TOOLCAGE_IT_LABEL || 'local';
export const ASAN = /asan/.test(LABEL) || /build-asan/.test(BIN);
/** Multiplier for timing assertions: sanitizer builds are several times slower, and a lane that
 * shares the machine with another (scripts/test runs the release and ASan lanes at once) says
 * so with TOOLCAGE_IT_SLOW. */
export const SLOW = Math.max(ASAN ? 3 : 1, Number(process.env.TOOLCAGE_IT_SLOW) || 1);
export const OPENAPI_PATH = path.join(ROOT, 'openapi/openapi.yaml');
export const ROLES = ['agent', 'reviewer', 'auditor', 'admin'];

// ---------------------------------------------------------------------------
// OpenAPI validation

const spec = YAML.parse(fs.readFileSync(OPENAPI_PATH, 'utf8'));
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats(ajv);
ajv.addSchema(spec, 'openapi.json');
const validators = new Map();

function pointer(...parts) {
  return parts.map((p) => String(p).replaceAll('~', '~0').replaceAll('/', '~1')).join('/');
}

function validatorFor(ptr) {
  let v = validators.get(ptr);
  if (!v) {
    v = ajv.compile({ $ref: `openapi.json#/${ptr}` });
    validators.set(ptr, v);
  }
  return v;
}

function deref(obj) {
  // Follows one local $ref ("#/components/...") if present.
  let ptr = null;
  while (obj && obj.$ref) {
    ptr = obj.$ref.replace(/^#\//, '');
    obj = ptr.split('/').reduce((o, k) => o[k.replaceAll('~1', '/').replaceAll('~0', '~')], spec);
  }
  return { obj, ptr };
}

const templates = Object.keys(spec.paths).map((t) => ({
  template: t,
  re: new RegExp('^' + t.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{path\}/g, '.+').replace(/\{[^}]+\}/g, '[^/]+') + '$'),
}));

// Every (operation, status) a test saw, for scripts/contract-coverage: appended to
// tests/artifacts/LABEL/contract-seen.txt when the test process exits.
const seen = new Set();
function noteSeen(method, reqPath, status) {
  const t = matchPath(reqPath);
  // a 405 is the path's answer to a method it does not declare: kept under that method
  if (t && (spec.paths[t][method.toLowerCase()] || status === 405)) seen.add(`${method.toUpperCase()} ${t} ${status}`);
}
process.on('exit', () => {
  if (!seen.size) return;
  const dir = path.join(ROOT, 'tests/artifacts', LABEL);
  fs.mkdirSync(dir, { recursive: true });
  fs.appendFileSync(path.join(dir, 'contract-seen.txt'), [...seen].join('\n') + '\n');
});

/** The path template of spec.paths matching a concrete path (no query), or null. */
export function matchPath(p) {
  const pathOnly = p.split('?')[0];
  const m = templates.find((t) => t.re.test(pathOnly));
  return m ? m.template : null;
}

function fmtErrors(errors) {
  return (errors || []).map((e) => `${e.instancePath || '/'} ${e.message} ${JSON.stringify(e.params)}`).join('; ');
}

/**
 * Asserts that a response conforms to the contract: an operation for method + path,
 * a declared status for that operation, the declared content type, a body matching the
 * schema, the required headers. Unknown paths must be 404 not-found problems; known paths
 * with an undeclared method must be 405 method-not-allowed problems with an Allow header.
 */
export function validateResponse(method, reqPath, res) {
  const where = `${method} ${reqPath} -> ${res.status}`;
  noteSeen(method, reqPath, res.status);
  const requestId = res.headers.get('x-request-id');
  assert.ok(requestId, `${where}: X-Request-Id header missing`);

  const template = matchPath(reqPath);
  let responseSpec;
  let responsePtr;
  if (!template) {
    assert.equal(res.status, 404, `${where}: unknown path must give 404, body: ${res.text.slice(0, 300)}`);
    responsePtr = 'components/responses/NotFound';
    responseSpec = spec.components.responses.NotFound;
  } else {
    const op = spec.paths[template][method.toLowerCase()];
    if (!op) {
      assert.equal(res.status, 405, `${where}: method not in contract for ${template} must give 405, body: ${res.text.slice(0, 300)}`);
      const allow = (res.headers.get('allow') || '').split(',').map((s) => s.trim().toUpperCase()).filter(Boolean);
      const declared = Object.keys(spec.paths[template])
        .filter((k) => ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'].includes(k))
        .map((k) => k.toUpperCase());
      for (const m of declared) assert.ok(allow.includes(m), `${where}: Allow "${res.headers.get('allow')}" lacks ${m}`);
      responsePtr = 'components/responses/MethodNotAllowed';
      responseSpec = spec.components.responses.MethodNotAllowed;
    } else {
      const declared = op.responses[String(res.status)];
      assert.ok(declared, `${where}: status ${res.status} not declared for ${method} ${template}; body: ${res.text.slice(0, 500)}`);
      const d = deref(declared);
      responseSpec = d.obj;
      responsePtr = d.ptr ?? pointer('paths', template, method.toLowerCase(), 'responses', String(res.status));
    }
  }

  for (const [name, h] of Object.entries(responseSpec.headers || {})) {
    const hdr = deref(h).obj;
    const value = res.headers.get(name);
    if (hdr.required) assert.ok(value !== null, `${where}: required header ${name} missing`);
    if (value !== null && hdr.schema) {
      const v = ajv.compile(hdr.schema);
      assert.ok(v(value), `${where}: header ${name}: "${value}" ${fmtErrors(v.errors)}`);
    }
  }

  const content = responseSpec.content;
  if (!content) {
    assert.equal(res.body.length, 0, `${where}: response declares no body but got ${res.body.length} bytes`);
    return;
  }
  const ctype = (res.headers.get('content-type') || '').split(';')[0].trim().toLowerCase();
  assert.ok(content[ctype], `${where}: content type "${ctype}" not declared (declared: ${Object.keys(content).join(', ')}); body: ${res.text.slice(0, 300)}`);
  const schemaPtr = pointer(...responsePtr.split('/').map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~')), 'content', ctype, 'schema');
  let value;
  if (ctype.endsWith('json') && ctype !== 'application/x-ndjson') {
    assert.ok(res.json !== undefined, `${where}: body is not valid JSON: ${res.text.slice(0, 300)}`);
    value = res.json;
    if (ctype === 'application/problem+json') {
      assert.equal(value.status, res.status, `${where}: problem.status differs from the HTTP status`);
      assert.equal(value.request_id, requestId, `${where}: problem.request_id differs from X-Request-Id`);
    }
  } else {
    value = res.text;
  }
  const v = validatorFor(schemaPtr);
  assert.ok(v(value), `${where}: body does not match ${schemaPtr}: ${fmtErrors(v.errors)}\nbody: ${res.text.slice(0, 1000)}`);
}

// ---------------------------------------------------------------------------
// Process helpers

function dbEnv() {
  const db = process.env.TOOLCAGE_DATABASE_URL;
  const mig = process.env.TOOLCAGE_MIGRATE_DATABASE_URL;
  if (!db || !mig) {
    throw new Error('TOOLCAGE_DATABASE_URL and TOOLCAGE_MIGRATE_DATABASE_URL must be set (run scripts/test)');
  }
  return { TOOLCAGE_DATABASE_URL: db, TOOLCAGE_MIGRATE_DATABASE_URL: mig };
}

function conninfoGet(url, key) {
  const m = url.match(new RegExp(`(?:^|\\s)${key}=(\\S+)`));
  return m ? m[1] : null;
}

function conninfoWithDb(url, db) {
  return url.replace(/(^|\s)dbname=\S+/, `$1dbname=${db}`);
}

export const PSQL = path.join(process.env.PG_BIN || '/usr/lib/postgresql/15/bin', 'psql');

/**
 * Runs SQL with psql as the PostgreSQL superuser (postgres) over the socket directory of
 * TOOLCAGE_MIGRATE_DATABASE_URL, in database db. Resolves the unaligned, tuples-only output.
 * With opts.conninfo, connects with that connection string instead (e.g. as toolcage_app).
 * Rejects with psql's stderr on error (ON_ERROR_STOP).
 */
export async function psql(sql, { db, conninfo } = {}) {
  const env = dbEnv();
  const args = ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1'];
  if (conninfo) {
    args.push('-d', conninfo);
  } else {
    const host = conninfoGet(env.TOOLCAGE_MIGRATE_DATABASE_URL, 'host');
    args.push('-h', host, '-U', 'postgres', '-d', db ?? conninfoGet(env.TOOLCAGE_MIGRATE_DATABASE_URL, 'dbname'));
  }
  args.push('-c', sql);
  try {
    const { stdout } = await execFileP(PSQL, args, { timeout: 60_000 * SLOW, maxBuffer: 64 << 20 });
    return stdout;
  } catch (e) {
    const err = new Error(`psql failed: ${(e.stderr || e.message).trim()}\nSQL: ${sql.slice(0, 300)}`);
    err.stderr = e.stderr || '';
    throw err;
  }
}

/** Runs the toolcage CLI; resolves {stdout, stderr}, rejects with both on failure. */
export async function cli(args, extraEnv = {}) {
  try {
    return await execFileP(BIN, args, {
      env: { ...process.env, ...dbEnv(), ...extraEnv },
      timeout: 60_000 * SLOW,
      maxBuffer: 16 << 20,
    });
  } catch (e) {
    throw new Error(`toolcage ${args.join(' ')} failed (${e.code ?? e.signal}):\n${e.stdout}\n${e.stderr}`);
  }
}

/** The packages of the test image (tests/images/host-image.sh): Python 3, bash and the tools the
 * attack corpus's shell files use, with their libraries, from this host's own packages. */
export const CORPUS_IMAGE_PACKAGES = ['python3.11-minimal', 'libpython3.11-minimal', 'libpython3.11-stdlib',
  'python3-minimal', 'bash', 'dash', 'coreutils', 'grep', 'sed', 'findutils', 'mawk', 'util-linux', 'procps',
  'libgcc-s1', 'mount', 'passwd'];
export const CORPUS_IMAGE_NAME = 'toolcage-test/host-python:1';

/** An OCI archive of the test image, built once per machine boot (both lanes and every file
 * share it: it is made of this host's packages, which a run does not change). Its path. */
export async function corpusImage() {
  const dir = path.join(os.tmpdir(), 'toolcage-test-images');
  const file = path.join(dir, `host-python-${crypto.createHash('sha256').update(CORPUS_IMAGE_PACKAGES.join(' ')).digest('hex').slice(0, 12)}.tar`);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(dir, { recursive: true });
  const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}`;
  await execFileP(path.join(ROOT, 'tests/images/host-image.sh'), [tmp, CORPUS_IMAGE_NAME, ...CORPUS_IMAGE_PACKAGES],
    { timeout: 180_000 * SLOW, maxBuffer: 16 << 20 });
  fs.renameSync(tmp, file);
  return file;
}

/** `toolcage images ARGS...` on a server's image store (its TOOLCAGE_STATE_DIR). */
export function imagesCli(server, args) {
  return cli(['images', ...args], { TOOLCAGE_STATE_DIR: path.join(server.stateDir, 'state') });
}

/** Creates an API key (tenant null: an operator key); the CLI prints it on its last stdout
 * line. opts.person binds it to a person of the tenant. */
export async function createKey(tenant, role, extraEnv = {}, { person } = {}) {
  const args = ['keys', 'create', ...(tenant === null ? [] : ['--tenant', tenant]), '--role', role];
  if (person) args.push('--person', person);
  const { stdout } = await cli(args, extraEnv);
  const lines = stdout.trim().split('\n');
  const key = lines[lines.length - 1].trim();
  assert.ok(key.length >= 16 && !/\s/.test(key), `keys create printed an implausible key: ${JSON.stringify(stdout)}`);
  return key;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function caller() {
  // The test file that called setup(), for naming artifacts.
  const line = new Error().stack.split('\n').find((l) => /\.test\.mjs/.test(l)) || '';
  const m = line.match(/([\w.-]+)\.test\.mjs/);
  return m ? m[1] : 'server';
}

// ---------------------------------------------------------------------------
// Server

class Server {
  constructor(name, opts = {}) {
    this.name = name;
    this.freshDatabase = Boolean(opts.freshDatabase);
    this.policy = path.resolve(ROOT, opts.policy || 'examples/policy.json');
    this.serveEnv = opts.serveEnv || {};
    this.bin = opts.bin || BIN; // the binary that serves (bench/ab.mjs compares two builds)
    this.beforeMigrate = opts.beforeMigrate; // async (server) => {}: e.g. an older schema's data
    this.database = null; // the fresh database's name, if any
    this.env = {}; // overrides of dbEnv() for this server and its CLI calls
    this.proc = null;
    this.base = null;
    this.keys = {};
    this.tenants = {};
    this.exit = null;
  }

  /** Resolves when the file's server has started (setup's hook runs beside the file's own). */
  async ready() {
    while (!this.starting) await sleep(10);
    await this.starting;
  }

  async start() {
    const artifacts = path.join(ROOT, 'tests/artifacts', LABEL);
    fs.mkdirSync(artifacts, { recursive: true });
    this.logPath = path.join(artifacts, `${this.name}.server.log`);
    this.stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `toolcage-it-${this.name}-`));
    this.masterKey = path.join(this.stateDir, 'master.key');
    fs.writeFileSync(this.masterKey, crypto.randomBytes(32), { mode: 0o600 });

    if (this.freshDatabase) {
      const env = dbEnv();
      this.database = `toolcage_it_${this.name.replace(/[^a-z0-9]/gi, '_')}_${crypto.randomBytes(4).toString('hex')}`.toLowerCase();
      await psql(`CREATE DATABASE "${this.database}" OWNER toolcage_owner`, { db: 'postgres' });
      this.env = {
        TOOLCAGE_DATABASE_URL: conninfoWithDb(env.TOOLCAGE_DATABASE_URL, this.database),
        TOOLCAGE_MIGRATE_DATABASE_URL: conninfoWithDb(env.TOOLCAGE_MIGRATE_DATABASE_URL, this.database),
      };
    }
    this.env.TOOLCAGE_MASTER_KEY_FILE = this.masterKey;

    if (this.beforeMigrate) await this.beforeMigrate(this);
    await cli(['migrate'], this.env);

    // Two tenants per file; names are unique so files can share one database.
    const suffix = crypto.randomBytes(4).toString('hex');
    this.tenants = { a: `it-${this.name}-a-${suffix}`, b: `it-${this.name}-b-${suffix}` };
    // The keys at once: each is a process (~180 ms under ASan), one after the other they were
    // ~1.5 s of every file's set-up.
    const wanted = [...ROLES.map((role) => [role, this.tenants.a, role]),
      ['otherAgent', this.tenants.b, 'agent'], ['otherAdmin', this.tenants.b, 'admin'], ['operator', null, 'operator']];
    const made = await Promise.all(wanted.map(([, tenant, role]) => createKey(tenant, role, this.env)));
    wanted.forEach(([name], i) => { this.keys[name] = made[i]; });

    // A free port can be taken by someone else before the server binds it: only that is
    // retried. Any other failure to start (a crash, a refused configuration) fails at once.
    let lastErr;
    for (let attempt = 0; attempt < 3; attempt++) {
      const port = await freePort();
      try {
        await this.spawnAndWait(port);
        return;
      } catch (e) {
        lastErr = e;
        await this.kill();
        if (!/cannot listen \(address in use/.test(this.logTail(20))) throw e;
      }
    }
    throw lastErr;
  }

  async spawnAndWait(port) {
    this.port = port;
    this.base = `http://127.0.0.1:${port}`;
    const log = fs.openSync(this.logPath, 'a');
    this.proc = spawn(this.bin, ['serve'], {
      env: {
        ...process.env,
        ...dbEnv(),
        ...this.env,
        TOOLCAGE_LISTEN: `${this.listenHost ?? '127.0.0.1'}:${port}`,
        TOOLCAGE_STATE_DIR: path.join(this.stateDir, 'state'),
        TOOLCAGE_MASTER_KEY_FILE: this.masterKey,
        TOOLCAGE_POLICY: this.policy,
        TOOLCAGE_LOG_LEVEL: process.env.TOOLCAGE_LOG_LEVEL || 'debug',
        // a short drain: a test that stops a server with calls still running does not wait
        // 30 s (replicas.test.mjs tests the drain itself)
        TOOLCAGE_DRAIN_SECONDS: '2',
        ...this.serveEnv,
      },
      stdio: ['ignore', log, log],
    });
    fs.closeSync(log);
    this.exit = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal })));
    this.exited = null;
    this.exit.then((e) => { this.exited = e; });

    const deadline = Date.now() + 30_000 * SLOW;
    let last = '';
    while (Date.now() < deadline) {
      if (this.exited) throw new Error(`toolcage serve exited early (${JSON.stringify(this.exited)}):\n${this.logTail()}`);
      try {
        const r = await fetch(`${this.base}/readyz`, { signal: AbortSignal.timeout(2000) });
        last = `${r.status} ${await r.text()}`;
        if (r.status === 200) return;
      } catch (e) {
        last = String(e.cause?.code || e.message);
      }
      await sleep(50);
    }
    throw new Error(`toolcage did not become ready (last /readyz: ${last}):\n${this.logTail()}`);
  }

  logTail(n = 40) {
    try {
      return fs.readFileSync(this.logPath, 'utf8').split('\n').slice(-n).join('\n');
    } catch {
      return '';
    }
  }

  async kill() {
    if (this.proc && !this.exited) {
      this.proc.kill('SIGKILL');
      await this.exit;
    }
  }

  /** SIGTERM; asserts a clean exit (code 0, no sanitizer report). */
  async stop() {
    if (!this.proc) return;
    try {
      if (!this.exited) {
        this.proc.kill('SIGTERM');
        let timer;
        const timeout = new Promise((r) => { timer = setTimeout(() => r('timeout'), 20_000 * SLOW); });
        const first = await Promise.race([this.exit, timeout]);
        clearTimeout(timer);
        if (first === 'timeout') {
          await this.kill();
          assert.fail(`toolcage did not exit within ${20 * SLOW} s of SIGTERM:\n${this.logTail()}`);
        }
      }
      const log = fs.readFileSync(this.logPath, 'utf8');
      const report = log.match(/^.*(ERROR: (Address|Leak)Sanitizer|runtime error:|WARNING: .*Sanitizer).*$/m);
      assert.ok(!report, `sanitizer report in ${this.logPath}: ${report?.[0]}`);
      assert.deepEqual(this.exited, { code: 0, signal: null },
        `toolcage serve did not exit cleanly after SIGTERM: ${JSON.stringify(this.exited)}\n${this.logTail()}`);
    } finally {
      fs.rmSync(this.stateDir, { recursive: true, force: true });
      if (this.database && this.freshDatabase) await psql(`DROP DATABASE IF EXISTS "${this.database}" WITH (FORCE)`, { db: 'postgres' }).catch(() => {});
    }
  }

  /**
   * Starts another `toolcage serve` process on this server's database, with the same master
   * key, tenants and keys (and policy and serveEnv, unless overridden), on its own port and
   * state directory (opts.listenHost: the address it listens on, default 127.0.0.1). Stop it
   * with peer.stop() (or peer.kill()).
   */
  async peer(name = `${this.name}-peer`, opts = {}) {
    const p = new Server(name, { policy: opts.policy ?? this.policy, serveEnv: { ...this.serveEnv, ...(opts.serveEnv || {}) } });
    p.env = { ...this.env };
    p.database = this.database; // its peer's, not its own: stopping the peer keeps it
    p.listenHost = opts.listenHost; // e.g. '0.0.0.0' (still reached through 127.0.0.1)
    p.keys = this.keys;
    p.tenants = this.tenants;
    p.stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `toolcage-it-${name}-`));
    p.masterKey = path.join(p.stateDir, 'master.key');
    fs.copyFileSync(this.masterKey, p.masterKey);
    fs.chmodSync(p.masterKey, 0o600);
    p.env.TOOLCAGE_MASTER_KEY_FILE = p.masterKey;
    p.logPath = path.join(ROOT, 'tests/artifacts', LABEL, `${name}.server.log`);
    await p.spawnAndWait(await freePort());
    return p;
  }

  /**
   * What the current launcher found on this host ("sandbox host support" in the server log:
   * cgroup version and controllers, seccomp notification, backends...): tests decide what to
   * expect from the host, never from the result under test.
   */
  hostReport() {
    const lines = fs.readFileSync(this.logPath, 'utf8').split('\n').filter((l) => l.includes('"sandbox host support"'));
    assert.ok(lines.length, `no host report in ${this.logPath}`);
    return JSON.parse(lines[lines.length - 1]).host;
  }

  /** The toolcage CLI with this server's database and master key. */
  cli(args, extraEnv = {}) {
    return cli(args, { ...this.env, ...extraEnv });
  }

  /** SQL as the PostgreSQL superuser in this server's database (see psql()). */
  sql(text) {
    return psql(text, this.database ? { db: this.database } : {});
  }

  /** Connection strings this server uses (runtime and owner roles). */
  get urls() {
    const env = { ...dbEnv(), ...this.env };
    return { app: env.TOOLCAGE_DATABASE_URL, owner: env.TOOLCAGE_MIGRATE_DATABASE_URL };
  }

  /**
   * Sends a request and validates the response against the contract.
   * opts: key (API key; omit for none), json (object, serialised), body (string|Buffer, sent
   * as is), headers, timeout (ms), validate (default true).
   * Returns {status, headers, body (Buffer), text, json (parsed or undefined), ms}.
   */
  async request(method, reqPath, opts = {}) {
    const headers = { ...(opts.headers || {}) };
    if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    let body = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers['content-type'] ??= 'application/json';
    }
    const t0 = performance.now();
    let r;
    let buf;
    try {
      r = await fetch(this.base + reqPath, {
        method,
        headers,
        body,
        signal: AbortSignal.timeout(opts.timeout ?? 60_000 * SLOW),
      });
      buf = Buffer.from(await r.arrayBuffer());
    } catch (e) {
      await sleep(100); // let an exit be noticed
      const state = this.exited ? `server exited ${JSON.stringify(this.exited)}` : 'server still running';
      throw new Error(`${method} ${reqPath}: ${e.message} (${e.cause?.code || e.cause?.message || e.name}); ${state}\n` +
        `--- server log tail (${this.logPath}) ---\n${this.logTail(30)}`);
    }
    const res = toResult(r.status, r.headers, buf, performance.now() - t0);
    if (opts.validate !== false) validateResponse(method, reqPath, res);
    return res;
  }

  /**
   * Sends a request with curl instead of fetch, for bodies a server may refuse before
   * reading them all (413): Node destroys a socket on EPIPE and loses the response the
   * server already sent, while curl (like most clients) still reads it.
   * opts: headers (object; a value of '' removes a header curl would add), body (Buffer).
   */
  async curlRequest(method, reqPath, { headers = {}, body = Buffer.alloc(0), validate = true } = {}) {
    const res = await curlHttp(this.base + reqPath, method, headers, body, this.stateDir);
    if (validate) validateResponse(method, reqPath, res);
    return res;
  }

  /** POST /v1/execute as this tenant's agent; asserts 200 unless opts.expect is given. */
  async execute(payload, opts = {}) {
    const res = await this.request('POST', '/v1/execute', { key: opts.key ?? this.keys.agent, json: payload, ...opts });
    assert.equal(res.status, opts.expect ?? 200, `execute ${JSON.stringify(payload).slice(0, 200)}: ${res.text.slice(0, 1000)}`);
    return res;
  }
}

function toResult(status, headers, buf, ms) {
  const text = buf.toString('utf8');
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, headers, body: buf, text, json, ms };
}

async function curlHttp(url, method, headers, body, tmpDir) {
  const id = crypto.randomBytes(6).toString('hex');
  const bodyFile = path.join(tmpDir, `curl-${id}.body`);
  const outFile = path.join(tmpDir, `curl-${id}.out`);
  fs.writeFileSync(bodyFile, body);
  const args = ['-sS', '-X', method, '--data-binary', `@${bodyFile}`, '-D', '-', '-o', outFile, '--max-time', String(60 * SLOW)];
  for (const [k, v] of Object.entries(headers)) args.push('-H', v === '' ? `${k}:` : `${k}: ${v}`);
  args.push(url);
  const t0 = performance.now();
  try {
    const { stdout } = await execFileP('curl', args, { maxBuffer: 1 << 20 });
    // -D - prints every header block (a "100 Continue" first, possibly): keep the last.
    const blocks = stdout.split(/\r\n\r\n/).filter((b) => b.startsWith('HTTP/'));
    const head = blocks[blocks.length - 1].split('\r\n');
    const h = new Headers();
    for (const l of head.slice(1)) {
      const i = l.indexOf(':');
      if (i > 0) h.append(l.slice(0, i).trim(), l.slice(i + 1).trim());
    }
    const buf = fs.existsSync(outFile) ? fs.readFileSync(outFile) : Buffer.alloc(0);
    return toResult(Number(head[0].split(' ')[1]), h, buf, performance.now() - t0);
  } catch (e) {
    throw new Error(`curl ${method} ${url} failed: ${e.stderr || e.message}`);
  } finally {
    fs.rmSync(bodyFile, { force: true });
    fs.rmSync(outFile, { force: true });
  }
}

/**
 * Registers before/after hooks that start a server for this test file and stop it
 * (asserting a clean exit) after the file's tests. Returns the Server; use it in tests.
 */
export { Server };

/**
 * The fields of /proc/PID/stat after the command name (which may hold spaces and parentheses):
 * [0] is field 3 (the state), [1] the parent's pid, [11] and [12] user and system ticks, [19]
 * the start time in ticks since boot. Throws as readFileSync does (ENOENT: gone).
 */
export function statFields(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

export function setup(name = caller(), opts = {}) {
  const server = new Server(name, opts);
  // node:test (Node 20) runs a file's top-level before hooks at once, not one after the
  // other: a file's own hook that needs the server awaits server.ready() (CI's browser lane
  // once made its console users before the tenants existed, in a tenant named "undefined")
  before(async () => { await (server.starting = server.start()); }, { timeout: 120_000 * SLOW });
  after(async () => { await server.stop(); }, { timeout: 60_000 * SLOW });
  return server;
}

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const LIMIT_NAMES = ['timeout_ms', 'cpu_ms', 'memory_mb', 'pids', 'output_bytes', 'file_size_mb', 'workspace_mb', 'tmp_mb', 'open_files'];
export { sleep };

/** Asserts a problem+json response with the given status and type URN suffix. */
export function assertProblem(res, status, type) {
  assert.equal(res.status, status, `expected ${status} ${type}, got ${res.status}: ${res.text.slice(0, 500)}`);
  assert.match(res.headers.get('content-type') || '', /^application\/problem\+json/);
  assert.equal(res.json.type, `urn:toolcage:problem:${type}`, `problem type: ${res.text.slice(0, 500)}`);
  assert.equal(res.json.status, status);
  return res.json;
}

/** Asserts that value matches components/schemas/NAME of the contract. */
export function assertSchema(name, value, where = name) {
  const v = validatorFor(`components/schemas/${name}`);
  assert.ok(v(value), `${where}: does not match ${name}: ${fmtErrors(v.errors)}\nvalue: ${JSON.stringify(value).slice(0, 1000)}`);
}

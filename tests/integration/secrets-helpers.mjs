// Shared by the credential broker's integration tests: a policy with credential grants,
// offline PASETO v4.public verification (node:crypto only), pg_dump, and a restart helper.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

const LIMITS = {
  // generous: these tests assert on credentials, not on speed, and CI hosts get busy
  timeout_ms: { default: 45000, max: 60000 },
  cpu_ms: { default: 30000, max: 60000 },
  memory_mb: { default: 256, max: 512 },
  pids: { default: 64, max: 128 },
  output_bytes: { default: 1048576, max: 1048576 },
};

function shellTool(credentials, extra = {}) {
  return {
    description: 'credential broker test tool',
    language: 'shell',
    command: ['/bin/bash', '--noprofile', '--norc', '{code_file}'],
    code_file: 'main.sh',
    network: 'none',
    limits: LIMITS,
    prescreen: { rules: 'none' },
    credentials,
    ...extra,
  };
}

export const AUDIENCE = 'https://api.example.com';

/** Writes the test policy to a temporary file and returns its path. */
export function writePolicy() {
  const policy = {
    version: 1,
    tools: {
      leaky: shellTool([
        { secret: 'api-key', as: 'env', name: 'API_KEY' },
        { secret: 'ca-cert', as: 'file', name: 'ca.pem' },
        { token: { audience: AUDIENCE, scope: 'deploy:read', ttl_seconds: 300 } },
      ]),
      other: shellTool([{ secret: 'api-key', as: 'env', name: 'API_KEY' }]),
      missing: shellTool([{ secret: 'never-stored', as: 'env', name: 'NOPE' }]),
      tamper: shellTool([{ secret: 'victim', as: 'env', name: 'V' }]),
      expiring: shellTool([{ secret: 'short-lived', as: 'env', name: 'S' }]),
      revoking: shellTool([{ secret: 'revoked-one', as: 'env', name: 'S' }]),
      longrun: shellTool([{ secret: 'brief', as: 'env', name: 'B' }]),
      deleted: shellTool([{ secret: 'gone-soon', as: 'env', name: 'GONE' }]),
      rotate: shellTool([
        { secret: 'r1', as: 'env', name: 'R1' },
        { secret: 'r2', as: 'env', name: 'R2' },
        { secret: 'r3', as: 'file', name: 'r3' },
      ]),
      tokens: shellTool([
        { token: { audience: AUDIENCE, scope: 'deploy:read', ttl_seconds: 60 } },
        { token: { audience: 'https://other.example.com', scope: 'x', ttl_seconds: 5 } },
      ]),
    },
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'toolcage-secrets-policy-'));
  const file = path.join(dir, 'policy.json');
  fs.writeFileSync(file, JSON.stringify(policy, null, 2));
  return file;
}

/** Every form of a value the redactor must catch and no artefact may contain. */
export function encodings(value) {
  const b = Buffer.from(value, 'utf8');
  return {
    raw: value,
    base64: b.toString('base64'),
    base64url: b.toString('base64url'),
    hex: b.toString('hex'),
    HEX: b.toString('hex').toUpperCase(),
    url: encodeURIComponent(value),
  };
}

/** Asserts that none of the forms of any value occurs in text (named for the message). */
export function assertAbsent(text, values, where) {
  for (const v of values) {
    for (const [form, s] of Object.entries(encodings(v))) {
      assert.ok(!text.includes(s), `${where} contains the secret (${form} form)`);
    }
  }
}

function conninfoGet(url, key) {
  const m = url.match(new RegExp(`(?:^|\\s)${key}=(\\S+)`));
  return m ? m[1] : null;
}

/** pg_dump of the server's database, as the superuser. */
export async function pgDump(server) {
  const bin = path.join(process.env.PG_BIN || '/usr/lib/postgresql/15/bin', 'pg_dump');
  const url = server.urls.owner;
  const { stdout } = await execFileP(bin, ['-h', conninfoGet(url, 'host'), '-U', 'postgres',
    '-d', conninfoGet(url, 'dbname')], { maxBuffer: 256 << 20 });
  return stdout;
}

/** Restart the server process with other serve environment (same port and state). */
export async function restart(server, serveEnv) {
  server.proc.kill('SIGTERM');
  const exit = await server.exit;
  assert.deepEqual(exit, { code: 0, signal: null }, `server did not stop cleanly: ${server.logTail()}`);
  server.serveEnv = { ...serveEnv };
  await server.spawnAndWait(server.port);
}

/** A new master key file (mode 0600) next to the server's. */
export function newKeyFile(server, name) {
  const file = path.join(server.stateDir, name);
  fs.writeFileSync(file, crypto.randomBytes(32), { mode: 0o600 });
  return file;
}

// ---------------------------------------------------------------------------
// PASETO v4.public, verified offline the way a downstream service would.

function le64(n) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
}

export function pae(pieces) {
  return Buffer.concat([le64(pieces.length), ...pieces.flatMap((p) => [le64(p.length), p])]);
}

/**
 * Verifies token against the published keys ({keys: [{kid, x}]}) and checks the claims a
 * relying party must: audience and time. Returns the claims; throws on any failure.
 */
export function verifyOffline(token, published, { audience, now = Date.now() } = {}) {
  const parts = token.split('.');
  if (parts.length !== 4 || parts[0] !== 'v4' || parts[1] !== 'public') throw new Error('not v4.public');
  const body = Buffer.from(parts[2], 'base64url');
  const footer = Buffer.from(parts[3], 'base64url');
  const { kid } = JSON.parse(footer.toString('utf8'));
  const key = published.keys.find((k) => k.kid === kid);
  if (!key) throw new Error(`unknown kid ${kid}`);
  // The raw 32-byte key, wrapped in the fixed SPKI prefix of an Ed25519 public key.
  const raw = Buffer.from(key.public_key_hex, 'hex');
  if (raw.length !== 32 || !raw.equals(Buffer.from(key.x, 'base64url'))) throw new Error('bad key');
  const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), raw]);
  const pub = crypto.createPublicKey({ key: spki, format: 'der', type: 'spki' });
  const m = body.subarray(0, body.length - 64);
  const sig = body.subarray(body.length - 64);
  const m2 = pae([Buffer.from('v4.public.'), m, footer, Buffer.alloc(0)]);
  if (!crypto.verify(null, m2, pub, sig)) throw new Error('bad signature');
  const claims = JSON.parse(m.toString('utf8'));
  if (audience !== undefined && claims.aud !== audience) throw new Error('wrong audience');
  if (!(Date.parse(claims.exp) > now)) throw new Error('expired');
  if (Date.parse(claims.nbf) > now) throw new Error('not yet valid');
  return claims;
}

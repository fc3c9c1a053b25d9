// The Kubernetes manifests (deploy/kubernetes) rendered with kustomize (`kubectl kustomize`)
// and checked against the Kubernetes API schemas (kubernetes-models), strictly: every field
// must exist in the schema (a misspelt field is an error here, not silently dropped by the
// API server). Then what the deployment relies on: replicas, probes on /healthz and /readyz,
// the launcher's securityContext, the master key from a Secret, the database URLs from a
// Secret, the PodDisruptionBudget and Service selecting the pods, the demo PostgreSQL.
// No cluster runs here; without kubectl only the base's plain files are checked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const K8S = path.join(ROOT, 'deploy/kubernetes');
const require = createRequire(import.meta.url);
const MODELS = path.dirname(require.resolve('kubernetes-models/package.json'));
const BIN = path.resolve(ROOT, process.env.TOOLCAGE_BIN || 'build/toolcage');

function haveKubectl() {
  try {
    execFileSync('kubectl', ['version', '--client'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const KUBECTL = haveKubectl();

function render(dir) {
  const out = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return YAML.parseAllDocuments(out).map((d) => d.toJS()).filter(Boolean);
}

/** The base without kustomize: its resources are plain files. */
function plainBase() {
  const k = YAML.parse(fs.readFileSync(path.join(K8S, 'base/kustomization.yaml'), 'utf8'));
  return k.resources.flatMap((f) =>
    YAML.parseAllDocuments(fs.readFileSync(path.join(K8S, 'base', f), 'utf8')).map((d) => d.toJS()).filter(Boolean));
}

// ---------------------------------------------------------------------------
// Schema checks: kubernetes-models' validators (types, required fields, enums, formats),
// and unknown fields from its type declarations (which list every field of every type).

function modelPath(obj) {
  const [group, version] = obj.apiVersion.includes('/') ? obj.apiVersion.split('/') : [null, obj.apiVersion];
  return group ? `${group}/${version}/${obj.kind}` : `${version}/${obj.kind}`;
}

async function validate(obj) {
  const mod = await import(`kubernetes-models/${modelPath(obj)}`);
  if (obj.kind === 'Secret' && obj.data) {
    // kustomize wraps long base64 values; the API server's decoder (Go's) skips newlines
    obj = { ...obj, data: Object.fromEntries(Object.entries(obj.data).map(([k, v]) => [k, v.replace(/\n/g, '')])) };
  }
  new mod[obj.kind](obj).validate();
}

const declCache = new Map();
/** The fields of the interface declared in a .d.ts file, with where their types are declared. */
function fieldsOf(file) {
  if (declCache.has(file)) return declCache.get(file);
  let text = '';
  try { text = fs.readFileSync(file, 'utf8'); } catch { declCache.set(file, null); return null; }
  const imports = new Map();
  for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
    const spec = m[2];
    const target = spec.startsWith('.') ? path.resolve(path.dirname(file), spec)
      : path.join(path.dirname(require.resolve(`${spec.split('/').slice(0, 2).join('/')}/package.json`)), spec.split('/').slice(2).join('/'));
    imports.set(m[1], target.replace(/\.js$/, '') + '.d.ts');
  }
  const start = text.search(/export interface \w+[^{]*\{/);
  if (start < 0) { declCache.set(file, null); return null; } // a type alias (IntOrString, Quantity...)
  const body = text.slice(text.indexOf('{', start) + 1);
  const fields = new Map();
  for (const m of body.matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) {
    const t = m[2].replace(/;$/, '');
    let ref = null;
    let array = false;
    let mm;
    if ((mm = t.match(/^Array<(\w+)>$/)) && imports.has(mm[1])) { ref = imports.get(mm[1]); array = true; }
    else if ((mm = t.match(/^(\w+)$/)) && imports.has(mm[1])) ref = imports.get(mm[1]);
    fields.set(m[1], { ref, array, open: t.startsWith('{') });
    if (body.slice(m.index).match(/^\}/m)?.index === 0) break;
  }
  // stop at the end of the interface: fields after its closing brace belong to the class
  const end = body.search(/^\}/m);
  for (const [name] of fields) {
    const at = body.search(new RegExp(`^ {4}"${name.replace(/[$]/g, '\\$')}"`, 'm'));
    if (at > end) fields.delete(name);
  }
  declCache.set(file, fields);
  return fields;
}

function unknownFields(value, file, where, out) {
  const fields = fieldsOf(file);
  if (!fields || value === null || typeof value !== 'object' || Array.isArray(value)) return out;
  for (const [k, v] of Object.entries(value)) {
    const f = fields.get(k);
    if (!f) { out.push(`${where}.${k}`); continue; }
    if (!f.ref) continue;
    if (f.array && Array.isArray(v)) v.forEach((x, i) => unknownFields(x, f.ref, `${where}.${k}[${i}]`, out));
    else unknownFields(v, f.ref, `${where}.${k}`, out);
  }
  return out;
}

async function checkObject(obj) {
  await validate(obj);
  const bad = unknownFields(obj, path.join(MODELS, `${modelPath(obj)}.d.ts`), `${obj.kind}/${obj.metadata.name}`, []);
  assert.deepEqual(bad, [], `fields the schema does not have: ${bad.join(', ')}`);
}

// ---------------------------------------------------------------------------

test('the schema check finds a misspelt field, a wrong type and a missing required field', async () => {
  const [dep] = plainBase().filter((o) => o.kind === 'Deployment');
  await checkObject(dep);
  const typo = structuredClone(dep);
  typo.spec.template.spec.containers[0].securityContext.priviliged = true;
  await assert.rejects(checkObject(typo), /priviliged/);
  const deep = structuredClone(dep);
  deep.spec.template.spec.volumes[0].secret.items[0].mdoe = 256;
  await assert.rejects(checkObject(deep), /volumes\[0\]\.secret\.items\[0\]\.mdoe/);
  const type = structuredClone(dep);
  type.spec.replicas = 'two';
  await assert.rejects(checkObject(type), /replicas/);
  const missing = structuredClone(dep);
  delete missing.spec.template.spec.containers[0].readinessProbe.httpGet.port;
  await assert.rejects(checkObject(missing), /port/);
});

const SETS = [['base', () => (KUBECTL ? render(path.join(K8S, 'base')) : plainBase())]];
if (KUBECTL) SETS.push(['overlays/example', () => render(path.join(K8S, 'overlays/example'))]);
else test('overlays/example renders (needs kubectl for kustomize)', { skip: 'kubectl not installed' }, () => {});

for (const [name, load] of SETS) {
  test(`${name}: every object is valid against the Kubernetes schemas`, async () => {
    const objs = load();
    assert.ok(objs.length >= 3);
    for (const o of objs) await checkObject(o);
  });

  test(`${name}: the Deployment runs replicas with probes, the launcher's privileges and the secrets`, () => {
    const objs = load();
    const dep = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'toolcage');
    assert.ok(dep.spec.replicas >= 2, 'several replicas');
    if (name === 'overlays/example') assert.equal(dep.spec.replicas, 3);
    const pod = dep.spec.template.spec;
    const c = pod.containers.find((x) => x.name === 'toolcage');
    const port = c.ports.find((p) => p.name === 'http');
    assert.equal(port.containerPort, 8080);
    assert.equal(c.livenessProbe.httpGet.path, '/healthz');
    assert.equal(c.startupProbe.httpGet.path, '/healthz');
    assert.equal(c.readinessProbe.httpGet.path, '/readyz');
    // the probes' own listener (TOOLCAGE_HEALTH_PORT), which no held HTTP thread can stall
    for (const p of [c.livenessProbe, c.readinessProbe, c.startupProbe]) assert.equal(p.httpGet.port, 'health');
    const healthPort = c.ports.find((p) => p.name === 'health');
    assert.ok(healthPort, 'a container port named health');
    assert.equal(c.env.find((e) => e.name === 'TOOLCAGE_HEALTH_PORT')?.value, String(healthPort.containerPort));
    const env = Object.fromEntries(c.env.map((e) => [e.name, e]));
    assert.equal(env.TOOLCAGE_LISTEN.value, '0.0.0.0:8080');
    // the server holds only the runtime role; the owner's URL goes to the migration step
    assert.equal(env.TOOLCAGE_DATABASE_URL.valueFrom.secretKeyRef.key, 'app-url');
    assert.equal(env.TOOLCAGE_MIGRATE_DATABASE_URL.valueFrom.secretKeyRef.key, 'app-url');
    const mig = pod.initContainers.find((x) => x.name === 'migrate');
    assert.deepEqual(mig.command, ['toolcage', 'migrate']);
    assert.equal(mig.env.find((e) => e.name === 'TOOLCAGE_MIGRATE_DATABASE_URL').valueFrom.secretKeyRef.key, 'owner-url');
    assert.equal(mig.securityContext.runAsNonRoot, true);
    assert.equal(mig.securityContext.allowPrivilegeEscalation, false);
    // the master key: a Secret, mode 0400, where TOOLCAGE_MASTER_KEY_FILE points
    const keyVol = pod.volumes.find((v) => v.secret && v.secret.secretName === 'toolcage-master-key');
    assert.ok(keyVol, 'the master key comes from the Secret toolcage-master-key');
    assert.equal(keyVol.secret.defaultMode, 0o400);
    const mount = c.volumeMounts.find((m) => m.name === keyVol.name);
    assert.equal(mount.readOnly, true);
    assert.equal(env.TOOLCAGE_MASTER_KEY_FILE.value, `${mount.mountPath}/${keyVol.secret.items[0].path}`);
    // the launcher's securityContext (README.md, Deploy: why privileged here)
    assert.equal(c.securityContext.privileged, true);
    assert.equal(c.securityContext.runAsUser, 0);
    assert.equal(c.securityContext.readOnlyRootFilesystem, true);
    const state = c.volumeMounts.find((m) => m.mountPath === env.TOOLCAGE_STATE_DIR.value);
    assert.ok(pod.volumes.find((v) => v.name === state.name).emptyDir, 'the launcher state is an emptyDir');
    assert.equal(pod.automountServiceAccountToken, false);
  });

  test(`${name}: the PodDisruptionBudget and the Service select the server's pods`, () => {
    const objs = load();
    const dep = objs.find((o) => o.kind === 'Deployment' && o.metadata.name === 'toolcage');
    const labels = dep.spec.template.metadata.labels;
    const pdb = objs.find((o) => o.kind === 'PodDisruptionBudget');
    const svc = objs.find((o) => o.kind === 'Service' && o.metadata.name === 'toolcage');
    const selects = (sel) => Object.entries(sel).every(([k, v]) => labels[k] === v);
    assert.ok(selects(pdb.spec.selector.matchLabels));
    assert.ok(selects(svc.spec.selector));
    assert.deepEqual(dep.spec.selector.matchLabels, pdb.spec.selector.matchLabels);
    assert.ok(pdb.spec.minAvailable >= 1 && pdb.spec.minAvailable < dep.spec.replicas);
    assert.equal(svc.spec.ports[0].targetPort, 'http');
  });
}

if (KUBECTL) {
  test('overlays/example: namespace, image, policy ConfigMap, demo PostgreSQL wired to the secrets', () => {
    const objs = render(path.join(K8S, 'overlays/example'));
    for (const o of objs) if (o.kind !== 'Namespace') assert.equal(o.metadata.namespace, 'toolcage-demo');
    const byKind = (k, n) => objs.find((o) => o.kind === k && o.metadata.name.startsWith(n));
    const dep = byKind('Deployment', 'toolcage');
    const pod = dep.spec.template.spec;
    for (const c of [...pod.containers, ...pod.initContainers]) assert.equal(c.image, 'registry.example.com/toolcage:0.1.0');
    const db = byKind('Secret', 'toolcage-database');
    const c = pod.containers[0];
    assert.equal(c.env.find((e) => e.name === 'TOOLCAGE_DATABASE_URL').valueFrom.secretKeyRef.name, db.metadata.name);
    const policyCm = byKind('ConfigMap', 'toolcage-policy');
    assert.equal(pod.volumes.find((v) => v.name === 'policy').configMap.name, policyCm.metadata.name);
    assert.equal(c.env.find((e) => e.name === 'TOOLCAGE_POLICY').value, '/etc/toolcage-policy/policy.json');
    const sts = byKind('StatefulSet', 'postgres');
    assert.equal(sts.spec.template.spec.containers[0].image, 'postgres:15');
    assert.equal(sts.spec.volumeClaimTemplates[0].spec.resources.requests.storage, '1Gi');
    const svc = byKind('Service', 'postgres');
    assert.equal(sts.spec.serviceName, svc.metadata.name);
    // the URLs point at that Service, with the passwords the database was created with
    const pg = byKind('Secret', 'postgres');
    const secret = (s, k) => Buffer.from(s.data[k], 'base64').toString();
    assert.match(secret(db, 'app-url'), new RegExp(`host=${svc.metadata.name} .*user=toolcage_app password=${secret(pg, 'app-password')}$`));
    assert.match(secret(db, 'owner-url'), new RegExp(`host=${svc.metadata.name} .*user=toolcage_owner password=${secret(pg, 'owner-password')}$`));
    const init = byKind('ConfigMap', 'postgres-init');
    assert.equal(init.data['10-toolcage.sh'], fs.readFileSync(path.join(ROOT, 'deploy/compose/initdb.sh'), 'utf8'),
      'the StatefulSet initialises the database with the same script as docker-compose.yml');
  });
}

test('overlays/example: its policy file is valid (toolcage policy check)', { skip: !fs.existsSync(BIN) && `no ${BIN}` }, () => {
  const out = execFileSync(BIN, ['policy', 'check', path.join(K8S, 'overlays/example/policy.json')], { encoding: 'utf8' });
  assert.match(out, /^ok: 2 tools$/m);
});

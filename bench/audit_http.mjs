// Helper of bench/audit_bench.sh: latency of typical audit queries through the real HTTP API.
// Usage: node bench/audit_http.mjs BASE_URL AUDITOR_KEY N
// Prints one line per query (p50, p95, max in ms; rows per page) and a JSON summary line
// "RESULT {...}" the script reads; exits 0 whatever the figures.
const [base, key, nArg] = process.argv.slice(2);
const N = Number(nArg || 200);
const TARGET_MS = 50;

async function get(path) {
  const t0 = performance.now();
  const r = await fetch(base + path, { headers: { authorization: `Bearer ${key}` } });
  const body = await r.text();
  const ms = performance.now() - t0;
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${body.slice(0, 300)}`);
  return { ms, json: JSON.parse(body) };
}

const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

// A window of one day in the middle of the seeded 30 days, and a cursor deep-ish in the trail.
const day = new Date(Date.now() - 15 * 86400e3).toISOString().slice(0, 10);
const nextDay = new Date(Date.parse(day) + 86400e3).toISOString().slice(0, 10);
const page1 = await get('/v1/audit?limit=100');
const cursor = page1.json.next_cursor;

const queries = [
  ['tenant only (page 1)', '/v1/audit'],
  ['tenant + tool', '/v1/audit?tool=shell'],
  ['tenant + rare tool', '/v1/audit?tool=node'],
  ['tenant + action', '/v1/audit?action=execution.complete'],
  ['tenant + status=timeout', '/v1/audit?status=timeout'],
  ['tenant + actor', null], // filled below from a record
  ['tenant + since/until (1 day)', `/v1/audit?since=${day}&until=${nextDay}`],
  ['tenant + since/until + tool', `/v1/audit?since=${day}&until=${nextDay}&tool=python`],
  ['q free text, common (tool)', '/v1/audit?q=python'],
  ['q free text, rare (reason)', '/v1/audit?q=prod-db'],
  ['q free text, no match', '/v1/audit?q=zzzz-nothing'],
  ['page 2 with cursor', `/v1/audit?cursor=${cursor}`],
  ['page 2 with cursor + tool', null],
];
// An actor of the seeded history (the newest records may come from the append benchmark).
const actor = (await get(`/v1/audit?since=${day}&until=${nextDay}&limit=1`)).json.records[0].record.actor.id;
queries[5][1] = `/v1/audit?actor=${actor}`;
const p1tool = await get('/v1/audit?tool=deploy');
queries[12][1] = `/v1/audit?tool=deploy&cursor=${p1tool.json.next_cursor}`;

const results = [];
for (const [name, path] of queries) {
  for (let i = 0; i < 5; i++) await get(path); // warm
  const times = [];
  let rows = 0;
  for (let i = 0; i < N; i++) {
    const r = await get(path);
    times.push(r.ms);
    rows = r.json.records.length;
  }
  times.sort((a, b) => a - b);
  const res = { name, path, p50: pct(times, 50), p95: pct(times, 95), max: times[times.length - 1], rows };
  results.push(res);
  console.log(`${name.padEnd(32)} p50 ${res.p50.toFixed(1).padStart(7)} ms  p95 ${res.p95.toFixed(1).padStart(7)} ms  max ${res.max.toFixed(1).padStart(7)} ms  rows ${String(rows).padStart(3)}  ${res.p95 <= TARGET_MS ? 'ok' : `MISSES p95 <= ${TARGET_MS} ms`}`);
}
console.log('RESULT ' + JSON.stringify(results));

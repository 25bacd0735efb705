// picolm --json-schema end to end (tests/t_schema.sh): random schemas
// (gen.mjs) through the real picolm binary on shared models with sampling
// on, every output validated by ajv (draft 2020-12); the budget's minimum
// (refused below, complete at it and above); errors for schemas picolm
// cannot honour.  Prints PASS/FAIL lines.
//   node schema.test.mjs BIN SHARED TMPDIR [N_SCHEMAS]
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import Ajv2020 from 'ajv/dist/2020.js';
import { genSchema, rng } from './gen.mjs';

const [bin, shared, tmp, nArg] = process.argv.slice(2);
const N = Number(nArg || 200);
const MODELS = {
  'tiny-shakespeare': `${shared}/models/tiny-shakespeare-q8_0.gguf`,
  qwen2: `${shared}/models/rand-qwen2-q4_0.gguf`,
  llama3: `${shared}/models/rand-llama3-q4_k_m.gguf`,
};
// Every schema runs on the small vocabulary (~20 ms of CPU a run); one in
// 40 also on each of the 152k and 128k vocabularies (~170 ms a run, most
// of it building the tokenizer), with two seeds.  test_schema covers those
// vocabularies in one process with random choices.
const SEEDS = [1, 2, 3];
const extraBudget = [0, 1, 6]; // seed k runs at the minimum + extraBudget[k]
const JOBS = 2;

let failures = 0;
const pass = (msg) => console.log(`PASS: ${msg}`);
const fail = (msg) => { failures++; console.log(`FAIL: ${msg}`); };
const clip = (s, n = 300) => (s.length > n ? `${s.slice(0, n)}...` : s).replace(/\n/g, '\\n');

// MALLOC_PERTURB_: glibc fills freed memory, so a message read from a freed
// block shows as garbage in the plain build too (ASan ignores it).
const env = { ...process.env, MALLOC_PERTURB_: '165' };
function run(args) {
  return new Promise((resolve) => {
    const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    let out = '', err = '';
    p.stdout.setEncoding('utf8').on('data', (d) => { out += d; });
    p.stderr.setEncoding('utf8').on('data', (d) => { err += d; });
    p.on('close', (code) => resolve({ code, out, err }));
  });
}

// Run jobs (functions returning promises) JOBS at a time.
async function pool(jobs) {
  const results = new Array(jobs.length);
  let next = 0;
  await Promise.all(Array.from({ length: JOBS }, async () => {
    while (next < jobs.length) { const i = next++; results[i] = await jobs[i](); }
  }));
  return results;
}

const gen = (model, file, n, seed) =>
  run([MODELS[model], '-j', '1', '-n', String(n), '-t', '1', '-s', String(seed), '--json-schema', file, '-p', 'JSON:']);
// the minimum a refusal names, with the stage that needs it; 0 when absent
const minOf = (r) => { const m = /the shortest document the schema allows takes (\d+) \(sampler json_schema\); use -n \1 or more\n/.exec(r.err); return m ? Number(m[1]) : 0; };

const ajv = new Ajv2020({ strict: true, strictTypes: false, allErrors: true });
const t0 = Date.now();

// ---- random schemas: the minimum (from -n 1), then three seeds above it ----
const r = rng(20240601);
const cases = Array.from({ length: N }, (_, i) => {
  const schema = genSchema(r);
  const file = `${tmp}/s${String(i).padStart(3, '0')}.json`;
  writeFileSync(file, JSON.stringify(schema));
  const validate = ajv.compile(schema);
  const big = i % 40 === 3 ? ['qwen2'] : i % 40 === 23 ? ['llama3'] : [];
  return ['tiny-shakespeare', ...big].map((model) => ({ i, schema, file, model, validate, seeds: model === 'tiny-shakespeare' ? 3 : 2 }));
}).flat();
const probes = await pool(cases.map((c) => () => gen(c.model, c.file, 1, 1)));
const runs = [];
let probeBad = 0;
cases.forEach((c, k) => {
  const p = probes[k];
  c.min = p.code === 0 ? 1 : minOf(p);
  if (p.code === 0) runs.push({ c, seed: 1, n: 1, res: p });
  else if (p.code !== 2 || c.min < 2) {
    if (probeBad++ < 3) fail(`schema ${c.i} (${c.model}): -n 1 neither ran nor was refused with its minimum: rc ${p.code}: ${clip(p.err)}; schema ${clip(JSON.stringify(c.schema))}`);
  }
});
if (!probeBad) pass(`${N} random schemas (${cases.length} schema x model): -n 1 refused with the minimum budget (exit 2) or complete`);
const todo = [];
for (const c of cases) {
  if (!c.min) continue;
  SEEDS.slice(0, c.seeds).forEach((seed, k) => todo.push({ c, seed, n: c.min + extraBudget[k] }));
  if (c.min > 2 && (c.i < 30 || c.model !== 'tiny-shakespeare')) todo.push({ c, seed: 9, n: c.min - 1, below: true });
}
const results = await pool(todo.map((t) => () => gen(t.c.model, t.c.file, t.n, t.seed)));
todo.forEach((t, k) => { t.res = results[k]; });
let bad = 0, belowBad = 0, bytes = 0, nRuns = 0;
const perModel = {};
for (const t of [...runs, ...todo]) {
  const { c, res } = t;
  if (t.below) {
    if (res.code !== 2 || minOf(res) !== c.min || res.out) {
      if (belowBad++ < 3) fail(`schema ${c.i} (${c.model}): -n ${t.n} (one below the minimum) not refused: rc ${res.code}: ${clip(res.err)}`);
    }
    continue;
  }
  nRuns++;
  perModel[c.model] = (perModel[c.model] || 0) + 1;
  bytes += res.out.length;
  let why = res.code !== 0 ? `rc ${res.code}: ${clip(res.err)}` : '';
  if (!why) {
    try {
      const v = JSON.parse(res.out);
      if (!c.validate(v)) why = `ajv: ${ajv.errorsText(c.validate.errors)}`;
    } catch (e) {
      why = `not one complete JSON document (${e.message})`;
    }
  }
  if (why && bad++ < 5) fail(`schema ${c.i} (${c.model}) seed ${t.seed} -n ${t.n}: ${why}; output ${clip(res.out)}; schema ${clip(JSON.stringify(c.schema))}`);
}
const spread = Object.entries(perModel).map(([m, n]) => `${m} ${n}`).join(', ');
if (!bad) pass(`${N} random schemas x ${SEEDS.length} seeds (2 on the large vocabularies), budgets the minimum +${extraBudget.join('/+')}: ${nRuns} outputs complete and valid by ajv (${spread}; ${bytes} bytes)`);
if (!belowBad) pass(`one token below the minimum is refused up front with the minimum named (${todo.filter((t) => t.below).length} schemas)`);

// ---- a tool call: {"name": one of N, "arguments": that function's schema} ----
const tools = [
  ['get_weather', { type: 'object', properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['C', 'F'] } }, required: ['city'], additionalProperties: false }],
  ['add', { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'], additionalProperties: false }],
  ['search', { type: 'object', properties: { query: { type: 'string', minLength: 1, maxLength: 30 }, limit: { type: 'integer', minimum: 1, maximum: 10 } }, required: ['query'], additionalProperties: false }],
];
const call = { anyOf: tools.map(([name, args]) => ({ type: 'object', properties: { name: { const: name }, arguments: args }, required: ['name', 'arguments'], additionalProperties: false })) };
writeFileSync(`${tmp}/tools.json`, JSON.stringify(call));
const vcall = ajv.compile(call);
const calls = await pool(['qwen2', 'llama3', 'tiny-shakespeare'].flatMap((m) => [4, 5, 6].map((seed) => () => gen(m, `${tmp}/tools.json`, 48, seed))));
const names = new Set();
const badCall = calls.filter((res) => {
  try { const v = JSON.parse(res.out); names.add(v.name); return res.code !== 0 || !vcall(v); } catch { return true; }
});
if (!badCall.length) pass(`tool-call schema (anyOf of 3 functions, name by const): 9 calls valid on 3 models (names: ${[...names].join(', ')})`);
else fail(`tool-call schema: ${badCall.length}/9 invalid; first: rc ${badCall[0].code} ${clip(badCall[0].out)} ${clip(badCall[0].err)}`);

// ---- schemas picolm refuses: a clear message naming the problem, exit 2 ----
const refusals = [
  ['{"type":"string","pattern":"^a+$"}', "#: unsupported keyword 'pattern'"],
  ['{"type":"object","properties":{"when":{"type":"string","format":"date-time"}}}', "#/properties/when: unsupported keyword 'format'"],
  ['{"oneOf":[{"type":"string"},{"type":"null"}]}', "unsupported keyword 'oneOf'"],
  ['{"type":', 'the schema is not valid JSON: line 1, column 9'],
  ['{"$ref":"#/$defs/missing"}', "$ref '#/$defs/missing' does not resolve"],
  ['{"type":"integer","minimum":10,"maximum":5}', 'no finite JSON document satisfies the schema'],
  [`${tmp}/no-such-file.json`, 'cannot read the schema file'],
];
const refused = await pool(refusals.map(([s]) => () => gen('tiny-shakespeare', s, 20, 1)));
refusals.forEach(([s, want], k) => {
  const res = refused[k];
  if (res.code === 2 && res.err.includes(want) && !res.out) pass(`refused (exit 2): ${clip(s, 80)}: ${clip(res.err.trim(), 200)}`);
  else fail(`${clip(s, 80)}: want exit 2 and '${want}', got rc ${res.code}: ${clip(res.err)} ${clip(res.out)}`);
});

// ---- the INI key, and what cannot be combined ----
const person = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 150 } }, required: ['name', 'age'], additionalProperties: false };
writeFileSync(`${tmp}/person.json`, JSON.stringify(person));
writeFileSync(`${tmp}/schema.ini`, `[generate]\njson_schema = ${tmp}/person.json\n`);
const tiny = MODELS['tiny-shakespeare'];
const [viaIni, withStop] = await Promise.all([
  run([tiny, '-j', '1', '-n', '40', '-t', '1', '-s', '5', '--config', `${tmp}/schema.ini`, '-p', 'JSON:']),
  run([tiny, '-j', '1', '-n', '40', '--json-schema', `${tmp}/person.json`, '--stop', '}', '-p', 'JSON:']),
]);
let iniOk = false;
try { iniOk = viaIni.code === 0 && ajv.validate(person, JSON.parse(viaIni.out)); } catch { iniOk = false; }
if (iniOk) pass(`[generate] json_schema = FILE in the INI: ${clip(viaIni.out.replace(/\s+/g, ' '), 80)}`);
else fail(`[generate] json_schema in the INI: rc ${viaIni.code}: ${clip(viaIni.out)} ${clip(viaIni.err)}`);
if (withStop.code === 2 && withStop.err.includes('--json-schema and --stop cannot be combined')) pass('--json-schema with --stop refused (exit 2)');
else fail(`--json-schema with --stop: rc ${withStop.code}: ${clip(withStop.err)}`);

console.log(`# ${Date.now() - t0} ms`);
process.exit(failures ? 1 : 0);

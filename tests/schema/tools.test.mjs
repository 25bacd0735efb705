// picolm --tools / --messages end to end (run by tests/t_tools.sh):
//   node tests/schema/tools.test.mjs BIN SHARED TMP
// On the shared Qwen2 (Hermes-style) and Llama 3 models: the reply is one
// line of JSON; every forced call names a tool and its arguments are valid
// against the tool's schema (ajv); a named function is the one called; an
// auto reply is text or a call; a conversation with a call and its result
// (--messages, from a file and from stdin) is answered; the refusals exit 2
// naming what is wrong.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";

const [BIN, SHARED, TMP] = process.argv.slice(2);
const ajv = new Ajv2020({ strict: false });
let failed = 0;
function check(name, fn) {
  try { fn(); console.log(`PASS: tools cli: ${name}`); }
  catch (e) { failed++; console.log(`FAIL: tools cli: ${name}: ${String(e.message).replace(/\n/g, " ").slice(0, 400)}`); }
}
function assert(c, m) { if (!c) throw new Error(m); }

const TOOLS = [
  { type: "function", function: { name: "get_weather", description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 16 }, unit: { enum: ["celsius", "fahrenheit"] } },
      required: ["city"], additionalProperties: false } } },
  { type: "function", function: { name: "add", parameters: { type: "object", properties: { a: { type: "integer", minimum: -50, maximum: 50 },
      b: { type: "number" } }, required: ["a", "b"], additionalProperties: false } } },
];
const V = Object.fromEntries(TOOLS.map(t => [t.function.name, ajv.compile(t.function.parameters)]));
const toolsFile = `${TMP}/tools.json`;
fs.writeFileSync(toolsFile, JSON.stringify(TOOLS));

function run(model, args, input) {
  const r = spawnSync(BIN, [model, "-j", "1", "-c", "1024", "--tools", toolsFile, ...args], { input: input || "", encoding: "utf8" });
  return { rc: r.status, out: r.stdout, err: r.stderr };
}
// One line of JSON: a call valid against its tool's schema, or text.
function reply(r, what) {
  assert(r.rc === 0, `${what}: exit ${r.rc}: ${r.err.slice(-300)}`);
  const lines = r.out.split("\n");
  assert(lines.length === 2 && lines[1] === "", `${what}: not one line: ${JSON.stringify(r.out).slice(0, 200)}`);
  const j = JSON.parse(lines[0]);
  if ("name" in j) {
    assert(V[j.name], `${what}: unknown function ${j.name}`);
    assert(V[j.name](j.arguments), `${what}: ${j.name}(${JSON.stringify(j.arguments)}): ${ajv.errorsText(V[j.name].errors)}`);
  } else {
    assert(typeof j.content === "string", `${what}: neither a call nor text: ${lines[0].slice(0, 200)}`);
  }
  return j;
}

const MODELS = [["qwen2", `${SHARED}/models/rand-qwen2-q4_0.gguf`, []], ["llama3", `${SHARED}/models/rand-llama3-q4_k_m.gguf`, ["--chat-template", "llama3"]]];
for (const [fam, model, extra] of MODELS) {
  check(`${fam}: --tool-choice required, 10 seeds: each reply a call valid against its tool's schema`, () => {
    const names = new Set();
    for (let s = 0; s < 10; s++) {
      const j = reply(run(model, [...extra, "--tool-choice", "required", "-n", "64", "-s", String(s), "-t", "1", "-p", "Weather in Paris?"]), `seed ${s}`);
      assert("name" in j && !("content" in j), `seed ${s}: not a call: ${JSON.stringify(j)}`);
      names.add(j.name);
    }
    assert(names.size === 2, `only ${[...names]} called`);
  });
  check(`${fam}: --tool-choice add: a call to add`, () => {
    const j = reply(run(model, [...extra, "--tool-choice", "add", "-n", "64", "-s", "4", "-p", "2+3?"]), "named");
    assert(j.name === "add", `called ${j.name}`);
  });
  check(`${fam}: --tool-choice auto (the default): text or a call`, () => {
    for (let s = 0; s < 4; s++) reply(run(model, [...extra, "-n", "64", "-s", String(s), "-t", "1", "-p", "Hello"]), `auto seed ${s}`);
  });
  check(`${fam}: --messages with a call and its result, from a file and from stdin`, () => {
    const conv = [{ role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\": \"Paris\"}" } }] },
      { role: "tool", tool_call_id: "call_1", content: "{\"temp\": 21}" }];
    fs.writeFileSync(`${TMP}/conv.json`, JSON.stringify(conv));
    const a = run(model, [...extra, "--messages", `${TMP}/conv.json`, "-n", "64", "-s", "2", "-t", "0"]);
    const b = run(model, [...extra, "--messages", "-", "-n", "64", "-s", "2", "-t", "0"], JSON.stringify(conv));
    reply(a, "file");
    assert(a.out === b.out, `stdin gives another reply: ${a.out} vs ${b.out}`);
    const c = run(model, [...extra, "--messages", `${TMP}/conv.json`, "-n", "64", "-s", "2", "-t", "0", "-p", "And in Oslo?"]);
    reply(c, "file and -p");
    assert(/prefill (\d+)/.exec(c.err)[1] > /prefill (\d+)/.exec(a.err)[1], "-p does not add a user message");
  });
}

const qwen = MODELS[0][1];
check("refusals exit 2 naming what is wrong", () => {
  const cases = [
    [["--tool-choice", "required", "-n", "5", "-p", "x"], /-n 5: too few tokens: the shortest tool call takes \d+/],
    [["--tool-choice", "nope", "-p", "x"], /'nope' is not auto, none, required or one of the tools \(get_weather, add\)/],
    [["--tool-choice", "required", "--stop", "x", "-p", "x"], /--tools and --stop cannot be combined/],
    [["--tools", '[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"d":{"type":"string","format":"date"}}}}}]',
      "--tool-choice", "required", "-p", "x"], /tools\[0\] \(f\): parameters: #\/properties\/d: unsupported keyword 'format'/],
    [["--tools", '[{"type":"function","function":{"name":"bad name"}}]', "-p", "x"], /--tools: tools\[0\]: the function needs a name/],
    [["--tools", "[{", "-p", "x"], /--tools: tools: not valid JSON/],
    [["--tools", `${TMP}/missing.json`, "-p", "x"], /cannot read .*missing.json/],
    [["--messages", "[{\"role\": \"wizard\", \"content\": \"x\"}]"], /--messages: messages\[0\]: unsupported role 'wizard'/],
    [["--messages", "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"add\", \"arguments\": \"{\\\"a\\\"\"}}]}]"],
      /messages\[0\]: the arguments of the call to 'add': not valid JSON/],
  ];
  for (const [args, re] of cases) {
    const r = run(qwen, args);
    assert(r.rc === 2 && re.test(r.err) && r.out === "", `${args.join(" ").slice(0, 80)}: exit ${r.rc}: ${r.err.slice(0, 300)}`);
  }
});

process.exit(failed ? 1 : 0);

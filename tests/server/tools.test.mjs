// Tool calls and response_format json_schema through the official openai
// SDK.  Run by tests/t_server_tools.sh, which passes:
//   QWEN_URL   picolm-server on the shared Qwen2 model (Hermes-style calls)
//   LLAMA_URL  picolm-server on the shared Llama 3 model, --chat-template llama3
// The models have random weights: what they write is noise, so every
// check is on the shape (a call always complete, its arguments valid
// against the declared schema, by ajv) and on the protocol.
// Prints PASS:/FAIL: lines (tests/run.sh counts them).
import { createRequire } from "node:module";
import OpenAI from "openai";

const require = createRequire(new URL("../schema/package.json", import.meta.url));
const Ajv2020 = require("ajv/dist/2020").default;
const ajv = new Ajv2020({ strict: false });

const env = process.env;
let failed = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`PASS: tools: ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL: tools: ${name}: ${String(e && e.stack ? e.message : e).replace(/\n/g, " ").slice(0, 500)}`);
  }
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }

const TOOLS = [
  { type: "function", function: { name: "get_weather", description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 16 }, unit: { enum: ["celsius", "fahrenheit"] },
      days: { type: "integer", minimum: 1, maximum: 7 } }, required: ["city"], additionalProperties: false } } },
  { type: "function", function: { name: "add", description: "a + b",
    parameters: { type: "object", properties: { a: { type: "number", minimum: -100, maximum: 100 }, b: { type: "number" } },
      required: ["a", "b"], additionalProperties: false } } },
];
const validators = Object.fromEntries(TOOLS.map(t => [t.function.name, ajv.compile(t.function.parameters)]));
const USER = { role: "user", content: "What is the weather in Paris, and what is 2+3?" };
const client = url => new OpenAI({ baseURL: url + "/v1", apiKey: "none", maxRetries: 0 });

// A call of the reply: one, known, its arguments a JSON object valid against the tool's schema.
function checkCall(choice, what, only) {
  assert(choice.finish_reason === "tool_calls", `${what}: finish_reason ${choice.finish_reason}`);
  const calls = choice.message.tool_calls;
  assert(Array.isArray(calls) && calls.length === 1, `${what}: tool_calls ${JSON.stringify(calls)}`);
  const c = calls[0];
  assert(c.type === "function" && /^call_/.test(c.id), `${what}: id ${c.id}, type ${c.type}`);
  assert(validators[c.function.name] && (!only || c.function.name === only), `${what}: function ${c.function.name}`);
  let args;
  try { args = JSON.parse(c.function.arguments); } catch (e) { throw new Error(`${what}: arguments are not JSON: ${c.function.arguments}`); }
  const v = validators[c.function.name];
  assert(v(args), `${what}: ${c.function.name}(${c.function.arguments}) invalid: ${ajv.errorsText(v.errors)}`);
  return c;
}

for (const [family, url] of [["qwen2 (hermes)", env.QWEN_URL], ["llama3", env.LLAMA_URL]]) {
  const api = client(url);
  const base = { model: "m", messages: [USER], tools: TOOLS, max_tokens: 48 };

  await check(`${family}: tool_choice required, 20 seeds: one call each, its arguments valid against the declared schema`, async () => {
    const rs = await Promise.all(Array.from({ length: 20 }, (_, seed) =>
      api.chat.completions.create({ ...base, tool_choice: "required", seed, temperature: 1 })));
    const names = new Set();
    rs.forEach((r, seed) => names.add(checkCall(r.choices[0], `seed ${seed}`).function.name));
    assert(rs.every(r => r.choices[0].message.content === null), "content is not null beside the call");
    assert(names.size === 2, `only ${[...names]} were called in 20 seeds`);
  });

  await check(`${family}: a named function is the one called`, async () => {
    const r = await api.chat.completions.create({ ...base, tool_choice: { type: "function", function: { name: "add" } }, seed: 5 });
    checkCall(r.choices[0], "named", "add");
  });

  await check(`${family}: tool_choice auto: text or a complete call (a Llama 3 reply that starts with '{' is a call)`, async () => {
    const rs = await Promise.all(Array.from({ length: 8 }, (_, seed) => api.chat.completions.create({ ...base, seed, temperature: 1 })));
    for (const r of rs) {
      const ch = r.choices[0];
      if (ch.message.tool_calls) checkCall(ch, "auto");
      else assert(typeof ch.message.content === "string" && ch.finish_reason !== "tool_calls" && !ch.message.content.startsWith(family === "llama3" ? "{" : "<tool_call>"),
                  `auto: ${JSON.stringify(ch).slice(0, 200)}`);
    }
  });

  await check(`${family}: streamed deltas assemble to the call of the same request unstreamed`, async () => {
    const req = { ...base, tool_choice: "required", seed: 11, temperature: 1 };
    // Llama 3's prompt has today's date: all three requests on the same day
    const midnight = new Date(); midnight.setHours(24, 0, 0, 0);
    if (midnight - Date.now() < 60e3) await new Promise(r => setTimeout(r, midnight - Date.now() + 1000));
    const whole = checkCall((await api.chat.completions.create(req)).choices[0], "whole");
    const stream = await api.chat.completions.create({ ...req, stream: true });
    let id = null, name = null, args = "", finish = null, heads = 0, n = 0;
    for await (const chunk of stream) {
      const ch = chunk.choices[0];
      if (!ch) continue;
      if (ch.finish_reason) finish = ch.finish_reason;
      for (const tc of ch.delta.tool_calls || []) {
        assert(tc.index === 0, `index ${tc.index}`);
        if (tc.id) { heads++; id = tc.id; name = tc.function.name; assert(tc.type === "function" && tc.function.arguments === "", "the first delta"); }
        else { assert(!tc.function.name, "a name after the first delta"); args += tc.function.arguments; n++; }
      }
    }
    assert(heads === 1 && n >= 1 && finish === "tool_calls", `${heads} heads, ${n} fragments, finish ${finish}`);
    assert(name === whole.function.name && args === whole.function.arguments, `streamed ${name}(${args}) != ${whole.function.name}(${whole.function.arguments})`);
    // the SDK's own stream helper assembles the same message
    const helper = api.beta.chat.completions.stream(req);
    const fin = await helper.finalChatCompletion();
    const c = checkCall(fin.choices[0], "SDK stream helper");
    assert(c.function.arguments === whole.function.arguments && /^call_/.test(id), `helper: ${c.function.arguments}`);
  });

  await check(`${family}: a tool result sent back (assistant tool_calls + tool message) is rendered and answered`, async () => {
    const first = await api.chat.completions.create({ ...base, tool_choice: "required", seed: 3 });
    const call = checkCall(first.choices[0], "first");
    const msgs = [USER, first.choices[0].message, { role: "tool", tool_call_id: call.id, content: JSON.stringify({ temp: 21, sky: "clear" }) }];
    const second = await api.chat.completions.create({ ...base, messages: msgs, seed: 4 });
    const ch = second.choices[0];
    assert(second.usage.prompt_tokens > first.usage.prompt_tokens + 10, `prompt ${second.usage.prompt_tokens} vs ${first.usage.prompt_tokens}`);
    // the history renders as the first prompt did: its tools block is reused from the cache
    assert(second.usage.prompt_tokens_details.cached_tokens > first.usage.prompt_tokens / 2,
           `cached ${second.usage.prompt_tokens_details.cached_tokens} of ${first.usage.prompt_tokens}`);
    if (ch.message.tool_calls) checkCall(ch, "second");
    else assert(typeof ch.message.content === "string", "no reply");
  });

  await check(`${family}: the SDK's runTools loop: the functions get valid arguments, their results go back as tool messages`, async () => {
    const seen = [];
    const fns = TOOLS.map(t => ({ type: "function", function: { name: t.function.name, parameters: t.function.parameters,
      parse: JSON.parse, function: args => { seen.push([t.function.name, args]); return { ok: true }; } } }));
    const runner = api.beta.chat.completions.runTools({ model: "m", messages: [USER], tools: fns, tool_choice: "required", max_tokens: 48, seed: 9 },
                                                       { maxChatCompletions: 3 });
    await runner.done();
    const sent = runner.messages.filter(m => m.role === "tool").length;
    assert(seen.length >= 2 && sent === seen.length, `${seen.length} calls, ${sent} tool messages`);
    for (const [name, args] of seen) assert(validators[name](args), `${name}(${JSON.stringify(args)})`);
  });

  await check(`${family}: too small a max_tokens is refused, naming the minimum`, async () => {
    const e = await api.chat.completions.create({ ...base, tool_choice: "required", max_tokens: 4 }).then(() => null, e => e);
    assert(e && e.status === 400 && /max_tokens 4 is too small: .* takes (\d+) tokens/.test(e.message), `got ${e && e.message}`);
    const need = +/takes (\d+) tokens/.exec(e.message)[1];
    const ok = await api.chat.completions.create({ ...base, tool_choice: "required", max_tokens: need, seed: 1 });
    checkCall(ok.choices[0], `at the minimum ${need}`);
  });
}

const api = client(env.QWEN_URL);
const SCHEMA = { type: "object", properties: { name: { type: "string", maxLength: 10 }, age: { type: "integer", minimum: 0, maximum: 120 },
  ratio: { type: "number", exclusiveMinimum: 0.1, maximum: 0.5 }, tags: { type: "array", items: { enum: ["a", "b"] }, maxItems: 3 } },
  required: ["name", "age", "ratio"], additionalProperties: false };
const rf = schema => ({ type: "json_schema", json_schema: { name: "person", schema, strict: true } });

await check("response_format json_schema, 10 seeds: every reply parses and validates", async () => {
  const v = ajv.compile(SCHEMA);
  const rs = await Promise.all(Array.from({ length: 10 }, (_, seed) =>
    api.chat.completions.create({ model: "m", messages: [USER], response_format: rf(SCHEMA), max_tokens: 64, seed, temperature: 1 })));
  for (const r of rs) {
    const doc = JSON.parse(r.choices[0].message.content);
    assert(v(doc), `${r.choices[0].message.content}: ${ajv.errorsText(v.errors)}`);
    assert(r.choices[0].finish_reason === "stop", `finish ${r.choices[0].finish_reason}`);
  }
});

await check("response_format json_schema: too small a max_tokens is refused naming the minimum, an unsupported keyword naming it", async () => {
  const e = await api.chat.completions.create({ model: "m", messages: [USER], response_format: rf(SCHEMA), max_tokens: 5 }).then(() => null, e => e);
  assert(e && e.status === 400 && /max_tokens 5 is too small: the shortest document the schema allows takes \d+ tokens/.test(e.message), `got ${e && e.message}`);
  const f = await api.chat.completions.create({ model: "m", messages: [USER], max_tokens: 50,
    response_format: rf({ type: "object", properties: { when: { type: "string", format: "date" } } }) }).then(() => null, e => e);
  assert(f && f.status === 400 && / response_format.json_schema.schema: #\/properties\/when: unsupported keyword 'format'$/.test(f.message) &&
         f.param === "response_format", `got ${f && f.message}`);
});

await check("refusals: a bad tool name, an unknown named function, stop with tools, tools with json_schema, bad call arguments", async () => {
  const cases = [
    [{ tools: [{ type: "function", function: { name: "get weather" } }] }, /must be 1 to 64/],
    [{ tools: TOOLS, tool_choice: { type: "function", function: { name: "nope" } } }, /not among the tools/],
    [{ tools: TOOLS, stop: ["x"] }, /'stop' cannot be combined with tools/],
    [{ tools: TOOLS, response_format: rf(SCHEMA) }, /cannot be combined with tools/],
    [{ tools: TOOLS, tool_choice: "sometimes" }, /'tool_choice' must be/],
    [{ tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { x: { type: "string", pattern: "a+" } } } } }] },
      /tools\[0\] \(f\): parameters: #\/properties\/x: unsupported keyword 'pattern'/],
    [{ messages: [USER, { role: "assistant", tool_calls: [{ id: "c", type: "function", function: { name: "add", arguments: "{\"a\": 1" } }] },
      { role: "tool", tool_call_id: "c", content: "3" }] }, /arguments of the call to 'add': not valid JSON/],
  ];
  for (const [extra, re] of cases) {
    const e = await api.chat.completions.create({ model: "m", messages: [USER], max_tokens: 40, ...extra }).then(() => null, e => e);
    assert(e && e.status === 400 && re.test(e.message), `${JSON.stringify(extra).slice(0, 80)}: ${e ? e.message : "accepted"}`);
  }
  const l = await client(env.LLAMA_URL).chat.completions.create({ model: "m", max_tokens: 40, tools: TOOLS,
    messages: [USER, { role: "assistant", tool_calls: [1, 2].map(i => ({ id: `c${i}`, type: "function", function: { name: "add", arguments: "{}" } })) }] })
    .then(() => null, e => e);
  assert(l && l.status === 400 && /one tool call per message/.test(l.message), `llama3, two calls in one message: ${l && l.message}`);
});

process.exit(failed ? 1 : 0);

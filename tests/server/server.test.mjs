// picolm-server end to end, driven by real clients: fetch (Node's), the
// official openai SDK, and Debian's chromium through playwright-core.
// Run by tests/t_server.sh, which starts the servers and passes:
//   BASE       http://127.0.0.1:PORT of the main server (API key KEY, -t 0)
//   LIMITED    a second server with --max-connections 2 --queue 1 --max-body 4096 --slots 1
//   PRESSURE   a third with --slots 4 --kv-blocks 12 (blocks of 16: 192 positions for 4)
//   KEY        the API key of both
//   CLI_TEXT   a file with `picolm MODEL -t 0 -n 24` on PROMPT ("Hello")
//   CLI_PROMPT_TOKENS   how many tokens the CLI's prefill counted
//   CHAT_REF   shared/reference/chat/chatml.txt: llama.cpp's render of CONV
//   CONV       shared/reference/chat/conversation.txt
//   CHROMIUM   path of chromium, or "" to skip the page test (loudly)
// Prints PASS:/FAIL:/SKIP: lines (tests/run.sh counts them).
import fs from "node:fs";
import OpenAI from "openai";

const env = process.env;
const BASE = env.BASE, LIMITED = env.LIMITED, PRESSURE = env.PRESSURE, KEY = env.KEY;
const auth = { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json" };
let failed = 0;

async function check(name, fn) {
  try {
    const r = await fn();
    if (r === "skip") return;
    console.log(`PASS: server: ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL: server: ${name}: ${String(e && e.stack ? e.message : e).replace(/\n/g, " ").slice(0, 400)}`);
  }
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }
function eq(a, b, what) {
  if (JSON.stringify(a) !== JSON.stringify(b))
    throw new Error(`${what}: ${JSON.stringify(a).slice(0, 200)} != ${JSON.stringify(b).slice(0, 200)}`);
}

async function post(path, body, { base = BASE, headers = auth, raw = false } = {}) {
  const r = await fetch(base + path, { method: "POST", headers, body: raw ? body : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* SSE or not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

// Read an SSE stream: the data payloads, in order ("[DONE]" included).
async function streamEvents(path, body, base = BASE) {
  const r = await fetch(base + path, { method: "POST", headers: auth, body: JSON.stringify({ ...body, stream: true }) });
  if (r.status !== 200) throw new Error(`status ${r.status}: ${await r.text()}`);
  assert((r.headers.get("content-type") || "").startsWith("text/event-stream"), "content-type is not text/event-stream");
  const text = await r.text();
  assert(text.endsWith("\n\n"), "the stream does not end with a blank line");
  return text.split("\n\n").filter(Boolean).map(ev => {
    assert(ev.startsWith("data: "), `not a data event: ${ev.slice(0, 80)}`);
    return ev.slice(6);
  });
}
const deltas = evs => evs.filter(e => e !== "[DONE]").map(e => JSON.parse(e));

const convMsgs = () => fs.readFileSync(env.CONV, "utf8").split(/\n---\n/).map(block => {
  const nl = block.indexOf("\n");
  return { role: block.slice(0, nl), content: block.slice(nl + 1) };
});

// ---- endpoints ----
await check("GET /health", async () => {
  const r = await fetch(BASE + "/health");
  eq([r.status, await r.json()], [200, { status: "ok" }], "health");
});
await check("GET /v1/models lists the model", async () => {
  const r = await fetch(BASE + "/v1/models", { headers: auth });
  const j = await r.json();
  eq([r.status, j.object, j.data.length, j.data[0].object], [200, "list", 1, "model"], "models");
  assert(j.data[0].id.endsWith(".gguf"), `id ${j.data[0].id}`);
});
await check("API key: missing or wrong key is a 401, the right one passes", async () => {
  for (const h of [{}, { Authorization: "Bearer nope" }, { Authorization: `Basic ${KEY}` }]) {
    const r = await fetch(BASE + "/v1/models", { headers: h });
    const j = await r.json();
    eq([r.status, j.error.code], [401, "invalid_api_key"], `headers ${JSON.stringify(h)}`);
  }
  const m = await fetch(BASE + "/metrics");
  eq(m.status, 401, "/metrics without the key");
});

let greedy;
await check("completion: greedy text and usage equal the CLI's (picolm -t 0 -n 24)", async () => {
  const r = await post("/v1/completions", { prompt: "Hello", max_tokens: 24, temperature: 0 });
  eq(r.status, 200, r.text);
  const c = r.json.choices[0];
  eq(c.text, fs.readFileSync(env.CLI_TEXT, "utf8"), "text");
  eq(r.json.object, "text_completion", "object");
  const u = r.json.usage;
  eq([u.prompt_tokens, u.completion_tokens, u.total_tokens], [Number(env.CLI_PROMPT_TOKENS), 24, Number(env.CLI_PROMPT_TOKENS) + 24], "usage");
  eq(c.finish_reason, "length", "finish_reason");
  greedy = c.text;
});
await check("completion: the stream's text equals the whole response, ends with [DONE], usage chunk exact", async () => {
  const evs = await streamEvents("/v1/completions", { prompt: "Hello", max_tokens: 24, temperature: 0, stream_options: { include_usage: true } });
  eq(evs[evs.length - 1], "[DONE]", "last event");
  const d = deltas(evs);
  const usage = d.pop();
  eq(usage.choices, [], "usage chunk choices");
  eq(usage.usage.completion_tokens, 24, "usage");
  eq(d.map(x => x.choices[0].text).join(""), greedy, "streamed text");
  eq(d[d.length - 1].choices[0].finish_reason, "length", "finish_reason");
  assert(d.length >= 3, `only ${d.length} chunks: not streamed`);
});

let chatText;
await check("chat: the messages are rendered as llama.cpp renders them (reply = completion of chatml.txt)", async () => {
  const r = await post("/v1/chat/completions", { messages: convMsgs(), max_tokens: 16, temperature: 0 });
  eq(r.status, 200, r.text);
  const ref = await post("/v1/completions", { prompt: fs.readFileSync(env.CHAT_REF, "utf8"), max_tokens: 16, temperature: 0 });
  eq(r.json.choices[0].message, { role: "assistant", content: ref.json.choices[0].text }, "reply");
  eq([r.json.usage.prompt_tokens, r.json.usage.completion_tokens], [ref.json.usage.prompt_tokens, ref.json.usage.completion_tokens], "usage");
  eq(r.json.object, "chat.completion", "object");
  chatText = r.json.choices[0].message.content;
});
await check("chat: stream = whole response; role first, finish last, then [DONE]", async () => {
  const evs = await streamEvents("/v1/chat/completions", { messages: convMsgs(), max_tokens: 16, temperature: 0 });
  const d = deltas(evs);
  eq(d[0].choices[0].delta.role, "assistant", "first delta's role");
  eq(d.map(x => x.choices[0].delta.content || "").join(""), chatText, "streamed text");
  eq(d[d.length - 1].choices[0].finish_reason, "length", "finish");
  eq(d[0].object, "chat.completion.chunk", "object");
  eq(evs[evs.length - 1], "[DONE]", "last event");
});
await check("stop: the reply ends before the stop string, finish_reason stop, same in the stream", async () => {
  // a stop string whose first occurrence is inside the text, after its start
  let at = 1;
  while (at + 4 <= greedy.length && greedy.indexOf(greedy.slice(at, at + 4)) !== at) at++;
  assert(at + 4 <= greedy.length, `no usable stop string in ${JSON.stringify(greedy)}`);
  const stop = greedy.slice(at, at + 4);
  const r = await post("/v1/completions", { prompt: "Hello", max_tokens: 24, temperature: 0, stop: [stop] });
  eq([r.json.choices[0].text, r.json.choices[0].finish_reason], [greedy.slice(0, at), "stop"], "stopped");
  const d = deltas(await streamEvents("/v1/completions", { prompt: "Hello", max_tokens: 24, temperature: 0, stop }));
  eq(d.map(x => x.choices[0].text).join(""), greedy.slice(0, at), "streamed");
});
await check("logprobs: chosen token is the most likely under greedy, top list sorted, bytes exact", async () => {
  const r = await post("/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3 });
  const lp = r.json.choices[0].logprobs.content;
  eq(lp.length, 5, "entries");
  let text = "";
  for (const t of lp) {
    eq(t.top_logprobs.length, 3, "top_logprobs");
    eq(t.token, t.top_logprobs[0].token, "greedy picks the top token");
    assert(t.logprob <= 0 && t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob, "order");
    text += Buffer.from(t.bytes).toString("latin1");
  }
  eq(Buffer.from(text, "latin1").toString("utf8"), r.json.choices[0].message.content, "bytes joined = content");
});
await check("seeded sampling is reproducible; a different seed changes the text", async () => {
  const body = { prompt: "Hello", max_tokens: 24, temperature: 1.5, top_k: 0, top_p: 1, seed: 7 };
  const a = await post("/v1/completions", body), b = await post("/v1/completions", body);
  const c = await post("/v1/completions", { ...body, seed: 8 });
  eq(a.json.choices[0].text, b.json.choices[0].text, "same seed");
  assert(a.json.choices[0].text !== c.json.choices[0].text, "seed 8 gave the same text as seed 7");
});
await check("response_format json_object: the reply is one complete JSON document", async () => {
  const r = await post("/v1/chat/completions", { messages: [{ role: "user", content: "JSON please" }], max_tokens: 40, temperature: 1, seed: 3, response_format: { type: "json_object" } });
  JSON.parse(r.json.choices[0].message.content);
});

// ---- concurrency ----
await check("8 concurrent clients get exactly their solo outputs", async () => {
  const bodies = Array.from({ length: 8 }, (_, i) => ({ prompt: `Request ${i}: tell me`, max_tokens: 12 + i, temperature: 0 }));
  const solo = [];
  for (const b of bodies) solo.push((await post("/v1/completions", b)).json.choices[0].text);
  const together = await Promise.all(bodies.map((b, i) => i % 2
    ? streamEvents("/v1/completions", b).then(evs => deltas(evs).map(x => x.choices[0].text).join(""))
    : post("/v1/completions", b).then(r => r.json.choices[0].text)));
  eq(together, solo, "outputs");
});

async function metric(name, base = BASE) {
  const t = await (await fetch(base + "/metrics", { headers: auth })).text();
  const m = t.match(new RegExp(`^${name} (\\S+)$`, "m"));
  assert(m, `no ${name} in /metrics`);
  return Number(m[1]);
}
await check("GET /metrics: Prometheus text with requests, tokens, queue, KV, time to first token", async () => {
  const t = await (await fetch(BASE + "/metrics", { headers: auth })).text();
  for (const n of ["picolm_requests_total{status=\"2xx\"}", "picolm_completion_tokens_total", "picolm_queue_depth",
                   "picolm_kv_blocks_used", "picolm_time_to_first_token_seconds_count"])
    assert(t.includes(n + " "), `missing ${n}`);
  assert(/# TYPE picolm_time_to_first_token_seconds histogram/.test(t), "ttft is not a histogram");
});
await check("a client that disconnects mid-stream frees its sequence (generation stops early)", async () => {
  const before = await metric("picolm_completion_tokens_total");
  const ac = new AbortController();
  const r = await fetch(BASE + "/v1/completions", { method: "POST", headers: auth, signal: ac.signal,
    body: JSON.stringify({ prompt: "Go on", max_tokens: 400, temperature: 0, stream: true }) });
  const rd = r.body.getReader();
  await rd.read();
  ac.abort();
  // the next request is served after the cancelled one ended
  const t0 = Date.now();
  const n = await post("/v1/completions", { prompt: "x", max_tokens: 1, temperature: 0 });
  eq(n.status, 200, "next request");
  const used = (await metric("picolm_completion_tokens_total")) - before - 1;
  assert(used < 300, `the disconnected stream still generated ${used} of 400 tokens`);
  return console.log(`# disconnect: ${used} tokens generated before the server noticed; next answered in ${Date.now() - t0} ms`);
});

// ---- paged KV: prefix reuse, memory pressure ----
await check("a prompt that begins like the previous one reuses its KV blocks (usage.prompt_tokens_details.cached_tokens)", async () => {
  const pre = "You are a helpful assistant who answers in one line. ".repeat(12);
  const a = await post("/v1/completions", { prompt: pre + "First question?", max_tokens: 4, temperature: 0 });
  const before = await metric("picolm_prompt_tokens_cached_total");
  const b = await post("/v1/completions", { prompt: pre + "Second one?", max_tokens: 4, temperature: 0 });
  const cached = b.json.usage.prompt_tokens_details.cached_tokens;
  assert(a.json.usage.prompt_tokens > 100, `prompt only ${a.json.usage.prompt_tokens} tokens`);
  assert(cached >= a.json.usage.prompt_tokens - 40 && cached < b.json.usage.prompt_tokens, `cached ${cached} of ${b.json.usage.prompt_tokens}`);
  eq((await metric("picolm_prompt_tokens_cached_total")) - before, cached, "metric");
});
await check("memory pressure: 4 streams in a pool for fewer are preempted and resumed, each reply = its solo run", async () => {
  const bodies = Array.from({ length: 4 }, (_, i) => ({ prompt: `Pressure ${i}: go`, max_tokens: 60, temperature: 0 }));
  const solo = [];
  for (const b of bodies) solo.push((await post("/v1/completions", b)).json.choices[0].text);
  const before = await metric("picolm_preemptions_total", PRESSURE);
  const got = await Promise.all(bodies.map((b, i) => i % 2
    ? streamEvents("/v1/completions", b, PRESSURE).then(evs => deltas(evs).map(x => x.choices[0].text).join(""))
    : post("/v1/completions", b, { base: PRESSURE }).then(r => r.json.choices[0].text)));
  eq(got, solo, "replies");
  const pre = (await metric("picolm_preemptions_total", PRESSURE)) - before;
  assert(pre > 0, "no sequence was preempted: the pool was not short");
  eq(await metric("picolm_kv_blocks_total", PRESSURE), 12, "pool size");
  return console.log(`# pressure: ${pre} preemptions for 4 streams of 60 tokens in 12 blocks of 16`);
});

// ---- bad requests: 400 with an OpenAI error object, and the server keeps serving ----
const bad = [
  ["malformed JSON", "{\"prompt\": \"x\",", "/v1/completions"],
  ["not an object", "[1,2]", "/v1/completions"],
  ["trailing garbage", "{\"prompt\": \"x\"} {}", "/v1/completions"],
  ["wrong type", { prompt: 5 }, "/v1/completions"],
  ["max_tokens a string", { prompt: "x", max_tokens: "9" }, "/v1/completions"],
  ["huge number", "{\"prompt\": \"x\", \"max_tokens\": 1e999}", "/v1/completions"],
  ["huge integer", "{\"prompt\": \"x\", \"seed\": 123456789012345678901234567890}", "/v1/completions"],
  ["fractional integer", { prompt: "x", max_tokens: 2.5 }, "/v1/completions"],
  ["temperature out of range", { prompt: "x", temperature: 9 }, "/v1/completions"],
  ["invalid UTF-8", Buffer.from([0x7b, 0x22, 0x70, 0x72, 0x6f, 0x6d, 0x70, 0x74, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]), "/v1/completions"],
  ["NUL in a string", "{\"prompt\": \"a\\u0000b\"}", "/v1/completions"],
  ["n > 1", { prompt: "x", n: 2 }, "/v1/completions"],
  ["unknown field", { prompt: "x", frobnicate: true }, "/v1/completions"],
  ["missing prompt", {}, "/v1/completions"],
  ["unknown role", { messages: [{ role: "wizard", content: "x" }] }, "/v1/chat/completions"],
  ["tool calls on a user message", { messages: [{ role: "user", content: "x", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }] }] }, "/v1/chat/completions"],
  ["empty messages", { messages: [] }, "/v1/chat/completions"],
  ["image content", { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }, "/v1/chat/completions"],
  ["json_schema", { messages: [{ role: "user", content: "x" }], response_format: { type: "json_schema" } }, "/v1/chat/completions"],
  ["top_logprobs without logprobs", { messages: [{ role: "user", content: "x" }], top_logprobs: 2 }, "/v1/chat/completions"],
  ["too many stop strings", { prompt: "x", stop: ["a", "b", "c", "d", "e"] }, "/v1/completions"],
  ["stream_options without stream", { prompt: "x", stream_options: { include_usage: true } }, "/v1/completions"],
  ["prompt longer than the context", { prompt: "word ".repeat(4000) }, "/v1/completions"],
];
for (const [what, body, path] of bad) {
  await check(`bad request (${what}) is a 400 with an error object`, async () => {
    const raw = typeof body === "string" || Buffer.isBuffer(body);
    const r = await post(path, body, { raw });
    eq(r.status, 400, `status (body ${r.text.slice(0, 200)})`);
    assert(r.json && r.json.error && r.json.error.message && r.json.error.type === "invalid_request_error", `error object: ${r.text}`);
    if (what.startsWith("prompt longer")) eq(r.json.error.code, "context_length_exceeded", "code");
  });
}
await check("after every bad request the server still serves", async () => {
  const r = await post("/v1/completions", { prompt: "Hello", max_tokens: 24, temperature: 0 });
  eq(r.json.choices[0].text, greedy, "text");
});
await check("unknown URL is a 404, wrong method a 405", async () => {
  eq((await fetch(BASE + "/v1/nothing", { headers: auth })).status, 404, "404");
  eq((await fetch(BASE + "/v1/completions", { headers: auth })).status, 405, "GET on completions");
  eq((await post("/v1/models", {})).status, 405, "POST on models");
});

// ---- limits (second server: --max-connections 2 --queue 1 --max-body 4096) ----
await check("body over --max-body is a 413", async () => {
  const r = await post("/v1/completions", { prompt: "x".repeat(5000) }, { base: LIMITED });
  eq([r.status, r.json.error.code], [413, "request_too_large"], "413");
});
await check("full queue is a 503 with Retry-After; over --max-connections is a 429", async () => {
  // one generating (long), one queued: the queue (1) is full, then the slots (2)
  const long = { prompt: "Go on", max_tokens: 300, temperature: 0, stream: true };
  const ac = new AbortController();
  const a = await fetch(LIMITED + "/v1/completions", { method: "POST", headers: auth, body: JSON.stringify(long), signal: ac.signal });
  const ra = a.body.getReader();
  await ra.read();                              // A runs
  const b = fetch(LIMITED + "/v1/completions", { method: "POST", headers: auth, body: JSON.stringify({ ...long, max_tokens: 1 }), signal: ac.signal }).catch(() => null);
  await new Promise(res => setTimeout(res, 300)); // B waits in the queue
  const c = await post("/v1/completions", { prompt: "x", max_tokens: 1 }, { base: LIMITED });
  const d = await post("/v1/completions", { prompt: "x", max_tokens: 1 }, { base: LIMITED });
  ac.abort();
  await b;
  // C found the queue full (503) or, counted after A and B, no free slot (429)
  assert([c.status, d.status].every(s => s === 503 || s === 429), `statuses ${c.status} ${d.status}: ${c.text} ${d.text}`);
  const r503 = [c, d].find(x => x.status === 503), r429 = [c, d].find(x => x.status === 429);
  if (r503) eq([r503.headers.get("retry-after"), r503.json.error.code], ["1", "queue_full"], "503");
  if (r429) eq(r429.json.error.code, "too_many_connections", "429");
  assert(r429, "no 429 although 3 requests were in flight with --max-connections 2");
});

// ---- the official openai SDK ----
const client = new OpenAI({ apiKey: KEY, baseURL: BASE + "/v1" });
await check("openai SDK: chat.completions.create, not streamed", async () => {
  const r = await client.chat.completions.create({ model: "x", messages: convMsgs(), max_tokens: 16, temperature: 0 });
  eq(r.choices[0].message.content, chatText, "content");
  eq(r.usage.completion_tokens, 16, "usage");
});
await check("openai SDK: chat.completions.create, streamed", async () => {
  const s = await client.chat.completions.create({ model: "x", messages: convMsgs(), max_tokens: 16, temperature: 0, stream: true });
  let text = "";
  for await (const chunk of s) text += chunk.choices[0]?.delta?.content || "";
  eq(text, chatText, "streamed content");
});
await check("openai SDK: completions.create and a 400 surfaces as BadRequestError", async () => {
  const r = await client.completions.create({ model: "x", prompt: "Hello", max_tokens: 24, temperature: 0 });
  eq(r.choices[0].text, greedy, "text");
  try {
    await client.completions.create({ model: "x", prompt: "Hello", n: 3 });
    throw new Error("no error for n = 3");
  } catch (e) {
    assert(e instanceof OpenAI.BadRequestError, `got ${e.constructor.name}: ${e.message}`);
  }
});

// ---- the chat page in headless chromium ----
await check("chat page: a message typed in chromium gets the streamed reply", async () => {
  if (!env.CHROMIUM) { console.log("SKIP: server: chat page: no chromium (apt-get install chromium)"); return "skip"; }
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ executablePath: env.CHROMIUM, args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage();
    await page.goto(BASE + "/");
    await page.fill("#key", KEY);
    await page.dispatchEvent("#key", "change");
    await page.fill("#input", "Hi");
    await page.click("#send");
    await page.waitForFunction(() => !document.getElementById("send").disabled &&
      document.querySelectorAll(".msg.assistant").length === 1, null, { timeout: 20000 });
    const shown = await page.textContent(".msg.assistant");
    const r = await post("/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }] });
    eq(shown, r.json.choices[0].message.content, "the page shows the model's reply");
    assert(shown.length > 0, "empty reply");
  } finally {
    await browser.close();
  }
});

process.exit(failed ? 1 : 0);

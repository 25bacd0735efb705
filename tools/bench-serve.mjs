#!/usr/bin/env node
// picolm-server under concurrent streams: for each concurrency C, C clients
// stream a completion of N tokens each at the same time; reports aggregate
// generated tokens/s, time to first token p50/p99 (from the request to its
// first token, as the client sees it), and the KV blocks the server reported
// in use and its RssAnon (peaks, from /metrics and /proc).  Each concurrency runs REPS times
// and the run fastest end to end counts (a busy machine only makes runs slower).  Every
// request has a prompt of its own, so only the prompts' common first words can
// come from the prefix cache (the JSON's prompt_tokens_cached counts what did).
//
//   node tools/bench-serve.mjs MODEL [--streams 1,2,4,8] [-n 64] [-p 32]
//        [--reps 2] [--format md|json] [-- SERVER-OPTIONS...]
//
// It starts build/bin/picolm-server (PICOLM_BUILD) on a free port with
// --slots at the largest concurrency and the SERVER-OPTIONS (e.g. -j 2 -c 512),
// and stops it at the end.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";

function usage(code) {
  console.log(`usage: node tools/bench-serve.mjs MODEL [--streams 1,2,4,8] [-n 64] [-p 32] [--reps 2]
       [--format md|json] [-- SERVER-OPTIONS...]
Aggregate decode tokens/s, time to first token p50/p99 and peak KV blocks in use of
picolm-server with 1, 2, 4 and 8 concurrent streams (each -n tokens after a prompt
of -p tokens' worth of text; distinct prompts).`);
  process.exit(code);
}

const args = process.argv.slice(2);
let model, streams = [1, 2, 4, 8], n = 64, p = 32, reps = 2, format = "md", extra = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--") { extra = args.slice(i + 1); break; }
  else if (a === "-h" || a === "--help") usage(0);
  else if (a === "--streams") streams = args[++i].split(",").map(Number);
  else if (a === "-n") n = Number(args[++i]);
  else if (a === "-p") p = Number(args[++i]);
  else if (a === "--reps") reps = Number(args[++i]);
  else if (a === "--format") format = args[++i];
  else if (a.startsWith("-")) { console.error(`bench-serve: unknown option ${a}`); usage(2); }
  else model = a;
}
if (!model || streams.some(x => !(x >= 1)) || !(n >= 1) || !(reps >= 1)) usage(2);

const freePort = () => new Promise(res => {
  const s = net.createServer().listen(0, "127.0.0.1", () => { const port = s.address().port; s.close(() => res(port)); });
});
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const bin = `${process.env.PICOLM_BUILD || "build"}/bin/picolm-server`;
const maxC = Math.max(...streams);
const srv = spawn(bin, [model, "--port", String(port), "--slots", String(maxC), "--queue", String(4 * maxC), ...extra],
                  { stdio: ["ignore", "ignore", "pipe"] });
let srvErr = "";
srv.stderr.on("data", d => { srvErr += d; });
const stop = () => { try { srv.kill("SIGTERM"); } catch { /* gone */ } };
process.on("exit", stop);
for (let i = 0; ; i++) {
  try { if ((await fetch(base + "/health")).ok) break; } catch { /* not yet */ }
  if (i > 600 || srv.exitCode !== null) { console.error(`bench-serve: the server did not start: ${srvErr}`); process.exit(1); }
  await new Promise(r => setTimeout(r, 100));
}

async function metric(name) {
  const t = await (await fetch(base + "/metrics")).text();
  const m = t.match(new RegExp(`^${name} (\\S+)$`, "m"));
  return m ? Number(m[1]) : NaN;
}

// A failed request ends the run, saying what became of the server.
async function failed(e) {
  await new Promise(r => setTimeout(r, 300));
  const how = srv.signalCode ? `was killed by ${srv.signalCode}` : srv.exitCode !== null ? `exited with status ${srv.exitCode}` : "is still running";
  console.error(`bench-serve: a request failed (${e.message}${e.cause ? ": " + e.cause.message : ""}); the server ${how}; ` +
                `its stderr ends:\n${srvErr.split("\n").slice(-12).join("\n")}`);
  process.exit(1);
}

// One client: stream a completion; time to first token and tokens received.
async function client(id) {
  try { return await client1(id); } catch (e) { return failed(e); }
}
async function client1(id) {
  const t0 = performance.now();
  const prompt = `Client ${id}: ` + "the quick brown fox ".repeat(Math.max(1, Math.round(p / 5)));
  const r = await fetch(base + "/v1/completions", { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt, max_tokens: n, temperature: 0, stream: true, stream_options: { include_usage: true } }) });
  const rd = r.body.getReader(), dec = new TextDecoder();
  let buf = "", ttft = null, tokens = 0, promptTokens = 0;
  const times = []; // arrival of each streamed token (ms, performance.now())
  for (;;) {
    const { value, done } = await rd.read();
    if (done) break;
    if (ttft === null) ttft = performance.now() - t0;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(6, i); buf = buf.slice(i + 2);
      if (ev !== "[DONE]") {
        const j = JSON.parse(ev);
        if (j.usage) tokens = j.usage.completion_tokens, promptTokens = j.usage.prompt_tokens;
        else if (j.choices[0] && j.choices[0].text) times.push(performance.now());
      }
    }
  }
  return { ttft, tokens, times, promptTokens };
}

const pct = (xs, q) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
const rows = [];
await client(-1); // warm up: the weights' pages
for (const c of streams) {
  let best = null;
  for (let r = 0; r < reps; r++) {
    let peak = 0, anon = 0, sampling = true;
    const rssAnon = () => { try { return Number(fs.readFileSync(`/proc/${srv.pid}/status`, "utf8").match(/^RssAnon:\s+(\d+)/m)[1]); } catch { return 0; } };
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await metric("picolm_kv_blocks_used"));
        anon = Math.max(anon, rssAnon());
        await new Promise(res => setTimeout(res, 50));
      }
    })();
    const cached0 = await metric("picolm_prompt_tokens_cached_total");
    const t0 = performance.now();
    // a prompt of its own for every request of the run: none may find its whole prompt
    // in the prefix cache and skip its prefill (TTFT, and the decode window)
    const res = await Promise.all(Array.from({ length: c }, (_, i) => client(1000 * c + 100 * r + i)));
    const secs = (performance.now() - t0) / 1000;
    sampling = false;
    await sampler;
    const cached = (await metric("picolm_prompt_tokens_cached_total")) - cached0;
    const tokens = res.reduce((a, x) => a + x.tokens, 0);
    // decode rate while every stream is decoding: from the last first token
    // to the first last token, the tokens all streams received in between
    const from = Math.max(...res.map(x => x.times[0])), to = Math.min(...res.map(x => x.times[x.times.length - 1]));
    const inWin = res.reduce((a, x) => a + x.times.filter(t => t > from && t <= to).length, 0);
    const decode = to > from ? inWin / ((to - from) / 1000) : NaN;
    const row = { streams: c, tokens, seconds: secs, tok_s: tokens / secs, decode_tok_s: decode, ttft_p50_ms: pct(res.map(x => x.ttft), 0.5),
                  ttft_p99_ms: pct(res.map(x => x.ttft), 0.99), prompt_tokens_mean: res.reduce((a, x) => a + x.promptTokens, 0) / c, prompt_tokens_cached: cached, kv_blocks_peak: peak, rss_anon_mb: anon / 1024 };
    // the fastest run end to end (tokens over the whole run) counts, and one with
    // a decode window before one without: a stall only makes a run slower end to
    // end, while its window rate can come out far too high (tokens delivered in a
    // burst after it: 519476 tok/s was seen)
    const hasWin = x => Number.isFinite(x.decode_tok_s);
    if (!best || (hasWin(row) !== hasWin(best) ? hasWin(row) : row.tok_s > best.tok_s)) best = row;
  }
  rows.push(best);
}
stop();
const fmt = (x, d) => Number.isFinite(x) ? x.toFixed(d) : "-";
const one = rows.find(x => x.streams === 1);
for (const r of rows) r.vs_one = one ? r.decode_tok_s / one.decode_tok_s : NaN;
if (format === "json") console.log(JSON.stringify({ model, n, p, reps, server_options: extra, rows }, null, 1));
else {
  console.log(`| streams | aggregate decode tok/s | x one stream | end-to-end tok/s | TTFT p50 ms | TTFT p99 ms | KV blocks peak | RssAnon peak MB |`);
  console.log(`|---:|---:|---:|---:|---:|---:|---:|---:|`);
  for (const r of rows)
    console.log(`| ${r.streams} | ${fmt(r.decode_tok_s, 1)} | ${fmt(r.vs_one, 2)} | ${r.tok_s.toFixed(1)} | ${r.ttft_p50_ms.toFixed(0)} | ${r.ttft_p99_ms.toFixed(0)} | ${r.kv_blocks_peak} | ${r.rss_anon_mb.toFixed(1)} |`);
  if (rows.some(r => !Number.isFinite(r.decode_tok_s)))
    console.log(`\n- : the streams never all decoded at once: one finished before the last one's first token (the KV pool held fewer of them, so they took turns, or -n is short against the prompts' prefill).`);
  const cachedRows = rows.filter(r => r.prompt_tokens_cached > 0);
  if (cachedRows.length)
    console.log(`\nPrompt tokens served from the prefix cache (the prompts' common first words): ${cachedRows.map(r => `${r.prompt_tokens_cached} at ${r.streams} stream(s)`).join(", ")}.`);
  const pt = rows.map(r => r.prompt_tokens_mean);
  console.log(`\n${model}: ${n} tokens per stream after a prompt of -p ${p} tokens' worth of text, ${Math.min(...pt).toFixed(0)}-${Math.max(...pt).toFixed(0)} tokens in this vocabulary (usage.prompt_tokens); best of ${reps}; server options: ${extra.join(" ") || "(none)"}`);
}
process.exit(0);

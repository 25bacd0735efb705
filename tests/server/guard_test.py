"""picolm-server under attack and under stress, with raw HTTP clients over
loopback (sockets whose source address, receive buffer and pace the test
controls).  Run by tests/t_server_guard.sh, which passes:
  SERVER  the picolm-server binary      CLI    the picolm binary
  MODEL   a small shared model          LONGKV a model with Llama-3.2-1B's KV cache
Prints PASS:/FAIL:/SKIP: lines; every wait is bounded.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SERVER, CLI, MODEL = os.environ["SERVER"], os.environ["CLI"], os.environ["MODEL"]
TMP = tempfile.mkdtemp(prefix="picolm-guard-")
failed = 0
procs = []


def report(ok, name, why=""):
    global failed
    if ok:
        print(f"PASS: server guard: {name}", flush=True)
    else:
        failed += 1
        print(f"FAIL: server guard: {name}: {why}"[:600], flush=True)


def check(name):
    def wrap(fn):
        try:
            r = fn()
            if r is not False:
                report(True, name + (f" ({r})" if isinstance(r, str) else ""))
        except Exception as e:  # a failed expectation or a broken server
            report(False, name, f"{type(e).__name__}: {e}{server_died()}")
        return fn
    return wrap


def server_died():
    """Why the current server is gone (a sanitizer's report names the
    line), or "" while it runs."""
    cur = globals().get("srv")
    if not cur or cur.p.poll() is None:
        return ""
    lines = open(cur.log, errors="replace").read().splitlines()
    why = [l for l in lines if "runtime error" in l or "ERROR: " in l] or lines[-2:]
    return f"; the server exited ({cur.p.returncode}): {' | '.join(why)[:300]}"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Server:
    def __init__(self, *args, model=MODEL, env=None):
        self.port = free_port()
        self.log = os.path.join(TMP, f"server-{self.port}.log")
        ini = os.path.join(TMP, "srv.ini")
        if not os.path.exists(ini):
            open(ini, "w").write("[sampler]\ntemperature = 1\n")
        self.p = subprocess.Popen([SERVER, model, "--port", str(self.port), "-j", "1", "--config", ini, *args],
                                  stdout=open(self.log, "w"), stderr=subprocess.STDOUT, env=env)
        procs.append(self.p)
        end = time.time() + 30
        while time.time() < end:
            if self.p.poll() is not None:
                raise RuntimeError(f"the server exited ({self.p.returncode}): {open(self.log).read()[-300:]}")
            try:
                if request(self.port, "GET", "/health", timeout=2)[0] in (200, 503):
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("the server did not start")

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()

    def rss_kb(self):
        for line in open(f"/proc/{self.p.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0


def raw_request(method, path, body=b"", headers=None, host=None, port=0):
    h = {"Host": host or f"127.0.0.1:{port}", "Connection": "close"}
    if body:
        h["Content-Length"] = str(len(body))
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    return head.encode("latin-1") + body


def drain(s, timeout, until=None):
    """What s receives until the server closes it, 'until' arrives or
    'timeout' seconds pass, and when each piece arrived."""
    s.settimeout(timeout)
    data, times = b"", []
    end = time.time() + timeout
    while time.time() < end:
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        if not b:
            break
        data += b
        times.append(time.time())
        if until and until in data:
            break
    return data, times


def read_response(s, timeout):
    """(status, headers dict (lower-case keys), body bytes) of a response
    read until the server closes; chunked bodies are decoded."""
    data, _ = drain(s, timeout)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines[0].startswith("HTTP/"):
        raise OSError(f"no response: {lines[0][:80]!r}")
    status = int(lines[0].split()[1])
    hdrs = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    if hdrs.get("transfer-encoding") == "chunked":
        out, rest = b"", body
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size.split(b";")[0] or b"0", 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2:]
        body = out
    return status, hdrs, body


def request(port, method, path, body=None, headers=None, host=None, timeout=30, src="127.0.0.1"):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", **(headers or {})}
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(src, 0))
    if s.getsockname() == s.getpeername():
        # TCP simultaneous open: polling a port nobody listens on yet can
        # connect the socket to itself, and read back its own request
        s.close()
        raise OSError("connected to itself")
    try:
        s.sendall(raw_request(method, path, body or b"", headers, host, port))
        return read_response(s, timeout)
    finally:
        s.close()


def post(port, path, body, **kw):
    st, h, b = request(port, "POST", path, body, **kw)
    try:
        return st, h, json.loads(b)
    except ValueError:
        return st, h, b


def sse(body):
    """The data payloads of an event stream, JSON-decoded ([DONE] as is)."""
    out = []
    for ev in body.decode().split("\n\n"):
        ev = ev.strip()
        if ev.startswith("data: "):
            d = ev[6:]
            out.append(d if d == "[DONE]" else json.loads(d))
    return out


def metric(port, name):
    _, _, b = request(port, "GET", "/metrics")
    m = re.search(rf"^{re.escape(name)} (\S+)$", b.decode(), re.M)
    return float(m.group(1))


def stream_open(port, body, src="127.0.0.1", rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind((src, 0))
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    data = json.dumps({**body, "stream": True}).encode()
    s.sendall(raw_request("POST", "/v1/completions", data, {"Content-Type": "application/json"}, port=port))
    return s


def closed_by_server(s, within):
    """True when the server closes s within 'within' seconds (what was sent
    before is drained)."""
    s.settimeout(0.2)
    end = time.time() + within
    while time.time() < end:
        try:
            if not s.recv(1 << 20):
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


# ---------------------------------------------------------------------------
# cross-site requests, Host, Content-Type
srv = Server("--cors", "http://allowed.example", "--allow-host", "myhost.example", "--max-connections", "2",
             "--idle-timeout", "2", "--header-timeout", "2", "--max-connections-per-ip", "8", "--slots", "2", "-c", "2048")
P = srv.port
small = {"prompt": "Hello", "max_tokens": 2}


@check("a cross-site simple POST (text/plain, foreign Origin and Host) is refused")
def _():
    body = json.dumps(small).encode()
    st, _, b = request(P, "POST", "/v1/completions", body, {"Content-Type": "text/plain", "Origin": "http://attacker.example:8080"},
                       host="attacker.example:8080")
    assert st == 403, f"status {st}: {b[:200]}"


@check("a DNS-rebound Host (attacker.example) is a 403 even with JSON and no Origin")
def _():
    st, _, b = post(P, "/v1/completions", small, host="attacker.example:%d" % P)
    assert st == 403 and b["error"]["code"] == "host_not_allowed", f"{st} {b}"
    st, _, _ = request(P, "GET", "/v1/models", host="attacker.example:%d" % P)
    assert st == 403, f"GET /v1/models: {st}"


@check("a foreign Origin is a 403 with the right Host; the server's own page and --cors origins pass")
def _():
    st, _, b = post(P, "/v1/completions", small, headers={"Origin": "http://evil.example"})
    assert st == 403 and b["error"]["code"] == "origin_not_allowed", f"foreign: {st} {b}"
    st, h, _ = post(P, "/v1/completions", small, headers={"Origin": f"http://127.0.0.1:{P}"})
    assert st == 200, f"same origin: {st}"
    st, h, _ = post(P, "/v1/completions", small, headers={"Origin": "http://allowed.example"})
    assert st == 200 and h.get("access-control-allow-origin") == "http://allowed.example", f"--cors: {st} {h}"


@check("CORS preflight: 204 with the allowed methods for a --cors origin, 403 for another")
def _():
    pre = {"Origin": "http://allowed.example", "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "authorization, content-type"}
    st, h, _ = request(P, "OPTIONS", "/v1/chat/completions", headers=pre)
    assert st == 204 and h.get("access-control-allow-origin") == "http://allowed.example", f"{st} {h}"
    assert "POST" in h.get("access-control-allow-methods", "") and "content-type" in h.get("access-control-allow-headers", ""), h
    st, h, _ = request(P, "OPTIONS", "/v1/chat/completions", headers={**pre, "Origin": "http://evil.example"})
    assert st == 403 and "access-control-allow-origin" not in h, f"{st} {h}"


@check("a body that is not application/json is a 415; --allow-host names are accepted")
def _():
    for ct in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"):
        st, _, _ = request(P, "POST", "/v1/completions", json.dumps(small).encode(), {"Content-Type": ct})
        assert st == 415, f"{ct}: {st}"
    st, _, _ = post(P, "/v1/completions", small, headers={"Content-Type": "application/json; charset=utf-8"})
    assert st == 200, f"json with charset: {st}"
    assert request(P, "GET", "/health", host="myhost.example:1234")[0] == 200
    assert request(P, "GET", "/health", host="localhost")[0] == 200


# ---------------------------------------------------------------------------
# clients that do not read, slow headers, idle connections
@check("two clients that never read (--max-connections 2) lock out neither /health nor, after --idle-timeout, requests")
def _():
    big = {"prompt": "Go on and on", "max_tokens": 1800, "stream": True, "logprobs": 5}
    t0_tokens = metric(P, "picolm_completion_tokens_total")
    rss0 = srv.rss_kb()
    socks = [stream_open(P, big, rcvbuf=4096) for _ in range(2)]
    time.sleep(0.7)
    t = time.time()
    st, _, _ = request(P, "GET", "/health", timeout=5)
    assert st == 200, f"/health: {st} while two clients do not read"
    assert time.time() - t < 1.5, f"/health took {time.time() - t:.1f} s"
    rss1 = srv.rss_kb()
    # the write deadline (--idle-timeout 2) closes both (reading them only
    # afterwards: a client that reads is making progress); then requests pass
    time.sleep(3.5)
    assert all(closed_by_server(s, 3) for s in socks), "a never-reading client kept its connection"
    for s in socks:
        s.close()
    time.sleep(0.3)
    st, _, _ = post(P, "/v1/completions", small)
    assert st == 200, f"a request after the deadline: {st}"
    made = metric(P, "picolm_completion_tokens_total") - t0_tokens
    assert made < 2 * 1800, f"{made} tokens generated for clients that read none"
    return f"{int(made)} tokens made before both were paused and closed; RSS +{(rss1 - rss0) // 1024} MB"


@check("64 slow-header connections from another address lock out neither /health nor requests, and are closed by --header-timeout")
def _():
    slow = []
    for _ in range(64):
        try:
            s = socket.socket()
            s.bind(("127.0.0.2", 0))
            s.settimeout(2)
            s.connect(("127.0.0.1", P))
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            slow.append(s)
        except OSError:
            pass  # refused at the per-address cap
    time.sleep(0.3)
    st, _, _ = request(P, "GET", "/health", timeout=3)
    assert st == 200, f"/health: {st}"
    st, _, _ = post(P, "/v1/completions", small, timeout=10)
    assert st == 200, f"completion: {st}"
    held = [s for s in slow if not closed_by_server(s, 0.05)]
    assert all(closed_by_server(s, 4) for s in held), "a slow-header connection outlived --header-timeout 2"
    for s in slow:
        s.close()
    return f"{len(held)} held at most (per-address cap), all closed by the deadline"


@check("a keep-alive connection that trickles its next header (a byte every 0.5 s) is closed after --header-timeout")
def _():
    s = socket.create_connection(("127.0.0.1", P), timeout=5)
    s.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{P}\r\n\r\n".encode())
    time.sleep(0.3)
    assert s.recv(4096).startswith(b"HTTP/1.1 200"), "no answer"
    closed, end = False, time.time() + 6
    for b in b"GET /health HTTP/1.1\r\nX-Slow: " + b"a" * 64:
        if time.time() > end:
            break
        try:
            s.sendall(bytes([b]))
        except OSError:
            closed = True
            break
        if closed_by_server(s, 0.5):
            closed = True
            break
    s.close()
    assert closed, "still open after 6 s of trickling (the activity kept --idle-timeout from firing)"


# ---------------------------------------------------------------------------
# input the README says is refused
@check("overlong UTF-8, encoded surrogates, a NUL after the body and /health%00 are refused")
def _():
    for what, body in [("overlong", b'{"prompt": "a\xc0\xafb"}'), ("surrogate bytes", b'{"prompt": "a\xed\xa0\x80b"}'),
                       ("surrogate escape", b'{"prompt": "a\\ud800b"}'), ("NUL after the body", b'{"prompt": "ab"}\x00'),
                       ("above U+10FFFF", b'{"prompt": "\xf4\x90\x80\x80"}')]:
        st, _, _ = request(P, "POST", "/v1/completions", body, {"Content-Type": "application/json"})
        assert st == 400, f"{what}: {st}"
    st, _, _ = request(P, "GET", "/health%00")
    assert st == 404, f"/health%00: {st}"
    st, _, _ = request(P, "GET", "/health%00x")
    assert st == 404, f"/health%00x: {st}"


# ---------------------------------------------------------------------------
# seeds, json_object, models.retrieve
@check("no seed: a fresh one per request, reported; the reported seed reproduces the reply")
def _():
    body = {"prompt": "Once", "max_tokens": 16, "temperature": 1.5, "top_k": 0, "top_p": 1}
    a, b = post(P, "/v1/completions", body)[2], post(P, "/v1/completions", body)[2]
    assert a["choices"][0]["text"] != b["choices"][0]["text"], "two unseeded replies are identical"
    assert isinstance(a.get("seed"), int) and a["seed"] != b["seed"], f"seeds {a.get('seed')} {b.get('seed')}"
    c = post(P, "/v1/completions", {**body, "seed": a["seed"]})[2]
    assert c["choices"][0]["text"] == a["choices"][0]["text"] and c["seed"] == a["seed"], "the reported seed does not reproduce"
    st, _, evs = request(P, "POST", "/v1/completions", json.dumps({**body, "stream": True}).encode(), {"Content-Type": "application/json"})
    assert isinstance(sse(evs)[0].get("seed"), int), "no seed in the stream's first chunk"


@check("a non-streamed reply slower than the keep-alive interval (--idle-timeout 2): newlines while nothing is ready, then the whole body")
def _():
    # ~3 s here (~10 s under ASan): a keep-alive write before the first
    # byte of the body, the path where the reply buffer is still empty
    t0 = time.time()
    st, _, b = request(P, "POST", "/v1/completions", {"prompt": "Once", "max_tokens": 1000, "seed": 1}, timeout=120)
    assert st == 200, f"{st} {b[:200]!r}"
    ka = len(b) - len(b.lstrip(b"\n"))
    r = json.loads(b)
    assert ka >= 1, f"no keep-alive before the body ({time.time() - t0:.1f} s): {b[:40]!r}"
    assert r["usage"]["completion_tokens"] == 1000, f"usage {r['usage']}"
    return f"{ka} keep-alive newlines in {time.time() - t0:.1f} s"


@check("response_format json_object: a top-level object for every seed; max_tokens 1 is a 400")
def _():
    kinds = []
    for seed in range(1, 6):
        st, _, r = post(P, "/v1/chat/completions", {"messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 40,
                                                    "temperature": 1, "seed": seed, "response_format": {"type": "json_object"}})
        assert st == 200, f"seed {seed}: {st} {r}"
        kinds.append(type(json.loads(r["choices"][0]["message"]["content"])).__name__)
    assert kinds == ["dict"] * 5, f"top-level values: {kinds}"
    st, _, r = post(P, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 1,
                                                "response_format": {"type": "json_object"}})
    assert st == 400, f"max_tokens 1: {st} {r}"


@check("GET /v1/models/{id} returns the model (models.retrieve); another id is a 404")
def _():
    _, _, b = request(P, "GET", "/v1/models")
    mid = json.loads(b)["data"][0]["id"]
    st, _, b = request(P, "GET", "/v1/models/" + mid)
    m = json.loads(b)
    assert st == 200 and m["id"] == mid and m["object"] == "model", f"{st} {m}"
    assert request(P, "GET", "/v1/models/nope.gguf")[0] == 404
srv.stop()

# ---------------------------------------------------------------------------
# the step loop: big prompts, long stop strings, clients gone while queued
srv = Server("--slots", "2", "--max-body", "16M", "-c", "2048", "--queue", "4")
P = srv.port


def timed_stream(port, body, out):
    """Read a stream, noting when each chunk arrived."""
    s = stream_open(port, body)
    out["body"], out["times"] = drain(s, 30, b"[DONE]")
    s.close()


@check("a client that leaves while its request waits in the queue is not generated for")
def _():
    before = metric(P, "picolm_completion_tokens_total")
    res = [{}, {}]
    ths = [threading.Thread(target=timed_stream, args=(P, {"prompt": f"{w} long story:", "max_tokens": 300, "temperature": 0,
                                                           "stream_options": {"include_usage": True}}, r))
           for w, r in zip(("A", "B"), res)]
    for t in ths:
        t.start()
    time.sleep(0.3)
    c = stream_open(P, {"prompt": "C", "max_tokens": 300, "temperature": 0})  # both slots taken: queued
    time.sleep(0.3)
    c.close()
    for t in ths:
        t.join(30)
    time.sleep(1.0)
    made = metric(P, "picolm_completion_tokens_total") - before
    ab = [int(re.findall(rb'"completion_tokens":(\d+)', r["body"])[-1]) for r in res]
    assert min(ab) > 100, f"A and B ended after {ab} tokens: too early to tell"
    assert made == sum(ab), f"{int(made - sum(ab))} tokens for the request whose client left while queued"


@check("tokenizing a 2 MB prompt does not stall another stream (prepared off the step loop)")
def _():
    res = {}
    a = threading.Thread(target=timed_stream, args=(P, {"prompt": "A", "max_tokens": 600, "temperature": 0}, res))
    a.start()
    time.sleep(0.4)
    t = time.time()
    st, _, b = post(P, "/v1/completions", {"prompt": "the sea and the ship " * 100000, "max_tokens": 1}, timeout=60)
    tok_s = time.time() - t
    a.join(60)
    times = [x for x in res["times"] if t - 0.05 <= x <= t + tok_s]
    gaps = [y - x for x, y in zip(times, times[1:])]
    worst = max(gaps) if gaps else tok_s
    assert st == 400, f"the big prompt: {st}"
    assert worst < 0.3, f"the stream stalled {worst * 1000:.0f} ms while a {tok_s * 1000:.0f} ms prompt was tokenized"
    return f"worst gap {worst * 1000:.0f} ms during {tok_s * 1000:.0f} ms of tokenizing"


@check("4 stop strings of 1 MB cost a stream no more per token than none")
def _():
    base = {"prompt": "Tell", "max_tokens": 200, "temperature": 0}
    stops = [chr(ord("a") + i) * 1000000 + "Z" for i in range(4)]
    took = []
    for body in (base, {**base, "stop": stops}):
        res = {}
        timed_stream(P, body, res)
        assert b"[DONE]" in res["body"] and res["body"].count(b'"text"') > 100, f"stream: {res['body'][-200:]}"
        took.append(res["times"][-1] - res["times"][0])  # from the first chunk to the last: the generation
    assert took[1] < took[0] * 1.5 + 0.2, f"{took[1]:.2f} s with the stop strings, {took[0]:.2f} s without"
    return f"{took[1]:.2f} s vs {took[0]:.2f} s from the first chunk to the last"
srv.stop()

# ---------------------------------------------------------------------------
# SIGTERM drains every open stream
@check("SIGTERM: all 16 open streams end with a last chunk (finish_reason shutdown) and [DONE], exit 0")
def _():
    s = Server("--slots", "16", "-c", "2048", "--queue", "32")
    socks = [stream_open(s.port, {"prompt": f"Stream {i}", "max_tokens": 1500, "temperature": 0}) for i in range(16)]
    bufs = [b""] * 16
    end = time.time() + 20
    while time.time() < end and not all(b"data: " in b for b in bufs):
        for i, k in enumerate(socks):
            k.settimeout(0.05)
            try:
                bufs[i] += k.recv(65536)
            except socket.timeout:
                pass
    assert all(b"data: " in b for b in bufs), "not every stream started"
    s.p.send_signal(signal.SIGTERM)
    for i, k in enumerate(socks):
        bufs[i] += drain(k, 10)[0]
        k.close()
    rc = s.p.wait(15)
    bad = []
    for i, b in enumerate(bufs):
        body = b.partition(b"\r\n\r\n")[2]
        # chunked framing: keep only the events
        evs = sse(re.sub(rb"\r\n[0-9a-fA-F]+\r\n", b"", b"\r\n" + body))
        fins = [e["choices"][0]["finish_reason"] for e in evs if isinstance(e, dict) and e["choices"]]
        if evs[-1:] != ["[DONE]"] or fins[-1:] != ["shutdown"]:
            bad.append(f"{i}: ends {fins[-1:]} {evs[-1:] if evs else 'nothing'}")
    assert not bad and rc == 0, f"exit {rc}; {len(bad)} streams cut: {bad[:3]}"


# ---------------------------------------------------------------------------
# the model file truncated under a running server and CLI
@check("the model file truncated under a running server: the server lives, says 503 with a message")
def _():
    copy = os.path.join(TMP, "model-copy.gguf")
    shutil.copy(MODEL, copy)
    s = Server("-c", "2048", model=copy)
    assert post(s.port, "/v1/completions", small)[0] == 200
    k = stream_open(s.port, {"prompt": "Long", "max_tokens": 1500, "temperature": 0})
    time.sleep(0.5)
    os.truncate(copy, 4096)
    os.system(f"sync; echo 1 > /proc/sys/vm/drop_caches 2>/dev/null")
    closed_by_server(k, 15)
    k.close()
    time.sleep(0.3)
    assert s.p.poll() is None, f"the server died (status {s.p.returncode})"
    st, _, b = request(s.port, "GET", "/health")
    assert st == 503 and b"model file" in b, f"/health: {st} {b[:200]}"
    st, _, r = post(s.port, "/v1/completions", small)
    assert st == 503 and "model file" in r["error"]["message"], f"{st} {r}"
    s.stop()


@check("the model file truncated under a running picolm: exit 1 with a message, no SIGBUS")
def _():
    copy = os.path.join(TMP, "model-cli.gguf")
    shutil.copy(MODEL, copy)
    p = subprocess.Popen([CLI, copy, "-p", "Once", "-n", "2000", "-c", "2048", "-j", "1", "--ignore-eos"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)
    os.truncate(copy, 4096)
    os.system("echo 1 > /proc/sys/vm/drop_caches 2>/dev/null")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 1 and b"truncated" in err, f"exit {p.returncode}: {err[-300:]}"


# ---------------------------------------------------------------------------
# item 13: a long-context model's default KV pool
@check("a Llama-3.2-1B-shaped KV cache: the default pool is capped at half the available memory, and the server says so")
def _():
    longkv = os.environ.get("LONGKV")
    if not longkv or not os.path.exists(longkv):
        print("SKIP: server guard: no LONGKV model")
        return False
    s = Server(model=longkv)
    log = open(s.log).read()
    s.stop()
    avail = int(re.search(r"MemAvailable:\s+(\d+)", open("/proc/meminfo").read()).group(1)) / 1024
    m = re.search(r"KV pool: \d+ blocks of \d+ positions, ([\d.]+) MB", log)
    assert m and float(m.group(1)) <= avail / 2 * 1.05, f"pool {m and m.group(1)} MB of {avail:.0f} MB available: {log[-400:]}"
    assert "half of the" in log and "16384 MB" in log, f"no note: {log[-400:]}"


# ---------------------------------------------------------------------------
# soak: 4 rounds of 16 streams, 1 in 4 cut mid-stream
@check("soak: 4 rounds of 16 streams (1 in 4 killed mid-stream): all others complete, VmRSS after round 4 within 5% of round 2")
def _():
    s = Server("--slots", "8", "-c", "1024", "--queue", "32")
    rss = []
    t0 = time.time()
    for rnd in range(4):
        res = [dict() for _ in range(16)]
        ths = []
        for i in range(16):
            body = {"prompt": f"Round {rnd} stream {i} tells", "max_tokens": 24 + 8 * (i % 4), "temperature": 0.8, "seed": i}
            if i % 4 == 3:
                def cut(b=body):
                    k = stream_open(s.port, b)
                    k.recv(1024)
                    time.sleep(0.05)
                    k.close()
                ths.append(threading.Thread(target=cut))
            else:
                ths.append(threading.Thread(target=timed_stream, args=(s.port, body, res[i])))
        for t in ths:
            t.start()
        for t in ths:
            t.join(60)
        done = sum(b"[DONE]" in r.get("body", b"") for r in res)
        assert done == 12, f"round {rnd + 1}: {done} of 12 streams completed"
        time.sleep(0.3)
        rss.append(s.rss_kb())
    s.stop()
    assert rss[3] <= rss[1] * 1.05, f"VmRSS by round: {rss} kB"
    return f"VmRSS {[r // 1024 for r in rss]} MB, {time.time() - t0:.1f} s"


for p in procs:
    if p.poll() is None:
        p.kill()
shutil.rmtree(TMP, ignore_errors=True)
sys.exit(1 if failed else 0)

#!/bin/sh
# The picolm CLI end to end: help, prompt sources, greedy reference text,
# streaming, where output goes, exit codes, context overflow, --truncate,
# --stop, --special, --dump-config round trip, --list-plugins.
# Exit codes: 0 ok, 1 runtime failure (model, prompt), 2 usage error.
BUILD=${PICOLM_BUILD:-build}
SHARED=${PICOLM_SHARED:-../shared}
BIN=$BUILD/bin/picolm
MODEL=models/tiny-shakespeare-q8_0.gguf
if [ ! -x "$BIN" ]; then echo "SKIP: t_cli: $BIN not built"; exit 0; fi
if [ ! -f "$MODEL" ]; then echo "SKIP: t_cli: $MODEL absent"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; }
# ok COND-EXIT-STATUS MESSAGE... (call as: [ test ]; ok "message")
ok() { if [ $? -eq 0 ]; then pass "$@"; else fail "$@"; fi; }
# run ARGS...: stdout -> $tmp/out, stderr -> $tmp/err, status -> $rc
run() { "$BIN" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null; rc=$?; }
brief() { head -c 300 "$1" | tr '\n' ' '; }

# --- --help documents every flag, exits 0 --------------------------------
"$BIN" --help >"$tmp/help" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/help" ] && [ ! -s "$tmp/err" ]; ok "--help exits 0 and prints to stdout"
# every flag of the table (config.h's keys, config.c's other rows) except aliases (help text "")
flags=$( (sed -n '/define PICOLM_CONFIG_KEYS/,/^$/p' tools/cli/config.h; sed -n '/static const keydef keys\[\]/,/^};/p' tools/cli/config.c) |
        grep -v ', ""),' | sed -n 's/.*\(OPT\|SHARED\)("\([a-z0-9-]*\)".*/\2/p')
missing=
for f in $flags; do grep -q -- "--$f\b" "$tmp/help" || missing="$missing --$f"; done
[ -n "$flags" ] && [ -z "$missing" ]; ok "--help documents all $(echo $flags | wc -w) flags${missing:+ (missing:$missing)}"
for f in -p -n -t -k -s -c -j; do grep -q -- "$f, --" "$tmp/help" || missing="$missing $f"; done
[ -z "$missing" ]; ok "--help shows the picoLM short flags -p -n -t -k -s -c -j"
run --version; [ $rc -eq 0 ] && grep -q '^picolm ' "$tmp/out"; ok "--version exits 0"

# --- exit codes and messages ----------------------------------------------
run "$tmp/no-such-model.gguf" -p hi
[ $rc -eq 1 ] && grep -q "no-such-model.gguf" "$tmp/err" && [ ! -s "$tmp/out" ]; ok "a missing model: exit 1 naming the file (rc $rc: $(brief "$tmp/err"))"
run "$MODEL" --no-such-flag -p hi
[ $rc -eq 2 ] && grep -q -- "--no-such-flag" "$tmp/err"; ok "an unknown flag: exit 2 naming it (rc $rc)"
run "$MODEL" -n abc -p hi
[ $rc -eq 2 ] && grep -q "abc" "$tmp/err"; ok "a bad value: exit 2 (rc $rc: $(brief "$tmp/err"))"
run "$MODEL" -p hi -n
[ $rc -eq 2 ]; ok "a flag without its value: exit 2"
run
[ $rc -eq 2 ] && grep -q "usage" "$tmp/err"; ok "no model: exit 2 with the usage line"
run "$MODEL" --chat --chat-template nosuch -p hi
[ $rc -eq 2 ] && grep -q "nosuch" "$tmp/err"; ok "an unknown chat template: exit 2 (rc $rc)"

# --- prompt sources; stats on stderr ---------------------------------------
"$BIN" "$MODEL" -j 1 -t 0 -n 20 -p "ROMEO:" >"$tmp/p" 2>"$tmp/perr"; rc1=$?
printf 'ROMEO:' | "$BIN" "$MODEL" -j 1 -t 0 -n 20 >"$tmp/s" 2>"$tmp/serr"; rc2=$?
[ $rc1 -eq 0 ] && [ -s "$tmp/p" ]; ok "-p generates (rc $rc1, $(wc -c <"$tmp/p") bytes)"
[ $rc2 -eq 0 ] && cmp -s "$tmp/p" "$tmp/s"; ok "a prompt on stdin gives the same text as -p"
! grep -q -e 'picolm:' -e 'tok/s' "$tmp/p" && grep -q 'tok/s' "$tmp/perr"; ok "statistics go to stderr, not stdout"
"$BIN" "$MODEL" -j 1 -t 0 -n 20 -p "ROMEO:" >"$tmp/p2" 2>/dev/null
cmp -s "$tmp/p" "$tmp/p2"; ok "-t 0 is deterministic"
"$BIN" "$MODEL" -j 1 -t 0.9 -s 5 -n 30 -p "ROMEO:" >"$tmp/a" 2>/dev/null
"$BIN" "$MODEL" -j 1 -t 0.9 -s 5 -n 30 -p "ROMEO:" >"$tmp/b" 2>/dev/null
"$BIN" "$MODEL" -j 1 -t 0.9 -s 6 -n 30 -p "ROMEO:" >"$tmp/c" 2>/dev/null
cmp -s "$tmp/a" "$tmp/b" && ! cmp -s "$tmp/a" "$tmp/c"; ok "sampling: same seed same text, another seed another text"

# --- greedy continuation = llama.cpp's reference text ----------------------
REF=$SHARED/reference/logits
if [ -f "$REF/tiny-shakespeare-q8_0.greedy.txt" ]; then
    "$BIN" "$MODEL" -t 0 -n 48 <"$REF/tiny-shakespeare.prompt.txt" >"$tmp/g" 2>"$tmp/gerr"; rc=$?
    n=$(wc -c <"$REF/tiny-shakespeare-q8_0.greedy.txt")
    [ $rc -eq 0 ] && head -c "$n" "$tmp/g" | cmp -s - "$REF/tiny-shakespeare-q8_0.greedy.txt"
    ok "-t 0 -n 48 on the reference prompt begins with llama.cpp's greedy text ($n bytes)"
    grep -q "prefill 205 tokens" "$tmp/gerr"; ok "the reference prompt is 205 tokens (BOS added)"

    # --stop, across token boundaries: the text is cut before it
    run "$MODEL" -t 0 -n 48 --stop "GRUMIO" -p "$(cat "$REF/tiny-shakespeare.prompt.txt")"
    printf "ride your father's face,\nAnd you shall be yours, I'll pardon him.\n\n" >"$tmp/want"
    [ $rc -eq 0 ] && cmp -s "$tmp/out" "$tmp/want"; ok "--stop GRUMIO cuts the output right before it ('$(brief "$tmp/out")')"
    run "$MODEL" -t 0 -n 48 --stop "zzz" --stop "him.

G" -p "$(cat "$REF/tiny-shakespeare.prompt.txt")"
    printf "ride your father's face,\nAnd you shall be yours, I'll pardon " >"$tmp/want"
    [ $rc -eq 0 ] && cmp -s "$tmp/out" "$tmp/want"; ok "a second --stop spanning several tokens and lines works"
    run "$MODEL" -t 0 -n 48 --stop "no such text" -p "$(cat "$REF/tiny-shakespeare.prompt.txt")"
    head -c "$n" "$tmp/out" | cmp -s - "$REF/tiny-shakespeare-q8_0.greedy.txt"; ok "a stop string that never occurs changes nothing"
else
    echo "SKIP: t_cli: reference text absent ($REF)"
fi

# --- context overflow -------------------------------------------------------
LONG="ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun."
run "$MODEL" -c 16 -n 5 -p "$LONG"
[ $rc -ne 0 ] && grep -q -- "--truncate" "$tmp/err" && [ ! -s "$tmp/out" ]; ok "a prompt longer than -c 16 fails, pointing at --truncate (rc $rc: $(brief "$tmp/err"))"
run "$MODEL" -c 16 -n 5 -t 0 --truncate -p "$LONG"
[ $rc -eq 0 ] && grep -q "truncated from" "$tmp/err" && [ -s "$tmp/out" ]; ok "--truncate keeps the last tokens and says so ($(grep truncated "$tmp/err"))"

# --- special tokens -----------------------------------------------------------
cnt() { sed -n 's/.*prefill \([0-9]*\) tokens.*/\1/p' "$tmp/err"; }
run "$MODEL" -n 1 -p "ROMEO:"; base=$(cnt)
run "$MODEL" -n 1 --special -p "<s>ROMEO:"; sp=$(cnt)
run "$MODEL" -n 1 --no-special -p "<s>ROMEO:"; nosp=$(cnt)
run "$MODEL" -n 1 -p "<s>ROMEO:"; dflt=$(cnt)
[ -n "$base" ] && [ "$sp" = $((base + 1)) ]; ok "--special: '<s>' in the prompt is one token ($sp = $base + 1)"
[ -n "$nosp" ] && [ "$nosp" -gt "$sp" ] && [ "$dflt" = "$nosp" ]; ok "--no-special (the default outside chat): '<s>' is plain text ($nosp tokens)"

# --- streaming: text appears while the process still runs -------------------
SLOW=$SHARED/models/rand-spm-q8_0.gguf
if [ -f "$SLOW" ]; then
    "$BIN" "$SLOW" -j 1 --backend scalar -n 60 --ignore-eos -t 0.8 -p "Hello" >"$tmp/stream" 2>/dev/null &
    pid=$!
    seen=; alive_empty=0
    i=0
    while [ $i -lt 400 ]; do
        if ! kill -0 $pid 2>/dev/null; then break; fi
        if [ -s "$tmp/stream" ]; then
            kill -0 $pid 2>/dev/null && seen=1 && break
        else
            alive_empty=$((alive_empty + 1))
        fi
        sleep 0.02; i=$((i + 1))
    done
    wait $pid
    if [ -n "$seen" ]; then pass "streaming: output is visible before the process ends"
    elif [ $alive_empty -lt 5 ]; then echo "SKIP: t_cli: streaming: the run ended too fast to observe"
    else fail "streaming: no output until the process ended"; fi
fi

# --- --dump-config round trip -------------------------------------------------
run --dump-config -t 0.25 -n 7 --stop "a;b" --stop " two words " --system "Be \"brief\"" --kv-type q8_0
cp "$tmp/out" "$tmp/c1.ini"
run --config "$tmp/c1.ini" --dump-config
grep -v '^; read from' "$tmp/out" >"$tmp/c2.ini"
[ $rc -eq 0 ] && cmp -s "$tmp/c1.ini" "$tmp/c2.ini" && grep -q "temperature = 0.25" "$tmp/c1.ini"
ok "--dump-config round-trips through --config (stops, quotes, sampler keys)"
grep -q '^; penalties: penalty_last_n = 64, integer in \[-1, 16777216\]$' "$tmp/c1.ini"
ok "--dump-config lists the loaded samplers' keys (as comments)"
run --help
[ $rc -eq 0 ] && grep -q '^  penalty_last_n .*(penalties: integer in \[-1, 16777216\], default 64)$' "$tmp/out" &&
    grep -q '^  top_p .*(top_p: number in \[0, 1\], default 0.9)$' "$tmp/out"
ok "--help lists each loaded sampler's keys with type, range and default"

# --- --list-plugins -------------------------------------------------------------
run --list-plugins
[ $rc -eq 0 ] && grep -q '^backends:' "$tmp/out" && grep -q '^formats:' "$tmp/out" && grep -qi 'sampler' "$tmp/out" && grep -q CHOSEN "$tmp/out"
ok "--list-plugins lists backends, formats and samplers"

# --- what a new user trips over ------------------------------------------------
# write errors: a message and exit 1; a closed pipe ends quietly
"$BIN" "$MODEL" -j 1 -p ROMEO: -n 20 >/dev/full 2>"$tmp/err" </dev/null; rc=$?
[ $rc -eq 1 ] && grep -q "cannot write the output: No space left" "$tmp/err"; ok "writing to a full disk: exit 1 with a message (rc $rc: $(brief "$tmp/err"))"
"$BIN" "$MODEL" -j 1 --chat -p hi -n 20 >/dev/full 2>"$tmp/err" </dev/null; rc=$?
[ $rc -eq 1 ] && [ "$(grep -c "cannot write" "$tmp/err")" = 1 ]; ok "--chat to a full disk: exit 1 with one message (rc $rc: $(brief "$tmp/err"))"
"$BIN" "$MODEL" -j 1 -p ROMEO: -n 300 --ignore-eos 2>"$tmp/err" </dev/null | head -c 10 >/dev/null
! grep -q -i -e "cannot write" -e "error" "$tmp/err"; ok "a pipe closed by the reader ends quietly"
(trap '' PIPE; "$BIN" "$MODEL" -j 1 -p ROMEO: -n 300 --ignore-eos 2>"$tmp/err" </dev/null; echo $? >"$tmp/rc") | head -c 10 >/dev/null
[ "$(cat "$tmp/rc")" = 0 ] && ! grep -q "cannot write" "$tmp/err"; ok "... also with SIGPIPE ignored (EPIPE: rc $(cat "$tmp/rc"))"
printf 'ROMEO:' >"$tmp/prompt.txt"
"$BIN" "$MODEL" -j 1 -t 0 -n 20 -p ROMEO: --dump-config >/dev/full 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "cannot write" "$tmp/err"; ok "--dump-config to a full disk: exit 1 (rc $rc)"

# --json and --stop, --json -n 1: refused up front
run "$MODEL" --json --stop , -p "A record:" -n 40 -t 1 -s 1
[ $rc -eq 2 ] && grep -q -- "--stop" "$tmp/err" && [ ! -s "$tmp/out" ]; ok "--json with --stop is refused: exit 2 ($(brief "$tmp/err"))"
run "$MODEL" --json -n 1 -p "ROMEO:"
[ $rc -eq 2 ] && grep -q "budget" "$tmp/err"; ok "--json -n 1: refused up front, no document fits ($(brief "$tmp/err"))"

# -c past the model's limit: a warning, and the overflow message says the limit
run "$MODEL" -c 4096 -n 2 -p "ROMEO:"
[ $rc -eq 0 ] && grep -q "beyond the model's limit of 256" "$tmp/err"; ok "-c 4096 on a 256-context model warns ($(brief "$tmp/err"))"
LONGER=$(i=0; while [ $i -lt 40 ]; do printf 'ROMEO: But soft, what light. '; i=$((i + 1)); done)
run "$MODEL" -c 4096 -n 2 -p "$LONGER"
[ $rc -eq 1 ] && grep -q "cannot be exceeded" "$tmp/err" && ! grep -q "use -c" "$tmp/err"; ok "a prompt past the model's limit names it, not -c ($(brief "$tmp/err"))"
run "$MODEL" -v -n 2 -p "ROMEO:"
[ "$(grep -c clamped "$tmp/err")" = 1 ]; ok "-v notes the default context's clamp once"
run "$MODEL" -n 2 -p "ROMEO:"
[ -n "$(head -n 1 "$tmp/err")" ]; ok "stderr starts without a blank line"

# one exit-code rule: 2 for anything the user must change in flags, INI or names
printf '[sampler]\nfoo = 4\n' >"$tmp/s.ini"; printf '[engine]\nthreadz = 4\n' >"$tmp/e.ini"
printf '[engine]\n\nbackend = foo\n' >"$tmp/b.ini"
for args in "--backend foo" "--sampler bogus" "--param foo=1" "--config $tmp/s.ini" "--config $tmp/e.ini" "--config $tmp/b.ini" \
            "--kv-type f32" "-j -1"; do
    run "$MODEL" $args -p hi -n 1
    [ $rc -eq 2 ]; ok "exit 2 for $args (rc $rc: $(brief "$tmp/err"))"
done
run "$MODEL" --config "$tmp/b.ini" -p hi -n 1
grep -q "b.ini:3: \[engine\] backend: no backend named 'foo' (available: auto, reference" "$tmp/err"; ok "INI backend = foo names file:line and lists auto and reference"
printf '[generate]\nchat_template = nosuch\n[sampler]\n\nchain = bogus\n' >"$tmp/n.ini"
run "$MODEL" --config "$tmp/n.ini" -p hi -n 1
[ $rc -eq 2 ] && grep -q "n.ini:5: \[sampler\] chain: unknown sampler 'bogus'" "$tmp/err"; ok "INI chain = bogus names file:line ($(brief "$tmp/err"))"
run "$MODEL" --config "$tmp/n.ini" --sampler auto --chat -p hi -n 1
[ $rc -eq 2 ] && grep -q "n.ini:2: \[generate\] chat_template: unknown chat template 'nosuch'" "$tmp/err"; ok "INI chat_template = nosuch names file:line"
run "$MODEL" -vv -n 1 -p hi
[ $rc -eq 0 ]; ok "-vv is accepted"
run "$MODEL" -j 1 -t 0 -n 20 -f "$tmp/prompt.txt"
[ $rc -eq 0 ] && cmp -s "$tmp/out" "$tmp/p"; ok "-f FILE reads the prompt from a file (same text as -p)"
run "$MODEL" -f "$tmp/no-such-prompt.txt"
[ $rc -eq 1 ] && grep -q "no-such-prompt.txt" "$tmp/err"; ok "-f with a missing file: exit 1 naming it"

# no sampler plugins at all: say so
mkdir -p "$tmp/np/bin" "$tmp/np/plugins"
cp "$BIN" "$tmp/np/bin/"; cp "$BUILD"/plugins/format-*.so "$BUILD"/plugins/backend-*.so "$tmp/np/plugins/"
"$tmp/np/bin/picolm" "$MODEL" -t 0 -p hi -n 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "no sampler plugin was found" "$tmp/err"; ok "no sampler plugins: the error says none was found (rc $rc: $(brief "$tmp/err"))"

# threads and the CPU mask
run "$MODEL" -j 1000 -n 1 -p hi
grep -q "1000 threads on [0-9]* online CPUs" "$tmp/err"; ok "-j above the online CPUs warns"
PICOLM_CPU_MASK=bogus "$BIN" "$MODEL" -n 1 -p hi >"$tmp/out" 2>"$tmp/err" </dev/null; rc=$?
[ $rc -eq 2 ] && grep -q "PICOLM_CPU_MASK" "$tmp/err"; ok "PICOLM_CPU_MASK=bogus is an error (rc $rc: $(brief "$tmp/err"))"

# --fit: DOES NOT FIT is a failure
run --fit "$MODEL" --ram 2M
[ $rc -eq 1 ] && grep -q "DOES NOT FIT" "$tmp/out"; ok "--fit exits 1 when the verdict is DOES NOT FIT"

# the cache: say when the file is created; "not saved" once; "prefill 1 token"
run "$MODEL" -n 2 -t 0 --cache "$tmp/c.kv" -p "ROMEO:"
grep -q "cache: created $tmp/c.kv" "$tmp/err"; ok "a new cache file is announced ($(grep cache: "$tmp/err"))"
run "$MODEL" -n 2 -t 0 --cache "$tmp/c.kv" -p "ROMEO:"
grep -q "prefill 1 token " "$tmp/err"; ok "\"prefill 1 token\", singular"
# a directory that does not exist: every save fails, even for root
run "$MODEL" -n 4 -t 0 --cache "$tmp/kvdir/no/such/c.kv" -p "ROMEO: hi"
[ $rc -eq 0 ] && [ "$(grep -c "not saved" "$tmp/err")" = 1 ]; ok "\"cache: not saved\" is said once ($(grep -c "not saved" "$tmp/err") times, rc $rc)"

# a terminal gets a final newline; a pipe gets exactly the text
if command -v script >/dev/null 2>&1; then
    script -qc "'$BIN' '$MODEL' -j 1 -t 0 -n 3 -p ROMEO: 2>/dev/null" /dev/null </dev/null >"$tmp/tty"
    "$BIN" "$MODEL" -j 1 -t 0 -n 3 -p ROMEO: >"$tmp/pipe" 2>/dev/null </dev/null
    [ "$(tail -c 1 "$tmp/pipe" | od -An -c | tr -d ' ')" != '\n' ] && [ "$(tail -c 2 "$tmp/tty" | od -An -c | tr -d ' ')" = '\r\n' ]
    ok "output ends with a newline on a terminal only"
else
    echo "SKIP: t_cli: no script(1) for a terminal test"
fi
exit 0

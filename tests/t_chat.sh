#!/bin/sh
# --chat end to end.  Piped: the whole stdin (or -p) is one user message,
# one reply.  On a terminal (a pty from util-linux `script`): a multi-turn
# conversation that prefills only each new turn, /reset, a clear message when
# the context is full, EOF quits.
BUILD=${PICOLM_BUILD:-build}
BIN=$BUILD/bin/picolm
MODEL=models/tiny-shakespeare-q8_0.gguf
if [ ! -x "$BIN" ]; then echo "SKIP: t_chat: $BIN not built"; exit 0; fi
if [ ! -f "$MODEL" ]; then echo "SKIP: t_chat: $MODEL absent"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { if [ $? -eq 0 ]; then echo "PASS: $*"; else echo "FAIL: $*"; fi; }
cnt() { sed -n 's/.*prefill \([0-9]*\) tokens.*/\1/p' "$1" | head -1; }
brief() { grep -v -e '^$' -e 'picolm: load' -e 'picolm: backend' "$1" | head -c 300 | tr '\n' ' '; }

# --- one message from a pipe or -p ------------------------------------------
echo "ROMEO: speak" | "$BIN" "$MODEL" -j 1 --chat -t 0 -n 16 >"$tmp/a" 2>"$tmp/ea"; rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/a" ] && grep -q "using chatml" "$tmp/ea"
ok "piped --chat: one reply; the model has no template, so chatml (llama.cpp's default), said on stderr (rc $rc)"
"$BIN" "$MODEL" -j 1 --chat -t 0 -n 16 -p "ROMEO: speak" >"$tmp/b" 2>"$tmp/eb" </dev/null
cmp -s "$tmp/a" "$tmp/b"; ok "-p gives the same reply as the same message on stdin"
"$BIN" "$MODEL" -j 1 -t 0 -n 1 -p "ROMEO: speak" >/dev/null 2>"$tmp/ep"
plain=$(cnt "$tmp/ep"); chat=$(cnt "$tmp/ea")
[ -n "$plain" ] && [ "$chat" -gt $((plain + 10)) ]; ok "the template wraps the message ($plain -> $chat tokens)"
"$BIN" "$MODEL" -j 1 --chat --system "You are Hamlet, prince of Denmark." -t 0 -n 4 -p "ROMEO: speak" >/dev/null 2>"$tmp/es"
[ "$(cnt "$tmp/es")" -gt "$chat" ]; ok "--system adds a system turn ($(cnt "$tmp/es") tokens)"
"$BIN" "$MODEL" -j 1 --chat --chat-template gemma -t 0 -n 4 -p "ROMEO: speak" >/dev/null 2>"$tmp/ec"; rc=$?
[ $rc -eq 0 ] && [ "$(cnt "$tmp/ec")" != "$chat" ] && ! grep -q "using chatml" "$tmp/ec"
ok "--chat-template gemma is used as asked ($(cnt "$tmp/ec") tokens)"

# --system and --chat-template ask for chat mode
"$BIN" "$MODEL" -j 1 --chat --system "You are Hamlet." -t 0 -n 8 -p "ROMEO: speak" >"$tmp/s1" 2>/dev/null
"$BIN" "$MODEL" -j 1 --system "You are Hamlet." -t 0 -n 8 -p "ROMEO: speak" >"$tmp/s2" 2>"$tmp/es2"; rc=$?
[ $rc -eq 0 ] && grep -q "using chatml" "$tmp/es2" && cmp -s "$tmp/s1" "$tmp/s2"
ok "--system without --chat implies --chat (same reply as with it; rc $rc)"
"$BIN" "$MODEL" -j 1 --chat-template gemma -t 0 -n 4 -p "ROMEO: speak" >/dev/null 2>"$tmp/eg"; rc=$?
[ $rc -eq 0 ] && [ "$(cnt "$tmp/eg")" = "$(cnt "$tmp/ec")" ]; ok "--chat-template without --chat implies --chat ($(cnt "$tmp/eg") tokens)"
printf '[generate]\nsystem = You are Hamlet.\n' >"$tmp/sys.ini"
"$BIN" "$MODEL" --config "$tmp/sys.ini" -j 1 -t 0 -n 1 -p "ROMEO: speak" >/dev/null 2>"$tmp/ei"
[ "$(cnt "$tmp/ei")" = "$plain" ]; ok "an INI system prompt does not turn plain prompts into chat ($(cnt "$tmp/ei") tokens)"
"$BIN" "$MODEL" -j 1 --chat -c 16 -p "ROMEO: but soft, what light through yonder window breaks?" >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc -eq 1 ] && grep -q "does not fit" "$tmp/e" && [ ! -s "$tmp/o" ]; ok "a message longer than the context: exit 1 with a message: $(brief "$tmp/e")"
LONG="ROMEO: but soft, what light through yonder window breaks? It is the east, and Juliet is the sun. Arise, fair sun, and kill the envious moon."
"$BIN" "$MODEL" -j 1 --chat --truncate -c 32 -t 0 -n 4 -p "$LONG" >"$tmp/o" 2>"$tmp/e"; rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/o" ] && grep -q "truncated from [0-9]* to its last 16 tokens (--truncate)" "$tmp/e"
ok "--chat --truncate keeps the last tokens of a message too long for the context: $(grep truncated "$tmp/e")"

# --- picolm-tokenize --render-chat against llama.cpp's renders ---------------
TOK=$BUILD/bin/picolm-tokenize
REF=${PICOLM_SHARED:-../shared}/reference/chat
if [ -f "$REF/conversation.txt" ]; then
    for t in chatml llama2 llama2-sys llama3 zephyr gemma phi3 mistral-v7; do
        "$TOK" --render-chat "$REF/conversation.txt" --chat-template $t >"$tmp/r" 2>"$tmp/er"
        cmp -s "$tmp/r" "$REF/$t.txt"; ok "--render-chat --chat-template $t: byte for byte llama.cpp's render"
    done
    QWEN=${PICOLM_SHARED:-../shared}/models/rand-qwen2-q4_0.gguf
    "$TOK" --render-chat "$REF/conversation.txt" "$QWEN" >"$tmp/r" 2>"$tmp/er"
    cmp -s "$tmp/r" "$REF/chatml.txt" && [ ! -s "$tmp/er" ]; ok "--render-chat with the Qwen2 model: its template is detected as chatml"
    "$TOK" --render-chat "$REF/conversation.txt" --chat-template llama3 "$QWEN" >"$tmp/r" 2>/dev/null
    cmp -s "$tmp/r" "$REF/llama3.txt"; ok "--chat-template overrides the model's template"
    "$TOK" --render-chat "$REF/conversation.txt" --chat-template nosuch >"$tmp/r" 2>"$tmp/er"; rc=$?
    [ $rc -eq 2 ] && grep -q "nosuch" "$tmp/er" && grep -q "mistral-v7" "$tmp/er"; ok "an unknown template name: exit 2, the names listed (rc $rc)"
    "$TOK" --render-chat "$REF/conversation.txt" >"$tmp/r" 2>"$tmp/er"; rc=$?
    [ $rc -eq 2 ] && grep -q "chat-template NAME or a MODEL" "$tmp/er"; ok "--render-chat without a template or a model: exit 2 (rc $rc)"
    printf 'user\nhi\n---\n\nno role' >"$tmp/bad.txt"
    "$TOK" --render-chat "$tmp/bad.txt" --chat-template chatml >"$tmp/r" 2>"$tmp/er"; rc=$?
    [ $rc -eq 1 ] && grep -q "message 2 has no role" "$tmp/er"; ok "a conversation file with a message without a role: exit 1 ($(cat "$tmp/er"))"
else
    echo "SKIP: t_chat: $REF absent: --render-chat not compared"
fi

# --cache in chat mode: a shared system prompt is reused
SYS="You are a player in a company of actors, and you speak in verse."
"$BIN" "$MODEL" -j 1 --chat --system "$SYS" -n 4 -p "ROMEO: speak" --cache "$tmp/c.kv" >/dev/null 2>&1
"$BIN" "$MODEL" -j 1 --chat --system "$SYS" -n 4 -p "JULIET: answer" --cache "$tmp/c.kv" >/dev/null 2>"$tmp/ek"
r=$(sed -n 's/^picolm: cache: reused \([0-9]*\) of.*/\1/p' "$tmp/ek")
[ -n "$r" ] && [ "$r" -ge 15 ]; ok "--chat --cache reuses the system prompt's tokens ($(grep 'cache:' "$tmp/ek"))"

# --- interactive, on a pty ---------------------------------------------------
if ! command -v script >/dev/null 2>&1 || ! script -qec true /dev/null >/dev/null 2>&1 </dev/null; then
    echo "SKIP: t_chat: util-linux script absent: interactive mode not tested (test_chat covers the turn logic)"
    exit 0
fi
# tty INPUT ARGS...: run on a pty, stdout+stderr -> $tmp/tty (CRs removed), status -> $rc
tty() {
    input=$1; shift
    printf '%s' "$input" | timeout 60 script -qec "$BIN $MODEL -j 1 --chat -t 0 -v $*" /dev/null >"$tmp/raw"; rc=$?
    tr -d '\r' <"$tmp/raw" >"$tmp/tty"
}
turn_prefill() { sed -n "s/.*turn $1: prefill \([0-9]*\) tokens.*/\1/p" "$tmp/tty" | sed -n "${2:-1}p"; }
turn_used() { sed -n "s/.*turn $1: .*, \([0-9]*\) of [0-9]* context tokens used.*/\1/p" "$tmp/tty" | sed -n "${2:-1}p"; }

tty 'ROMEO: speak
JULIET: answer
/reset
ROMEO: speak
' -n 12
[ $rc -eq 0 ] && grep -q "picolm: chat (chatml template, context 256)" "$tmp/tty"; ok "a terminal gets an interactive chat; EOF ends it with status 0 (rc $rc)"
p1=$(turn_prefill 1); p2=$(turn_prefill 2); u1=$(turn_used 1); u2=$(turn_used 2)
[ -n "$p2" ] && [ "$p2" -lt "$u1" ] && [ $((p2 + 12)) -lt "$u2" ] && [ "$u2" -gt "$u1" ]
ok "turn 2 prefills only the $p2 tokens its KV cache lacks; the KV cache grows $u1 -> $u2"
grep -q "conversation cleared" "$tmp/tty" && [ "$(turn_prefill 1 2)" = "$p1" ] && [ "$(turn_used 1 2)" = "$u1" ]
ok "/reset starts over: the same first turn again ($p1 prompt tokens)"
# the reply after /reset is the first reply again (greedy)
awk '/^> /{n++; sub(/^> /, ""); if (n == 1 || n == 4) print n": "$0}' "$tmp/tty" >"$tmp/replies"
r1=$(sed -n 's/^1: //p' "$tmp/replies"); r4=$(sed -n 's/^4: //p' "$tmp/replies")
[ -n "$r1" ] && [ "$r1" = "$r4" ]; ok "the same first message after /reset gets the same greedy reply ('$r1')"

tty 'ROMEO: speak
JULIET: But soft, what light through yonder window breaks? It is the east.
HAMLET: To be, or not to be, that is the question.
KING: Let us go in together.
/reset
ROMEO: speak
/exit
' -n 12 -c 64
[ $rc -eq 0 ] && grep -q "filled the context" "$tmp/tty" && grep -q "Type /reset" "$tmp/tty"
ok "a full context is reported with what to do: $(grep -m1 'filled the context' "$tmp/tty" | head -c 200)"
[ "$(grep -c 'turn 1: prefill' "$tmp/tty")" -ge 2 ]; ok "after the context filled, /reset gives a working conversation again"

tty 'first line \
second line
' -n 4
grep -q "turn 1: prefill" "$tmp/tty" && [ -z "$(turn_prefill 2)" ]; ok "a line ending in \\ continues the same message"
exit 0

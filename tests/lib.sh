# Sourced by shell tests (`. "${0%/*}/lib.sh"`): the paths every test uses
# and the two checks most begin with.  Not a test itself (run.sh runs t_*.sh).
TEST_NAME=${0##*/}; TEST_NAME=${TEST_NAME%.sh}
BUILD=${PICOLM_BUILD:-build}
BIN=$BUILD/bin
S=${PICOLM_SHARED:-../shared}
M=$S/models
R=$S/reference/logits

# need_shared FILE: without it the shared data is absent; say so loudly and skip
need_shared() {
    [ -f "$1" ] || { echo "SKIP: $TEST_NAME: PICOLM_SHARED=$S has no ${1##*/}: shared data absent"; exit 0; }
}

# need_built PATH...: each a program (or, ending in .so, a plugin) of the build
need_built() {
    for f in "$@"; do
        case $f in
            *.so) [ -f "$f" ] ;;
            *) [ -x "$f" ] ;;
        esac || { echo "FAIL: $TEST_NAME: $f not built"; exit 1; }
    done
}

# The tiny-shakespeare models whose logits t_aarch64 and t_cross run under
# emulation: one per activation type and kernel family (f16; q8_0, q4_0,
# q5_0 with Q8_0 activations; q5_1 with Q8_1; iq4_xs's table lookups;
# q4_k_m's Q4_K and Q6_K with Q8_K), each kernel of which test_kernels also
# checks on random data on that target; every model's logits and greedy
# text are checked natively (test_logits).  PICOLM_CROSS_MODELS=all: every
# format.
CROSS_MODELS=${PICOLM_CROSS_MODELS:-f16 q8_0 q4_0 q5_0 q5_1 iq4_xs q4_k_m}
[ "$CROSS_MODELS" = all ] && CROSS_MODELS="f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs q4_k_m"
# serve LOG PROGRAM ARGS...: start a server (PROGRAM ARGS --port P) on a free
# port, its output to LOG; sets URL and PID and adds PID to $pids (for the
# caller's cleanup).  Tries ports until one binds and /health answers.
serve() {
    log=$1; shift
    for try in 1 2 3 4 5 6 7 8; do
        port=$((20000 + ($$ * 7 + try * 131 + $(date +%N | cut -c1-4 | sed 's/^0*//;s/^$/0/')) % 30000))
        "$@" --port "$port" >"$log" 2>&1 &
        pid=$!
        for i in $(seq 1 100); do
            if curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; then pids="$pids $pid"; URL="http://127.0.0.1:$port"; PID=$pid; return 0; fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    done
    return 1
}

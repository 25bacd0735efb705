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

# Sanitizer builds of the whole tree + the test suite (docs/fuzzing.md).
#   make test-asan   ASan+UBSan build in build-asan/, tests/run.sh on it
#   make test-tsan   TSan build in build-tsan/: thread pool test,
#                    generations on 2 threads with the machine under load,
#                    and picolm-server under 16 concurrent streams
# Plugins are built with the same flags: they are dlopen'd into a sanitized
# process (clang resolves their runtime references from the executable).
SAN_CC    ?= clang
ASAN_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
TSAN_FLAGS = -fsanitize=thread -fno-omit-frame-pointer
# abort_on_error: a report ends in SIGABRT, which tests/run.sh and the shell
# tests can never mistake for a clean "exit 1" refusal.
# CC/OPT/LDFLAGS are exported too, so a test that runs make itself (t_install)
# rebuilds with the same flags instead of mixing plain and sanitized objects.
# PICOLM_SANITIZER tells tests with wall-clock limits that they run 2-10x slow.
SAN_ENV_ASAN = PICOLM_SANITIZER=asan CC=$(SAN_CC) OPT="-O1 -g $(ASAN_FLAGS)" LDFLAGS="$(ASAN_FLAGS)" ASAN_OPTIONS=abort_on_error=1:detect_leaks=1:$(ASAN_OPTIONS) \
               UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:abort_on_error=1
SAN_ENV_TSAN = PICOLM_SANITIZER=tsan CC=$(SAN_CC) OPT="-O1 -g $(TSAN_FLAGS)" LDFLAGS="$(TSAN_FLAGS)" TSAN_OPTIONS=halt_on_error=1:abort_on_error=1:second_deadlock_stack=1

test-asan:
	$(MAKE) -j2 --no-print-directory BUILD=build-asan CC=$(SAN_CC) OPT="-O1 -g $(ASAN_FLAGS)" LDFLAGS="$(ASAN_FLAGS)" all
	$(SAN_ENV_ASAN) PICOLM_BUILD=build-asan sh tests/run.sh

TSAN_TESTS ?= test_threadpool
TSAN_MODEL ?= models/tiny-shakespeare-q8_0.gguf
# The generations run next to a busy-loop process so that workers get
# preempted mid-task (the schedules where races show).
test-tsan:
	$(MAKE) -j2 --no-print-directory BUILD=build-tsan CC=$(SAN_CC) OPT="-O1 -g $(TSAN_FLAGS)" LDFLAGS="$(TSAN_FLAGS)" all
	$(SAN_ENV_TSAN) PICOLM_BUILD=build-tsan TESTS="$(TSAN_TESTS)" sh tests/run.sh
	@set -e; yes >/dev/null & load=$$!; trap "kill $$load" EXIT; \
	printf '\001\000\000\000\142\000\000\000\167\000\000\000\056\000\000\000\023\001\000\000\017\000\000\000' >build-tsan/tsan.i32; \
	for b in 1 3; do \
	    echo "tsan: picolm-logits -j 2 --batch $$b"; \
	    $(SAN_ENV_TSAN) build-tsan/bin/picolm-logits $(TSAN_MODEL) build-tsan/tsan.i32 build-tsan/tsan.f32 -j 2 --batch $$b; \
	    $(SAN_ENV_TSAN) build-tsan/bin/picolm-logits $(TSAN_MODEL) build-tsan/tsan.i32 build-tsan/tsan.f32 -j 2 --batch $$b --kv-type q8_0; \
	done; \
	if [ -x build-tsan/bin/picolm ]; then \
	    echo "tsan: picolm -p ROMEO: -n 24 -j 2"; \
	    $(SAN_ENV_TSAN) build-tsan/bin/picolm $(TSAN_MODEL) -p "ROMEO:" -n 24 -j 2 >/dev/null; \
	fi; \
	if [ -x build-tsan/bin/picolm-server ]; then \
	    echo "tsan: picolm-server -j 2 --slots 8, 16 concurrent streams, SIGTERM"; \
	    $(SAN_ENV_TSAN) sh tests/tsan_server.sh build-tsan $(TSAN_MODEL); \
	fi; \
	echo "test-tsan: clean"

.PHONY: test-asan test-tsan

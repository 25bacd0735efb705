# Fuzzing (docs/fuzzing.md): libFuzzer harnesses fuzz/<name>.c, built with
# clang -fsanitize=fuzzer,address,undefined against a sanitized copy of the
# core in $(BUILD)/fuzz/.
#   make fuzz [FUZZ_TIME=60] [FUZZ=gguf]   build, run each for FUZZ_TIME s
#   make fuzz-smoke                        ~10 s each (CI)
#   make fuzz-build                        build only
# Crashes land in $(BUILD)/fuzz/crash-<name>-*; the growing corpus in
# $(BUILD)/fuzz/corpus/<name> (seeds: fuzz/corpus/<name>, never written).
FUZZ_CC    ?= clang
FUZZ_TIME  ?= 60
FUZZ_SMOKE_TIME ?= 10
FUZZ_OPTS  ?= -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
FUZZ_DIR    = $(BUILD)/fuzz
FUZZ_SAN    = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=c11 -Wall -Wextra -D_GNU_SOURCE -Iinclude -Icore $(FRONT_INC) -MMD -MP -g -O1 $(FUZZ_SAN)
FUZZ_ALL   := $(basename $(notdir $(wildcard fuzz/*.c)))
FUZZ       ?= $(FUZZ_ALL)
FUZZ_BINS   = $(FUZZ:%=$(FUZZ_DIR)/%)
# The engine, sanitized; the ini harness also gets the front end's config.c
# (and the tools' helpers it uses).
FUZZ_CORE   = $(CORE_SRC:%.c=$(FUZZ_DIR)/obj/%.o)
$(FUZZ_DIR)/ini: $(FUZZ_DIR)/obj/tools/cli/config.o $(FUZZ_DIR)/obj/tools/common/tool.o

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
# fuzz/json.c and fuzz/json_schema.c compile their plugin in
$(FUZZ_DIR)/obj/fuzz/json.o: plugins/json.c
$(FUZZ_DIR)/obj/fuzz/json_schema.o: plugins/json_schema.c

$(FUZZ_BINS): $(FUZZ_DIR)/%: $(FUZZ_DIR)/obj/fuzz/%.o $(FUZZ_CORE)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer $^ -o $@ $(if $(filter ini,$*),$(INIH_LIBS)) $(CORE_LIBS)

fuzz-build: $(FUZZ_BINS)

# Seeds: fuzz/corpus/<name>, plus tests/bad for the GGUF harness.
fuzz: $(FUZZ_BINS)
	@set -e; for n in $(FUZZ); do \
	    mkdir -p $(FUZZ_DIR)/corpus/$$n; \
	    extra=""; [ $$n = gguf ] && extra=tests/bad; \
	    dict=""; [ -f fuzz/$$n.dict ] && dict=-dict=fuzz/$$n.dict; \
	    echo "== fuzz $$n for $(FUZZ_TIME) s"; \
	    $(FUZZ_DIR)/$$n $(FUZZ_OPTS) $$dict -max_total_time=$(FUZZ_TIME) \
	        -artifact_prefix=$(FUZZ_DIR)/crash-$$n- $(FUZZ_DIR)/corpus/$$n fuzz/corpus/$$n $$extra \
	        2>$(FUZZ_DIR)/$$n.log || { tail -40 $(FUZZ_DIR)/$$n.log; echo "fuzz $$n: FAILED (log: $(FUZZ_DIR)/$$n.log)"; exit 1; }; \
	    grep -E '^(stat::number_of_executed_units|#[0-9]+ *DONE)' $(FUZZ_DIR)/$$n.log | tail -2; \
	done

fuzz-smoke:
	@$(MAKE) -j2 --no-print-directory fuzz FUZZ_TIME=$(FUZZ_SMOKE_TIME)

.PHONY: fuzz fuzz-smoke fuzz-build

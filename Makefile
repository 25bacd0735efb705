# picolm — build everything with `make`, test with `make test`.
# GNU make; CC may be gcc or clang.  Plugins are discovered by layout:
#   formats/<name>.c            -> build/plugins/format-<name>.so
#   plugins/<name>.c            -> build/plugins/sampler-<name>.so
#   backends/<name>/plugin.c    -> descriptor, compiled with NO -m flags
#   backends/<name>/*.c (rest)  -> kernels of level <name>, compiled with
#                                  ISA_<name> flags (by CC_<name> when set)
#                                  -> build/plugins/backend-<name>.so, with
#                                  the lower levels' objects (LEVELS_<name>)
#   backends/x86/*.h            -> headers the x86 levels share (no .c files,
#                                  so not a level: each level compiles its
#                                  own copy at its own flags)
#   core/*.c                    -> build/libpicolm.a: the engine library
#                                  (never prints, never exits; no libinih);
#                                  include/picolm/picolm.h is its only door:
#                                  tools/ is compiled without -Icore
#   tools/common/*.c            -> build/libpicolm-tools.a: quantization
#                                  policy, synthetic models, small helpers
#   tools/cli/*.c               -> build/libpicolm-cli.a: the front end every
#                                  binary shares (INI + flags, generation,
#                                  chat session) and main.c = build/bin/picolm
#   tools/<name>.c              -> build/bin/picolm-<name>
#   tests/test_<name>.c         -> build/tests/test_<name> (run by tests/run.sh)
#                                  engine tests link libpicolm.a (and the tool
#                                  support), FRONT_TESTS the front end too

CC      ?= cc
AR      ?= ar
PREFIX  ?= /usr/local
DESTDIR ?=
# GNU install directories (every one under $(DESTDIR) when installing)
prefix      ?= $(PREFIX)
exec_prefix ?= $(prefix)
bindir      ?= $(exec_prefix)/bin
libdir      ?= $(exec_prefix)/lib
datarootdir ?= $(prefix)/share
datadir     ?= $(datarootdir)
includedir  ?= $(prefix)/include
INSTALL         ?= install
INSTALL_PROGRAM ?= $(INSTALL) -m 755
INSTALL_DATA    ?= $(INSTALL) -m 644
STRIP           ?= strip
BUILD   ?= build
OPT     ?= -O2 -g
CFLAGS  ?=
LDFLAGS ?=
# The core is built with no -m flags: it probes the CPU and must run anywhere.
# -ffp-contract=off: no implicit a*b+c -> fma, so a plugin's scalar float
# code rounds as the same expression in the core does, under gcc and clang
# alike (greedy near-ties hinge on the last bit; docs/perf.md, "Build flags").
# _FILE_OFFSET_BITS=64: on 32-bit targets (armhf), models over 2 GB and
# readdir on filesystems with 64-bit directory offsets (plugin scan).
BASE_CFLAGS = -std=c11 -Wall -Wextra -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -ffp-contract=off -Iinclude -fPIC -MMD -MP $(OPT) $(CFLAGS)
INIH_LIBS ?= $(shell pkg-config --libs inih 2>/dev/null || echo -linih)
CORE_LIBS = -ldl -lpthread -lm
FRONT_LIBS = $(INIH_LIBS) $(CORE_LIBS)

MACHINE := $(shell $(CC) -dumpmachine)
ifneq (,$(findstring x86_64,$(MACHINE)))
  BACKENDS ?= scalar sse4 avx2 avx512
else ifneq (,$(findstring aarch64,$(MACHINE)))
  BACKENDS ?= scalar neon
else ifneq (,$(findstring arm,$(MACHINE)))
  BACKENDS ?= scalar neon
else ifneq (,$(findstring riscv64,$(MACHINE)))
  BACKENDS ?= scalar rvv
else
  BACKENDS ?= scalar
endif
# Kernel levels (backends/level.h, docs/backends.md).  ISA_<level>: each
# compiler flag of the level with the PICOLM_CPU_* bits it needs (flag/BIT+BIT,
# or flag/ for none).  The flags compile backends/<level>/*.c; the bits are
# the plugin's cpu_required (PK_CPU in plugin.c): one list for both.
ISA_scalar =
ISA_sse4   = -msse4.1/SSE2+SSE3+SSE41 -mssse3/SSSE3 -mpopcnt/POPCNT
ISA_avx2   = -mavx2/AVX+AVX2 -mfma/FMA -mf16c/F16C
ISA_avx512 = $(ISA_avx2) -mavx512f/AVX512F -mavx512bw/AVX512BW -mavx512vl/AVX512VL -mavx512dq/AVX512DQ -mavx512vnni/AVX512VNNI
ISA_neon   = -march=armv8.2-a+dotprod+fp16/NEON
# LEVELS_<plugin>: the levels linked into backend-<plugin>.so, lowest first
# (backends/<plugin>/plugin.c lists the same in PK_CHAIN).  A plugin runs
# nothing above its own level: `backend = avx2` never touches AVX-512.
LEVELS_scalar = scalar
LEVELS_sse4   = scalar sse4
LEVELS_avx2   = scalar sse4 avx2
LEVELS_avx512 = scalar sse4 avx2 avx512
LEVELS_neon   = scalar neon
LEVELS_rvv    = scalar rvv
empty :=
space := $(empty) $(empty)
isa_flags = $(foreach e,$(1),$(firstword $(subst /, ,$(e))))
isa_cpu   = $(or $(subst $(space),|,$(strip $(foreach e,$(1),$(addprefix PICOLM_CPU_,$(subst +, ,$(word 2,$(subst /, ,$(e)))))))),0)

CORE_SRC  = $(wildcard core/*.c)
CORE_OBJ  = $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
CORE_LIB  = $(BUILD)/libpicolm.a
TSUP_SRC  = $(wildcard tools/common/*.c)
TSUP_LIB  = $(BUILD)/libpicolm-tools.a
CLI_SRC   = $(filter-out tools/cli/main.c,$(wildcard tools/cli/*.c))
CLI_LIB   = $(BUILD)/libpicolm-cli.a
FORMATS   = $(basename $(notdir $(wildcard formats/*.c)))
SAMPLERS  = $(basename $(notdir $(wildcard plugins/*.c)))
TOOLS     = $(basename $(notdir $(wildcard tools/*.c)))
# picolm-server: tools/server/*.c, with libmicrohttpd and json-c (README says why)
SERVER_SRC = $(wildcard tools/server/*.c)
SERVER_OBJ = $(SERVER_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/tools/server/page_html.o
SERVER_LIBS ?= $(shell pkg-config --libs libmicrohttpd json-c 2>/dev/null || echo -lmicrohttpd -ljson-c)
# Built where this compiler can link them (a cross build usually cannot:
# tests/t_server.sh then says it was not built).
HAVE_SERVER ?= $(shell printf 'int main(void){return 0;}' | $(CC) -x c - -o /dev/null $(SERVER_LIBS) 2>/dev/null && echo yes)
SERVER_BIN = $(if $(HAVE_SERVER),$(BUILD)/bin/picolm-server)
TEST_PROGS = $(basename $(notdir $(wildcard tests/test_*.c)))
# Tests of the front end (config, generation, chat session): the others are
# the engine's and link without it and without libinih.
FRONT_TESTS = test_config test_chat test_samplers

FORMAT_SO  = $(FORMATS:%=$(BUILD)/plugins/format-%.so)
SAMPLER_SO = $(SAMPLERS:%=$(BUILD)/plugins/sampler-%.so)
BACKEND_SO = $(BACKENDS:%=$(BUILD)/plugins/backend-%.so)
TOOL_BIN   = $(TOOLS:%=$(BUILD)/bin/picolm-%)
TEST_BIN   = $(TEST_PROGS:%=$(BUILD)/tests/%)
# The front end and the tools see their own headers and the public ones
# (include/picolm); the engine's (core/) only the engine and the tests see.
FRONT_INC  = -Itools/common -Itools/cli

all: $(BUILD)/bin/picolm $(TOOL_BIN) $(SERVER_BIN) $(FORMAT_SO) $(SAMPLER_SO) $(BACKEND_SO) $(TEST_BIN)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -c $< -o $@
$(BUILD)/obj/tools/%.o $(BUILD)/obj/tests/%.o: BASE_CFLAGS += $(FRONT_INC)
$(BUILD)/obj/core/%.o $(BUILD)/obj/tests/%.o: BASE_CFLAGS += -Icore

$(BUILD)/lib%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^
$(CORE_LIB): $(CORE_OBJ)
$(TSUP_LIB): $(TSUP_SRC:%.c=$(BUILD)/obj/%.o)
$(CLI_LIB): $(CLI_SRC:%.c=$(BUILD)/obj/%.o)

# Front ends: the picolm CLI and every picolm-* tool.
$(BUILD)/bin/picolm: $(BUILD)/obj/tools/cli/main.o $(CLI_LIB) $(TSUP_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(FRONT_LIBS)

$(BUILD)/bin/picolm-%: $(BUILD)/obj/tools/%.o $(CLI_LIB) $(TSUP_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(FRONT_LIBS)

# Engine tests: the engine (and the tool support that writes test models).
$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TSUP_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(CORE_LIBS)
$(FRONT_TESTS:%=$(BUILD)/tests/%): $(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(CLI_LIB) $(TSUP_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(FRONT_LIBS)

# picolm-server: a front end like picolm, plus libmicrohttpd and json-c
$(BUILD)/obj/tools/server/%.o: BASE_CFLAGS += -Itools/server
$(BUILD)/gen/page_html.c: tools/server/page.html mk/page.awk
	@mkdir -p $(dir $@)
	awk -f mk/page.awk $< >$@
$(BUILD)/obj/tools/server/page_html.o: $(BUILD)/gen/page_html.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -c $< -o $@
$(BUILD)/bin/picolm-server: $(SERVER_OBJ) $(CLI_LIB) $(TSUP_LIB) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(SERVER_LIBS) $(FRONT_LIBS)

# Plugins never link against the core: only libc/libm.
$(BUILD)/plugins/format-%.so: $(BUILD)/obj/formats/%.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) $^ -o $@ -lm

$(BUILD)/plugins/sampler-%.so: $(BUILD)/obj/plugins/%.o
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) $^ -o $@ -lm

# Backends: plugin.c without ISA flags (and -DPK_CPU, its cpu_required), every
# other file of backends/<level>/ with the level's flags; backend-<p>.so links
# plugin.o of <p> and the level objects of LEVELS_<p>.
level_objs = $(patsubst %.c,$(BUILD)/obj/%.o,$(filter-out %/plugin.c,$(wildcard backends/$(1)/*.c)))
define LEVEL_RULES
$(BUILD)/obj/backends/$(1)/%.o: backends/$(1)/%.c
	@mkdir -p $$(dir $$@)
	$$(if $$(filter plugin.c,$$(notdir $$<)),$$(CC) $$(BASE_CFLAGS) '-DPK_CPU=($$(call isa_cpu,$$(ISA_$(1))))',$$(or $$(CC_$(1)),$$(CC)) $$(BASE_CFLAGS) $$(call isa_flags,$$(ISA_$(1)))) -c $$< -o $$@
endef
BACKEND_OBJS = $(BUILD)/obj/backends/$(1)/plugin.o $(foreach l,$(LEVELS_$(1)),$(call level_objs,$(l)))
define BACKEND_RULES
$(BUILD)/plugins/backend-$(1).so: $(call BACKEND_OBJS,$(1))
	@mkdir -p $$(dir $$@)
	$$(CC) -shared $$(LDFLAGS) $$^ -o $$@ -lm
endef
$(foreach l,$(notdir $(wildcard backends/*)),$(if $(wildcard backends/$(l)/*.c),$(eval $(call LEVEL_RULES,$(l)))))
$(foreach b,$(BACKENDS),$(eval $(call BACKEND_RULES,$(b))))

# test_expf: the vector expf of each x86 level as its plugin builds it
# (tests/expf_level.c with the level's flags, -DLEVEL=<level>; a static
# pattern rule, so that no other target, such as make's attempt to remake
# an included .d file, ever matches it)
ifneq (,$(findstring x86_64,$(MACHINE)))
EXPF_OBJ = $(BUILD)/obj/tests/expf_avx2.o $(BUILD)/obj/tests/expf_avx512.o
$(BUILD)/tests/test_expf: $(EXPF_OBJ)
$(EXPF_OBJ): $(BUILD)/obj/tests/expf_%.o: tests/expf_level.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(call isa_flags,$(ISA_$*)) -DLEVEL=$* -c $< -o $@
endif

test: all
	@PICOLM_BUILD=$(BUILD) sh tests/run.sh

# Plugins go to $(libdir)/picolm: the binaries find them at ../lib/picolm
# from bindir (the default layout), or through plugin_dir.
INST_BIN  = $(DESTDIR)$(bindir)
INST_PLUG = $(DESTDIR)$(libdir)/picolm
INST_CONF = $(DESTDIR)$(datadir)/picolm/conf
INST_INC  = $(DESTDIR)$(includedir)/picolm
# The engine library installs too (libpicolm.a, its headers and a
# pkg-config file), so that a program of one's own links it:
# cc app.c $(pkg-config --cflags --libs picolm).
PICOLM_VERSION := $(shell sed -n 's/^\#define PICOLM_VERSION "\(.*\)"/\1/p' tools/cli/cli.h)
INST_LIB = $(DESTDIR)$(libdir)
INST_PC  = $(DESTDIR)$(libdir)/pkgconfig
install: all
	$(INSTALL) -d $(INST_BIN) $(INST_PLUG) $(INST_CONF) $(INST_INC) $(INST_PC)
	$(INSTALL_PROGRAM) $(BUILD)/bin/picolm $(TOOL_BIN) $(SERVER_BIN) $(INST_BIN)/
	$(INSTALL_PROGRAM) $(FORMAT_SO) $(SAMPLER_SO) $(BACKEND_SO) $(INST_PLUG)/
	$(INSTALL_DATA) conf/*.ini $(INST_CONF)/
	$(INSTALL_DATA) include/picolm/*.h $(INST_INC)/
	$(INSTALL_DATA) $(CORE_LIB) $(INST_LIB)/
	printf '%s\n' 'prefix=$(prefix)' 'libdir=$(libdir)' 'includedir=$(includedir)' '' \
	    'Name: picolm' 'Description: GGUF inference engine library (plugins in $${libdir}/picolm)' \
	    'Version: $(PICOLM_VERSION)' 'Libs: -L$${libdir} -lpicolm $(CORE_LIBS)' 'Cflags: -I$${includedir}' \
	    >$(BUILD)/picolm.pc
	$(INSTALL_DATA) $(BUILD)/picolm.pc $(INST_PC)/

# GNU: install with the programs stripped (plugins too: their dynamic
# symbols and the picolm note survive strip).
install-strip:
	$(MAKE) INSTALL_PROGRAM='$(INSTALL) -m 755 -s --strip-program=$(STRIP)' install

# GNU: remove exactly what install put there, then the picolm directories
# if they are empty; never the shared bin/lib/include directories.
uninstall:
	rm -f $(addprefix $(INST_BIN)/,picolm picolm-server $(notdir $(TOOL_BIN)))
	rm -f $(addprefix $(INST_PLUG)/,$(notdir $(FORMAT_SO) $(SAMPLER_SO) $(BACKEND_SO)))
	rm -f $(addprefix $(INST_CONF)/,$(notdir $(wildcard conf/*.ini)))
	rm -f $(addprefix $(INST_INC)/,$(notdir $(wildcard include/picolm/*.h)))
	rm -f $(INST_LIB)/libpicolm.a $(INST_PC)/picolm.pc
	-rmdir $(INST_PLUG) $(INST_CONF) $(DESTDIR)$(datadir)/picolm $(INST_INC) 2>/dev/null

clean:
	rm -rf $(BUILD)

.PHONY: all test install install-strip uninstall clean
.SECONDARY:
-include mk/*.mk
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

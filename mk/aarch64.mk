# AArch64: NEON backend flags, and `make test-aarch64`: cross-compile with
# aarch64-linux-gnu-gcc into build-aarch64/ and run the tests under
# qemu-user.  Needs tools/ci-aarch64-setup.sh (cross gcc, qemu-user,
# libinih-dev:arm64).  Included from the end of the Makefile.

# NEON kernels are baseline ARMv8-A (ASIMD is mandatory there), so they run
# on a Cortex-A53 (Pi Zero 2 W, Pi 3); only neon_dot.c and gemm_dot.c get
# dotprod, gemm_i8mm.c dotprod + i8mm: their levels (pk_level_dotprod,
# pk_level_i8mm) are used only when the probed CPU has them (HWCAP asimddp,
# HWCAP2 i8mm).
# (32-bit ARM: mk/cross.mk.)
ifneq (,$(findstring aarch64,$(MACHINE)))
ISA_neon = -march=armv8-a/NEON
$(BUILD)/obj/backends/neon/neon_dot.o $(BUILD)/obj/backends/neon/gemm_dot.o: ISA_neon = -march=armv8.2-a+dotprod
$(BUILD)/obj/backends/neon/gemm_i8mm.o: ISA_neon = -march=armv8.2-a+dotprod+i8mm
endif

AARCH64_CC      ?= aarch64-linux-gnu-gcc
AARCH64_BUILD   ?= build-aarch64
AARCH64_SYSROOT ?= /usr/aarch64-linux-gnu
QEMU_AARCH64    ?= qemu-aarch64
# Tests that run under emulation in reasonable time (t_aarch64 adds the
# no-dotprod CPU runs and real inference with the neon backend).  Left out:
# test_threadpool (spinning threads crawl under qemu: minutes), test_cpu
# (qemu-user shows the HOST's /proc/cpuinfo), test_chat, test_kvcache and
# test_logits (minutes each; t_aarch64 covers logits on 32 positions),
# test_plugin_loader and test_quantize (they build or spawn host programs),
# and the other t_*.sh (they run the binaries without the wrapper).
AARCH64_TESTS   ?= test_kernels test_formats test_kquants test_tokenizer test_bpe test_config test_json test_schema test_samplers t_aarch64

# Builds `all` (core, tools, tests, formats, samplers) with the scalar and
# neon backends (the ones that exist).
test-aarch64:
	@command -v $(AARCH64_CC) >/dev/null && command -v $(QEMU_AARCH64) >/dev/null || \
	  { echo "test-aarch64: needs $(AARCH64_CC) and $(QEMU_AARCH64): run tools/ci-aarch64-setup.sh"; exit 1; }
	$(MAKE) -j2 CC=$(AARCH64_CC) BUILD=$(AARCH64_BUILD) BACKENDS="$(notdir $(wildcard backends/scalar backends/neon))" INIH_LIBS=-linih all
	@QEMU_LD_PREFIX=$(AARCH64_SYSROOT) PICOLM_BUILD=$(AARCH64_BUILD) PICOLM_BENCH=0 \
	  PICOLM_TEST_WRAPPER="$(QEMU_AARCH64) -L $(AARCH64_SYSROOT)" \
	  TESTS="$(AARCH64_TESTS)" sh tests/run.sh

.PHONY: test-aarch64

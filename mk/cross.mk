# 32-bit ARM and RISC-V: backend flags, and `make test-armhf` /
# `make test-riscv64`: cross-compile into build-TARGET/ and run the tests
# under qemu-user (as `make test-aarch64`, mk/aarch64.mk).  Setup:
# tools/ci-armhf-setup.sh, tools/ci-riscv64-setup.sh.  Included from the end
# of the Makefile.

# armhf (arm-linux-gnueabihf: Pi 2/3/4/Zero 2 W on a 32-bit OS).  The core
# keeps Debian's armhf baseline (ARMv7-A, VFPv3-D16, no NEON) and probes;
# the NEON kernels need ARMv7-A NEON + VFPv4 (fused multiply-add, f16
# conversions), which the probe reports as "neon" (core/cpu.c).  The AArch64
# intrinsics they use have short equivalents in backends/neon/neon_a32.h.
# neon_dot.c gets ARMv8.2-A dotprod (AArch32 VSDOT), its level used only
# when the probed CPU has it (HWCAP asimddp).
ifneq (,$(findstring arm-,$(MACHINE)))
ISA_neon = -march=armv7-a/NEON -mfpu=neon-vfpv4/ -mfloat-abi=hard/ -mfp16-format=ieee/
$(BUILD)/obj/backends/neon/neon_dot.o $(BUILD)/obj/backends/neon/gemm_dot.o: ISA_neon = -march=armv8.2-a+dotprod -mfpu=neon-fp-armv8 -mfloat-abi=hard -mfp16-format=ieee
endif

# riscv64 (rv64gc: LicheeRV Nano, VisionFive 2, SpacemiT K1 boards...).  The
# rvv kernels use RVV 1.0 intrinsics, which GCC 12 lacks: they are compiled
# by clang (RVV_CC) and linked by $(CC); plugin.c stays on $(CC) with no
# ISA flags, like every descriptor.
ifneq (,$(findstring riscv64,$(MACHINE)))
CC_rvv ?= clang-16 --target=riscv64-linux-gnu
ISA_rvv = -march=rv64gcv/RVV
endif

# $(1) target name, $(2) cross gcc, $(3) qemu-user binary, $(4) sysroot,
# $(5) backends, $(6) setup script, $(7) the tests
define CROSS_TEST
$(1)_BUILD ?= build-$(1)
test-$(1):
	@command -v $(2) >/dev/null && command -v $(3) >/dev/null || \
	  { echo "test-$(1): needs $(2) and $(3): run $(6)"; exit 1; }
	$$(MAKE) -j2 CC=$(2) BUILD=$$($(1)_BUILD) BACKENDS="$(5)" INIH_LIBS=-linih all
	@QEMU_LD_PREFIX=$(4) PICOLM_BUILD=$$($(1)_BUILD) PICOLM_BENCH=0 \
	  PICOLM_TEST_WRAPPER="$(3) -L $(4)" PICOLM_CROSS=$(1) \
	  TESTS="$(7)" sh tests/run.sh
.PHONY: test-$(1)
endef

# As AARCH64_TESTS (mk/aarch64.mk), with t_cross for the backends on more
# emulated CPUs and the logits of every shared model's format.  riscv64
# leaves out test_formats and test_kquants (the format plugins' portable C,
# run natively and under qemu-aarch64/arm): qemu-riscv64 emulates floating
# point in software and takes over 10 minutes for each.
ARMHF_TESTS   ?= test_kernels test_formats test_kquants test_tokenizer test_config test_json test_schema test_samplers t_cross
RISCV64_TESTS ?= test_kernels test_tokenizer test_config test_json test_schema test_samplers t_cross
$(eval $(call CROSS_TEST,armhf,arm-linux-gnueabihf-gcc,qemu-arm,/usr/arm-linux-gnueabihf,scalar neon,tools/ci-armhf-setup.sh,$$(ARMHF_TESTS)))
$(eval $(call CROSS_TEST,riscv64,riscv64-linux-gnu-gcc,qemu-riscv64,/usr/riscv64-linux-gnu,scalar rvv,tools/ci-riscv64-setup.sh,$$(RISCV64_TESTS)))

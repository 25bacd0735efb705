# `make icount`: instructions per weight of the ARM and RISC-V weight
# kernels, counted under qemu-user (tools/icount.sh, table in docs/perf.md).
# Uses the build-TARGET trees of make test-aarch64 / test-armhf /
# test-riscv64 (same compilers and flags) and builds tests/icount/kcount.c
# into each; the x86-64 rows are counted natively by valgrind.
$(BUILD)/icount/kcount: $(BUILD)/obj/tests/icount/kcount.o $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -o $@ $(CORE_LIBS)

icount: $(BUILD)/icount/kcount
	$(MAKE) -j2 CC=aarch64-linux-gnu-gcc BUILD=build-aarch64 BACKENDS="scalar neon" INIH_LIBS=-linih all build-aarch64/icount/kcount
	$(MAKE) -j2 CC=arm-linux-gnueabihf-gcc BUILD=build-armhf BACKENDS="scalar neon" INIH_LIBS=-linih all build-armhf/icount/kcount
	$(MAKE) -j2 CC=riscv64-linux-gnu-gcc BUILD=build-riscv64 BACKENDS="scalar rvv" INIH_LIBS=-linih all build-riscv64/icount/kcount
	sh tools/icount.sh

.PHONY: icount

# Unicode categories for the byte-level BPE pre-tokenizers (core/unicode.c):
# a range table generated at build time from Debian's unicode-data package
# (tools/install-deps.sh installs it) into $(BUILD)/gen/, never committed.
# Every build variant (BUILD=build-asan, build-aarch64, the fuzz objects)
# generates its own copy: the table is plain C data, the same for any target.
UNICODE_DIR   ?= /usr/share/unicode
UNICODE_TABLE  = $(BUILD)/gen/unicode_table.h

$(UNICODE_TABLE): mk/unicode_table.awk
	@test -r $(UNICODE_DIR)/UnicodeData.txt && test -r $(UNICODE_DIR)/PropList.txt || \
	  { echo "$(UNICODE_DIR)/UnicodeData.txt not found: install Debian's unicode-data (sh tools/install-deps.sh)"; exit 1; }
	@mkdir -p $(dir $@)
	awk -f mk/unicode_table.awk $(UNICODE_DIR)/PropList.txt $(UNICODE_DIR)/UnicodeData.txt >$@.tmp && mv $@.tmp $@

$(BUILD)/obj/core/unicode.o: $(UNICODE_TABLE)
$(BUILD)/obj/core/unicode.o: BASE_CFLAGS += -I$(BUILD)/gen
$(BUILD)/fuzz/obj/core/unicode.o: $(UNICODE_TABLE)
$(BUILD)/fuzz/obj/core/unicode.o: FUZZ_CFLAGS += -I$(BUILD)/gen

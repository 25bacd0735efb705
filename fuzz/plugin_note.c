/* libFuzzer harness: the plugin note reader (core/plugins.c,
   registry_read_note), which reads untrusted files in a plugin directory
   before anything is loaded.  Input: the whole file.  Checked: no crash or
   out-of-bounds read (ASan), a message for every refusal, and a note it
   accepts is valid (this ABI, a known kind, a terminated non-empty name). */
#include "common.h"

#include "plugins.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64], why[256] = "";
    int fd = fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0) return 0;
    picolm_note n;
    if (registry_read_note(path, &n, why, sizeof why) == 0) {
        const char *end = memchr(n.name, 0, sizeof n.name);
        FUZZ_ASSERT(n.abi_version == PICOLM_ABI_VERSION && n.kind >= PICOLM_KIND_FORMAT && n.kind <= PICOLM_KIND_SAMPLER &&
                        end && end != n.name, "accepted an invalid note (abi %u kind %u)", n.abi_version, n.kind);
    } else {
        FUZZ_ASSERT(why[0] && memchr(why, 0, sizeof why), "refused without a message");
    }
    close(fd);
    return 0;
}

/* libFuzzer harness: the INI loader (config_load_ini, via a memfd) and the
   command-line parser (config_parse_args, argv split at NUL bytes).  First
   byte: mode.  Checked: no crash, an error always has a message, and an
   accepted INI survives config_dump -> config_load_ini -> config_dump
   unchanged (the dump is documented to be a valid INI of the same
   configuration). */
#include "common.h"
#include "config.h"

static char *dump(const picolm_config *c, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    config_dump(c, f);
    fclose(f);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static picolm_config c, c2; /* large: static */
    char err[1024] = "";
    config_defaults(&c);
    if (data[0] & 1) {
        /* argv mode */
        char *buf = malloc(size);
        memcpy(buf, data + 1, size - 1);
        buf[size - 1] = 0;
        char *argv[65];
        int argc = 0;
        argv[argc++] = "picolm";
        for (size_t i = 0; i < size - 1 && argc < 64; ) {
            argv[argc++] = buf + i;
            i += strlen(buf + i) + 1;
        }
        argv[argc] = NULL;
        config_find_ini(argc, argv);
        if (config_parse_args(&c, argc, argv, err, sizeof err)) FUZZ_ASSERT(err[0], "argv rejected without a message");
        free(buf);
        return 0;
    }
    char path[64];
    int fd = fuzz_memfd(data + 1, size - 1, path, sizeof path);
    if (fd < 0) return 0;
    if (config_load_ini(&c, path, err, sizeof err)) {
        FUZZ_ASSERT(err[0], "INI rejected without a message");
        close(fd);
        return 0;
    }
    close(fd);
    size_t l1 = 0, l2 = 0;
    char *d1 = dump(&c, &l1);
    if (!d1) return 0;
    fd = fuzz_memfd((const uint8_t *)d1, l1, path, sizeof path);
    config_defaults(&c2);
    int r = config_load_ini(&c2, path, err, sizeof err);
    FUZZ_ASSERT(r == 0, "config_dump output does not load back: %s\n--- dump ---\n%s", err, d1);
    close(fd);
    char *d2 = dump(&c2, &l2);
    /* the first line(s) may name the source file: compare from the first section */
    const char *s1 = d1 ? strstr(d1, "\n[") : NULL, *s2 = d2 ? strstr(d2, "\n[") : NULL;
    FUZZ_ASSERT(s1 && s2 && !strcmp(s1, s2), "dump -> load -> dump changed the configuration:\n%s\n--- vs ---\n%s", d1, d2);
    free(d1);
    free(d2);
    return 0;
}

/* Shared helpers for the libFuzzer harnesses in fuzz/. */
#ifndef PICOLM_FUZZ_COMMON_H
#define PICOLM_FUZZ_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The input as a file for loaders that only take a path: an anonymous
   memfd, reached as /proc/self/fd/N.  Returns the fd (close it) or -1. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t pathlen) {
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) { close(fd); return -1; }
        off += (size_t)w;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

/* A harness-detected violation: crash loudly so libFuzzer keeps the input. */
#define FUZZ_ASSERT(c, ...) do { if (!(c)) { fprintf(stderr, "FUZZ_ASSERT %s:%d: %s: ", __FILE__, __LINE__, #c); \
    fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); abort(); } } while (0)
#endif

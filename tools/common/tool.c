/* Small helpers every tool shares: see tool.h. */
#include "tool.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

int tool_fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double tool_now(void) { return clock_s(CLOCK_MONOTONIC); }
double tool_thread_now(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

int tool_same_file(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

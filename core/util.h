/* Small helpers every part of the core uses. */
#ifndef PICOLM_UTIL_H
#define PICOLM_UTIL_H
#include <stddef.h>

/* Format a message into err (when err/errlen allow) and return -1, so that
   error paths read `return pl_fail(err, errlen, "...", ...);`. */
int pl_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Monotonic clock in seconds. */
double pl_now(void);
#endif

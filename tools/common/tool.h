/*
 * Small helpers every tool shares: messages into an error buffer, clocks,
 * and the check that an output is not one of the inputs.
 */
#ifndef PICOLM_TOOL_H
#define PICOLM_TOOL_H
#include <stddef.h>

/* Format a message into err (when err/errlen allow) and return -1, so that
   error paths read `return tool_fail(err, errlen, "...", ...);`. */
int tool_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Monotonic clock in seconds. */
double tool_now(void);
/* This thread's CPU time in seconds: timings on a shared machine, where the
   time other jobs take from the core must not count. */
double tool_thread_now(void);

/* Nonzero when both paths exist and are the same file (device and inode:
   another spelling, a symlink, a hard link): a tool refuses to write its
   output over one of its inputs. */
int tool_same_file(const char *a, const char *b);

#endif

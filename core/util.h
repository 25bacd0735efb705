/* Small helpers every part of the core uses. */
#ifndef PICOLM_UTIL_H
#define PICOLM_UTIL_H
#include <stddef.h>

/* Format a message into err (when err/errlen allow) and return -1, so that
   error paths read `return pl_fail(err, errlen, "...", ...);`. */
int pl_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A message for the library user's log sink (picolm_log_set; none: the
   message is dropped, the library never prints by itself).  level: enum
   picolm_log_level. */
void pl_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Monotonic clock in seconds. */
double pl_now(void);

/* This thread's CPU time in seconds: for timings on a shared machine, where
   the time other jobs take from the core must not count. */
double pl_thread_now(void);

/* Atomic file replacement: write to a temporary file beside `path`, then
   flush, fsync and rename over it.  A reader never sees a partial file.
   The temporary file has no name until commit where the system allows it
   (O_TMPFILE), so a process killed mid-way leaves nothing behind.  An
   existing `path` that is not a regular file (a device, a FIFO) is refused;
   a symbolic link is followed (its target is replaced, the link stays). */
#include <stdio.h>
typedef struct pl_atomic_file {
    FILE *f;            /* write here between open and commit */
    char tmp[4096];     /* the named temporary file; "" when unnamed, committed or aborted */
    char path[4096];
    int unnamed;        /* f is an O_TMPFILE file, linked in at commit */
} pl_atomic_file;
int pl_atomic_open(pl_atomic_file *a, const char *path, char *err, size_t errlen);
int pl_atomic_commit(pl_atomic_file *a, char *err, size_t errlen); /* aborts on failure */
void pl_atomic_abort(pl_atomic_file *a);                            /* no-op after commit */
/* A growing NUL-terminated byte buffer (zero-initialise; free(p)).  After a
   failed allocation oom is set and further appends do nothing. */
typedef struct pl_sbuf {
    char *p;
    size_t n, cap;
    int oom;
} pl_sbuf;
void pl_sbuf_add(pl_sbuf *b, const char *s, size_t n);
#endif /* PICOLM_UTIL_H */

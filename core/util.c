#include "util.h"

#include "picolm/picolm.h"

#include <stdarg.h>
#include <stdio.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int pl_fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

double pl_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

double pl_thread_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The file to replace: path, or the target of a symbolic link; refused
   when it exists and is not a regular file. */
static int atomic_target(pl_atomic_file *a, const char *path, char *err, size_t errlen) {
    struct stat st;
    char real[PATH_MAX];
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        if (!realpath(path, real)) return pl_fail(err, errlen, "%s is a symbolic link to a missing file: refusing to write through it", path);
        path = real;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return pl_fail(err, errlen, "%s exists and is not a regular file (%s): refusing to replace it", path,
                       S_ISDIR(st.st_mode) ? "a directory" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" :
                       S_ISFIFO(st.st_mode) ? "a FIFO" : "a socket or other special file");
    if (strlen(path) + 32 > sizeof a->tmp) return pl_fail(err, errlen, "%s: path too long", path);
    snprintf(a->path, sizeof a->path, "%s", path);
    return 0;
}

/* An unnamed file in path's directory (O_TMPFILE), or -1 where unsupported. */
static int open_unnamed(const char *path) {
#ifdef O_TMPFILE
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    return open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666); /* the usual 0666 & ~umask */
#else
    (void)path;
    return -1;
#endif
}

int pl_atomic_open(pl_atomic_file *a, const char *path, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    if (atomic_target(a, path, err, errlen)) return -1;
    path = a->path;
    int fd = open_unnamed(path);
    if (fd >= 0) {
        a->unnamed = 1;
    } else {
        snprintf(a->tmp, sizeof a->tmp, "%.4000s.tmp.XXXXXX", path); /* same directory: rename is atomic */
        fd = mkstemp(a->tmp);
        if (fd < 0) {
            a->tmp[0] = 0;
            return pl_fail(err, errlen, "cannot create a temporary file next to %s: %s", path, strerror(errno));
        }
        const mode_t um = umask(0); /* mkstemp makes 0600; give the file the usual 0666 & ~umask */
        umask(um);
        if (fchmod(fd, 0666 & ~um)) { /* keep 0600: not fatal */ }
    }
    a->f = fdopen(fd, "wb");
    if (!a->f) {
        close(fd);
        pl_atomic_abort(a);
        return pl_fail(err, errlen, "cannot write %s: %s", path, strerror(errno));
    }
    return 0;
}

/* Give the unnamed file a temporary name beside the target (then renamed
   over it: linkat cannot replace). */
static int name_unnamed(pl_atomic_file *a) {
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fileno(a->f));
    for (unsigned i = 0; i < 100; i++) {
        snprintf(a->tmp, sizeof a->tmp, "%.4000s.tmp.%ld.%u", a->path, (long)getpid(), i);
        if (!linkat(AT_FDCWD, proc, AT_FDCWD, a->tmp, AT_SYMLINK_FOLLOW) ||
            !linkat(fileno(a->f), "", AT_FDCWD, a->tmp, AT_EMPTY_PATH))
            return 0;
        if (errno != EEXIST) break;
    }
    a->tmp[0] = 0;
    return -1;
}

int pl_atomic_commit(pl_atomic_file *a, char *err, size_t errlen) {
    int bad = fflush(a->f) || fsync(fileno(a->f));
    if (bad) {
        pl_fail(err, errlen, "write error on %s: %s", a->unnamed ? a->path : a->tmp, strerror(errno ? errno : EIO));
        pl_atomic_abort(a);
        return -1;
    }
    if (a->unnamed && name_unnamed(a)) {
        pl_fail(err, errlen, "cannot link the new %s into its directory: %s", a->path, strerror(errno));
        pl_atomic_abort(a);
        return -1;
    }
    bad = fclose(a->f) != 0;
    a->f = NULL;
    if (bad) {
        pl_fail(err, errlen, "write error on %s: %s", a->tmp, strerror(errno ? errno : EIO));
        pl_atomic_abort(a);
        return -1;
    }
    if (rename(a->tmp, a->path)) {
        pl_fail(err, errlen, "cannot rename %s to %s: %s", a->tmp, a->path, strerror(errno));
        pl_atomic_abort(a);
        return -1;
    }
    a->tmp[0] = 0;
    return 0;
}

void pl_atomic_abort(pl_atomic_file *a) {
    if (a->f) fclose(a->f);
    a->f = NULL;
    if (a->tmp[0]) unlink(a->tmp);
    a->tmp[0] = 0;
}

void pl_sbuf_add(pl_sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->oom = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* ---- the log sink ---- */
static picolm_log_fn log_fn;
static void *log_ud;

void picolm_log_set(picolm_log_fn fn, void *ud) {
    log_fn = fn;
    log_ud = ud;
}

void picolm_log_stderr(int level, const char *msg, void *ud) {
    (void)ud;
    if (level > PICOLM_LOG_INFO && !getenv("PICOLM_DEBUG")) return;
    fprintf(stderr, "picolm: %s\n", msg);
}

void pl_log(int level, const char *fmt, ...) {
    if (!log_fn) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_fn(level, msg, log_ud);
}

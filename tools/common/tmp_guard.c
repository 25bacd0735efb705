#include "tmp_guard.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char g_tmp[4096]; /* the guarded file while it exists: "" otherwise */
static int g_installed;
static const int g_sigs[] = {SIGHUP, SIGINT, SIGTERM, SIGXFSZ};

static void remove_tmp_and_die(int sig) {
    if (g_tmp[0]) unlink(g_tmp);
    signal(sig, SIG_DFL);
    raise(sig);
}

void tmp_guard_hold(int on) {
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof g_sigs / sizeof *g_sigs; i++) sigaddset(&set, g_sigs[i]);
    sigprocmask(on ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

void tmp_guard_set(const char *path) {
    if (!g_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = remove_tmp_and_die;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < sizeof g_sigs / sizeof *g_sigs; i++) {
            struct sigaction old;
            /* a signal ignored by whoever started us (nohup, trap '' XFSZ) stays ignored */
            if (sigaction(g_sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(g_sigs[i], &sa, NULL);
        }
        g_installed = 1;
    }
    snprintf(g_tmp, sizeof g_tmp, "%s", path ? path : "");
}

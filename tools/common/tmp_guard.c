#include "tmp_guard.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TMP_GUARD_MAX 4
static char g_tmp[TMP_GUARD_MAX][4096]; /* the guarded files while they exist: "" otherwise */
static int g_installed;
static const int g_sigs[] = {SIGHUP, SIGINT, SIGTERM, SIGXFSZ};

static void remove_tmp_and_die(int sig) {
    for (int i = 0; i < TMP_GUARD_MAX; i++)
        if (g_tmp[i][0]) unlink(g_tmp[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void tmp_guard_hold(int on) {
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof g_sigs / sizeof *g_sigs; i++) sigaddset(&set, g_sigs[i]);
    sigprocmask(on ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

static void install(void) {
    if (g_installed) return;
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

int tmp_guard_add(const char *path) {
    install();
    for (int i = 0; i < TMP_GUARD_MAX; i++)
        if (!g_tmp[i][0]) {
            snprintf(g_tmp[i], sizeof g_tmp[i], "%s", path);
            return 0;
        }
    return -1;
}

void tmp_guard_set(const char *path) {
    for (int i = 0; i < TMP_GUARD_MAX; i++) g_tmp[i][0] = 0;
    if (path && *path) tmp_guard_add(path);
    else install();
}

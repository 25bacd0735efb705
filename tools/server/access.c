/* Host, Origin and Content-Type checks: see access.h. */
#include "access.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The name part of a Host value ("name:port", "[v6]:port") into buf. */
static const char *host_name(const char *host, char *buf, size_t n) {
    size_t len;
    if (host[0] == '[') {
        const char *end = strchr(host, ']');
        len = end ? (size_t)(end - host) + 1 : strlen(host);
    } else {
        len = strcspn(host, ":");
    }
    if (len >= n) return NULL;
    memcpy(buf, host, len);
    buf[len] = 0;
    return buf;
}

static int ends_with(const char *s, const char *suffix) {
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcasecmp(s + a - b, suffix);
}

int access_host_ok(const char *host, const char *bind, const char *const *allow, int n_allow) {
    if (!host) return 1; /* no browser omits it */
    char name[256], v6[64];
    unsigned char addr[16];
    if (!host_name(host, name, sizeof name) || !name[0]) return 0;
    /* an IP literal cannot be rebound to another address */
    if (inet_pton(AF_INET, name, addr) == 1) return 1;
    if (name[0] == '[' && strlen(name) - 2 < sizeof v6) {
        snprintf(v6, sizeof v6, "%.*s", (int)strlen(name) - 2, name + 1);
        if (inet_pton(AF_INET6, v6, addr) == 1) return 1;
    }
    if (!strcasecmp(name, "localhost") || ends_with(name, ".localhost")) return 1;
    if (bind && !strcasecmp(name, bind)) return 1;
    for (int i = 0; i < n_allow; i++) {
        const char *a = allow[i];
        if (!strcmp(a, "*") || !strcasecmp(name, a) || (a[0] == '.' && ends_with(name, a))) return 1;
    }
    return 0;
}

int access_origin(const char *origin, const char *host, const char *const *cors, int n_cors) {
    if (!origin) return 0;
    /* the server's own page: http://HOST as the client named it */
    if (host && !strncasecmp(origin, "http://", 7) && !strcasecmp(origin + 7, host)) return 0;
    for (int i = 0; i < n_cors; i++)
        if (!strcmp(cors[i], "*") || !strcasecmp(origin, cors[i])) return 1;
    return -1;
}

int access_json_type(const char *t) {
    if (!t) return 0;
    while (*t == ' ' || *t == '\t') t++;
    if (strncasecmp(t, "application/json", 16)) return 0;
    t += 16;
    while (*t == ' ' || *t == '\t') t++;
    return !*t || *t == ';';
}

/*
 * Which browsers' requests picolm-server answers.  A page on another site
 * can make a browser send requests to a server on this machine ("simple"
 * cross-site POSTs need no preflight) and, through DNS rebinding, read the
 * replies under a name of its own.  So: the Host header must name this
 * server (an IP literal, localhost, the bound name or --allow-host), a
 * request with an Origin must come from the server's own page or a
 * --cors origin, and a request body must be application/json (a type no
 * cross-site form or simple request can send).
 */
#ifndef PICOLM_SERVER_ACCESS_H
#define PICOLM_SERVER_ACCESS_H

/* 1 when the Host header (NULL: none, as HTTP/1.0 may send) names this
   server: bind is --host, allow the --allow-host names ("*": any, ".x":
   x's subdomains). */
int access_host_ok(const char *host, const char *bind, const char *const *allow, int n_allow);

/* The Origin header against the Host and the --cors origins: 0 same origin
   or none (not a cross-site request), 1 allowed cross-site (the reply
   carries CORS headers), -1 refused. */
int access_origin(const char *origin, const char *host, const char *const *cors, int n_cors);

/* 1 when a Content-Type header is application/json (parameters allowed). */
int access_json_type(const char *content_type);
#endif

/*
 * A small JSON document model for the chat templates' tool calls: parse
 * (RFC 8259, UTF-8 checked, keys in order) and write back the way the
 * templates' `tojson` does in llama.cpp's Jinja engine (", " and ": "
 * separators, or "," and newlines with an indent; strings with only ",
 * \ and control characters escaped, other characters as UTF-8; integers as
 * written, other numbers as C's %g).
 */
#ifndef PICOLM_JSONDOC_H
#define PICOLM_JSONDOC_H
#include <stddef.h>
#include <stdint.h>

#include "util.h"

enum jd_type { JD_NULL, JD_FALSE, JD_TRUE, JD_INT, JD_FLOAT, JD_STR, JD_ARR, JD_OBJ };

typedef struct jd_value {
    int type;
    int64_t i;              /* JD_INT */
    double f;               /* JD_FLOAT */
    char *s;                /* JD_STR: decoded UTF-8; numbers: the text as written (NUL-terminated, len bytes) */
    size_t len;
    struct jd_value *items; /* JD_ARR, JD_OBJ: n values */
    char **keys;            /* JD_OBJ: their keys (NUL-terminated, key_len bytes) */
    size_t *key_len;
    size_t n;
} jd_value;

/* One JSON value (blanks around it allowed): a tree to free with jd_free,
   or NULL with a message (what and where). */
jd_value *jd_parse(const char *text, size_t len, char *err, size_t errlen);
void jd_free(jd_value *v);
/* The member named key of an object (NULL: none, or not an object). */
const jd_value *jd_get(const jd_value *obj, const char *key);

/* v as Jinja's tojson writes it: indent < 0 on one line, else newlines and
   indent spaces per level.  compact: "," and ":" (no blanks) and numbers
   as written (exact, for a schema). */
void jd_write(pl_sbuf *b, const jd_value *v, int indent, int compact);
/* A JSON string literal of s[0..n), escaped as jd_write escapes. */
void jd_write_string(pl_sbuf *b, const char *s, size_t n);
/* The same for text that may not be valid UTF-8 (a model's): each invalid
   byte becomes U+FFFD. */
void jd_write_text(pl_sbuf *b, const char *s, size_t n);
#endif

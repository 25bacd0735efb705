/* json: PROCESS, constrain generation to one RFC 8259 JSON document (--json).
 *
 * The top-level value must be an object or an array (so the end of the
 * document is unambiguous), an object alone with json_object = 1 (OpenAI's
 * response_format json_object); whitespace may precede it, nothing may
 * follow it.
 * A candidate survives only if every byte of its decoded piece keeps the
 * output a valid JSON prefix: the automaton of json_grammar.h (shared with
 * json_schema) is run over the piece from the current state.
 *
 * EOS is allowed only once the document is complete, and then it is the only
 * choice.  Budget: with n_remaining tokens left, a token is kept only if the
 * shortest byte sequence that completes the document afterwards fits in the
 * remaining n_remaining - 1 tokens, one token per byte.  That is feasible
 * because create() checks the vocabulary has single-byte tokens for every
 * byte such a shortest completion uses ({ } ] " : 0, the letters of
 * true/false/null, UTF-8 continuation bytes), so by induction a document
 * can always be closed in time.
 *
 * Which tokens are generated: accept() after apply() is the chosen token;
 * an accept() with no apply() before it is a prompt token and restarts the
 * document (so a new turn of a chat starts a new document).
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_grammar.h"
#include "picolm/plugin.h"

typedef struct json_state {
    const picolm_vocab *vocab;
    int32_t n_vocab, eos;
    int utf8_ok;
    uint8_t *usable;     /* per token: may appear in a document at all */
    jg_state init;         /* an empty document */
    jg_state cur;          /* the document so far */
    int pending;         /* apply() ran since the last accept() */
} json_state;

static void json_destroy(void *state) {
    json_state *j = state;
    if (!j) return;
    free(j->usable);
    free(j);
}

static int json_create(const picolm_sampler_init *init, void **state, char *err, size_t errlen) {
    const picolm_vocab *v = init->vocab;
    if (!v || v->n_vocab <= 0 || !v->piece || !v->piece_len) { snprintf(err, errlen, "json: no vocabulary"); return 1; }
    json_state *j = calloc(1, sizeof *j);
    if (!j) { snprintf(err, errlen, "json: out of memory"); return 1; }
    j->vocab = v;
    j->n_vocab = v->n_vocab;
    j->eos = v->eos_id;
    j->init = jg_document;
    for (int i = 0; i < init->n_params; i++)
        if (!strcmp(init->params[i].key, "json_object")) j->init.obj = atoi(init->params[i].value) != 0;
    j->cur = j->init;
    j->usable = calloc((size_t)v->n_vocab, 1);
    if (!j->usable) { snprintf(err, errlen, "json: out of memory"); json_destroy(j); return 1; }
    int single[256] = {0};
    for (int32_t t = 0; t < v->n_vocab; t++) {
        const int32_t type = v->token_type ? v->token_type[t] : 1;
        /* control, unknown and unused tokens never print as JSON text */
        if (t == v->eos_id || t == v->bos_id || type == 2 || type == 3 || type == 5 || !v->piece_len[t] || !v->piece[t]) continue;
        j->usable[t] = 1;
        if (v->piece_len[t] == 1) single[(unsigned char)v->piece[t][0]] = 1;
    }
    const char *need = JG_CLOSING_BYTES;
    for (const char *c = need; *c; c++)
        if (!single[(unsigned char)*c]) {
            snprintf(err, errlen, "json: the vocabulary has no single-character token for '%c', needed to close documents within the token budget", *c);
            json_destroy(j);
            return 1;
        }
    j->utf8_ok = 1;
    for (int c = 0x80; c <= 0xBF; c++) j->utf8_ok &= single[c];
    *state = j;
    return 0;
}

static int run_piece(jg_state *s, const char *p, uint32_t len, int utf8_ok) {
    for (uint32_t i = 0; i < len; i++)
        if (jg_step(s, (unsigned char)p[i], utf8_ok) != 1) return 0;
    return 1;
}

static int json_apply(void *state, picolm_candidates *c, char *err, size_t errlen) {
    json_state *j = state;
    if (j->cur.mode == JG_ERROR) { snprintf(err, errlen, "json: the output so far is not valid JSON"); return 1; }
    size_t n = 0;
    if (j->cur.mode == JG_DONE) { /* complete: force EOS */
        for (size_t i = 0; i < c->size; i++)
            if (c->data[i].id == j->eos && j->eos >= 0) c->data[n++] = c->data[i];
        if (!n) { snprintf(err, errlen, "json: the document is complete but EOS is not available"); return 1; }
        c->data[0].logit = 0; /* keep it selectable whatever its logit was */
        c->size = 1;
        c->sorted = 1;
        c->has_p = 0;
        j->pending = 1;
        return 0;
    }
    /* Which first bytes can follow: rejects most tokens in one lookup. */
    uint8_t first_ok[256];
    for (unsigned b = 0; b < 256; b++) {
        jg_state t = j->cur;
        first_ok[b] = (uint8_t)(jg_step(&t, b, j->utf8_ok) == 1);
    }
    const int budget = c->n_remaining < 0 ? INT_MAX : c->n_remaining - 1; /* tokens left after this one */
    const char *const *piece = j->vocab->piece;
    const uint32_t *plen = j->vocab->piece_len;
    for (size_t i = 0; i < c->size; i++) {
        const int32_t id = c->data[i].id;
        if (id < 0 || id >= j->n_vocab || !j->usable[id] || c->data[i].logit == -INFINITY) continue;
        if (!first_ok[(unsigned char)piece[id][0]]) continue;
        jg_state t = j->cur;
        if (!run_piece(&t, piece[id], plen[id], j->utf8_ok)) continue;
        if (jg_closing_cost(&t) > budget) continue;
        c->data[n++] = c->data[i];
    }
    if (!n) {
        snprintf(err, errlen, "json: no candidate token can continue the document%s",
                 c->n_remaining >= 0 ? " within the remaining token budget" : "");
        return 1;
    }
    c->size = n;
    c->has_p = 0;
    j->pending = 1;
    return 0;
}

static void json_accept(void *state, int32_t tok) {
    json_state *j = state;
    if (!j->pending) { /* a prompt token: the next generated text is a new document */
        j->cur = j->init;
        return;
    }
    j->pending = 0;
    if (j->cur.mode == JG_DONE) {
        /* only EOS was allowed: anything else is the next prompt's first token */
        if (tok != j->eos) j->cur = j->init;
        return;
    }
    if (tok < 0 || tok >= j->n_vocab || !j->usable[tok] ||
        !run_piece(&j->cur, j->vocab->piece[tok], j->vocab->piece_len[tok], j->utf8_ok))
        j->cur.mode = JG_ERROR;
}

static void json_reset(void *state) {
    json_state *j = state;
    j->cur = j->init;
    j->pending = 0;
}

static const picolm_param_desc json_params[] = {
    {"json_object", PICOLM_PARAM_INT, "0", 0, 1, "object", "1: the document must be an object, not an array"},
    {0},
};

PICOLM_DEFINE_SAMPLER("json", "1.0", "constrain output to one JSON object or array (--json)",
                      PICOLM_SAMPLER_PROCESS,
                      .params = json_params, .create = json_create, .destroy = json_destroy,
                      .apply = json_apply, .accept = json_accept, .reset = json_reset);

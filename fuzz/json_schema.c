/* libFuzzer harness: the JSON Schema logit processor (plugins/json_schema.c,
   compiled in).  Input: [flags][extra budget][n_extra], n_extra tokens as
   [len 1..16][bytes], the schema's text up to a NUL byte, then one byte per
   generation step choosing among the surviving candidates.  Vocabulary: the
   256 single bytes (ids 0..255; with flag bit 0 the bytes 0x80..0xBF are
   marked unused), EOS = 256, the extra tokens.
   Checked: create() refuses with a message or compiles; then, with the
   budget at its min_budget() plus 0..63, apply() never fails, the document
   is complete when the budget runs out or EOS is chosen, the output is
   valid JSON by an independent validator (grammar.h), and it satisfies the
   schema by the plugin's own schema checker (satisfies(): the code that
   filters enum values, not the automaton).  Flag bit 2: a lazy document
   after the trigger "<T>" (json_schema_trigger), bit 3: an optional one
   (json_schema_optional): the text before it is free, and once it has
   begun the same checks hold for it. */
#include "common.h"
#include "grammar.h"

#include "../plugins/json_schema.c"

#define NV_MAX FV_MAX

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    const uint8_t flags = data[0], extra_budget = data[1] % 64;
    size_t pos = 3;
    static fvocab fv;
    fuzz_vocab(&fv, data, size, &pos, data[2] % 32, flags & 1);
    const int nv = fv.v.n_vocab;
    const char *const *piece = fv.piece;
    const uint32_t *plen = fv.plen;
    const uint8_t *nul = memchr(data + pos, 0, size - pos);
    const size_t slen = nul ? (size_t)(nul - (data + pos)) : size - pos;
    char *schema = malloc(slen + 1);
    memcpy(schema, data + pos, slen);
    schema[slen] = 0;
    pos += slen + (nul != NULL);

    const picolm_vocab voc = fv.v;
    const int lazy = (flags >> 2) & 3; /* 1 trigger, 2 optional, 3 both: refused */
    const picolm_param prm[2] = {{"json_schema", schema}, lazy & 1 ? (picolm_param){"json_schema_trigger", "<T>"} : (picolm_param){"json_schema_optional", "1"}};
    const picolm_sampler_init init = {.struct_size = sizeof init, .vocab = &voc, .params = prm, .n_params = lazy ? 2 : 1};
    const picolm_sampler_init both = {.struct_size = sizeof init, .vocab = &voc,
                                      .params = (const picolm_param[3]){prm[0], {"json_schema_trigger", "<T>"}, {"json_schema_optional", "1"}}, .n_params = 3};
    void *st = NULL;
    char err[512] = "";
    if (picolm_sampler_vtable_.create(lazy == 3 ? &both : &init, &st, err, sizeof err)) {
        FUZZ_ASSERT(!strncmp(err, "json_schema: ", 13), "a refusal without a message: '%s'", err);
        free(schema);
        return 0;
    }
    const int budget0 = picolm_sampler_vtable_.min_budget(st) + extra_budget;
    FUZZ_ASSERT(budget0 > extra_budget, "min_budget %d", budget0 - extra_budget);
    picolm_token_data cand[NV_MAX];
    static unsigned char out[64 * 16 + 1];
    size_t out_len = 0, doc_at = 0; /* where the document starts in out */
    int budget = budget0, done = 0;
    if (flags & 2) picolm_sampler_vtable_.accept(st, 'x'); /* a prompt token: restarts, harmless */
    for (; budget > 0 && !done && out_len + 16 < sizeof out; budget--) {
        for (int i = 0; i < nv; i++) cand[i] = (picolm_token_data){i, (float)((i * 37 + budget) % 11), 0};
        picolm_candidates c = {cand, (size_t)nv, 0, 0, -1, budget};
        FUZZ_ASSERT(!picolm_sampler_vtable_.apply(st, &c, err, sizeof err), "apply failed with %d of %d tokens left: %s", budget, budget0, err);
        const int32_t id = c.data[pos < size ? data[pos++] % c.size : 0].id;
        FUZZ_ASSERT(id >= 0 && id < nv, "survivor id %d", id);
        const int was_free = ((const sj_state *)st)->free_text;
        picolm_sampler_vtable_.accept(st, id);
        if (id == 256) done = 1;
        else memcpy(out + out_len, piece[id], plen[id]), out_len += plen[id];
        const sj_state *s = st;
        if (was_free && !s->free_text) { /* the document began in this token */
            const unsigned char *t = lazy == 1 ? memmem(out, out_len, "<T>", 3) : NULL;
            FUZZ_ASSERT(lazy != 1 || t, "a document without its trigger: %.*s", (int)out_len, out);
            doc_at = t ? (size_t)(t - out) + 3 : out_len - plen[id];
        }
        done |= !s->free_text && all_done(st);
    }
    if (!done && budget > 0) goto end; /* out of room in out[]: nothing to judge */
    if (((const sj_state *)st)->free_text) goto end; /* free text only: nothing to judge */
    memmove(out, out + doc_at, out_len - doc_at);
    out_len -= doc_at;
    const sj_state *s = st;
    for (int i = 0; i < s->n_cur; i++) done |= thread_cost(&s->g, &s->cur[i]) == 0; /* a number that may end here */
    FUZZ_ASSERT(done, "budget of %d tokens ran out before the document closed: %.*s", budget0, (int)out_len, out);
    FUZZ_ASSERT(valid_json(out, out_len, 1), "not valid JSON: %.*s", (int)out_len, out);
    {   /* the schema's meaning, by the plugin's own checker over parsed values */
        arena ar = {0};
        jv doc, root;
        char e2[256];
        if (!parse_json((const char *)out, out_len, &ar, &doc, e2, sizeof e2) && !parse_json(schema, slen, &ar, &root, e2, sizeof e2)) {
            const cc c = {.root = &root};
            FUZZ_ASSERT(satisfies(&c, &doc, &root, 0), "output does not satisfy the schema (%zu bytes): %.*s", out_len, (int)out_len, out);
        } else {
            /* valid JSON the schema parser refuses, only from values of any shape */
            FUZZ_ASSERT(strstr(e2, "duplicate key") || strstr(e2, "surrogate"), "output not parsed back: %s: %.*s", e2, (int)out_len, out);
        }
        ar_free(&ar);
    }
end:
    picolm_sampler_vtable_.destroy(st);
    free(schema);
    return 0;
}

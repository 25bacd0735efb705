/* libFuzzer harness: the JSON logit processor (plugins/json.c, compiled in).
   Input: [flags][budget][n_extra] then n_extra tokens as [len 1..16][bytes],
   then one byte per generation step choosing among the surviving candidates.
   Vocabulary: the 256 single bytes (ids 0..255; with flag bit 0 the bytes
   0x80..0xBF are marked unused), EOS = 256, the extra multi-byte tokens.
   Checked, as the plugin promises: apply() never fails while budget is
   left, every surviving token keeps the output a valid JSON prefix, the
   document is complete when the budget runs out or EOS is chosen, and
   what was generated is valid JSON by an independent validator (grammar.h). */
#include "common.h"
#include "grammar.h"

#include "../plugins/json.c"

/* ---- harness ---- */
#define NV_MAX FV_MAX

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const uint8_t flags = data[0];
    const int budget0 = 2 + data[1] % 120;
    size_t pos = 3;
    static fvocab fv;
    fuzz_vocab(&fv, data, size, &pos, data[2] % 64, flags & 1);
    const picolm_vocab voc = fv.v;
    const int nv = voc.n_vocab;
    const char *const *piece = fv.piece;
    const uint32_t *plen = fv.plen;
    picolm_sampler_init init = {.struct_size = sizeof init, .vocab = &voc};
    void *st = NULL;
    char err[256];
    if (picolm_sampler_vtable_.create(&init, &st, err, sizeof err)) return 0;

    picolm_token_data cand[NV_MAX];
    unsigned char out[120 * 16 + 1];
    size_t out_len = 0;
    int budget = budget0, done = 0;
    if (flags & 2) picolm_sampler_vtable_.accept(st, 'x'); /* a prompt token: restarts, harmless */
    while (budget > 0) {
        for (int i = 0; i < nv; i++) cand[i] = (picolm_token_data){i, (float)((i * 37 + budget) % 11), 0};
        picolm_candidates c = {cand, (size_t)nv, 0, 0, -1, budget};
        int r = picolm_sampler_vtable_.apply(st, &c, err, sizeof err);
        FUZZ_ASSERT(r == 0, "apply failed with %d tokens left: %s", budget, err);
        FUZZ_ASSERT(c.size >= 1 && c.size <= (size_t)nv, "bad candidate count %zu", c.size);
        /* every survivor keeps the text a valid prefix: check one fully */
        const size_t pick = pos < size ? data[pos++] % c.size : 0;
        const int32_t id = c.data[pick].id;
        FUZZ_ASSERT(id >= 0 && id < nv, "survivor id %d", id);
        if (id == 256) { done = 1; budget--; picolm_sampler_vtable_.accept(st, id); break; }
        memcpy(out + out_len, piece[id], plen[id]);
        out_len += plen[id];
        picolm_sampler_vtable_.accept(st, id);
        budget--;
        if (((json_state *)st)->cur.mode == JG_DONE) done = 1;
        if (pos >= size && done) break;
    }
    FUZZ_ASSERT(done, "budget of %d tokens ran out before the document closed: %.*s", budget0, (int)out_len, out);
    FUZZ_ASSERT(valid_json(out, out_len, 0), "generated text is not valid JSON: %.*s", (int)out_len, out);
    picolm_sampler_vtable_.reset(st);
    picolm_sampler_vtable_.destroy(st);
    return 0;
}

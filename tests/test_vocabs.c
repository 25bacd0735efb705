/* The vocabularies of the model families made by tools/oracle
   (tests/data/families, docs/testdata.md): llama.cpp's tokenizer vectors
   for each (.inp/.out beside the file), token for token; and the chat
   renders of the shared conversation with each family's template, byte
   for byte. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "check.h"
#include "tokfiles.h"

#define FAM_DIR "tests/data/families"

struct vec_ctx { const tokenizer *t; int fails, total; };

static void vec_case(void *vctx, int idx, const char *in, size_t inl, const char *out, size_t outl) {
    struct vec_ctx *c = vctx;
    int n;
    int32_t *ids = encode(c->t, in, inl, 0, 0, &n);
    char why[128] = "encode failed";
    c->total++;
    if (n < 0 || !ids_equal_line(ids, n, out, outl, why, sizeof why)) {
        c->fails++;
        char pv[64];
        size_t k = 0;
        for (size_t i = 0; i < inl && k + 1 < sizeof pv; i++) pv[k++] = in[i] == '\n' ? '|' : in[i];
        pv[k] = 0;
        printf("  mismatch: case %d \"%s\": %s\n", idx, pv, why);
    }
    free(ids);
}

/* every MODEL.gguf with MODEL.gguf.inp and .out beside it */
static void vectors(void) {
    DIR *d = opendir(FAM_DIR);
    if (!d) { SKIP(FAM_DIR " is missing"); return; }
    int files = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        const size_t l = strlen(de->d_name);
        if (l < 9 || strcmp(de->d_name + l - 9, ".gguf.inp")) continue;
        char p[1100], q[1100], g[1024];
        snprintf(g, sizeof g, FAM_DIR "/%.*s", (int)(l - 4), de->d_name);
        snprintf(p, sizeof p, "%s.inp", g);
        snprintf(q, sizeof q, "%s.out", g);
        size_t il, ol;
        char *inp = read_file(p, &il), *out = read_file(q, &ol);
        gguf_file gf;
        tokenizer *t = inp && out ? load_tok(g, &gf) : NULL;
        CHECK(t != NULL, "%s: its vocabulary loads", g);
        if (t) {
            struct vec_ctx c = {t, 0, 0};
            for_each_case(inp, il, out, ol, vec_case, &c);
            CHECK(c.total >= 40 && c.fails == 0, "%s: llama.cpp's vectors, %d/%d cases identical", g, c.total - c.fails, c.total);
            free_tokenizer(t);
            free_gguf(&gf);
        }
        free(inp), free(out);
        files++;
    }
    closedir(d);
    CHECK(files >= 4, "tokenizer vectors for the families' vocabularies (%d files)", files);
}

/* The shared conversation through each family's own template (auto), and
   SmolLM3's with /no_think in its system message */
static void renders(const char *sh) {
    static const struct { const char *model, *ref, *sys_suffix; } cases[] = {
        {"rand-gemma3-q8_0", "gemma3", NULL},
        {"rand-lfm2-q8_0", "lfm2", NULL},
        {"rand-smollm3-q8_0", "smollm3", NULL},
        {"rand-smollm3-q8_0", "smollm3.no_think", " /no_think"},
    };
    char p[1024], err[512], note[256];
    size_t cl;
    snprintf(p, sizeof p, "%s/reference/chat/conversation.txt", sh);
    char *conv = read_file(p, &cl);
    if (!conv) { CHECK(0, "%s readable", p); return; }
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *text = malloc(cl + 16);
        memcpy(text, conv, cl);
        chat_msg m[16];
        int n = chat_parse_conversation(text, cl, m, 16, err, sizeof err);
        char *sys = NULL;
        if (n > 0 && cases[i].sys_suffix && !strcmp(m[0].role, "system")) {
            sys = malloc(m[0].len + 16);
            memcpy(sys, m[0].content, m[0].len);
            memcpy(sys + m[0].len, cases[i].sys_suffix, strlen(cases[i].sys_suffix));
            m[0].content = sys;
            m[0].len += strlen(cases[i].sys_suffix);
        }
        snprintf(p, sizeof p, FAM_DIR "/%s.gguf", cases[i].model);
        gguf_file gf;
        int kind = -1;
        const int ok = n > 0 && !build_gguf(&gf, p, NULL, err, sizeof err);
        if (ok && chat_kind_resolve("auto", &gf, &kind, note, sizeof note, err, sizeof err)) kind = -1;
        size_t rl, ol = 0;
        char *got = kind >= 0 ? chat_render(kind, m, n, 1, &ol) : NULL;
        snprintf(p, sizeof p, FAM_DIR "/chat/%s.txt", cases[i].ref);
        char *ref = read_file(p, &rl);
        CHECK(got && ref && rl == ol && !memcmp(got, ref, rl), "%s's template (%s) renders %s byte for byte (%zu / %zu bytes)",
              cases[i].model, kind >= 0 ? chat_kind_name(kind) : err, p, ol, ref ? rl : 0);
        free(got), free(ref), free(sys), free(text);
        if (ok) free_gguf(&gf);
    }
    free(conv);
}

int main(void) {
    vectors();
    const char *sh = shared_dir("the shared chat conversation");
    DIR *d = opendir(FAM_DIR);
    if (sh && d) renders(sh);
    if (d) closedir(d);
    return CHECK_DONE();
}

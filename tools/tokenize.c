/* picolm-tokenize: print the token ids of a text file under a model's
   SentencePiece vocabulary, space separated on one line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "picolm/picolm.h"
#include "cli.h"

/* The model's vocabulary and metadata (no weights, no plugins), or NULL after saying why. */
static picolm_model *load_vocab(const char *path) {
    char err[1024];
    const picolm_model_params p = {.path = path, .vocab_only = 1};
    picolm_model *m = picolm_model_load(&p, err, sizeof err);
    if (!m) fprintf(stderr, "picolm-tokenize: %s\n", err); /* err names the file */
    return m;
}

static void usage(FILE *o) {
    fprintf(o,
        "usage: picolm-tokenize MODEL.gguf TEXT_FILE [--no-bos] [--special] [--pieces]\n"
        "       picolm-tokenize MODEL.gguf -p TEXT [--no-bos] [--special] [--pieces]\n"
        "       picolm-tokenize --render-chat CONV_FILE [--chat-template NAME] [MODEL.gguf]\n"
        "Print the token ids of TEXT_FILE (\"-\" = stdin) or of TEXT, space separated.\n"
        "  -p, --prompt TEXT  tokenize TEXT itself instead of a file\n"
        "  --no-bos    do not prepend BOS (default: the model's add_bos_token)\n"
        "  --special   match control tokens such as <s> and </s> in the text\n"
        "  --pieces    print each token as id:'piece' instead (control tokens by name: 1:<s>)\n"
        "  --render-chat CONV_FILE\n"
        "              print CONV_FILE rendered by a chat template, with the assistant's\n"
        "              header added, as llama.cpp's llama_chat_apply_template does.  Messages\n"
        "              are separated by a line \"---\"; the first line of each is its role\n"
        "              (system, user, assistant), the rest its content\n"
        "  --chat-template NAME\n"
        "              the template for --render-chat (default: the MODEL's):\n"
        "              %s\n"
        "  -h, --help  this help\n"
        "Exit status: 0 success, 1 runtime failure, 2 usage error.\n", picolm_chat_templates());
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) {
            if (ferror(f)) { free(buf); buf = NULL; }
            break;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb; cap *= 2;
    }
    if (f != stdin) fclose(f);
    *len = n;
    return buf;
}

/* --render-chat: the conversation in CONV_FILE through a chat template. */
static int render_chat(const char *conv, const char *tmpl, const char *model) {
    char err[1024];
    const char *name;
    if (!tmpl && !model) { fprintf(stderr, "picolm-tokenize: --render-chat needs --chat-template NAME or a MODEL\n"); return 2; }
    if (tmpl && strcmp(tmpl, "auto")) {
        if (!(name = picolm_chat_template(NULL, tmpl, NULL, 0, err, sizeof err))) {
            fprintf(stderr, "picolm-tokenize: unknown chat template '%s' (known: %s)\n", tmpl, picolm_chat_templates());
            return 2;
        }
    } else {
        picolm_model *m = load_vocab(model);
        if (!m) return 1;
        char note[256];
        name = picolm_chat_template(m, "auto", note, sizeof note, err, sizeof err);
        picolm_model_free(m);
        if (!name) { fprintf(stderr, "picolm-tokenize: %s: %s\n", model, err); return 1; }
        if (note[0]) fprintf(stderr, "picolm-tokenize: %s\n", note);
    }
    size_t len;
    char *text = read_all(conv, &len);
    if (!text) { fprintf(stderr, "picolm-tokenize: cannot read %s: %s\n", conv, strerror(errno)); return 1; }
    enum { MAX_MSGS = 1024 };
    picolm_chat_msg *m = malloc(MAX_MSGS * sizeof *m);
    int n = m ? picolm_chat_parse(text, len, m, MAX_MSGS, err, sizeof err) : -1;
    if (!m) snprintf(err, sizeof err, "out of memory");
    size_t ol = 0;
    char *out = n >= 0 ? picolm_chat_render(NULL, name, m, n, 1, &ol, err, sizeof err) : NULL;
    int rc = 0;
    if (n < 0) { fprintf(stderr, "picolm-tokenize: %s: %s\n", conv, err); rc = 1; }
    else if (!out) { fprintf(stderr, "picolm-tokenize: out of memory\n"); rc = 1; }
    else if (fwrite(out, 1, ol, stdout) != ol || fflush(stdout)) { fprintf(stderr, "picolm-tokenize: write error: %s\n", strerror(errno)); rc = 1; }
    free(out); free(m); free(text);
    return rc;
}

int main(int argc, char **argv) {
    picolm_log_set(picolm_log_stderr, NULL); /* the engine and plugins note things on stderr */
    const char *model = NULL, *textf = NULL, *text_arg = NULL, *conv = NULL, *tmpl = NULL;
    int no_bos = 0, special = 0, pieces = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return cli_close_stdout("picolm-tokenize"); }
        else if (!strcmp(a, "--render-chat") || !strcmp(a, "--chat-template")) {
            if (i + 1 == argc) { fprintf(stderr, "picolm-tokenize: %s needs a value\n", a); usage(stderr); return 2; }
            *(a[2] == 'r' ? &conv : &tmpl) = argv[++i];
        }
        else if (!strcmp(a, "--no-bos")) no_bos = 1;
        else if (!strcmp(a, "--special")) special = 1;
        else if (!strcmp(a, "--pieces")) pieces = 1;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (i + 1 >= argc) { fprintf(stderr, "picolm-tokenize: option %s needs a value (TEXT)\n", a); return 2; }
            text_arg = argv[++i];
        }
        else if (a[0] == '-' && a[1]) { fprintf(stderr, "picolm-tokenize: unknown option %s\n", a); usage(stderr); return 2; }
        else if (!model) model = a;
        else if (!textf) textf = a;
        else { fprintf(stderr, "picolm-tokenize: unexpected argument %s\n", a); usage(stderr); return 2; }
    }
    if (conv) {
        if (textf || text_arg) { fprintf(stderr, "picolm-tokenize: unexpected text with --render-chat\n"); usage(stderr); return 2; }
        return render_chat(conv, tmpl, model);
    }
    if (tmpl) { fprintf(stderr, "picolm-tokenize: --chat-template goes with --render-chat\n"); usage(stderr); return 2; }
    if (text_arg && textf) { fprintf(stderr, "picolm-tokenize: give TEXT_FILE or -p TEXT, not both\n"); return 2; }
    if (!model || (!textf && !text_arg)) { usage(stderr); return 2; }

    picolm_model *tok = load_vocab(model);
    if (!tok) return 1;

    size_t len = text_arg ? strlen(text_arg) : 0;
    char *text = text_arg ? strdup(text_arg) : read_all(textf, &len);
    if (!text) {
        fprintf(stderr, "picolm-tokenize: cannot read %s: %s\n", textf ? textf : "-p", strerror(errno));
        picolm_model_free(tok);
        return 1;
    }
    int add_bos = no_bos ? 0 : picolm_add_bos(tok);
    int n = picolm_tokenize(tok, text, len, add_bos, special, NULL, 0);
    int32_t *ids = NULL;
    if (n < -1 || n == 0) {
        int cap = n < 0 ? -n : 0;
        ids = malloc((size_t)(cap ? cap : 1) * sizeof *ids);
        n = ids ? picolm_tokenize(tok, text, len, add_bos, special, ids, cap) : -1;
    } else if (n == -1) {
        /* -1 is also "1 token needed" when cap = 0: retry with room */
        ids = malloc(sizeof *ids);
        n = ids ? picolm_tokenize(tok, text, len, add_bos, special, ids, 1) : -1;
    }
    if (n < 0) {
        fprintf(stderr, "picolm-tokenize: tokenization failed (input too large, or a byte with no byte token and no <unk>)\n");
        free(ids); free(text); picolm_model_free(tok);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        if (i) putchar(' ');
        if (pieces) {
            size_t pl;
            /* a control token decodes to nothing: show its name */
            const int control = picolm_token_type(tok, ids[i]) == PICOLM_TOKEN_CONTROL;
            const char *p = control ? picolm_token_text(tok, ids[i], &pl) : picolm_token_piece(tok, ids[i], &pl);
            printf(control ? "%d:%.*s" : "%d:'%.*s'", (int)ids[i], (int)pl, p);
        } else {
            printf("%d", (int)ids[i]);
        }
    }
    putchar('\n');
    free(ids); free(text); picolm_model_free(tok);
    return cli_close_stdout("picolm-tokenize");
}

/* Configuration: defaults, INI parsing (inih), errors naming FILE:LINE,
   precedence defaults < INI < CLI (and PICOLM_CONFIG), the CLI's forms and
   errors, --dump-config round trip, every conf/ INI loads. */
#include "check.h"
#include "config.h"
#include "gguf.h"
#include "model.h"

#include <glob.h>
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#define DATA "tests/data/ini/"

static picolm_config cfg, cfg2; /* big: keep off the stack */
static char err[1024];

static int load(picolm_config *c, const char *path) {
    config_defaults(c);
    err[0] = 0;
    return config_load_ini(c, path, err, sizeof err);
}

static int argv_parse(picolm_config *c, const char *const *args) {
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"picolm";
    for (; *args; args++) argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    err[0] = 0;
    return config_parse_args(c, argc, argv, err, sizeof err);
}

static const char *param(const picolm_config *c, const char *key, int *line) {
    for (int i = 0; i < c->n_params; i++)
        if (!strcmp(c->params[i].key, key)) {
            if (line) *line = c->params[i].line;
            return c->params[i].value;
        }
    return NULL;
}

static int write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs(text, f);
    return fclose(f);
}

/* every field INI/dump cover, plus params by key/value */
static int same_config(const picolm_config *a, const picolm_config *b, char *why, size_t n) {
#define SAME(f) if (a->f != b->f) { snprintf(why, n, "%s differs", #f); return 0; }
#define SAMES(f) if (strcmp(a->f, b->f)) { snprintf(why, n, "%s: '%.200s' vs '%.200s'", #f, a->f, b->f); return 0; }
    SAME(threads) SAME(context) SAMES(backend) SAME(kv_type) SAMES(plugin_dir) SAME(ram_bytes)
    SAME(batch) SAME(max_tokens) SAME(seed) SAME(ignore_eos) SAME(json_mode) SAMES(cache_path)
    SAME(special) SAME(chat) SAMES(chat_template) SAMES(system_prompt) SAME(truncate)
    SAME(n_stops) SAMES(sampler_chain) SAME(temperature) SAME(top_p) SAME(top_k) SAME(min_p)
    SAME(repeat_penalty) SAME(freq_penalty) SAME(presence_penalty) SAME(penalty_last_n)
    SAME(n_params)
    for (int i = 0; i < a->n_stops; i++) SAMES(stops[i])
    for (int i = 0; i < a->n_params; i++) { SAMES(params[i].key) SAMES(params[i].value) }
    return 1;
#undef SAME
#undef SAMES
}

static void test_defaults(void) {
    config_defaults(&cfg);
    CHECK(cfg.max_tokens == 256 && fabsf(cfg.temperature - 0.8f) < 1e-6f && fabsf(cfg.top_p - 0.9f) < 1e-6f &&
          cfg.seed == 42 && cfg.context == 2048, "defaults match picoLM: -n 256 -t 0.8 -k 0.9 -s 42 -c 2048");
    CHECK(cfg.threads == 0 && !strcmp(cfg.backend, "auto") && cfg.kv_type == KV_F16 && cfg.batch > 0 &&
          cfg.special == -1 && !strcmp(cfg.sampler_chain, PICOLM_DEFAULT_CHAIN) && cfg.n_stops == 0 && !cfg.config_path[0],
          "defaults: threads 0 (all), backend auto, kv f16, special auto, chain auto");
    int line = -1;
    const char *t = param(&cfg, "temperature", &line);
    CHECK(cfg.n_params == 8 && t && !strcmp(t, "0.8") && line == 0 && !cfg.params[0].file[0],
          "params[] seeded with the 8 common sampler keys (n=%d)", cfg.n_params);
    CHECK(param(&cfg, "chain", NULL) == NULL, "chain is not a plugin param");
    /* the table writes the engine's guards out as text: they must not drift */
    const gguf_limits *g = &gguf_default_limits;
    CHECK(cfg.max_tensors == g->max_tensors && cfg.max_metadata == g->max_kv && cfg.max_string == g->max_string &&
          cfg.max_array == g->max_array && cfg.max_dim == (uint64_t)g->max_dim,
          "[limits] defaults are gguf_default_limits");
}

static void test_good_ini(void) {
    int rc = load(&cfg, DATA "good.ini");
    CHECK(rc == 0, "good.ini loads (%s)", err);
    CHECK(!strcmp(cfg.config_path, DATA "good.ini"), "config_path recorded");
    CHECK(cfg.threads == 3 && cfg.context == 512 && !strcmp(cfg.backend, "avx2") && cfg.kv_type == KV_Q8_0 &&
          !strcmp(cfg.plugin_dir, "/opt/picolm/plugins") && cfg.batch == 8,
          "[engine] values (inline comment stripped, enum case-folded)");
    CHECK(cfg.ram_bytes == 1610612736ull, "ram = 1.5G -> %llu", (unsigned long long)cfg.ram_bytes);
    CHECK(cfg.max_tokens == -1 && cfg.seed == UINT64_MAX && cfg.ignore_eos == 1 && cfg.json_mode == 1 &&
          !strcmp(cfg.cache_path, "/tmp/x.kv") && cfg.special == 0 && cfg.chat == 1 &&
          !strcmp(cfg.chat_template, "chatml") && cfg.truncate == 1, "[generate] values");
    CHECK(!strcmp(cfg.system_prompt, "You are terse.\tBe kind; always."), "quoted value with \\t and \\x3b: '%s'", cfg.system_prompt);
    CHECK(cfg.n_stops == 3 && !strcmp(cfg.stops[0], "\n\n") && !strcmp(cfg.stops[1], "User:") &&
          !strcmp(cfg.stops[2], "indented is fine"), "repeated stop keys (escapes, indentation)");
    CHECK(!strcmp(cfg.sampler_chain, "penalties,top_k,top_p,temperature,dist"), "chain normalised: '%s'", cfg.sampler_chain);
    CHECK(fabsf(cfg.temperature - 0.25f) < 1e-6f && fabsf(cfg.top_p - 0.95f) < 1e-6f && cfg.top_k == 40 &&
          fabsf(cfg.min_p - 0.05f) < 1e-6f && fabsf(cfg.repeat_penalty - 1.1f) < 1e-6f &&
          fabsf(cfg.freq_penalty - 0.5f) < 1e-6f && fabsf(cfg.presence_penalty + 0.5f) < 1e-6f &&
          cfg.penalty_last_n == -1, "[sampler] typed values ([Sampler] section name case-insensitive)");
    int line = 0;
    const char *v = param(&cfg, "mirostat_tau", &line);
    CHECK(v && !strcmp(v, "5.0") && line == 36, "foreign sampler key kept with its line (%d)", line);
    int i;
    for (i = 0; i < cfg.n_params && strcmp(cfg.params[i].key, "mirostat_tau"); i++) {}
    CHECK(i < cfg.n_params && !strcmp(cfg.params[i].file, DATA "good.ini"), "... and its file");
    char where[300];
    if (i < cfg.n_params) config_param_where(&cfg.params[i], where, sizeof where);
    CHECK(i < cfg.n_params && !strcmp(where, DATA "good.ini:36"), "config_param_where: %s", where);
    v = param(&cfg, "temperature", &line);
    CHECK(v && !strcmp(v, "0.25") && line == 28, "known key replaces the default entry in place (line %d)", line);
    CHECK(cfg.n_params == 10, "params: 8 common + 2 foreign (%d)", cfg.n_params);
}

static void test_errors(void) {
    static const struct { const char *file, *line, *word; } cases[] = {
        {"bad_number.ini", ":7:", "max_tokens"},
        {"unknown_section.ini", ":7:", "unknown section [model]"},
        {"unknown_key.ini", ":7:", "max_tokenz"},
        {"bad_bool.ini", ":7:", "maybe"},
        {"bad_seed.ini", ":7:", "seed"},
        {"syntax.ini", ":7:", "syntax"},
        {"bad_quote.ini", ":7:", "quoted"},
        {"bad_enum.ini", ":7:", "f16|q8_0"},
        {"out_of_range.ini", ":7:", "out of range"},
        {"int_range.ini", ":7:", "out of range"},
        {"bad_float.ini", ":7:", "not a number"},
        {"bad_size.ini", ":7:", "size"},
        {"bad_chain.ini", ":7:", "chain"},
        {"no_section.ini", ":1:", "outside a section"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[256], want[300];
        snprintf(path, sizeof path, DATA "%s", cases[i].file);
        snprintf(want, sizeof want, "%s%s", path, cases[i].line);
        int rc = load(&cfg, path);
        CHECK(rc != 0 && !strncmp(err, want, strlen(want)) && strstr(err, cases[i].word),
              "%s -> error '%s'", cases[i].file, err);
    }
    int rc = load(&cfg, DATA "does-not-exist.ini");
    CHECK(rc != 0 && strstr(err, "does-not-exist.ini") && strstr(err, "cannot open"), "missing file: %s", err);
}

static void test_long_lines(void) {
    char path[] = "/tmp/picolm-test-config-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) { CHECK(0, "mkstemp"); return; }
    close(fd);
    static char text[16384], sys[3001];
    memset(sys, 'a', 3000);
    sys[3000] = 0;
    sys[1500] = ' ';
    char comment[400];
    memset(comment, '-', sizeof comment - 1);
    comment[sizeof comment - 1] = 0;
    snprintf(text, sizeof text, ";%s\n[generate]\nsystem = %s   ; trailing comment\nmax_tokens = 9\n", comment, sys);
    write_file(path, text);
    int rc = load(&cfg, path);
    sys[1500] = ' ';
    CHECK(rc == 0 && !strcmp(cfg.system_prompt, sys) && cfg.max_tokens == 9,
          "3000-byte value on one line (over inih's line buffer) read whole (%s)", err);
    snprintf(text, sizeof text, "[generate]\nmax_tokens = 9\n\nsystem = \"%s\n", sys);
    write_file(path, text);
    rc = load(&cfg, path);
    CHECK(rc != 0 && strstr(err, ":4:"), "error on a long line names it: %s", err);
    char big[300];
    memset(big, 'x', 299);
    big[299] = 0;
    snprintf(text, sizeof text, "[sampler]\n\nfoo = %s\n", big);
    write_file(path, text);
    rc = load(&cfg, path);
    CHECK(rc != 0 && strstr(err, ":3:") && strstr(err, "too long"), "sampler value over 255 bytes rejected: %s", err);
    unlink(path);
}

static void test_cli(void) {
    config_defaults(&cfg);
    const char *a1[] = {"model.gguf", "-p", "Hello", "-n", "5", "-t", "0", "-k", "0.5", "-s", "7", "-c", "128",
                        "-j", "2", "--json", "--cache", "c.kv", NULL};
    int rc = argv_parse(&cfg, a1);
    CHECK(rc == 0 && !strcmp(cfg.model_path, "model.gguf") && !strcmp(cfg.prompt, "Hello") && cfg.max_tokens == 5 &&
          cfg.temperature == 0.0f && fabsf(cfg.top_p - 0.5f) < 1e-6f && cfg.seed == 7 && cfg.context == 128 &&
          cfg.threads == 2 && cfg.json_mode == 1 && !strcmp(cfg.cache_path, "c.kv"),
          "picoLM-compatible flags (%s)", err);
    int line = -1;
    const char *v = param(&cfg, "top_p", &line);
    int i;
    for (i = 0; i < cfg.n_params && strcmp(cfg.params[i].key, "top_p"); i++) {}
    CHECK(v && !strcmp(v, "0.5") && line == 0 && !strcmp(cfg.params[i].file, "command line"),
          "-k updates params[] (origin 'command line')");

    config_defaults(&cfg);
    const char *a2[] = {"--threads=3", "--backend=scalar", "--kv-type", "q8_0", "--plugin-dir=/p", "--top-k", "20",
                        "--min-p=0.1", "--repeat-penalty", "1.2", "--freq-penalty=0.3", "--presence-penalty", "0.4",
                        "--penalty-last-n=32", "--sampler", "top_k,dist", "--ignore-eos", "--chat",
                        "--chat-template", "llama2", "--system=be brief", "--special", "--stop", "###",
                        "--stop=END", "--truncate", "--batch", "16", "--ram=512M", "--fit", "--list-plugins",
                        "--dump-config", "-v", "--verbose", "--version", "-h", "-n7", "--param", "mirostat=2",
                        "--", "-model-with-dash.gguf", NULL};
    rc = argv_parse(&cfg, a2);
    CHECK(rc == 0, "every long flag, --flag=value and -n7 forms accepted (%s)", err);
    CHECK(cfg.threads == 3 && !strcmp(cfg.backend, "scalar") && cfg.kv_type == KV_Q8_0 &&
          !strcmp(cfg.plugin_dir, "/p") && cfg.top_k == 20 && fabsf(cfg.min_p - 0.1f) < 1e-6f &&
          fabsf(cfg.repeat_penalty - 1.2f) < 1e-6f && fabsf(cfg.freq_penalty - 0.3f) < 1e-6f &&
          fabsf(cfg.presence_penalty - 0.4f) < 1e-6f && cfg.penalty_last_n == 32 &&
          !strcmp(cfg.sampler_chain, "top_k,dist") && cfg.ignore_eos && cfg.chat &&
          !strcmp(cfg.chat_template, "llama2") && !strcmp(cfg.system_prompt, "be brief") && cfg.special == 1 &&
          cfg.n_stops == 2 && !strcmp(cfg.stops[1], "END") && cfg.truncate && cfg.batch == 16 &&
          cfg.ram_bytes == 512ull << 20 && cfg.fit && cfg.list_plugins && cfg.dump_config && cfg.verbose == 2 &&
          cfg.show_version && cfg.show_help && cfg.max_tokens == 7, "... and each lands in its field");
    CHECK(cfg.model_path && !strcmp(cfg.model_path, "-model-with-dash.gguf"), "'--' ends options");
    v = param(&cfg, "mirostat", NULL);
    CHECK(v && !strcmp(v, "2"), "--param KEY=VALUE adds a sampler param");
    const char *a3[] = {"--no-special", "--json=false", NULL};
    rc = argv_parse(&cfg, a3);
    CHECK(rc == 0 && cfg.special == 0 && cfg.json_mode == 0, "--no-special, --json=false");

    static const struct { const char *args[4]; const char *want; } bad[] = {
        {{"--frobnicate", NULL}, "unknown option '--frobnicate'"},
        {{"-x", NULL}, "unknown option '-x'"},
        {{"-n", NULL}, "needs a value"},
        {{"--threads", NULL}, "needs a value"},
        {{"-t", "hot", NULL}, "not a number"},
        {{"-n", "12abc", NULL}, "not an integer"},
        {{"--kv-type=f32", NULL}, "f16|q8_0"},
        {{"-k", "2", NULL}, "out of range"},
        {{"--json=maybe", NULL}, "boolean"},
        {{"--no-special=1", NULL}, "takes no value"},
        {{"a.gguf", "b.gguf", NULL}, "unexpected argument 'b.gguf'"},
        {{"--param", "novalue", NULL}, "KEY=VALUE"},
        {{"--ram", "lots", NULL}, "size"},
        {{"--backend", "a/b", NULL}, "valid name"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        config_defaults(&cfg);
        rc = argv_parse(&cfg, bad[k].args);
        CHECK(rc != 0 && strstr(err, bad[k].want), "bad CLI %s -> '%s'", bad[k].args[0], err);
    }
}

static void test_precedence(void) {
    /* INI overrides default, CLI overrides INI */
    int rc = load(&cfg, DATA "good.ini");
    const char *a[] = {"m.gguf", "-t", "1.5", "--stop", "ZZ", "--threads=1", NULL};
    rc |= argv_parse(&cfg, a);
    CHECK(rc == 0 && cfg.threads == 1 && fabsf(cfg.temperature - 1.5f) < 1e-6f && cfg.context == 512 &&
          fabsf(cfg.top_p - 0.95f) < 1e-6f && cfg.max_tokens == -1,
          "CLI overrides INI, INI overrides defaults, untouched keys keep the INI value");
    CHECK(cfg.n_stops == 1 && !strcmp(cfg.stops[0], "ZZ"), "--stop replaces the INI's stop list");
    int line = -1;
    const char *v = param(&cfg, "temperature", &line);
    CHECK(v && !strcmp(v, "1.5") && line == 0, "params[] follows the CLI override");

    /* which INI: --config beats PICOLM_CONFIG; env used without --config */
    char *argv1[] = {"picolm", "m.gguf", "-p", "--config", NULL};   /* "--config" is -p's value here */
    char *argv2[] = {"picolm", "--config", "x.ini", "m.gguf", NULL};
    char *argv3[] = {"picolm", "--config=y.ini", NULL};
    setenv("PICOLM_CONFIG", DATA "good.ini", 1);
    const char *f1 = config_find_ini(4, argv1), *f2 = config_find_ini(4, argv2), *f3 = config_find_ini(2, argv3);
    CHECK(f1 && !strcmp(f1, DATA "good.ini"), "PICOLM_CONFIG used when there is no --config (%s)", f1 ? f1 : "NULL");
    CHECK(f2 && !strcmp(f2, "x.ini") && f3 && !strcmp(f3, "y.ini"), "--config FILE / --config=FILE beat the env");
    unsetenv("PICOLM_CONFIG");
    CHECK(config_find_ini(4, argv1) == NULL, "no --config, no env -> no INI");

    /* the whole main.c sequence with the env var */
    setenv("PICOLM_CONFIG", DATA "good.ini", 1);
    char *argv4[] = {"picolm", "m.gguf", "-c", "64", NULL};
    config_defaults(&cfg);
    const char *ini = config_find_ini(4, argv4);
    rc = ini ? config_load_ini(&cfg, ini, err, sizeof err) : -1;
    rc |= config_parse_args(&cfg, 4, argv4, err, sizeof err);
    CHECK(rc == 0 && cfg.context == 64 && cfg.threads == 3, "env INI then CLI: context 64 (CLI), threads 3 (INI)");
    unsetenv("PICOLM_CONFIG");
}

static void test_dump_roundtrip(void) {
    char path[] = "/tmp/picolm-test-dump-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) { CHECK(0, "mkstemp"); return; }
    close(fd);
    char why[600];

    config_defaults(&cfg);
    FILE *f = fopen(path, "w");
    config_dump(&cfg, f);
    fclose(f);
    int rc = load(&cfg2, path);
    CHECK(rc == 0 && same_config(&cfg, &cfg2, why, sizeof why), "defaults: dump -> load gives the same config (%s%s)", err, rc ? "" : why);

    rc = load(&cfg, DATA "good.ini");
    const char *a[] = {"--system", "  leading; \"quoted\" \\back\\slash\nnewline é ", "--stop", ";", "--stop", " sp ",
                       "--param", "odd=#not a comment", "--ram", "1000", "--cache=", "--special=auto", NULL};
    rc |= argv_parse(&cfg, a);
    f = fopen(path, "w");
    config_dump(&cfg, f);
    fclose(f);
    rc |= load(&cfg2, path);
    why[0] = 0;
    CHECK(rc == 0 && same_config(&cfg, &cfg2, why, sizeof why), "good.ini + awkward CLI values: dump round trip (%s%s)", err, why);
    CHECK(cfg2.special == -1 && cfg2.ram_bytes == 1000 && !strcmp(cfg2.system_prompt, cfg.system_prompt),
          "special=auto, ram in bytes, escaped system prompt survive");

    /* dump of the dump is identical text */
    char path2[] = "/tmp/picolm-test-dump2-XXXXXX";
    fd = mkstemp(path2);
    close(fd);
    cfg2.config_path[0] = 0;
    cfg.config_path[0] = 0;
    f = fopen(path, "w");
    config_dump(&cfg, f);
    fclose(f);
    f = fopen(path2, "w");
    config_dump(&cfg2, f);
    fclose(f);
    static char t1[65536], t2[65536];
    f = fopen(path, "r");
    size_t n1 = fread(t1, 1, sizeof t1 - 1, f);
    fclose(f);
    f = fopen(path2, "r");
    size_t n2 = fread(t2, 1, sizeof t2 - 1, f);
    fclose(f);
    CHECK(n1 == n2 && !memcmp(t1, t2, n1), "dump(load(dump(c))) == dump(c) byte for byte");
    CHECK(strstr(t1, "[engine]") && strstr(t1, "[generate]") && strstr(t1, "[sampler]") && strstr(t1, "mirostat_tau = 5.0"),
          "dump has all sections and the foreign sampler keys");
    unlink(path);
    unlink(path2);
}

static void test_conf_files(void) {
    glob_t g;
    int n = 0, ok = 0;
    if (glob("conf/*.ini", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            n++;
            int rc = load(&cfg, g.gl_pathv[i]);
            CHECK(rc == 0, "%s loads (%s)", g.gl_pathv[i], err);
            ok += rc == 0;
        }
        globfree(&g);
    }
    CHECK(n >= 5 && ok == n, "every conf/*.ini loads (%d of %d)", ok, n);
    int rc = load(&cfg, "conf/default.ini");
    picolm_config d;
    config_defaults(&d);
    char why[600] = "";
    CHECK(rc == 0 && same_config(&cfg, &d, why, sizeof why), "conf/default.ini == built-in defaults (%s)", why);
    rc = load(&cfg, "conf/pi-zero-2w.ini");
    CHECK(rc == 0 && cfg.threads == 4 && cfg.kv_type == KV_Q8_0 && cfg.ram_bytes == 512ull << 20 &&
          cfg.context <= 1024, "pi-zero-2w: 4 threads, q8_0 KV, 512M, small context");
}

static void test_usage(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_usage("picolm", f);
    fclose(f);
    static const char *flags[] = {"-p, --prompt", "-n, --max-tokens", "-t, --temperature", "-k, --top-p", "-s, --seed",
                                  "-c, --context", "-j, --threads", "--json", "--cache", "--config", "--backend",
                                  "--kv-type", "--plugin-dir", "--top-k", "--min-p", "--repeat-penalty",
                                  "--freq-penalty", "--presence-penalty", "--penalty-last-n", "--sampler",
                                  "--ignore-eos", "--chat", "--chat-template", "--system", "--special",
                                  "--no-special", "--stop", "--truncate", "--batch", "--ram", "--fit",
                                  "--list-plugins", "--dump-config", "-v, --verbose", "--version", "-h, --help",
                                  "--param"};
    int missing = 0;
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (!strstr(buf, flags[i])) { missing++; printf("  usage lacks %s\n", flags[i]); }
    CHECK(missing == 0, "usage documents every flag");
    CHECK(strstr(buf, "default 256; INI [generate] max_tokens") && strstr(buf, "default 0.8; INI [sampler] temperature") &&
          strstr(buf, "default 0.9; INI [sampler] top_p") && strstr(buf, "default 42;") &&
          strstr(buf, "default 2048;") && strstr(buf, "default 0; INI [engine] threads"),
          "usage shows the defaults");
    free(buf);
}

/* ---- every numeric key on its bounds, generated from the key table ---- */

/* The field's value as text that compares exactly. */
static void field_str(const picolm_config *c, const config_numeric_key *k, char *buf, size_t n) {
    const char *f = (const char *)c + k->off;
    if (k->kind == CONFIG_NUM_INT) snprintf(buf, n, "%d", *(const int *)f);
    else if (k->kind == CONFIG_NUM_FLOAT) snprintf(buf, n, "%.9g", *(const float *)f);
    else snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)f);
}

/* Set KEY = text through one route: 0 = INI, 1 = its --flag, 2 = --param
   (sampler keys).  Returns the parser's status; *stored gets the field. */
static int set_via(const config_numeric_key *k, int route, const char *text, char *stored, size_t n) {
    char buf[512];
    int rc;
    config_defaults(&cfg);
    err[0] = 0;
    if (route == 0) {
        char path[] = "/tmp/picolm-bounds-XXXXXX";
        int fd = mkstemp(path);
        if (fd < 0) return -2;
        close(fd);
        snprintf(buf, sizeof buf, "[%s]\n%s = %s\n", k->section, k->key, text);
        write_file(path, buf);
        rc = config_load_ini(&cfg, path, err, sizeof err);
        unlink(path);
    } else if (route == 1) {
        snprintf(buf, sizeof buf, "--%s=%s", k->flag, text);
        const char *args[] = {buf, NULL};
        rc = argv_parse(&cfg, args);
    } else {
        snprintf(buf, sizeof buf, "%s=%s", k->key, text);
        const char *args[] = {"--param", buf, NULL};
        rc = argv_parse(&cfg, args);
    }
    field_str(&cfg, k, stored, n);
    return rc;
}

/* The largest float below lo / smallest above hi, as the text of a double
   strictly beyond the bound (the parsers compare in double). */
static void float_beyond(double bound, int up, char *buf, size_t n) {
    float f = (float)bound;
    while (up ? (double)f <= bound : (double)f >= bound) f = nextafterf(f, up ? INFINITY : -INFINITY);
    snprintf(buf, n, "%.17g", (double)f);
}

static void test_bounds(void) {
    config_numeric_key k;
    int n_keys = 0, n_cases = 0, bad = 0;
    for (size_t i = 0; config_numeric_key_at(i, &k); i++, n_keys++) {
        char in_lo[64], in_hi[64], out_lo[64], out_hi[64], want_lo[64], want_hi[64];
        switch (k.kind) {
        case CONFIG_NUM_INT:
            snprintf(in_lo, sizeof in_lo, "%.0f", k.lo);
            snprintf(in_hi, sizeof in_hi, "%.0f", k.hi);
            snprintf(out_lo, sizeof out_lo, "%.0f", k.lo - 1);
            snprintf(out_hi, sizeof out_hi, "%.0f", k.hi + 1);
            snprintf(want_lo, sizeof want_lo, "%s", in_lo);
            snprintf(want_hi, sizeof want_hi, "%s", in_hi);
            break;
        case CONFIG_NUM_FLOAT:
            snprintf(in_lo, sizeof in_lo, "%.17g", k.lo);
            snprintf(in_hi, sizeof in_hi, "%.17g", k.hi);
            float_beyond(k.lo, 0, out_lo, sizeof out_lo);
            float_beyond(k.hi, 1, out_hi, sizeof out_hi);
            snprintf(want_lo, sizeof want_lo, "%.9g", (float)k.lo);
            snprintf(want_hi, sizeof want_hi, "%.9g", (float)k.hi);
            break;
        default: /* u64 and byte sizes: 0 .. 2^64-1 */
            snprintf(in_lo, sizeof in_lo, "0");
            snprintf(in_hi, sizeof in_hi, "18446744073709551615");
            snprintf(out_lo, sizeof out_lo, "-1");
            snprintf(out_hi, sizeof out_hi, "18446744073709551616");
            snprintf(want_lo, sizeof want_lo, "%s", in_lo);
            snprintf(want_hi, sizeof want_hi, "%s", in_hi);
            break;
        }
        const int is_sampler = !strcmp(k.section, "sampler");
        for (int route = 0; route < 3; route++) {
            if ((route == 1 && !k.flag) || (route == 2 && !is_sampler)) continue;
            const char *rname = route == 0 ? "INI" : route == 1 ? "--flag" : "--param";
            char got[64];
            const char *ok_in[2] = {in_lo, in_hi}, *ok_want[2] = {want_lo, want_hi}, *no_in[2] = {out_lo, out_hi};
            for (int b = 0; b < 2; b++) {
                n_cases += 2;
                int rc = set_via(&k, route, ok_in[b], got, sizeof got);
                if (rc || strcmp(got, ok_want[b])) {
                    printf("FAIL: [%s] %s = %s (%s, the %s) not accepted as %s: rc %d, stored %s, %s\n", k.section, k.key, ok_in[b],
                           rname, b ? "maximum" : "minimum", ok_want[b], rc, got, err);
                    bad++;
                }
                rc = set_via(&k, route, no_in[b], got, sizeof got);
                if (!rc || !strstr(err, k.key)) {
                    printf("FAIL: [%s] %s = %s (%s, one step %s) not refused: stored %s, %s\n", k.section, k.key, no_in[b], rname,
                           b ? "above the maximum" : "below the minimum", got, err[0] ? err : "(no message)");
                    bad++;
                }
            }
        }
    }
    CHECK(n_keys >= 15 && bad == 0,
          "every numeric key of the table (%d) accepts exactly its minimum and maximum and refuses one step beyond, "
          "through the INI, its flag and --param (%d cases, %d wrong)", n_keys, n_cases, bad);
}

/* The options every tool shares (config_common_arg), where values came from,
   -vv, -f, and the help's environment and backend names. */
static void test_shared_options(void) {
    const char *ok[] = {"-vv", NULL};
    config_defaults(&cfg);
    CHECK(argv_parse(&cfg, ok) == 0 && cfg.verbose == 2, "-vv counts twice (verbose %d, %s)", cfg.verbose, err);
    const char *ok3[] = {"-v", "-vv", NULL};
    config_defaults(&cfg);
    CHECK(argv_parse(&cfg, ok3) == 0 && cfg.verbose == 3, "-v -vv counts three times (%d)", cfg.verbose);
    const char *bad[] = {"-vx", NULL};
    config_defaults(&cfg);
    CHECK(argv_parse(&cfg, bad) != 0, "-vx is refused (%s)", err);
    const char *both[] = {"-p", "hi", "-f", "x.txt", NULL};
    config_defaults(&cfg);
    CHECK(argv_parse(&cfg, both) != 0 && strstr(err, "-f"), "-p and -f together are refused (%s)", err);
    const char *file[] = {"--file=x.txt", NULL};
    config_defaults(&cfg);
    CHECK(argv_parse(&cfg, file) == 0 && cfg.prompt_file && !strcmp(cfg.prompt_file, "x.txt"), "--file sets the prompt file");

    /* a tool's argv: shared options are taken, its own and positionals are left */
    char *argv[] = {"tool", "-j", "3", "--context=64", "--backend", "scalar", "-v", "--kv-type", "q8_0", "--batch", "4",
                    "-p", "MODEL", "--plugin-dir", "/x", NULL};
    const int argc = 15;
    config_defaults(&cfg);
    int taken = 0, left = 0, bad_rc = 0;
    for (int i = 1; i < argc; i++) {
        const int r = config_common_arg(&cfg, argc, argv, &i, err, sizeof err);
        if (r < 0) bad_rc = 1;
        else if (r) taken++;
        else left++;
    }
    CHECK(!bad_rc && taken == 6 && left == 4 && cfg.threads == 3 && cfg.context == 64 && !strcmp(cfg.backend, "scalar") &&
          cfg.verbose == 1 && cfg.kv_type == KV_Q8_0 && !strcmp(cfg.plugin_dir, "/x"),
          "config_common_arg takes -j, --context, --backend, -v, --kv-type, --plugin-dir and leaves the rest (%d taken, %d left)",
          taken, left);
    char *argv2[] = {"tool", "-j", "many", NULL};
    int i = 1;
    config_defaults(&cfg);
    CHECK(config_common_arg(&cfg, 3, argv2, &i, err, sizeof err) < 0 && strstr(err, "many"),
          "a bad shared value is an error naming it (%s)", err);

    /* where a value came from */
    char where[512];
    write_file("/tmp/picolm-test-where.ini", "[engine]\n; comment\nbackend = foo\n");
    CHECK(load(&cfg, "/tmp/picolm-test-where.ini") == 0, "backend = foo parses (checked once plugins are loaded)");
    config_where(&cfg, "engine", "backend", where, sizeof where);
    CHECK(!strcmp(where, "/tmp/picolm-test-where.ini:3"), "config_where names the INI line (%s)", where);
    config_where(&cfg, "engine", "threads", where, sizeof where);
    CHECK(!strcmp(where, "built-in default") && !config_is_set(&cfg, "engine", "threads"), "an unset key is the built-in default");
    const char *cl[] = {"-c", "99", NULL};
    argv_parse(&cfg, cl);
    config_where(&cfg, "engine", "context", where, sizeof where);
    CHECK(!strcmp(where, "command line") && config_is_set(&cfg, "engine", "context"), "a flag is the command line (%s)", where);
    unlink("/tmp/picolm-test-where.ini");

    write_file("/tmp/picolm-test-sec.ini", "[modle]\n");
    CHECK(load(&cfg, "/tmp/picolm-test-sec.ini") != 0 && strstr(err, "[limits]"), "the unknown-section message lists [limits] (%s)", err);
    unlink("/tmp/picolm-test-sec.ini");

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_usage("picolm", f);
    fclose(f);
    CHECK(strstr(buf, "PICOLM_PLUGIN_DIR") && strstr(buf, "reference") && strstr(buf, "auto (best here)") && strstr(buf, "-vv") &&
          strstr(buf, "-f, --file") && strstr(buf, "Exit status"),
          "--help lists PICOLM_PLUGIN_DIR, the reference and auto backends, -vv, -f and the exit status");
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    config_common_usage(f);
    fclose(f);
    CHECK(strstr(buf, "-j, --threads") && strstr(buf, "-c, --context") && strstr(buf, "--backend") && strstr(buf, "--plugin-dir") &&
          strstr(buf, "--config") && strstr(buf, "-v, --verbose") && !strstr(buf, "--temperature"),
          "the shared usage lists exactly the shared options");
    free(buf);
}

int main(void) {
    test_bounds();
    test_defaults();
    test_good_ini();
    test_errors();
    test_long_lines();
    test_cli();
    test_precedence();
    test_dump_roundtrip();
    test_conf_files();
    test_usage();
    test_shared_options();
    return CHECK_DONE();
}

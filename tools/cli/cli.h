/*
 * What picolm and every picolm-* tool that runs a model share beyond option
 * parsing (config.h): the runtime and model from the configuration, the
 * sampler chain it asks for, the context clamp, and one rule for output
 * errors and exit status:
 *   0 success; 1 runtime failure (model, files, memory, writing the output);
 *   2 usage error (a flag, an INI value, an environment variable or a name
 *     the user chose that is wrong).
 */
#ifndef PICOLM_CLI_H
#define PICOLM_CLI_H
#include <stdio.h>

#include "config.h"
#include "picolm/picolm.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* picolm --version; also written into the INIs picolm-bench --tune makes */
#define PICOLM_VERSION "0.1.0"

/* Print "TOOL: msg" and "(see TOOL --help)" on stderr; returns CLI_USAGE. */
int cli_usage_error(const char *tool, const char *msg);

/* The place to name in a message about section.key's value, with ": "
   after it: "--flag: " from the command line, "FILE:LINE: [section] key: "
   from the INI, "" for the built-in default. */
void cli_where(const picolm_config *c, const char *section, const char *key, const char *flag, char *buf, size_t n);

/* Check the environment the core reads (PICOLM_CPU_MASK): 0, or CLI_USAGE
   after printing what is wrong. */
int cli_check_env(const char *tool);

/* The runtime for c (backend, plugin dir, threads, -v).  Checks
   PICOLM_CPU_MASK and warns when -j exceeds the online CPUs first.  On
   failure prints the message and sets *rc: CLI_USAGE for a backend name
   that does not exist (saying where it was set), else CLI_FAIL. */
picolm_runtime *cli_runtime(const picolm_config *c, const char *tool, int *rc);
/* The model at path on a runtime of its own for c (limits from c too);
   text = 0: without its tokenizer (weights_only).  Failures as
   cli_runtime's.  cli_free_model frees both. */
picolm_model *cli_load_model(const picolm_config *c, const char *tool, const char *path, int text, int *rc);
void cli_free_model(picolm_model *m);

/* The model file is mapped: another program that truncates it would kill
   the process with SIGBUS at the next read of a lost page.  cli_load_model
   installs a handler that maps zeros over the whole model instead (the
   weights are lost either way) and notes it: a front end checks
   cli_model_fault() after each step and gives up with a message. */
int cli_model_fault(void);

/* The context to use: c->context (0 = the model's), clamped to the model's
   training context n_ctx_train.  A clamp of a context the user set is a
   warning; of the built-in default, a note under -v.  Call once. */
int cli_context(const picolm_config *c, const char *tool, int n_ctx_train);

/* Flush and close stdout; a write error (disk full...) is reported as
   "TOOL: cannot write the output: REASON".  Returns CLI_OK or CLI_FAIL.
   A closed pipe ends quietly: SIGPIPE, or EPIPE when it is ignored. */
int cli_close_stdout(const char *tool);
/* The parameters the sampler plugins found through cfg's plugin_dir declare:
   a --help section, or (as_ini) comment lines for --dump-config. */
void cli_print_sampler_keys(const picolm_config *cfg, FILE *out, int as_ini);

/* The sampler chain cfg asks for, as picolm_sampler_new takes it: its
   chain, "auto" expanded (greedy for temperature 0, else the stages whose
   parameters are not neutral; json_schema first with --json-schema, else
   json first with --json), the [sampler] keys with where each was set
   (json_schema: the schema's text, read from its file), extra[0..n_extra)
   last of all (a request's or --tools' keys, at most CLI_EXTRA_KEYS; a
   json_schema among them puts that stage first), and the seed.  p points
   into the rest.  0, or -1 with a message (free it either way). */
enum { CLI_TYPED_KEYS = 8, CLI_EXTRA_KEYS = 4, CLI_SAMPLER_PARAMS = PICOLM_MAX_PARAMS + CLI_TYPED_KEYS + 1 + CLI_EXTRA_KEYS };
typedef struct cli_sampler_spec {
    picolm_sampler_params p;
    picolm_param kv[CLI_SAMPLER_PARAMS];
    const char *where[CLI_SAMPLER_PARAMS];
    char places[CLI_SAMPLER_PARAMS][300];
    char typed[CLI_TYPED_KEYS][32];
    char chain[320];
    char *schema;            /* --json-schema's text (malloc'd), or NULL */
} cli_sampler_spec;
int cli_sampler_spec_of(const picolm_config *cfg, const picolm_param *extra, int n_extra, cli_sampler_spec *s, char *err,
                        size_t errlen);
void cli_sampler_spec_free(cli_sampler_spec *s);
/* That chain over m's vocabulary: 0, or -1 with a message. */
int cli_sampler_new(picolm_sampler **out, picolm_model *m, const picolm_config *cfg, char *err, size_t errlen);
int cli_sampler_new_with(picolm_sampler **out, picolm_model *m, const picolm_config *cfg, const picolm_param *extra, int n_extra,
                         char *err, size_t errlen);

/* The name of the grammar stage cfg puts first: "json_schema" with
   --json-schema, "json" with --json, else NULL (the output is free text). */
const char *cli_grammar(const picolm_config *cfg);

/* All of f, NUL-terminated (*len bytes before the NUL; at most 64 MiB), or
   NULL with errno set. */
char *cli_read_all(FILE *f, size_t *len);

/* --json-schema's text: the value itself when it starts with '{' (after
   blanks), else the file it names, read whole (free it).  NULL with a
   message naming where the value was set when the file cannot be read. */
char *cli_schema_text(const picolm_config *cfg, char *err, size_t errlen);

/* "f16", "q8_0": the [engine] kv_type names. */
const char *cli_kv_type_name(int kv_type);
#endif

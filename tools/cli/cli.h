/*
 * What picolm and every picolm-* tool that runs a model share beyond option
 * parsing (config.h): building the engine from the configuration, the
 * context clamp, and one rule for output errors and exit status:
 *   0 success; 1 runtime failure (model, files, memory, writing the output);
 *   2 usage error (a flag, an INI value, an environment variable or a name
 *     the user chose that is wrong).
 */
#ifndef PICOLM_CLI_H
#define PICOLM_CLI_H
#include <stdio.h>

#include "config.h"
#include "engine.h"
#include "sampling.h"

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

/* Build the engine for c (backend, plugin dir, threads, limits) and the
   given model (NULL: plugins only).  Checks PICOLM_CPU_MASK and warns when
   -j exceeds the online CPUs first.  On failure prints the message and
   sets *rc: CLI_USAGE for a backend name that does not exist (saying
   where it was set), else CLI_FAIL. */
engine *cli_build_engine(const picolm_config *c, const char *tool, const char *model, int tokenizer, int *rc);

/* The engine's model file is mapped: another program that truncates it
   would kill the process with SIGBUS at the next read of a lost page.
   cli_build_engine installs a handler that maps zeros over the whole model
   instead (the weights are lost either way) and notes it: a front end
   checks cli_model_fault() after each step and gives up with a message. */
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

/* The sampler chain cfg asks for: its chain, "auto" expanded (greedy for
   temperature 0, else the stages whose parameters are not neutral;
   json_schema first with --json-schema, else json first with --json), the
   [sampler] keys (json_schema: the schema's text, read from its file) and
   the seed.  0, or -1 with a message. */
int cli_sampling_build(sampling **out, const pl_registry *reg, const picolm_config *cfg, const picolm_vocab *vocab,
                       char *err, size_t errlen);

/* The same with more sampler keys after cfg's (a request's or --tools'
   schema: json_schema among them puts that stage first). */
int cli_sampling_build_with(sampling **out, const pl_registry *reg, const picolm_config *cfg, const picolm_vocab *vocab,
                            const picolm_param *extra, int n_extra, char *err, size_t errlen);

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
#endif

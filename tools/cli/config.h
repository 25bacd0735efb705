/*
 * Effective configuration: built-in defaults < INI file < command line.
 * The INI is parsed with inih; an unknown section/key or a malformed value is
 * an error naming the file and line.
 */
#ifndef PICOLM_CONFIG_H
#define PICOLM_CONFIG_H
#include <stddef.h>
#include <stdint.h>

#define PICOLM_MAX_PARAMS 64
#define PICOLM_MAX_STOPS 16
#define PICOLM_MAX_KEYS 48      /* room for config.c's key table */

/* A raw key = value of the [sampler] section (or a sampler CLI flag), handed
   to sampler plugins as picolm_param.  Known keys are also parsed into the
   typed fields below.  line = INI line (0 when it came from the CLI). */
typedef struct picolm_config_param {
    char key[64];
    char value[256];
    char file[256];
    int line;
} picolm_config_param;

typedef struct picolm_config {
    /* where the values came from (for --dump-config) */
    char config_path[1024];     /* "" when no INI was read */

    /* [engine] */
    int threads;                /* 0 = number of online CPUs */
    int context;                /* 0 = model's context length */
    char backend[64];           /* "auto" or a backend plugin name */
    int kv_type;                /* KV_F16 or KV_Q8_0 (model.h), parsed from "f16" / "q8_0" */
    char plugin_dir[1024];      /* "" = next to the executable, then install dir */
    uint64_t ram_bytes;         /* 0 = unknown; else warn when the plan exceeds it */
    int batch;                  /* prefill chunk size (tokens) */

    /* [limits] what a model file may contain (hostile-input guards) */
    uint64_t max_tensors, max_metadata, max_string, max_array, max_dim;

    /* [generate] */
    int max_tokens;             /* -n */
    uint64_t seed;              /* -s */
    int ignore_eos;
    int json_mode;              /* --json */
    char cache_path[1024];      /* --cache */
    int special;                /* parse special tokens in the prompt (-1 = auto) */
    int chat;                   /* --chat */
    char chat_template[64];
    char system_prompt[4096];
    int truncate;               /* --truncate: keep the last tokens */
    int n_stops;
    char stops[PICOLM_MAX_STOPS][128];

    /* [sampler] typed view of the common keys */
    char sampler_chain[256];    /* e.g. "penalties,top_k,top_p,min_p,temperature,dist" or "auto" */
    float temperature;          /* -t; 0 = greedy */
    float top_p;                /* -k (picoLM meaning) */
    int top_k;
    float min_p;
    float repeat_penalty;
    float freq_penalty;
    float presence_penalty;
    int penalty_last_n;
    /* every [sampler] key/value in order, for the sampler plugins */
    int n_params;
    picolm_config_param params[PICOLM_MAX_PARAMS];

    /* where each key of the table was set: 0 = built-in default,
       -1 = command line, > 0 = line of config_path (see config_where) */
    int key_line[PICOLM_MAX_KEYS];

    /* CLI-only */
    const char *model_path;     /* positional MODEL */
    const char *prompt;         /* -p; NULL = read stdin (or -f) */
    const char *prompt_file;    /* -f FILE */
    int list_plugins;
    int dump_config;
    int show_help;
    int show_version;
    int verbose;
    int fit;                    /* --fit */
} picolm_config;

/* Built-in defaults (picoLM's: -n 256 -t 0.8 -k 0.9 -s 42 -c 2048 -j 4...). */
void config_defaults(picolm_config *c);

/* Read an INI file on top of c.  On error returns non-zero and writes
   "FILE:LINE: message" to err. */
int config_load_ini(picolm_config *c, const char *path, char *err, size_t errlen);

/* Parse argv on top of c.  First pass (config_find_ini) picks the INI path
   from --config or PICOLM_CONFIG so that flags can override it afterwards.
   Returns 0 ok, non-zero with message in err on a bad flag/value. */
const char *config_find_ini(int argc, char **argv);
int config_parse_args(picolm_config *c, int argc, char **argv, char *err, size_t errlen);

/* Set one [sampler]-style parameter (typed field too if known).  Replaces
   an existing entry with the same key (so params[] holds each key once);
   "chain" only sets sampler_chain (it is the core's, not a plugin's).
   params[] starts with the common keys at their defaults (temperature,
   top_p, top_k, min_p, repeat_penalty, freq_penalty, presence_penalty,
   penalty_last_n) with file "" and line 0; keys set on the command line have
   file "command line" and line 0; keys from an INI have its path and line.
   The message in err is prefixed "FILE:LINE: " when file and line are set. */
int config_set_param(picolm_config *c, const char *key, const char *value,
                     const char *file, int line, char *err, size_t errlen);

/* Where a param came from, for messages: "FILE:LINE", "command line" or
   "built-in default". */
void config_param_where(const picolm_config_param *p, char *buf, size_t n);

/* Where section.key got its value: "FILE:LINE", "command line" or
   "built-in default" (for messages about values checked after parsing). */
void config_where(const picolm_config *c, const char *section, const char *key, char *buf, size_t n);
/* Non-zero when section.key was set by the INI or the command line. */
int config_is_set(const picolm_config *c, const char *section, const char *key);
/* A size with a K/M/G/T suffix (binary units), as the INI's ram key: 0 or -1. */
int config_parse_size(const char *v, uint64_t *out);

/* ---- the options shared by every tool that runs a model ----
   -j/--threads, -c/--context, --backend, --plugin-dir, --kv-type, --config
   and -v: the same table entries, parser and help lines as picolm's own. */

/* A tool's defaults (picolm's, but context 0: the model's), then the INI
   named by --config / $PICOLM_CONFIG.  0, or -1 with "FILE:LINE: message"
   in err. */
int config_tool_init(picolm_config *c, int argc, char **argv, char *err, size_t errlen);
/* If argv[*i] is a shared option, apply it (advancing *i past a separate
   value) and return 1; return 0 when it is not one (the tool's own or a
   positional), -1 with a message in err on a bad or missing value. */
int config_common_arg(picolm_config *c, int argc, char **argv, int *i, char *err, size_t errlen);
/* The help lines of the shared options, as picolm --help shows them, with
   a tool's defaults (config_tool_init). */
void config_common_usage(void *FILE_stream);

/* Print the effective configuration as a valid INI file. */
void config_dump(const picolm_config *c, void *FILE_stream);

/* Usage text for --help. */
void config_usage(const char *argv0, void *FILE_stream);

/* The key table's numeric keys (tests put a value on each bound and one
   step beyond): the i-th one, or 0 past the last. */
enum config_num_kind { CONFIG_NUM_INT, CONFIG_NUM_FLOAT, CONFIG_NUM_U64, CONFIG_NUM_SIZE };
typedef struct config_numeric_key {
    const char *section, *key;
    enum config_num_kind kind; /* field type: int, float, uint64_t, uint64_t (bytes) */
    double lo, hi;             /* inclusive bounds (u64 and size: 0 .. 2^64-1) */
    size_t off;                /* the field's offset in picolm_config */
    const char *flag;          /* long option without "--", NULL when none */
} config_numeric_key;
int config_numeric_key_at(size_t i, config_numeric_key *out);

#endif

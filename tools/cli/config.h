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
#define PICOLM_MAX_KEYS 80      /* room for config.c's table (keys and flags) */

/* A raw key = value of the [sampler] section (or a sampler CLI flag), handed
   to sampler plugins as picolm_param.  Known keys are also parsed into the
   typed fields below.  line = INI line (0 when it came from the CLI). */
typedef struct picolm_config_param {
    char key[64];
    char value[256];
    char file[256];
    int line;
} picolm_config_param;

/* Every INI key, one row each (as inih's CFG(section, name, default) example):
   X(section, key, value type, C type, field, array dims, lo, hi, enum names,
     built-in default as INI text (NULL = zero / ""), --help text, flag)
   It declares the field below and, in config.c, the key's row of the table
   that drives the defaults, the INI, the flags, --dump-config and --help
   (the value types K_*, the flag forms OPT/SHARED/NOFLAG and the actions A_*
   are config.c's).  Within a section the order is --dump-config's. */
/* The default sampler chain: every stage, each left out by the core while
   its keys switch it off (top_k 0, top_p 1, min_p 0, penalties 1/0/0);
   temperature 0 keeps only the best token.  "auto" is an alias for it. */
#define PICOLM_DEFAULT_CHAIN "penalties,top_k,temperature,top_p,min_p,dist"

#define PICOLM_CONFIG_KEYS(X) \
    /* [engine] */ \
    X("engine", "threads", K_INT, int, threads, , 0, 1024, NULL, "0", \
      "worker threads, caller included; 0 = all online CPUs", SHARED("threads", 'j', "N", A_KEY)) \
    X("engine", "context", K_INT, int, context, , 0, 1 << 24, NULL, "2048", \
      "context tokens (capped at the model's); 0 = the model's", SHARED("context", 'c', "N", A_KEY)) \
    X("engine", "backend", K_NAME, char, backend, [64], 0, 0, NULL, "auto", \
      "auto (best here), reference (portable code), or scalar, sse4, avx2, avx512, neon, rvv (or an out-of-tree backend's name)", \
      SHARED("backend", 0, "NAME", A_KEY)) \
    /* PICOLM_KV_F16 or PICOLM_KV_Q8_0 (picolm.h): the position in the enum names */ \
    X("engine", "kv_type", K_ENUM, int, kv_type, , 0, 0, "f16|q8_0", "f16", \
      "KV cache element type: f16 or q8_0 (half the memory)", SHARED("kv-type", 0, "T", A_KEY)) \
    X("engine", "plugin_dir", K_STR, char, plugin_dir, [1024], 0, 0, NULL, NULL, \
      "plugin dir searched first; then $PICOLM_PLUGIN_DIR, next to the binary", SHARED("plugin-dir", 0, "DIR", A_KEY)) \
    X("engine", "ram", K_SIZE, uint64_t, ram_bytes, , 0, 0, NULL, "0", \
      "RAM budget (512M, 1G); warn when the plan exceeds it; 0 = none", OPT("ram", 0, "SIZE", A_KEY)) \
    X("engine", "batch", K_INT, int, batch, , 1, 65536, NULL, "64", \
      "prompt tokens processed per forward step (prefill chunk)", OPT("batch", 0, "N", A_KEY)) \
    /* [limits]: what a model file may contain; gguf_default_limits (test_config checks) */ \
    X("limits", "max_tensors", K_U64, uint64_t, max_tensors, , 0, 0, NULL, "65536", \
      "most tensors a model file may declare", NOFLAG) \
    X("limits", "max_metadata", K_U64, uint64_t, max_metadata, , 0, 0, NULL, "1048576", \
      "most metadata key/value pairs a model file may declare", NOFLAG) \
    X("limits", "max_string", K_U64, uint64_t, max_string, , 0, 0, NULL, "16777216", \
      "longest string in a model file (bytes)", NOFLAG) \
    X("limits", "max_array", K_U64, uint64_t, max_array, , 0, 0, NULL, "33554432", \
      "most elements in one metadata array (e.g. the vocabulary)", NOFLAG) \
    X("limits", "max_dim", K_U64, uint64_t, max_dim, , 0, 0, NULL, "4294967296", \
      "largest single tensor dimension", NOFLAG) \
    /* [generate] */ \
    X("generate", "max_tokens", K_INT, int, max_tokens, , -1, 1 << 30, NULL, "256", \
      "tokens to generate; -1 = until EOS or the context is full", OPT("max-tokens", 'n', "N", A_KEY)) \
    X("generate", "seed", K_U64, uint64_t, seed, , 0, 0, NULL, "42", "random seed", OPT("seed", 's', "N", A_KEY)) \
    X("generate", "ignore_eos", K_BOOL, int, ignore_eos, , 0, 0, NULL, "false", \
      "keep generating past end-of-generation tokens (EOS, <|eot_id|>, ...)", OPT("ignore-eos", 0, NULL, A_TRUE)) \
    X("generate", "json", K_BOOL, int, json_mode, , 0, 0, NULL, "false", \
      "constrain the output to valid JSON", OPT("json", 0, NULL, A_TRUE)) \
    X("generate", "json_schema", K_STR, char, json_schema, [8192], 0, 0, NULL, NULL, \
      "constrain the output to JSON valid against the JSON Schema in FILE (or given inline: {...}); replaces --json", \
      OPT("json-schema", 0, "FILE", A_KEY)) \
    X("generate", "tools", K_STR, char, tools_path, [1024], 0, 0, NULL, NULL, \
      "tool calling: the functions the model may call, an OpenAI tools array in FILE (or inline: [...]); the reply is " \
      "one line of JSON on stdout, {\"name\", \"arguments\"} for a call, {\"content\"} for text (docs/agents.md)", \
      OPT("tools", 0, "FILE", A_KEY)) \
    X("generate", "tool_choice", K_STR, char, tool_choice, [80], 0, 0, NULL, "auto", \
      "with --tools: auto (text or a call), required (a call), none (text), or a function's name (a call to it)", \
      OPT("tool-choice", 0, "CHOICE", A_KEY)) \
    X("generate", "messages", K_STR, char, messages_path, [1024], 0, 0, NULL, NULL, \
      "the conversation so far, an OpenAI messages array in FILE (- for stdin), tool calls and results included; " \
      "-p adds a user message; the reply is printed as with --tools", OPT("messages", 0, "FILE", A_KEY)) \
    X("generate", "cache", K_STR, char, cache_path, [1024], 0, 0, NULL, NULL, \
      "KV cache file to reuse a saved prompt prefix; empty = none", OPT("cache", 0, "FILE", A_KEY)) \
    /* -1 = auto (on in chat mode) */ \
    X("generate", "special", K_TRI, int, special, , 0, 0, NULL, "auto", \
      "parse special tokens in the prompt", OPT("special", 0, NULL, A_TRUE)) \
    X("generate", "chat", K_BOOL, int, chat, , 0, 0, NULL, "false", \
      "chat mode: apply the chat template; interactive on a terminal, one reply when piped or with -p", OPT("chat", 0, NULL, A_TRUE)) \
    X("generate", "chat_template", K_NAME, char, chat_template, [64], 0, 0, NULL, "auto", \
      "chat template: auto (the model's) or chatml, llama2, llama2-sys(-bos, -strip), mistral-v7, phi3, zephyr, gemma, llama3, " \
      "glmedge; implies --chat", OPT("chat-template", 0, "NAME", A_KEY)) \
    X("generate", "system", K_STR, char, system_prompt, [4096], 0, 0, NULL, NULL, \
      "system prompt for chat; implies --chat", OPT("system", 0, "TEXT", A_KEY)) \
    X("generate", "truncate", K_BOOL, int, truncate, , 0, 0, NULL, "false", \
      "over-long prompt: keep its last tokens instead of failing", OPT("truncate", 0, NULL, A_TRUE)) \
    /* repeatable: n_stops of them */ \
    X("generate", "stop", K_STOP, char, stops, [PICOLM_MAX_STOPS][128], 0, 0, NULL, NULL, \
      "stop at STR (repeatable; replaces the INI's list)", OPT("stop", 0, "STR", A_KEY)) \
    /* [server]: picolm-server's settings (its flags of the same names override them) */ \
    X("server", "host", K_STR, char, srv_host, [256], 0, 0, NULL, "127.0.0.1", \
      "address to bind: 127.0.0.1 = this machine only; 0.0.0.0 or :: = the network", NOFLAG) \
    X("server", "port", K_INT, int, srv_port, , 1, 65535, NULL, "8080", "TCP port", NOFLAG) \
    X("server", "api_key", K_STR, char, srv_api_key, [256], 0, 0, NULL, NULL, \
      "require this Bearer key on /v1/* and /metrics (not set: none; empty: an error)", NOFLAG) \
    X("server", "allow_host", K_STR, char, srv_allow_host, [1024], 0, 0, NULL, NULL, \
      "Host names answered beside IP literals, localhost and host (NAME,NAME; .domain; *)", NOFLAG) \
    X("server", "cors", K_STR, char, srv_cors, [1024], 0, 0, NULL, NULL, \
      "origins whose pages may call the API (ORIGIN,ORIGIN; *)", NOFLAG) \
    X("server", "header_timeout", K_INT, int, srv_header_timeout, , 1, 3600, NULL, "10", \
      "seconds for a complete request header", NOFLAG) \
    X("server", "max_connections_per_ip", K_INT, int, srv_max_per_ip, , 0, 4096, NULL, "0", \
      "connections from one address; 0 = max_connections / 2 + 8", NOFLAG) \
    X("server", "max_body", K_SIZE, uint64_t, srv_max_body, , 0, 0, NULL, "1M", "largest request body", NOFLAG) \
    X("server", "max_connections", K_INT, int, srv_max_connections, , 1, 4096, NULL, "32", \
      "requests in flight at once; more get 429", NOFLAG) \
    X("server", "queue", K_INT, int, srv_queue, , 1, 65536, NULL, "16", \
      "requests waiting for the model; more get 503", NOFLAG) \
    X("server", "idle_timeout", K_INT, int, srv_idle_timeout, , 1, 86400, NULL, "60", \
      "seconds a connection may stay silent", NOFLAG) \
    X("server", "max_prompt_tokens", K_INT, int, srv_max_prompt_tokens, , 0, 1 << 24, NULL, "0", \
      "longer prompts get a 400; 0 = the context", NOFLAG) \
    X("server", "slots", K_INT, int, srv_slots, , 1, 256, NULL, "4", "sequences generated at once", NOFLAG) \
    X("server", "prefill_chunk", K_INT, int, srv_prefill_chunk, , 1, 4096, NULL, "64", \
      "prompt tokens per step (oldest prompt first)", NOFLAG) \
    X("server", "kv_ram", K_SIZE, uint64_t, srv_kv_ram, , 0, 0, NULL, "0", \
      "the KV-cache pool all sequences share; 0 = slots full contexts", NOFLAG) \
    X("server", "kv_block", K_INT, int, srv_kv_block, , 1, 4096, NULL, "16", "positions per KV block", NOFLAG) \
    /* [sampler]: the keys the front end knows by name (typed copies of \
       params[]); sampler plugins own more */ \
    X("sampler", "chain", K_CHAIN, char, sampler_chain, [256], 0, 0, NULL, PICOLM_DEFAULT_CHAIN, \
      "sampler plugin names in order; a stage its keys switch off (top_k 0, top_p 1, ...) is left out", \
      OPT("sampler", 0, "CHAIN", A_KEY)) \
    X("sampler", "temperature", K_FLOAT, float, temperature, , 0, 100, NULL, "0.8", \
      "sampling temperature; 0 = greedy", OPT("temperature", 't', "X", A_KEY)) \
    X("sampler", "top_p", K_FLOAT, float, top_p, , 0, 1, NULL, "0.9", \
      "nucleus sampling probability mass; 1 = off", OPT("top-p", 'k', "X", A_KEY)) \
    X("sampler", "top_k", K_INT, int, top_k, , 0, 1 << 24, NULL, "0", \
      "keep the k most likely tokens; 0 = off", OPT("top-k", 0, "N", A_KEY)) \
    X("sampler", "min_p", K_FLOAT, float, min_p, , 0, 1, NULL, "0", \
      "drop tokens below min_p x the top probability; 0 = off", OPT("min-p", 0, "X", A_KEY)) \
    X("sampler", "repeat_penalty", K_FLOAT, float, repeat_penalty, , 0.01, 100, NULL, "1", \
      "divide logits of recent tokens by this; 1 = off", OPT("repeat-penalty", 0, "X", A_KEY)) \
    X("sampler", "freq_penalty", K_FLOAT, float, freq_penalty, , -100, 100, NULL, "0", \
      "subtract this x count of each recent token; 0 = off", OPT("freq-penalty", 0, "X", A_KEY)) \
    X("sampler", "presence_penalty", K_FLOAT, float, presence_penalty, , -100, 100, NULL, "0", \
      "subtract this from every recent token; 0 = off", OPT("presence-penalty", 0, "X", A_KEY)) \
    X("sampler", "penalty_last_n", K_INT, int, penalty_last_n, , -1, 1 << 24, NULL, "64", \
      "recent tokens the penalties look at; -1 = whole context, 0 = none", OPT("penalty-last-n", 0, "N", A_KEY))

typedef struct picolm_config {
    /* where the values came from (for --dump-config) */
    char config_path[1024];     /* "" when no INI was read */

    /* one field per key of PICOLM_CONFIG_KEYS */
#define PICOLM_CONFIG_FIELD(section, key, vtype, ctype, field, dims, ...) ctype field dims;
    PICOLM_CONFIG_KEYS(PICOLM_CONFIG_FIELD)
#undef PICOLM_CONFIG_FIELD
    int n_stops;                /* entries of stops[] in use */

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

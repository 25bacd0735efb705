/*
 * The OpenAI wire format of picolm-server: request bodies in, response
 * bodies and server-sent-event chunks out.  No HTTP and no engine here, so
 * every rule (types, ranges, unsupported values) is testable on its own.
 * JSON through json-c (strict parser, UTF-8 validated).
 */
#ifndef PICOLM_SERVER_API_H
#define PICOLM_SERVER_API_H
#include <stddef.h>
#include <stdint.h>

#define API_MAX_STOP 4
#define API_MAX_TOP_LOGPROBS 20

/* An error for the client: HTTP status and OpenAI's error object. */
typedef struct api_error {
    int status;              /* 400, 401, 404, 405, 413, 503, ... */
    char type[40];           /* "invalid_request_error", ... */
    char param[64];          /* offending parameter, "" for none */
    char code[40];           /* "", or e.g. "context_length_exceeded" */
    char message[256];
} api_error;

int api_fail(api_error *e, int status, const char *type, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* A call an assistant message made (sent back in a later request). */
typedef struct api_call {
    char *id, *name;
    char *arguments;   /* JSON text */
} api_call;

typedef struct api_msg {
    char *role;     /* system, user, assistant, tool */
    char *content;  /* UTF-8, NUL-terminated */
    api_call *calls; /* assistant: its tool_calls */
    int n_calls;
    char *tool_call_id; /* tool: the call it answers */
} api_msg;

/* A function of "tools" (toolcall.h). */
typedef struct api_tool {
    char *name, *description; /* description: NULL when absent */
    char *parameters;         /* JSON text, NULL when absent */
} api_tool;

enum api_tool_choice { API_TOOL_AUTO = 0, API_TOOL_NONE, API_TOOL_REQUIRED, API_TOOL_NAMED };

/* Which optional values the request set (the others come from the config). */
enum {
    API_SET_TEMPERATURE = 1 << 0,
    API_SET_TOP_P = 1 << 1,
    API_SET_TOP_K = 1 << 2,
    API_SET_MIN_P = 1 << 3,
    API_SET_SEED = 1 << 4,
    API_SET_PRESENCE = 1 << 5,
    API_SET_FREQUENCY = 1 << 6,
    API_SET_MAX_TOKENS = 1 << 7,
};

typedef struct api_request {
    int chat;               /* /v1/chat/completions (else /v1/completions) */
    unsigned set;           /* API_SET_* */
    char *model;            /* as sent, or NULL */
    api_msg *msgs;          /* chat */
    int n_msgs;
    char *prompt;           /* completions */
    int stream, include_usage;
    int max_tokens;
    double temperature, top_p, min_p, presence_penalty, frequency_penalty;
    int top_k;
    uint64_t seed;
    char *stop[API_MAX_STOP];
    int n_stop;
    int json_object;        /* response_format {"type": "json_object"} */
    char *json_schema;      /* response_format {"type": "json_schema"}: the schema's text */
    api_tool *tools;        /* "tools" */
    int n_tools;
    int tool_choice;        /* enum api_tool_choice ("auto" when absent) */
    char *tool_name;        /* API_TOOL_NAMED: the function */
    int logprobs;           /* return log-probabilities of the chosen tokens */
    int top_logprobs;       /* and of the N most likely alternatives */
} api_request;

/* Parse and check a request body.  0, or -1 with e filled (status 400). */
int api_parse_request(const char *body, size_t len, int chat, api_request *r, api_error *e);
void api_free_request(api_request *r);

/* Growing text buffer for the bodies below (malloc'd, NUL-terminated). */
typedef struct api_buf {
    char *s;
    size_t n, cap;
    int oom;
} api_buf;
void api_buf_add(api_buf *b, const char *s, size_t n);
void api_buf_free(api_buf *b);

/* The error body {"error": {...}}. */
void api_error_body(const api_error *e, api_buf *out);

/* One generated token, for logprobs. */
typedef struct api_alt {
    const char *text;
    size_t len;
    float logprob;
} api_alt;
typedef struct api_token {
    const char *text;       /* the token's bytes (may be part of a UTF-8 character) */
    size_t len;
    float logprob;
    const api_alt *top;     /* top_logprobs alternatives, most likely first */
    int n_top;
} api_token;

typedef struct api_usage {
    int prompt_tokens, completion_tokens;
    int cached_tokens;       /* prompt tokens whose K/V were reused */
} api_usage;

/* Identity of one response: "chatcmpl-..."/"cmpl-..." id, creation time, model. */
typedef struct api_meta {
    const char *id;
    long long created;
    const char *model;
    uint64_t seed;           /* the sampler's seed: in the body, and a stream's first chunk */
} api_meta;

/* A tool call of a reply, or the part of it a streamed chunk carries
   (NULL fields: not in it). */
typedef struct api_call_out {
    const char *id;
    const char *name;
    size_t name_len;
    const char *args;
    size_t args_len;
} api_call_out;

/* Whole (non-streamed) response.  finish: "stop", "length" or "tool_calls";
   call (NULL: none): the message's tool call, text its content (null when
   empty). */
void api_response_body(const api_request *r, const api_meta *m, const char *text, size_t len, const api_token *toks,
                       int n_toks, const char *finish, const api_usage *u, const api_call_out *call, api_buf *out);

/* One server-sent event ("data: {...}\n\n") of a stream.  The first chunk of
   a chat stream carries the role (first = 1); a chunk with finish != NULL
   ends the choice; usage != NULL makes the usage chunk (choices empty). */
void api_chunk_event(const api_request *r, const api_meta *m, int first, const char *text, size_t len,
                     const api_token *toks, int n_toks, const char *finish, const api_usage *usage, api_buf *out);
/* A chunk with a tool call's delta: its id and name (the first), or a
   fragment of its arguments. */
void api_call_event(const api_meta *m, int first, const api_call_out *call, api_buf *out);

/* GET /v1/models (one = 0: the list), or /v1/models/{id} (one = 1: the model). */
void api_models_body(const char *model_id, long long created, int one, api_buf *out);

/* 1 when s[0..n) is UTF-8 as RFC 3629 defines it: no overlong forms, no
   surrogates, nothing above U+10FFFF, and no NUL. */
int api_utf8_valid(const char *s, size_t n);

/* Byte length of the longest prefix of s[0..n) that ends on a UTF-8
   character boundary (what can be sent as JSON text now). */
size_t api_utf8_complete(const char *s, size_t n);

#endif

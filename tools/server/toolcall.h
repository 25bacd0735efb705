/*
 * Tool calls and JSON Schema output in picolm-server's OpenAI API:
 * "tools", "tool_choice", assistant "tool_calls" and "tool" messages,
 * response_format "json_schema" in requests; a reply's tool call, whole
 * or streamed as OpenAI streams it (the first delta with the call's id and
 * name, then fragments of its arguments), in replies.  The prompt and the
 * constraint come from the core (picolm.h: picolm_chat_render_tools,
 * picolm_tool_schema, the json_schema sampler).
 */
#ifndef PICOLM_SERVER_TOOLCALL_H
#define PICOLM_SERVER_TOOLCALL_H
#include <json-c/json.h>

#include "api.h"
#include "picolm/picolm.h"

/* ---- requests (api.c hands these fields over) ---- */

int api_parse_tools(json_object *v, api_request *r, api_error *e);
int api_parse_tool_choice(json_object *v, api_request *r, api_error *e);
/* response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}} */
int api_parse_schema_format(json_object *v, api_request *r, api_error *e);
/* A message's tool fields (tool_calls, tool_call_id, name): 0 taken,
   1 not one of them, -1 an error. */
int api_parse_message_field(const char *key, json_object *v, api_msg *m, size_t i, api_error *e);
/* The rules across fields, once the request is parsed: 0 or -1. */
int api_check_tools(api_request *r, api_error *e);
void api_free_tools(api_request *r);

/* 1 when the request is rendered with tools (tools, or tool calls and
   results among the messages). */
int api_has_tool_parts(const api_request *r);
/* 1 when the reply is constrained to a call (tools and tool_choice not
   "none"); *forced: the reply must be the call. */
int api_calls_tools(const api_request *r, int *forced);
/* The request's tools and messages as the core takes them (views into r;
   free the two arrays). */
int api_tool_views(const api_request *r, picolm_tool **tools, picolm_chat_msg **msgs, picolm_tool_call **calls);
/* A message from the core about the call's schema, its place named the
   client's way ("tools[1] (get_weather): parameters: #/properties/x: ...",
   "response_format.json_schema.schema: #/..."). */
void api_schema_error(const api_request *r, const char *msg, char *out, size_t n);

/* ---- a reply with a possible tool call (job.c) ---- */

typedef struct job_tools job_tools;
job_tools *job_tools_new(const picolm_tool_format *f, int forced, const char *job_id);
void job_tools_free(job_tools *t);
/* Read the reply so far: the length of its free text (what may be sent
   as content). */
size_t job_tools_scan(job_tools *t, const char *text, size_t len, int final);
/* The call's deltas not yet sent, as events: *first says whether the
   stream has begun (and is set). */
void job_tools_stream(job_tools *t, const api_meta *m, const char *text, int *first, api_buf *out);
/* The finished reply: the call (NULL: none) with *finish "tool_calls" and
   *content_len its text before it. */
const api_call_out *job_tools_result(job_tools *t, const char *text, size_t len, size_t *content_len, const char **finish);
#endif

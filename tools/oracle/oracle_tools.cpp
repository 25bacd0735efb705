// A chat completion request with tools rendered as llama-server renders it.
//
//   oracle-tools MODEL REQUEST TEMPLATE OUT [--date "DD Mon YYYY"]
//
// REQUEST is an OpenAI /v1/chat/completions body (messages, with assistant
// tool_calls and tool messages; tools; tool_choice; parallel_tool_calls):
// it goes through common's OpenAI parsers and Jinja path as llama-server's
// oaicompat_chat_params_parse sends it (use_jinja, add_generation_prompt).
// TEMPLATE is a Jinja file that replaces the model's template (llama.cpp's
// models/templates/*.jinja), "-" keeps the model's.  --date fixes the date
// the templates may print (date_string, strftime_now), which is today's
// otherwise.  The prompt goes to OUT; the format llama.cpp chose, its
// generation prompt and grammar triggers go to stderr; a request the
// template refuses exits 2 with its message.
#include "chat.h"
#include "json.h"
#include "oracle.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

int main(int argc, char ** argv) {
    if (argc != 5 && !(argc == 7 && !strcmp(argv[5], "--date"))) {
        fprintf(stderr, "usage: %s MODEL REQUEST TEMPLATE|- OUT [--date \"DD Mon YYYY\"]\n", argv[0]);
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 1;
    }
    const common_json body = common_json::parse(oracle_slurp("oracle-tools", argv[2]));
    const std::string tmpl = strcmp(argv[3], "-") ? oracle_slurp("oracle-tools", argv[3]) : "";

    llama_log_set(oracle_log, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "oracle-tools: cannot load %s\n", argv[1]); return 1; }

    common_chat_templates_inputs in;
    in.messages = common_chat_msgs_parse_oaicompat(body.at("messages"));
    if (body.contains("tools")) in.tools = common_chat_tools_parse_oaicompat(body.at("tools"));
    if (body.contains("tool_choice") && body.at("tool_choice").is_string())
        in.tool_choice = common_chat_tool_choice_parse_oaicompat(body.at("tool_choice").get<std::string>());
    if (body.contains("parallel_tool_calls")) in.parallel_tool_calls = body.at("parallel_tool_calls").get<bool>();
    in.use_jinja = true;
    in.add_generation_prompt = true;
    if (argc == 7) {
        struct tm tm = {};
        if (!strptime(argv[6], "%d %b %Y", &tm)) { fprintf(stderr, "oracle-tools: bad --date %s\n", argv[6]); return 1; }
        tm.tm_hour = 12;
        in.now = std::chrono::system_clock::from_time_t(mktime(&tm));
        in.chat_template_kwargs["date_string"] = "\"" + std::string(argv[6]) + "\"";
    }
    auto tmpls = common_chat_templates_init(model, tmpl);
    common_chat_params p;
    try {
        p = common_chat_templates_apply(tmpls.get(), in);
    } catch (const std::exception & e) { // the template refuses the request (raise_exception)
        fprintf(stderr, "oracle-tools: refused: %s\n", e.what());
        return 2;
    }
    fprintf(stderr, "format: %s\ngeneration prompt: %s\n", common_chat_format_name(p.format), p.generation_prompt.c_str());
    for (const auto & t : p.grammar_triggers) fprintf(stderr, "trigger: %s\n", t.value.c_str());
    FILE * o = fopen(argv[4], "wb");
    if (!o || fwrite(p.prompt.data(), 1, p.prompt.size(), o) != p.prompt.size() || fclose(o) != 0) {
        fprintf(stderr, "oracle-tools: cannot write %s\n", argv[4]);
        return 1;
    }
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

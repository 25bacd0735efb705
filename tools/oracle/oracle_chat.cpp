// A conversation rendered by llama.cpp with a model's own chat template.
//
//   oracle-chat MODEL CONVERSATION --builtin OUT
//       llama_chat_apply_template with the template stored in MODEL: llama.cpp
//       detects a built-in template from its text (llama-cli without --jinja)
//   oracle-chat MODEL CONVERSATION --jinja OUT [--no-think]
//       common's Jinja path, as llama-server renders a /v1/chat/completions
//       request (use_jinja, add_generation_prompt; --no-think is the request's
//       chat_template_kwargs {"enable_thinking": false})
//
// CONVERSATION: messages separated by "\n---\n"; a message's first line is
// its role, every byte after that line is its content.  The generation
// prompt is always added.
#include "chat.h"
#include "oracle.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char ** argv) {
    if (argc < 5 || (strcmp(argv[3], "--builtin") && strcmp(argv[3], "--jinja"))) {
        fprintf(stderr, "usage: %s MODEL CONVERSATION --builtin|--jinja OUT [--no-think]\n", argv[0]);
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 1;
    }
    const bool jinja = !strcmp(argv[3], "--jinja");
    const bool no_think = argc > 5 && !strcmp(argv[5], "--no-think");

    const std::string all = oracle_slurp("oracle-chat", argv[2]);
    std::vector<common_chat_msg> msgs;
    for (size_t pos = 0;;) {
        size_t end = all.find("\n---\n", pos);
        std::string m = all.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        size_t nl = m.find('\n');
        common_chat_msg msg;
        msg.role = m.substr(0, nl);
        msg.content = nl == std::string::npos ? "" : m.substr(nl + 1);
        msgs.push_back(msg);
        if (end == std::string::npos) break;
        pos = end + 5;
    }

    llama_log_set(oracle_log, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.vocab_only = true;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "oracle-chat: cannot load %s\n", argv[1]); return 1; }

    std::string out;
    if (jinja) {
        auto tmpls = common_chat_templates_init(model, "");
        common_chat_templates_inputs in;
        in.messages = msgs;
        in.use_jinja = true;
        in.add_generation_prompt = true;
        in.enable_thinking = !no_think;
        if (no_think) in.chat_template_kwargs["enable_thinking"] = "false";
        out = common_chat_templates_apply(tmpls.get(), in).prompt;
    } else {
        const char * tmpl = llama_model_chat_template(model, nullptr);
        if (!tmpl) { fprintf(stderr, "oracle-chat: %s has no chat template\n", argv[1]); return 1; }
        std::vector<llama_chat_message> cm;
        for (auto & m : msgs) cm.push_back({m.role.c_str(), m.content.c_str()});
        std::vector<char> b(1 << 16);
        int n = llama_chat_apply_template(tmpl, cm.data(), cm.size(), true, b.data(), (int) b.size());
        if (n < 0 || n > (int) b.size()) { fprintf(stderr, "oracle-chat: template not supported\n"); return 1; }
        out.assign(b.data(), n);
    }
    FILE * o = fopen(argv[4], "wb");
    if (!o || fwrite(out.data(), 1, out.size(), o) != out.size() || fclose(o) != 0) {
        fprintf(stderr, "oracle-chat: cannot write %s\n", argv[4]);
        return 1;
    }
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

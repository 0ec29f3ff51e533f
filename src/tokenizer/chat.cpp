#include "tokenizer/chat.h"

#include "util/error.h"

namespace ppolab {

std::string render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        std::string_view default_system) {
    // The template itself fails on an empty list (messages[0] is undefined).
    if (messages.empty()) fail("chat: no messages to render");
    std::string out;
    bool first_is_system = !messages.empty() && messages[0].role == "system";
    if (first_is_system) {
        out += "<|im_start|>system\n" + messages[0].content + "<|im_end|>\n";
    } else if (!default_system.empty()) {
        out += "<|im_start|>system\n";
        out += default_system;
        out += "<|im_end|>\n";
    }
    for (size_t i = first_is_system ? 1 : 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "user" || m.role == "system" || m.role == "assistant") {
            out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
        } else if (m.role == "tool") {
            if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
            out += "\n<tool_response>\n" + m.content + "\n</tool_response>";
            if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
        } else {
            fail("chat message ", i, ": role must be system, user, assistant or tool, got \"", m.role, "\"");
        }
    }
    if (add_generation_prompt) out += "<|im_start|>assistant\n";
    return out;
}

}  // namespace ppolab

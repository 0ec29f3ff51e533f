// chat.h — ChatML prompts, rendered exactly as Qwen2.5's chat template
// (chat_template.jinja, the branch without tool definitions).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ppolab {

// Qwen2.5's default system prompt, used when the first message is not a system one.
inline constexpr std::string_view kQwenDefaultSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

struct ChatMessage {
    std::string role;  // "system", "user", "assistant" or "tool"
    std::string content;
};

// "<|im_start|>system\n{system}<|im_end|>\n" (the first message if it is a
// system message, else default_system), then each message as
// "<|im_start|>{role}\n{content}<|im_end|>\n" (consecutive tool messages are
// merged into one user turn of <tool_response> blocks, as the template
// does), then "<|im_start|>assistant\n" if add_generation_prompt. An empty
// default_system writes no system turn (plain ChatML; not Qwen's template).
// Error on any other role and on an empty list (as the template fails).
std::string render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        std::string_view default_system = kQwenDefaultSystem);

}  // namespace ppolab

// Chat templates by name and their errors. Expected prompts: Jinja2 through llama-cpp-python
// 0.3.36's Jinja2ChatFormatter rendering llama.cpp's models/templates/ file of each family
// (bos "<s>", eos "</s>", strftime_now on 2025-09-03); python/tests/test_chat_template.py
// compares every recognised template with Jinja2 on many more conversations.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llmk/chat_template.hpp"
#include "llmk/error.hpp"
#include "llmk/gguf.hpp"

namespace llmk {
namespace {

const std::vector<ChatMessage> kConv{{"system", " S "},
                                     {"user", " Hi\n"},
                                     {"assistant", "<think>r</think>\nA"},
                                     {"user", "Q"}};

std::string render(const char* name, const std::vector<ChatMessage>& ms, bool agp = true) {
  return ChatTemplate::from_name(name).render(ms, {agp, "<s>", "</s>", "03 Sep 2025"});
}

TEST(ChatTemplate, FamiliesByNameMatchJinja2) {
  EXPECT_EQ(render("qwen3", kConv),
            "<|im_start|>system\n S <|im_end|>\n<|im_start|>user\n Hi\n<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(
      render("llama3", kConv),
      "<s><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 03 Sep "
      "2025\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_"
      "header_id|>\n\n<think>r</think>\nA<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|><|start_"
      "header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render("mistral-nemo", kConv), "<s>[INST] Hi\n[/INST]<think>r</think>\nA</s>[INST] S \n\nQ[/INST]");
  EXPECT_EQ(render("phi3", kConv),
            "<|system|>\n S <|end|>\n<|user|>\n "
            "Hi\n<|end|>\n<|assistant|>\n<think>r</think>\nA<|end|>\n<|user|>\nQ<|end|>\n"
            "<|assistant|>\n");
  EXPECT_EQ(render("deepseek-r1-qwen", kConv),
            "<s> S <｜User｜> Hi\n<｜Assistant｜>\nA<｜end▁of▁sentence｜><｜User｜>Q<｜Assistant｜><think>\n</think>");
  // Gemma 3 folds the system prompt into the first user turn; Python's str.strip() trims
  // Unicode spaces (U+3000, U+00A0) too
  EXPECT_EQ(render("gemma", {{"system", "S"}, {"user", "\xe3\x80\x80 Hi\xc2\xa0"}}, false),
            "<s><start_of_turn>user\nS\n\nHi<end_of_turn>\n");
}

TEST(ChatTemplate, TemplateExceptionsAreErrors) {
  EXPECT_THROW(render("gemma2", kConv), InvalidArgument);  // System role not supported
  EXPECT_THROW(render("mistral-v0", {{"user", "a"}, {"user", "b"}}), InvalidArgument);
  EXPECT_THROW(render("mistral-v0", {{"user", "a"}, {"system", "b"}}),
               InvalidArgument);  // alternates, but a system role
  try {
    render("gemma", {{"assistant", "a"}});
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("Conversation roles must alternate"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, BadArgumentsAreNamed) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { ChatTemplate::from_name("vicuna"); }).find("'name' = vicuna: must be one of chatml, qwen3"),
            std::string::npos);
  const std::string unknown = message([] { ChatTemplate::from_jinja("{{ messages }}\nmore"); });
  EXPECT_NE(unknown.find("'template' = 19 bytes beginning '{{ messages }}': is not a chat template llmk knows"),
            std::string::npos)
      << unknown;
  EXPECT_NE(message([] { ChatTemplate::from_jinja(""); }).find("must not be empty"), std::string::npos);
  EXPECT_NE(message([] { render("chatml", {}); }).find("'messages' = []"), std::string::npos);
  EXPECT_NE(message([] {
              render("chatml", {{"user", "a"}, {"tool", "b"}});
            }).find("'messages[1].role' = tool"),
            std::string::npos);
}

TEST(ChatTemplate, SmolLM2KeepsItsDefaultSystemPrompt) {
  const std::string path = gguf::default_model_path();
  if (path.empty()) GTEST_SKIP() << "skipped: default model not found (run scripts/fetch-model or set LLMK_MODEL)";
  const gguf::File f = gguf::File::open(path);
  const Tokenizer tok = Tokenizer::from_gguf(f);
  const ChatTemplate t = chat_template_of(tok);
  EXPECT_EQ(t.name(), "chatml");
  const std::vector<ChatMessage> user{{"user", "Hi"}};
  EXPECT_EQ(t.render(user, chat_render_options(tok)),
            render_chatml(user, true, chatml_default_system(tok.chat_template())));
  EXPECT_EQ(chat_template_of(tok, "llama3").name(), "llama3");
}

}  // namespace
}  // namespace llmk

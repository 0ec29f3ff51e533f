// Smoke: `ppolab tokenize` on the Qwen2.5 tokenizer, --text and --jsonl.
#include <cstdio>

#include "test_common.h"

using namespace ppolab;
using namespace ppolab::test;

namespace {

// stdout only: the commands print JSON there (stderr goes to the test log).
Output run_stdout(const std::string& cmd) { return run_shell(cmd, false); }
std::string binary() { return ppolab_binary(); }

}  // namespace

TEST(CmdTokenize, TextPrintsIds) {
    Output r = run_stdout("'" + binary() + "' tokenize --tokenizer '" + qwen_dir().string() + "' --text 'Hello world'");
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, "[9707,1879]\n");
}

TEST(CmdTokenize, JsonlOneArrayPerLine) {
    fs::path dir = temp_dir("cmd");
    write_file_atomic(dir / "in.jsonl", "\"Hello world\"\n\"<|im_start|>user\\nhi<|im_end|>\"\n\"\"\n");
    Output r = run_stdout("'" + binary() + "' tokenize --jsonl --tokenizer '" +
                          (qwen_dir() / "tokenizer.json").string() + "' < '" + (dir / "in.jsonl").string() + "'");
    EXPECT_EQ(r.rc, 0);
    EXPECT_EQ(r.out, "[9707,1879]\n[151644,872,198,6023,151645]\n[]\n");
    write_file_atomic(dir / "bad.jsonl", "\"ok\"\n42\n");
    Output bad = run_stdout("'" + binary() + "' tokenize --jsonl --tokenizer '" + qwen_dir().string() + "' < '" +
                            (dir / "bad.jsonl").string() + "' 2>&1");
    EXPECT_EQ(bad.rc, 1);
    EXPECT_NE(bad.out.find("stdin line 2: expected a JSON string"), std::string::npos) << bad.out;
    fs::remove_all(dir);
}

TEST(CmdTokenize, BadArgumentsAreErrors) {
    Output missing = run_stdout("'" + binary() + "' tokenize --text hi 2>&1");
    EXPECT_EQ(missing.rc, 1);
    EXPECT_NE(missing.out.find("--tokenizer"), std::string::npos) << missing.out;
    Output nofile = run_stdout("'" + binary() + "' tokenize --tokenizer /nonexistent --text hi 2>&1");
    EXPECT_EQ(nofile.rc, 1);
    EXPECT_NE(nofile.out.find("/nonexistent"), std::string::npos) << nofile.out;
}

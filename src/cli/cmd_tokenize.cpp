// cmd_tokenize.cpp — `ppolab tokenize`: token ids of text, as JSON arrays.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/command.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/input_limits.h"
#include "util/json.h"

namespace ppolab::cli {

// One line of `in` (without its newline) into `line`; false at the end of
// the stream. An Error for a line over `limit` bytes or a read error.
static bool read_bounded_line(std::FILE* in, std::string& line, uint64_t limit, int64_t n) {
    line.clear();
    int c = 0;
    while ((c = std::fgetc(in)) != EOF && c != '\n') {
        if (line.size() >= limit)
            fail("stdin line ", n, " is longer than ", input_limit_text(InputKind::json),
                 "; --jsonl reads one JSON string per line");
        line.push_back(static_cast<char>(c));
    }
    if (std::ferror(in)) fail("stdin line ", n, ": read error: ", std::strerror(errno));
    return c != EOF || !line.empty();
}

static int run_tokenize(const Args& args) {
    args.allow_only({"tokenizer", "text", "jsonl"});
    if (!args.positional().empty()) fail("unexpected argument '", args.positional()[0], "'");
    Tokenizer tok = Tokenizer::from_file(args.get("tokenizer"));
    bool jsonl = args.has("jsonl");
    if (jsonl == args.has("text")) fail("give either --text TEXT or --jsonl (one JSON string per stdin line)");
    if (!jsonl) {
        std::printf("%s\n", json(tok.encode(args.get("text"))).dump().c_str());
        return 0;
    }
    // Lines are read with a bound (the JSON file limit, util/input_limits.h):
    // a stream without a newline is refused, not held whole.
    const uint64_t limit = input_limit_bytes(InputKind::json);
    std::string line;
    for (int64_t n = 1; read_bounded_line(stdin, line, limit, n); ++n) {
        std::string where = "stdin line " + std::to_string(n);
        json value = parse_json(line, where);
        if (!value.is_string()) fail(where, ": expected a JSON string, got ", value.type_name());
        std::vector<int32_t> ids;
        try {
            ids = tok.encode(value.get_ref<const std::string&>());
        } catch (const Error& e) {
            fail(where, ": ", e.what());
        }
        std::printf("%s\n", json(ids).dump().c_str());
        std::fflush(stdout);
    }
    return 0;
}

static Command tokenize_cmd(
    "tokenize",
    "tokenize --tokenizer PATH (--text TEXT | --jsonl)\n"
    "                            print token ids as a JSON array; --jsonl: one JSON string\n"
    "                            per stdin line -> one array per line (PATH: tokenizer.json or its folder)",
    {"jsonl"}, run_tokenize);

}  // namespace ppolab::cli

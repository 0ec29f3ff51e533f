#include "tokenizer/tokenizer_json.h"

#include "util/error.h"

namespace ppolab {

namespace {

// A SAX handler that forwards every event to nlohmann's DOM builder except
// those inside model.vocab and model.merges, which it collects itself.
class Reader {
public:
    using number_integer_t = json::number_integer_t;
    using number_unsigned_t = json::number_unsigned_t;
    using number_float_t = json::number_float_t;
    using string_t = json::string_t;
    using binary_t = json::binary_t;

    explicit Reader(TokenizerJson& out) : out_(out), dom_(out.root, /*allow_exceptions=*/false) {}
    std::string error;  // first problem found (parse or table entry)

    bool null() { return table_value("null") && (mode_ != Mode::normal || dom_.null()); }
    bool boolean(bool v) { return table_value("boolean") && (mode_ != Mode::normal || dom_.boolean(v)); }
    bool number_float(number_float_t v, const string_t& s) {
        return table_value("number") && (mode_ != Mode::normal || dom_.number_float(v, s));
    }
    bool binary(binary_t& v) { return table_value("binary") && (mode_ != Mode::normal || dom_.binary(v)); }
    bool number_integer(number_integer_t v) { return integer(v) && (mode_ != Mode::normal || dom_.number_integer(v)); }
    bool number_unsigned(number_unsigned_t v) {
        if (v > static_cast<number_unsigned_t>(INT64_MAX))
            return integer(INT64_MAX) && (mode_ != Mode::normal || dom_.number_unsigned(v));
        return integer(static_cast<int64_t>(v)) && (mode_ != Mode::normal || dom_.number_unsigned(v));
    }
    bool string(string_t& s) {
        if (mode_ == Mode::vocab) return entry_error("a string");
        if (mode_ == Mode::merges) {
            if (pair_depth_ == 0) {
                size_t sp = s.find(' ');
                if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() ||
                    s.find(' ', sp + 1) != std::string::npos)
                    return merge_error("\"left right\" (two tokens, one space), got \"" + s + "\"");
                out_.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
            } else {
                pair_.push_back(std::move(s));
            }
            return true;
        }
        return dom_.string(s);
    }
    bool key(string_t& k) {
        if (mode_ == Mode::vocab) {
            key_ = std::move(k);
            return true;
        }
        if (mode_ == Mode::merges) return merge_error("a string or a pair, got an object");
        key_ = k;
        return dom_.key(k);
    }
    bool start_object(std::size_t n) {
        if (mode_ == Mode::vocab) return entry_error("an object");
        if (mode_ == Mode::merges) return merge_error("a string or a pair, got an object");
        bool enter = at_model() && key_ == "vocab";
        open_.push_back({true, parent_is_object() ? key_ : std::string()});
        if (enter) {
            mode_ = Mode::vocab;
            out_.has_vocab_object = true;
            return dom_.start_object(0);
        }
        return dom_.start_object(n);
    }
    bool end_object() {
        open_.pop_back();
        mode_ = Mode::normal;
        return dom_.end_object();
    }
    bool start_array(std::size_t n) {
        if (mode_ == Mode::vocab) return entry_error("an array");
        if (mode_ == Mode::merges) {
            if (pair_depth_ > 0) return merge_error("a pair of strings, got a nested array");
            pair_depth_ = 1;
            pair_.clear();
            return true;
        }
        bool enter = at_model() && key_ == "merges";
        open_.push_back({false, parent_is_object() ? key_ : std::string()});
        if (enter) {
            mode_ = Mode::merges;
            pair_depth_ = 0;
            out_.has_merges_array = true;
            return dom_.start_array(0);
        }
        return dom_.start_array(n);
    }
    bool end_array() {
        if (mode_ == Mode::merges && pair_depth_ > 0) {
            pair_depth_ = 0;
            if (pair_.size() != 2) return merge_error("a pair of two strings");
            out_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
            return true;
        }
        open_.pop_back();
        mode_ = Mode::normal;
        return dom_.end_array();
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& ex) {
        if (error.empty()) error = std::string("not valid JSON (") + ex.what() + ")";
        return false;
    }

private:
    enum class Mode { normal, vocab, merges };
    struct Open {
        bool is_object;
        std::string key;  // its key in the parent object ("" in an array)
    };

    bool parent_is_object() const { return !open_.empty() && open_.back().is_object; }
    // The next container opens directly inside root.model.
    bool at_model() const { return open_.size() == 2 && open_[1].is_object && open_[1].key == "model"; }

    bool table_value(const char* type) {
        if (mode_ == Mode::vocab) return entry_error(std::string("a ") + type);
        if (mode_ == Mode::merges) return merge_error(std::string("a string or a pair, got a ") + type);
        return true;
    }
    bool integer(int64_t v) {
        if (mode_ == Mode::vocab) out_.vocab.emplace_back(std::move(key_), v);
        if (mode_ == Mode::merges) return merge_error("a string or a pair, got a number");
        return true;
    }
    bool entry_error(const std::string& got) {
        error = "field 'model.vocab' entry \"" + key_ + "\" must be an integer id, got " + got;
        return false;
    }
    bool merge_error(const std::string& want) {
        error = "field 'model.merges[" + std::to_string(out_.merges.size()) + "]' must be " + want;
        return false;
    }

    TokenizerJson& out_;
    nlohmann::detail::json_sax_dom_parser<json> dom_;
    std::vector<Open> open_;
    std::string key_;
    Mode mode_ = Mode::normal;
    int pair_depth_ = 0;
    std::vector<std::string> pair_;
};

}  // namespace

TokenizerJson read_tokenizer_json(std::string_view text, std::string_view where) {
    TokenizerJson out;
    Reader reader(out);
    bool ok = json::sax_parse(text.begin(), text.end(), &reader);
    if (!ok || !reader.error.empty()) fail(where, ": ", reader.error.empty() ? "not valid JSON" : reader.error);
    return out;
}

}  // namespace ppolab

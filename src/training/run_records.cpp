#include "training/run_records.h"

#include <string>

#include "util/error.h"

namespace ppolab {

namespace {

std::string kind_of(const json& v) { return v.type_name(); }

void expect(bool ok, const std::filesystem::path& file, const std::string& field, const char* expected,
            const json& got) {
    if (!ok) fail(file.string(), ": field '", field, "' must be ", expected, ", got ", kind_of(got));
}

void expect_strings(const json& v, const std::filesystem::path& file, const std::string& field) {
    expect(v.is_array(), file, field, "an array of strings", v);
    for (size_t i = 0; i < v.size(); ++i)
        expect(v[i].is_string(), file, field + "[" + std::to_string(i) + "]", "a string", v[i]);
}

void expect_file_entry(const json& v, const std::filesystem::path& file, const std::string& field) {
    expect(v.is_object(), file, field, "an object {path, sha256}", v);
    for (const char* k : {"path", "sha256"})
        expect(v.contains(k) && v[k].is_string(), file, field + "." + k, "a string", v.value(k, json()));
}

// A chain's stage record: present, an object, with an identity block.
const json* record(const std::filesystem::path& file, json& holder) {
    if (!std::filesystem::exists(file)) return nullptr;
    holder = read_json_file(file);
    if (!holder.is_object() || !holder.contains("identity") || !holder["identity"].is_object())
        fail(file.string(), ": not a stage record (expected an object with an 'identity' block, got ",
             holder.is_object() ? "an object without one" : kind_of(holder),
             "); the run folder was edited: restore the file or start a new run");
    return &holder;
}

std::string text_at(const json& doc, const json::json_pointer& at) {
    return doc.contains(at) ? doc.at(at).dump() : "nothing";
}

}  // namespace

void validate_run_state(const json& state, const std::filesystem::path& file) {
    expect(state.is_object(), file, "(the document)", "an object", state);
    expect(state.contains("format") && state["format"].is_string(), file, "format", "a string",
           state.value("format", json()));
    if (state["format"] != "ppolab-run-state")
        fail(file.string(), ": field 'format' must be 'ppolab-run-state', got ", state["format"].dump());
    expect(state.contains("options") && state["options"].is_object(), file, "options", "an object",
           state.value("options", json()));
    const json& o = state["options"];
    expect(o.contains("preset") && o["preset"].is_string(), file, "options.preset", "a string",
           o.value("preset", json()));
    for (const char* k : {"config", "set"}) expect_strings(o.value(k, json()), file, std::string("options.") + k);
    expect(o.contains("model") && (o["model"].is_null() || o["model"].is_string()), file, "options.model",
           "null or a string", o.value("model", json()));
    if (o.contains("compare")) expect_strings(o["compare"], file, "options.compare");
    if (o.contains("feedback") && !o["feedback"].is_null()) {
        const json& f = o["feedback"];
        expect(f.is_object(), file, "options.feedback", "null or an object", f);
        expect(f.contains("files") && f["files"].is_array(), file, "options.feedback.files", "an array",
               f.value("files", json()));
        for (size_t i = 0; i < f["files"].size(); ++i)
            expect_file_entry(f["files"][i], file, "options.feedback.files[" + std::to_string(i) + "]");
        expect_file_entry(f.value("candidates", json()), file, "options.feedback.candidates");
        const json kind = f.value("feedback_kind", json());
        expect(kind.is_null() || kind.is_string(), file, "options.feedback.feedback_kind", "null or a string", kind);
    }
    expect(state.contains("steps") && state["steps"].is_object(), file, "steps", "an object",
           state.value("steps", json()));
    for (const auto& [name, step] : state["steps"].items()) {
        const std::string at = "steps." + name;
        expect(step.is_object(), file, at, "an object {command, seconds}", step);
        expect(step.contains("command") && step["command"].is_string(), file, at + ".command", "a string",
               step.value("command", json()));
        expect(step.contains("seconds") && (step["seconds"].is_null() || step["seconds"].is_number()), file,
               at + ".seconds", "null or a number", step.value("seconds", json()));
    }
}

void check_run_records(const std::filesystem::path& findings, const std::vector<ChainExpectation>& chains) {
    for (const ChainExpectation& c : chains) {
        const RunLayout& chain = c.layout;
        const json& expected = c.config_identity;
        const std::string& whose = c.name;
        json sft, judge, ppo, metrics, overopt, exercise;
        const json* s = record(chain.report("sft", "continuous"), sft);
        const json* j = record(chain.report("reward", "continuous"), judge);
        const std::vector<std::pair<std::filesystem::path, const json*>> records = {
            {chain.report("sft", "continuous"), s},
            {chain.report("reward", "continuous"), j},
            {chain.report("ppo", "continuous"), record(chain.report("ppo", "continuous"), ppo)},
            {chain.eval() / "metrics.json", record(chain.eval() / "metrics.json", metrics)},
            {chain.eval() / "overoptimisation.json", record(chain.eval() / "overoptimisation.json", overopt)},
            {chain.exercise(), record(chain.exercise(), exercise)}};
        // 1. Every record was made under the options recorded for this chain.
        for (const auto& [file, doc] : records) {
            if (!doc) continue;
            const json& got = (*doc)["identity"].value("config", json());
            if (got == expected) continue;
            std::string what;  // the fields that differ, e.g. config_sha256 0b46…, the options give f829…
            for (const auto& [key, want] : expected.items()) {
                const std::string have = got.is_object() && got.contains(key) ? got[key].dump() : "nothing";
                if (have != want.dump())
                    what += (what.empty() ? "" : "; ") + key + " " + have + ", the options give " + want.dump();
            }
            fail(file.string(), ": made under another configuration than ", whose,
                 "'s recorded options (identity.config.", what,
                 "); the run folder or its run-state.json was edited or mixed with another run: restore it or "
                 "start a new run");
        }
        // 2. Each later stage used the policy and judge its chain finished with.
        auto link = [&](const json* later, const std::filesystem::path& later_file, const char* field,
                        const json* earlier, const std::filesystem::path& earlier_file) {
            if (!later || !earlier) return;
            const json::json_pointer want("/final_learned_identity"), got(std::string("/identity/") + field);
            if (!earlier->contains(want) || !later->contains(got) || earlier->at(want) != later->at(got))
                fail(later_file.string(), ": identity.", field, " is ", text_at(*later, got), " but ",
                     earlier_file.string(), " finished with ", text_at(*earlier, want),
                     "; the stages of one chain must follow each other (was a folder swapped or edited?)");
        };
        const std::filesystem::path sf = chain.report("sft", "continuous"), jf = chain.report("reward", "continuous");
        link(ppo.is_null() ? nullptr : &ppo, chain.report("ppo", "continuous"), "sft_learned_identity", s, sf);
        link(ppo.is_null() ? nullptr : &ppo, chain.report("ppo", "continuous"), "reward_learned_identity", j, jf);
        link(overopt.is_null() ? nullptr : &overopt, chain.eval() / "overoptimisation.json", "sft_learned_identity", s,
             sf);
        link(overopt.is_null() ? nullptr : &overopt, chain.eval() / "overoptimisation.json", "judge_learned_identity",
             j, jf);
        link(exercise.is_null() ? nullptr : &exercise, chain.exercise(), "judge_learned_identity", j, jf);
    }
    // 3. The findings cover this study's chains.
    if (std::filesystem::exists(findings)) {
        const json f = read_json_file(findings);
        if (!f.is_object() || f.value("format", json()) != "ppolab-findings")
            fail(findings.string(),
                 ": not a findings record (expected an object with format "
                 "'ppolab-findings'); the run folder was edited: restore it or run "
                 "`ppolab findings` again");
        if (f.value("replicates", json()) != json(chains.size()))
            fail(findings.string(), ": covers ", f.value("replicates", json()).dump(), " replicates, the run has ",
                 chains.size());
        for (const char* k : {"verdict", "ppo_minus_sft", "policies"})
            if (!f.contains(k))
                fail(findings.string(), ": field '", k, "' is missing; the file was edited or truncated");
    }
}

}  // namespace ppolab

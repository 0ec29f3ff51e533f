// corpus_read.cpp — the validated loaders of the layout (corpus.h): the
// manifest, each JSONL file checked against it, the whole corpus read back
// and re-verified.
#include <algorithm>
#include <set>

#include "data/corpus.h"
#include "data/corpus_fields.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ppolab {

using corpus_detail::check_unique;
using corpus_detail::checked_action;
using corpus_detail::checked_prompt;
using corpus_detail::expect_fields;
using corpus_detail::for_each_jsonl;
using corpus_detail::id_suffix;
using corpus_detail::is_hex64;

Manifest manifest_parse(std::string_view text, std::string_view where) {
    const std::string at(where);
    json j = parse_json(text, at);
    expect_fields(
        j,
        {"dataset", "study_revision", "seed", "human_feedback", "layout", "config", "audit", "prompt_sha256", "files"},
        at);
    Manifest m;
    m.config = corpus_config_from_json(json_field(j, "config", at), at + ": config");
    if (json_string(j, "dataset", at) != m.config.dataset)
        fail(at, ": field 'dataset' is '", json_string(j, "dataset", at), "' but config.dataset is '", m.config.dataset,
             "'");
    if (json_string(j, "study_revision", at) != m.config.study_revision)
        fail(at, ": field 'study_revision' disagrees with config.study_revision");
    if (json_int(j, "seed", at) != m.config.seed) fail(at, ": field 'seed' disagrees with config.seed");
    if (json_bool(j, "human_feedback", at)) fail(at, ": field 'human_feedback' must be false for a simulated corpus");
    m.audit = json_field(j, "audit", at);
    if (!m.audit.is_object()) fail(at, ": field 'audit' must be an object, got ", m.audit.type_name());
    const json& prompts = json_field(j, "prompt_sha256", at);
    if (!prompts.is_object()) fail(at, ": field 'prompt_sha256' must be an object, got ", prompts.type_name());
    for (auto it = prompts.begin(); it != prompts.end(); ++it) {
        if (!it->is_string() || !is_hex64(it->get<std::string>()))
            fail(at, ": prompt_sha256['", it.key(), "'] must be 64 lowercase hex digits");
        m.prompt_sha256[it.key()] = it->get<std::string>();
    }
    const json& files = json_field(j, "files", at);
    if (!files.is_object()) fail(at, ": field 'files' must be an object, got ", files.type_name());
    for (const auto& name : corpus_file_names()) {
        const std::string fat = at + ": files['" + name + "']";
        const json& entry = json_field(files, name, at + ": files");
        expect_fields(entry, {"sha256", "bytes"}, fat);
        FileDigest d;
        d.sha256 = json_string(entry, "sha256", fat);
        if (!is_hex64(d.sha256)) fail(fat, ": field 'sha256' must be 64 lowercase hex digits, got '", d.sha256, "'");
        d.bytes = json_int(entry, "bytes", fat);
        if (d.bytes < 0) fail(fat, ": field 'bytes' must be >= 0, got ", d.bytes);
        m.files[name] = d;
    }
    for (auto it = files.begin(); it != files.end(); ++it)
        if (!m.files.count(it.key())) fail(at, ": files lists unexpected file '", it.key(), "'");
    return m;
}

Manifest load_manifest(const GuardedReader& reader, const fs::path& dir) {
    const fs::path path = dir / "manifest.json";
    return manifest_parse(reader.read(path, InputKind::json), path.string());
}

namespace {
// The bytes of one corpus file, checked against the manifest.
std::string read_checked(const GuardedReader& reader, const fs::path& dir, const std::string& name) {
    Manifest m = load_manifest(reader, dir);
    const fs::path path = dir / name;
    std::string bytes = reader.read(path);
    const FileDigest& d = m.files.at(name);
    std::string got = sha256_hex(bytes);
    if (got != d.sha256 || int64_t(bytes.size()) != d.bytes)
        fail(path.string(), ": sha256 ", got, " (", bytes.size(), " bytes) does not match the manifest's ", d.sha256,
             " (", d.bytes, " bytes): the file changed after prepare");
    return bytes;
}
}  // namespace

std::vector<Demonstration> parse_demonstrations(std::string_view text, std::string_view where) {
    std::vector<Demonstration> out;
    std::set<std::string> seen;
    for_each_jsonl(text, where, [&](const json& o, const std::string& at) {
        expect_fields(o, {"id", "family", "prompt", "prompt_sha256", "response"}, at);
        Demonstration d{json_string(o, "id", at), json_string(o, "family", at), checked_prompt(o, at),
                        json_string(o, "response", at)};
        check_unique(seen, d.id, at);
        out.push_back(std::move(d));
    });
    return out;
}

std::vector<PreferencePair> parse_pairs(std::string_view text, std::string_view where) {
    std::vector<PreferencePair> out;
    std::set<std::string> seen;
    for_each_jsonl(text, where, [&](const json& o, const std::string& at) {
        expect_fields(o, {"id", "family", "prompt", "prompt_sha256", "chosen", "rejected"}, at);
        PreferencePair p{json_string(o, "id", at), json_string(o, "family", at), checked_prompt(o, at),
                         json_string(o, "chosen", at), json_string(o, "rejected", at)};
        check_unique(seen, p.id, at);
        out.push_back(std::move(p));
    });
    return out;
}

std::vector<PromptRow> parse_prompts(std::string_view text, std::string_view where) {
    std::vector<PromptRow> out;
    std::set<std::string> seen;
    for_each_jsonl(text, where, [&](const json& o, const std::string& at) {
        expect_fields(o, {"id", "family", "prompt", "prompt_sha256"}, at);
        PromptRow r{json_string(o, "id", at), json_string(o, "family", at), checked_prompt(o, at)};
        check_unique(seen, r.id, at);
        out.push_back(std::move(r));
    });
    return out;
}

GoldLabels parse_gold(std::string_view text, std::string_view where) {
    GoldLabels g;
    std::set<std::string> seen;
    for_each_jsonl(text, where, [&](const json& o, const std::string& at) {
        GoldLabel l;
        l.population = json_string(o, "population", at);
        std::vector<std::string> fields = {"id", "population", "split", "family", "expected_action"};
        if (l.population == "pair") {
            fields.insert(fields.end(), {"chosen", "rejected"});
        } else if (l.population == "demonstration") {
            fields.push_back("response");
        } else if (l.population == "probe") {
            fields.insert(fields.end(), {"candidate_response", "candidate_correct", "candidate_polite"});
        } else if (l.population != "rollout") {
            fail(at, ": field 'population' must be pair, demonstration, rollout or probe, got '", l.population, "'");
        }
        expect_fields(o, fields, at);
        l.id = json_string(o, "id", at);
        l.split = json_string(o, "split", at);
        l.family = json_string(o, "family", at);
        l.expected_action = checked_action(o, "expected_action", at);
        const bool split_ok = l.population == "pair"
                                  ? (l.split == "train" || l.split == "validation" || l.split == "test")
                              : l.population == "probe" ? l.split == "probe"
                                                        : l.split == "train";
        if (!split_ok) fail(at, ": split '", l.split, "' is not valid for population '", l.population, "'");
        if (l.population == "pair") {
            l.chosen = json_string(o, "chosen", at);
            l.rejected = json_string(o, "rejected", at);
        } else if (l.population == "demonstration") {
            l.response = json_string(o, "response", at);
        } else if (l.population == "probe") {
            l.candidate_response = json_string(o, "candidate_response", at);
            l.candidate_correct = json_bool(o, "candidate_correct", at);
            l.candidate_polite = json_bool(o, "candidate_polite", at);
        }
        check_unique(seen, l.id, at);
        g.index[l.id] = g.rows.size();
        g.rows.push_back(std::move(l));
    });
    return g;
}

const GoldLabel& GoldLabels::at(const std::string& id) const {
    auto it = index.find(id);
    if (it == index.end()) fail("gold labels: no label for id '", id, "'");
    return rows[it->second];
}

std::vector<Demonstration> load_demonstrations(const GuardedReader& reader, const fs::path& dir) {
    const std::string name = "learn/demonstrations.jsonl";
    return parse_demonstrations(read_checked(reader, dir, name), (dir / name).string());
}

std::vector<PreferencePair> load_pairs(const GuardedReader& reader, const fs::path& dir, PairSplit split) {
    const std::string name = split == PairSplit::train        ? "learn/train_pairs.jsonl"
                             : split == PairSplit::validation ? "learn/validation_pairs.jsonl"
                                                              : "gold/test_pairs.jsonl";
    return parse_pairs(read_checked(reader, dir, name), (dir / name).string());
}

std::vector<PromptRow> load_rollout_prompts(const GuardedReader& reader, const fs::path& dir) {
    const std::string name = "learn/rollout_prompts.jsonl";
    return parse_prompts(read_checked(reader, dir, name), (dir / name).string());
}

std::vector<PromptRow> load_eval_prompts(const GuardedReader& reader, const fs::path& dir, EvalPopulation population) {
    const std::string name =
        population == EvalPopulation::test ? "eval/test_prompts.jsonl" : "eval/probe_prompts.jsonl";
    return parse_prompts(read_checked(reader, dir, name), (dir / name).string());
}

GoldLabels load_gold(const GuardedReader& reader, const fs::path& dir) {
    const std::string name = "gold/labels.jsonl";
    return parse_gold(read_checked(reader, dir, name), (dir / name).string());
}

Corpus corpus_load(const GuardedReader& reader, const fs::path& dir) {
    Corpus corpus;
    Manifest m = load_manifest(reader, dir);
    corpus.config = m.config;
    GoldLabels gold = load_gold(reader, dir);
    std::set<std::string> used;
    auto label = [&](const std::string& id, const std::string& population,
                     const std::string& where) -> const GoldLabel& {
        auto it = gold.index.find(id);
        if (it == gold.index.end()) fail(where, ": id '", id, "' has no label in gold/labels.jsonl");
        const GoldLabel& l = gold.rows[it->second];
        if (l.population != population)
            fail(where, ": id '", id, "' is a ", population, " but gold/labels.jsonl calls it a ", l.population);
        used.insert(id);
        return l;
    };
    auto check_family = [](const std::string& where, const std::string& id, const std::string& file_family,
                           const GoldLabel& l) {
        if (file_family != l.family)
            fail(where, ": id '", id, "' has family '", file_family, "' but gold says '", l.family, "'");
    };
    const std::pair<PairSplit, std::string> pair_files[] = {{PairSplit::train, "learn/train_pairs.jsonl"},
                                                            {PairSplit::validation, "learn/validation_pairs.jsonl"},
                                                            {PairSplit::test, "gold/test_pairs.jsonl"}};
    const char* split_names[] = {"train", "validation", "test"};
    for (const auto& [split, name] : pair_files) {
        const std::string where = (dir / name).string();
        for (const auto& p : load_pairs(reader, dir, split)) {
            const GoldLabel& l = label(p.id, "pair", where);
            check_family(where, p.id, p.family, l);
            if (l.split != split_names[int(split)])
                fail(where, ": pair '", p.id, "' is in this file but gold puts it in split '", l.split, "'");
            if (p.chosen != l.chosen || p.rejected != l.rejected)
                fail(where, ": pair '", p.id, "' chosen/rejected differ from gold/labels.jsonl");
            PairRecord r;
            r.id = p.id;
            r.family = p.family;
            r.split = l.split;
            r.variant = id_suffix(p.id, "-P", where);
            r.expected_action = l.expected_action;
            r.prompt = p.prompt;
            r.chosen = p.chosen;
            r.rejected = p.rejected;
            corpus.pairs.push_back(std::move(r));
        }
    }
    std::sort(corpus.pairs.begin(), corpus.pairs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    {
        const std::string where = (dir / "eval/test_prompts.jsonl").string();
        std::map<std::string, std::string> test_prompts;
        for (const auto& r : load_eval_prompts(reader, dir, EvalPopulation::test)) test_prompts[r.id] = r.prompt;
        size_t n_test = 0;
        for (const auto& p : corpus.pairs) {
            if (p.split != "test") continue;
            ++n_test;
            auto it = test_prompts.find(p.id);
            if (it == test_prompts.end() || it->second != p.prompt)
                fail(where, ": test pair '", p.id, "' is missing or has a different prompt");
        }
        if (n_test != test_prompts.size())
            fail(where, ": ", test_prompts.size(), " test prompts but ", n_test, " test pairs");
    }
    {
        const std::string where = (dir / "learn/demonstrations.jsonl").string();
        for (const auto& d : load_demonstrations(reader, dir)) {
            const GoldLabel& l = label(d.id, "demonstration", where);
            check_family(where, d.id, d.family, l);
            if (d.response != l.response) fail(where, ": demonstration '", d.id, "' response differs from gold");
            corpus.demonstrations.push_back({d.id, d.family, l.expected_action, d.prompt, d.response});
        }
    }
    {
        const std::string where = (dir / "learn/rollout_prompts.jsonl").string();
        for (const auto& r : load_rollout_prompts(reader, dir)) {
            const GoldLabel& l = label(r.id, "rollout", where);
            check_family(where, r.id, r.family, l);
            corpus.rollouts.push_back({r.id, r.family, m.config.rollout_first_variant + id_suffix(r.id, "-RL", where),
                                       l.expected_action, r.prompt});
        }
    }
    {
        const std::string where = (dir / "eval/probe_prompts.jsonl").string();
        for (const auto& r : load_eval_prompts(reader, dir, EvalPopulation::probe)) {
            const GoldLabel& l = label(r.id, "probe", where);
            check_family(where, r.id, r.family, l);
            corpus.probes.push_back({r.id, r.family, l.expected_action, r.prompt, l.candidate_correct,
                                     l.candidate_polite, l.candidate_response});
        }
    }
    for (const auto& l : gold.rows)
        if (!used.count(l.id))
            fail((dir / "gold/labels.jsonl").string(), ": label '", l.id,
                 "' matches no row of learn/ or eval/ or gold/test_pairs.jsonl");
    return corpus;
}

Manifest verify_corpus(const GuardedReader& reader, const fs::path& dir) {
    Manifest m = load_manifest(reader, dir);
    // Every file on disk is listed, regular, and hashes as the manifest says.
    std::error_code ec;
    std::set<std::string> listed(corpus_file_names().begin(), corpus_file_names().end());
    listed.insert("manifest.json");
    const fs::path root = reader.resolve(dir);
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
        const std::string rel = fs::relative(it->path(), root).generic_string();
        if (it->is_symlink()) fail(dir.string(), ": '", rel, "' is a symlink; a corpus holds regular files only");
        if (it->is_directory()) {
            if (rel != "learn" && rel != "eval" && rel != "gold")
                fail(dir.string(), ": unexpected folder '", rel, "' (not in the manifest's layout)");
            continue;
        }
        if (!listed.count(rel)) fail(dir.string(), ": file '", rel, "' is not listed in manifest.json");
    }
    if (ec) fail("cannot list '", dir.string(), "': ", ec.message());
    for (const auto& [name, digest] : m.files) {
        const fs::path path = dir / name;
        std::string bytes = reader.read(path);
        std::string got = sha256_hex(bytes);
        if (got != digest.sha256 || int64_t(bytes.size()) != digest.bytes)
            fail(path.string(), ": sha256 ", got, " (", bytes.size(), " bytes) does not match the manifest's ",
                 digest.sha256, " (", digest.bytes, " bytes): the file changed after prepare");
    }
    // The contents re-audit to the manifest's audit, prompt hashes included.
    Corpus corpus = corpus_load(reader, dir);
    json audit = json::parse(corpus_audit(corpus).dump());
    if (audit != m.audit)
        fail(dir.string(), "/manifest.json: the audit does not match the corpus files (manifest says ", m.audit.dump(),
             ", the files give ", audit.dump(), ")");
    std::map<std::string, std::string> prompts;
    for (const auto& p : corpus.pairs) prompts[p.id] = sha256_hex(p.prompt);
    for (const auto& d : corpus.demonstrations) prompts[d.id] = sha256_hex(d.prompt);
    for (const auto& r : corpus.rollouts) prompts[r.id] = sha256_hex(r.prompt);
    for (const auto& p : corpus.probes) prompts[p.id] = sha256_hex(p.prompt);
    if (prompts != m.prompt_sha256)
        fail(dir.string(), "/manifest.json: prompt_sha256 does not match the prompts of the corpus files (",
             m.prompt_sha256.size(), " listed, ", prompts.size(), " in the files)");
    return m;
}

}  // namespace ppolab

// corpus_write.cpp — the on-disk layout of SPEC §7 (corpus.h): every file
// built in memory, the manifest over them, then one rename into place.
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <random>

#include "data/corpus.h"
#include "data/corpus_fields.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/sha256.h"

namespace ppolab {

namespace {

using corpus_detail::append_line;

const std::vector<std::string> kFiles = {
    "learn/demonstrations.jsonl",  "learn/train_pairs.jsonl", "learn/validation_pairs.jsonl",
    "learn/rollout_prompts.jsonl", "eval/test_prompts.jsonl", "eval/probe_prompts.jsonl",
    "gold/labels.jsonl",           "gold/test_pairs.jsonl",
};

struct CorpusFiles {
    std::map<std::string, std::string> bytes;          // relative path -> contents
    ordered_json prompt_sha = ordered_json::object();  // id -> sha256 of the prompt
};

// The contents of every file of the layout, rows in corpus order.
CorpusFiles corpus_files(const Corpus& corpus) {
    CorpusFiles out;
    auto& files = out.bytes;
    auto prompt_row = [&](const std::string& id, const std::string& family, const std::string& prompt) {
        ordered_json row;
        row["id"] = id;
        row["family"] = family;
        row["prompt"] = prompt;
        row["prompt_sha256"] = sha256_hex(prompt);
        out.prompt_sha[id] = row["prompt_sha256"];
        return row;
    };
    std::string& labels = files["gold/labels.jsonl"];
    for (const auto& p : corpus.pairs) {
        ordered_json row = prompt_row(p.id, p.family, p.prompt);
        row["chosen"] = p.chosen;
        row["rejected"] = p.rejected;
        append_line(files[p.split == "test" ? "gold/test_pairs.jsonl" : "learn/" + p.split + "_pairs.jsonl"], row);
        if (p.split == "test") append_line(files["eval/test_prompts.jsonl"], prompt_row(p.id, p.family, p.prompt));
        append_line(labels, {{"id", p.id},
                             {"population", "pair"},
                             {"split", p.split},
                             {"family", p.family},
                             {"expected_action", p.expected_action},
                             {"chosen", p.chosen},
                             {"rejected", p.rejected}});
    }
    for (const auto& d : corpus.demonstrations) {
        ordered_json row = prompt_row(d.id, d.family, d.prompt);
        row["response"] = d.response;
        append_line(files["learn/demonstrations.jsonl"], row);
        append_line(labels, {{"id", d.id},
                             {"population", "demonstration"},
                             {"split", "train"},
                             {"family", d.family},
                             {"expected_action", d.expected_action},
                             {"response", d.response}});
    }
    for (const auto& r : corpus.rollouts) {
        append_line(files["learn/rollout_prompts.jsonl"], prompt_row(r.id, r.family, r.prompt));
        append_line(labels, {{"id", r.id},
                             {"population", "rollout"},
                             {"split", "train"},
                             {"family", r.family},
                             {"expected_action", r.expected_action}});
    }
    for (const auto& p : corpus.probes) {
        append_line(files["eval/probe_prompts.jsonl"], prompt_row(p.id, p.family, p.prompt));
        append_line(labels, {{"id", p.id},
                             {"population", "probe"},
                             {"split", "probe"},
                             {"family", p.family},
                             {"expected_action", p.expected_action},
                             {"candidate_response", p.candidate_response},
                             {"candidate_correct", p.candidate_correct},
                             {"candidate_polite", p.candidate_polite}});
    }
    for (const auto& name : kFiles) (void)files[name];  // an empty population still has its (empty) file
    return out;
}

ordered_json corpus_manifest(const Corpus& corpus, const ordered_json& audit, CorpusFiles& files) {
    ordered_json manifest;
    manifest["dataset"] = corpus.config.dataset;
    manifest["study_revision"] = corpus.config.study_revision;
    manifest["seed"] = corpus.config.seed;
    manifest["human_feedback"] = false;
    manifest["layout"] = {
        {"learn",
         "what learning stages may read: demonstrations, train/validation pairs, rollout prompts; no expected actions"},
        {"eval", "what generation for evaluation may read: test and probe prompts; no labels"},
        {"gold", "every label; read only by scoring, exercise and report"}};
    manifest["config"] = corpus_config_to_json(corpus.config);
    manifest["audit"] = audit;
    manifest["prompt_sha256"] = files.prompt_sha;
    ordered_json digests = ordered_json::object();
    for (const auto& name : kFiles)
        digests[name] = {{"sha256", sha256_hex(files.bytes[name])}, {"bytes", int64_t(files.bytes[name].size())}};
    manifest["files"] = digests;
    return manifest;
}

// Builds the folder in a hidden sibling, then renames it into place (never
// over an existing one) and syncs the parent.
void publish(const fs::path& dir, CorpusFiles& files, const ordered_json& manifest) {
    std::error_code ec;
    fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
    fs::create_directories(parent, ec);
    if (ec) fail("cannot create folder '", parent.string(), "': ", ec.message());
    std::random_device rd;
    fs::path tmp = parent / ("." + dir.filename().string() + ".partial" + std::to_string(rd()));
    try {
        create_new_directory(tmp);
        for (const auto& name : kFiles) write_file_atomic(tmp / name, files.bytes[name]);
        write_json_atomic(tmp / "manifest.json", manifest);
        if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_NOREPLACE) != 0)
            fail("cannot move the finished corpus into '", dir.string(), "': ", std::strerror(errno),
                 errno == EEXIST ? " (it appeared while the corpus was written)" : "");
    } catch (...) {
        fs::remove_all(tmp, ec);
        throw;
    }
    int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

}  // namespace

const std::vector<std::string>& corpus_file_names() { return kFiles; }

ordered_json corpus_write(const Corpus& corpus, const fs::path& dir) {
    if (dir.empty()) fail("corpus output folder is an empty path");
    std::error_code ec;
    if (fs::exists(fs::symlink_status(dir, ec)))
        fail("refusing to overwrite existing corpus folder '", dir.string(),
             "' (a new corpus needs a new folder, and a changed corpus a new revision)");
    const ordered_json audit = corpus_audit(corpus);
    CorpusFiles files = corpus_files(corpus);
    ordered_json manifest = corpus_manifest(corpus, audit, files);
    publish(dir, files, manifest);
    return manifest;
}

}  // namespace ppolab

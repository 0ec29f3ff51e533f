#include "training/study.h"

#include <sys/resource.h>

#include <functional>

#include "model/hf_folder.h"
#include "model/tensor_table.h"
#include "parallel/world.h"
#include "tokenizer/chat.h"
#include "training/identity.h"
#include "training/study_config.h"
#include "util/error.h"
#include "util/sha256.h"

namespace ppolab {

static fs::path resolve_model_dir(const StudyConfig& config, const RunLayout& run,
                                  const std::optional<fs::path>& model_override) {
    if (model_override) return *model_override;
    if (config.model.shape == "tiny") return run.base();
    fail("preset '", config.preset,
         "' needs --model DIR (a Qwen2-architecture checkpoint folder); only the tiny preset finds its base in ",
         run.base().string());
}

static int32_t special_id(const Tokenizer& tok, const OptionalString& configured, const OptionalInt& want,
                          const std::string& which, const fs::path& dir) {
    if (!configured)
        fail("config: 'model.", which, "_token' must be a string, got null (name the token with --set model.", which,
             "_token=TOKEN)");
    const std::string& token = *configured;
    const int32_t id = tok.token_to_id(token);
    if (id < 0) fail(dir.string(), "/tokenizer.json: has no token '", token, "' (config model.", which, "_token)");
    if (want && *want != id)
        fail(dir.string(), "/tokenizer.json: '", token, "' has id ", id, "; config model.", which, "_token_id expects ",
             *want);
    return id;
}

// Under mpirun: "" when every rank's configuration is rank 0's, else, on
// every rank, the first key where some rank differs from rank 0 and this
// rank's value there ("sft.lr = 0.02"), which parallel::agree then names
// beside rank 0's.
static std::string first_config_difference(const json& config) {
    if (parallel::world().size == 1 || parallel::solo()) return "";  // nobody to compare with
    const std::vector<std::string> all = parallel::all_gather(config.dump());
    const json zero = json::parse(all[0]);
    std::string key;  // the first differing leaf, "sft.lr"
    std::function<void(const json&, const json&, const std::string&)> walk = [&](const json& a, const json& b,
                                                                                 const std::string& at) {
        if (!key.empty()) return;
        if (a.is_object() && b.is_object()) {
            for (const auto& [k, v] : a.items()) walk(v, b.contains(k) ? b[k] : json(), at.empty() ? k : at + "." + k);
            for (const auto& [k, v] : b.items())
                if (!a.contains(k)) walk(json(), v, at.empty() ? k : at + "." + k);
        } else if (a != b) {
            key = at;
        }
    };
    for (size_t r = 1; r < all.size() && key.empty(); ++r) walk(json::parse(all[r]), zero, "");
    if (key.empty()) return "";
    const json* v = &config;  // this rank's value at that key
    for (size_t at = 0; at <= key.size();) {
        const size_t dot = std::min(key.find('.', at), key.size());
        const std::string k = key.substr(at, dot - at);
        if (!v->is_object() || !v->contains(k)) return key + " absent";
        v = &(*v)[k];
        at = dot + 1;
    }
    return key + " = " + v->dump();
}

Study Study::open(const json& config, const RunLayout& run, const std::optional<fs::path>& model_override,
                  const std::string& stage, StageScope scope, const std::vector<fs::path>& own_outputs) {
    Study s;
    s.config = config;
    s.cfg = StudyConfig::parse(config);
    engine_apply(s.cfg.engine);
    s.run = run;
    s.model_dir = resolve_model_dir(s.cfg, s.run, model_override);

    std::vector<fs::path> roots = corpus_read_roots(s.run.corpus(), scope == StageScope::learn  ? CorpusAccess::learn
                                                                    : scope == StageScope::eval ? CorpusAccess::eval
                                                                                                : CorpusAccess::all);
    if (scope == StageScope::all) roots = {s.run.root, s.run.study()};  // a replicate's corpus is its study's
    roots.push_back(s.model_dir);
    // Learning stages read their own outputs; evaluation's generation reads
    // the policies and the judge, and writes eval/. Neither reads the other's.
    if (scope != StageScope::all) {
        for (const char* own : {"sft", "reward", "ppo"}) roots.push_back(s.run.stage(own));
        for (const std::string& own : baseline_stages()) roots.push_back(s.run.stage(own));
        // Learning: its own folder too (a PPO with several switches: "ppo-whiten-k3"); evaluation: eval/.
        roots.push_back(scope == StageScope::learn ? s.run.stage(stage) : s.run.eval());
    }
    roots.insert(roots.end(), own_outputs.begin(), own_outputs.end());
    s.reader_.emplace(stage, roots);
    // The model folder itself must not lead into held-out data (a symlink
    // into gold/, say): resolve it through the guard before loading.
    const fs::path model_real = s.reader_->resolve(s.model_dir);
    const fs::path corpus_real = fs::weakly_canonical(s.run.corpus());
    if (scope != StageScope::all) {
        auto rel = model_real.lexically_relative(corpus_real);
        if (!rel.empty() && *rel.begin() != "..")
            fail("stage ", stage, ": the model folder ", s.model_dir.string(), " lies inside the corpus (",
                 model_real.string(), ")");
    }
    if (!fs::exists(s.model_dir / "config.json"))
        fail("stage ", stage, ": no checkpoint at ", s.model_dir.string(),
             s.cfg.model.shape == "tiny" ? " (run `ppolab pretrain --run RUN` first)" : "");

    s.base = load_checkpoint(s.model_dir, WeightType::bf16);
    if (s.cfg.model.pin_architecture) check_seed_architecture(s.base.config, s.model_dir.string() + "/config.json");
    s.tokenizer_.emplace(Tokenizer::from_file(s.model_dir));
    if (s.tokenizer().vocab_size() > s.base.config.vocab_size)
        fail(s.model_dir.string(), ": tokenizer has ", s.tokenizer().vocab_size(), " ids but the model only ",
             s.base.config.vocab_size, " embeddings");
    s.eos_id = special_id(s.tokenizer(), s.cfg.model.eos_token, s.cfg.model.eos_token_id, "eos", s.model_dir);
    s.pad_id = special_id(s.tokenizer(), s.cfg.model.pad_token, s.cfg.model.pad_token_id, "pad", s.model_dir);
    s.limits.max_prompt = s.cfg.limits.max_prompt;
    s.limits.max_response = s.cfg.limits.max_response;
    s.limits.max_context = s.cfg.limits.max_context;
    s.system_prompt = s.cfg.model.system_prompt;
    s.model_sha256 = checkpoint_sha256(s.model_dir);
    s.base_identity = base_frozen_identity(s.base);
    s.code_sha256 = running_binary_sha256();
    parallel::agree("when stage " + stage + " opens", {{"configuration", first_config_difference(config)},
                                                       {"base checkpoint sha256", s.model_sha256},
                                                       {"binary sha256", s.code_sha256}});
    // oneDNN reads the base's matrices from copies prepacked once per layout
    // instead of repacking them on every product (BENCHMARKS.md: 10–45 % per
    // large product); the copies belong to the matrices and move with `s`.
    freeze_base_matrices(s.base);
    return s;
}

std::vector<int32_t> Study::encode_prompt(const std::string& user_text) const {
    const std::string text = render_chat({{"user", user_text}}, /*add_generation_prompt=*/true, system_prompt);
    return tokenizer().encode(text);
}

std::vector<int32_t> Study::encode_response(const std::string& text) const {
    std::vector<int32_t> ids = tokenizer().encode(text);
    ids.push_back(eos_id);
    return ids;
}

ScoringRow Study::encode_row(const std::string& prompt, const std::string& response) const {
    return ScoringRow{encode_prompt(prompt), encode_response(response)};
}

ScoringBatch Study::batch(const std::vector<ScoringRow>& rows) const { return scoring_batch(rows, limits, pad_id); }
ScoringBatch Study::pair_batch(const std::vector<ScoringRow>& rows) const {
    return packed_pair_batch(rows, limits, pad_id);
}

json Study::identity() const {
    return json{{"config", config_identity(config)},
                {"model_sha256", model_sha256},
                {"tokenizer_sha256", tokenizer().sha256()},
                {"base_frozen_identity", base_identity},
                {"code_sha256", code_sha256}};
}

std::string base_frozen_identity(const Qwen2Weights& w) {
    std::vector<TensorBytes> tensors;
    for (const TensorSpec& spec : qwen2_tensor_table(w.config)) {
        if (const Matrix* m = spec.matrix(w)) {
            const bool bf = m->type == WeightType::bf16;
            tensors.push_back({spec.hf_name, bf ? "BF16" : "F32", spec.shape,
                               bf ? std::string_view(reinterpret_cast<const char*>(m->b.data()), m->b.size() * 2)
                                  : std::string_view(reinterpret_cast<const char*>(m->f.data()), m->f.size() * 4)});
        } else {
            const std::vector<float>& v = *spec.vector(w);
            tensors.push_back({spec.hf_name, "F32", spec.shape,
                               std::string_view(reinterpret_cast<const char*>(v.data()), v.size() * 4)});
        }
    }
    return frozen_identity(tensors);
}

std::string running_binary_sha256() {
    // /proc/self/exe opens the running binary even if its file was replaced
    // or deleted since (a rebuild during a long run); hashed once per process.
    static const std::string digest = [] {
        try {
            return sha256_file("/proc/self/exe");
        } catch (const Error&) {
            return std::string("unknown");
        }
    }();
    return digest;
}

int64_t peak_rss_bytes() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

}  // namespace ppolab

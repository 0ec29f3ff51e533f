#include "training/export_merged.h"

#include <unistd.h>

#include <sstream>

#include "model/hf_folder.h"
#include "model/lora.h"
#include "training/roles.h"
#include "util/error.h"
#include "util/fileio.h"

namespace ppolab {

fs::path trained_policy_dir(const RunLayout& run, const std::string& policy) {
    fs::path dir;
    if (policy == "sft") dir = run.final_dir("sft");
    else if (policy == "ppo") dir = run.final_dir("ppo") / "actor";
    else fail("export merged: --policy: expected sft or ppo, found '", policy, "'");
    if (!fs::is_directory(dir))
        fail("export merged: the run has no trained ", policy, " policy (", dir.string(),
             " does not exist; run `ppolab ", policy, " --run ", run.root.string(), "` first)");
    return dir;
}

namespace {

std::string card(const Study& study, const std::string& policy, const std::string& learned, const json& identity) {
    std::ostringstream o;
    o << "# ppolab " << policy << " policy, merged\n\n"
      << "A Qwen2 model written by `ppolab export merged`: the " << policy << " policy's LoRA adapters (r "
      << study.cfg.lora.rank << ", alpha " << study.cfg.lora.alpha
      << ") folded into the frozen base, W' = W + (alpha/r) B A, rounded to BF16.\n\n"
      << "* run: `" << study.run.root.string() << "`\n"
      << "* policy: " << policy << ", learned identity `" << learned << "`\n"
      << "* base: `" << study.model_dir.string() << "` (checkpoint sha256 `" << study.model_sha256 << "`)\n"
      << "* study identity:\n\n```json\n"
      << identity.dump(2) << "\n```\n\n"
      << "## Scope\n\n"
      << "Trained on simulated preferences from a finite rubric (OfficeHelpPrefs-v1, a fictional office help "
         "desk) unless the run's judge was trained on votes; there is no human study behind it. Its learned "
         "score is a predicted simulated-preference score, not human utility. The tiny preset's model is a "
         "~3 M-parameter laboratory model that knows nothing outside that corpus.\n\n"
      << "## Next steps\n\n"
      << "* transformers: `AutoModelForCausalLM.from_pretrained(\"<this folder>\")`.\n"
      << "* GGUF for llama.cpp: `python convert_hf_to_gguf.py <this folder> --outtype bf16`.\n";
    return o.str();
}

}  // namespace

json export_merged(const Study& study, const std::string& policy, const fs::path& out) {
    const fs::path dir = trained_policy_dir(study.run, policy);
    if (fs::exists(out)) fail("export merged: refusing to overwrite ", out.string(), " (choose a new --out)");
    Role role = load_role(dir, policy, RoleKind::policy, study);
    const std::string learned = role.learned_identity();
    const Qwen2Weights merged = merge_lora(study.base, role.lora);
    json generation;  // the base's, when it has one
    if (fs::exists(study.model_dir / "generation_config.json"))
        generation = read_json_file(study.model_dir / "generation_config.json");
    const json identity = study.identity();
    const fs::path partial =
        out.parent_path() / ("." + out.filename().string() + ".partial-" + std::to_string(::getpid()));
    fs::remove_all(partial);
    save_checkpoint(partial, merged, study.model_dir, generation);
    write_file_atomic(partial / "README.md", card(study, policy, learned, identity));
    fs::rename(partial, out);
    return json{{"policy", policy}, {"learned_identity", learned}, {"identity", identity}, {"out", out.string()}};
}

}  // namespace ppolab

// cmd_export.cpp — `ppolab export merged`: a trained policy as a plain
// Hugging Face Qwen2 folder, LoRA merged (training/export_merged.h).
#include <cstdio>

#include "cli/command.h"
#include "cli/stage_options.h"
#include "training/export_merged.h"
#include "util/error.h"

namespace ppolab::cli {

namespace {

int run_export(const Args& args) {
    const std::vector<std::string>& what = args.positional();
    if (what.size() != 1 || what[0] != "merged")
        fail("export: expected `ppolab export merged --run RUN --policy sft|ppo --out DIR`, found ",
             what.empty() ? std::string("no subcommand") : "'" + what[0] + "'");
    args.allow_only(with_stage_options({"policy", "out"}));
    const fs::path out = args.get("out");
    const std::string policy = args.get("policy");
    // Reads the run; writes into it only when --out lies inside it.
    StageOptions o = stage_options(args, path_inside(out, args.get("run")) ? RunAccess::write : RunAccess::read);
    trained_policy_dir(o.run, policy);  // a clear error before the base is loaded
    Study study = Study::open(o.config, o.run, o.model, "export-merged", StageScope::eval);
    const json r = export_merged(study, policy, out);
    std::printf("wrote %s: the %s policy (learned identity %s) merged into the base, BF16\n", out.c_str(),
                policy.c_str(), r["learned_identity"].get<std::string>().c_str());
    return 0;
}

}  // namespace

static Command export_cmd("export",
                          "export merged --run DIR --policy sft|ppo --out DIR [--replicate K] [--preset P]  a trained "
                          "policy as a plain Hugging Face Qwen2 folder (LoRA merged into the base, BF16)",
                          {}, run_export,
                          "The folder holds config.json, model.safetensors (BF16), the base's tokenizer files and\n"
                          "generation config, and a README.md card naming the run, the policy, its learned identity\n"
                          "and the scope caveats. transformers loads it without PEFT; llama.cpp's converter turns it\n"
                          "into a GGUF. An existing --out is refused.\n");

}  // namespace ppolab::cli

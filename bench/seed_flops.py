#!/usr/bin/env python3
"""seed_flops.py — a lower bound on the seed minimum run's arithmetic, and the
least time it can take on a unit of a given rate (BENCHMARKS.md, session 22).

Counts only the frozen base's matrix products — the seven projections of
every layer and the tied LM head, 2 FLOP per multiply-add — on the real
token counts of the prepared corpus (the Qwen2.5 tokenizer and chat
template, the preset's system prompt). Left out, so that the figure stays a
lower bound: LoRA adapters, attention scores, norms, the judge's and the
critic's heads, the actor's re-scoring of its own samples, and the logits
of prompt positions (only response positions need them). PPO and
evaluation responses count as max_response tokens: random weights never say
EOS (a trained model's shorter answers would lower the count). PPO's
rollout prompts count at the mean length of the rollout set (the sampler
draws 400 of 672).

    ppolab prepare --out CORPUS --preset seed
    ppolab config --preset seed > seed.json
    build/venv/bin/python bench/seed_flops.py --corpus CORPUS --config seed.json \\
        --tokenizer models/qwen2.5-0.5b-instruct/tokenizer.json --peak 465

--peak: GFLOP/s of the fastest BF16 unit on the threads the run uses, as
bench_peak measures it (the lower bound in seconds is FLOP / peak).
Needs the `tokenizers` package (scripts/test-venv.sh installs it).
"""
import argparse
import json

from tokenizers import Tokenizer

# Qwen2.5-0.5B: width, layers, MLP width, KV width (2 heads of 64), vocabulary.
H, LAYERS, F, KV, V = 896, 24, 4864, 128, 151936
LIN = 2 * LAYERS * (H * H + 2 * KV * H + H * H + 3 * H * F)  # FLOP per token per pass through the projections
HEAD = 2 * V * H  # FLOP per token through the LM head


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--config", required=True, help="`ppolab config --preset seed` output")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--peak", type=float, required=True, help="GFLOP/s")
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    tok = Tokenizer.from_file(a.tokenizer)
    system = cfg["model"]["system_prompt"]
    R = cfg["limits"]["max_response"]

    def prompt_len(p):
        text = f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n"
        return len(tok.encode(text, add_special_tokens=False).ids)

    def resp_len(r):
        return len(tok.encode(r, add_special_tokens=False).ids) + 1  # + EOS

    def rows(path):
        with open(f"{a.corpus}/{path}") as f:
            return [json.loads(line) for line in f]

    demos, train = rows("learn/demonstrations.jsonl"), rows("learn/train_pairs.jsonl")
    val, rollouts = rows("learn/validation_pairs.jsonl"), rows("learn/rollout_prompts.jsonl")
    files = {"test": "eval/test_prompts.jsonl", "probes": "eval/probe_prompts.jsonl"}
    evals = [r for pop in cfg["evaluation"]["populations"] for r in rows(files[pop])]
    flop = {}
    # SFT: each epoch trains on every demonstration (forward + backward to the
    # input; logits at response positions) and validates on the validation
    # pairs' chosen responses (forward).
    e = cfg["sft"]["epochs"]
    flop["sft"] = e * sum((prompt_len(d["prompt"]) + resp_len(d["response"])) * 2 * LIN
                          + resp_len(d["response"]) * 2 * HEAD for d in demos)
    flop["sft"] += e * sum((prompt_len(v["prompt"]) + resp_len(v["chosen"])) * LIN + resp_len(v["chosen"]) * HEAD
                           for v in val)
    # The judge: each epoch on the train pairs packed [prompt | chosen |
    # rejected] (forward + backward, no LM head), a validation of the
    # validation pairs (forward).
    e = cfg["reward"]["epochs"]
    pair = lambda p: prompt_len(p["prompt"]) + resp_len(p["chosen"]) + resp_len(p["rejected"])
    flop["judge"] = e * (sum(pair(p) * 2 * LIN for p in train) + sum(pair(p) * LIN for p in val))
    # PPO: per rollout, the generation (prefill, R decode steps with logits),
    # the reference's log-probs, the judge's score and the critic's values
    # (forwards), then per update the actor (forward + backward, logits at
    # response positions) and the critic (forward + backward).
    ppo = cfg["ppo"]
    n = ppo["iterations"] * ppo["prompts_per_iteration"]
    U = ppo["updates_per_iteration"]
    # The sampler's draw of n rollout prompts: counted at their mean length.
    P = sum(prompt_len(r["prompt"]) for r in rollouts) / len(rollouts)
    flop["ppo"] = n * (P * LIN + HEAD + R * (LIN + HEAD) + (P + R) * LIN + R * HEAD + 2 * (P + R) * LIN
                       + U * 2 * ((P + R) * LIN + R * HEAD) + U * 2 * (P + R) * LIN)
    # Evaluation: the SFT and the PPO policy on every evaluation prompt:
    # generation, then the policy's and the judge's teacher-forced forwards,
    # and the reference's for PPO (for SFT the policy is its own reference).
    flop["evaluation"] = 0
    for policy in ("sft", "ppo"):
        for r in evals:
            P = prompt_len(r["prompt"])
            flop["evaluation"] += P * LIN + HEAD + R * (LIN + HEAD) + 2 * (P + R) * LIN + R * HEAD
            if policy == "ppo":
                flop["evaluation"] += (P + R) * LIN + R * HEAD
    total = sum(flop.values())
    print(f"per token: projections {LIN / 1e9:.4f} GFLOP a pass, LM head {HEAD / 1e9:.4f};"
          f" at {a.peak:.0f} GFLOP/s:")
    for k, v in flop.items():
        print(f"  {k:11s} {v / 1e12:7.1f} TFLOP  at least {v / a.peak / 1e9:7.1f} s")
    seconds = total / a.peak / 1e9
    print(f"  {'total':11s} {total / 1e12:7.1f} TFLOP  at least {seconds:7.1f} s = {seconds / 60:.1f} min")
    need = total / 1200 / 1e9
    print(f"  20 minutes would need {need:.0f} GFLOP/s sustained: {need / a.peak:.2f}x this peak")


if __name__ == "__main__":
    main()

"""llama.cpp peer of bench_model.cpp (PyPI llama-cpp-python, built here):
the forward of 1x128 tokens with full logits, and KV-cached decode of 64
tokens after a 64-token prompt, on a BF16 GGUF of the exact Qwen2.5-0.5B
shape (random weights: bench/run_benchmarks.sh converts `ppolab init-random`'s
folder with llama.cpp's own convert_hf_to_gguf.py --outtype bf16).

  python bench/llama_model.py --gguf F --workload forward|decode [--reps N] [--threads T]

Prints one JSON line like torch_model.py: {"name", "tok_s", "ms", "reps",
"peak_rss_mib", ...}. Forward keeps every position's logits (logits_all),
as ppolab's and PyTorch's forward do; decode feeds fixed token ids one at a
time, as bench_model does (no sampling), timing the 64 steps only.
"""
import argparse
import json
import random
import resource
import time

from llama_cpp import Llama


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--workload", default="forward", choices=["forward", "decode"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    llm = Llama(model_path=args.gguf, n_ctx=256, n_batch=128, n_ubatch=128, n_threads=args.threads,
                n_threads_batch=args.threads, logits_all=args.workload == "forward", verbose=False)
    rng = random.Random(1)
    vocab = llm.n_vocab()
    secs, cpus, prefill = [], [], []
    if args.workload == "forward":
        ids = [rng.randrange(vocab) for _ in range(128)]
        for r in range(args.reps + 1):
            llm.reset()
            t0, c0 = time.perf_counter(), time.process_time()
            llm.eval(ids)
            if r:
                secs.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
        name, tokens, extra = "forward 1x128 full logits", 128, {}
    else:
        prompt = [rng.randrange(vocab) for _ in range(64)]
        fed = [rng.randrange(vocab) for _ in range(64)]
        for r in range(args.reps + 1):
            llm.reset()
            t0 = time.perf_counter()
            llm.eval(prompt)
            t1, c1 = time.perf_counter(), time.process_time()
            for t in fed:
                llm.eval([t])
            if r:
                prefill.append(t1 - t0)
                secs.append(time.perf_counter() - t1)
                cpus.append(time.process_time() - c1)
        name, tokens, extra = "decode 64 after 64", 64, {"prefill_ms": median(prefill) * 1e3}
    s, c = median(secs), median(cpus)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"name": name, "tok_s": tokens / s, "ms": s * 1e3, "tok_per_cpu_s": tokens / c,
                      "cpu_ms": c * 1e3, "threads": args.threads, "reps": len(secs), "peak_rss_mib": round(rss),
                      **extra}), flush=True)


if __name__ == "__main__":
    main()

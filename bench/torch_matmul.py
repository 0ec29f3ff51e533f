"""PyTorch eager BF16 at the projection shapes of bench_matmul.cpp.

torch.nn.functional.linear(x_bf16, w_bf16) for the Qwen2.5-0.5B projections
at M = 1, 4, 128, 512 (forward), and the backward to the input (dY · W) at
M = 128, 512, and the LM head at M = 64. Weights rotate among copies totalling > 96 MiB, as in
bench_matmul, so small-M numbers are DRAM bandwidth. Prints one JSON object
per line: {"name", "ms", "cpu_ms", "gflops", "gbs"} (cpu_ms: process CPU time,
the meaningful figure on a busy machine with --threads 1).

Run per SPEC §11 (bench/run_benchmarks.sh does):
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE MALLOC_MMAP_MAX_=0 \
      MALLOC_TRIM_THRESHOLD_=68719476736 python3 bench/torch_matmul.py
"""
import argparse
import json
import re
import time

import torch

PROJECTIONS = [("q", 896, 896), ("k", 128, 896), ("v", 128, 896), ("o", 896, 896),
               ("gate", 4864, 896), ("up", 4864, 896), ("down", 896, 4864), ("lm_head", 151936, 896)]
COLD_BYTES = 96 << 20


def timeit(fn, min_time):
    """Median wall and process-CPU seconds per call."""
    fn()  # warm-up (allocations, first-touch)
    times, cpus = [], []
    start = time.perf_counter()
    while True:
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        if time.perf_counter() - start >= min_time and len(times) >= 3:
            break
    times.sort()
    cpus.sort()
    return times[len(times) // 2], cpus[len(cpus) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    pattern = re.compile(args.filter)
    with torch.no_grad():
        for name, n, k in PROJECTIONS:
            copies = max(1, -(-COLD_BYTES // (n * k * 2)))
            ws = [(torch.randn(n, k) * 0.02).to(torch.bfloat16) for _ in range(copies)]
            state = {"i": 0}

            def next_w():
                w = ws[state["i"]]
                state["i"] = (state["i"] + 1) % len(ws)
                return w

            jobs = [(f"fwd/{name}/M{m}", m, "fwd") for m in (1, 4, 128, 512)]
            if name != "lm_head":
                jobs += [(f"bwd_input/{name}/M{m}", m, "bwd") for m in (128, 512)]
            else:  # the 64-row chunks of lm_logprobs
                jobs += [("fwd/lm_head/M64", 64, "fwd"), ("bwd_input/lm_head/M64", 64, "bwd")]
            for label, m, kind in jobs:
                if not pattern.search(label):
                    continue
                if kind == "fwd":
                    x = torch.randn(m, k).to(torch.bfloat16)
                    fn = lambda: torch.nn.functional.linear(x, next_w())
                else:
                    g = torch.randn(m, n).to(torch.bfloat16)
                    fn = lambda: torch.matmul(g, next_w())
                sec, cpu = timeit(fn, args.min_time)
                flops = 2.0 * m * n * k
                nbytes = 2.0 * n * k + 2.0 * m * k + 2.0 * m * n
                print(json.dumps({"name": label, "ms": sec * 1e3, "cpu_ms": cpu * 1e3, "gflops": flops / sec * 1e-9,
                                  "gbs": nbytes / sec * 1e-9}), flush=True)
            del ws


if __name__ == "__main__":
    main()

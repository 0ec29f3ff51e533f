"""Side-by-side table of ppolab vs PyTorch results (run_benchmarks.sh).

  compare.py matmul bench_matmul.json torch_matmul.jsonl
  compare.py model  bench_model.jsonl torch_model.jsonl

Ratio = PyTorch time / ppolab time (> 1: ppolab faster), from wall time and
from CPU time. With one thread (run_benchmarks.sh --threads 1) the CPU-time
ratio is the meaningful one on a busy machine: it leaves out the time either
process spent descheduled. (Google Benchmark's CPU time is the main
thread's: with 2 threads it undercounts, so only the wall ratio counts then.)
"""
import json
import sys


def load_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def matmul(ppolab_path, torch_path):
    with open(ppolab_path) as f:
        gb = json.load(f)["benchmarks"]
    ours, alt = {}, {}
    for b in gb:
        name = b["name"].removesuffix("/real_time")
        ms = b["real_time"] if b["time_unit"] == "ms" else b["real_time"] * {"us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
        scale = {"ms": 1.0, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b["time_unit"]]
        entry = {"ms": ms, "cpu_ms": b["cpu_time"] * scale, "gflops": b.get("GFLOP/s", 0.0), "gbs": b.get("GB/s", 0.0),
                 "label": b.get("label", "")}
        parts = name.split("/")
        if len(parts) == 4:  # fwd/q/M1/dnnl: an alternative of the same product
            alt["/".join(parts[:3])] = entry
        else:
            ours[name] = entry
    torch = {r["name"]: r for r in load_jsonl(torch_path)}
    head = (f"{'product':<26}{'ppolab ms':>10}{'GFLOP/s':>9}{'GB/s':>7}{'cpu ms':>9}  {'path':<15}{'alt ms':>8}{'alt cpu':>9}  {'alt':<17}"
            f"{'torch ms':>9}{'cpu ms':>9}{'ratio':>7}{'cpu ratio':>10}")
    print(head)
    print("-" * len(head))
    for name, e in ours.items():
        a = alt.get(name)
        t = torch.get(name)
        print(f"{name:<26}{e['ms']:>10.3f}{e['gflops']:>9.1f}{e['gbs']:>7.1f}{e['cpu_ms']:>9.3f}  {e['label']:<15}"
              + (f"{a['ms']:>8.3f}{a['cpu_ms']:>9.3f}  {a['label']:<17}" if a else f"{'':>8}{'':>9}  {'':<17}")
              + (f"{t['ms']:>9.3f}{t.get('cpu_ms', 0):>9.3f}{t['ms'] / e['ms']:>7.2f}"
                 f"{t.get('cpu_ms', 0) / e['cpu_ms']:>10.2f}" if t else ""))


def model(ppolab_path, torch_path):
    ours = {r["name"]: r for r in load_jsonl(ppolab_path)}
    torch = {r["name"]: r for r in load_jsonl(torch_path)}
    head = (f"{'workload':<30}{'thr':>4}{'ppolab tok/s':>13}{'tok/cpu-s':>10}{'RSS MiB':>8}"
            f"{'torch tok/s':>12}{'tok/cpu-s':>10}{'RSS MiB':>8}{'ratio':>7}{'cpu ratio':>10}")
    print(head)
    print("-" * len(head))
    for name, e in ours.items():
        t = torch.get(name.replace(" (frozen base)", ""))
        line = (f"{name:<30}{e.get('threads', 0):>4}{e['tok_s']:>13.1f}{e.get('tok_per_cpu_s', 0):>10.1f}"
                f"{e.get('peak_rss_mib', 0):>8.0f}")
        if t:
            line += (f"{t['tok_s']:>12.1f}{t.get('tok_per_cpu_s', 0):>10.1f}{t.get('peak_rss_mib', 0):>8.0f}"
                     f"{e['tok_s'] / t['tok_s']:>7.2f}{e.get('tok_per_cpu_s', 0) / max(t.get('tok_per_cpu_s', 0), 1e-9):>10.2f}")
        print(line)


if __name__ == "__main__":
    {"matmul": matmul, "model": model}[sys.argv[1]](sys.argv[2], sys.argv[3])

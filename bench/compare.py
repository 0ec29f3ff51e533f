"""Side-by-side table of ppolab vs PyTorch results (run_benchmarks.sh).

  compare.py matmul bench_matmul.json torch_matmul.jsonl
  compare.py model  bench_model.jsonl torch_model.jsonl

Ratio = PyTorch time / ppolab time (> 1: ppolab faster).
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
        entry = {"ms": ms, "gflops": b.get("GFLOP/s", 0.0), "gbs": b.get("GB/s", 0.0), "label": b.get("label", "")}
        parts = name.split("/")
        if len(parts) == 4:  # fwd/q/M1/dnnl: an alternative of the same product
            alt["/".join(parts[:3])] = entry
        else:
            ours[name] = entry
    torch = {r["name"]: r for r in load_jsonl(torch_path)}
    head = f"{'product':<22}{'ppolab ms':>10}{'GFLOP/s':>9}{'GB/s':>7}  {'path':<16}{'alt ms':>8}  {'alt':<26}{'torch ms':>9}{'GFLOP/s':>9}{'ratio':>7}"
    print(head)
    print("-" * len(head))
    for name, e in ours.items():
        a = alt.get(name)
        t = torch.get(name)
        print(f"{name:<22}{e['ms']:>10.3f}{e['gflops']:>9.1f}{e['gbs']:>7.1f}  {e['label']:<16}"
              + (f"{a['ms']:>8.3f}  {a['label']:<26}" if a else f"{'':>8}  {'':<26}")
              + (f"{t['ms']:>9.3f}{t['gflops']:>9.1f}{t['ms'] / e['ms']:>7.2f}" if t else ""))


def model(ppolab_path, torch_path):
    ours = {r["name"]: r for r in load_jsonl(ppolab_path)}
    torch = {r["name"]: r for r in load_jsonl(torch_path)}
    head = f"{'workload':<34}{'ppolab tok/s':>13}{'peak RSS MiB':>14}{'torch tok/s':>13}{'peak RSS MiB':>14}{'ratio':>7}"
    print(head)
    print("-" * len(head))
    for name, e in ours.items():
        t = torch.get(name)
        line = f"{name:<34}{e['tok_s']:>13.1f}{e.get('peak_rss_mib', 0):>14.0f}"
        if t:
            line += f"{t['tok_s']:>13.1f}{t.get('peak_rss_mib', 0):>14.0f}{e['tok_s'] / t['tok_s']:>7.2f}"
        print(line)


if __name__ == "__main__":
    {"matmul": matmul, "model": model}[sys.argv[1]](sys.argv[2], sys.argv[3])

"""PyTorch eager BF16 peer of bench_model.cpp: the same Qwen2.5-0.5B shape
and workloads, random weights, written the way Hugging Face modeling_qwen2
computes (RMSNorm in FP32, RoPE θ 1e6, grouped-query attention, SwiGLU,
tied LM head), BF16 base weights frozen, LoRA (r 8, α 16, all seven
projections) in FP32 whose sum returns to BF16.

  python3 bench/torch_model.py --workload forward|decode|lora1|lora4 [--reps N] [--ipex]

--ipex (Intel Extension for PyTorch, its own venv: bench/run_benchmarks.sh
--install-peers makes build/ipex-venv) hands the frozen projections and the
LM head to ipex.optimize as nn.Linear modules, the way a PyTorch user would
get its prepacked oneDNN BF16 linears (AMX tiles where the CPU shows them);
the rest of the model is the same code.

Prints one JSON line: {"name", "tok_s", "ms", "reps", "peak_rss_mib"}.
Run per SPEC §11 (bench/run_benchmarks.sh does): OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE unset, MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=68719476736.
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn.functional as F

V, H, I, L, NH, NKV, HD = 151936, 896, 4864, 24, 14, 2, 64
EPS, THETA = 1e-6, 1e6
BF = torch.bfloat16


def rand(*shape):
    return torch.empty(*shape, dtype=BF).normal_(0.0, 0.02)


class Linear:
    """y = x Wᵀ + b (+ scale · B(A x) in FP32, the sum back to BF16)."""

    def __init__(self, out_f, in_f, bias, lora):
        self.w = rand(out_f, in_f)
        self.b = torch.zeros(out_f, dtype=BF) if bias else None
        self.A = self.B = None
        if lora:
            bound = 1.0 / math.sqrt(in_f)
            self.A = torch.empty(8, in_f).uniform_(-bound, bound).requires_grad_()
            self.B = torch.zeros(out_f, 8).requires_grad_()

        self.mod = None  # the ipex.optimize'd nn.Linear, when --ipex

    def __call__(self, x):
        y = self.mod(x) if self.mod is not None else F.linear(x, self.w, self.b)
        if self.A is not None:
            y = (y.float() + 2.0 * F.linear(F.linear(x.float(), self.A), self.B)).to(BF)
        return y


def rmsnorm(x, w):
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
    return w * xf.to(BF)


def rope(x, pos):  # x (B, heads, T, HD), pos (T)
    inv = 1.0 / (THETA ** (torch.arange(0, HD, 2, dtype=torch.float32) / HD))
    ang = pos.float()[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], -1)
    cos, sin = emb.cos().to(BF), emb.sin().to(BF)
    x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Model:
    def __init__(self, lora):
        self.embed = rand(V, H)
        self.layers = []
        for _ in range(L):
            self.layers.append({
                "ln1": torch.ones(H, dtype=BF), "ln2": torch.ones(H, dtype=BF),
                "q": Linear(NH * HD, H, True, lora), "k": Linear(NKV * HD, H, True, lora),
                "v": Linear(NKV * HD, H, True, lora), "o": Linear(H, NH * HD, False, lora),
                "gate": Linear(I, H, False, lora), "up": Linear(I, H, False, lora),
                "down": Linear(H, I, False, lora)})
        self.norm = torch.ones(H, dtype=BF)
        self.head = None  # the ipex.optimize'd LM head, when --ipex

    def lora_params(self):
        return [p for l in self.layers for k in ("q", "k", "v", "o", "gate", "up", "down")
                for p in (l[k].A, l[k].B) if p is not None]

    def forward(self, ids, cache=None):
        """ids (B, T); cache: list of (k, v) per layer or None; returns hidden (B, T, H)."""
        B, T = ids.shape
        start = 0 if not cache or cache[0] is None else cache[0][0].shape[2]
        pos = torch.arange(start, start + T)
        x = F.embedding(ids, self.embed)
        for i, l in enumerate(self.layers):
            h = rmsnorm(x, l["ln1"])
            q = rope(l["q"](h).view(B, T, NH, HD).transpose(1, 2), pos)
            k = rope(l["k"](h).view(B, T, NKV, HD).transpose(1, 2), pos)
            v = l["v"](h).view(B, T, NKV, HD).transpose(1, 2)
            if cache is not None:
                if cache[i] is not None:
                    k = torch.cat([cache[i][0], k], 2)
                    v = torch.cat([cache[i][1], v], 2)
                cache[i] = (k, v)
            S = k.shape[2]
            k = k.repeat_interleave(NH // NKV, 1)
            v = v.repeat_interleave(NH // NKV, 1)
            s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(HD)
            if T > 1:
                causal = torch.full((T, S), float("-inf")).triu(S - T + 1)
                s = s + causal.to(BF)
            p = torch.softmax(s.float(), -1).to(BF)
            a = torch.matmul(p, v).transpose(1, 2).reshape(B, T, NH * HD)
            x = x + l["o"](a)
            h = rmsnorm(x, l["ln2"])
            x = x + l["down"](F.silu(l["gate"](h)) * l["up"](h))
        return rmsnorm(x, self.norm)

    def logits(self, h):
        return self.head(h) if self.head is not None else F.linear(h, self.embed)

    def use_ipex(self):
        """The frozen BF16 linears (7 per layer and the tied LM head) as
        ipex.optimize'd modules: oneDNN with weights prepacked once."""
        import intel_extension_for_pytorch as ipex

        linears = [l[k] for l in self.layers for k in ("q", "k", "v", "o", "gate", "up", "down")]
        mods = []
        for lin in linears:
            m = torch.nn.Linear(lin.w.shape[1], lin.w.shape[0], bias=lin.b is not None, dtype=BF)
            m.weight = torch.nn.Parameter(lin.w, requires_grad=False)
            if lin.b is not None:
                m.bias = torch.nn.Parameter(lin.b, requires_grad=False)
            mods.append(m)
        head = torch.nn.Linear(H, V, bias=False, dtype=BF)
        head.weight = torch.nn.Parameter(self.embed, requires_grad=False)
        mods.append(head)
        opt = ipex.optimize(torch.nn.ModuleList(mods).eval(), dtype=BF, inplace=True)
        for lin, m in zip(linears, opt):
            lin.mod = m
        self.head = opt[len(linears)]
        return ipex.__version__


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def emit(name, tokens, secs, cpus, **extra):
    """secs: wall seconds per repetition; cpus: process CPU seconds (all threads)."""
    s, c = median(secs), median(cpus)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"name": name, "tok_s": tokens / s, "ms": s * 1e3, "tok_per_cpu_s": tokens / c,
                      "cpu_ms": c * 1e3, "threads": torch.get_num_threads(), "reps": len(secs),
                      "peak_rss_mib": round(rss), **extra}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="forward", choices=["forward", "decode", "lora1", "lora4"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ipex", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)

    def make(lora):
        m = Model(lora)
        if args.ipex:
            extra["ipex"] = m.use_ipex()
        return m

    extra = {}
    if args.workload == "forward":
        m = make(lora=False)
        ids = torch.randint(0, V, (1, 128), generator=g)
        secs, cpus = [], []
        with torch.no_grad():
            for r in range(args.reps + 1):
                t0, c0 = time.perf_counter(), time.process_time()
                m.logits(m.forward(ids)).float()
                if r:
                    secs.append(time.perf_counter() - t0)
                    cpus.append(time.process_time() - c0)
        emit("forward 1x128 full logits", 128, secs, cpus, **extra)
    elif args.workload == "decode":
        m = make(lora=False)
        prompt = torch.randint(0, V, (1, 64), generator=g)
        fed = torch.randint(0, V, (64, 1, 1), generator=g)
        secs, cpus, prefill = [], [], []
        with torch.no_grad():
            for r in range(args.reps + 1):
                cache = [None] * L
                t0 = time.perf_counter()
                m.logits(m.forward(prompt, cache)[:, -1:])
                t1, c1 = time.perf_counter(), time.process_time()
                for t in range(64):
                    m.logits(m.forward(fed[t], cache)).float()
                t2 = time.perf_counter()
                if r:
                    prefill.append(t1 - t0)
                    secs.append(t2 - t1)
                    cpus.append(time.process_time() - c1)
        emit("decode 64 after 64", 64, secs, cpus, prefill_ms=median(prefill) * 1e3, **extra)
    else:
        B = 1 if args.workload == "lora1" else 4
        m = make(lora=True)
        ids = torch.randint(0, V, (B, 128), generator=g)
        targets = torch.randint(0, V, (B * 128,), generator=g)
        params = m.lora_params()
        secs, cpus = [], []
        for r in range(args.reps + 1):
            for p in params:
                p.grad = None
            t0, c0 = time.perf_counter(), time.process_time()
            logits = m.logits(m.forward(ids)).float().view(B * 128, V)
            loss = F.cross_entropy(logits, targets)
            loss.backward()
            if r:
                secs.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
        emit(f"lora fwd+bwd CE {B}x128", B * 128, secs, cpus, loss=round(loss.item(), 4), **extra)


if __name__ == "__main__":
    main()

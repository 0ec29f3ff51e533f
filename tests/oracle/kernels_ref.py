"""PyTorch reference for the layer kernels (tests/kernels/test_kernels_oracle.cpp).

Written from the Hugging Face Qwen2 definitions and plain torch operations,
not from ppolab's code. Everything runs in float64 so the reference itself
adds no rounding worth mentioning.

Usage: kernels_ref.py DIR [DIR ...] (one interpreter for many cases: importing
torch takes seconds). Each DIR holds meta.json ({"op": ..., sizes}) and raw
little-endian inputs NAME.f64 / NAME.i32 / NAME.u8; results are written to
that DIR as NAME.f64.
"""
import json
import os
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


def load(d, name, ext, shape):
    dtype = {"f64": np.float64, "i32": np.int32, "u8": np.uint8}[ext]
    a = np.fromfile(os.path.join(d, f"{name}.{ext}"), dtype=dtype)
    if a.size != int(np.prod(shape)):
        raise SystemExit(f"{name}.{ext}: expected {int(np.prod(shape))} values for shape {shape}, got {a.size}")
    return torch.from_numpy(a.reshape(shape).copy())


def save(d, name, t):
    t.detach().to(torch.float64).contiguous().numpy().tofile(os.path.join(d, f"{name}.f64"))


# --- Hugging Face Qwen2 rotary embedding (modeling_qwen2.py) -----------------
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def rope(d, m):
    N, H, D, theta = m["N"], m["heads"], m["head_dim"], m["theta"]
    x = load(d, "x", "f64", (N, H, D))
    pos = load(d, "positions", "i32", (N,)).to(torch.float64)
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).to(torch.float64) / D))
    freqs = torch.outer(pos, inv_freq)  # (N, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (N, D)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]  # unsqueeze over heads
    save(d, "out", x * cos + rotate_half(x) * sin)


# --- grouped-query causal attention with left padding ------------------------
def repeat_kv(x, n_rep):  # (B, nKV, T, hd) -> (B, nKV*n_rep, T, hd), as HF
    B, nKV, T, hd = x.shape
    return x[:, :, None, :, :].expand(B, nKV, n_rep, T, hd).reshape(B, nKV * n_rep, T, hd)


def attention(d, m):
    B, T, nH, nKV, hd = m["B"], m["T"], m["nH"], m["nKV"], m["hd"]
    q = load(d, "q", "f64", (B, T, nH, hd)).requires_grad_()
    k = load(d, "k", "f64", (B, T, nKV, hd)).requires_grad_()
    v = load(d, "v", "f64", (B, T, nKV, hd)).requires_grad_()
    mask = load(d, "mask", "u8", (B, T)).bool()
    dout = load(d, "dout", "f64", (B, T, nH, hd))
    qh = q.transpose(1, 2)  # (B, nH, T, hd)
    kh = repeat_kv(k.transpose(1, 2), nH // nKV)
    vh = repeat_kv(v.transpose(1, 2), nH // nKV)
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))[None] & mask[:, None, :]  # (B, Tq, Tk)
    additive = torch.zeros(B, 1, T, T).masked_fill(~allowed[:, None], torch.finfo(torch.float64).min)
    probs = torch.softmax(qh @ kh.transpose(-1, -2) / hd**0.5 + additive, dim=-1)
    qmask = mask[:, None, :, None].to(torch.float64)  # padded query rows: zeros
    probs = probs * qmask
    out = (probs @ vh).transpose(1, 2)  # (B, T, nH, hd)
    (out * dout).sum().backward()
    save(d, "out", out)
    save(d, "probs", probs)
    save(d, "dq", q.grad)
    save(d, "dk", k.grad)
    save(d, "dv", v.grad)


# --- log-probabilities of targets under the output layer ---------------------
def lm_logprobs(d, m):
    N, H, V = m["N"], m["H"], m["V"]
    h = load(d, "h", "f64", (N, H)).requires_grad_()
    W = load(d, "W", "f64", (V, H)).requires_grad_()
    targets = load(d, "targets", "i32", (N,)).long()
    dlogp = load(d, "dlogp", "f64", (N,))

    def logprobs(x):
        return torch.log_softmax(x @ W.T, dim=-1).gather(1, targets[:, None])[:, 0]

    if m["bf16"]:
        # matmul.h: a BF16 weight sees its input rounded to BF16 (nearest even).
        hr = h.detach().to(torch.float32).to(torch.bfloat16).to(torch.float64)
        used = h + (hr - h).detach()  # the rounding passes the gradient straight through
        save(d, "logp_unrounded", logprobs(h.detach()))
    else:
        used = h
    logp = logprobs(used)
    (logp * dlogp).sum().backward()
    save(d, "logp", logp)
    save(d, "dh", h.grad)
    save(d, "dW", W.grad)


def main():
    if len(sys.argv) < 2:
        raise SystemExit("usage: kernels_ref.py DIR [DIR ...]")
    for d in sys.argv[1:]:
        with open(os.path.join(d, "meta.json")) as f:
            m = json.load(f)
        {"rope": rope, "attention": attention, "lm_logprobs": lm_logprobs}[m["op"]](d, m)


if __name__ == "__main__":
    main()

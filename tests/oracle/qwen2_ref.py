#!/usr/bin/env python3
"""qwen2_ref.py — an independent PyTorch Qwen2, the oracle of the model tests.

Written from the Hugging Face `modeling_qwen2` definition (transformers 4.4x),
not from ppolab's C++: RMSNorm (`weight * x * rsqrt(mean(x²) + eps)`), RoPE
with `rotate_half` and `inv_freq = 1/θ^(arange(0, d, 2)/d)`, grouped-query
attention by `repeat_kv`, causal + padding mask with a large negative fill,
position ids `cumsum(mask) − 1` (HF's generate does the same for left-padded
batches), SwiGLU MLP `down(silu(gate(x)) * up(x))`, q/k/v biases, tied LM head.
LoRA as PEFT: `y = W x + b + (alpha/r) · B(A x)`. Scalar heads: `w·h + b`
on the final normed hidden state.

Everything runs in float64. With `"bf16": true` the roundings ppolab
documents (src/model/qwen2.h) are applied: the input of each base-matrix
product (projections and LM head) is rounded to BF16, and each projection
output (base + bias + LoRA) is rounded to BF16; a rounding is a
straight-through identity for autograd.

Usage: qwen2_ref.py IN_DIR OUT_DIR
  IN_DIR/case.json  {"config": {...}, "bf16": bool, "lora": {"rank", "alpha"} | null,
                     "tensors": {name: {"shape": [...], "offset": n}},   (float32 elements)
                     "runs": [{"prefix": "a.", "tokens": [[...]], "mask": [[...]],
                               "response_mask": [[...]], "value_targets": [[...]],
                               "tasks": ["logits", "ce", "bt", "value"]}, ...]}
  IN_DIR/tensors.f32  the tensors, little-endian float32, concatenated
  OUT_DIR/out.json  {name: {"shape": [...], "offset": n}}  (float64 elements)
  OUT_DIR/out.f64
Outputs, each name after its run's prefix: "logits" (B, T, V); per loss L in
ce|bt|value: "L.loss" (1) and "L.grad.<tensor name>" for every input tensor.
Losses: ce = −mean over response tokens of log p(token | prefix);
bt = −mean log σ(s_c − s_r) with rows [0, B/2) chosen and [B/2, B) rejected,
s read at the last position whose response_mask is 1; value = 0.5 · mean over
response tokens of (V − target)², V of token t read at position t − 1.
"""
import json
import math
import os
import sys

import numpy as np
import torch


def round_bf16(x):
    """Round to BF16 (via float32, as the C++ rounds its float32 values); identity for autograd."""
    r = x.detach().float().to(torch.bfloat16).to(torch.float64)
    return x + (r - x).detach()


class Qwen2Ref:
    def __init__(self, cfg, params, lora, bf16):
        self.cfg = cfg
        self.p = params
        self.lora = lora
        self.bf16 = bf16
        self.L = cfg["num_hidden_layers"]
        self.nH = cfg["num_attention_heads"]
        self.nKV = cfg["num_key_value_heads"]
        self.hd = cfg.get("head_dim") or cfg["hidden_size"] // self.nH
        self.eps = cfg["rms_norm_eps"]
        self.theta = cfg["rope_theta"]

    def rms_norm(self, x, w):
        variance = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(variance + self.eps))

    def linear(self, x, prefix):
        W = self.p[prefix + ".weight"]
        xin = round_bf16(x) if self.bf16 else x
        y = xin @ W.t()
        if prefix + ".bias" in self.p:
            y = y + self.p[prefix + ".bias"]
        if self.lora is not None and prefix + ".lora_A" in self.p:
            A, B = self.p[prefix + ".lora_A"], self.p[prefix + ".lora_B"]
            y = y + (self.lora["alpha"] / self.lora["rank"]) * ((x @ A.t()) @ B.t())
        return round_bf16(y) if self.bf16 else y

    @staticmethod
    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def rotary(self, position_ids):
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, dtype=torch.float64) / self.hd))
        freqs = position_ids.to(torch.float64)[..., None] * inv_freq  # (B, T, hd/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos()[:, None], emb.sin()[:, None]  # (B, 1, T, hd)

    @staticmethod
    def repeat_kv(x, n_rep):
        b, h, t, d = x.shape
        if n_rep == 1:
            return x
        return x[:, :, None, :, :].expand(b, h, n_rep, t, d).reshape(b, h * n_rep, t, d)

    def forward(self, tokens, mask):
        """Final normed hidden states (B, T, H)."""
        Bn, T = tokens.shape
        position_ids = mask.long().cumsum(-1) - 1
        position_ids = position_ids.masked_fill(mask == 0, 1)
        cos, sin = self.rotary(position_ids)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        allowed = causal[None, None] & (mask[:, None, None, :] == 1)  # (B, 1, T, T)
        neg = torch.finfo(torch.float64).min
        x = self.p["model.embed_tokens.weight"][tokens]
        for i in range(self.L):
            pre = f"model.layers.{i}."
            residual = x
            h = self.rms_norm(x, self.p[pre + "input_layernorm.weight"])
            q = self.linear(h, pre + "self_attn.q_proj").view(Bn, T, self.nH, self.hd).transpose(1, 2)
            k = self.linear(h, pre + "self_attn.k_proj").view(Bn, T, self.nKV, self.hd).transpose(1, 2)
            v = self.linear(h, pre + "self_attn.v_proj").view(Bn, T, self.nKV, self.hd).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k = self.repeat_kv(k, self.nH // self.nKV)
            v = self.repeat_kv(v, self.nH // self.nKV)
            scores = (q @ k.transpose(2, 3)) / math.sqrt(self.hd)
            scores = scores.masked_fill(~allowed, neg)
            probs = torch.softmax(scores, dim=-1)
            attn = (probs @ v).transpose(1, 2).reshape(Bn, T, self.nH * self.hd)
            x = residual + self.linear(attn, pre + "self_attn.o_proj")
            residual = x
            h = self.rms_norm(x, self.p[pre + "post_attention_layernorm.weight"])
            gate = self.linear(h, pre + "mlp.gate_proj")
            up = self.linear(h, pre + "mlp.up_proj")
            x = residual + self.linear(torch.nn.functional.silu(gate) * up, pre + "mlp.down_proj")
        return self.rms_norm(x, self.p["model.norm.weight"])

    def logits(self, hidden):
        W = self.p.get("lm_head.weight", self.p["model.embed_tokens.weight"])
        return (round_bf16(hidden) if self.bf16 else hidden) @ W.t()

    def head(self, h):
        return h @ self.p["head.weight"][0] + self.p["head.bias"][0]


def run_case(model, params, run, outputs):
    prefix = run.get("prefix", "")
    tokens = torch.tensor(run["tokens"], dtype=torch.long)
    mask = torch.tensor(run["mask"], dtype=torch.long)
    rmask = torch.tensor(run.get("response_mask", np.zeros(tokens.shape, dtype=np.int64).tolist()), dtype=torch.long)
    Bn, T = tokens.shape
    for task in run["tasks"]:
        for p in params.values():
            p.grad = None
        hidden = model.forward(tokens, mask)
        if task == "logits":
            outputs[prefix + "logits"] = model.logits(hidden).detach()
            continue
        # response positions (b, t): the token at t is predicted from position t − 1
        pos = [(b, t) for b in range(Bn) for t in range(T) if rmask[b, t] == 1]
        if task == "ce":
            logits = model.logits(hidden)
            logp = torch.log_softmax(logits, dim=-1)
            terms = [logp[b, t - 1, tokens[b, t]] for b, t in pos]
            loss = -torch.stack(terms).mean()
        elif task == "bt":
            last = [max(t for t in range(T) if rmask[b, t] == 1) for b in range(Bn)]
            scores = torch.stack([model.head(hidden[b, last[b]]) for b in range(Bn)])
            half = Bn // 2
            loss = -torch.nn.functional.logsigmoid(scores[:half] - scores[half:]).mean()
        elif task == "value":
            targets = torch.tensor(run["value_targets"], dtype=torch.float64)
            terms = [(model.head(hidden[b, t - 1]) - targets[b, t]) ** 2 for b, t in pos]
            loss = 0.5 * torch.stack(terms).mean()
        else:
            raise SystemExit(f"unknown task {task}")
        loss.backward()
        outputs[prefix + task + ".loss"] = loss.detach().reshape(1)
        for name, p in params.items():
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            outputs[prefix + task + ".grad." + name] = g.detach()


def main():
    in_dir, out_dir = sys.argv[1], sys.argv[2]
    with open(os.path.join(in_dir, "case.json")) as f:
        case = json.load(f)
    raw = np.fromfile(os.path.join(in_dir, "tensors.f32"), dtype="<f4")
    params = {}
    for name, meta in case["tensors"].items():
        n = int(np.prod(meta["shape"])) if meta["shape"] else 1
        arr = raw[meta["offset"]: meta["offset"] + n].astype(np.float64).reshape(meta["shape"])
        params[name] = torch.tensor(arr, dtype=torch.float64, requires_grad=True)
    model = Qwen2Ref(case["config"], params, case.get("lora"), case.get("bf16", False))
    outputs = {}
    for run in case["runs"]:
        run_case(model, params, run, outputs)

    os.makedirs(out_dir, exist_ok=True)
    manifest, chunks, offset = {}, [], 0
    for name, t in outputs.items():
        a = t.numpy().astype("<f8").ravel()
        manifest[name] = {"shape": list(t.shape), "offset": offset}
        chunks.append(a)
        offset += a.size
    np.concatenate(chunks).tofile(os.path.join(out_dir, "out.f64"))
    with open(os.path.join(out_dir, "out.json"), "w") as f:
        json.dump(manifest, f)


if __name__ == "__main__":
    main()

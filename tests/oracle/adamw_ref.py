"""AdamW + gradient-norm clipping oracle: torch.optim.AdamW and
torch.nn.utils.clip_grad_norm_, exactly as the tutorial's trainer uses them.

Usage: adamw_ref.py IN.json OUT.json
IN:  {"beta1", "beta2", "eps", "weight_decay", "max_norm" (null: no clipping),
      "params": [{"name", "shape", "values"}], "steps": [{"lr", "grads": [[...], ...]}]}
OUT: {"norms": [...], "params": [[...]], "exp_avg": [[...]], "exp_avg_sq": [[...]]}
Values are float32 numbers written as exact decimal doubles.
"""
import json
import sys

import torch


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    torch.set_num_threads(1)
    params = [torch.nn.Parameter(torch.tensor(p["values"], dtype=torch.float32).reshape(p["shape"]))
              for p in spec["params"]]
    opt = torch.optim.AdamW(params, lr=1.0, betas=(spec["beta1"], spec["beta2"]), eps=spec["eps"],
                            weight_decay=spec["weight_decay"])
    norms = []
    for step in spec["steps"]:
        opt.zero_grad(set_to_none=True)
        for p, g in zip(params, step["grads"]):
            p.grad = torch.tensor(g, dtype=torch.float32).reshape(p.shape)
        if spec["max_norm"] is not None:
            norms.append(float(torch.nn.utils.clip_grad_norm_(params, spec["max_norm"])))
        for group in opt.param_groups:
            group["lr"] = step["lr"]
        opt.step()
    out = {
        "norms": norms,
        "params": [p.detach().reshape(-1).tolist() for p in params],
        "exp_avg": [opt.state[p]["exp_avg"].reshape(-1).tolist() for p in params],
        "exp_avg_sq": [opt.state[p]["exp_avg_sq"].reshape(-1).tolist() for p in params],
        "steps": [float(opt.state[p]["step"]) for p in params],
        "torch": torch.__version__,
    }
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()

"""The LoRA projection as the real PEFT library computes it (the oracle of
tests/model/test_lora_peft.cpp): a torch.nn.Linear base (BF16 or FP32, with
bias) wrapped by peft.get_peft_model with LoRA r, alpha, no dropout, bias
"none"; A and B set to the given values; forward on x and backward of
sum(y * dy), in the dtypes a Hugging Face model runs them.

Usage: lora_peft_ref.py IN_DIR OUT.json
  IN_DIR/case.json   {"cases": [{"name", "bf16", "M", "in", "out", "rank", "alpha",
                                 "tensors": {NAME: offset}}]}  NAME: x W bias A B dy
  IN_DIR/tensors.f32 the tensors, float32, row-major, at those offsets (in floats)
Writes {"versions": {...}, "cases": {name: {"y", "dx", "dA", "dB", "scaling"}}} (float lists).
Exit code 3 when peft or transformers cannot be imported (the caller fails
with a message saying what to install)."""
import json
import sys

import numpy as np

try:
    import peft
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model
except ImportError as e:
    print("peft/transformers not importable:", e)
    sys.exit(3)


class Wrapper(torch.nn.Module):
    """The smallest model PEFT wraps: one Linear named like a Qwen2 projection."""

    def __init__(self, linear):
        super().__init__()
        self.q_proj = linear

    def forward(self, x):
        return self.q_proj(x)


def run(case, data):
    def tensor(name, shape):
        o = case["tensors"][name]
        n = int(np.prod(shape))
        return torch.from_numpy(data[o:o + n].reshape(shape).copy())

    M, n_in, n_out, r = case["M"], case["in"], case["out"], case["rank"]
    dtype = torch.bfloat16 if case["bf16"] else torch.float32
    linear = torch.nn.Linear(n_in, n_out, bias=True)
    with torch.no_grad():
        linear.weight.copy_(tensor("W", (n_out, n_in)))
        linear.bias.copy_(tensor("bias", (n_out,)))
    linear = linear.to(dtype)  # the base as a checkpoint of that dtype holds it
    model = get_peft_model(
        Wrapper(linear),
        LoraConfig(r=r, lora_alpha=case["alpha"], lora_dropout=0.0, bias="none", target_modules=["q_proj"]))
    layer = model.base_model.model.q_proj
    with torch.no_grad():  # the adapters stay FP32, as PEFT creates them
        layer.lora_A["default"].weight.copy_(tensor("A", (r, n_in)))
        layer.lora_B["default"].weight.copy_(tensor("B", (n_out, r)))
    # The hidden state enters in the base's dtype (a BF16 model's activations
    # are BF16; the test's values are BF16-exact, so nothing is rounded here).
    x = tensor("x", (M, n_in)).to(dtype).requires_grad_(True)
    y = model(x)
    y.backward(tensor("dy", (M, n_out)).to(y.dtype))
    f = lambda t: t.detach().to(torch.float64).reshape(-1).tolist()
    return {"y": f(y), "dx": f(x.grad), "dA": f(layer.lora_A["default"].weight.grad),
            "dB": f(layer.lora_B["default"].weight.grad), "scaling": layer.scaling["default"],
            "y_dtype": str(y.dtype), "dx_dtype": str(x.grad.dtype)}


def main():
    in_dir, out = sys.argv[1], sys.argv[2]
    spec = json.load(open(in_dir + "/case.json"))
    data = np.fromfile(in_dir + "/tensors.f32", dtype=np.float32)
    torch.manual_seed(0)
    result = {"versions": {"torch": torch.__version__, "peft": peft.__version__,
                           "transformers": transformers.__version__},
              "cases": {c["name"]: run(c, data) for c in spec["cases"]}}
    json.dump(result, open(out, "w"))


if __name__ == "__main__":
    main()

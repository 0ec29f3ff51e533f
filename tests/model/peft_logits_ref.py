"""The round trip ppolab -> PEFT -> logits (the oracle of
tests/model/test_lora_peft.cpp): a ppolab checkpoint folder loaded by
transformers' Qwen2ForCausalLM in float32 (eager attention), a ppolab PEFT
export loaded onto it by PEFT, and the logits of one token sequence, with
and without the adapter.

Usage: peft_logits_ref.py MODEL_DIR ADAPTER_DIR IDS OUT_DIR
  IDS: comma-separated token ids (one row)
Writes OUT_DIR/with.f32 and OUT_DIR/without.f32 (T x V float32, row-major)
and OUT_DIR/out.json {"T", "V", "versions"}. Exit code 3 when peft or
transformers cannot be imported (the caller fails, saying what to install)."""
import json
import sys

try:
    import peft
    import torch
    import transformers
    from peft import PeftModel
    from transformers import Qwen2ForCausalLM
except ImportError as e:
    print("peft/transformers not importable:", e)
    sys.exit(3)


def main():
    model_dir, adapter_dir, ids, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    tokens = torch.tensor([[int(t) for t in ids.split(",")]])
    base = Qwen2ForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    base.eval()
    with torch.no_grad():
        without = base(input_ids=tokens).logits[0].contiguous()
    model = PeftModel.from_pretrained(base, adapter_dir)
    model.eval()
    with torch.no_grad():
        with_adapter = model(input_ids=tokens).logits[0].contiguous()
    with_adapter.numpy().astype("float32").tofile(out + "/with.f32")
    without.numpy().astype("float32").tofile(out + "/without.f32")
    json.dump({"T": int(with_adapter.shape[0]), "V": int(with_adapter.shape[1]),
               "versions": {"torch": torch.__version__, "peft": peft.__version__,
                            "transformers": transformers.__version__}}, open(out + "/out.json", "w"))


if __name__ == "__main__":
    main()

"""An adapter written by PEFT itself (the oracle of
tests/model/test_lora_peft.cpp, `generate/score --adapter`): a ppolab
checkpoint folder loaded by transformers in float32, wrapped by PEFT with
its own choices — r 4, lora_alpha 12, three of the seven projections, one
of the two layers, lora_dropout 0.1, random A and B — saved with
save_pretrained, and its logits on one sequence in eval mode (no dropout).

Usage: peft_write_ref.py MODEL_DIR ADAPTER_OUT IDS OUT_DIR
Writes ADAPTER_OUT (adapter_config.json, adapter_model.safetensors),
OUT_DIR/with.f32 (T x V float32) and OUT_DIR/out.json {"T", "V", "versions"}.
Exit code 3 when peft or transformers cannot be imported."""
import json
import sys

try:
    import peft
    import torch
    import transformers
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2ForCausalLM
except ImportError as e:
    print("peft/transformers not importable:", e)
    sys.exit(3)


def main():
    model_dir, adapter_out, ids, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    torch.manual_seed(5)
    tokens = torch.tensor([[int(t) for t in ids.split(",")]])
    base = Qwen2ForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    config = LoraConfig(r=4, lora_alpha=12, target_modules=["q_proj", "v_proj", "down_proj"], lora_dropout=0.1,
                        layers_to_transform=[1], init_lora_weights=False, bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    with torch.no_grad():  # B of a useful size (PEFT's random init makes it tiny)
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.2)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=tokens).logits[0].contiguous()
    model.save_pretrained(adapter_out)
    logits.numpy().astype("float32").tofile(out + "/with.f32")
    json.dump({"T": int(logits.shape[0]), "V": int(logits.shape[1]),
               "versions": {"torch": torch.__version__, "peft": peft.__version__,
                            "transformers": transformers.__version__}}, open(out + "/out.json", "w"))


if __name__ == "__main__":
    main()

"""Loads a ppolab PEFT export with the real `peft` library on a small random
Qwen2 (transformers) and reports, for every LoRA parameter PEFT created, the
largest difference from the exported tensor, plus PEFT's scaling.
Usage: peft_load.py ADAPTER_DIR OUT.json HIDDEN INTERMEDIATE LAYERS HEADS KV_HEADS
Exit code 3 when peft/transformers are not installed (the caller fails, saying so)."""
import json
import sys

try:
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import Qwen2Config, Qwen2ForCausalLM
except ImportError as e:
    print("peft not available:", e)
    sys.exit(3)

folder, out = sys.argv[1], sys.argv[2]
hidden, inter, layers, heads, kv = (int(x) for x in sys.argv[3:8])
torch.manual_seed(0)
config = Qwen2Config(vocab_size=64, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                     num_attention_heads=heads, num_key_value_heads=kv, tie_word_embeddings=True)
model = PeftModel.from_pretrained(Qwen2ForCausalLM(config), folder)
exported = load_file(folder + "/adapter_model.safetensors")
report = {"peft_params": {}, "scaling": {}, "unused_file_tensors": []}
used = set()
for name, p in model.named_parameters():
    if ".lora_" not in name:
        continue
    file_name = name.replace(".default.weight", ".weight")
    if file_name not in exported:
        report["peft_params"][name] = None  # PEFT created it, the file lacks it
        continue
    used.add(file_name)
    report["peft_params"][name] = float((p.detach() - exported[file_name]).abs().max())
for name, m in model.named_modules():
    if hasattr(m, "scaling") and isinstance(m.scaling, dict) and "default" in m.scaling:
        report["scaling"][name] = m.scaling["default"]
report["unused_file_tensors"] = sorted(set(exported) - used)
json.dump(report, open(out, "w"))

"""Independent reader of a PEFT adapter folder (json + struct + numpy, no
ppolab code): prints {"config": ..., "tensors": {name: {"shape", "sum", "first"}}}.
Usage: peft_read.py DIR OUT.json"""
import json
import struct
import sys

import numpy as np

folder, out = sys.argv[1], sys.argv[2]
config = json.load(open(folder + "/adapter_config.json"))
raw = open(folder + "/adapter_model.safetensors", "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + n])
meta = header.pop("__metadata__", {})
data = raw[8 + n:]
tensors = {}
for name, info in header.items():
    assert info["dtype"] == "F32", info
    b, e = info["data_offsets"]
    arr = np.frombuffer(data[b:e], dtype="<f4").reshape(info["shape"])
    tensors[name] = {"shape": list(arr.shape), "sum": float(arr.astype(np.float64).sum()), "first": float(arr.flat[0])}
json.dump({"config": config, "tensors": tensors, "metadata": meta}, open(out, "w"))

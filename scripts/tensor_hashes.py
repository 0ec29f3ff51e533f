#!/usr/bin/env python3
"""tensor_hashes.py — sha256 of every tensor's bytes in a run's learned files.

Usage: scripts/tensor_hashes.py RUN [--json]
Reads RUN/base/model.safetensors, RUN/sft/final/learned.safetensors,
RUN/reward/final/learned.safetensors and RUN/ppo/final/{actor,critic}/
learned.safetensors and prints `file  tensor  dtype  shape  sha256` for each
tensor, over the tensor's bytes only: the header's metadata (identity, paths,
config hash) is left out, so two runs that learned the same numbers print the
same lines. The last line is one sha256 over all of them. Python standard
library only.
"""
import hashlib, json, pathlib, struct, sys

FILES = ["base/model.safetensors", "sft/final/learned.safetensors", "reward/final/learned.safetensors",
         "ppo/final/actor/learned.safetensors", "ppo/final/critic/learned.safetensors"]


def tensors(path):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            sys.exit(f"tensor_hashes: {path}: shorter than the 8-byte safetensors header length")
        (n,) = struct.unpack("<Q", raw)
        header = json.loads(f.read(n))
        data_start = 8 + n
        for name in sorted(k for k in header if k != "__metadata__"):
            t = header[name]
            begin, end = t["data_offsets"]
            f.seek(data_start + begin)
            blob = f.read(end - begin)
            if len(blob) != end - begin:
                sys.exit(f"tensor_hashes: {path}: tensor {name} is cut short")
            yield name, t["dtype"], t["shape"], hashlib.sha256(blob).hexdigest()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    run = pathlib.Path(sys.argv[1])
    rows = []
    for rel in FILES:
        p = run / rel
        if not p.exists():
            sys.exit(f"tensor_hashes: {p}: missing (expected a finished run)")
        for name, dtype, shape, digest in tensors(p):
            rows.append((rel, name, dtype, "x".join(map(str, shape)), digest))
    if "--json" in sys.argv[2:]:
        print(json.dumps([dict(zip(("file", "tensor", "dtype", "shape", "sha256"), r)) for r in rows], indent=1))
        return
    for r in rows:
        print("  ".join(r))
    total = hashlib.sha256("\n".join("  ".join(r) for r in rows).encode()).hexdigest()
    print(f"all {len(rows)} tensors  {total}")


if __name__ == "__main__":
    main()

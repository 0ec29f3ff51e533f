#!/usr/bin/env python3
"""golden_hashes.py — one sha256 per output of a run, for the golden test.

Usage: scripts/golden_hashes.py RUN                 print {file: sha256} as JSON
       scripts/golden_hashes.py RUN --check GOLDEN  compare with a committed file
       scripts/golden_hashes.py RUN --write GOLDEN  write it (temporary file, then rename)

Under engine.numerics = canonical (docs/numerics.md) a run's numbers are the
same bytes on every CPU, thread count and world size, so these hashes are a
fact of the code and the config: tests/golden/ holds them, and the golden
test fails on any difference. What is hashed, per file under RUN:
  *.safetensors  every tensor's name, dtype, shape and bytes (the header's
                 metadata, which names paths and code hashes, is left out);
  *.state.gz     the resume state's tensors as above, and its metadata JSON
                 normalised as below;
  *.json(l)      the values, normalised: the keys scripts/compare_runs.py
                 ignores (durations, speeds, code hashes, hashes of files that
                 hold them, results.json's engine block) are dropped and the
                 run folder's absolute path becomes RUN (so run ppolab with an
                 absolute --out);
and nothing else (logs, TensorBoard events, the HTML report, run-state.json,
which records when steps ran, and *timings* files). Python standard library only.
"""
import gzip, hashlib, importlib.util, io, json, os, pathlib, struct, sys, tempfile

HERE = pathlib.Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("compare_runs", HERE / "compare_runs.py")
compare_runs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare_runs)
SKIPPED = {"run-state.json"}
SKIPPED_DIRS = {"tensorboard"}


def normalise(v):
    if isinstance(v, dict):
        return {k: normalise(x) for k, x in v.items() if not compare_runs.IGNORED.match(k)}
    if isinstance(v, list):
        return [normalise(x) for x in v]
    return v


def json_digest(value):
    return hashlib.sha256(json.dumps(normalise(value), sort_keys=True).encode()).hexdigest()


def safetensors_digest(raw, where):
    if len(raw) < 8:
        sys.exit(f"golden_hashes: {where}: shorter than a safetensors header")
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    h = hashlib.sha256()
    for name in sorted(k for k in header if k != "__metadata__"):
        t = header[name]
        begin, end = t["data_offsets"]
        blob = raw[8 + n + begin:8 + n + end]
        h.update(f"{name}\t{t['dtype']}\t{t['shape']}\t{hashlib.sha256(blob).hexdigest()}\n".encode())
    return h.hexdigest(), header.get("__metadata__", {})


def file_digest(path, run):
    rel = str(path.relative_to(run))
    if path.name.endswith(".safetensors"):
        return safetensors_digest(path.read_bytes(), rel)[0]
    if path.name.endswith(".state.gz"):
        tensors, meta = safetensors_digest(gzip.decompress(path.read_bytes()), rel)
        state = json.loads(meta.get("ppolab_resume_state", "{}"))
        return hashlib.sha256((tensors + json_digest(state)).encode()).hexdigest()
    text = path.read_text().replace(str(run), "RUN")  # run: absolute (main)
    if path.suffix == ".jsonl":
        return json_digest([json.loads(line) for line in text.splitlines() if line.strip()])
    return json_digest(json.loads(text))


def digests(run):
    out = {}
    for root, dirs, files in os.walk(run):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
        for f in sorted(files):
            p = pathlib.Path(root) / f
            if f in SKIPPED or "timings" in f or not f.endswith((".safetensors", ".state.gz", ".json", ".jsonl")):
                continue
            out[str(p.relative_to(run))] = file_digest(p, run)
    return out


def main():
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] not in ("--check", "--write")):
        sys.exit(__doc__)
    run = pathlib.Path(sys.argv[1]).resolve()  # paths in the reports are replaced in this form
    if not run.is_dir():
        sys.exit(f"golden_hashes: {run}: not a run folder")
    got = digests(run)
    if len(sys.argv) == 2:
        print(json.dumps(got, indent=1, sort_keys=True))
        return 0
    golden = pathlib.Path(sys.argv[3])
    if sys.argv[2] == "--write":
        fd, tmp = tempfile.mkstemp(dir=golden.parent, prefix=".golden.")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(got, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, golden)
        print(f"golden_hashes: wrote {len(got)} hashes to {golden}")
        return 0
    want = json.loads(golden.read_text())
    bad = [f"{k}: {'missing' if k not in got else 'not in the golden file' if k not in want else 'differs'}"
           for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)]
    if bad:
        print(f"golden_hashes: {len(bad)} of {len(want)} outputs differ from {golden}:")
        for line in bad[:60]:
            print("  " + line)
        return 1
    print(f"golden_hashes: same: {len(got)} outputs equal {golden}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

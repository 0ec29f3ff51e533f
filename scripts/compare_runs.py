#!/usr/bin/env python3
"""compare_runs.py — do two finished runs hold the same numbers?

Usage: scripts/compare_runs.py RUN_A RUN_B
Compares results.json, every stage report (RUN/{pretrain,sft,reward,ppo}/*.json
beside the state files), the PPO metrics (*.metrics.jsonl) and the evaluation
generations (RUN/eval/*.json) of two runs, value by value, leaving out what
is allowed to differ between two runs of the same code and config:
durations (keys named `seconds`, `*_seconds`, `seconds_*`, `iteration_seconds`),
`peak_rss_bytes`, speeds (`tokens_per_second`), `code_sha256`, hashes of files
that hold durations or the code hash (`generations_sha256`, `artefact_sha256`, `state_file`, the
resume checks' file and content sha256), and the run
folder's own absolute path (replaced by RUN), and results.json's `engine`
(the instruction sets and kernels that ran: under engine.numerics =
canonical they change no number). A run stopped by --until is compared on
the stage files it has. Exit 0 and `same` when nothing
else differs; otherwise the first differences, by path, and exit 1.
Python standard library only.
"""
import json, pathlib, re, sys

IGNORED = re.compile(r'^(engine|artefact_sha256|judge_learned_sha256|seconds|.*_seconds|seconds_.*|iteration_seconds|peak_rss_bytes|code_sha256|'
                     r'generations_sha256|state_file|tokens_per_second|.*_content_sha256|restarted_from|readable_roots|final_dir|written_this_run|'
                     r'.*_sha256_of_state|continuous_sha256|resume_sha256|first_sha256|second_sha256|first_file|second_file)$')


def load(path, root):
    text = path.read_text().replace(str(root.resolve()), 'RUN')
    # A relative name (a run called A) only where it is a whole path, not in every word with an A.
    text = re.sub(r'(?<![\w./-])' + re.escape(str(root)) + r'(?=[/"])', 'RUN', text)
    if path.suffix == '.jsonl':
        return [json.loads(l) for l in text.splitlines() if l.strip()]
    return json.loads(text)


def diff(a, b, where, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if IGNORED.match(k):
                continue
            if k not in a or k not in b:
                out.append(f'{where}.{k}: only in {"B" if k not in a else "A"}')
            else:
                diff(a[k], b[k], f'{where}.{k}', out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f'{where}: {len(a)} vs {len(b)} items')
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f'{where}[{i}]', out)
    elif a != b:
        out.append(f'{where}: {json.dumps(a)[:80]} vs {json.dumps(b)[:80]}')


def files(root):
    rels = ['results.json'] if (root / 'results.json').is_file() else []  # a run stopped with --until has none
    for stage in ('pretrain', 'sft', 'reward', 'ppo', 'eval', 'base'):
        d = root / stage
        if d.is_dir():
            rels += sorted(str(p.relative_to(root)) for p in d.iterdir()
                           if p.suffix in ('.json', '.jsonl') and p.is_file())
    return rels


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out = []
    ra, rb = files(a), files(b)
    for rel in sorted(set(ra) | set(rb)):
        if rel not in ra or rel not in rb:
            out.append(f'{rel}: only in {"A" if rel in ra else "B"}')
            continue
        diff(load(a / rel, a), load(b / rel, b), rel, out)
    if out:
        print(f'{len(out)} differences; the first:')
        for line in out[:40]:
            print('  ' + line)
        return 1
    print(f'same: {len(ra)} files, every number equal (durations and code hashes aside)')
    return 0


if __name__ == '__main__':
    sys.exit(main())

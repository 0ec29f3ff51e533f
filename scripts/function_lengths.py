#!/usr/bin/env python3
"""function_lengths.py — the longest C++ function definitions, in lines.

Usage: scripts/function_lengths.py [--top N] [--max-lines L] [--only NAME] PATH...
Prints `lines  file:line  name`, longest first. A function is a brace block
whose enclosing blocks are all namespaces/classes; its length runs from the
first line of its signature to its closing brace (lambdas count inside it).
With --max-lines, exits 1 naming every function longer than L. With --only,
only the functions named NAME (e.g. PpoRun::iterate) count, and finding
none is an error (exit 2).
"""
import argparse, pathlib, re, sys

SCOPE = re.compile(r'\b(namespace|struct|class|union|enum)\b[^()]*$|extern\s*""\s*$')

def clean(text):
    # comments and literals out, newlines kept (so line numbers hold)
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i); j = n if j < 0 else j; i = j; continue
        if text.startswith('/*', i):
            j = text.find('*/', i + 2); j = n if j < 0 else j + 2
            out.append('\n' * text.count('\n', i, j)); i = j; continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 40]) if c == 'R' and (i == 0 or not (text[i-1].isalnum() or text[i-1] == '_')) else None
        if m:
            end = ')' + m.group(1) + '"'
            j = text.find(end, i + m.end()); j = n if j < 0 else j + len(end)
            out.append('""' + '\n' * text.count('\n', i, j)); i = j; continue
        if c in '"\'':
            if c == "'" and i > 0 and text[i-1].isalnum():  # digit separator 1'000
                i += 1; continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + c); i = j + 1; continue
        out.append(c); i += 1
    return ''.join(out)

def functions(path):
    text = clean(path.read_text(errors='replace'))
    lines_before = [0]
    stack = []  # (kind, start_line, name)
    found = []
    last = 0  # index after the last ; { }
    line = 1
    for i, c in enumerate(text):
        if c == '\n':
            line += 1
        if c not in ';{}':
            continue
        head = text[last:i]
        if c == '{':
            in_scope = all(k == 'scope' for k, _, _ in stack)
            h = head.strip()
            if SCOPE.search(h) or h.startswith('extern'):
                kind = 'scope'
            elif in_scope and ')' in h and not re.search(r'=\s*$', h) and not h.endswith(']'):
                kind = 'function'
            else:
                kind = 'block'
            start = line - head.count('\n') + (len(head) - len(head.lstrip('\n ')) and head[:len(head) - len(head.lstrip())].count('\n'))
            m = re.findall(r'([~\w:]+(?:<[^()]*>)?|operator\S+)\s*\(', h)
            name = m[0] if m else h[:40]
            if name.split('::')[-1] in ('if', 'for', 'while', 'switch', 'return'):
                name = m[0] if m else name
            stack.append((kind, start, name))
        elif c == '}':
            if stack:
                kind, start, name = stack.pop()
                if kind == 'function':
                    found.append((line - start + 1, start, name))
        last = i + 1
    return found

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--top', type=int, default=10)
    ap.add_argument('--max-lines', type=int)
    ap.add_argument('--only', help='count only the functions with this name')
    ap.add_argument('paths', nargs='+')
    a = ap.parse_args()
    rows = []
    for arg in a.paths:
        p = pathlib.Path(arg)
        files = sorted(list(p.rglob('*.cpp')) + list(p.rglob('*.h'))) if p.is_dir() else [p]
        for f in files:
            for n, ln, name in functions(f):
                rows.append((n, f'{f}:{ln}', name))
    if a.only is not None:
        rows = [r for r in rows if r[2] == a.only]
        if not rows:
            print(f'function_lengths: no function named {a.only} in {" ".join(a.paths)}', file=sys.stderr)
            return 2
    rows.sort(key=lambda r: (-r[0], r[1]))
    for n, where, name in rows[:a.top]:
        print(f'{n:5d}  {where}  {name}')
    if a.max_lines is not None:
        over = [r for r in rows if r[0] > a.max_lines]
        for n, where, name in over:
            print(f'function_lengths: {where} {name} is {n} lines, over {a.max_lines}', file=sys.stderr)
        return 1 if over else 0
    return 0

if __name__ == '__main__':
    sys.exit(main())

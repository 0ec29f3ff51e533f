#!/usr/bin/env python3
"""Writes tests/fixtures/data/pyrandom.json: values drawn by CPython's own
random.Random, the oracle of src/data/pyrandom.cpp (bit-for-bit MT19937,
getrandbits, _randbelow, shuffle) and of the OfficeHelpPrefs-v1 family split.

usage: python3 scripts/make_pyrandom_fixture.py [OUT]
"""
import json
import random
import sys


def split_help_families(seed):
    # The tutorial's split (seed 000, data.py), verbatim in logic.
    rng = random.Random(seed)
    assignment = {}
    for action in range(6):
        ids = list(range(action * 40, (action + 1) * 40))
        rng.shuffle(ids)
        for position, index in enumerate(ids):
            assignment[index] = 'train' if position < 28 else 'validation' if position < 34 else 'test'
    return [assignment[i] for i in range(240)]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else 'tests/fixtures/data/pyrandom.json'
    seeds = []
    for seed in [49, 0, 1, 12345, -7, 2**32 + 5, 2**63 - 1]:
        r = random.Random(seed)
        row = {'seed': seed}
        row['uint32'] = [r.getrandbits(32) for _ in range(700)]  # crosses one state refill
        row['getrandbits'] = [[k, r.getrandbits(k)] for k in [1, 2, 5, 8, 16, 31, 32, 33, 40, 48, 63, 64]]
        row['randbelow'] = [[n, r._randbelow(n)] for n in [1, 2, 3, 7, 40, 100, 1000, 2**31 + 1, 2**40 + 3]]
        row['random'] = [r.random().hex() for _ in range(5)]
        shuffles = []
        for n in [0, 1, 2, 5, 40]:
            x = list(range(n))
            r.shuffle(x)
            shuffles.append(x)
        row['shuffle'] = shuffles
        seeds.append(row)
    fixture = {
        'python': sys.version.split()[0],
        'generator': 'random.Random',
        'seeds': seeds,
        'split_seed49': split_help_families(49),
        'split_seed7': split_help_families(7),
    }
    with open(out, 'w') as f:
        json.dump(fixture, f, separators=(',', ':'))
        f.write('\n')


if __name__ == '__main__':
    main()

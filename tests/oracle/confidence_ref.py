"""Oracle for src/evaluation/confidence.* and overoptimisation_math.*: a numpy
re-implementation of the hierarchical bootstrap (the splitmix64 stream of
confidence.h replayed vectorised and checked against a sequential replay,
the two-stage resampling, numpy.percentile's default 'linear' rule), a
brute-force best-of-n over all C(N, n) subsets (itertools), and the two
over-optimisation fits by numpy.linalg.lstsq.

Usage: confidence_ref.py FIXTURE.json   (written by tests/evaluation/test_confidence_oracle.cpp)
Exits 0 and prints "confidence oracle: all agree" only when every number
agrees to 1e-12 (relative to max(1, |value|)); any mismatch, and a missing
numpy, exits non-zero (the C++ test then fails; it never skips).
"""
import itertools
import json
import math
import sys

try:
    import numpy as np
except ImportError as e:  # a missing numpy is a failure, not a skip
    print(f"confidence oracle: numpy is required: {e}", file=sys.stderr)
    sys.exit(2)

TOL = 1e-12
MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
failures = []
checks = 0


def close(what, got, want):
    """got (from C++, None for NaN) against want (numpy); NaN matches NaN."""
    global checks
    checks += 1
    got = float("nan") if got is None else float(got)
    want = float(want)
    if math.isnan(got) and math.isnan(want):
        return
    if math.isnan(got) or math.isnan(want) or abs(got - want) > TOL * max(1.0, abs(want)):
        failures.append(f"{what}: C++ {got!r}, numpy {want!r}, difference {abs(got - want)!r}")


def equal(what, got, want):
    global checks
    checks += 1
    if got != want:
        failures.append(f"{what}: C++ {got!r}, oracle {want!r}")


def splitmix_sequential(seed, count):
    state, out = seed, []
    for _ in range(count):
        state = (state + GOLDEN) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        out.append(z ^ (z >> 31))
    return out


def splitmix_vectorised(seed, count):
    """The k-th draw (1-based) has state seed + k·GOLDEN (mod 2^64)."""
    with np.errstate(over="ignore"):
        state = np.uint64(seed) + np.arange(1, count + 1, dtype=np.uint64) * np.uint64(GOLDEN)
        z = state
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def resamples(R, C, settings):
    """(replicates (B, R), contexts (B, R, C)) in confidence.h's draw order."""
    B = settings["resamples"]
    per = (R if R > 1 else 0) + R * C
    draws = splitmix_vectorised(settings["seed"], B * per).reshape(B, per)
    if R > 1:
        reps = (draws[:, :R] % np.uint64(R)).astype(np.int64)
    else:
        reps = np.zeros((B, 1), dtype=np.int64)
    ctx = (draws[:, per - R * C:] % np.uint64(C)).astype(np.int64).reshape(B, R, C)
    return reps, ctx


def resample_means(v, reps, ctx):
    """(B,) the mean over picks of the mean over that pick's contexts."""
    v = np.asarray(v, dtype=np.float64)
    return v[reps[:, :, None], ctx].mean(axis=2).mean(axis=1)


def interval(identity, values, level):
    values = np.asarray(values, dtype=np.float64)
    kept = values[np.isfinite(values)]
    if kept.size == 0:
        return identity, float("nan"), float("nan"), 0
    low, high = np.percentile(kept, [100 * (1 - level) / 2, 100 * (1 + level) / 2])
    return identity, low, high, int(kept.size)


def compare_interval(what, got, want, R, C, level):
    mean, low, high, kept = want
    close(what + ".mean", got["mean"], mean)
    close(what + ".low", got["low"], low)
    close(what + ".high", got["high"], high)
    equal(what + ".resamples", got["resamples"], kept)
    equal(what + ".replicates", got["replicates"], R)
    equal(what + ".contexts", got["contexts"], C)
    close(what + ".level", got["level"], level)


def fit_lstsq(d, r, form):
    d, r = np.asarray(d, dtype=np.float64), np.asarray(r, dtype=np.float64)
    keep = d > 0
    d, r = d[keep], r[keep]
    second = -d * d if form == "bon" else -d * np.log(d)
    (alpha, beta), *_ = np.linalg.lstsq(np.stack([d, second], axis=1), r, rcond=None)
    if form == "bon":
        d_star = alpha / (2 * beta) if beta > 0 and alpha > 0 else float("nan")
    else:
        d_star = math.exp(alpha / beta - 1) if beta > 0 else float("nan")
    rmse = math.sqrt(np.mean((r - alpha * d - beta * second) ** 2))
    return alpha, beta, d_star, int(d.size), rmse


def check_rng(fx):
    head = fx["resamples_head"]
    R, C, s = head["R"], head["C"], head["settings"]
    seq = np.array(splitmix_sequential(s["seed"], 5000), dtype=np.uint64)
    vec = splitmix_vectorised(s["seed"], 5000)
    equal("splitmix64 vectorised = sequential (5000 draws)", bool(np.array_equal(seq, vec)), True)
    equal("splitmix64(1234567) published vector", splitmix_sequential(1234567, 3),
          [6457827717110365317, 3203168211198807973, 9817491932198370423])
    reps, ctx = resamples(R, C, s)
    for got, (label, b) in zip(head["first3_and_last"], [("0", 0), ("1", 1), ("2", 2), ("last", s["resamples"] - 1)]):
        equal(f"resample {label} replicates", got["replicates"], reps[b].tolist())
        equal(f"resample {label} contexts", got["contexts"], ctx[b].tolist())


def check_bootstrap(fx):
    for k, case in enumerate(fx["cases"]):
        s = case["settings"]
        if case["kind"] in ("mean", "paired"):
            v = np.asarray(fx[case["a"]], dtype=np.float64)
            if case["kind"] == "paired":
                v = v - np.asarray(fx[case["b"]], dtype=np.float64)
            R, C = v.shape
            reps, ctx = resamples(R, C, s)
            want = interval(v.mean(axis=1).mean(), resample_means(v, reps, ctx), s["level"])
            compare_interval(f"case {k} ({case['kind']} {case['a']}, seed {s['seed']})", case["intervals"][0], want,
                             R, C, s["level"])
        elif case["kind"] == "fit_best_of_n":
            levels = [np.asarray(v, dtype=np.float64) for v in fx["levels"]]
            R, C = levels[0].shape
            reps, ctx = resamples(R, C, s)
            means = np.stack([resample_means(v, reps, ctx) for v in levels], axis=1)  # (B, levels)
            fits = np.array([fit_lstsq(fx["d_levels"], m, "bon")[:3] for m in means])  # (B, 3)
            identity = fit_lstsq(fx["d_levels"], [v.mean() for v in levels], "bon")[:3]
            kept = int(np.isfinite(fits[:, 2]).sum())
            if not 0 < kept < s["resamples"]:
                failures.append(f"fit fixture: d* should be dropped in some but not all resamples; kept {kept}")
            for j, name in enumerate(["alpha", "beta", "d_star"]):
                want = interval(identity[j], fits[:, j], s["level"])
                compare_interval(f"case {k} (fit {name})", case["intervals"][j], want, R, C, s["level"])
            print(f"  fit bootstrap: d* kept in {kept} of {s['resamples']} resamples")
        else:
            failures.append(f"unknown case kind {case['kind']}")


def best_of_n_brute(proxy, value, n):
    """Mean over all C(N, n) subsets of the value of the max-proxy member (ties in the max averaged)."""
    total, count = 0.0, 0
    for subset in itertools.combinations(range(len(proxy)), n):
        top = max(proxy[i] for i in subset)
        tied = [value[i] for i in subset if proxy[i] == top]
        total += sum(tied) / len(tied)
        count += 1
    assert count == math.comb(len(proxy), n)
    return total / count


def check_best_of_n(fx):
    for k, case in enumerate(fx["best_of_n"]):
        for n, got in enumerate(case["estimates"], start=1):
            close(f"best_of_n fixture {k} (N = {len(case['proxy'])}) n = {n}", got,
                  best_of_n_brute(case["proxy"], case["value"], n))


def check_fits(fx):
    for k, case in enumerate(fx["fits"]):
        for form in ("bon", "rl"):
            alpha, beta, d_star, points, rmse = fit_lstsq(case["d"], case["r"], form)
            got = case[form]
            close(f"fit {k} {form} alpha", got["alpha"], alpha)
            close(f"fit {k} {form} beta", got["beta"], beta)
            close(f"fit {k} {form} d_star", got["d_star"], d_star)
            close(f"fit {k} {form} kl_star", got["kl_star"], d_star * d_star)
            equal(f"fit {k} {form} has_peak", got["has_peak"], not math.isnan(d_star))
            equal(f"fit {k} {form} points", got["points"], points)
            close(f"fit {k} {form} rmse", got["rmse"], rmse)


def main():
    with open(sys.argv[1]) as f:
        fx = json.load(f)
    check_rng(fx)
    check_bootstrap(fx)
    check_best_of_n(fx)
    check_fits(fx)
    if failures:
        print(f"confidence oracle: {len(failures)} of {checks} checks disagree:", file=sys.stderr)
        for line in failures[:40]:
            print("  " + line, file=sys.stderr)
        sys.exit(1)
    print(f"confidence oracle: all agree ({checks} checks, tolerance {TOL} relative to max(1, |value|))")


if __name__ == "__main__":
    main()

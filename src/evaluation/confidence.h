// confidence.h — the uncertainty of the study's answer: a hierarchical
// (two-level) percentile bootstrap over replicates and prompts.
//
// The design. The study runs R replicates (independent SFT → judge → PPO →
// evaluation chains on one corpus and base); each evaluation scores the same
// C held-out contexts (prompts; a probe context's identical rows are averaged
// into one value first). The data are ClusteredValues v[r][c]. Two sources of
// noise make a study's number move: the training chain (which the replicates
// sample) and the finite prompt set (which the contexts sample). A flat
// bootstrap over R·C values would treat the C values of one replicate as
// independent of its training chain and give intervals that are too narrow.
//
// One resample (Davison & Hinkley 1997, §3.8, "two-stage" bootstrap):
//   1. draw R replicate indices with replacement from 0..R−1;
//   2. for the i-th pick, draw C context indices with replacement from
//      0..C−1 (independently per pick, so a replicate picked twice gets two
//      different context samples);
//   3. the statistic of bootstrap_mean is the mean over the R picks of the
//      mean over that pick's C contexts.
// With R = 1 only the contexts are resampled (step 1 is skipped and makes no
// draw): the interval then reflects prompt sampling only, NOT training-chain
// variation — say so when reporting a one-replicate study.
//
// A paired difference (PPO − SFT on the same prompts of the same replicate)
// is d[r][c] = a[r][c] − b[r][c], bootstrapped as above: the pairing removes
// the between-prompt variation both policies share.
//
// The interval. `mean` is the statistic on the original data (the identity
// resample, which is not among the B resamples); low/high are the
// (1 − level)/2 and (1 + level)/2 percentiles of the B resampled statistics
// with numpy.percentile's default 'linear' rule: sort x[0..n−1], h = (n − 1)·p,
// value = x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]). A non-finite statistic (a
// fit without a peak) is dropped, per component; `resamples` says how many
// were kept (low/high are NaN, JSON null, when none was).
//
// The random numbers (replayable in a few lines of Python). One splitmix64
// stream (Steele, Lea & Flood 2014) whose state starts at settings.seed:
//     state += 0x9E3779B97F4A7C15
//     z = state; z = (z ^ z>>30) * 0xBF58476D1CE4E5B9; z = (z ^ z>>27) * 0x94D049BB133111EB
//     draw = z ^ z>>31                                   (all mod 2^64)
// and an index in 0..n−1 is draw % n (its bias is below n / 2^64 < 1e-16 for
// the study's n). Draw order: for b = 0..B−1, first the R replicate draws (only
// when R > 1), then C context draws for pick 0, then C for pick 1, … The k-th
// draw (1-based) therefore has state seed + k·0x9E3779B97F4A7C15, which makes
// a vectorised replay easy (tests/oracle/confidence_ref.py does both).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "util/json.h"

namespace ppolab {

// [replicate][context] → that context's value (the mean of its rows). Every
// replicate has the same contexts, in the same order; anything else (no
// replicate, no context, a ragged row, a non-finite value) is an Error saying
// which replicate has how many.
using ClusteredValues = std::vector<std::vector<double>>;

struct BootstrapSettings {
    int64_t resamples = 2000;  // B ≥ 1
    double level = 0.95;       // in (0, 1)
    uint64_t seed = 20261201;  // the splitmix64 start state
};

// The units travel with every interval: "5 replicates × 180 prompts".
struct Interval {
    double mean = 0, low = 0, high = 0;
    int64_t replicates = 0, contexts = 0;
    int64_t resamples = 0;  // resamples whose statistic was finite (those the percentiles use)
    double level = 0;       // the interval's coverage, e.g. 0.95
};
// {"mean","low","high","replicates","contexts","resamples","level"}; a NaN bound is null.
json interval_json(const Interval&);

// One resample of the design: the picked replicates (with replacement) and,
// for the i-th pick, its picked contexts (C of them).
struct Resample {
    std::vector<int64_t> replicates;             // (R)
    std::vector<std::vector<int64_t>> contexts;  // (R, C)
};

// The identity resample: replicates 0..R−1, each with contexts 0..C−1.
Resample identity_resample(int64_t R, int64_t C);
// The B resamples of an R × C design, in the draw order above (R, C ≥ 1).
std::vector<Resample> hierarchical_resamples(int64_t R, int64_t C, const BootstrapSettings&);

// Generic: `statistic` maps a resample to K numbers (the means of several
// metrics, a fit's α, β, d*…), always K for one design; returns one Interval
// per component (mean = statistic(identity), low/high = percentiles over the
// B resamples, non-finite values dropped per component).
using ResampleStatistic = std::function<std::vector<double>(const Resample&)>;
std::vector<Interval> bootstrap(int64_t R, int64_t C, const ResampleStatistic& statistic, const BootstrapSettings&);

// The mean over picked replicates of the mean over picked contexts.
double resample_mean(const ClusteredValues& v, const Resample& s);
// Mean over replicates of their context means, with its interval.
Interval bootstrap_mean(const ClusteredValues& v, const BootstrapSettings&);
// a − b per (replicate, context), then bootstrap_mean; a and b must have the same shape.
Interval bootstrap_paired_difference(const ClusteredValues& a, const ClusteredValues& b, const BootstrapSettings&);

// The checks the functions above make, for callers that build their own statistic.
void check_clustered(const ClusteredValues& v, const std::string& what);
void check_settings(const BootstrapSettings& s);
// numpy.percentile(x, 100·p) with the 'linear' rule; x need not be sorted, must be non-empty.
double percentile_linear(std::vector<double> x, double p);

}  // namespace ppolab

// report.h — `ppolab report` (SPEC §9): one self-contained HTML file.
//
// Everything is inline: plots are SVG drawn here (no JavaScript, no external
// fonts or CSS), tables are plain HTML, every text that comes from a file is
// HTML-escaped. Sections render when their inputs exist and say "not run"
// otherwise:
//   * scope sentences (verbatim, near the top);
//   * pretraining, SFT and judge loss curves; judge validation and test;
//   * first screen: the Findings box of RUN/findings.json (verdict, key
//     intervals, replicates and contexts, scope), or a line saying it is absent;
//   * over-optimisation: gold and proxy against √KL (policy snapshots with
//     intervals, best-of-n, both fitted curves; findings.json);
//   * PPO per iteration (smoothed, SFT baselines dashed): judge score, RLHF
//     reward, KL penalty, KL, approx KL, losses, clip fraction, explained
//     variance, response length, entropy (from the saved rollouts);
//   * gold versus proxy: every saved rollout of RUN/ppo/rollouts/continuous
//     is scored by the rubric here (labels from gold/, after training), and
//     per iteration its rubric success rate and mean judge score are plotted
//     against the mean sampled log-ratio to the reference;
//   * evaluation tables per policy and population (rows and unique contexts
//     kept apart), the probe factorial with deltas, SFT and PPO answers side
//     by side, per-token tables (values, advantages) of a few rollouts;
//   * shortcut diagnostics (RUN/eval/diagnostics.json, see diagnostics.h;
//     computed here for an older run without the file);
//   * resume checks and seconds per step.
// The output is a function of the run folder's files only (deterministic).
#pragma once
#include <cmath>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus.h"
#include "training/run_layout.h"
#include "util/json.h"

namespace ppolab {

std::string html_escape(std::string_view text);

// The provenance of a judge that learned from votes (identity.data.feedback
// of RUN/reward/continuous.json: feedback_kind "human" or "ai", the vote
// files and counts), null for a judge of the corpus pairs or when the judge
// has not run.
json judge_feedback(const std::filesystem::path& run);

// ---- plotting (inline SVG) ------------------------------------------------

struct PlotSeries {
    enum class Style { automatic, line, markers, faint_markers };
    std::string name;
    std::vector<double> x, y;               // (points) same length; non-finite points are skipped
    std::vector<double> y_low{}, y_high{};  // (points) interval bars, empty or the same length as y
    Style style = Style::automatic;         // automatic: the plot's `scatter`, markers on lines of ≤ 60 points
    bool dashed = false;                    // a dashed line (baselines)
    std::string colour{};                   // "" = the palette's k-th colour
};

struct PlotSpec {
    std::string id;  // the <svg id>, unique in the page
    std::string title;
    std::string x_label, y_label;
    std::vector<PlotSeries> series;
    bool scatter = false;             // markers only (true) or lines with markers
    double y_min = NAN, y_max = NAN;  // a fixed y range (rates: 0..1) when both are finite
    bool x_from_zero = false;         // the x axis starts at 0 (√KL: SFT at the origin)
};

// A <figure> holding an <svg id=…> with axes, ticks, labels, a legend and a
// <figcaption>; a plot without any finite point says so instead of drawing.
// The SVG has a viewBox and scales with the page (CSS width 100 %).
std::string svg_plot(const PlotSpec& spec, std::string_view caption);
// Several panels stacked vertically in one <svg id=…> (each panel's own id
// is ignored; their titles label them).
std::string svg_panels(const std::string& id, const std::string& title, const std::vector<PlotSpec>& panels,
                       std::string_view caption);

// "Nice" tick values (1, 2, 5 × 10^k steps, at most target_count intervals)
// inside [lo, hi]; `integers`: steps of at least 1 (an axis of iterations).
std::vector<double> plot_ticks(double lo, double hi, int target_count = 5, bool integers = false);

// The per-iteration curves are smoothed by a centred moving average over
// kSmoothingWindow iterations (fewer at the ends: the window is truncated);
// non-finite values are left out of every mean (NaN where none is finite).
inline constexpr int kSmoothingWindow = 9;
std::vector<double> moving_average(const std::vector<double>& y, int window);

// ---- gold versus proxy -----------------------------------------------------

struct RolloutIterationSummary {
    int iteration = 0;
    int rollouts = 0;
    int rubric_successes = 0;
    double rubric_success_rate = 0;
    double mean_score = 0;             // the judge's learned score
    double mean_sampled_logratio = 0;  // mean over rollouts of sampled_logratio_sum (TRL objective/kl)
    double mean_sequence_entropy = 0;  // mean over rollouts of −Σ old_logp (TRL objective/entropy)
};

// Scores every rollout of RUN/ppo/rollouts/<mode>/iteration-NNN.json with the
// rubric (expected action from `gold`), in iteration order.
std::vector<RolloutIterationSummary> gold_versus_proxy(const fs::path& rollouts_dir, const GoldLabels& gold);

// ---- the report ---------------------------------------------------------

// The whole page for the run folder `run`.
std::string render_report(const fs::path& run);
// A chain of a set (RUN/replicates/<k>): its stages, the set's findings.
std::string render_report(const RunLayout& run);
// Renders and writes `out` atomically; refuses an existing `out`.
void write_report(const RunLayout& run, const fs::path& out);

// The id of every plot the page holds for a given run (what tests look for).
extern const std::vector<std::string> report_plot_ids;

}  // namespace ppolab

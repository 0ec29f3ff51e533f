// tensorboard.h — every stage's per-update metrics as TensorBoard event
// files, so `tensorboard --logdir RUN` shows a run: RUN/tensorboard/<stage>/<mode>/
// (and RUN/replicates/<k>/tensorboard/… for the chains of a replicate set),
// one file per stage and mode, written when the mode finishes (from its
// report's history, before the report itself: StageLifecycle::finish);
// pretraining's curves under RUN/tensorboard/pretrain/run/ once RUN/base is
// written (`pretrain --run`; with --out DIR, none).
//
// Tags: PPO's per-iteration metrics under their TRL names (objective/kl,
// policy/approxkl, …), step = iteration; SFT's and the judge's per-update
// numbers as train/<key>, step = update (its `update` field, else its
// 1-based place in the history), and their per-epoch
// validation numbers as validation/<key> at the epoch's last update.
// Every wall_time is 0: the file depends on the run's numbers only (same
// seed, same bytes); TensorBoard's Step axis is the one to read.
//
// Format: TFRecord framing (uint64 length, masked CRC-32C of it, the bytes,
// masked CRC-32C of them) around tensorflow.Event protobuf messages written
// by hand (wall_time 1, step 2, file_version 3, summary 5 → Value{tag 1,
// simple_value 2}), the first one carrying file_version "brain.Event:2".
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "training/run_layout.h"
#include "util/json.h"

namespace ppolab {

struct TensorboardScalar {
    std::string tag;
    int64_t step = 0;
    float value = 0;
};

// CRC-32C (Castagnoli), as TFRecord uses it.
uint32_t crc32c(std::string_view bytes);
// The bytes of an event file holding `scalars` in order.
std::string tensorboard_event_file(const std::vector<TensorboardScalar>& scalars);
// The scalars of a stage report (history, validation_history; see above).
std::vector<TensorboardScalar> report_scalars(const json& report);
// Writes dir/events.out.tfevents.0.ppolab (replacing one an unfinished
// attempt left).
void write_tensorboard_events(const fs::path& dir, const std::vector<TensorboardScalar>& scalars);
// Pretraining's loss and gradient-norm curves (one entry per update) as
// train/loss, train/grad_norm at steps 1, 2, … (pretrain.json's training block).
std::vector<TensorboardScalar> pretrain_scalars(const json& training);
// Writes RUN/tensorboard/<stage>/<mode>/events.out.tfevents.0.ppolab (replacing one
// an unfinished attempt left).
void write_stage_tensorboard(const RunLayout& run, const std::string& stage, const std::string& mode,
                             const json& report);

}  // namespace ppolab

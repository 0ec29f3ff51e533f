// chunked_update.h — one update's gradient as a fixed sum of chunks (SPEC §13).
//
// The work of an update (SFT's accumulation examples, the judge's or DPO's
// pairs, PPO's rollout rows of a minibatch) is cut into `parallel.chunks`
// chunks whose shape depends only on the update, never on how many ranks
// run. Each chunk's gradient is computed from zero into its own buffer, the
// buffers are gathered to every rank (bytes, parallel/world.h), and every
// rank adds them in chunk order, g = ((g₀ + g₁) + g₂) + …, then takes the
// same optimiser step. Any world size W dividing the chunks therefore gives
// the same bits as W = 1 (same thread count and instruction set on every
// rank). One chunk is exactly the single-process update of before.
#pragma once
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "model/param.h"
#include "util/json.h"

namespace ppolab {

// Items [begin, end) of chunk c when n items are cut into `chunks` chunks:
// the first n % chunks chunks take one more (a chunk may be empty).
std::pair<int64_t, int64_t> chunk_items(int64_t n, int64_t chunks, int64_t c);

// What one chunk hands back besides its gradient: its share of the loss
// (already divided by the whole update's denominator) and its trace rows.
struct ChunkOutput {
    double loss = 0;
    json trace = json::array();
};

// The update's gradient in `params`' grads and its loss and trace (rows in
// chunk order). `compute(c)` computes chunk c's gradient into zeroed grads
// (`zero` zeroes them) and is called for this rank's chunks only; an empty
// chunk (no items) is not computed and adds zeros. `items`: the update's
// item count, for the chunk shapes.
ChunkOutput chunked_gradient(const ParamList& params, int64_t chunks, int64_t items, const std::function<void()>& zero,
                             const std::function<ChunkOutput(int64_t begin, int64_t end)>& compute);

// The sha256 of the learned tensors, the same on every rank unless they
// drifted apart: an Error naming `where` if any rank's differs (a world of
// one: nothing to compare).
void check_ranks_agree(const ParamList& params, const std::string& where);

}  // namespace ppolab

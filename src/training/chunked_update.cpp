#include "training/chunked_update.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "parallel/world.h"
#include "training/identity.h"
#include "util/error.h"

namespace ppolab {

std::pair<int64_t, int64_t> chunk_items(int64_t n, int64_t chunks, int64_t c) {
    PPOLAB_ASSERT(chunks >= 1 && c >= 0 && c < chunks && n >= 0);
    const int64_t base = n / chunks, extra = n % chunks;
    const int64_t begin = c * base + std::min(c, extra);
    return {begin, begin + base + (c < extra ? 1 : 0)};
}

ChunkOutput chunked_gradient(const ParamList& params, int64_t chunks, int64_t items, const std::function<void()>& zero,
                             const std::function<ChunkOutput(int64_t begin, int64_t end)>& compute) {
    const parallel::World& w = parallel::world();
    if (chunks == 1 && w.size == 1) {  // the single-process update, straight into the grads
        zero();
        return compute(0, items);
    }
    const parallel::ChunkRange mine = parallel::my_chunks(chunks);
    size_t P = 0;
    for (const ParamRef& p : params) P += static_cast<size_t>(p.numel());
    const size_t local = static_cast<size_t>(mine.end - mine.begin);

    // This rank's chunks, each from zero into its own buffer.
    std::vector<float> buffers(local * P, 0.f);
    json outputs = json::array();
    for (int64_t c = mine.begin; c < mine.end; ++c) {
        const auto [begin, end] = chunk_items(items, chunks, c);
        ChunkOutput out;
        if (begin < end) {
            zero();
            out = compute(begin, end);
            float* into = buffers.data() + static_cast<size_t>(c - mine.begin) * P;
            for (const ParamRef& p : params) {
                std::memcpy(into, p.grad, static_cast<size_t>(p.numel()) * sizeof(float));
                into += p.numel();
            }
        }
        outputs.push_back({{"loss_bits", std::bit_cast<uint64_t>(out.loss)}, {"trace", std::move(out.trace)}});
    }

    // Every chunk, on every rank, in chunk order (rank r holds chunks [rC/W, (r+1)C/W)).
    std::vector<float> all(static_cast<size_t>(chunks) * P);
    parallel::all_gather(buffers.data(), local * P, all.data());
    ChunkOutput total;
    for (const std::string& bytes : parallel::all_gather(outputs.dump()))
        for (const json& o : json::parse(bytes)) {
            total.loss += std::bit_cast<double>(o.at("loss_bits").get<uint64_t>());
            for (const json& row : o.at("trace")) total.trace.push_back(row);
        }

    // The sum in chunk order: g = ((g₀ + g₁) + g₂) + …
    size_t offset = 0;
    for (const ParamRef& p : params) {
        const size_t n = static_cast<size_t>(p.numel());
        float* g = p.grad;
        std::memcpy(g, all.data() + offset, n * sizeof(float));
        for (int64_t c = 1; c < chunks; ++c) {
            const float* part = all.data() + static_cast<size_t>(c) * P + offset;
            for (size_t i = 0; i < n; ++i) g[i] += part[i];
        }
        offset += n;
    }
    return total;
}

void check_ranks_agree(const ParamList& params, const std::string& where) {
    const parallel::World& w = parallel::world();
    if (w.size == 1) return;
    const std::vector<std::string> ids = parallel::all_gather(learned_identity(params));
    for (size_t r = 1; r < ids.size(); ++r)
        if (ids[r] != ids[0])
            fail(where, ": the ranks' learned tensors drifted apart (rank 0 ", ids[0].substr(0, 16), "..., rank ", r,
                 " ", ids[r].substr(0, 16),
                 "...): every rank must run the same binary, thread count (OMP_NUM_THREADS) and instruction set");
}

}  // namespace ppolab

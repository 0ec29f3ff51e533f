// matmul_amx.h — the AMX-BF16 path's packed operand (matmul_amx.cpp), shared
// with PrepackedWeight, which keeps a frozen weight's packed copies.
//
// tdpbf16ps multiplies an A tile (16 rows × 32 BF16 of the reduction) by a B
// tile holding 32 reduction steps × 16 output columns in "VNNI" order: tile
// row r holds, for each column c, the pair B[2r][c], B[2r+1][c]. An AmxPack
// is a whole B (k × n) cut into such 1 KiB tiles, zero-padded to whole
// tiles, in the order the kernel reads them: column block j (16 columns),
// then reduction block p (32 steps), so one column block's tiles are
// contiguous.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "kernels/matmul_backend.h"

namespace ppolab {

struct AmxPack {
    int64_t k = 0, n = 0;    // the operand's reduction length and output columns
    int64_t kb = 0, nb = 0;  // blocks of 32 reduction steps; of 16 columns (even: the kernel takes two)
    struct Free {
        void operator()(bf16* p) const { std::free(p); }
    };
    std::unique_ptr<bf16[], Free> tiles;  // nb × kb tiles of 16 × 32 BF16, 64-byte aligned
    int64_t bytes() const { return nb * kb * 1024; }
};

// Which product a pack serves: the forward reads B = Wᵀ (k = K, n = N), the
// backward to the input B = W (k = N, n = K).
enum class AmxOperand { forward, backward_input };

// W: BF16, non-empty. Parallel over column blocks (OpenMP).
AmxPack amx_pack(const WeightView& W, AmxOperand op);

// The pack of W for one product: its PrepackedWeight's copy when W is
// frozen (made on first use, kept), else a fresh one in a per-thread buffer,
// valid until the calling thread's next call. Read by the AMX path and by
// the AVX-512 BF16 decode kernels of the frozen base (matmul_vnni_avx512.cpp).
const AmxPack& amx_pack_for(const WeightView& W, AmxOperand op);

// A frozen weight's packed copies (PrepackedWeight), made on first use.
struct PrepackedWeight::AmxCopies {
    std::mutex mu;
    std::unique_ptr<AmxPack> forward, backward_input;
};

}  // namespace ppolab

// matmul_dnnl.cpp — the oneDNN 2.6 path (M > kSmallM): BF16 × BF16 → FP32
// matmuls for BF16 weights (the input rounded to BF16 first, in a reused
// buffer), FP32 × FP32 → FP32 otherwise. The row-major weight W (N, K) is
// handed to oneDNN in place through strides (Wᵀ for the forward, W for the
// backward to the input), and dYᵀ for the weight gradient likewise; the
// `accumulate` flag is a sum post-op.
//
// Creating a oneDNN primitive costs far more than a small matmul, so
// primitives are cached per thread by (kind, types, M, N, K, accumulate):
// per thread so that concurrent calls never share one primitive's scratchpad.
//
// Frozen weights (PrepackedWeight, owned by the weight's Matrix): a BF16
// weight is reordered once per layout into oneDNN's preferred blocked format,
// and the products of the forward and of the backward to the input read that
// copy (measured 8–20 %
// faster at 64–512 rows than handing oneDNN the row-major weight, which it
// then repacks block by block on every call: BENCHMARKS.md).
#include <dnnl.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/matmul_backend.h"
#include "util/error.h"

namespace ppolab {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

enum class Kind { forward, backward_input, backward_weight };

struct Key {
    Kind kind;
    WeightType type;
    int64_t M, N, K;
    bool accumulate;
    auto tie() const { return std::tie(kind, type, M, N, K, accumulate); }
    bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Entry {
    bool supported = false;  // false: oneDNN has no implementation; use the portable path
    dnnl::matmul prim;
    dnnl::memory::desc src, wei, dst;
    // The same product with weights in oneDNN's preferred layout (frozen
    // weights), made on first use.
    bool packed_tried = false, packed_ok = false;
    dnnl::matmul packed_prim;
    dnnl::memory::desc packed_wei;
};

dnnl::engine& cpu_engine() {
    static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

// Memory descriptors of the three products, in oneDNN's dst(M', N') =
// src(M', K') · weights(K', N') with explicit strides over our row-major
// buffers.
dnnl::primitive_attr make_attr(bool accumulate) {
    dnnl::primitive_attr attr;
    if (accumulate) {
        dnnl::post_ops ops;
        ops.append_sum(1.f);
        attr.set_post_ops(ops);
    }
    return attr;
}

Entry make_entry(const Key& key) {
    const int64_t M = key.M, N = key.N, K = key.K;
    const dt low = key.type == WeightType::bf16 ? dt::bf16 : dt::f32;
    Entry e;
    switch (key.kind) {
        case Kind::forward:  // Y(M,N) = X(M,K) · Wᵀ(K,N)
            e.src = dnnl::memory::desc(dims{M, K}, low, dims{K, 1});
            e.wei = dnnl::memory::desc(dims{K, N}, low, dims{1, K});
            e.dst = dnnl::memory::desc(dims{M, N}, dt::f32, dims{N, 1});
            break;
        case Kind::backward_input:  // dX(M,K) = dY(M,N) · W(N,K)
            e.src = dnnl::memory::desc(dims{M, N}, low, dims{N, 1});
            e.wei = dnnl::memory::desc(dims{N, K}, low, dims{K, 1});
            e.dst = dnnl::memory::desc(dims{M, K}, dt::f32, dims{K, 1});
            break;
        case Kind::backward_weight:  // dW(N,K) += dYᵀ(N,M) · X(M,K); `type`: of dY and X
            e.src = dnnl::memory::desc(dims{N, M}, low, dims{1, N});
            e.wei = dnnl::memory::desc(dims{M, K}, low, dims{K, 1});
            e.dst = dnnl::memory::desc(dims{N, K}, dt::f32, dims{K, 1});
            break;
    }
    try {
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e.src, e.wei, e.dst), make_attr(key.accumulate),
                                        cpu_engine());
        e.prim = dnnl::matmul(pd);
        e.supported = true;
    } catch (const dnnl::error&) {
        e.supported = false;
    }
    return e;
}

// Per-thread cache; bounded (variable sequence lengths make new M values):
// cleared when it grows past kMaxEntries.
constexpr size_t kMaxEntries = 512;

Entry& entry_for(const Key& key) {
    thread_local std::map<Key, Entry> cache;
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    if (cache.size() >= kMaxEntries) cache.clear();
    return cache.emplace(key, make_entry(key)).first->second;
}

dnnl::stream& thread_stream() {
    thread_local dnnl::stream stream(cpu_engine());
    return stream;
}

// ---- frozen weights -------------------------------------------------------

}  // namespace

struct PrepackedWeight::Layouts {
    std::mutex mu;                                                    // guards packed
    std::vector<std::pair<dnnl::memory::desc, dnnl::memory>> packed;  // one copy per layout
};

namespace {

// The packed-weight primitive of an entry (weights "any"), made once.
bool ensure_packed(Entry& e, const Key& key) {
    if (!e.packed_tried) {
        e.packed_tried = true;
        try {
            dnnl::memory::desc any(e.wei.dims(), e.wei.data_type(), dnnl::memory::format_tag::any);
            dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e.src, any, e.dst), make_attr(key.accumulate),
                                            cpu_engine());
            e.packed_wei = pd.weights_desc();
            e.packed_prim = dnnl::matmul(pd);
            e.packed_ok = true;
        } catch (const dnnl::error&) {
            e.packed_ok = false;
        }
    }
    return e.packed_ok;
}

// The frozen weight in the layout `md`, reordered on first use.
dnnl::memory packed_weight(PrepackedWeight::Layouts& f, const void* data, const dnnl::memory::desc& plain,
                           const dnnl::memory::desc& md) {
    std::lock_guard lock(f.mu);
    for (auto& [d, m] : f.packed)
        if (d == md) return m;
    dnnl::memory src(plain, cpu_engine(), const_cast<void*>(data));
    dnnl::memory dst(md, cpu_engine());
    dnnl::reorder(src, dst).execute(thread_stream(), src, dst);
    thread_stream().wait();
    f.packed.emplace_back(md, dst);
    return dst;
}

// ---------------------------------------------------------------------------

void execute(Entry& e, const Key& key, const void* src, const WeightView& W, float* dst) {
    dnnl::memory ms(e.src, cpu_engine(), const_cast<void*>(src));
    dnnl::memory md(e.dst, cpu_engine(), dst);
    if (W.prepacked && W.prepacked->matches(W) && ensure_packed(e, key)) {
        dnnl::memory mw = packed_weight(W.prepacked->layouts(), W.data, e.wei, e.packed_wei);
        e.packed_prim.execute(thread_stream(), {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
    } else {
        dnnl::memory mw(e.wei, cpu_engine(), const_cast<void*>(W.data));
        e.prim.execute(thread_stream(), {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
    }
    thread_stream().wait();
}

// Reused buffers for activations rounded to BF16 (per thread; `which` 0
// or 1 when a product needs two).
bf16* bf16_buffer(int64_t n, int which = 0) {
    thread_local std::vector<bf16> buffers[2];
    std::vector<bf16>& buffer = buffers[which];
    if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(n);
    return buffer.data();
}

}  // namespace

namespace matmul_detail {

void dnnl_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    if (M == 0 || N == 0) return;
    const Key key{Kind::forward, W.type, M, N, K, accumulate};
    Entry& e = entry_for(key);
    if (!e.supported) return portable_forward(Y, X, W, M, accumulate);
    if (W.type == WeightType::bf16) {
        bf16* xb = bf16_buffer(M * K);  // (M, K)
        convert_to_bf16(xb, X, M * K);
        execute(e, key, xb, W, Y);
    } else {
        execute(e, key, X, W, Y);
    }
}

void dnnl_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    if (M == 0 || K == 0) return;
    const Key key{Kind::backward_input, W.type, M, N, K, accumulate};
    Entry& e = entry_for(key);
    if (!e.supported) return portable_backward_input(dX, dY, W, M, accumulate);
    if (W.type == WeightType::bf16) {
        bf16* gb = bf16_buffer(M * N);  // (M, N)
        convert_to_bf16(gb, dY, M * N);
        execute(e, key, gb, W, dX);
    } else {
        execute(e, key, dY, W, dX);
    }
}

void dnnl_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                          WeightType inputs) {
    if (M == 0 || N == 0 || K == 0) return;
    const Key key{Kind::backward_weight, inputs, M, N, K, true};
    Entry& e = entry_for(key);
    if (!e.supported) return portable_backward_weight(dW, dY, X, M, N, K, inputs);
    // X plays the weight here: never frozen (an activation).
    if (inputs == WeightType::bf16) {
        bf16* gb = bf16_buffer(M * N, 0);
        bf16* xb = bf16_buffer(M * K, 1);
        convert_to_bf16(gb, dY, M * N);
        convert_to_bf16(xb, X, M * K);
        execute(e, key, gb, WeightView{WeightType::bf16, xb, M, K}, dW);
    } else {
        execute(e, key, dY, WeightView{WeightType::f32, X, M, K}, dW);
    }
}

}  // namespace matmul_detail

PrepackedWeight::PrepackedWeight(WeightView W)
    : data_(W.data), rows_(W.rows), cols_(W.cols), layouts_(std::make_unique<Layouts>()) {
    if (W.type != WeightType::bf16 || W.data == nullptr || W.rows <= 0 || W.cols <= 0)
        fail("PrepackedWeight: expected a non-empty BF16 weight, got ", W.type == WeightType::bf16 ? "BF16" : "FP32",
             " [", W.rows, ", ", W.cols, "]");
}

PrepackedWeight::~PrepackedWeight() = default;

bool PrepackedWeight::matches(const WeightView& W) const {
    return W.type == WeightType::bf16 && W.data == data_ && W.rows == rows_ && W.cols == cols_;
}

int64_t PrepackedWeight::bytes() const {
    std::lock_guard lock(layouts_->mu);
    int64_t bytes = 0;
    for (auto& [md, mem] : layouts_->packed) bytes += static_cast<int64_t>(md.get_size());
    return bytes;
}

}  // namespace ppolab

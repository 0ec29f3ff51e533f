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
};

dnnl::engine& cpu_engine() {
    static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

// Memory descriptors of the three products, in oneDNN's dst(M', N') =
// src(M', K') · weights(K', N') with explicit strides over our row-major
// buffers.
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
        case Kind::backward_weight:  // dW(N,K) += dYᵀ(N,M) · X(M,K)
            e.src = dnnl::memory::desc(dims{N, M}, dt::f32, dims{1, N});
            e.wei = dnnl::memory::desc(dims{M, K}, dt::f32, dims{K, 1});
            e.dst = dnnl::memory::desc(dims{N, K}, dt::f32, dims{K, 1});
            break;
    }
    dnnl::primitive_attr attr;
    if (key.accumulate) {
        dnnl::post_ops ops;
        ops.append_sum(1.f);
        attr.set_post_ops(ops);
    }
    try {
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e.src, e.wei, e.dst), attr, cpu_engine());
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

const Entry& entry_for(const Key& key) {
    thread_local std::map<Key, Entry> cache;
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    if (cache.size() >= kMaxEntries) cache.clear();
    return cache.emplace(key, make_entry(key)).first->second;
}

void execute(const Entry& e, const void* src, const void* wei, float* dst) {
    thread_local dnnl::stream stream(cpu_engine());
    dnnl::memory ms(e.src, cpu_engine(), const_cast<void*>(src));
    dnnl::memory mw(e.wei, cpu_engine(), const_cast<void*>(wei));
    dnnl::memory md(e.dst, cpu_engine(), dst);
    e.prim.execute(stream, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
    stream.wait();
}

// Reused buffer for activations rounded to BF16 (per thread).
bf16* bf16_buffer(int64_t n) {
    thread_local std::vector<bf16> buffer;
    if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(n);
    return buffer.data();
}

}  // namespace

namespace matmul_detail {

void dnnl_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    if (M == 0 || N == 0) return;
    const Entry& e = entry_for({Kind::forward, W.type, M, N, K, accumulate});
    if (!e.supported) return portable_forward(Y, X, W, M, accumulate);
    if (W.type == WeightType::bf16) {
        bf16* xb = bf16_buffer(M * K);  // (M, K)
        convert_to_bf16(xb, X, M * K);
        execute(e, xb, W.data, Y);
    } else {
        execute(e, X, W.data, Y);
    }
}

void dnnl_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    if (M == 0 || K == 0) return;
    const Entry& e = entry_for({Kind::backward_input, W.type, M, N, K, accumulate});
    if (!e.supported) return portable_backward_input(dX, dY, W, M, accumulate);
    if (W.type == WeightType::bf16) {
        bf16* gb = bf16_buffer(M * N);  // (M, N)
        convert_to_bf16(gb, dY, M * N);
        execute(e, gb, W.data, dX);
    } else {
        execute(e, dY, W.data, dX);
    }
}

void dnnl_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K) {
    if (M == 0 || N == 0 || K == 0) return;
    const Entry& e = entry_for({Kind::backward_weight, WeightType::f32, M, N, K, true});
    if (!e.supported) return portable_backward_weight(dW, dY, X, M, N, K);
    execute(e, dY, X, dW);
}

// Experiment (bench_matmul): the forward with weights reordered once into
// oneDNN's preferred blocked layout, cached by (pointer, layout). Only valid
// while the weight stays unchanged at that address.
void dnnl_forward_prepacked(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    struct Packed {
        const void* data;
        dnnl::memory::desc md;
        dnnl::memory mem;
    };
    struct PEntry {
        dnnl::matmul prim;
        dnnl::memory::desc src, wei, dst, plain;
    };
    thread_local std::map<Key, PEntry> prims;
    thread_local std::vector<Packed> packed;
    Key key{Kind::forward, W.type, M, N, K, accumulate};
    auto it = prims.find(key);
    if (it == prims.end()) {
        const dt low = W.type == WeightType::bf16 ? dt::bf16 : dt::f32;
        PEntry e;
        e.src = dnnl::memory::desc(dims{M, K}, low, dims{K, 1});
        e.plain = dnnl::memory::desc(dims{K, N}, low, dims{1, K});
        e.dst = dnnl::memory::desc(dims{M, N}, dt::f32, dims{N, 1});
        dnnl::memory::desc any(dims{K, N}, low, dnnl::memory::format_tag::any);
        dnnl::primitive_attr attr;
        if (accumulate) {
            dnnl::post_ops ops;
            ops.append_sum(1.f);
            attr.set_post_ops(ops);
        }
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e.src, any, e.dst), attr, cpu_engine());
        e.wei = pd.weights_desc();
        e.prim = dnnl::matmul(pd);
        it = prims.emplace(key, e).first;
    }
    const PEntry& e = it->second;
    thread_local dnnl::stream stream(cpu_engine());
    dnnl::memory* wmem = nullptr;
    for (auto& p : packed)
        if (p.data == W.data && p.md == e.wei) wmem = &p.mem;
    if (!wmem) {
        dnnl::memory plain(e.plain, cpu_engine(), const_cast<void*>(W.data));
        dnnl::memory mem(e.wei, cpu_engine());
        dnnl::reorder(plain, mem).execute(stream, plain, mem);
        stream.wait();
        packed.push_back({W.data, e.wei, mem});
        wmem = &packed.back().mem;
    }
    const void* src = X;
    if (W.type == WeightType::bf16) {
        bf16* xb = bf16_buffer(M * K);
        convert_to_bf16(xb, X, M * K);
        src = xb;
    }
    dnnl::memory ms(e.src, cpu_engine(), const_cast<void*>(src));
    dnnl::memory md(e.dst, cpu_engine(), Y);
    e.prim.execute(stream, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, *wmem}, {DNNL_ARG_DST, md}});
    stream.wait();
}

}  // namespace matmul_detail
}  // namespace ppolab

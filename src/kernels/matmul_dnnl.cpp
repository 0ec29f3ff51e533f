// matmul_dnnl.cpp — the oneDNN 2.6 path (M > kSmallM): BF16 × BF16 → FP32
// matmuls for BF16 weights (the input rounded to BF16 first, in a reused
// buffer), FP32 × FP32 → FP32 otherwise. On a CPU without a BF16
// dot-product instruction (no AVX-512 BF16, hence no AMX either) oneDNN
// only emulates BF16 and measured 2.9–3.8× slower than its own FP32 kernels
// at the tiny model's shapes (BENCHMARKS.md): there a BF16 product runs as
// an FP32 product of the BF16-rounded input and the weight widened to FP32.
// That is the same contract (a product of two BF16 values is exact in FP32,
// the sums are FP32), only the summation order differs — as between any two
// paths (matmul_backend.h). The row-major weight W (N, K) is
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

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/matmul_amx.h"
#include "kernels/matmul_backend.h"
#include "kernels/unit_rates.h"
#include "util/error.h"

namespace ppolab {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

enum class Kind { forward, backward_input, backward_weight };

struct Key {
    Kind kind;
    WeightType type;  // of the weight (backward_weight: of dY and X) as stored
    int64_t M, N, K;
    bool accumulate;
    bool via_f32;  // type bf16, the product computed in FP32 (bf16_products_native() false)
    auto tie() const { return std::tie(kind, type, M, N, K, accumulate, via_f32); }
    bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Entry {
    bool supported = false;  // false: oneDNN has no implementation; use the portable path
    dnnl::matmul prim;
    dnnl::memory::desc src, wei, dst;  // in the product's types
    dnnl::memory::desc wei_stored;     // the weight's row-major layout in its stored type
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
    const dt stored = key.type == WeightType::bf16 ? dt::bf16 : dt::f32;
    const dt low = key.via_f32 ? dt::f32 : stored;
    Entry e;
    switch (key.kind) {
        case Kind::forward:  // Y(M,N) = X(M,K) · Wᵀ(K,N)
            e.src = dnnl::memory::desc(dims{M, K}, low, dims{K, 1});
            e.wei = dnnl::memory::desc(dims{K, N}, low, dims{1, K});
            e.wei_stored = dnnl::memory::desc(dims{K, N}, stored, dims{1, K});
            e.dst = dnnl::memory::desc(dims{M, N}, dt::f32, dims{N, 1});
            break;
        case Kind::backward_input:  // dX(M,K) = dY(M,N) · W(N,K)
            e.src = dnnl::memory::desc(dims{M, N}, low, dims{N, 1});
            e.wei = dnnl::memory::desc(dims{N, K}, low, dims{K, 1});
            e.wei_stored = dnnl::memory::desc(dims{N, K}, stored, dims{K, 1});
            e.dst = dnnl::memory::desc(dims{M, K}, dt::f32, dims{K, 1});
            break;
        case Kind::backward_weight:  // dW(N,K) += dYᵀ(N,M) · X(M,K); `type`: of dY and X
            e.src = dnnl::memory::desc(dims{N, M}, low, dims{1, N});
            e.wei = dnnl::memory::desc(dims{M, K}, low, dims{K, 1});
            e.wei_stored = e.wei;  // X, rounded by the caller into the product's type
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

// Reused per-thread buffers (`which` 0 or 1 when a product needs two): the
// activations rounded to BF16, or to BF16 values held in FP32, and a BF16
// weight widened to FP32.
template <typename T>
T* thread_buffer(int64_t n, int which = 0) {
    thread_local std::vector<T> buffers[3];
    std::vector<T>& buffer = buffers[which];
    if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(n);
    return buffer.data();
}

// src: the left operand, already in the product's type. The weight is read
// prepacked where it was frozen (made from its stored type, BF16 widened to
// FP32 exactly by the reorder), else row-major (a BF16 weight widened into a
// reused buffer first when the product runs in FP32).
void execute(Entry& e, const Key& key, const void* src, const WeightView& W, float* dst) {
    dnnl::memory ms(e.src, cpu_engine(), const_cast<void*>(src));
    dnnl::memory md(e.dst, cpu_engine(), dst);
    if (W.prepacked && W.prepacked->matches(W) && ensure_packed(e, key)) {
        dnnl::memory mw = packed_weight(W.prepacked->layouts(), W.data, e.wei_stored, e.packed_wei);
        e.packed_prim.execute(thread_stream(), {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
    } else {
        const void* w = W.data;
        if (key.via_f32 && W.type == WeightType::bf16) {
            float* wide = thread_buffer<float>(W.rows * W.cols, 2);
            const bf16* wb = static_cast<const bf16*>(W.data);
            for (int64_t i = 0; i < W.rows * W.cols; ++i) wide[i] = bf16_to_float(wb[i]);
            w = wide;
        }
        dnnl::memory mw(e.wei, cpu_engine(), const_cast<void*>(w));
        e.prim.execute(thread_stream(), {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
    }
    thread_stream().wait();
}

// The left operand of a product with BF16 inputs, in the product's type:
// rounded to BF16, or to BF16 values held in FP32.
const void* rounded_input(const float* x, int64_t n, bool via_f32, int which) {
    if (via_f32) {
        float* out = thread_buffer<float>(n, which);
        round_to_bf16_values(out, x, n);
        return out;
    }
    bf16* out = thread_buffer<bf16>(n, which);
    convert_to_bf16(out, x, n);
    return out;
}

std::atomic<Bf16Products> forced_bf16_products{Bf16Products::automatic};

}  // namespace

namespace matmul_detail {

void dnnl_forward(float* Y, const float* X, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    if (M == 0 || N == 0) return;
    const bool bf16_inputs = W.type == WeightType::bf16;
    const Key key{Kind::forward, W.type, M, N, K, accumulate, bf16_inputs && !bf16_products_native()};
    Entry& e = entry_for(key);
    if (!e.supported) return portable_forward(Y, X, W, M, accumulate);
    execute(e, key, bf16_inputs ? rounded_input(X, M * K, key.via_f32, 0) : X, W, Y);
}

void dnnl_backward_input(float* dX, const float* dY, WeightView W, int64_t M, bool accumulate) {
    const int64_t N = W.rows, K = W.cols;
    if (M == 0 || K == 0) return;
    const bool bf16_inputs = W.type == WeightType::bf16;
    const Key key{Kind::backward_input, W.type, M, N, K, accumulate, bf16_inputs && !bf16_products_native()};
    Entry& e = entry_for(key);
    if (!e.supported) return portable_backward_input(dX, dY, W, M, accumulate);
    execute(e, key, bf16_inputs ? rounded_input(dY, M * N, key.via_f32, 0) : dY, W, dX);
}

void dnnl_backward_weight(float* dW, const float* dY, const float* X, int64_t M, int64_t N, int64_t K,
                          WeightType inputs) {
    if (M == 0 || N == 0 || K == 0) return;
    const bool bf16_inputs = inputs == WeightType::bf16;
    const Key key{Kind::backward_weight, inputs, M, N, K, true, bf16_inputs && !bf16_products_native()};
    Entry& e = entry_for(key);
    if (!e.supported) return portable_backward_weight(dW, dY, X, M, N, K, inputs);
    // X plays the weight here: never frozen (an activation), rounded like dY.
    if (bf16_inputs) {
        const void* g = rounded_input(dY, M * N, key.via_f32, 0);
        const void* x = rounded_input(X, M * K, key.via_f32, 1);
        const WeightType product = key.via_f32 ? WeightType::f32 : WeightType::bf16;
        execute(e, key, g, WeightView{product, x, M, K}, dW);
    } else {
        execute(e, key, dY, WeightView{WeightType::f32, X, M, K}, dW);
    }
}

}  // namespace matmul_detail

void matmul_set_bf16_products(Bf16Products mode) { forced_bf16_products.store(mode); }

namespace {

// PPOLAB_BF16_PRODUCTS=native|fp32 in the environment replaces the automatic
// choice (read once; a test's matmul_set_bf16_products still wins).
Bf16Products environment_bf16_products() {
    static const Bf16Products mode = [] {
        const char* v = std::getenv("PPOLAB_BF16_PRODUCTS");
        if (v == nullptr || *v == '\0') return Bf16Products::automatic;
        const std::string value(v);
        if (value == "native") return Bf16Products::native;
        if (value == "fp32") return Bf16Products::f32;
        fail("environment variable PPOLAB_BF16_PRODUCTS: expected native or fp32, found '", value, "'");
    }();
    return mode;
}

}  // namespace

const Bf16Decision& bf16_products_automatic() {
    static const Bf16Decision d = [] {
        Bf16Decision r;
        std::string why;
        if (!matmul_has_avx512bf16()) {
            r.why = r.basis = "no AVX-512 BF16: oneDNN would only emulate BF16";
        } else if (unit_rates::request_amx_tiles(&why)) {
            r.native = true;
            r.why = r.basis = "AMX-BF16 tiles";
        } else {
            const unit_rates::Bf16Probe p = unit_rates::probe_bf16_against_fp32();
            r.bf16_gflop_s = p.bf16_gflop_s;
            r.fp32_gflop_s = p.fp32_gflop_s;
            r.native = p.bf16_gflop_s >= kBf16NativeAtLeast * p.fp32_gflop_s;
            char buf[160];
            std::snprintf(
                buf, sizeof buf,
                "measured on 1 thread: vdpbf16ps %.0f GFLOP/s = %.0f%% of FP32 FMA's %.0f; native needs %.0f%%",
                p.bf16_gflop_s, 100 * p.bf16_gflop_s / p.fp32_gflop_s, p.fp32_gflop_s, kBf16NativeAtLeast * 100);
            r.why = unit_rates::cpu_has_amx_bf16() ? "AMX tiles not granted (" + why + "); " + buf : buf;
            r.basis = r.native ? "vdpbf16ps measured at least 75% of FP32 FMA's rate"
                               : "vdpbf16ps measured below 75% of FP32 FMA's rate";
        }
        return r;
    }();
    return d;
}

namespace {

Bf16Products bf16_products_mode() {
    const Bf16Products mode = forced_bf16_products.load(std::memory_order_relaxed);
    return mode == Bf16Products::automatic ? environment_bf16_products() : mode;
}

}  // namespace

bool bf16_products_native() {
    const Bf16Products mode = bf16_products_mode();
    return mode == Bf16Products::automatic ? bf16_products_automatic().native : mode == Bf16Products::native;
}

bool amx_frozen_products(std::string* why) {
    if (!amx_allowed(why)) return false;  // first: it reads (and checks) PPOLAB_AMX
    if (bf16_products_native()) return true;
    if (why) *why = "BF16 products run as FP32";
    return false;
}

PrepackedWeight::PrepackedWeight(WeightView W)
    : data_(W.data),
      rows_(W.rows),
      cols_(W.cols),
      layouts_(std::make_unique<Layouts>()),
      amx_(std::make_unique<AmxCopies>()) {
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
    std::lock_guard amx_lock(amx_->mu);
    for (const auto* pack : {amx_->forward.get(), amx_->backward_input.get()})
        if (pack) bytes += pack->bytes();
    return bytes;
}

}  // namespace ppolab

// bench_canonical.cpp — the canonical products (engine.numerics = canonical,
// src/kernels/numerics.h) against the fast paths, side by side in one process:
// for each shape, the two modes alternate `--rounds` times (300 ms each) and
// the median GFLOP/s of each and of their per-round ratio are printed.
// Shapes: the tiny preset's projections at a 2048-row training chunk (frozen
// BF16 base) and its LoRA factors (FP32, rank 16).
//   build/bin/bench_canonical [--rounds N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_backend.h"
#include "kernels/numerics.h"

using namespace ppolab;

namespace {

enum class Product { forward, backward_input, backward_weight };

struct Shape {
    int64_t M, N, K;
    bool frozen;
    WeightType type;
    Product product;
    const char* name;
};

// GFLOP/s of one product repeated for 300 ms.
double rate(const Shape& s) {
    std::vector<float> x(s.M * std::max(s.K, s.N), 0.5f), y(s.M * std::max(s.K, s.N)), w32(s.N * s.K, 0.25f),
        dw(s.N * s.K);
    std::vector<bf16> w16(s.N * s.K, 0x3f80);
    WeightView W{s.type, s.type == WeightType::bf16 ? static_cast<const void*>(w16.data()) : w32.data(), s.N, s.K};
    std::unique_ptr<PrepackedWeight> pack;
    if (s.frozen) {
        pack = std::make_unique<PrepackedWeight>(W);
        W.prepacked = pack.get();
    }
    auto go = [&] {
        if (s.product == Product::forward) linear_forward(y.data(), x.data(), W, s.M);
        else if (s.product == Product::backward_input) linear_backward_input(x.data(), y.data(), W, s.M);
        else linear_backward_weight(dw.data(), y.data(), x.data(), s.M, s.N, s.K);
    };
    go();
    const auto t0 = std::chrono::steady_clock::now();
    int reps = 0;
    do {
        go();
        ++reps;
    } while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(300));
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    return 2.0 * static_cast<double>(s.M * s.N * s.K) / sec / 1e9;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 3;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
    const Shape shapes[] = {
        {2048, 256, 256, true, WeightType::bf16, Product::forward, "q forward (frozen BF16)"},
        {2048, 128, 256, true, WeightType::bf16, Product::forward, "k forward (frozen BF16)"},
        {2048, 688, 256, true, WeightType::bf16, Product::forward, "gate forward (frozen BF16)"},
        {2048, 256, 688, true, WeightType::bf16, Product::backward_input, "gate to input (frozen BF16)"},
        {2048, 768, 256, true, WeightType::bf16, Product::forward, "LM head forward (frozen BF16)"},
        {2048, 16, 256, false, WeightType::f32, Product::forward, "LoRA A forward (FP32)"},
        {2048, 256, 16, false, WeightType::f32, Product::forward, "LoRA B forward (FP32)"},
        {2048, 16, 256, false, WeightType::f32, Product::backward_input, "LoRA A to input (FP32)"},
        {2048, 16, 256, false, WeightType::f32, Product::backward_weight, "LoRA A gradient (FP32)"},
        {2048, 256, 16, false, WeightType::f32, Product::backward_weight, "LoRA B gradient (FP32)"},
    };
    std::printf("%s\n%-32s %12s %12s %8s  (median of %d alternated rounds)\n", numerics_summary().c_str(), "product",
                "canonical", "fast", "c/f", rounds);
    for (const Shape& s : shapes) {
        std::vector<double> c, f, r;
        for (int i = 0; i < rounds; ++i) {
            numerics_set_mode(Numerics::canonical);
            c.push_back(rate(s));
            numerics_set_mode(Numerics::fast);
            f.push_back(rate(s));
            r.push_back(c.back() / f.back());
        }
        std::printf("%-32s %7.1f GF/s %7.1f GF/s %7.2f\n", s.name, median(c), median(f), median(r));
    }
    return 0;
}

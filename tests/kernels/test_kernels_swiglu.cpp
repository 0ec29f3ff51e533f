// SwiGLU: closed form, finite-difference gradients (double), float against double.
#include "kernels/swiglu.h"
#include "test_kernels_common.h"

using namespace ppolab;

TEST(SwiGlu, ForwardMatchesClosedForm) {
    const std::vector<double> gate = {-30, -2, -0.5, 0, 0.5, 2, 30}, up = {1, 2, 3, 4, 5, 6, 7};
    std::vector<double> out(7);
    swiglu_forward<double>(out.data(), gate.data(), up.data(), 7);
    std::vector<double> want(7);
    for (size_t i = 0; i < 7; ++i) want[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
    kt::expect_close(out, want, 1e-15, 1e-14, "out");
    EXPECT_DOUBLE_EQ(out[3], 0.0);
    EXPECT_NEAR(out[6], 30 * 7, 1e-9);  // silu(g) → g for large g
}

TEST(SwiGlu, GradientsMatchFiniteDifferences) {
    const int64_t n = 50;
    auto gate = kt::random_vec(n, 1, -6, 6), up = kt::random_vec(n, 2, -2, 2), probe = kt::random_vec(n, 3);
    auto loss = [&] {
        std::vector<double> out(n);
        swiglu_forward<double>(out.data(), gate.data(), up.data(), n);
        return kt::dot(out, probe);
    };
    std::vector<double> dgate(n, 5.0), dup(n, 5.0);  // overwritten
    swiglu_backward<double>(dgate.data(), dup.data(), probe.data(), gate.data(), up.data(), n);
    // h = 1e-6: truncation ~1e-13, rounding ~1e-9 (|L| ≲ 20); gradients O(1).
    kt::expect_close(dgate, kt::numeric_grad(gate, loss), 1e-7, 1e-6, "dgate");
    kt::expect_close(dup, kt::numeric_grad(up, loss), 1e-7, 1e-6, "dup");
}

TEST(SwiGlu, FloatMatchesDouble) {
    const int64_t n = 100003;  // above the threading threshold; a tail shorter than a vector
    auto gate = kt::random_vec(n, 4, -10, 10), up = kt::random_vec(n, 5, -3, 3), g = kt::random_vec(n, 6);
    std::vector<double> out(n), dgate(n), dup(n);
    swiglu_forward<double>(out.data(), gate.data(), up.data(), n);
    swiglu_backward<double>(dgate.data(), dup.data(), g.data(), gate.data(), up.data(), n);
    auto gf = kt::cast<float>(gate), uf = kt::cast<float>(up), df = kt::cast<float>(g);
    kt::for_each_simd_path([&] {
        std::vector<float> outf(n), dgatef(n), dupf(n);
        swiglu_forward<float>(outf.data(), gf.data(), uf.data(), n);
        swiglu_backward<float>(dgatef.data(), dupf.data(), df.data(), gf.data(), uf.data(), n);
        // A handful of float operations on float-rounded inputs, exp within 2e-7: a few
        // ulp, 2e-6 relative; the absolute part covers results that cancel near zero.
        kt::expect_close(outf, out, 1e-6, 2e-6, "out (float)");
        kt::expect_close(dgatef, dgate, 1e-6, 2e-6, "dgate (float)");
        kt::expect_close(dupf, dup, 1e-6, 2e-6, "dup (float)");
    });
}

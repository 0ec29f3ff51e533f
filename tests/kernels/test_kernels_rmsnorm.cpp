// RMSNorm: closed form, finite-difference gradients (double), float against double.
#include "kernels/rmsnorm.h"
#include "test_kernels_common.h"

using namespace ppolab;

namespace {

constexpr double kEps = 1e-6;

struct Case {
    int64_t N = 3, C = 7;
    std::vector<double> x = kt::random_vec(21, 1, -2, 2);    // (N, C)
    std::vector<double> w = kt::random_vec(7, 2, 0.5, 1.5);  // (C)
    std::vector<double> probe = kt::random_vec(21, 3);       // (N, C) loss weights
    double loss() const {                                    // Σ probe · rmsnorm(x)
        std::vector<double> out(N * C), rstd(N);
        rmsnorm_forward<double>(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
        return kt::dot(out, probe);
    }
};

}  // namespace

TEST(RmsNorm, ForwardMatchesClosedForm) {
    Case c;
    std::vector<double> out(c.N * c.C), rstd(c.N);
    rmsnorm_forward<double>(out.data(), rstd.data(), c.x.data(), c.w.data(), c.N, c.C, kEps);
    std::vector<double> want(out.size()), want_rstd(c.N);
    for (int64_t n = 0; n < c.N; ++n) {
        double ss = 0;
        for (int64_t i = 0; i < c.C; ++i) ss += c.x[n * c.C + i] * c.x[n * c.C + i];
        want_rstd[n] = 1 / std::sqrt(ss / c.C + kEps);
        for (int64_t i = 0; i < c.C; ++i) want[n * c.C + i] = c.x[n * c.C + i] * want_rstd[n] * c.w[i];
    }
    // Same formula, different summation order only: a few ulp.
    kt::expect_close(out, want, 1e-14, 1e-13, "out");
    kt::expect_close(rstd, want_rstd, 1e-14, 1e-13, "rstd");
}

TEST(RmsNorm, GradientsMatchFiniteDifferences) {
    Case c;
    std::vector<double> out(c.N * c.C), rstd(c.N);
    rmsnorm_forward<double>(out.data(), rstd.data(), c.x.data(), c.w.data(), c.N, c.C, kEps);
    std::vector<double> dx(c.N * c.C, 99.0), dw(c.C, 0.25);  // dx overwritten, dw accumulates onto 0.25
    rmsnorm_backward<double>(dx.data(), dw.data(), c.probe.data(), c.x.data(), c.w.data(), rstd.data(), c.N, c.C);
    for (auto& v : dw) v -= 0.25;
    // h = 1e-6: truncation ~1e-13, rounding ~ε·|L|/h ≈ 1e-9 (|L| ≲ 5); gradients are O(1),
    // so 1e-7 absolute + 1e-6 relative sits well above both and far below any real error.
    kt::expect_close(dx, kt::numeric_grad(c.x, [&] { return c.loss(); }), 1e-7, 1e-6, "dx");
    kt::expect_close(dw, kt::numeric_grad(c.w, [&] { return c.loss(); }), 1e-7, 1e-6, "dweight");

    std::vector<double> dx2(c.N * c.C);
    rmsnorm_backward<double>(dx2.data(), nullptr, c.probe.data(), c.x.data(), c.w.data(), rstd.data(), c.N, c.C);
    kt::expect_close(dx2, dx, 0, 0, "dx without dweight");
}

TEST(RmsNorm, FloatMatchesDoubleAtModelWidth) {
    // Large enough (N·C > threshold) to take the multi-threaded path.
    const int64_t N = 40, C = 896;
    auto x = kt::random_vec(N * C, 11, -3, 3), w = kt::random_vec(C, 12, 0.2, 2), g = kt::random_vec(N * C, 13);
    std::vector<double> out(N * C), rstd(N), dx(N * C), dw(C, 0);
    rmsnorm_forward<double>(out.data(), rstd.data(), x.data(), w.data(), N, C, kEps);
    rmsnorm_backward<double>(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), N, C);
    auto xf = kt::cast<float>(x), wf = kt::cast<float>(w), gf = kt::cast<float>(g);
    std::vector<float> outf(N * C), rstdf(N), dxf(N * C), dwf(C, 0);
    rmsnorm_forward<float>(outf.data(), rstdf.data(), xf.data(), wf.data(), N, C, kEps);
    rmsnorm_backward<float>(dxf.data(), dwf.data(), gf.data(), xf.data(), wf.data(), rstdf.data(), N, C);
    // Inputs rounded to float (2^-24 relative) plus a few float operations per element:
    // 1e-6 relative; dweight sums N = 40 float terms: 1e-5 absolute on values of size ~10.
    kt::expect_close(outf, out, 1e-6, 1e-6, "out (float)");
    kt::expect_close(rstdf, rstd, 1e-7, 1e-6, "rstd (float)");
    kt::expect_close(dxf, dx, 1e-6, 1e-5, "dx (float)");
    kt::expect_close(dwf, dw, 1e-5, 1e-5, "dweight (float)");
}

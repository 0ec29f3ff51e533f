// RoPE: closed form of one pair, backward as the exact inverse and as the
// finite-difference gradient (double), float against double. The Hugging
// Face convention itself is checked against PyTorch in test_kernels_oracle.
#include "kernels/rope.h"
#include "test_kernels_common.h"
#include "util/error.h"

using namespace ppolab;

TEST(Rope, RotatesHalvesByPositionTimesInvFreq) {
    const int64_t heads = 2, hd = 8, half = 4;
    const double theta = 1e6;
    const std::vector<int32_t> pos = {0, 3, 1000};
    auto x = kt::random_vec(3 * heads * hd, 1);
    auto y = x;
    rope_forward<double>(y.data(), pos.data(), 3, heads, hd, theta);
    std::vector<double> want(x.size());
    for (int64_t n = 0; n < 3; ++n)
        for (int64_t h = 0; h < heads; ++h)
            for (int64_t i = 0; i < half; ++i) {
                const double a = pos[n] * std::pow(theta, -2.0 * i / hd);
                const double* xi = &x[(n * heads + h) * hd];
                want[(n * heads + h) * hd + i] = xi[i] * std::cos(a) - xi[i + half] * std::sin(a);
                want[(n * heads + h) * hd + i + half] = xi[i + half] * std::cos(a) + xi[i] * std::sin(a);
            }
    kt::expect_close(y, want, 1e-14, 1e-13, "rope(x)");
    // Position 0 is the identity.
    for (int64_t i = 0; i < heads * hd; ++i) EXPECT_EQ(y[i], x[i]) << i;
}

TEST(Rope, BackwardIsTheFiniteDifferenceGradientAndTheInverse) {
    const int64_t N = 4, heads = 3, hd = 6;
    const std::vector<int32_t> pos = {5, 0, 17, 2};
    auto x = kt::random_vec(N * heads * hd, 2), probe = kt::random_vec(N * heads * hd, 3);
    auto loss = [&] {
        auto y = x;
        rope_forward<double>(y.data(), pos.data(), N, heads, hd, 10000.0);
        return kt::dot(y, probe);
    };
    auto g = probe;
    rope_backward<double>(g.data(), pos.data(), N, heads, hd, 10000.0);
    // Linear map: finite differences are exact up to rounding ε·|L|/h ≈ 1e-9.
    kt::expect_close(g, kt::numeric_grad(x, loss), 1e-7, 1e-6, "dx");
    auto y = x;
    rope_forward<double>(y.data(), pos.data(), N, heads, hd, 10000.0);
    rope_backward<double>(y.data(), pos.data(), N, heads, hd, 10000.0);
    kt::expect_close(y, x, 1e-15, 1e-14, "backward(forward(x))");
}

TEST(Rope, FloatMatchesDoubleAndTablesFollowTheirArguments) {
    const int64_t N = 700, heads = 14, hd = 64;  // threaded path; positions past the first table size
    std::vector<int32_t> pos(N);
    for (int64_t n = 0; n < N; ++n) pos[n] = static_cast<int32_t>((n * 37) % 3000);
    auto x = kt::random_vec(N * heads * hd, 4, -3, 3);
    for (double theta : {1e6, 1e4}) {  // a second θ must rebuild the cached table
        auto y = x;
        rope_forward<double>(y.data(), pos.data(), N, heads, hd, theta);
        auto yf = kt::cast<float>(x);
        rope_forward<float>(yf.data(), pos.data(), N, heads, hd, theta);
        // cos/sin rounded to float once (2^-24) and two float products: 3e-7·|x| ≤ 1e-6.
        kt::expect_close(yf, y, 2e-6, 1e-6, "rope float, theta=" + std::to_string(theta));
        rope_backward<float>(yf.data(), pos.data(), N, heads, hd, theta);
        kt::expect_close(yf, x, 2e-6, 1e-6, "inverse float, theta=" + std::to_string(theta));
    }
}

TEST(Rope, RejectsBadArguments) {
    std::vector<double> x(6);
    const std::vector<int32_t> neg = {-1};
    EXPECT_THROW(rope_forward<double>(x.data(), neg.data(), 1, 1, 6, 1e4), Error);
    const std::vector<int32_t> ok = {1};
    EXPECT_THROW(rope_forward<double>(x.data(), ok.data(), 1, 2, 3, 1e4), Error);  // odd head_dim
}

// test_kernels_common.h — helpers shared by the kernel tests: seeded random
// tensors, central finite differences, element-wise comparison that names
// the worst element, and a bridge to the PyTorch oracle
// (tests/oracle/kernels_ref.py run by $PPOLAB_PYTHON).
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/simd.h"
#include "util/rng.h"

namespace kt {

namespace fs = std::filesystem;

// n values uniform in [lo, hi) from a seeded Philox stream.
inline std::vector<double> random_vec(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
    ppolab::Philox rng(seed, 7);
    std::vector<double> v(n);
    for (auto& x : v) x = lo + (hi - lo) * rng.uniform();
    return v;
}

template <typename To, typename From>
std::vector<To> cast(const std::vector<From>& v) {
    return std::vector<To>(v.begin(), v.end());
}

// Central differences of a scalar loss with respect to every element of x:
//   (L(x + h e_i) − L(x − h e_i)) / 2h.
// For smooth L the truncation error is h²/6 · |L'''| (≈ 1e-13 at h = 1e-6) and
// the rounding error ε·|L|/h (≈ 2e-10 · |L| in double); tests choose a
// tolerance above both.
inline std::vector<double> numeric_grad(std::vector<double>& x, const std::function<double()>& loss, double h = 1e-6) {
    std::vector<double> g(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const double saved = x[i];
        x[i] = saved + h;
        const double up = loss();
        x[i] = saved - h;
        const double down = loss();
        x[i] = saved;
        g[i] = (up - down) / (2 * h);
    }
    return g;
}

// Passes when |got − want| ≤ atol + rtol·|want| for every element; otherwise
// one failure naming the tensor, the count of bad elements and the worst one.
template <typename A, typename B>
void expect_close(const std::vector<A>& got, const std::vector<B>& want, double atol, double rtol,
                  const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what << ": size";
    size_t bad = 0, worst = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < got.size(); ++i) {
        const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
        const double err = std::fabs(g - w), allowed = atol + rtol * std::fabs(w);
        if (!(err <= allowed)) ++bad;
        const double excess = std::isnan(err) ? 1e300 : err / allowed;
        if (excess > worst_excess) worst_excess = excess, worst = i;
    }
    if (bad)
        ADD_FAILURE() << what << ": " << bad << " of " << got.size() << " elements differ beyond atol=" << atol
                      << " rtol=" << rtol << "; worst at [" << worst << "]: got " << static_cast<double>(got[worst])
                      << ", expected " << static_cast<double>(want[worst]);
}

// Runs `body` once per float code path this CPU has: AVX-512, AVX2 (where
// present) and portable; failures carry the path's name.
inline void for_each_simd_path(const std::function<void()>& body) {
    using ppolab::simd::SimdLevel;
    SimdLevel& level = ppolab::simd::simd_level();
    const SimdLevel saved = level;
    const std::pair<SimdLevel, const char*> paths[] = {{SimdLevel::avx512, "simd path: avx512"},
                                                       {SimdLevel::avx2, "simd path: avx2"},
                                                       {SimdLevel::portable, "simd path: portable"}};
    for (const auto& [path, name] : paths) {
        if (path > ppolab::simd::simd_cpu_level()) continue;
        level = path;
        SCOPED_TRACE(name);
        body();
    }
    level = saved;
}

inline double max_abs(const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m = std::max(m, std::fabs(x));
    return m;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

// A scratch folder for one oracle call: tensors are raw little-endian files
// (name.f64, name.i32, name.u8) plus meta.json; the script writes its
// results as name.f64 into the same folder.
class TorchOracle {
public:
    explicit TorchOracle(const std::string& op) : op_(op) {
        dir_ = fs::temp_directory_path() /
               ("ppolab_kernels_oracle_" + op + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
        fs::remove_all(dir_);
        fs::create_directories(dir_);
        meta_["op"] = op;
    }
    ~TorchOracle() {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    nlohmann::json& meta() { return meta_; }

    void put(const std::string& name, const std::vector<double>& v) { write(name + ".f64", v.data(), v.size() * 8); }
    void put(const std::string& name, const std::vector<float>& v) { put(name, cast<double>(v)); }
    void put(const std::string& name, const std::vector<int32_t>& v) { write(name + ".i32", v.data(), v.size() * 4); }
    void put(const std::string& name, const std::vector<uint8_t>& v) { write(name + ".u8", v.data(), v.size()); }

    // Runs the script once over every oracle in `all` (one interpreter start:
    // importing torch costs seconds); false, with a test failure naming the
    // reason, when it did not succeed.
    static bool run_all(const std::vector<TorchOracle*>& all) {
        const char* python = std::getenv("PPOLAB_PYTHON");
        const char* source = std::getenv("PPOLAB_SOURCE_DIR");
        if (!python || !*python) {
            ADD_FAILURE() << "PPOLAB_PYTHON is not set: run this test through ctest (it names the interpreter)";
            return false;
        }
        const fs::path script = fs::path(source && *source ? source : ".") / "tests/oracle/kernels_ref.py";
        std::string cmd = std::string("'") + python + "' '" + script.string() + "'";
        for (TorchOracle* o : all) {
            std::ofstream(o->dir_ / "meta.json") << o->meta_.dump();
            cmd += " '" + o->dir_.string() + "'";
        }
        const fs::path log_path = all.front()->dir_ / "log.txt";
        cmd += " > '" + log_path.string() + "' 2>&1";
        const int rc = std::system(cmd.c_str());
        if (rc != 0) {
            std::ifstream log(log_path);
            std::stringstream text;
            text << log.rdbuf();
            ADD_FAILURE() << "oracle failed (" << rc << "): " << cmd << "\n" << text.str();
            return false;
        }
        return true;
    }
    bool run() { return run_all({this}); }

    // A result written by the script, checked to hold n float64 values.
    std::vector<double> get(const std::string& name, size_t n) {
        const fs::path p = dir_ / (name + ".f64");
        std::ifstream in(p, std::ios::binary);
        std::vector<double> v(n);
        in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * 8));
        EXPECT_EQ(static_cast<size_t>(in.gcount()), n * 8) << p << ": expected " << n << " float64 values";
        EXPECT_EQ(in.peek(), EOF) << p << ": longer than " << n << " float64 values";
        return v;
    }

private:
    static int& counter() {
        static int c = 0;
        return c;
    }
    void write(const std::string& file, const void* data, size_t bytes) {
        std::ofstream out(dir_ / file, std::ios::binary);
        out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    }
    std::string op_;
    fs::path dir_;
    nlohmann::json meta_;
};

}  // namespace kt

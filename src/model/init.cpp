#include "model/init.h"

#include "model/tensor_table.h"
#include "util/error.h"
#include "util/rng.h"

namespace ppolab {

static Matrix random_matrix(int64_t rows, int64_t cols, WeightType type, double stddev, Philox& rng) {
    Matrix m;
    m.type = type;
    m.rows = rows;
    m.cols = cols;
    if (type == WeightType::bf16) m.b.resize(static_cast<size_t>(rows * cols));
    else m.f.resize(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows * cols; ++i) {
        float v = static_cast<float>(rng.normal() * stddev);
        if (type == WeightType::bf16) m.b[static_cast<size_t>(i)] = float_to_bf16(v);
        else m.f[static_cast<size_t>(i)] = v;
    }
    return m;
}

static std::vector<float> filled(int64_t n, float base, bool randomize, Philox& rng) {
    std::vector<float> v(static_cast<size_t>(n), base);
    if (randomize)
        for (auto& x : v) x = round_to_bf16(base + static_cast<float>(0.1 * rng.normal()));
    return v;
}

Qwen2Weights random_weights(const Qwen2Config& c, const InitOptions& o) {
    PPOLAB_ASSERT(c.hidden_size > 0 && c.num_hidden_layers > 0 && c.head_dim > 0);
    // One generator drawn tensor after tensor in checkpoint order (the table's).
    Philox rng(o.seed, /*stream=*/0x1417);
    Qwen2Weights w;
    w.config = c;
    w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
    for (const TensorSpec& spec : qwen2_tensor_table(c)) {
        if (Matrix* m = spec.matrix(w)) {
            *m = random_matrix(spec.shape[0], spec.shape[1], o.matrices, o.stddev, rng);
        } else {
            const float base = spec.kind == TensorKind::norm ? 1.f : 0.f;
            *spec.vector(w) = filled(spec.numel(), base, o.randomize_norms_and_biases, rng);
        }
    }
    return w;
}

}  // namespace ppolab

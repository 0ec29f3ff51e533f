// tensors.h — learned tensors held by value (snapshots, optimiser moments,
// tensors read back from a file) and their transfer to and from a ParamList.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/param.h"

namespace ppolab {

// One FP32 tensor with its name, owned by value.
struct NamedTensor {
    std::string name;            // e.g. "model.layers.0.mlp.up_proj.lora_B"
    std::vector<int64_t> shape;  // e.g. {4864, 8}
    std::vector<float> values;   // product(shape) values, row-major

    int64_t numel() const;
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[8, 896]"

// Copies the values of every parameter, in order.
std::vector<NamedTensor> capture_params(const ParamList& params);
// Zero-filled tensors with the names and shapes of `params` (AdamW moments).
std::vector<NamedTensor> zeros_like_params(const ParamList& params);

// Checks that `tensors` has exactly the names (in order) and shapes of
// `params`; the Error names `where`, the tensor and expected vs got.
void check_same_layout(const std::vector<NamedTensor>& tensors, const ParamList& params, std::string_view where);
// check_same_layout, then copies every value into the parameters. Nothing is
// written unless everything matches.
void restore_params(const std::vector<NamedTensor>& tensors, const ParamList& params, std::string_view where);

// Bit-for-bit comparison; returns "" when equal, else the first difference
// ("tensor 'x' element 12: 0x3f800000 vs 0x3f800001").
std::string first_tensor_difference(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b);

}  // namespace ppolab

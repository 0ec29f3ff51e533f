#include "training/tensors.h"

#include <cstdio>
#include <cstring>
#include <sstream>

#include "util/error.h"

namespace ppolab {

int64_t NamedTensor::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
    std::ostringstream out;
    out << "[";
    for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
    out << "]";
    return out.str();
}

std::vector<NamedTensor> capture_params(const ParamList& params) {
    std::vector<NamedTensor> out;
    out.reserve(params.size());
    for (const ParamRef& p : params) {
        PPOLAB_ASSERT(p.data != nullptr || p.numel() == 0);
        NamedTensor t{p.name, p.shape, std::vector<float>(static_cast<size_t>(p.numel()))};
        if (p.numel() > 0) std::memcpy(t.values.data(), p.data, t.values.size() * sizeof(float));
        out.push_back(std::move(t));
    }
    return out;
}

std::vector<NamedTensor> zeros_like_params(const ParamList& params) {
    std::vector<NamedTensor> out;
    out.reserve(params.size());
    for (const ParamRef& p : params)
        out.push_back(NamedTensor{p.name, p.shape, std::vector<float>(static_cast<size_t>(p.numel()), 0.0f)});
    return out;
}

void check_same_layout(const std::vector<NamedTensor>& tensors, const ParamList& params, std::string_view where) {
    if (tensors.size() != params.size())
        fail(where, ": expected ", params.size(), " tensors, got ", tensors.size(),
             tensors.size() < params.size() ? " (missing '" + params[tensors.size()].name + "')"
                                            : " (unexpected '" + tensors[params.size()].name + "')");
    for (size_t i = 0; i < params.size(); ++i) {
        if (tensors[i].name != params[i].name)
            fail(where, ": tensor ", i, " is '", tensors[i].name, "'; expected '", params[i].name, "'");
        if (tensors[i].shape != params[i].shape)
            fail(where, ": tensor '", params[i].name, "' has shape ", shape_string(tensors[i].shape), "; expected ",
                 shape_string(params[i].shape));
        if (static_cast<int64_t>(tensors[i].values.size()) != params[i].numel())
            fail(where, ": tensor '", params[i].name, "' holds ", tensors[i].values.size(), " values; expected ",
                 params[i].numel());
    }
}

void restore_params(const std::vector<NamedTensor>& tensors, const ParamList& params, std::string_view where) {
    check_same_layout(tensors, params, where);
    for (size_t i = 0; i < params.size(); ++i)
        if (!tensors[i].values.empty())
            std::memcpy(params[i].data, tensors[i].values.data(), tensors[i].values.size() * sizeof(float));
}

std::string first_tensor_difference(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
    std::ostringstream out;
    if (a.size() != b.size()) {
        out << a.size() << " tensors vs " << b.size();
        return out.str();
    }
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].name != b[i].name) {
            out << "tensor " << i << " is '" << a[i].name << "' vs '" << b[i].name << "'";
            return out.str();
        }
        if (a[i].shape != b[i].shape || a[i].values.size() != b[i].values.size()) {
            out << "tensor '" << a[i].name << "' shape " << shape_string(a[i].shape) << " vs "
                << shape_string(b[i].shape);
            return out.str();
        }
        for (size_t k = 0; k < a[i].values.size(); ++k) {
            uint32_t x, y;
            std::memcpy(&x, &a[i].values[k], 4);
            std::memcpy(&y, &b[i].values[k], 4);
            if (x != y) {
                char buf[64];
                std::snprintf(buf, sizeof buf, "0x%08x vs 0x%08x", x, y);
                out << "tensor '" << a[i].name << "' element " << k << ": " << a[i].values[k] << " vs "
                    << b[i].values[k] << " (" << buf << ")";
                return out.str();
            }
        }
    }
    return "";
}

}  // namespace ppolab

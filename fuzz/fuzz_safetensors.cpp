// fuzz_safetensors.cpp — libFuzzer target for the safetensors reader.
//
// Any input must either be refused with ppolab::Error or yield tensors that
// lie inside the bytes with size = numel × dtype size; every byte of every
// tensor is read (ASan catches an out-of-bounds tensor) and float tensors
// are converted. Never a crash, a hang or another exception type.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "model/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace ppolab;
    try {
        SafetensorsFile f = SafetensorsFile::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
        unsigned sum = 0;
        for (const SafetensorsTensor& t : f.tensors()) {
            if (t.size != static_cast<size_t>(t.numel()) * safetensors_dtype_size(t.dtype)) std::abort();
            if (f.find(t.name) != &t) std::abort();
            for (size_t i = 0; i < t.size; ++i) sum += t.data[i];
            if (t.dtype == "F32" || t.dtype == "BF16" || t.dtype == "F16") {
                std::vector<float> v = tensor_to_f32(t, "fuzz");
                std::vector<bf16> b(v.size());
                tensor_to_bf16(t, "fuzz", b.data());
            }
        }
        // What was read serialises back to a file that reads the same.
        std::vector<TensorToWrite> out;
        for (const SafetensorsTensor& t : f.tensors())
            out.push_back({t.name, t.dtype, t.shape, {reinterpret_cast<const char*>(t.data), t.size}});
        SafetensorsFile g = SafetensorsFile::from_bytes(serialize_safetensors(out, f.metadata()), "fuzz2");
        if (g.tensors().size() != f.tensors().size() || g.metadata() != f.metadata()) std::abort();
        (void)sum;
    } catch (const Error&) {}
    return 0;
}

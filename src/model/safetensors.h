// safetensors.h — reading and writing the safetensors format.
//
// Layout: 8 bytes little-endian header length N, N bytes of JSON header
// ({"name": {"dtype": "BF16", "shape": [r, c], "data_offsets": [b, e]}, ...,
// "__metadata__": {"k": "v"}}), then the data region; offsets are relative
// to the start of the data region.
//
// The reader validates the whole header before anything is used: header
// length within the file and at most 100 MB, JSON an object of objects,
// known dtype, non-negative shape, offsets inside the data region,
// tensors neither overlapping nor leaving gaps, byte size = product of
// shape × dtype size, nothing after the last tensor. It never reads out of
// bounds: every SafetensorsTensor it hands out points inside the file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/bf16.h"
#include "util/fileio.h"

namespace ppolab {

struct SafetensorsTensor {
    std::string name;
    std::string dtype;              // "F32", "BF16", "F16", ... (validated)
    std::vector<int64_t> shape;     // row-major
    const uint8_t* data = nullptr;  // inside the owning SafetensorsFile; may be unaligned
    size_t size = 0;                // bytes = numel × dtype size

    int64_t numel() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
    }
};

// The longest header the reader accepts (the safetensors library's limit).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// The size of the data region a header describes: the largest end of its
// tensors' data_offsets (0 without tensors). Parses `header_json` as the
// reader does (nesting, repeated names: Error naming `where`); entries the
// reader would refuse are left to it. Lets a streaming reader know how many
// bytes a file promises before holding them.
uint64_t safetensors_data_size(std::string_view header_json, const std::string& where);

// Bytes per element of a safetensors dtype; 0 for an unknown dtype.
size_t safetensors_dtype_size(std::string_view dtype);
// "[896, 64]" — how shapes are printed in error messages.
std::string shape_to_string(const std::vector<int64_t>& shape);

class SafetensorsFile {  // owns the bytes (mmap of the whole file, or a string), validated on open
public:
    static SafetensorsFile open(const fs::path& path);                          // Error naming the file and the problem
    static SafetensorsFile from_bytes(std::string bytes, std::string where);    // for fuzzing/tests
    const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in data-offset order
    const SafetensorsTensor* find(std::string_view name) const;                 // nullptr if absent
    const std::map<std::string, std::string>& metadata() const { return metadata_; }  // "__metadata__"
    const std::string& where() const { return where_; }                               // the file name, for errors

private:
    struct Storage;  // the bytes; shared so tensor pointers survive moves and copies
    SafetensorsFile() = default;
    void parse();
    std::shared_ptr<const Storage> storage_;
    std::string where_;
    std::vector<SafetensorsTensor> tensors_;
    std::map<std::string, size_t, std::less<>> index_;  // name → position in tensors_
    std::map<std::string, std::string> metadata_;
};

// F32/BF16/F16 → float, else Error naming `where`, the tensor and its dtype.
std::vector<float> tensor_to_f32(const SafetensorsTensor& t, std::string_view where);
// The same into caller memory of t.numel() elements (no allocation).
void tensor_to_f32(const SafetensorsTensor& t, std::string_view where, float* out);
// F32/F16 rounded to nearest even, BF16 copied as is; out has t.numel() elements.
void tensor_to_bf16(const SafetensorsTensor& t, std::string_view where, bf16* out);

struct TensorToWrite {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::string_view bytes;  // numel × dtype size bytes, row-major
};

// Deterministic: header keys sorted, "__metadata__" included if non-empty,
// header padded with spaces to a multiple of 8, data in header order.
// Error if a name repeats, a dtype is unknown or bytes do not match the shape.
std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata);  // the file's bytes
// The same bytes written atomically (streamed, no second copy of the data).
void write_safetensors(const fs::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata, Overwrite mode = Overwrite::refuse);

}  // namespace ppolab

// sha256.h — SHA-256 of bytes, strings and files, as lowercase hex.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ppolab {

// Incremental hasher: feed bytes, then hex() once.
class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(const void* data, size_t size);
    void update(std::string_view text) { update(text.data(), text.size()); }
    std::string hex();  // finishes the hash

private:
    void* ctx_;
};

std::string sha256_hex(const void* data, size_t size);
std::string sha256_hex(std::string_view text);
std::string sha256_file(const std::filesystem::path& path);
// The bytes of a regular file (util/fileio.h open_regular_file) into h.
void sha256_update_file(Sha256& h, const std::filesystem::path& path);

}  // namespace ppolab

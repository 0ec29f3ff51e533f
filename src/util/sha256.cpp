#include "util/sha256.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "util/error.h"
#include "util/fileio.h"

namespace ppolab {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (!ctx_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr) != 1)
        fail("sha256: cannot initialise OpenSSL digest");
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256::update(const void* data, size_t size) {
    if (size && EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size) != 1) fail("sha256: digest update failed");
}

std::string Sha256::hex() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &len) != 1) fail("sha256: digest final failed");
    static const char* digits = "0123456789abcdef";
    std::string out;
    out.reserve(2 * len);
    for (unsigned i = 0; i < len; ++i) {
        out.push_back(digits[digest[i] >> 4]);
        out.push_back(digits[digest[i] & 15]);
    }
    return out;
}

std::string sha256_hex(const void* data, size_t size) {
    Sha256 h;
    h.update(data, size);
    return h.hex();
}

std::string sha256_hex(std::string_view text) { return sha256_hex(text.data(), text.size()); }

void sha256_update_file(Sha256& h, const std::filesystem::path& path) {
    read_regular_file(path, "file", [&](const char* bytes, size_t n) { h.update(bytes, n); });
}

std::string sha256_file(const std::filesystem::path& path) {
    Sha256 h;
    sha256_update_file(h, path);
    return h.hex();
}

}  // namespace ppolab

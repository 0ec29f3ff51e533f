// identity.h — sha256 identities of learned and frozen tensors, and the
// isolation check between roles (SPEC §2).
//
// Byte layout of an identity (one hex digest over a manifest):
//   tensors are sorted by name (names must be unique); for each, one line
//     <name> '\t' <dtype> '\t' <shape as "[d0, d1]"> '\t' <sha256 hex of the raw bytes> '\n'
//   where the raw bytes are the tensor's values in row-major order, little
//   endian (F32: 4 bytes per value, BF16: 2); the identity is the sha256 hex
//   of the concatenated lines. It depends on names, dtypes, shapes and every
//   bit of the values, and not on the order in which the tensors are listed.
// A learned identity hashes a ParamList's values (dtype F32); a frozen
// identity hashes whatever bytes the frozen tensors hold (the BF16 base, a
// frozen role's adapters).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/param.h"
#include "training/tensors.h"
#include "util/json.h"

namespace ppolab {

// A view of one tensor's bytes for hashing.
struct TensorBytes {
    std::string name;
    std::string dtype;  // "F32", "BF16", ...
    std::vector<int64_t> shape;
    std::string_view bytes;  // row-major, little endian
};

// The identity of a set of tensors (the layout above).
std::string tensors_identity(const std::vector<TensorBytes>& tensors);
// The manifest rows [{name, dtype, shape, sha256}] in identity order, for reports.
json tensors_manifest(const std::vector<TensorBytes>& tensors);

std::string learned_identity(const ParamList& params);  // F32 values of params
std::string learned_identity(const std::vector<NamedTensor>& tensors);
std::string frozen_identity(const std::vector<TensorBytes>& tensors);  // = tensors_identity

// One role as the isolation check sees it.
struct RoleView {
    std::string name;     // "actor", "reference", "reward", "critic"
    ParamList params;     // its learned tensors (a frozen role: its frozen adapters/heads)
    bool frozen = false;  // a frozen role must have no gradient buffers
};

// Fails (naming both roles and parameters) when any two byte ranges among
// all data and gradient buffers of all roles overlap — within a role too —
// or when a frozen role holds a gradient buffer.
void check_isolation(const std::vector<RoleView>& roles);

}  // namespace ppolab

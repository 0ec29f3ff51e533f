#include "training/identity.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "util/error.h"
#include "util/sha256.h"

namespace ppolab {

static_assert(std::endian::native == std::endian::little, "identities hash little-endian bytes");

static std::vector<const TensorBytes*> sorted_by_name(const std::vector<TensorBytes>& tensors) {
    std::vector<const TensorBytes*> order;
    for (const TensorBytes& t : tensors) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const TensorBytes* a, const TensorBytes* b) { return a->name < b->name; });
    for (size_t i = 1; i < order.size(); ++i)
        if (order[i]->name == order[i - 1]->name) fail("identity: tensor name '", order[i]->name, "' appears twice");
    return order;
}

json tensors_manifest(const std::vector<TensorBytes>& tensors) {
    json rows = json::array();
    for (const TensorBytes* t : sorted_by_name(tensors))
        rows.push_back({{"name", t->name}, {"dtype", t->dtype}, {"shape", t->shape}, {"sha256", sha256_hex(t->bytes)}});
    return rows;
}

std::string tensors_identity(const std::vector<TensorBytes>& tensors) {
    Sha256 h;
    for (const TensorBytes* t : sorted_by_name(tensors)) {
        std::string line =
            t->name + "\t" + t->dtype + "\t" + shape_string(t->shape) + "\t" + sha256_hex(t->bytes) + "\n";
        h.update(line);
    }
    return h.hex();
}

std::string learned_identity(const ParamList& params) {
    std::vector<TensorBytes> views;
    for (const ParamRef& p : params)
        views.push_back(
            {p.name, "F32", p.shape,
             std::string_view(reinterpret_cast<const char*>(p.data), static_cast<size_t>(p.numel()) * sizeof(float))});
    return tensors_identity(views);
}

std::string learned_identity(const std::vector<NamedTensor>& tensors) {
    std::vector<TensorBytes> views;
    for (const NamedTensor& t : tensors)
        views.push_back(
            {t.name, "F32", t.shape,
             std::string_view(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float))});
    return tensors_identity(views);
}

std::string frozen_identity(const std::vector<TensorBytes>& tensors) { return tensors_identity(tensors); }

void check_isolation(const std::vector<RoleView>& roles) {
    struct Range {
        uintptr_t begin, end;
        const RoleView* role;
        const ParamRef* param;
        const char* kind;
    };
    std::vector<Range> ranges;
    for (size_t r = 0; r < roles.size(); ++r) {
        for (size_t k = 0; k < r; ++k)
            if (roles[k].name == roles[r].name) fail("role isolation: role '", roles[r].name, "' appears twice");
        for (const ParamRef& p : roles[r].params) {
            const uintptr_t bytes = static_cast<uintptr_t>(p.numel()) * sizeof(float);
            if (roles[r].frozen && p.grad != nullptr)
                fail("role isolation: role '", roles[r].name, "' is frozen but parameter '", p.name,
                     "' has a gradient buffer");
            if (bytes == 0) continue;
            if (p.data == nullptr)
                fail("role isolation: role '", roles[r].name, "' parameter '", p.name, "' has no data");
            ranges.push_back({reinterpret_cast<uintptr_t>(p.data), reinterpret_cast<uintptr_t>(p.data) + bytes,
                              &roles[r], &p, "data"});
            if (p.grad != nullptr)
                ranges.push_back({reinterpret_cast<uintptr_t>(p.grad), reinterpret_cast<uintptr_t>(p.grad) + bytes,
                                  &roles[r], &p, "gradient"});
        }
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
    // Sweep: the range reaching furthest so far overlaps the next one if it
    // ends after that one begins.
    const Range* reach = nullptr;
    for (const Range& r : ranges) {
        if (reach != nullptr && r.begin < reach->end) {
            const bool same_role = reach->role == r.role;
            fail("role isolation: ", reach->kind, " of '", reach->role->name, "' parameter '", reach->param->name,
                 "' overlaps ", r.kind, " of '", r.role->name, "' parameter '", r.param->name, "'",
                 same_role ? " (within one role)" : " (two roles share mutable storage)");
        }
        if (reach == nullptr || r.end > reach->end) reach = &r;
    }
}

}  // namespace ppolab

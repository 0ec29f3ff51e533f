#include "training/learned_io.h"

#include <cstring>
#include <set>

#include "model/safetensors.h"
#include "training/identity.h"
#include "util/error.h"

namespace ppolab {

static constexpr const char* kLearnedKey = "ppolab_learned";
static constexpr const char* kLearnedFormat = "ppolab-learned";

std::string save_learned(const fs::path& path, const ParamList& params, const json& info, Overwrite mode) {
    if (!info.is_object()) fail("save_learned '", path.string(), "': info must be a JSON object");
    std::vector<TensorToWrite> tensors;
    json names = json::array();
    for (const ParamRef& p : params) {
        if (p.data == nullptr && p.numel() > 0)
            fail("save_learned '", path.string(), "': parameter '", p.name, "' has no data");
        tensors.push_back(
            {p.name, "F32", p.shape,
             std::string_view(reinterpret_cast<const char*>(p.data), static_cast<size_t>(p.numel()) * 4)});
        names.push_back(p.name);
    }
    std::string identity = learned_identity(params);  // also refuses duplicate names
    json meta = {
        {"format", kLearnedFormat}, {"version", 1}, {"tensors", names}, {"learned_identity", identity}, {"info", info}};
    write_safetensors(path, tensors, {{kLearnedKey, meta.dump()}}, mode);
    return identity;
}

LearnedFile read_learned(const fs::path& path) {
    const std::string where = path.string();
    SafetensorsFile file = SafetensorsFile::open(path);
    auto it = file.metadata().find(kLearnedKey);
    if (it == file.metadata().end()) fail(where, ": not a ppolab learned-state file (no '", kLearnedKey, "' metadata)");
    const std::string mwhere = where + " (metadata)";
    json meta = parse_json(it->second, mwhere);
    if (json_string(meta, "format", mwhere) != kLearnedFormat)
        fail(mwhere, ": format is '", meta["format"].get<std::string>(), "'; expected '", kLearnedFormat, "'");
    if (json_int(meta, "version", mwhere) != 1)
        fail(mwhere, ": version ", meta["version"].dump(), " is not supported; this build reads version 1");
    const json& names = json_field(meta, "tensors", mwhere);
    if (!names.is_array()) fail(mwhere, ": field 'tensors' must be an array");
    LearnedFile out;
    out.info = json_field(meta, "info", mwhere);
    std::set<std::string> listed;
    for (const json& n : names) {
        if (!n.is_string()) fail(mwhere, ": field 'tensors' must hold names, got ", n.dump());
        const std::string name = n.get<std::string>();
        if (!listed.insert(name).second) fail(mwhere, ": tensor '", name, "' listed twice");
        const SafetensorsTensor* t = file.find(name);
        if (t == nullptr) fail(where, ": tensor '", name, "' is listed but missing");
        if (t->dtype != "F32") fail(where, ": tensor '", name, "' has dtype ", t->dtype, "; expected F32");
        NamedTensor nt{name, t->shape, std::vector<float>(static_cast<size_t>(t->numel()))};
        if (t->size > 0) std::memcpy(nt.values.data(), t->data, t->size);
        out.tensors.push_back(std::move(nt));
    }
    for (const SafetensorsTensor& t : file.tensors())
        if (!listed.count(t.name)) fail(where, ": unexpected tensor '", t.name, "' (not listed in the metadata)");
    out.identity = learned_identity(out.tensors);
    const std::string recorded = json_string(meta, "learned_identity", mwhere);
    if (recorded != out.identity)
        fail(where, ": learned identity recorded as ", recorded, " but the tensors hash to ", out.identity,
             " (the file was altered)");
    return out;
}

LearnedFile load_learned(const fs::path& path, const ParamList& params, const std::string* expected_identity) {
    LearnedFile file = read_learned(path);
    if (expected_identity != nullptr && *expected_identity != file.identity)
        fail(path.string(), ": learned identity is ", file.identity, "; expected ", *expected_identity);
    restore_params(file.tensors, params, path.string());
    return file;
}

}  // namespace ppolab

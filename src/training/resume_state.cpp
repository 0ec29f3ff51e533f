#include "training/resume_state.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <set>

#include "model/safetensors.h"
#include "training/identity.h"
#include "util/error.h"
#include "util/gzip.h"
#include "util/sha256.h"

namespace ppolab {

static constexpr const char* kMetadataKey = "ppolab_resume_state";
static constexpr const char* kFormat = "ppolab-resume-state";

// ------------------------------------------------------------ JSON helpers

static std::string short_dump(const json& v) {
    std::string s = v.dump();
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

std::string json_first_difference(const json& a, const json& b, const std::string& path) {
    const std::string at = path.empty() ? "(top level)" : path;
    if (a.is_number() && b.is_number()) {
        if (a.is_number_float() || b.is_number_float()) {
            if (!(a.is_number_float() && b.is_number_float()))
                return at + ": " + short_dump(a) + " vs " + short_dump(b) + " (integer vs floating point)";
            double x = a.get<double>(), y = b.get<double>();
            if (std::bit_cast<uint64_t>(x) != std::bit_cast<uint64_t>(y))
                return at + ": " + short_dump(a) + " vs " + short_dump(b);
            return "";
        }
        // Both integers (signed or unsigned storage): compare values.
        bool neg_a = a.is_number_integer() && !a.is_number_unsigned() && a.get<int64_t>() < 0;
        bool neg_b = b.is_number_integer() && !b.is_number_unsigned() && b.get<int64_t>() < 0;
        bool equal =
            neg_a == neg_b && (neg_a ? a.get<int64_t>() == b.get<int64_t>() : a.get<uint64_t>() == b.get<uint64_t>());
        return equal ? "" : at + ": " + short_dump(a) + " vs " + short_dump(b);
    }
    if (a.type() != b.type()) return at + ": " + short_dump(a) + " vs " + short_dump(b);
    if (a.is_object()) {
        std::set<std::string> keys;
        for (auto& [k, v] : a.items()) keys.insert(k);
        for (auto& [k, v] : b.items()) keys.insert(k);
        for (const std::string& k : keys) {
            const std::string sub = path.empty() ? k : path + "." + k;
            if (!a.contains(k)) return sub + ": absent vs " + short_dump(b[k]);
            if (!b.contains(k)) return sub + ": " + short_dump(a[k]) + " vs absent";
            std::string d = json_first_difference(a[k], b[k], sub);
            if (!d.empty()) return d;
        }
        return "";
    }
    if (a.is_array()) {
        if (a.size() != b.size())
            return at + ": " + std::to_string(a.size()) + " elements vs " + std::to_string(b.size());
        for (size_t i = 0; i < a.size(); ++i) {
            std::string d = json_first_difference(a[i], b[i], path + "[" + std::to_string(i) + "]");
            if (!d.empty()) return d;
        }
        return "";
    }
    return a == b ? "" : at + ": " + short_dump(a) + " vs " + short_dump(b);
}

void check_identity(const json& recorded, const json& expected, const std::string& where) {
    // The arithmetic first (engine.numerics, kernels/numerics.h): a change of
    // mode is named as such, not as the config hash it also changes.
    const json::json_pointer mode("/config/numerics");
    if (recorded.contains(mode) && expected.contains(mode) && recorded.at(mode) != expected.at(mode))
        fail(where, ": resume identity differs (state vs this run) at identity.config.numerics: ",
             short_dump(recorded.at(mode)), " vs ", short_dump(expected.at(mode)),
             " (engine.numerics: a stage resumes in the arithmetic it started in)");
    std::string d = json_first_difference(recorded, expected, "identity");
    if (!d.empty()) fail(where, ": resume identity differs (state vs this run) at ", d);
}

// Non-finite numbers cannot be written as JSON: refuse them rather than
// silently turning them into null.
static void check_finite_json(const json& v, const std::string& path) {
    if (v.is_number_float() && !std::isfinite(v.get<double>()))
        fail("resume state: ", path, " is ", v.get<double>(), "; only finite numbers can be saved");
    if (v.is_object())
        for (auto& [k, x] : v.items()) check_finite_json(x, path + "." + k);
    if (v.is_array())
        for (size_t i = 0; i < v.size(); ++i) check_finite_json(v[i], path + "[" + std::to_string(i) + "]");
}

static void check_key(const std::string& key, const char* what) {
    if (key.empty() || key.find('/') != std::string::npos)
        fail("resume state: ", what, " name '", key, "' must be non-empty and contain no '/'");
}

static std::string_view bytes_of(const NamedTensor& t) {
    return {reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float)};
}

static void check_tensor_list(const std::vector<NamedTensor>& ts, const std::string& what) {
    std::set<std::string> names;
    for (const NamedTensor& t : ts) {
        if (t.name.empty()) fail("resume state: ", what, " has a tensor with an empty name");
        if (!names.insert(t.name).second) fail("resume state: ", what, " lists tensor '", t.name, "' twice");
        for (int64_t d : t.shape)
            if (d < 0) fail("resume state: ", what, " tensor '", t.name, "' has a negative dimension");
        if (static_cast<int64_t>(t.values.size()) != t.numel())
            fail("resume state: ", what, " tensor '", t.name, "' holds ", t.values.size(), " values for shape ",
                 shape_string(t.shape));
    }
}

static json names_of(const std::vector<NamedTensor>& ts) {
    json out = json::array();
    for (const NamedTensor& t : ts) out.push_back(t.name);
    return out;
}

// ------------------------------------------------------------ serialise

std::string serialize_resume_state(const ResumeState& s) {
    if (!s.identity.is_object()) fail("resume state: identity must be a JSON object");
    if (!s.extra.is_object()) fail("resume state: extra must be a JSON object");
    check_finite_json(s.identity, "identity");
    check_finite_json(s.extra, "extra");
    json meta = {{"format", kFormat},
                 {"version", kResumeStateVersion},
                 {"identity", s.identity},
                 {"learned", json::object()},
                 {"optimizers", json::object()},
                 {"schedulers", json::object()},
                 {"rngs", json::object()},
                 {"extra", s.extra}};
    std::vector<TensorToWrite> tensors;
    for (const auto& [group, ts] : s.learned) {
        check_key(group, "learned group");
        check_tensor_list(ts, "learned group '" + group + "'");
        meta["learned"][group] = {{"tensors", names_of(ts)}, {"identity", learned_identity(ts)}};
        for (const NamedTensor& t : ts)
            tensors.push_back({"learned/" + group + "/" + t.name, "F32", t.shape, bytes_of(t)});
    }
    for (const auto& [name, opt] : s.optimizers) {
        check_key(name, "optimiser");
        const std::string what = "optimiser '" + name + "'";
        check_tensor_list(opt.exp_avg, what + " exp_avg");
        check_tensor_list(opt.exp_avg_sq, what + " exp_avg_sq");
        if (opt.exp_avg.size() != opt.exp_avg_sq.size())
            fail("resume state: ", what, " has ", opt.exp_avg.size(), " first moments but ", opt.exp_avg_sq.size(),
                 " second moments");
        for (size_t i = 0; i < opt.exp_avg.size(); ++i)
            if (opt.exp_avg[i].name != opt.exp_avg_sq[i].name || opt.exp_avg[i].shape != opt.exp_avg_sq[i].shape)
                fail("resume state: ", what, " moments disagree on tensor ", i, " ('", opt.exp_avg[i].name, "' ",
                     shape_string(opt.exp_avg[i].shape), " vs '", opt.exp_avg_sq[i].name, "' ",
                     shape_string(opt.exp_avg_sq[i].shape), ")");
        if (opt.step < 0) fail("resume state: ", what, " step must be >= 0, got ", opt.step);
        meta["optimizers"][name] = {{"step", opt.step},
                                    {"config", opt.config.to_json()},
                                    {"params", names_of(opt.exp_avg)},
                                    {"exp_avg_identity", learned_identity(opt.exp_avg)},
                                    {"exp_avg_sq_identity", learned_identity(opt.exp_avg_sq)}};
        for (const NamedTensor& t : opt.exp_avg)
            tensors.push_back({"adamw/" + name + "/exp_avg/" + t.name, "F32", t.shape, bytes_of(t)});
        for (const NamedTensor& t : opt.exp_avg_sq)
            tensors.push_back({"adamw/" + name + "/exp_avg_sq/" + t.name, "F32", t.shape, bytes_of(t)});
    }
    for (const auto& [name, sch] : s.schedulers) {
        check_key(name, "scheduler");
        if (sch.next_step < 0) fail("resume state: scheduler '", name, "' next_step must be >= 0");
        meta["schedulers"][name] = {{"schedule", sch.schedule.to_json()},
                                    {"next_step", sch.next_step},
                                    {"next_lr", sch.schedule.at(sch.next_step)}};
    }
    for (const auto& [name, rng] : s.rngs) {
        check_key(name, "RNG");
        meta["rngs"][name] = {{"seed", rng.seed()}, {"stream", rng.stream()}, {"counter", rng.counter()}};
    }
    return serialize_safetensors(tensors, {{kMetadataKey, meta.dump()}});
}

// ------------------------------------------------------------ parse

namespace {

struct Reader {
    const SafetensorsFile& file;
    const std::string& where;
    std::set<std::string> used;

    NamedTensor tensor(const std::string& stored, const std::string& name, const std::string& what) {
        const SafetensorsTensor* t = file.find(stored);
        if (t == nullptr) fail(where, ": tensor '", stored, "' of ", what, " is missing");
        if (t->dtype != "F32") fail(where, ": tensor '", stored, "' has dtype ", t->dtype, "; expected F32");
        used.insert(stored);
        NamedTensor out{name, t->shape, std::vector<float>(static_cast<size_t>(t->numel()))};
        PPOLAB_ASSERT(t->size == out.values.size() * sizeof(float));
        if (t->size > 0) std::memcpy(out.values.data(), t->data, t->size);
        return out;
    }
};

const json& object_field(const json& obj, const char* key, const std::string& where) {
    const json& v = json_field(obj, key, where);
    if (!v.is_object()) fail(where, ": field '", key, "' must be an object, got ", v.type_name());
    return v;
}

std::vector<std::string> string_list(const json& obj, const char* key, const std::string& where) {
    const json& v = json_field(obj, key, where);
    if (!v.is_array()) fail(where, ": field '", key, "' must be an array of names, got ", v.type_name());
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (const json& x : v) {
        if (!x.is_string() || x.get<std::string>().empty())
            fail(where, ": field '", key, "' must hold non-empty strings, got ", short_dump(x));
        if (!seen.insert(x.get<std::string>()).second)
            fail(where, ": field '", key, "' lists '", x.get<std::string>(), "' twice");
        out.push_back(x.get<std::string>());
    }
    return out;
}

uint64_t unsigned_field(const json& obj, const char* key, const std::string& where) {
    const json& v = json_field(obj, key, where);
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    fail(where, ": field '", key, "' must be a non-negative integer, got ", short_dump(v));
}

void only_keys(const json& obj, const std::set<std::string>& keys, const std::string& where) {
    for (auto& [k, v] : obj.items())
        if (!keys.count(k)) fail(where, ": unexpected field '", k, "'");
    for (const std::string& k : keys)
        if (!obj.contains(k)) fail(where, ": missing field '", k, "'");
}

void check_recorded(const std::string& recorded, const std::string& actual, const std::string& what,
                    const std::string& where) {
    if (recorded != actual)
        fail(where, ": ", what, " identity recorded as ", recorded, " but the stored tensors hash to ", actual,
             " (the file was altered)");
}

}  // namespace

ResumeState parse_resume_state(std::string bytes, const std::string& where) {
    SafetensorsFile file = SafetensorsFile::from_bytes(std::move(bytes), where);
    auto it = file.metadata().find(kMetadataKey);
    if (it == file.metadata().end())
        fail(where, ": not a ppolab resume state (no '", kMetadataKey, "' metadata entry)");
    const std::string mwhere = where + " (metadata)";
    json meta = parse_json(it->second, mwhere);
    if (!meta.is_object()) fail(mwhere, ": expected a JSON object, got ", meta.type_name());
    only_keys(meta, {"format", "version", "identity", "learned", "optimizers", "schedulers", "rngs", "extra"}, mwhere);
    if (json_string(meta, "format", mwhere) != kFormat)
        fail(mwhere, ": format is '", meta["format"].get<std::string>(), "'; expected '", kFormat, "'");
    const int64_t version = json_int(meta, "version", mwhere);
    if (version != kResumeStateVersion)
        fail(mwhere, ": version ", version, " is not supported; this build reads version ", kResumeStateVersion);

    ResumeState s;
    s.identity = object_field(meta, "identity", mwhere);
    s.extra = object_field(meta, "extra", mwhere);
    Reader reader{file, where, {}};

    for (auto& [group, entry] : object_field(meta, "learned", mwhere).items()) {
        const std::string w = mwhere + ": learned." + group;
        check_key(group, "learned group");
        only_keys(entry, {"tensors", "identity"}, w);
        std::vector<NamedTensor> ts;
        for (const std::string& name : string_list(entry, "tensors", w))
            ts.push_back(reader.tensor("learned/" + group + "/" + name, name, "learned group '" + group + "'"));
        check_recorded(json_string(entry, "identity", w), learned_identity(ts), "learned group '" + group + "'", where);
        s.learned[group] = std::move(ts);
    }
    for (auto& [name, entry] : object_field(meta, "optimizers", mwhere).items()) {
        const std::string w = mwhere + ": optimizers." + name;
        check_key(name, "optimiser");
        only_keys(entry, {"step", "config", "params", "exp_avg_identity", "exp_avg_sq_identity"}, w);
        AdamWState opt;
        opt.step = json_int(entry, "step", w);
        if (opt.step < 0) fail(w, ": field 'step' must be >= 0, got ", opt.step);
        opt.config = AdamWConfig::from_json(object_field(entry, "config", w), w + ".config");
        for (const std::string& p : string_list(entry, "params", w)) {
            opt.exp_avg.push_back(reader.tensor("adamw/" + name + "/exp_avg/" + p, p, "optimiser '" + name + "'"));
            opt.exp_avg_sq.push_back(
                reader.tensor("adamw/" + name + "/exp_avg_sq/" + p, p, "optimiser '" + name + "'"));
            if (opt.exp_avg.back().shape != opt.exp_avg_sq.back().shape)
                fail(where, ": optimiser '", name, "' moments of '", p, "' have shapes ",
                     shape_string(opt.exp_avg.back().shape), " and ", shape_string(opt.exp_avg_sq.back().shape));
        }
        check_recorded(json_string(entry, "exp_avg_identity", w), learned_identity(opt.exp_avg),
                       "optimiser '" + name + "' exp_avg", where);
        check_recorded(json_string(entry, "exp_avg_sq_identity", w), learned_identity(opt.exp_avg_sq),
                       "optimiser '" + name + "' exp_avg_sq", where);
        s.optimizers[name] = std::move(opt);
    }
    for (auto& [name, entry] : object_field(meta, "schedulers", mwhere).items()) {
        const std::string w = mwhere + ": schedulers." + name;
        check_key(name, "scheduler");
        only_keys(entry, {"schedule", "next_step", "next_lr"}, w);
        SchedulerState sch;
        sch.schedule = Schedule::from_json(object_field(entry, "schedule", w), w + ".schedule");
        sch.next_step = json_int(entry, "next_step", w);
        if (sch.next_step < 0) fail(w, ": field 'next_step' must be >= 0, got ", sch.next_step);
        const double recorded = json_number(entry, "next_lr", w), expected = sch.schedule.at(sch.next_step);
        if (std::bit_cast<uint64_t>(recorded) != std::bit_cast<uint64_t>(expected))
            fail(w, ": next_lr is ", recorded, " but the schedule gives ", expected, " at step ", sch.next_step);
        s.schedulers[name] = sch;
    }
    for (auto& [name, entry] : object_field(meta, "rngs", mwhere).items()) {
        const std::string w = mwhere + ": rngs." + name;
        check_key(name, "RNG");
        only_keys(entry, {"seed", "stream", "counter"}, w);
        Philox rng(unsigned_field(entry, "seed", w), unsigned_field(entry, "stream", w));
        rng.set_counter(unsigned_field(entry, "counter", w));
        s.rngs.emplace(name, rng);
    }
    for (const SafetensorsTensor& t : file.tensors())
        if (!reader.used.count(t.name))
            fail(where, ": unexpected tensor '", t.name, "' (not described by the metadata)");
    return s;
}

// ------------------------------------------------------------ files

json StateFileInfo::to_json() const {
    return json{{"raw_bytes", raw_bytes},
                {"file_bytes", file_bytes},
                {"file_sha256", file_sha256},
                {"content_sha256", content_sha256},
                {"compression", "gzip level 1"}};
}

StateFileInfo save_resume_state(const fs::path& path, const ResumeState& state, Overwrite mode) {
    if (mode == Overwrite::refuse && fs::exists(path))
        fail("refusing to overwrite existing resume state '", path.string(), "'");
    const std::string raw = serialize_resume_state(state);
    const std::string packed = gzip_compress(raw, 1);
    write_file_atomic(path, packed, mode);
    return StateFileInfo{raw.size(), packed.size(), sha256_hex(packed), sha256_hex(raw)};
}

// The safetensors bytes behind `z`, inflated against the size their own
// header promises: the 8-byte length, then the header, then exactly the
// data it describes. Nothing beyond the promised size is ever inflated or
// held; `compressed_bytes` (the gzip size) bounds what the stream can
// really hold, so a small file cannot make us reserve a large promise.
static std::string inflate_state(GzipInflater& z, const std::string& where, uint64_t compressed_bytes) {
    const uint64_t limit = input_limit_bytes(InputKind::state_inflated);
    // Deflate inflates at most 1032 to 1 (a 258-byte match in 2 bits).
    const uint64_t can_hold = compressed_bytes * 1032 + 258;
    char len8[8];
    z.read_exact(len8, 8, "the 8-byte safetensors header length");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<uint8_t>(len8[i]);
    if (header_len < 2)
        fail(where, ": safetensors header length ", header_len,
             " is too small for a JSON object (not a resume state; a file of zeros?)");
    if (header_len > kSafetensorsMaxHeaderBytes)
        fail(where, ": safetensors header length ", header_len, " exceeds the format's limit of ",
             kSafetensorsMaxHeaderBytes, " bytes (corrupt or hostile file)");
    auto check_promise = [&](uint64_t total, const char* what) {
        if (total > limit)
            fail(where, ": ", what, " ", total, " bytes, over ", input_limit_text(InputKind::state_inflated));
        if (total > can_hold)
            fail(where, ": ", what, " ", total, " bytes, but ", compressed_bytes, " bytes of gzip can hold at most ",
                 can_hold, " (truncated or hostile file)");
    };
    check_promise(8 + header_len, "its safetensors header length promises at least");
    std::string raw(len8, 8);
    raw.resize(static_cast<size_t>(8 + header_len));
    z.read_exact(raw.data() + 8, static_cast<size_t>(header_len), "the safetensors header");
    const uint64_t data_size = safetensors_data_size(std::string_view(raw).substr(8), where);
    const uint64_t total = data_size > UINT64_MAX - 8 - header_len ? UINT64_MAX : 8 + header_len + data_size;
    check_promise(total, "its safetensors header promises");
    raw.resize(static_cast<size_t>(total));  // the promise, and no more
    z.read_exact(raw.data() + 8 + header_len, static_cast<size_t>(data_size), "the tensor data its header promises");
    if (!z.at_end())
        fail(where, ": the gzip stream holds more than the ", total,
             " bytes its safetensors header promises (refused without inflating the rest: a damaged or hostile file)");
    return raw;
}

std::string inflate_resume_state(std::string_view compressed, const std::string& where) {
    size_t offset = 0;
    GzipInflater z(
        [&](char* buffer, size_t capacity) {
            const size_t n = std::min(capacity, compressed.size() - offset);
            std::memcpy(buffer, compressed.data() + offset, n);
            offset += n;
            return n;
        },
        where);
    return inflate_state(z, where, compressed.size());
}

ResumeState load_resume_state(const fs::path& path, const json* expected_identity) {
    const std::string where = path.string();
    InputFile file(path, InputKind::state);  // a regular file within the compressed limit, before any read
    GzipInflater z([&](char* buffer, size_t capacity) { return file.read_some(buffer, capacity); }, where);
    std::string raw = inflate_state(z, where, file.size());
    ResumeState s = parse_resume_state(std::move(raw), where);
    if (expected_identity != nullptr) check_identity(s.identity, *expected_identity, where);
    return s;
}

// ------------------------------------------------------------ comparison

static std::string double_difference(double a, double b, const std::string& what) {
    if (std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b)) return "";
    std::ostringstream out;
    out.precision(17);
    out << what << ": " << a << " vs " << b;
    return out.str();
}

template <typename Map, typename Fn>
static std::string compare_maps(const Map& a, const Map& b, const std::string& what, Fn&& fn) {
    for (const auto& [k, v] : a)
        if (!b.count(k)) return what + " '" + k + "': present vs absent";
    for (const auto& [k, v] : b)
        if (!a.count(k)) return what + " '" + k + "': absent vs present";
    for (const auto& [k, v] : a) {
        std::string d = fn(k, v, b.at(k));
        if (!d.empty()) return what + " '" + k + "': " + d;
    }
    return "";
}

std::string states_first_difference(const ResumeState& a, const ResumeState& b) {
    std::string d = json_first_difference(a.identity, b.identity, "identity");
    if (!d.empty()) return d;
    d = compare_maps(a.learned, b.learned, "learned group",
                     [](auto&, auto& x, auto& y) { return first_tensor_difference(x, y); });
    if (!d.empty()) return d;
    d = compare_maps(a.optimizers, b.optimizers, "optimiser", [](auto&, const AdamWState& x, const AdamWState& y) {
        if (x.step != y.step) return "step " + std::to_string(x.step) + " vs " + std::to_string(y.step);
        std::string e = json_first_difference(x.config.to_json(), y.config.to_json(), "config");
        if (!e.empty()) return e;
        e = first_tensor_difference(x.exp_avg, y.exp_avg);
        if (!e.empty()) return "exp_avg " + e;
        e = first_tensor_difference(x.exp_avg_sq, y.exp_avg_sq);
        return e.empty() ? e : "exp_avg_sq " + e;
    });
    if (!d.empty()) return d;
    d = compare_maps(
        a.schedulers, b.schedulers, "scheduler", [](auto&, const SchedulerState& x, const SchedulerState& y) {
            if (x.next_step != y.next_step)
                return "next_step " + std::to_string(x.next_step) + " vs " + std::to_string(y.next_step);
            if (x.schedule.total != y.schedule.total)
                return "total " + std::to_string(x.schedule.total) + " vs " + std::to_string(y.schedule.total);
            std::string e = double_difference(x.schedule.peak, y.schedule.peak, "peak");
            if (e.empty()) e = double_difference(x.schedule.warmup_ratio, y.schedule.warmup_ratio, "warmup_ratio");
            if (e.empty()) e = double_difference(x.schedule.min_ratio, y.schedule.min_ratio, "min_ratio");
            return e;
        });
    if (!d.empty()) return d;
    d = compare_maps(a.rngs, b.rngs, "RNG", [](auto&, const Philox& x, const Philox& y) {
        if (x == y) return std::string();
        return "(seed, stream, counter) (" + std::to_string(x.seed()) + ", " + std::to_string(x.stream()) + ", " +
               std::to_string(x.counter()) + ") vs (" + std::to_string(y.seed()) + ", " + std::to_string(y.stream()) +
               ", " + std::to_string(y.counter()) + ")";
    });
    if (!d.empty()) return d;
    return json_first_difference(a.extra, b.extra, "extra");
}

std::string state_content_sha256(const ResumeState& state) { return sha256_hex(serialize_resume_state(state)); }

}  // namespace ppolab

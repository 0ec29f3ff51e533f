#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

namespace ppolab {

// The safetensors library refuses headers above 100 MB; so do we (a bigger
// length is a corrupt or hostile file, not a model).
static constexpr uint64_t kMaxHeaderBytes = kSafetensorsMaxHeaderBytes;

size_t safetensors_dtype_size(std::string_view dtype) {
    static const std::map<std::string_view, size_t> sizes = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
        {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
    auto it = sizes.find(dtype);
    return it == sizes.end() ? 0 : it->second;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// ---------------------------------------------------------------- storage

struct SafetensorsFile::Storage {
    const uint8_t* data = nullptr;
    size_t size = 0;
    std::string owned;    // from_bytes
    void* map = nullptr;  // open: the whole file, read-only
    size_t map_size = 0;

    Storage() = default;
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    ~Storage() {
        if (map) ::munmap(map, map_size);
    }
};

SafetensorsFile SafetensorsFile::open(const fs::path& path) {
    auto storage = std::make_shared<Storage>();
    int fd = open_regular_file(path, "safetensors file");
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        fail("cannot inspect safetensors file '", path.string(), "': ", std::strerror(err));
    }
    size_t size = static_cast<size_t>(st.st_size);
    if (size > 0) {
        // MAP_POPULATE maps the page-cache pages in one go: no per-page fault
        // later when the loader copies the tensors out.
        void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (map == MAP_FAILED) {
            int err = errno;
            ::close(fd);
            fail("cannot map safetensors file '", path.string(), "': ", std::strerror(err));
        }
        storage->map = map;
        storage->map_size = size;
        storage->data = static_cast<const uint8_t*>(map);
        storage->size = size;
    }
    ::close(fd);
    SafetensorsFile file;
    file.storage_ = std::move(storage);
    file.where_ = path.string();
    file.parse();
    return file;
}

SafetensorsFile SafetensorsFile::from_bytes(std::string bytes, std::string where) {
    auto storage = std::make_shared<Storage>();
    storage->owned = std::move(bytes);
    storage->data = reinterpret_cast<const uint8_t*>(storage->owned.data());
    storage->size = storage->owned.size();
    SafetensorsFile file;
    file.storage_ = std::move(storage);
    file.where_ = std::move(where);
    file.parse();
    return file;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

// ---------------------------------------------------------------- parsing

// A non-negative integer JSON value, or Error.
static uint64_t header_uint(const json& v, const std::string& where, const std::string& name, const char* field) {
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    fail(where, ": tensor '", name, "': ", field, " must hold non-negative integers, got ", v.dump());
}

// The shape as the header writes it: every dimension has passed header_uint,
// so each is an exact JSON integer (t.shape clamps dimensions beyond 2^62).
static std::string header_shape_text(const json& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + shape[i].dump();
    return s + "]";
}

// Parse with a callback that refuses nesting deeper than the format needs
// (root → tensor → shape), a repeated tensor name and a repeated field of a
// tensor entry or of __metadata__ (JSON would keep the last one silently).
static json parse_header_json(std::string_view text, const std::string& where) {
    json header;
    std::set<std::string> seen, fields;
    std::string entry;
    json::parser_callback_t guard = [&](int depth, json::parse_event_t event, json& parsed) {
        if (depth > 3) fail(where, ": header JSON nests deeper than a safetensors header can");
        if (event == json::parse_event_t::object_start && depth == 1) fields.clear();
        if (event == json::parse_event_t::key && depth == 1) {
            const std::string& key = parsed.get_ref<const std::string&>();
            if (!seen.insert(key).second) fail(where, ": tensor '", key, "' appears twice in the header");
            entry = key;
        }
        if (event == json::parse_event_t::key && depth == 2) {
            const std::string& key = parsed.get_ref<const std::string&>();
            if (!fields.insert(key).second)
                fail(where, ": field '", key, "' appears twice in header entry '", entry, "'");
        }
        return true;
    };
    try {
        header = json::parse(text.begin(), text.end(), guard);
    } catch (const json::exception& e) {
        fail(where, ": header is not valid JSON: ", e.what());
    }
    return header;
}

uint64_t safetensors_data_size(std::string_view header_json, const std::string& where) {
    const json header = parse_header_json(header_json, where);
    uint64_t size = 0;
    if (!header.is_object()) return 0;
    for (auto& [name, entry] : header.items()) {
        if (name == "__metadata__" || !entry.is_object() || !entry.contains("data_offsets")) continue;
        const json& offsets = entry["data_offsets"];
        if (!offsets.is_array() || offsets.size() != 2 || !offsets[1].is_number_unsigned()) continue;
        size = std::max(size, offsets[1].get<uint64_t>());
    }
    return size;
}

void SafetensorsFile::parse() {
    const uint8_t* bytes = storage_->data;
    const size_t file_size = storage_->size;
    if (file_size < 8)
        fail(where_, ": file is ", file_size,
             " bytes; a safetensors file starts with an 8-byte header length (truncated file?)");
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = header_len << 8 | bytes[i];
    if (header_len > kMaxHeaderBytes)
        fail(where_, ": header length ", header_len, " exceeds the limit of ", kMaxHeaderBytes,
             " bytes (corrupt file?)");
    if (header_len > file_size - 8)
        fail(where_, ": header length ", header_len, " runs past the end of the file (", file_size,
             " bytes; truncated file?)");
    if (header_len < 2) fail(where_, ": header length ", header_len, " is too small for a JSON object");
    std::string_view text(reinterpret_cast<const char*>(bytes + 8), header_len);
    if (text.front() != '{') fail(where_, ": header does not start with '{' (not a safetensors file?)");

    json header = parse_header_json(text, where_);
    if (!header.is_object()) fail(where_, ": header must be a JSON object, got ", header.type_name());

    const uint64_t data_size = file_size - 8 - header_len;
    const uint8_t* data = bytes + 8 + header_len;
    struct Span {
        uint64_t begin, end;
        size_t index;
    };
    std::vector<Span> spans;
    std::vector<SafetensorsTensor> tensors;
    for (auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            if (!entry.is_object())
                fail(where_, ": __metadata__ must be an object of strings, got ", entry.type_name());
            for (auto& [key, value] : entry.items()) {
                if (!value.is_string())
                    fail(where_, ": __metadata__ field '", key, "' must be a string, got ", value.type_name());
                metadata_[key] = value.get<std::string>();
            }
            continue;
        }
        if (!entry.is_object()) fail(where_, ": tensor '", name, "' must be an object, got ", entry.type_name());
        if (!entry.contains("dtype") || !entry["dtype"].is_string())
            fail(where_, ": tensor '", name, "': field 'dtype' must be a string");
        if (!entry.contains("shape") || !entry["shape"].is_array())
            fail(where_, ": tensor '", name, "': field 'shape' must be an array");
        if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
            fail(where_, ": tensor '", name, "': field 'data_offsets' must be an array [begin, end]");
        SafetensorsTensor t;
        t.name = name;
        t.dtype = entry["dtype"].get<std::string>();
        size_t elem = safetensors_dtype_size(t.dtype);
        if (elem == 0) fail(where_, ": tensor '", name, "' has unknown dtype '", t.dtype, "'");
        // Bytes the shape needs, with overflow caught (2^62 is beyond any file).
        constexpr uint64_t kLimit = uint64_t(1) << 62;
        uint64_t need = elem;
        bool too_big = false;
        for (const json& d : entry["shape"]) {
            uint64_t dim = header_uint(d, where_, name, "shape");
            if (dim > kLimit) too_big = true;
            t.shape.push_back(static_cast<int64_t>(std::min<uint64_t>(dim, kLimit)));
            if (dim != 0 && need > kLimit / dim) too_big = true;
            need = too_big ? need : need * dim;
        }
        uint64_t begin = header_uint(entry["data_offsets"][0], where_, name, "data_offsets");
        uint64_t end = header_uint(entry["data_offsets"][1], where_, name, "data_offsets");
        if (begin > end)
            fail(where_, ": tensor '", name, "': data_offsets [", begin, ", ", end, "] end before they begin");
        if (end > data_size)
            fail(where_, ": tensor '", name, "': data_offsets [", begin, ", ", end, "] run past the data region (",
                 data_size, " bytes; truncated file?)");
        if (too_big || need != end - begin)
            fail(where_, ": tensor '", name, "' has shape ", header_shape_text(entry["shape"]), " of ", t.dtype, " (",
                 too_big ? std::string("more than the file holds") : std::to_string(need) + " bytes",
                 ") but its data_offsets [", begin, ", ", end, "] hold ", end - begin, " bytes");
        t.data = data + begin;
        t.size = static_cast<size_t>(end - begin);
        spans.push_back({begin, end, tensors.size()});
        tensors.push_back(std::move(t));
    }
    std::sort(spans.begin(), spans.end(),
              [](const Span& a, const Span& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
    uint64_t pos = 0;
    const std::string* prev = nullptr;
    for (const Span& s : spans) {
        const std::string& name = tensors[s.index].name;
        if (s.begin < pos)
            fail(where_, ": tensor '", name, "' (data_offsets [", s.begin, ", ", s.end, "]) overlaps tensor '", *prev,
                 "' (which ends at ", pos, ")");
        if (s.begin > pos)
            fail(where_, ": gap of ", s.begin - pos, " bytes before tensor '", name, "' (data_offsets [", s.begin, ", ",
                 s.end, "]); tensors must be packed");
        pos = s.end;
        prev = &name;
    }
    if (pos != data_size)
        fail(where_, ": ", data_size - pos, " bytes after the last tensor (data region ", data_size,
             " bytes, tensors end at ", pos, ")");
    tensors_.reserve(tensors.size());
    for (const Span& s : spans) {
        index_[tensors[s.index].name] = tensors_.size();
        tensors_.push_back(std::move(tensors[s.index]));
    }
}

// ---------------------------------------------------------------- conversion

static void check_float_dtype(const SafetensorsTensor& t, std::string_view where) {
    if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16")
        fail(where, ": tensor '", t.name, "' has dtype ", t.dtype, "; expected F32, BF16 or F16");
    PPOLAB_ASSERT(t.size == static_cast<size_t>(t.numel()) * safetensors_dtype_size(t.dtype));
}

void tensor_to_f32(const SafetensorsTensor& t, std::string_view where, float* out) {
    check_float_dtype(t, where);
    const size_t n = static_cast<size_t>(t.numel());
    if (n == 0) return;  // empty tensor: out may be null
    if (t.dtype == "F32") {
        std::memcpy(out, t.data, n * 4);
    } else if (t.dtype == "BF16") {
        for (size_t i = 0; i < n; ++i) {
            uint16_t v;
            std::memcpy(&v, t.data + 2 * i, 2);
            out[i] = bf16_to_float(v);
        }
    } else {
        for (size_t i = 0; i < n; ++i) {
            uint16_t v;
            std::memcpy(&v, t.data + 2 * i, 2);
            out[i] = f16_to_float(v);
        }
    }
}

std::vector<float> tensor_to_f32(const SafetensorsTensor& t, std::string_view where) {
    check_float_dtype(t, where);
    std::vector<float> out(static_cast<size_t>(t.numel()));
    tensor_to_f32(t, where, out.data());
    return out;
}

void tensor_to_bf16(const SafetensorsTensor& t, std::string_view where, bf16* out) {
    check_float_dtype(t, where);
    const size_t n = static_cast<size_t>(t.numel());
    if (n == 0) return;  // empty tensor: out may be null
    if (t.dtype == "BF16") {
        std::memcpy(out, t.data, n * 2);
    } else if (t.dtype == "F32") {
        for (size_t i = 0; i < n; ++i) {
            float v;
            std::memcpy(&v, t.data + 4 * i, 4);
            out[i] = float_to_bf16(v);
        }
    } else {
        for (size_t i = 0; i < n; ++i) {
            uint16_t v;
            std::memcpy(&v, t.data + 2 * i, 2);
            out[i] = float_to_bf16(f16_to_float(v));  // exact: F16 fits in F32
        }
    }
}

// ---------------------------------------------------------------- writing

// The header (length prefix + padded JSON); `order` receives the tensors in data order.
static std::string safetensors_header(const std::vector<TensorToWrite>& tensors,
                                      const std::map<std::string, std::string>& metadata,
                                      std::vector<const TensorToWrite*>& order) {
    std::map<std::string_view, const TensorToWrite*> by_name;
    for (const TensorToWrite& t : tensors) {
        if (t.name.empty() || t.name == "__metadata__") fail("safetensors: invalid tensor name '", t.name, "'");
        if (!by_name.emplace(t.name, &t).second) fail("safetensors: tensor '", t.name, "' given twice");
        size_t elem = safetensors_dtype_size(t.dtype);
        if (elem == 0) fail("safetensors: tensor '", t.name, "' has unknown dtype '", t.dtype, "'");
        uint64_t n = 1;
        for (int64_t d : t.shape) {
            if (d < 0)
                fail("safetensors: tensor '", t.name, "' has negative dimension in shape ", shape_to_string(t.shape));
            n *= static_cast<uint64_t>(d);
        }
        if (n * elem != t.bytes.size())
            fail("safetensors: tensor '", t.name, "' has shape ", shape_to_string(t.shape), " of ", t.dtype, " (",
                 n * elem, " bytes) but ", t.bytes.size(), " bytes were given");
    }
    json header = json::object();
    uint64_t offset = 0;
    for (auto& [name, t] : by_name) {  // sorted by name: the data order
        header[std::string(name)] = {
            {"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {offset, offset + t->bytes.size()}}};
        offset += t->bytes.size();
        order.push_back(t);
    }
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    uint64_t len = text.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(len >> (8 * i) & 0xff);
    return out + text;
}

std::string serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
    std::vector<const TensorToWrite*> order;
    std::string out = safetensors_header(tensors, metadata, order);
    size_t total = out.size();
    for (const TensorToWrite* t : order) total += t->bytes.size();
    out.reserve(total);
    for (const TensorToWrite* t : order) out.append(t->bytes);
    return out;
}

void write_safetensors(const fs::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata, Overwrite mode) {
    std::vector<const TensorToWrite*> order;
    std::string header = safetensors_header(tensors, metadata, order);
    std::vector<std::string_view> pieces{header};
    for (const TensorToWrite* t : order) pieces.push_back(t->bytes);
    write_file_atomic(path, pieces, mode);
}

}  // namespace ppolab

#include "model/hf_folder.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <list>
#include <map>
#include <random>
#include <set>

#include "model/safetensors.h"
#include "model/tensor_table.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/sha256.h"

namespace ppolab {

// ---------------------------------------------------------------- loading

namespace {

struct Found {
    const SafetensorsTensor* tensor;
    const std::string* file;  // where(), for errors
};

// A shard name from an index must be a plain file name inside the folder.
void check_shard_name(const std::string& name, const fs::path& index_path) {
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos)
        fail(index_path.string(), ": shard file name '", name, "' must be a plain file name inside the folder");
}

// Shard file names listed by an index (sorted, unique), and its weight_map.
std::map<std::string, std::string> read_index(const fs::path& index_path, std::set<std::string>& shards) {
    json index = read_json_file(index_path);
    const std::string where = index_path.string();
    const json& map = json_field(index, "weight_map", where);
    if (!map.is_object()) fail(where, ": field 'weight_map' must be an object, got ", map.type_name());
    std::map<std::string, std::string> weight_map;
    for (auto& [name, file] : map.items()) {
        if (!file.is_string())
            fail(where, ": weight_map entry '", name, "' must be a file name, got ", file.type_name());
        check_shard_name(file.get<std::string>(), index_path);
        weight_map[name] = file.get<std::string>();
        shards.insert(file.get<std::string>());
    }
    if (weight_map.empty()) fail(where, ": field 'weight_map' is empty");
    return weight_map;
}

// Opens model.safetensors, or the shards of model.safetensors.index.json, and
// maps every tensor name to its tensor (checking the index against the shards).
std::map<std::string, Found> open_weight_files(const fs::path& dir, std::list<SafetensorsFile>& files) {
    std::map<std::string, Found> all;
    const fs::path single = dir / "model.safetensors";
    const fs::path index_path = dir / "model.safetensors.index.json";
    if (fs::exists(single)) {
        files.push_back(SafetensorsFile::open(single));
        for (const SafetensorsTensor& t : files.back().tensors()) all[t.name] = {&t, &files.back().where()};
        return all;
    }
    if (!fs::exists(index_path))
        fail("checkpoint folder '", dir.string(), "' has neither model.safetensors nor model.safetensors.index.json");
    std::set<std::string> shards;
    std::map<std::string, std::string> weight_map = read_index(index_path, shards);
    for (const std::string& shard : shards) {
        files.push_back(SafetensorsFile::open(dir / shard));
        const SafetensorsFile& f = files.back();
        for (const SafetensorsTensor& t : f.tensors()) {
            auto listed = weight_map.find(t.name);
            if (listed == weight_map.end())
                fail(f.where(), ": tensor '", t.name, "' is not listed in ", index_path.string());
            if (listed->second != shard)
                fail(f.where(), ": tensor '", t.name, "' is listed in ", index_path.string(), " under shard '",
                     listed->second, "'");
            all[t.name] = {&t, &f.where()};
        }
    }
    for (auto& [name, shard] : weight_map)
        if (!all.count(name))
            fail(index_path.string(), ": lists tensor '", name, "' in shard '", shard,
                 "' but the shard does not hold it");
    return all;
}

// A view of rows [r0, r1) of a 2-D tensor (for chunked comparisons).
SafetensorsTensor row_slice(const SafetensorsTensor& t, int64_t r0, int64_t r1) {
    const size_t row_bytes = static_cast<size_t>(t.shape[1]) * safetensors_dtype_size(t.dtype);
    SafetensorsTensor s;
    s.name = t.name;
    s.dtype = t.dtype;
    s.shape = {r1 - r0, t.shape[1]};
    s.data = t.data + static_cast<size_t>(r0) * row_bytes;
    s.size = static_cast<size_t>(r1 - r0) * row_bytes;
    return s;
}

// The tied lm_head.weight a file may hold must equal the embedding as loaded.
void check_tied_copy(const SafetensorsTensor& lm_head, const Matrix& embed, const std::string& file) {
    const int64_t cols = embed.cols, chunk = 1024;
    std::vector<bf16> b;
    std::vector<float> f;
    for (int64_t r0 = 0; r0 < embed.rows; r0 += chunk) {
        const int64_t r1 = std::min(embed.rows, r0 + chunk);
        SafetensorsTensor s = row_slice(lm_head, r0, r1);
        const size_t n = static_cast<size_t>((r1 - r0) * cols), at = static_cast<size_t>(r0 * cols);
        bool same;
        if (embed.type == WeightType::bf16) {
            b.resize(n);
            tensor_to_bf16(s, file, b.data());
            same = std::memcmp(b.data(), embed.b.data() + at, n * sizeof(bf16)) == 0;
        } else {
            f.resize(n);
            tensor_to_f32(s, file, f.data());
            same = std::memcmp(f.data(), embed.f.data() + at, n * sizeof(float)) == 0;
        }
        if (!same)
            fail(file,
                 ": config ties the embeddings but tensor 'lm_head.weight' differs from "
                 "'model.embed_tokens.weight' (rows ",
                 r0, "..", r1 - 1, "); set tie_word_embeddings to false to load it as a separate head");
    }
}

// Sizes a fresh vector to n elements with as few page faults as possible:
// on this machine a 4 KiB first-touch fault costs ~11 µs (SPEC §11), ~2.7 s
// for the 1 GB of the 0.5B model. reserve() allocates without touching; one
// madvise(MADV_POPULATE_WRITE) (Linux ≥ 5.14) then maps every page in a
// single call, and MADV_HUGEPAGE asks for 2 MiB pages where the kernel has
// them. Both are hints: on an older kernel resize() faults the pages in.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
template <typename T>
void allocate_once(std::vector<T>& v, size_t n) {
    std::vector<T>().swap(v);
    v.reserve(n);
    const size_t bytes = n * sizeof(T);
    if (bytes >= (size_t(1) << 20)) {
        const uintptr_t page = 4096, p = reinterpret_cast<uintptr_t>(v.data());
        const uintptr_t begin = (p + page - 1) & ~(page - 1), end = (p + bytes) & ~(page - 1);
        if (end > begin) {
            ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
            ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
        }
    }
    v.resize(n);
}

}  // namespace

Qwen2Weights load_checkpoint(const fs::path& dir, WeightType matrices) {
    if (!fs::is_directory(dir)) fail("checkpoint folder '", dir.string(), "' does not exist or is not a folder");
    const fs::path config_path = dir / "config.json";
    Qwen2Weights w;
    w.config = Qwen2Config::from_json(read_json_file(config_path, InputKind::config), config_path.string());
    std::list<SafetensorsFile> files;  // std::list: Found points into elements
    std::map<std::string, Found> all = open_weight_files(dir, files);

    // 1. validate: presence, shape and dtype of every table entry; no extras.
    const std::vector<TensorSpec> table = qwen2_tensor_table(w.config);
    std::vector<const SafetensorsTensor*> source(table.size());
    std::set<std::string_view> expected;
    for (size_t i = 0; i < table.size(); ++i) {
        const TensorSpec& spec = table[i];
        expected.insert(spec.hf_name);
        auto it = all.find(spec.hf_name);
        if (it == all.end())
            fail("checkpoint '", dir.string(), "': tensor '", spec.hf_name, "' is missing (expected shape ",
                 shape_to_string(spec.shape), ")");
        const SafetensorsTensor& t = *it->second.tensor;
        if (t.shape != spec.shape)
            fail(*it->second.file, ": tensor '", spec.hf_name, "' has shape ", shape_to_string(t.shape), "; expected ",
                 shape_to_string(spec.shape));
        if (t.dtype != "BF16" && t.dtype != "F16" && t.dtype != "F32")
            fail(*it->second.file, ": tensor '", spec.hf_name, "' has dtype ", t.dtype, "; expected BF16, F16 or F32");
        source[i] = &t;
    }
    const Found* tied_copy = nullptr;
    for (auto& [name, found] : all) {
        if (expected.count(name)) continue;
        if (name == "lm_head.weight" && w.config.tie_word_embeddings) {
            const std::vector<int64_t> want = {w.config.vocab_size, w.config.hidden_size};
            if (found.tensor->shape != want)
                fail(*found.file, ": tensor 'lm_head.weight' has shape ", shape_to_string(found.tensor->shape),
                     "; expected ", shape_to_string(want));
            if (found.tensor->dtype != "BF16" && found.tensor->dtype != "F16" && found.tensor->dtype != "F32")
                fail(*found.file, ": tensor 'lm_head.weight' has dtype ", found.tensor->dtype,
                     "; expected BF16, F16 or F32");
            tied_copy = &found;
            continue;
        }
        fail(*found.file, ": unexpected tensor '", name, "' (shape ", shape_to_string(found.tensor->shape),
             "); it is not part of the Qwen2 architecture of ", config_path.string());
    }

    // 2. allocate once and convert, tensor by tensor, in one pass.
    w.layers.resize(static_cast<size_t>(w.config.num_hidden_layers));
    for (size_t i = 0; i < table.size(); ++i) {
        const TensorSpec& spec = table[i];
        const SafetensorsTensor& t = *source[i];
        const std::string& file = *all.at(spec.hf_name).file;
        if (Matrix* m = spec.matrix(w)) {
            m->type = matrices;
            m->rows = spec.shape[0];
            m->cols = spec.shape[1];
            if (matrices == WeightType::bf16) {
                allocate_once(m->b, static_cast<size_t>(m->numel()));
                tensor_to_bf16(t, file, m->b.data());
            } else {
                allocate_once(m->f, static_cast<size_t>(m->numel()));
                tensor_to_f32(t, file, m->f.data());
            }
        } else {
            std::vector<float>* v = spec.vector(w);
            v->resize(static_cast<size_t>(spec.numel()));
            tensor_to_f32(t, file, v->data());
        }
    }
    if (tied_copy) check_tied_copy(*tied_copy->tensor, w.embed_tokens, *tied_copy->file);
    return w;
}

// ---------------------------------------------------------------- saving

namespace {

// Tokenizer files to copy: (source, name in the checkpoint).
std::vector<std::pair<fs::path, std::string>> tokenizer_files(const fs::path& source) {
    std::vector<std::pair<fs::path, std::string>> out;
    if (source.empty()) return out;
    fs::path folder;
    if (fs::is_directory(source)) {
        folder = source;
        if (!fs::is_regular_file(source / "tokenizer.json"))
            fail("tokenizer folder '", source.string(), "' has no tokenizer.json");
        out.emplace_back(source / "tokenizer.json", "tokenizer.json");
    } else if (fs::is_regular_file(source)) {
        folder = source.parent_path().empty() ? fs::path(".") : source.parent_path();
        out.emplace_back(source, "tokenizer.json");
    } else {
        fail("tokenizer source '", source.string(), "' is neither a tokenizer.json file nor a folder holding one");
    }
    for (const char* extra : {"tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"})
        if (fs::is_regular_file(folder / extra)) out.emplace_back(folder / extra, extra);
    return out;
}

void fsync_dir(const fs::path& dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

// rename(2) that refuses to replace an existing target (even an empty folder).
void rename_no_replace(const fs::path& from, const fs::path& to) {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return;
    int err = errno;
    if (err == EINVAL || err == ENOSYS) {  // file system without RENAME_NOREPLACE
        if (fs::exists(to)) fail("refusing to overwrite existing folder '", to.string(), "'");
        if (::rename(from.c_str(), to.c_str()) == 0) return;
        err = errno;
    }
    fail("cannot rename '", from.string(), "' to '", to.string(), "': ", std::strerror(err));
}

}  // namespace

void save_checkpoint(const fs::path& dir_in, const Qwen2Weights& w, const fs::path& tokenizer_source,
                     const json& generation_config) {
    const fs::path dir = dir_in.has_filename() ? dir_in : dir_in.parent_path();
    if (fs::exists(dir)) fail("refusing to overwrite existing checkpoint folder '", dir.string(), "'");
    if (!generation_config.is_null() && !generation_config.is_object())
        fail("save_checkpoint '", dir.string(), "': generation_config must be a JSON object, got ",
             generation_config.type_name());
    const auto tokenizer = tokenizer_files(tokenizer_source);

    // Every field checked against the table before anything is written;
    // FP32 fields rounded to BF16 into buffers that live until the write.
    check_layer_count(w, "save_checkpoint '" + dir.string() + "'");
    const std::vector<TensorSpec> table = qwen2_tensor_table(w.config);
    std::list<std::vector<bf16>> rounded;
    std::vector<TensorToWrite> tensors;
    for (const TensorSpec& spec : table) {
        const size_t n = static_cast<size_t>(spec.numel());
        const bf16* data;
        if (const Matrix* m = spec.matrix(w)) {
            const size_t stored = m->type == WeightType::bf16 ? m->b.size() : m->f.size();
            if (m->rows != spec.shape[0] || m->cols != spec.shape[1] || stored != n)
                fail("save_checkpoint '", dir.string(), "': field for tensor '", spec.hf_name, "' is [", m->rows, ", ",
                     m->cols, "] with ", stored, " values; expected ", shape_to_string(spec.shape));
            if (m->type == WeightType::bf16) {
                data = m->b.data();
            } else {
                auto& r = rounded.emplace_back(n);
                for (size_t i = 0; i < n; ++i) r[i] = float_to_bf16(m->f[i]);
                data = r.data();
            }
        } else {
            const std::vector<float>& v = *spec.vector(w);
            if (v.size() != n)
                fail("save_checkpoint '", dir.string(), "': field for tensor '", spec.hf_name, "' has ", v.size(),
                     " values; expected ", shape_to_string(spec.shape));
            auto& r = rounded.emplace_back(n);
            for (size_t i = 0; i < n; ++i) r[i] = float_to_bf16(v[i]);
            data = r.data();
        }
        tensors.push_back({spec.hf_name, "BF16", spec.shape,
                           std::string_view(reinterpret_cast<const char*>(data), n * sizeof(bf16))});
    }

    // Write a hidden sibling folder, then rename it into place.
    const fs::path parent = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
    std::random_device rd;
    std::string tmp_name = ".";
    tmp_name += dir.filename().string();
    tmp_name += ".partial" + std::to_string(::getpid()) + "-" + std::to_string(rd());
    const fs::path tmp = parent / tmp_name;
    create_new_directory(tmp);
    try {
        write_json_atomic(tmp / "config.json", w.config.to_json());
        if (!generation_config.is_null()) write_json_atomic(tmp / "generation_config.json", generation_config);
        write_safetensors(tmp / "model.safetensors", tensors, {{"format", "pt"}});
        for (auto& [from, name] : tokenizer) write_file_atomic(tmp / name, read_input_file(from, InputKind::tokenizer));
        rename_no_replace(tmp, dir);
    } catch (...) {
        std::error_code ec;
        fs::remove_all(tmp, ec);
        throw;
    }
    fsync_dir(parent);
}

// ---------------------------------------------------------------- identity

std::string checkpoint_sha256(const fs::path& dir) {
    std::vector<std::string> names = {"config.json"};
    if (fs::exists(dir / "model.safetensors")) {
        names.push_back("model.safetensors");
    } else if (fs::exists(dir / "model.safetensors.index.json")) {
        std::set<std::string> shards;
        read_index(dir / "model.safetensors.index.json", shards);
        names.push_back("model.safetensors.index.json");
        names.insert(names.end(), shards.begin(), shards.end());
    } else {
        fail("checkpoint folder '", dir.string(), "' has neither model.safetensors nor model.safetensors.index.json");
    }
    Sha256 h;
    for (const std::string& name : names) {
        const fs::path path = dir / name;
        ::close(open_regular_file(path, "checkpoint file"));  // a FIFO or a folder: refused by name
        h.update(name + "\n" + std::to_string(fs::file_size(path)) + "\n");
        sha256_update_file(h, path);
    }
    return h.hex();
}

// ---------------------------------------------------------------- seed pin

void check_seed_architecture(const Qwen2Config& c, const std::string& where) {
    const Qwen2Config want = model_shape("qwen2.5-0.5b");
    std::ostringstream diff;
    auto cmp = [&](const char* field, auto got, auto expected) {
        if (got != expected) diff << "\n  " << field << ": expected " << expected << ", got " << got;
    };
    cmp("vocab_size", c.vocab_size, want.vocab_size);
    cmp("hidden_size", c.hidden_size, want.hidden_size);
    cmp("intermediate_size", c.intermediate_size, want.intermediate_size);
    cmp("num_hidden_layers", c.num_hidden_layers, want.num_hidden_layers);
    cmp("num_attention_heads", c.num_attention_heads, want.num_attention_heads);
    cmp("num_key_value_heads", c.num_key_value_heads, want.num_key_value_heads);
    cmp("head_dim", c.head_dim, want.head_dim);
    cmp("max_position_embeddings", c.max_position_embeddings, want.max_position_embeddings);
    cmp("rms_norm_eps", c.rms_norm_eps, want.rms_norm_eps);
    cmp("rope_theta", c.rope_theta, want.rope_theta);
    cmp("tie_word_embeddings", c.tie_word_embeddings ? "true" : "false", std::string("true"));
    if (!diff.str().empty())
        fail(where, ": the seed preset runs Qwen2.5-0.5B-Instruct only (SPEC §2); this model differs:", diff.str(),
             "\n  (use --preset generic for other Qwen2-architecture models)");
}

// ---------------------------------------------------------------- tokenizer size

int64_t tokenizer_vocab_size(const fs::path& tokenizer_json) {
    const json j = read_json_file(tokenizer_json, InputKind::tokenizer);
    const std::string where = tokenizer_json.string();
    int64_t size = 0;
    if (j.contains("model") && j["model"].is_object() && j["model"].contains("vocab")) {
        const json& vocab = j["model"]["vocab"];
        if (vocab.is_object()) {
            for (auto& [token, id] : vocab.items()) {
                if (!id.is_number_integer() || id.get<int64_t>() < 0)
                    fail(where, ": model.vocab entry '", token, "' must map to a non-negative id");
                size = std::max(size, id.get<int64_t>() + 1);
            }
        } else if (vocab.is_array()) {
            size = static_cast<int64_t>(vocab.size());
        } else {
            fail(where, ": field 'model.vocab' must be an object or a list, got ", vocab.type_name());
        }
    }
    if (j.contains("added_tokens") && j["added_tokens"].is_array())
        for (const json& t : j["added_tokens"])
            if (t.is_object() && t.contains("id") && t["id"].is_number_integer() && t["id"].get<int64_t>() >= 0)
                size = std::max(size, t["id"].get<int64_t>() + 1);
    if (size == 0) fail(where, ": no tokens found (expected 'model.vocab' or 'added_tokens')");
    return size;
}

}  // namespace ppolab

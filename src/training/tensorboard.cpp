#include "training/tensorboard.h"

#include <array>
#include <cstring>
#include <map>

#include "util/error.h"
#include "util/fileio.h"

namespace ppolab {

uint32_t crc32c(std::string_view bytes) {
    static const std::array<uint32_t, 256> table = [] {
        std::array<uint32_t, 256> t{};
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0x82F63B78u ^ (c >> 1) : c >> 1;  // reflected Castagnoli
            t[i] = c;
        }
        return t;
    }();
    uint32_t crc = 0xFFFFFFFFu;
    for (unsigned char b : bytes) crc = table[(crc ^ b) & 0xFFu] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

namespace {

uint32_t masked_crc(std::string_view bytes) {
    const uint32_t c = crc32c(bytes);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

void put_le(std::string& out, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

void put_varint(std::string& out, uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7Fu) | 0x80u));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
}

// Protobuf fields: key = field number << 3 | wire type.
void put_bytes_field(std::string& out, int field, std::string_view bytes) {
    put_varint(out, static_cast<uint64_t>(field) << 3 | 2u);
    put_varint(out, bytes.size());
    out.append(bytes);
}

std::string event(int64_t step, const std::string* file_version, const TensorboardScalar* scalar) {
    std::string e;
    put_varint(e, 1u << 3 | 1u);  // wall_time: double
    put_le(e, 0, 8);
    if (step != 0) {
        put_varint(e, 2u << 3 | 0u);  // step: int64
        put_varint(e, static_cast<uint64_t>(step));
    }
    if (file_version) put_bytes_field(e, 3, *file_version);
    if (scalar) {
        std::string value;
        put_bytes_field(value, 1, scalar->tag);  // Summary.Value.tag
        put_varint(value, 2u << 3 | 5u);         // Summary.Value.simple_value: float
        uint32_t bits;
        std::memcpy(&bits, &scalar->value, 4);
        put_le(value, bits, 4);
        std::string summary;
        put_bytes_field(summary, 1, value);  // Summary.value
        put_bytes_field(e, 5, summary);      // Event.summary
    }
    return e;
}

void put_record(std::string& out, std::string_view data) {
    std::string len;
    put_le(len, data.size(), 8);
    out += len;
    put_le(out, masked_crc(len), 4);
    out.append(data);
    put_le(out, masked_crc(data), 4);
}

bool is_number(const json& v) { return v.is_number() && !v.is_boolean(); }

}  // namespace

std::string tensorboard_event_file(const std::vector<TensorboardScalar>& scalars) {
    std::string out;
    const std::string version = "brain.Event:2";
    put_record(out, event(0, &version, nullptr));
    for (const TensorboardScalar& s : scalars) {
        if (s.step < 0) fail("tensorboard: tag '", s.tag, "' has a negative step ", s.step);
        put_record(out, event(s.step, nullptr, &s));
    }
    return out;
}

std::vector<TensorboardScalar> report_scalars(const json& report) {
    std::vector<TensorboardScalar> out;
    std::map<int64_t, int64_t> last_update_of_epoch;
    if (report.contains("history") && report["history"].is_array()) {
        int64_t index = 0;
        for (const json& entry : report["history"]) {
            ++index;
            if (!entry.is_object()) continue;
            const bool ppo = entry.contains("iteration") && is_number(entry["iteration"]);
            const bool numbered = entry.contains("update") && is_number(entry["update"]);
            const int64_t step = ppo        ? entry["iteration"].get<int64_t>()
                                 : numbered ? entry["update"].get<int64_t>()
                                            : index;
            if (!ppo && entry.contains("epoch") && is_number(entry["epoch"]))
                last_update_of_epoch[entry["epoch"].get<int64_t>()] = step;
            for (const auto& [key, v] : entry.items()) {
                if (!is_number(v) || key == "iteration" || key == "update" || key == "epoch") continue;
                const std::string tag = key.find('/') != std::string::npos ? key : "train/" + key;
                out.push_back({tag, step, v.get<float>()});
            }
        }
    }
    if (report.contains("validation_history") && report["validation_history"].is_array())
        for (const json& entry : report["validation_history"]) {
            if (!entry.is_object() || !entry.contains("epoch") || !is_number(entry["epoch"])) continue;
            auto it = last_update_of_epoch.find(entry["epoch"].get<int64_t>());
            if (it == last_update_of_epoch.end()) continue;
            for (const auto& [key, v] : entry.items())
                if (is_number(v) && key != "epoch") out.push_back({"validation/" + key, it->second, v.get<float>()});
        }
    return out;
}

std::vector<TensorboardScalar> pretrain_scalars(const json& training) {
    std::vector<TensorboardScalar> out;
    for (const auto& [key, tag] :
         {std::pair{"loss_curve", "train/loss"}, std::pair{"grad_norm_curve", "train/grad_norm"}})
        if (training.contains(key) && training[key].is_array()) {
            int64_t step = 0;
            for (const json& v : training[key]) {
                ++step;
                if (is_number(v)) out.push_back({tag, step, v.get<float>()});
            }
        }
    return out;
}

void write_tensorboard_events(const fs::path& dir, const std::vector<TensorboardScalar>& scalars) {
    fs::create_directories(dir);
    write_file_atomic(dir / "events.out.tfevents.0.ppolab", tensorboard_event_file(scalars), Overwrite::replace);
}

void write_stage_tensorboard(const RunLayout& run, const std::string& stage, const std::string& mode,
                             const json& report) {
    write_tensorboard_events(run.tensorboard(stage, mode), report_scalars(report));
}

}  // namespace ppolab

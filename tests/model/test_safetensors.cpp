// Safetensors reader and writer: round trips, every malformed case named by
// the issue (each with the message it must give), and the reference Python
// `safetensors` library as an independent oracle in both directions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "model/safetensors.h"
#include "util/bf16.h"
#include "util/error.h"
#include "util/fileio.h"
#include "util/json.h"

using namespace ppolab;

namespace {

fs::path temp_dir(const std::string& name) {
    fs::path p = fs::temp_directory_path() / ("ppolab_test_safetensors_" + name + std::to_string(::getpid()));
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
}

template <typename T>
std::string_view bytes_of(const std::vector<T>& v) {
    return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)};
}

// A file from a literal header and data region (length prefix computed).
std::string raw_file(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i) & 0xff);
    return out + header + data;
}

// Opening `bytes` must fail with a message holding every one of `parts`.
void expect_error(const std::string& bytes, const std::vector<std::string>& parts) {
    try {
        SafetensorsFile::from_bytes(bytes, "bad.safetensors");
        ADD_FAILURE() << "no error for a malformed file; expected one mentioning '" << parts.front() << "'";
    } catch (const Error& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << msg;
        for (const std::string& p : parts)
            EXPECT_NE(msg.find(p), std::string::npos) << "missing '" << p << "' in: " << msg;
    }
}

// Three tensors of the three float dtypes plus metadata, given unsorted.
struct Sample {
    std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-30f};            // (2, 3)
    std::vector<bf16> b16 = {0x3f80, 0xc000, 0x7f80, 0x0001};                      // (4): 1, -2, inf, subnormal
    std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x3800, 0x0001, 0x7c00, 0x7bff};  // (3, 2)
    std::vector<TensorToWrite> tensors() const {
        return {{"zeta.f32", "F32", {2, 3}, bytes_of(f32)},
                {"alpha.bf16", "BF16", {4}, bytes_of(b16)},
                {"mid.f16", "F16", {3, 2}, bytes_of(f16)}};
    }
    std::map<std::string, std::string> metadata() const { return {{"format", "pt"}, {"note", "x"}}; }
};

}  // namespace

TEST(Safetensors, RoundTripF32Bf16F16) {
    Sample s;
    std::string bytes = serialize_safetensors(s.tensors(), s.metadata());
    SafetensorsFile f = SafetensorsFile::from_bytes(bytes, "mem");
    ASSERT_EQ(f.tensors().size(), 3u);
    // Data order is header order, which is sorted by name.
    EXPECT_EQ(f.tensors()[0].name, "alpha.bf16");
    EXPECT_EQ(f.tensors()[1].name, "mid.f16");
    EXPECT_EQ(f.tensors()[2].name, "zeta.f32");
    EXPECT_EQ(f.metadata(), s.metadata());
    const SafetensorsTensor* z = f.find("zeta.f32");
    ASSERT_NE(z, nullptr);
    EXPECT_EQ(z->dtype, "F32");
    EXPECT_EQ(z->shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(z->data), z->size), bytes_of(s.f32));
    EXPECT_EQ(tensor_to_f32(*z, "mem"), s.f32);
    EXPECT_EQ(f.find("nope"), nullptr);

    std::vector<float> b = tensor_to_f32(*f.find("alpha.bf16"), "mem");
    EXPECT_EQ(b[0], 1.0f);
    EXPECT_EQ(b[1], -2.0f);
    EXPECT_TRUE(std::isinf(b[2]) && b[2] > 0);
    EXPECT_EQ(b[3], std::ldexp(1.0f, -133));  // smallest BF16 subnormal: 2^-126 × 2^-7

    std::vector<float> h = tensor_to_f32(*f.find("mid.f16"), "mem");
    EXPECT_EQ(h[0], 1.0f);
    EXPECT_EQ(h[1], -2.0f);
    EXPECT_EQ(h[2], 0.5f);
    EXPECT_EQ(h[3], std::ldexp(1.0f, -24));  // smallest F16 subnormal
    EXPECT_TRUE(std::isinf(h[4]));
    EXPECT_EQ(h[5], 65504.0f);  // largest F16
}

TEST(Safetensors, Bf16RoundingIsNearestEven) {
    // 1 + 2^-8 lies exactly between BF16 neighbours 1 and 1 + 2^-7: ties to even (1).
    // 1 + 3·2^-8 lies between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
    // 1 + 2^-8 + 2^-20 is above the midpoint: rounds up to 1 + 2^-7.
    std::vector<float> x = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -3.0f};
    std::vector<uint16_t> h = {0x3c01};  // F16 1 + 2^-10 → BF16 rounds to 1
    std::string bytes = serialize_safetensors({{"x", "F32", {4}, bytes_of(x)}, {"h", "F16", {1}, bytes_of(h)}}, {});
    SafetensorsFile f = SafetensorsFile::from_bytes(bytes, "mem");
    std::vector<bf16> out(4);
    tensor_to_bf16(*f.find("x"), "mem", out.data());
    EXPECT_EQ(out[0], 0x3f80);
    EXPECT_EQ(out[1], 0x3f82);
    EXPECT_EQ(out[2], 0x3f81);
    EXPECT_EQ(out[3], 0xc040);
    bf16 one;
    tensor_to_bf16(*f.find("h"), "mem", &one);
    EXPECT_EQ(one, 0x3f80);
}

TEST(Safetensors, SerializationIsDeterministicAndAligned) {
    Sample s;
    std::string a = serialize_safetensors(s.tensors(), s.metadata());
    auto reversed = s.tensors();
    std::reverse(reversed.begin(), reversed.end());
    EXPECT_EQ(a, serialize_safetensors(reversed, s.metadata()));  // order of the input does not matter
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(a[i]);
    EXPECT_EQ(n % 8, 0u);
    std::string header = a.substr(8, n);
    EXPECT_EQ(header.find("\"__metadata__\""), header.find('"'));  // "__metadata__" sorts first ('_' < 'a')
    EXPECT_LT(header.find("alpha.bf16"), header.find("mid.f16"));
    EXPECT_LT(header.find("mid.f16"), header.find("zeta.f32"));
    // No metadata → no "__metadata__" key.
    std::string b = serialize_safetensors(s.tensors(), {});
    EXPECT_EQ(b.find("__metadata__"), std::string::npos);
    EXPECT_TRUE(SafetensorsFile::from_bytes(b, "mem").metadata().empty());
}

TEST(Safetensors, WriteIsAtomicAndRefusesOverwrite) {
    fs::path dir = temp_dir("write");
    Sample s;
    write_safetensors(dir / "a.safetensors", s.tensors(), s.metadata());
    EXPECT_EQ(read_file(dir / "a.safetensors"), serialize_safetensors(s.tensors(), s.metadata()));
    SafetensorsFile f = SafetensorsFile::open(dir / "a.safetensors");
    EXPECT_EQ(tensor_to_f32(*f.find("zeta.f32"), "a"), s.f32);
    // A moved-from/copied file keeps valid tensor pointers.
    SafetensorsFile g = std::move(f);
    SafetensorsFile h = g;
    EXPECT_EQ(tensor_to_f32(*h.find("zeta.f32"), "a"), s.f32);

    std::string before = read_file(dir / "a.safetensors");
    std::vector<float> other = {9.0f};
    EXPECT_THROW(write_safetensors(dir / "a.safetensors", {{"q", "F32", {1}, bytes_of(other)}}, {}), Error);
    EXPECT_EQ(read_file(dir / "a.safetensors"), before);
    write_safetensors(dir / "a.safetensors", {{"q", "F32", {1}, bytes_of(other)}}, {}, Overwrite::replace);
    EXPECT_EQ(SafetensorsFile::open(dir / "a.safetensors").tensors().size(), 1u);
    int files = 0;
    for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
    EXPECT_EQ(files, 1);  // no temporary left behind
    fs::remove_all(dir);
}

TEST(Safetensors, WriterRejectsBadTensors) {
    std::vector<float> three = {1, 2, 3};
    auto err = [](const std::vector<TensorToWrite>& t, const std::string& want) {
        try {
            serialize_safetensors(t, {});
            ADD_FAILURE() << "no error; expected '" << want << "'";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
        }
    };
    err({{"a", "F32", {2, 2}, bytes_of(three)}}, "shape [2, 2] of F32 (16 bytes) but 12 bytes");
    err({{"a", "F32", {3}, bytes_of(three)}, {"a", "F32", {3}, bytes_of(three)}}, "'a' given twice");
    err({{"a", "Q4", {3}, bytes_of(three)}}, "unknown dtype 'Q4'");
    err({{"__metadata__", "F32", {3}, bytes_of(three)}}, "invalid tensor name");
}

TEST(Safetensors, OpenNamesMissingFile) {
    try {
        SafetensorsFile::open("/nonexistent/dir/w.safetensors");
        ADD_FAILURE();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/w.safetensors"), std::string::npos);
    }
}

// ---------------------------------------------------------------- malformed files

TEST(SafetensorsMalformed, TruncatedFile) {
    Sample s;
    std::string good = serialize_safetensors(s.tensors(), s.metadata());
    expect_error(good.substr(0, good.size() - 3), {"zeta.f32", "past the data region", "truncated"});
    expect_error(good.substr(0, 5), {"5 bytes", "8-byte header length"});
    expect_error("", {"0 bytes"});
    // Every prefix fails with an Error (never a crash or an out-of-bounds read).
    for (size_t n = 0; n < good.size(); ++n)
        EXPECT_THROW(SafetensorsFile::from_bytes(good.substr(0, n), "p"), Error) << n;
}

TEST(SafetensorsMalformed, HeaderLengthPastEof) {
    std::string f = raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd");
    f[0] = static_cast<char>(f[0] + 40);  // claims 40 more header bytes than there are
    expect_error(f, {"header length", "runs past the end of the file"});
    std::string huge = f;
    for (int i = 0; i < 8; ++i) huge[i] = '\xff';
    expect_error(huge, {"header length 18446744073709551615", "exceeds the limit"});
}

TEST(SafetensorsMalformed, BadJson) {
    expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})", "abcd"), {"not valid JSON"});
    expect_error(raw_file(R"([1, 2])", ""), {"does not start with '{'"});
    expect_error(raw_file(R"({"a": 5})", ""), {"tensor 'a' must be an object"});
    expect_error(raw_file(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", "abcd"), {"'a'", "'dtype'"});
    expect_error(raw_file(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", "abcd"), {"'a'", "'shape'"});
    expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1]}})", "abcd"), {"'a'", "'data_offsets'"});
    expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[[[[1]]]],"data_offsets":[0,4]}})", "abcd"), {"nests deeper"});
    expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                          "abcdefgh"),
                 {"'a' appears twice"});
    expect_error(raw_file(R"({"__metadata__":{"k":1}})", ""), {"__metadata__", "'k'", "must be a string"});
    // A repeated field would silently keep its last value.
    expect_error(raw_file(R"({"a":{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}})", "abcd"),
                 {"field 'dtype' appears twice in header entry 'a'"});
    expect_error(raw_file(R"({"__metadata__":{"k":"1","k":"2"}})", ""),
                 {"field 'k' appears twice in header entry '__metadata__'"});
    // The same field in two entries is fine.
    EXPECT_EQ(SafetensorsFile::from_bytes(raw_file(R"({"__metadata__":{"k":"1"},"a":{"dtype":"F32","shape":[1],)"
                                                   R"("data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],)"
                                                   R"("data_offsets":[4,8]}})",
                                                   "abcdefgh"),
                                          "ok")
                  .tensors()
                  .size(),
              2u);
}

TEST(SafetensorsMalformed, UnknownDtype) {
    expect_error(raw_file(R"({"w":{"dtype":"Q4_K","shape":[1],"data_offsets":[0,4]}})", "abcd"),
                 {"tensor 'w'", "unknown dtype 'Q4_K'"});
}

TEST(SafetensorsMalformed, OffsetsOutOfRange) {
    expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcd"),
                 {"tensor 'w'", "[0, 8]", "past the data region (4 bytes"});
    expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", "abcd"),
                 {"tensor 'w'", "end before they begin"});
    expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", "abcd"),
                 {"tensor 'w'", "non-negative"});
    expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})", "abcd"),
                 {"tensor 'w'", "past the data region"});
}

TEST(SafetensorsMalformed, OverlapGapAndTrailingBytes) {
    expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                          "abcdefgh"),
                 {"tensor 'b'", "overlaps tensor 'a'"});
    expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                          "abcdefghijkl"),
                 {"gap of 4 bytes before tensor 'b'"});
    expect_error(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcdefgh"),
                 {"4 bytes after the last tensor"});
}

TEST(SafetensorsMalformed, ShapeSizeMismatch) {
    expect_error(raw_file(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", "abcd"),
                 {"tensor 'w'", "shape [3] of BF16 (6 bytes)", "hold 4 bytes"});
    expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"),
                 {"tensor 'w'", "shape", "non-negative"});
    // A product of dimensions that overflows 64 bits is caught, not wrapped.
    expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,4]}})", "abcd"),
                 {"tensor 'w'", "more than the file holds"});
    // Dimensions beyond 2^62 are reported as the header writes them, not clamped.
    expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[9223372036854776192,1],"data_offsets":[0,4]}})", "abcd"),
                 {"tensor 'w'", "shape [9223372036854776192, 1] of F32", "more than the file holds"});
    expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", "abcd"),
                 {"shape [18446744073709551615] of F32"});
    expect_error(raw_file(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "abcd"),
                 {"tensor 'w'", "shape must hold non-negative integers"});
}

TEST(SafetensorsMalformed, ConversionRefusesNonFloat) {
    std::vector<int32_t> v = {1, 2};
    SafetensorsFile f = SafetensorsFile::from_bytes(serialize_safetensors({{"ids", "I32", {2}, bytes_of(v)}}, {}), "m");
    try {
        tensor_to_f32(*f.find("ids"), "m.safetensors");
        ADD_FAILURE();
    } catch (const Error& e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find("m.safetensors: tensor 'ids' has dtype I32"), std::string::npos) << msg;
    }
}

TEST(SafetensorsMalformed, RandomCorruptionNeverCrashes) {
    // Flip bytes of the header at random: either a clean Error or a valid file
    // whose every tensor lies inside the bytes.
    Sample s;
    std::string good = serialize_safetensors(s.tensors(), s.metadata());
    uint64_t state = 12345;
    int errors = 0;
    for (int trial = 0; trial < 2000; ++trial) {
        std::string bad = good;
        for (int k = 0; k < 3; ++k) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (state >> 33) % std::min<size_t>(bad.size(), 200);
            bad[at] = static_cast<char>(state >> 20);
        }
        try {
            SafetensorsFile f = SafetensorsFile::from_bytes(bad, "r");
            unsigned sum = 0;  // touches every byte: an out-of-bounds tensor shows under ASan
            for (const auto& t : f.tensors()) {
                EXPECT_EQ(t.size, static_cast<size_t>(t.numel()) * safetensors_dtype_size(t.dtype));
                for (size_t i = 0; i < t.size; ++i) sum += t.data[i];
            }
            EXPECT_GE(sum, 0u);
        } catch (const Error&) {
            ++errors;
        }
    }
    EXPECT_GT(errors, 1000);
}

// ---------------------------------------------------------------- oracle: the safetensors library

namespace {

std::string python() {
    const char* p = std::getenv("PPOLAB_PYTHON");
    return p ? p : "/usr/bin/python3";
}

std::string run_python(const fs::path& script, const std::string& args) {
    std::string cmd = python() + " " + script.string() + " " + args + " 2>&1";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    if (!pipe) return "popen failed";
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    int rc = ::pclose(pipe);
    if (rc != 0)
        ADD_FAILURE() << cmd << " failed (" << rc << "):\n"
                      << out << "\n(the oracle needs the safetensors package: scripts/test-venv.sh)";
    return out;
}

}  // namespace

TEST(SafetensorsOracle, ReferenceLibraryReadsWhatWeWrite) {
    fs::path dir = temp_dir("oracle_read");
    Sample s;
    write_safetensors(dir / "ours.safetensors", s.tensors(), s.metadata());
    write_file_atomic(dir / "read.py", R"(
import json, math, sys, torch
from safetensors import safe_open
out = {}
with safe_open(sys.argv[1], framework="pt") as f:
    out["__metadata__"] = f.metadata()
    for k in f.keys():
        t = f.get_tensor(k)
        out[k] = [str(t.dtype), list(t.shape),
                  [v if math.isfinite(v) else str(v) for v in t.float().flatten().tolist()]]
print(json.dumps(out))
)");
    json got = parse_json(run_python(dir / "read.py", (dir / "ours.safetensors").string()), "python output");
    EXPECT_EQ(got["__metadata__"]["format"], "pt");
    EXPECT_EQ(got["__metadata__"]["note"], "x");
    EXPECT_EQ(got["zeta.f32"][0], "torch.float32");
    EXPECT_EQ(got["zeta.f32"][1], json({2, 3}));
    for (size_t i = 0; i < s.f32.size(); ++i) EXPECT_EQ(got["zeta.f32"][2][i].get<double>(), s.f32[i]);
    EXPECT_EQ(got["alpha.bf16"][0], "torch.bfloat16");
    EXPECT_EQ(got["alpha.bf16"][2][0].get<double>(), 1.0);
    EXPECT_EQ(got["alpha.bf16"][2][2], "inf");
    EXPECT_EQ(got["alpha.bf16"][2][3].get<double>(), std::ldexp(1.0, -133));
    EXPECT_EQ(got["mid.f16"][0], "torch.float16");
    EXPECT_EQ(got["mid.f16"][1], json({3, 2}));
    EXPECT_EQ(got["mid.f16"][2][3].get<double>(), std::ldexp(1.0, -24));
    EXPECT_EQ(got["mid.f16"][2][5].get<double>(), 65504.0);
    fs::remove_all(dir);
}

TEST(SafetensorsOracle, WeReadWhatReferenceLibraryWrites) {
    // torch draws values (with extremes appended), converts them to BF16 and
    // F16 with its own rounding; we must decode and round identically.
    fs::path dir = temp_dir("oracle_write");
    write_file_atomic(dir / "write.py", R"(
import sys, torch
from safetensors.torch import save_file
torch.manual_seed(7)
x = torch.cat([torch.randn(997) * 3,
               torch.tensor([1e-40, -1e-39, 3e38, 65504.0, 6e-8, -0.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8])])
h = x.to(torch.float16)
save_file({"x": x.reshape(67, 15), "x_bf16": x.to(torch.bfloat16), "h": h, "h_as_f32": h.float(),
           "empty": torch.zeros(0, 4)}, sys.argv[1], metadata={"format": "pt"})
)");
    run_python(dir / "write.py", (dir / "ref.safetensors").string());
    SafetensorsFile f = SafetensorsFile::open(dir / "ref.safetensors");
    ASSERT_EQ(f.tensors().size(), 5u);
    EXPECT_EQ(f.metadata().at("format"), "pt");
    const SafetensorsTensor* x = f.find("x");
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->shape, (std::vector<int64_t>{67, 15}));
    std::vector<bf16> ours(static_cast<size_t>(x->numel()));
    tensor_to_bf16(*x, "ref", ours.data());
    std::vector<bf16> torch_bf16(ours.size());
    std::memcpy(torch_bf16.data(), f.find("x_bf16")->data, f.find("x_bf16")->size);
    int diff = 0;
    for (size_t i = 0; i < ours.size(); ++i) diff += ours[i] != torch_bf16[i];
    EXPECT_EQ(diff, 0) << "BF16 rounding differs from torch on " << diff << " values";
    EXPECT_EQ(tensor_to_f32(*f.find("h"), "ref"), tensor_to_f32(*f.find("h_as_f32"), "ref"));
    EXPECT_EQ(f.find("empty")->numel(), 0);
    EXPECT_EQ(f.find("empty")->size, 0u);
    EXPECT_TRUE(tensor_to_f32(*f.find("empty"), "ref").empty());  // fuzz finding: no memcpy to a null pointer
    fs::remove_all(dir);
}

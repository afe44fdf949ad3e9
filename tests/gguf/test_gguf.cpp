// GGUF reader and writer: round trips of every metadata type and every tensor type (v2, v3,
// alignments 1/32/64), typed accessors and their errors, and malformed files, each of which
// must throw gguf::FormatError naming what is wrong (never crash, never read out of bounds:
// the ASan build runs these too). Malformed files are built byte by byte with Bytes below,
// so every offset in them is known.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>

#include "llmk/gguf.hpp"
#include "tests/common/testutil.hpp"

namespace llmk::gguf {
namespace {

// A little-endian byte builder for hand-made files.
struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& put(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& str(std::string_view s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return put<uint32_t>(0x46554747).put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  Bytes& pad(size_t align) {
    b.resize((b.size() + align - 1) / align * align, 0);
    return *this;
  }
  // One tensor info: name, dims (ggml order), type, offset.
  Bytes& tensor(std::string_view name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(uint32_t(ne.size()));
    for (uint64_t d : ne) put<uint64_t>(d);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
};

// Parses `b` and expects a FormatError whose message contains every string in `needles`.
void expect_format_error(const std::vector<uint8_t>& b, std::initializer_list<std::string> needles) {
  try {
    File::parse(b, "test.gguf");
    ADD_FAILURE() << "no error; expected one mentioning '" << *needles.begin() << "'";
  } catch (const FormatError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("test.gguf"), std::string::npos) << msg;
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = uint8_t(rng());
  return v;
}

// A writer holding one of every metadata kind, one tensor of several supported types and one of
// an unsupported type (IQ4_XS).
Writer full_writer(uint32_t version, uint32_t alignment) {
  Writer w(version);
  if (alignment != 32) w.set("general.alignment", Value::of<uint32_t>(alignment));
  w.set("u8", Value::of<uint8_t>(255));
  w.set("i8", Value::of<int8_t>(-128));
  w.set("u16", Value::of<uint16_t>(65535));
  w.set("i16", Value::of<int16_t>(-32768));
  w.set("u32", Value::of<uint32_t>(4294967295u));
  w.set("i32", Value::of<int32_t>(std::numeric_limits<int32_t>::min()));
  w.set("u64", Value::of<uint64_t>(std::numeric_limits<uint64_t>::max()));
  w.set("i64", Value::of<int64_t>(std::numeric_limits<int64_t>::min()));
  w.set("f32", Value::of<float>(-1.5e-7f));
  w.set("f64", Value::of<double>(3.141592653589793));
  w.set("bool", Value::of<bool>(true));
  w.set("string", Value::string(std::string("caf\xc3\xa9\0nul", 9)));
  w.set("empty", Value::string(""));
  const std::vector<int32_t> i32s{-1, 0, 7, std::numeric_limits<int32_t>::max()};
  w.set("arr.i32", Value::array_of<int32_t>(i32s));
  const std::vector<uint8_t> u8s{1, 2, 250};
  w.set("arr.u8", Value::array_of<uint8_t>(u8s));
  const std::vector<float> f32s{0.5f, -2.0f};
  w.set("arr.f32", Value::array_of<float>(f32s));
  const bool bools[] = {true, false, true};
  w.set("arr.bool", Value::array_of<bool>(bools));
  const std::vector<uint64_t> u64s{std::numeric_limits<uint64_t>::max()};
  w.set("arr.u64", Value::array_of<uint64_t>(u64s));
  w.set("arr.str", Value::strings({"a", "", "\xe6\x97\xa5\xe6\x9c\xac"}));
  w.set("arr.nested", Value::arrays({Value::array_of<int32_t>(i32s), Value::strings({"x", "y"}),
                                     Value::arrays({Value::array_of<uint8_t>(u8s)})}));
  // Tensors: sizes chosen so that each one's byte size is not a multiple of 32.
  auto add = [&](const char* name, GgmlType t, std::vector<int64_t> ne, uint32_t seed) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    w.add_tensor(name, t, ne, random_bytes(size_t(n / ggml_block_elems(t) * ggml_block_bytes(t)), seed));
  };
  add("f32", GgmlType::F32, {3}, 1);
  add("f16", GgmlType::F16, {5, 3}, 2);
  add("bf16", GgmlType::BF16, {7, 1, 2}, 3);
  add("q8_0", GgmlType::Q8_0, {64, 3}, 4);
  add("q4_0", GgmlType::Q4_0, {32, 1, 1, 3}, 5);
  add("q4_1", GgmlType::Q4_1, {96, 2}, 6);
  add("q4_k", GgmlType::Q4_K, {256}, 7);
  add("iq4_xs", GgmlType::IQ4_XS, {256}, 8);
  return w;
}

class GgufRoundTrip : public ::testing::TestWithParam<std::tuple<uint32_t, uint32_t>> {};

TEST_P(GgufRoundTrip, EveryMetadataAndTensorType) {
  const auto [version, alignment] = GetParam();
  const std::vector<uint8_t> bytes = full_writer(version, alignment).bytes();
  const File f = File::parse(bytes, "rt.gguf");
  EXPECT_EQ(f.version(), version);
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  EXPECT_EQ(f.get_int("u8"), 255);
  EXPECT_EQ(f.get_int("i8"), -128);
  EXPECT_EQ(f.get_int("u16"), 65535);
  EXPECT_EQ(f.get_int("i16"), -32768);
  EXPECT_EQ(f.get_u32("u32"), 4294967295u);
  EXPECT_EQ(f.get_int("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f.get("u64").u, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f.get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.get_f32("f32"), -1.5e-7f);
  EXPECT_EQ(f.get("f64").f, 3.141592653589793);
  EXPECT_TRUE(f.get_bool("bool"));
  EXPECT_EQ(f.get_string("string"), std::string_view("caf\xc3\xa9\0nul", 9));
  EXPECT_EQ(f.get_string("empty"), "");
  EXPECT_EQ(f.get_ints("arr.i32"), (std::vector<int64_t>{-1, 0, 7, std::numeric_limits<int32_t>::max()}));
  EXPECT_EQ(f.get_ints("arr.u8"), (std::vector<int64_t>{1, 2, 250}));
  EXPECT_EQ(f.get_f32s("arr.f32"), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(f.get("arr.bool").raw, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(f.get_strings("arr.str"), (std::vector<std::string>{"a", "", "\xe6\x97\xa5\xe6\x9c\xac"}));
  const Value& nested = f.get("arr.nested");
  ASSERT_EQ(nested.items.size(), 3u);
  EXPECT_EQ(nested.items[0].elem, ValueType::i32);
  EXPECT_EQ(nested.items[0].count, 4u);
  EXPECT_EQ(nested.items[1].strs, (std::vector<std::string>{"x", "y"}));
  ASSERT_EQ(nested.items[2].items.size(), 1u);
  EXPECT_EQ(nested.items[2].items[0].raw, (std::vector<uint8_t>{1, 2, 250}));
  // Metadata keeps file order.
  EXPECT_EQ(f.metadata()[alignment != 32 ? 1 : 0].first, "u8");

  const char* names[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q4_k", "iq4_xs"};
  ASSERT_EQ(f.tensors().size(), 8u);
  for (size_t k = 0; k < 8; ++k) {
    const TensorInfo& t = f.tensors()[k];
    EXPECT_EQ(t.name, names[k]);
    EXPECT_EQ(t.offset % alignment, 0u) << t.name;
    EXPECT_EQ(static_cast<const uint8_t*>(t.data), bytes.data() + f.data_offset() + t.offset);
    const std::vector<uint8_t> want = random_bytes(size_t(t.n_bytes), uint32_t(k + 1));
    EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0) << t.name;
  }
  const TensorInfo& q = f.tensor("q4_0");
  EXPECT_EQ(q.type, GgmlType::Q4_0);
  EXPECT_EQ(q.n_dims, 4);
  EXPECT_EQ(q.ne, (std::array<int64_t, 4>{32, 1, 1, 3}));
  EXPECT_EQ(q.n_elements, 96);
  EXPECT_EQ(q.row_bytes, 18);
  EXPECT_EQ(q.rows(), 3);
  EXPECT_EQ(q.n_bytes, 54);
  EXPECT_EQ(f.tensor("bf16").ne, (std::array<int64_t, 4>{7, 1, 2, 1}));
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
  // A known but unsupported type parses, and is refused by name when used.
  EXPECT_EQ(f.tensor("q4_k").n_bytes, 144);
  ASSERT_NE(f.find_tensor("iq4_xs"), nullptr);
  try {
    f.tensor("iq4_xs");
    ADD_FAILURE() << "IQ4_XS accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'iq4_xs' has ggml type IQ4_XS (23)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Q4_K, Q5_K, Q6_K"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(VersionsAndAlignments, GgufRoundTrip,
                         ::testing::Combine(::testing::Values(2u, 3u), ::testing::Values(1u, 32u, 64u)));

TEST(Gguf, OpenMapsAFileAndMissingFileIsRuntimeError) {
  const std::string path = ::testing::TempDir() + "llmk_gguf_open_" + std::to_string(getpid()) + ".gguf";
  full_writer(3, 32).write(path);
  {
    const File f = File::open(path);
    EXPECT_EQ(f.path(), path);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(f.tensor("q4_1").data) % 32, 0u);  // the mapping is page aligned
    EXPECT_EQ(f.get_strings("arr.str").size(), 3u);
  }
  std::remove(path.c_str());
  EXPECT_THROW(File::open(path), RuntimeError);
}

TEST(Gguf, AccessorErrorsNameKeyAndTypes) {
  Writer w;
  w.set("s", Value::string("x"));
  w.set("neg", Value::of<int32_t>(-1));
  w.set("big", Value::of<uint64_t>(uint64_t(1) << 40));
  w.set("u8", Value::of<uint8_t>(7));
  w.set("f", Value::of<double>(0.25));
  const std::vector<uint8_t> b = w.bytes();
  const File f = File::parse(b, "acc.gguf");
  auto expect_msg = [](auto fn, const std::string& needle) {
    try {
      fn();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_msg([&] { f.get_string("missing.key"); }, "missing metadata key 'missing.key'");
  expect_msg([&] { f.get_u32("s"); }, "'s' has type string, expected u32");
  expect_msg([&] { f.get_u32("neg"); }, "'neg' = -1 does not fit in u32");
  expect_msg([&] { f.get_u32("big"); }, "'big' = 1099511627776 does not fit in u32");
  expect_msg([&] { f.get_strings("s"); }, "'s' has type string, expected array of string");
  expect_msg([&] { f.get_bool("u8"); }, "'u8' has type u8, expected bool");
  expect_msg([&] { f.get_f32_or("s", 1.0f); }, "'s' has type string, expected f32");
  EXPECT_EQ(f.get_u32("u8"), 7u);  // widening is fine
  EXPECT_EQ(f.get_f32("f"), 0.25f);
  EXPECT_EQ(f.get_u32_or("absent", 9), 9u);
  EXPECT_EQ(f.get_string_or("absent", "fb"), "fb");
  EXPECT_FALSE(f.get_bool_or("absent", false));
  EXPECT_EQ(f.get_int_or("big", 0), int64_t(1) << 40);
}

TEST(Gguf, WriterRejectsBadTensors) {
  Writer w;
  const std::vector<uint8_t> d(18);
  EXPECT_THROW(w.add_tensor("t", GgmlType::Q4_0, {33}, d), InvalidArgument);
  EXPECT_THROW(w.add_tensor("t", GgmlType::Q4_0, {32}, std::vector<uint8_t>(17)), InvalidArgument);
  EXPECT_THROW(w.add_tensor("t", GgmlType::Q4_0, {32, 1, 1, 1, 1}, d), InvalidArgument);
  EXPECT_THROW(w.add_tensor("t", GgmlType(4), {32}, d), InvalidArgument);
}

// A tensor filled in pieces at write time gives the bytes of the same tensor passed whole,
// across piece boundaries (3 pieces and a part) and to the file write() streams.
TEST(Gguf, WriterFillsLazyTensorsInPieces) {
  const int64_t n = int64_t(3 * Writer::kFillPiece / 18 + 5) * 32;  // Q4_0: 18 bytes per 32 values
  std::vector<uint8_t> data(size_t(n / 32 * 18));
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i * 2654435761u >> 13);
  Writer whole, lazy;
  for (Writer* w : {&whole, &lazy}) {
    w->set("k", Value::of<uint32_t>(1));
    w->add_tensor("a", GgmlType::F32, {3}, std::vector<uint8_t>(12, 7));
  }
  whole.add_tensor("q", GgmlType::Q4_0, {n}, data);
  std::vector<uint64_t> offsets;
  lazy.add_tensor("q", GgmlType::Q4_0, {n}, [&](uint64_t off, std::span<uint8_t> out) {
    offsets.push_back(off);
    ASSERT_LE(out.size(), Writer::kFillPiece);
    std::memcpy(out.data(), data.data() + off, out.size());
  });
  const std::vector<uint8_t> want = whole.bytes();
  EXPECT_EQ(lazy.bytes(), want);
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, Writer::kFillPiece, 2 * Writer::kFillPiece, 3 * Writer::kFillPiece}));
  const std::string path = ::testing::TempDir() + "/llmk_lazy.gguf";
  lazy.write(path);
  std::ifstream f(path, std::ios::binary);
  const std::vector<uint8_t> got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, want);
  std::remove(path.c_str());
  EXPECT_THROW(lazy.add_tensor("e", GgmlType::F32, {1}, Writer::Fill{}), InvalidArgument);
}

TEST(GgufMalformed, HeaderErrors) {
  expect_format_error({}, {"at byte 0", "truncated", "magic"});
  expect_format_error({'G', 'G', 'U'}, {"truncated", "magic"});
  expect_format_error(Bytes().put<uint32_t>(0x4c4d4747).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(0).b,
                      {"bad magic 'GGML'"});
  expect_format_error(Bytes().header(0, 0, 1).b, {"at byte 4", "unsupported version 1"});
  expect_format_error(Bytes().header(0, 0, 0x03000000).b, {"big-endian"});
  expect_format_error(Bytes().put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint32_t>(0).b,
                      {"at byte 8", "truncated", "tensor_count"});
  expect_format_error(Bytes().header(0, uint64_t(1) << 62).b, {"at byte 24", "truncated", "key of metadata pair 0"});
  expect_format_error(Bytes().header(uint64_t(-1), 0).b, {"at byte 24", "truncated", "name of tensor 0"});
  // An empty file with no KV and no tensor is valid.
  EXPECT_NO_THROW(File::parse(Bytes().header(0, 0).b));
}

TEST(GgufMalformed, MetadataErrors) {
  expect_format_error(Bytes().header(0, 1).put<uint64_t>(uint64_t(1) << 63).b,
                      {"at byte 24", "key of metadata pair 0", "length"});
  expect_format_error(Bytes().header(0, 1).str("k").b, {"truncated", "value of 'k' type"});
  expect_format_error(Bytes().header(0, 1).str("k").put<uint32_t>(13).put<uint64_t>(0).b,
                      {"'k'", "unknown value type 13"});
  expect_format_error(Bytes().header(0, 1).str("k").put<uint32_t>(4).put<uint16_t>(1).b, {"truncated", "'k'"});
  expect_format_error(Bytes().header(0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2).b, {"bool has value 2"});
  expect_format_error(Bytes().header(0, 1).str("").put<uint32_t>(0).put<uint8_t>(0).b, {"empty key"});
  expect_format_error(Bytes().header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(100).b, {"'k'", "length 100"});
  expect_format_error(
      Bytes().header(0, 2).str("k").put<uint32_t>(0).put<uint8_t>(0).str("k").put<uint32_t>(0).put<uint8_t>(0).b,
      {"at byte 38", "duplicate metadata key 'k'"});
  // Arrays: lying counts, bad element types, strings cut short, nesting too deep.
  expect_format_error(
      Bytes().header(0, 1).str("a").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(uint64_t(1) << 61).b,
      {"'a'", "does not fit"});
  expect_format_error(Bytes().header(0, 1).str("a").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(3).str("x").b,
                      {"'a'", "does not fit"});
  expect_format_error(Bytes()
                          .header(0, 1)
                          .str("a")
                          .put<uint32_t>(9)
                          .put<uint32_t>(8)
                          .put<uint64_t>(2)
                          .str("x")
                          .put<uint64_t>(100)
                          .put<uint64_t>(0)
                          .b,
                      {"value of 'a'[1]", "length 100"});
  expect_format_error(Bytes().header(0, 1).str("a").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0).b,
                      {"'a' element", "unknown value type 77"});
  Bytes deep = Bytes().header(0, 1).str("a").put<uint32_t>(9);
  for (int k = 0; k < 20; ++k) deep.put<uint32_t>(9).put<uint64_t>(1);
  expect_format_error(deep.b, {"nested more than 8 deep"});
  expect_format_error(Bytes()
                          .header(0, 1)
                          .str("a")
                          .put<uint32_t>(9)
                          .put<uint32_t>(7)
                          .put<uint64_t>(2)
                          .put<uint8_t>(1)
                          .put<uint8_t>(3)
                          .b,
                      {"'a'[1]", "bool has value 3"});
}

TEST(GgufMalformed, AlignmentErrors) {
  auto with_alignment = [](auto put_value) {
    Bytes b = Bytes().header(0, 1).str("general.alignment");
    put_value(b);
    return b.b;
  };
  expect_format_error(with_alignment([](Bytes& b) { b.put<uint32_t>(10).put<uint64_t>(32); }),
                      {"'general.alignment' has type u64"});
  expect_format_error(with_alignment([](Bytes& b) { b.put<uint32_t>(4).put<uint32_t>(0); }),
                      {"'general.alignment' = 0"});
  expect_format_error(with_alignment([](Bytes& b) { b.put<uint32_t>(4).put<uint32_t>(48); }), {"= 48", "power of two"});
}

TEST(GgufMalformed, TensorInfoErrors) {
  auto one = [](std::vector<uint64_t> ne, uint32_t type, uint64_t offset, size_t data_bytes, std::string name = "w") {
    Bytes b = Bytes().header(1, 0).tensor(name, ne, type, offset).pad(32);
    b.b.resize(b.b.size() + data_bytes, 0);
    return b.b;
  };
  EXPECT_NO_THROW(File::parse(one({8, 2}, 0, 0, 64)));
  expect_format_error(one({8, 2}, 0, 0, 63), {"tensor 'w' data [0, +64)", "runs past the end", "(63 bytes)"});
  expect_format_error(one({8}, 0, 64, 64), {"tensor 'w' data [64, +32)"});
  expect_format_error(one({8}, 0, uint64_t(-32), 64), {"tensor 'w'", "runs past the end"});
  expect_format_error(one({8}, 0, 8, 64), {"tensor 'w' has offset 8, not a multiple of the alignment 32"});
  expect_format_error(one({1, 1, 1, 1, 1}, 0, 0, 64), {"at byte 33", "tensor 'w' has n_dims = 5"});
  expect_format_error(one({uint64_t(1) << 63}, 0, 0, 64), {"tensor 'w' dim 0", "negative"});
  expect_format_error(one({uint64_t(1) << 40, uint64_t(1) << 40}, 0, 0, 64), {"tensor 'w'", "overflows int64"});
  expect_format_error(one({uint64_t(1) << 40, 4}, 0, 0, 64), {"tensor 'w'", "cannot fit in the file"});
  expect_format_error(one({8}, 99, 0, 64), {"tensor 'w' has unknown ggml type 99"});
  expect_format_error(one({8}, 4, 0, 64), {"unknown ggml type 4"});  // Q4_2, removed from ggml
  expect_format_error(one({33}, 2, 0, 64), {"ne[0] = 33 is not a multiple of Q4_0's block of 32"});
  expect_format_error(one({8}, 0, 0, 64, std::string(64, 'n')), {"name longer than 63 bytes"});
  EXPECT_NO_THROW(File::parse(one({8}, 0, 0, 64, std::string(63, 'n'))));
  // A huge row with a zero dim elsewhere: no elements, but the row size would overflow
  // (found by fuzz_gguf).
  expect_format_error(one({uint64_t(1) << 62, 0}, 0, 0, 64), {"tensor 'w'", "cannot fit in the file"});
  // Zero-sized dims are legal (an empty tensor).
  EXPECT_NO_THROW(File::parse(one({0, 4}, 0, 0, 0)));
  Bytes dup = Bytes().header(2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad(32);
  dup.b.resize(dup.b.size() + 64, 0);
  expect_format_error(dup.b, {"duplicate tensor name 'w'"});
  // Truncated in the middle of a tensor info, and before the data section's padding.
  Bytes cut = Bytes().header(1, 0).str("w").put<uint32_t>(1).put<uint64_t>(8);
  expect_format_error(cut.b, {"truncated", "tensor 'w' type"});
  expect_format_error(Bytes().header(1, 0).tensor("w", {8}, 0, 0).b, {"truncated", "padding"});
}

// Every prefix of a valid file that cuts into its metadata, tensor infos or tensor data must
// be rejected with a FormatError (the trailing padding after the last tensor is optional).
TEST(GgufMalformed, EveryTruncationIsAFormatError) {
  const std::vector<uint8_t> full = full_writer(3, 32).bytes();
  const File f = File::parse(full);
  size_t end = 0;
  for (const TensorInfo& t : f.tensors()) end = std::max<size_t>(end, f.data_offset() + t.offset + size_t(t.n_bytes));
  for (size_t n = 0; n < end; ++n) {
    const std::vector<uint8_t> cut(full.begin(), full.begin() + std::ptrdiff_t(n));
    EXPECT_THROW(File::parse(cut), FormatError) << "prefix of " << n << " bytes";
  }
  EXPECT_NO_THROW(File::parse(std::vector<uint8_t>(full.begin(), full.begin() + std::ptrdiff_t(end))));
}

// Random corruption: each mutated file parses or throws FormatError; nothing else (the ASan
// build checks that no byte outside the buffer is read).
TEST(GgufMalformed, RandomMutationsNeverCrash) {
  const std::vector<uint8_t> full = full_writer(3, 32).bytes();
  std::mt19937 rng(1234);
  int ok = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = full;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % b.size();
      b[at] = (rng() % 2) ? uint8_t(rng()) : uint8_t(b[at] ^ (1u << (rng() % 8)));
    }
    try {
      const File f = File::parse(b);
      for (const TensorInfo& t : f.tensors())  // every tensor's bytes lie inside the buffer
        ASSERT_LE(static_cast<const uint8_t*>(t.data) + t.n_bytes, b.data() + b.size());
      ++ok;
    } catch (const FormatError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(ok, 0);
}

TEST(Gguf, TypeTables) {
  EXPECT_STREQ(ggml_type_name(GgmlType::BF16), "BF16");
  EXPECT_STREQ(ggml_type_name(GgmlType(4)), "unknown");
  EXPECT_EQ(ggml_block_bytes(GgmlType::Q4_1), 20);
  EXPECT_EQ(ggml_block_elems(GgmlType::Q6_K), 256);
  EXPECT_EQ(ggml_block_bytes(GgmlType::Q6_K), 210);
  EXPECT_THROW(ggml_block_bytes(GgmlType(99)), InvalidArgument);
  for (GgmlType t :
       {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
        GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K})
    EXPECT_TRUE(ggml_type_supported(t));
  EXPECT_FALSE(ggml_type_supported(GgmlType::IQ4_XS));
  EXPECT_FALSE(ggml_type_supported(GgmlType::Q8_K));
  EXPECT_STREQ(value_type_name(ValueType::boolean), "bool");
}

// Model names: "" and the short names of known_models() resolve to files in the cache (the
// default: default_model_path()); anything else is returned as given, for the caller to open.
TEST(GgufModelNames, ResolveNamesAndPassPathsThrough) {
  ASSERT_FALSE(known_models().empty());
  EXPECT_STREQ(known_models()[0].file, kDefaultModelName);
  for (const KnownModel& m : known_models())
    EXPECT_EQ(resolve_model(std::string("x/") + m.name), std::string("x/") + m.name);
  EXPECT_EQ(resolve_model("some/file.gguf"), "some/file.gguf");
  EXPECT_EQ(resolve_model("SMOLLM2-135M"), "SMOLLM2-135M");  // names are exact
  const std::string path = default_model_path();
  if (path.empty()) GTEST_SKIP() << "skipped: default model not found (run scripts/fetch-model or set LLMK_MODEL)";
  EXPECT_EQ(resolve_model(""), path);
  if (!std::getenv("LLMK_MODEL")) EXPECT_EQ(resolve_model(known_models()[0].name), path);
}

// The real default model, when it is here: its shape and tokenizer metadata as published.
TEST(GgufDefaultModel, SmolLM2Metadata) {
  const std::string path = default_model_path();
  if (path.empty()) GTEST_SKIP() << "skipped: default model not found (run scripts/fetch-model or set LLMK_MODEL)";
  const File f = File::open(path);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_u32("llama.block_count"), 30u);
  EXPECT_EQ(f.get_u32("llama.embedding_length"), 576u);
  EXPECT_EQ(f.get_u32("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(f.get_strings("tokenizer.ggml.tokens").size(), 49152u);
  const TensorInfo& e = f.tensor("token_embd.weight");
  EXPECT_EQ(e.ne, (std::array<int64_t, 4>{576, 49152, 1, 1}));  // ggml order: [in, out]
  EXPECT_EQ(e.type, GgmlType::Q8_0);
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").ne[0], 1536);
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").type, GgmlType::Q4_1);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied embeddings
  EXPECT_EQ(f.tensors().size(), 272u);
}

}  // namespace
}  // namespace llmk::gguf

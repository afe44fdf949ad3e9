// GGUF reader: mmap + a bounds-checked parser (see include/llmk/gguf.hpp for the layout).
// Every read goes through Parser::need(), which compares the requested length with what is
// left of the file (never computes pos + n before knowing it cannot overflow), so a
// truncated or lying file ends in a FormatError naming the offset and what was being read.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "gguf/gguf_internal.hpp"
#include "llmk/gguf.hpp"

namespace llmk::gguf {

struct File::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;
File::~File() = default;

namespace {
constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxDims = 4;
constexpr size_t kMaxTensorName = 63;  // ggml's GGML_MAX_NAME (64) less the NUL
constexpr int kMaxArrayDepth = 8;      // nested arrays deeper than this are refused
}  // namespace

struct Parser {
  std::span<const uint8_t> b;
  const std::string& name;
  uint64_t pos = 0;

  [[noreturn]] void fail(uint64_t at, const std::string& what) const {
    throw FormatError("gguf: " + name + ": at byte " + std::to_string(at) + ": " + what);
  }
  // Checks that n more bytes are there; returns their start.
  const uint8_t* need(uint64_t n, const std::string& what) {
    if (n > b.size() - pos)
      fail(pos, "truncated file: " + what + " needs " + std::to_string(n) + " bytes, " +
                    std::to_string(b.size() - pos) + " left");
    const uint8_t* p = b.data() + pos;
    pos += n;
    return p;
  }
  template <class T>
  T read(const std::string& what) {
    T v;
    std::memcpy(&v, need(sizeof(T), what), sizeof(T));
    return v;
  }
  std::string read_string(const std::string& what) {
    const uint64_t at = pos;
    const uint64_t len = read<uint64_t>(what + " length");
    if (len > b.size() - pos)
      fail(at, what + " has length " + std::to_string(len) + ", more than the " + std::to_string(b.size() - pos) +
                   " bytes left in the file");
    const uint8_t* p = need(len, what);
    return std::string(reinterpret_cast<const char*>(p), len);
  }
  ValueType read_type(const std::string& what) {
    const uint64_t at = pos;
    const uint32_t t = read<uint32_t>(what + " type");
    if (t > uint32_t(ValueType::f64)) fail(at, what + " has unknown value type " + std::to_string(t));
    return ValueType(t);
  }
  Value read_value(ValueType t, const std::string& what, int depth);
  void parse(File& f);
};

Value Parser::read_value(ValueType t, const std::string& what, int depth) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::u8: v.u = read<uint8_t>(what); break;
    case ValueType::i8: v.i = read<int8_t>(what); break;
    case ValueType::u16: v.u = read<uint16_t>(what); break;
    case ValueType::i16: v.i = read<int16_t>(what); break;
    case ValueType::u32: v.u = read<uint32_t>(what); break;
    case ValueType::i32: v.i = read<int32_t>(what); break;
    case ValueType::u64: v.u = read<uint64_t>(what); break;
    case ValueType::i64: v.i = read<int64_t>(what); break;
    case ValueType::f32: v.f = read<float>(what); break;
    case ValueType::f64: v.f = read<double>(what); break;
    case ValueType::boolean: {
      const uint64_t at = pos;
      const uint8_t x = read<uint8_t>(what);
      if (x > 1) fail(at, what + ": bool has value " + std::to_string(x) + " (must be 0 or 1)");
      v.u = x;
      break;
    }
    case ValueType::string: v.str = read_string(what); break;
    case ValueType::array: {
      const uint64_t at = pos;
      if (depth >= kMaxArrayDepth)
        fail(at, what + ": arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
      v.elem = read_type(what + " element");
      v.count = read<uint64_t>(what + " count");
      // Every element takes at least one byte (strings 8, arrays 12): bound the count by
      // what is left before reserving anything.
      const uint64_t min_elem = v.elem == ValueType::string ? 8 : v.elem == ValueType::array ? 12 : value_size(v.elem);
      if (v.count > (b.size() - pos) / min_elem)
        fail(at, what + ": array of " + std::to_string(v.count) + " " + value_type_name(v.elem) +
                     " elements does not fit in the " + std::to_string(b.size() - pos) + " bytes left");
      if (v.elem == ValueType::string) {
        v.strs.reserve(v.count);
        for (uint64_t k = 0; k < v.count; ++k) v.strs.push_back(read_string(what + "[" + std::to_string(k) + "]"));
      } else if (v.elem == ValueType::array) {
        for (uint64_t k = 0; k < v.count; ++k)
          v.items.push_back(read_value(ValueType::array, what + "[" + std::to_string(k) + "]", depth + 1));
      } else {
        const uint8_t* p = need(v.count * min_elem, what + " elements");
        if (v.elem == ValueType::boolean)
          for (uint64_t k = 0; k < v.count; ++k)
            if (p[k] > 1) fail(at, what + "[" + std::to_string(k) + "]: bool has value " + std::to_string(p[k]));
        v.raw.assign(p, p + v.count * min_elem);
      }
      break;
    }
  }
  return v;
}

void Parser::parse(File& f) {
  const uint32_t magic = read<uint32_t>("magic");
  if (magic != kMagic) {
    char m[5] = {};
    std::memcpy(m, b.data(), 4);
    for (char& c : m)
      if (c && (c < 32 || c > 126)) c = '?';
    fail(0, std::string("bad magic '") + m + "' (not a GGUF file)");
  }
  f.version_ = read<uint32_t>("version");
  if (f.version_ != 2 && f.version_ != 3) {
    if ((f.version_ & 0xffff) == 0 && f.version_ != 0)
      fail(4, "version " + std::to_string(f.version_) + " looks byte-swapped: big-endian GGUF is not supported");
    fail(4, "unsupported version " + std::to_string(f.version_) + " (llmk reads versions 2 and 3)");
  }
  const uint64_t n_tensors = read<uint64_t>("tensor_count");
  const uint64_t n_kv = read<uint64_t>("kv_count");
  // No reserve() from the counts: they are bounded by the file size, but a large lying file
  // would still make a large allocation. Vectors grow as entries are actually read.
  std::unordered_set<std::string> keys;
  for (uint64_t k = 0; k < n_kv; ++k) {
    const uint64_t at = pos;
    std::string key = read_string("key of metadata pair " + std::to_string(k));
    if (key.empty()) fail(at, "metadata pair " + std::to_string(k) + " has an empty key");
    const ValueType t = read_type("value of '" + key + "'");
    Value v = read_value(t, "value of '" + key + "'", 0);
    if (!keys.insert(key).second) fail(at, "duplicate metadata key '" + key + "'");
    f.kv_.emplace_back(std::move(key), std::move(v));
  }
  for (size_t k = 0; k < f.kv_.size(); ++k) f.kv_index_.emplace(f.kv_[k].first, k);

  if (const Value* a = f.find("general.alignment")) {
    if (a->type != ValueType::u32)
      fail(0, std::string("'general.alignment' has type ") + value_type_name(a->type) + ", expected u32");
    if (a->u == 0 || (a->u & (a->u - 1)) != 0)
      fail(0, "'general.alignment' = " + std::to_string(a->u) + ": must be a power of two");
    f.alignment_ = a->u;
  }

  std::vector<uint64_t> info_at;  // where each tensor info starts, for error messages
  for (uint64_t k = 0; k < n_tensors; ++k) {
    const uint64_t at = pos;
    TensorInfo ti;
    ti.name = read_string("name of tensor " + std::to_string(k));
    const std::string what = "tensor '" + ti.name + "'";
    if (ti.name.size() > kMaxTensorName)
      fail(at, what + ": name longer than " + std::to_string(kMaxTensorName) + " bytes");
    const uint64_t dims_at = pos;
    const uint32_t n_dims = read<uint32_t>(what + " n_dims");
    if (n_dims > kMaxDims) fail(dims_at, what + " has n_dims = " + std::to_string(n_dims) + " (at most 4)");
    ti.n_dims = int(n_dims);
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = read<uint64_t>(what + " dim " + std::to_string(d));
      if (ne > uint64_t(std::numeric_limits<int64_t>::max()))
        fail(dims_at, what + " dim " + std::to_string(d) + " = " + std::to_string(ne) + " is negative as int64");
      if (ne != 0 && n > uint64_t(std::numeric_limits<int64_t>::max()) / ne)
        fail(dims_at, what + ": the product of its dims overflows int64");
      n *= ne;
      ti.ne[d] = int64_t(ne);
    }
    const uint64_t type_at = pos;
    const uint32_t type = read<uint32_t>(what + " type");
    ti.type = GgmlType(type);
    if (!ggml_type_known(ti.type)) fail(type_at, what + " has unknown ggml type " + std::to_string(type));
    const int64_t be = ggml_block_elems(ti.type), bb = ggml_block_bytes(ti.type);
    if (ti.ne[0] % be != 0)
      fail(dims_at, what + ": ne[0] = " + std::to_string(ti.ne[0]) + " is not a multiple of " +
                        ggml_type_name(ti.type) + "'s block of " + std::to_string(be));
    // Both bounds before any multiplication by the block size (another dim may be 0, so a
    // row can be larger than the whole tensor).
    const uint64_t row_blocks = uint64_t(ti.ne[0]) / uint64_t(be), blocks = n / uint64_t(be);
    if (row_blocks > b.size() / uint64_t(bb) || blocks > b.size() / uint64_t(bb))
      fail(dims_at, what + ": " + std::to_string(n) + " elements (rows of " + std::to_string(ti.ne[0]) +
                        ") cannot fit in the file");
    ti.n_elements = int64_t(n);
    ti.row_bytes = int64_t(row_blocks * uint64_t(bb));
    ti.n_bytes = int64_t(blocks * uint64_t(bb));
    const uint64_t off_at = pos;
    ti.offset = read<uint64_t>(what + " offset");
    if (ti.offset % f.alignment_ != 0)
      fail(off_at, what + " has offset " + std::to_string(ti.offset) + ", not a multiple of the alignment " +
                       std::to_string(f.alignment_));
    f.tensors_.push_back(std::move(ti));
    info_at.push_back(at);
  }
  // The index views the names inside tensors_, which no longer moves.
  for (size_t k = 0; k < f.tensors_.size(); ++k)
    if (!f.tensor_index_.emplace(f.tensors_[k].name, k).second)
      fail(info_at[k], "duplicate tensor name '" + f.tensors_[k].name + "'");

  const uint64_t pad = (f.alignment_ - pos % f.alignment_) % f.alignment_;
  if (n_tensors > 0 && pad > b.size() - pos) fail(pos, "truncated file: padding before the data section");
  f.data_offset_ = n_tensors > 0 ? pos + pad : std::min<uint64_t>(pos + pad, b.size());
  const uint64_t data_size = b.size() - f.data_offset_;
  for (TensorInfo& ti : f.tensors_) {
    if (ti.offset > data_size || uint64_t(ti.n_bytes) > data_size - ti.offset)
      fail(f.data_offset_ + std::min(ti.offset, data_size),
           "tensor '" + ti.name + "' data [" + std::to_string(ti.offset) + ", +" + std::to_string(ti.n_bytes) +
               ") runs past the end of the data section (" + std::to_string(data_size) + " bytes)");
    ti.data = b.data() + f.data_offset_ + ti.offset;
  }
}

File File::parse(std::span<const uint8_t> bytes, std::string name) {
  File f;
  f.name_ = std::move(name);
  f.bytes_ = bytes;
  Parser p{bytes, f.name_};
  p.parse(f);
  return f;
}

File File::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw RuntimeError("gguf: cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw RuntimeError("gguf: '" + path + "' is not a regular file");
  }
  auto map = std::make_unique<Mapping>();
  map->size = size_t(st.st_size);
  if (map->size > 0) {
    map->addr = mmap(nullptr, map->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map->addr == MAP_FAILED) {
      map->addr = nullptr;
      ::close(fd);
      throw RuntimeError("gguf: cannot mmap '" + path + "': " + std::strerror(errno));
    }
  }
  ::close(fd);
  std::span<const uint8_t> bytes(static_cast<const uint8_t*>(map->addr), map->size);
  File f = parse(bytes, path);
  f.map_ = std::move(map);
  return f;
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (!t) throw FormatError("gguf: " + name_ + ": no tensor named '" + std::string(name) + "'");
  if (!ggml_type_supported(t->type))
    throw FormatError("gguf: " + name_ + ": tensor '" + t->name + "' has ggml type " + ggml_type_name(t->type) + " (" +
                      std::to_string(uint32_t(t->type)) +
                      "), which llmk does not compute with (supported: " + supported_types_list() + ")");
  return *t;
}

}  // namespace llmk::gguf

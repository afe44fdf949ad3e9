// TensorView: a small non-owning view (pointer, dtype, device, shape, strides).
// Shapes and strides are 64-bit and counted in elements, so offsets never
// overflow (llama2.c's 13B lesson). Most ops take 2-D views [rows, cols] whose
// last dimension is contiguous (stride[1] = 1: the ops reject another, since
// their kernels take a row stride only) and whose row stride may exceed cols.
// Buffer: an owning, 64-byte-aligned host allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "llmk/dtype.hpp"

namespace llmk {

enum class Device : uint8_t { cpu, cuda };
const char* device_name(Device d);

struct TensorView {
  static constexpr int kMaxDims = 4;
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};  // in elements

  // [rows, cols] with the given row stride (elements; >= cols).
  static TensorView matrix(const void* p, DType t, int64_t rows, int64_t cols, int64_t row_stride = -1,
                           Device dev = Device::cpu);
  static TensorView vector(const void* p, DType t, int64_t n, Device dev = Device::cpu);

  int64_t numel() const;
  int64_t rows() const { return ndim >= 2 ? shape[ndim - 2] : 1; }
  int64_t cols() const { return ndim >= 1 ? shape[ndim - 1] : 1; }
  int64_t row_stride() const { return ndim >= 2 ? stride[ndim - 2] : cols(); }
  bool empty() const { return data == nullptr; }
  template <class T>
  T* ptr() const {
    return static_cast<T*>(data);
  }
  // e.g. "f32[8, 1024] row_stride 1056 on cpu": the row stride when it is not
  // cols(), the last dimension's stride ("stride[1] 2") when it is not 1.
  std::string describe() const;
};

// True when two views (on the same device) may share a byte: their address
// ranges [first element, last element] intersect. Conservative for views that
// interleave without touching (two column slices of one matrix count as
// overlapping). Empty views (null data or no elements) overlap nothing. The
// APIs reject outputs that overlap an input or another output with it, so
// no input is overwritten while it is still read.
bool views_overlap(const TensorView& a, const TensorView& b);
// The same for raw ranges of a_bytes at a and b_bytes at b.
bool ranges_overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes);

// A 2-d view whose rows are read as consecutive elements: stride[1] = 1 (any
// for a single column, never used), else InvalidArgument naming fn, `what`
// and the view's describe() (which shows the stride).
void check_last_contiguous(const char* fn, const char* what, const TensorView& t);

// What a reader of B rows of V elements needs of a 2-d view `t` (softmax_topk,
// sample, sample_cuda), else InvalidArgument naming fn and `what`: B >= 0,
// 1 <= V <= 2^31 - 1 (int32 indices), rows at least V apart, a row's V
// elements consecutive (stride[1] = 1; any for one column, never used), data
// non-null when B > 0. The dtype, device and alignment are the caller's.
void check_rows_view(const char* fn, const char* what, const TensorView& t);

// Owning host memory, 64-byte aligned (one cache line, one AVX-512 vector).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes);
  // `align` bytes aligned (a power of two >= 64; the size is rounded up to a multiple of it).
  Buffer(size_t bytes, size_t align);
  void* data() const { return p_.get(); }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_.get());
  }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> p_;
  size_t bytes_ = 0;
};

}  // namespace llmk

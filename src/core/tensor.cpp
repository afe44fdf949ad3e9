// TensorView constructors and Buffer allocation.
#include "llmk/tensor.hpp"

#include <cstdlib>
#include <new>
#include <sstream>

#include "llmk/error.hpp"

namespace llmk {

const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

TensorView TensorView::matrix(const void* p, DType t, int64_t rows, int64_t cols, int64_t row_stride, Device dev) {
  LLMK_CHECK_ARG(rows >= 0, "TensorView::matrix", "rows", rows, "must be >= 0");
  LLMK_CHECK_ARG(cols >= 0, "TensorView::matrix", "cols", cols, "must be >= 0");
  if (row_stride < 0) row_stride = cols;
  LLMK_CHECK_ARG(row_stride >= cols, "TensorView::matrix", "row_stride", row_stride, "must be >= cols");
  TensorView v;
  v.data = const_cast<void*>(p);
  v.dtype = t;
  v.device = dev;
  v.ndim = 2;
  v.shape[0] = rows;
  v.shape[1] = cols;
  v.stride[0] = row_stride;
  v.stride[1] = 1;
  return v;
}

TensorView TensorView::vector(const void* p, DType t, int64_t n, Device dev) {
  LLMK_CHECK_ARG(n >= 0, "TensorView::vector", "n", n, "must be >= 0");
  TensorView v;
  v.data = const_cast<void*>(p);
  v.dtype = t;
  v.device = dev;
  v.ndim = 1;
  v.shape[0] = n;
  v.stride[0] = 1;
  return v;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

std::string TensorView::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << "[";
  for (int i = 0; i < ndim; ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  if (ndim >= 2 && row_stride() != cols()) os << " row_stride " << row_stride();
  os << " on " << device_name(device);
  return os.str();
}

Buffer::Buffer(size_t bytes) : Buffer(bytes, 64) {}

Buffer::Buffer(size_t bytes, size_t align) : bytes_(bytes) {
  LLMK_CHECK_ARG(align >= 64 && (align & (align - 1)) == 0, "Buffer", "align", align, "must be a power of two >= 64");
  if (bytes == 0) return;
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
  p_.reset(p);
}

void Buffer::Free::operator()(void* p) const { std::free(p); }

}  // namespace llmk

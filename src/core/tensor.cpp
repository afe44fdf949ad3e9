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
  if (ndim >= 1 && stride[ndim - 1] != 1) os << " stride[" << ndim - 1 << "] " << stride[ndim - 1];
  os << " on " << device_name(device);
  return os.str();
}

void check_last_contiguous(const char* fn, const char* what, const TensorView& t) {
  LLMK_CHECK_ARG(t.cols() <= 1 || t.stride[1] == 1, fn, what, t.describe(),
                 "last dimension must be contiguous (stride[1] = 1)");
}

void check_rows_view(const char* fn, const char* what, const TensorView& t) {
  LLMK_CHECK_ARG(t.ndim == 2, fn, what, t.describe(), "must be a 2-d view [B, V]");
  LLMK_CHECK_ARG(t.rows() >= 0 && t.cols() >= 1 && t.cols() <= INT32_MAX, fn, what, t.describe(),
                 "needs B >= 0 and 1 <= V <= 2^31 - 1 (int32 indices)");
  LLMK_CHECK_ARG(t.rows() <= 1 || t.row_stride() >= t.cols(), fn, what, t.describe(), "row stride must be >= V");
  check_last_contiguous(fn, what, t);
  LLMK_CHECK_ARG(t.rows() == 0 || t.data != nullptr, fn, what, t.describe(), "data is null");
}

bool ranges_overlap(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes) {
  if (!a || !b || a_bytes <= 0 || b_bytes <= 0) return false;
  const auto a0 = reinterpret_cast<uintptr_t>(a), b0 = reinterpret_cast<uintptr_t>(b);
  return a0 < b0 + uintptr_t(b_bytes) && b0 < a0 + uintptr_t(a_bytes);
}

namespace {
// [lowest, highest] element offsets of a view, in elements from data; false when it has no element.
bool element_span(const TensorView& v, int64_t& lo, int64_t& hi) {
  lo = hi = 0;
  if (v.data == nullptr) return false;
  for (int i = 0; i < v.ndim; ++i) {
    if (v.shape[i] <= 0) return false;
    const int64_t reach = (v.shape[i] - 1) * v.stride[i];
    (reach < 0 ? lo : hi) += reach;
  }
  return true;
}
}  // namespace

bool views_overlap(const TensorView& a, const TensorView& b) {
  if (a.device != b.device) return false;
  int64_t alo, ahi, blo, bhi;
  if (!element_span(a, alo, ahi) || !element_span(b, blo, bhi)) return false;
  const int64_t as = int64_t(dtype_size(a.dtype)), bs = int64_t(dtype_size(b.dtype));
  return ranges_overlap(static_cast<const char*>(a.data) + alo * as, (ahi - alo + 1) * as,
                        static_cast<const char*>(b.data) + blo * bs, (bhi - blo + 1) * bs);
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

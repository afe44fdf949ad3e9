// Threads. llmk uses OpenMP; the thread count defaults to the number of cores
// OpenMP sees (OMP_NUM_THREADS or LLMK_THREADS override it) and can be set at
// run time. Results never depend on timing (the split rules: docs/ARCHITECTURE.md, Threads).
#pragma once

namespace llmk {

inline constexpr int kMaxThreads = 1024;  // more than any machine's cores; OpenMP fails on ~10^5

int num_threads();
void set_num_threads(int n);  // 1 <= n <= kMaxThreads; throws InvalidArgument otherwise

}  // namespace llmk

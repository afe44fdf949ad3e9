// Threads. llmk uses OpenMP; the thread count defaults to the number of cores
// OpenMP sees (OMP_NUM_THREADS or LLMK_THREADS override it) and can be set at
// run time. Kernels split rows statically, so results never depend on timing.
#pragma once

namespace llmk {

int num_threads();
void set_num_threads(int n);  // n >= 1; throws InvalidArgument otherwise

}  // namespace llmk

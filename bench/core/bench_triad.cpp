// `llmk bench triad`: the machine's own bandwidth (STREAM triad), the yardstick
// every other CPU bench quotes.
#include "bench/common/bench.hpp"
#include "llmk/parallel.hpp"

namespace llmk::bench {
namespace {
int run(const Options& opt) {
  Reporter rep(opt, "triad", "STREAM triad a = b + s*c over 3 double arrays; bytes = 3 * 8 * n (no write-allocate)");
  const size_t bytes = opt.quick ? (48u << 20) : (768u << 20);
  const int threads = opt.threads > 0 ? opt.threads : num_threads();
  for (int t : {1, threads}) {
    const double gbps = stream_triad_gbps(t, bytes);
    Row r{"triad", "stream", "triad", std::to_string(bytes >> 20) + "MiB", "f64", double(bytes) / (gbps * 1e6),
          gbps,    {}};
    r.extra["threads"] = std::to_string(t);
    rep.add(r);
    if (t == threads) break;
  }
  return 0;
}
}  // namespace
LLMK_BENCH("triad", "STREAM triad bandwidth of this machine", run);
}  // namespace llmk::bench

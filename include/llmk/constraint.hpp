// A per-request constraint on the tokens the engine may sample (structured output: llmk/grammar.hpp).
//
// Request::constraint holds an immutable Constraint shared by any number of requests; the engine calls
// start() once per request and, at each of its steps, on that request's state: mask() on the logits
// row before sampling (disallowed tokens become -inf, so they never reach softmax / top-k, in every
// sampling mode), then accept() with the sampled token. A state is used by one thread at a time.
#pragma once
#include <cstdint>
#include <memory>

namespace llmk {

class ConstraintState {
 public:
  virtual ~ConstraintState() = default;
  // Sets logits[t] = -inf for every t in [0, v) the constraint does not allow next. An end-of-generation
  // token is allowed exactly when the text so far is complete. At least one token stays allowed.
  virtual void mask(float* logits, int64_t v) = 0;
  // Advances past token t; throws llmk::InvalidArgument when t was not allowed.
  virtual void accept(int32_t t) = 0;
  // True when the text is complete and nothing may follow it (the request ends: Finish::stop).
  virtual bool done() const = 0;
};

class Constraint {
 public:
  virtual ~Constraint() = default;
  virtual std::unique_ptr<ConstraintState> start() const = 0;
};

}  // namespace llmk

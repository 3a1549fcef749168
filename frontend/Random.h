// Random numbers of the eager frontend: the generator dropout draws from.
//
// As PyTorch's Philox generator, the state is a seed and an offset: each
// dropout uses the current offset and advances it by one, and its mask is a
// pure function of (seed, offset, element index) (rt::dropoutWord), so a
// compiled step that starts from the same state draws the same masks as
// eager code, on every device.
#ifndef MODELC_FRONTEND_RANDOM_H
#define MODELC_FRONTEND_RANDOM_H

#include "frontend/Tensor.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mc {

class Generator {
public:
  Generator();
  /// The process's generator (torch.default_generator): what dropout draws
  /// from. Not synchronized: draw from one thread at a time.
  static Generator& global();

  /// Seed `seed`, offset 0 (mc::manualSeed seeds this and the
  /// initializers' generator, as torch.manual_seed).
  void manualSeed(uint64_t seed);
  uint64_t seed() const;
  uint64_t offset() const;
  /// Sets the offset (a compiled training step hands back where it got to:
  /// jit::TrainingStep::copyParametersTo).
  void setOffset(uint64_t offset);

  /// The seed and offset of the next draw (i64 scalars), and advances the
  /// offset by one. Eager: fresh tensors holding the values. Traced: the
  /// state `rng.seed` and `rng.offset` (a traced step reads them and stores
  /// the offset its draws reached, so each call of the step draws new
  /// masks), the offset of the run's k-th draw being rng.offset + k.
  std::pair<Tensor, Tensor> draw();

  /// The state tensors under their traced names ("rng.seed",
  /// "rng.offset"): the tracer makes them buffers (globals tagged
  /// mc.buffer, declared only if a draw reads them).
  std::vector<std::pair<std::string, Tensor>> stateBuffers() const;

private:
  Tensor seed_, offset_; // i64 scalars
  /// Within a traced run: the offset value the run's next draw uses.
  Tensor next_;
  uint64_t epoch_ = 0;
};

/// An i64 scalar of exactly `v` (its bits: a seed past 2^63 too);
/// Tensor::scalar goes through a double.
Tensor i64Scalar(uint64_t v);

/// torch.nn.functional.dropout: in training, elements zeroed with
/// probability p and the rest scaled by 1 / (1 - p), the mask drawn from
/// the global generator (mc.dropout); the identity when not training or
/// p = 0. p in [0, 1].
Tensor dropout(const Tensor& x, double p, bool training = true);

} // namespace mc

#endif // MODELC_FRONTEND_RANDOM_H

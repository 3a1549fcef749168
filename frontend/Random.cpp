#include "frontend/Random.h"

#include "frontend/Autograd.h"
#include "frontend/Ops.h"
#include "frontend/TraceHook.h"

#include <cstring>

namespace mc {

Tensor i64Scalar(uint64_t v) {
  Tensor t = Tensor::empty({}, DType::I64);
  std::memcpy(t.rawData(), &v, sizeof v);
  return t;
}

namespace {

uint64_t valueOf(const Tensor& t) {
  uint64_t v;
  std::memcpy(&v, t.rawData(), sizeof v);
  return v;
}

} // namespace

Generator::Generator() : seed_(i64Scalar(0)), offset_(i64Scalar(0)) {}

Generator& Generator::global() {
  static Generator g;
  return g;
}

void Generator::manualSeed(uint64_t seed) {
  std::memcpy(seed_.rawData(), &seed, sizeof seed);
  setOffset(0);
}

uint64_t Generator::seed() const { return valueOf(seed_); }
uint64_t Generator::offset() const { return valueOf(offset_); }

void Generator::setOffset(uint64_t offset) {
  std::memcpy(offset_.rawData(), &offset, sizeof offset);
  epoch_ = 0;
}

std::pair<Tensor, Tensor> Generator::draw() {
  TraceHook* hook = activeTraceHook();
  if (!hook) {
    // Copies: autograd keeps the draw's tensors for the backward dropout,
    // and the state moves on.
    uint64_t at = offset();
    std::memcpy(offset_.rawData(), &(++at), sizeof at);
    return {i64Scalar(seed()), i64Scalar(at - 1)};
  }
  // Traced: the state tensors themselves (globals of the step), the run's
  // draws after the first reading rng.offset + k. The state keeps its value
  // (as a traced BatchNorm's running statistics); the step stores the
  // offset its last draw reached.
  if (epoch_ != activeTraceEpoch()) {
    epoch_ = activeTraceEpoch();
    next_ = offset_;
  }
  Tensor at = next_;
  {
    NoGradGuard noGrad;
    next_ = add(at, Tensor::scalar(1, DType::I64));
  }
  hook->assign(offset_, next_);
  return {seed_, at};
}

std::vector<std::pair<std::string, Tensor>> Generator::stateBuffers() const {
  return {{"rng.seed", seed_}, {"rng.offset", offset_}};
}

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!(p >= 0 && p <= 1))
    throw Error("dropout: p must be in [0, 1], got " + std::to_string(p));
  if (!training || p == 0)
    return x;
  auto [seed, offset] = Generator::global().draw();
  return dropout(x, seed, offset, p);
}

} // namespace mc

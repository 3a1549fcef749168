// Shared by the runtime tests: a small plan with weights (matmul, broadcast,
// add, relu, softmax, reductions, an alias) and its reference result,
// written as plain loops; tensor views over vectors; running a tool as a
// subprocess.
#ifndef MODELC_TEST_RUNTIME_TESTUTIL_H
#define MODELC_TEST_RUNTIME_TESTUTIL_H

#include "codegen/ArtifactWriter.h"
#include "codegen/MemoryPlanner.h"
#include "codegen/Plan.h"
#include "modelc/device.h"

#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <random>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <vector>
#include <zlib.h>

extern char **environ;

namespace mc::test {

/// How many times slower code runs under ASan and UBSan (scripts/sanitize):
/// what a test's time limit allows for there.
#if defined(__SANITIZE_ADDRESS__)
constexpr double kSanitizerSlowdown = 20;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr double kSanitizerSlowdown = 20;
#else
constexpr double kSanitizerSlowdown = 1;
#endif
#else
constexpr double kSanitizerSlowdown = 1;
#endif

inline std::vector<uint8_t> floatBytes(const std::vector<float> &v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline std::vector<float> randomFloats(size_t n, unsigned seed, float lo = -1,
                                       float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

constexpr int kBatch = 4, kIn = 8, kHidden = 16;

inline std::vector<float> mlpWeights() {
  return randomFloats(kIn * kHidden, 11);
}
inline std::vector<float> mlpBias() { return randomFloats(kHidden, 12); }
inline std::vector<float> mlpInput() {
  return randomFloats(kBatch * kIn, 13, -2, 2);
}

/// Sets attribute `a` on step `s`, replacing one of the same name.
inline codegen::PlanStep &setAttr(codegen::PlanStep &s, rt::OpAttr a) {
  for (rt::OpAttr &x : s.attrs.all())
    if (x.name == a.name) {
      x = std::move(a);
      return s;
    }
  s.attrs.all().push_back(std::move(a));
  return s;
}
inline codegen::PlanStep &setBool(codegen::PlanStep &s, std::string name,
                                  bool v) {
  return setAttr(s, rt::OpAttr::boolean(std::move(name), v));
}
inline codegen::PlanStep &setInt(codegen::PlanStep &s, std::string name,
                                 int64_t v) {
  return setAttr(s, rt::OpAttr::integer(std::move(name), v));
}
inline codegen::PlanStep &setFloat(codegen::PlanStep &s, std::string name,
                                   double v) {
  return setAttr(s, rt::OpAttr::real(std::move(name), v));
}
inline codegen::PlanStep &setInts(codegen::PlanStep &s, std::string name,
                                  std::vector<int64_t> v) {
  return setAttr(s, rt::OpAttr::list(std::move(name), std::move(v)));
}
/// Removes attribute `name` from step `s` (if present).
inline void eraseAttr(codegen::PlanStep &s, const std::string &name) {
  auto &all = s.attrs.all();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].name == name) {
      all.erase(all.begin() + i);
      return;
    }
}

/// Appends a step running `op` on `in` into `out` and returns it.
inline codegen::PlanStep &addStep(codegen::Plan &p, rt::OpId op,
                                  std::vector<uint32_t> in, uint32_t out,
                                  std::string location = "") {
  codegen::PlanStep s;
  s.op = op;
  s.inputs = std::move(in);
  s.outputs = {out};
  s.location = std::move(location);
  p.steps.push_back(std::move(s));
  return p.steps.back();
}

/// x f32[4,8] -> probs = softmax(relu(x @ w + b), 1), mean = reduce_mean of
/// the relu over dim 1 (keepdim), max = reduce_max over a [64] view of it.
inline codegen::Plan mlpPlan() {
  using codegen::PlanBuffer;
  using codegen::PlanStep;
  codegen::Plan p;
  p.entry = "mlp";
  p.targets = {"cpu"};
  auto buf = [&](std::string name, std::vector<int64_t> shape,
                 fb::BufferKind kind = fb::BufferKind::Arena) {
    PlanBuffer b;
    b.name = std::move(name);
    b.shape = std::move(shape);
    b.kind = kind;
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  };
  uint32_t x = buf("x", {kBatch, kIn});
  uint32_t w = buf("w", {kIn, kHidden}, fb::BufferKind::Constant);
  uint32_t b = buf("b", {kHidden}, fb::BufferKind::Constant);
  p.buffers[w].data = floatBytes(mlpWeights());
  p.buffers[b].data = floatBytes(mlpBias());
  uint32_t h = buf("h", {kBatch, kHidden});
  uint32_t bb = buf("bb", {kBatch, kHidden});
  uint32_t h2 = buf("h2", {kBatch, kHidden});
  uint32_t h3 = buf("h3", {kBatch, kHidden});
  uint32_t probs = buf("probs", {kBatch, kHidden});
  uint32_t mean = buf("mean", {kBatch, 1});
  uint32_t mx = buf("max", {});
  uint32_t flat = buf("h3_flat", {kBatch * kHidden});
  p.buffers[flat].aliasOf = h3;
  auto step = [&](rt::OpId op, std::vector<uint32_t> in,
                  uint32_t out) -> PlanStep & {
    return addStep(p, op, std::move(in), out,
                   "mlp.py:" + std::to_string(p.steps.size() + 1));
  };
  using O = rt::OpId;
  step(O::Matmul, {x, w}, h);
  setInts(step(O::BroadcastInDim, {b}, bb), "dims", {1});
  step(O::Add, {h, bb}, h2);
  step(O::Relu, {h2}, h3);
  setInt(step(O::Softmax, {h3}, probs), "axis", 1);
  PlanStep &m = step(O::ReduceMean, {h3}, mean);
  setInts(m, "dims", {1});
  setBool(m, "keepdim", true);
  setInts(step(O::ReduceMax, {flat}, mx), "dims", {0});
  p.inputs = {{"x", x}};
  p.outputs = {{"probs", probs}, {"mean", mean}, {"max", mx}};
  return p;
}

inline constexpr int64_t kDynMin = 1, kDynMax = 64, kDynOpt = 32;
inline constexpr int kDIn = 8, kDHidden = 16;

/// A dynamic batch (schema 2.1): x f32[B, 8], y f32[B, 16] -> h = relu(x @ w +
/// b + y); probs = softmax(h, 1); colmean = reduce_mean(h, dims 0) (divides by
/// the runtime B); total = reduce_sum(probs, dims [0, 1]) (about B). `dynamic`:
/// shapes at kDynMax with batch scales and bounds [1, 64] (opt 32); else every
/// shape static at `batch`.
inline codegen::Plan batchMlpPlan(int64_t batch, bool dynamic) {
  codegen::Plan p;
  p.entry = "dyn_mlp";
  p.targets = {"cpu"};
  int64_t rows = dynamic ? kDynMax : batch;
  if (dynamic)
    p.batch = codegen::PlanBatch{kDynMin, kDynMax, kDynOpt};
  auto buf = [&](std::string name, rt::Shape shape,
                 std::vector<int64_t> scale = {},
                 fb::BufferKind kind = fb::BufferKind::Arena) {
    codegen::PlanBuffer b;
    b.name = std::move(name);
    b.shape = std::move(shape);
    b.kind = kind;
    if (dynamic)
      b.batchScale = std::move(scale);
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  };
  const std::vector<int64_t> rowScale{1, 0};
  uint32_t x = buf("x", {rows, kDIn}, rowScale);
  uint32_t y = buf("y", {rows, kDHidden}, rowScale);
  uint32_t w = buf("w", {kDIn, kDHidden}, {}, fb::BufferKind::Constant);
  uint32_t b = buf("b", {kDHidden}, {}, fb::BufferKind::Constant);
  p.buffers[w].data = floatBytes(randomFloats(kDIn * kDHidden, 31));
  p.buffers[b].data = floatBytes(randomFloats(kDHidden, 32));
  uint32_t h = buf("h", {rows, kDHidden}, rowScale);
  uint32_t bb = buf("bb", {rows, kDHidden}, rowScale);
  uint32_t h2 = buf("h2", {rows, kDHidden}, rowScale);
  uint32_t h3 = buf("h3", {rows, kDHidden}, rowScale);
  uint32_t h4 = buf("h4", {rows, kDHidden}, rowScale);
  uint32_t probs = buf("probs", {rows, kDHidden}, rowScale);
  uint32_t colmean = buf("colmean", {kDHidden});
  uint32_t total = buf("total", {});
  auto step = [&](rt::OpId op, std::vector<uint32_t> in,
                  uint32_t out) -> codegen::PlanStep & {
    return addStep(p, op, std::move(in), out,
                   "dyn.py:" + std::to_string(p.steps.size() + 1));
  };
  step(rt::OpId::Matmul, {x, w}, h);
  setInts(step(rt::OpId::BroadcastInDim, {b}, bb), "dims", {1});
  step(rt::OpId::Add, {h, bb}, h2);
  step(rt::OpId::Add, {h2, y}, h3);
  step(rt::OpId::Relu, {h3}, h4);
  setInt(step(rt::OpId::Softmax, {h4}, probs), "axis", 1);
  codegen::PlanStep &m = step(rt::OpId::ReduceMean, {h4}, colmean);
  setInts(m, "dims", {0});
  setBool(m, "keepdim", false);
  codegen::PlanStep &s = step(rt::OpId::ReduceSum, {probs}, total);
  setInts(s, "dims", {0, 1});
  setBool(s, "keepdim", false);
  p.inputs = {{"x", x}, {"y", y}};
  p.outputs = {{"probs", probs}, {"colmean", colmean}, {"total", total}};
  return p;
}

struct MlpResult {
  std::vector<float> probs, mean;
  float max = 0;
};

inline MlpResult mlpReference(const std::vector<float> &x) {
  std::vector<float> w = mlpWeights(), b = mlpBias();
  std::vector<double> h(kBatch * kHidden);
  for (int i = 0; i < kBatch; ++i)
    for (int j = 0; j < kHidden; ++j) {
      double s = b[j];
      for (int k = 0; k < kIn; ++k)
        s += double(x[i * kIn + k]) * w[k * kHidden + j];
      h[i * kHidden + j] = s < 0 ? 0 : s;
    }
  MlpResult r;
  r.max = -INFINITY;
  for (int i = 0; i < kBatch; ++i) {
    double mx = -INFINITY, sum = 0, tot = 0;
    for (int j = 0; j < kHidden; ++j)
      mx = std::max(mx, h[i * kHidden + j]);
    for (int j = 0; j < kHidden; ++j)
      sum += std::exp(h[i * kHidden + j] - mx);
    for (int j = 0; j < kHidden; ++j) {
      r.probs.push_back(float(std::exp(h[i * kHidden + j] - mx) / sum));
      tot += h[i * kHidden + j];
    }
    r.mean.push_back(float(tot / kHidden));
    r.max = std::max(r.max, float(mx));
  }
  return r;
}

/// The planned plan's artifact bytes (fails the test on error).
inline std::vector<uint8_t> mlpArtifact() {
  codegen::Plan p = mlpPlan();
  std::vector<uint8_t> bytes;
  if (!codegen::planMemory(p) || !codegen::writeArtifactToBytes(p, &bytes))
    return {};
  return bytes;
}

/// `plan`'s artifact bytes without the writer's self-check, so the loader's
/// own verifier is what must object (empty when writing fails).
inline std::vector<uint8_t> writeUnchecked(const codegen::Plan &plan) {
  std::vector<uint8_t> b;
  codegen::WriteOptions o;
  o.verify = false;
  if (!codegen::writeArtifactToBytes(plan, &b, o))
    return {};
  return b;
}

/// Recomputes the trailer's table checksum after an edit of the table
/// (a no-op on a file too short to hold it).
inline void fixTableCrc(std::vector<uint8_t> &b) {
  uint32_t n = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16 |
               uint32_t(b[3]) << 24;
  if (4 + uint64_t(n) + 16 > b.size())
    return;
  uint32_t crc = uint32_t(::crc32(0, b.data(), uInt(4 + n)));
  for (int i = 0; i < 4; ++i)
    b[b.size() - 16 + i] = uint8_t(crc >> (8 * i));
}

/// Max relative error ||a-b|| / ||b||.
inline double relError(const float *a, const std::vector<float> &b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    n += double(b[i]) * b[i];
  }
  return n == 0 ? std::sqrt(d) : std::sqrt(d / n);
}

/// f32 views over vectors, for calling kernels in tests.
/// Floats rounded to f16 or bf16 (nearest even), as bits; and back.
inline std::vector<uint16_t> narrowBits(rt::DType t,
                                        const std::vector<float> &v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    b[i] = t == rt::DType::F16 ? rt::floatToHalf(v[i]) : rt::floatToBf16(v[i]);
  return b;
}
inline float widen(rt::DType t, uint16_t b) {
  return t == rt::DType::F16 ? rt::halfToFloat(b) : rt::bf16ToFloat(b);
}

/// Row-major multi-index of linear index i.
inline std::vector<int64_t> unravel(int64_t i, const rt::Shape &s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = s[d] ? i % s[d] : 0;
    i = s[d] ? i / s[d] : 0;
  }
  return idx;
}
inline int64_t ravel(const std::vector<int64_t> &idx, const rt::Shape &s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d)
    i = i * s[d] + idx[d];
  return i;
}

inline rt::ConstTensor cin(const std::vector<float> &v, rt::Shape s) {
  return {rt::DType::F32, std::move(s), v.data()};
}
inline rt::MutTensor mout(std::vector<float> &v, rt::Shape s) {
  return {rt::DType::F32, std::move(s), v.data()};
}

/// Runs the registered CPU kernel of `op` (the reference of every step) on
/// `inputs` into `out`; `constantInputs` as KernelRequest's.
inline rt::Status cpuKernel(rt::OpId op, const rt::OpAttrs &attrs,
                            std::vector<rt::ConstTensor> inputs,
                            const rt::MutTensor &out,
                            std::vector<bool> constantInputs = {}) {
  std::unique_ptr<rt::Device> cpu;
  MC_RETURN_IF_ERROR(rt::createDevice("cpu", &cpu));
  rt::KernelFactory f = rt::findKernel("cpu", op);
  if (!f)
    return rt::Status::error(std::string("no cpu kernel for mc.") +
                             rt::opName(op));
  rt::BoundKernel k;
  size_t bytes = 0;
  MC_RETURN_IF_ERROR(
      f(rt::KernelRequest{op, attrs, std::move(inputs), out, *cpu, nullptr,
                          std::move(constantInputs)},
        &k, &bytes));
  std::vector<uint8_t> ws(bytes);
  return k(ws.data());
}

/// ||a - b|| / ||b|| in double against a double reference; NaN never passes.
inline double relErr(const std::vector<float> &a,
                     const std::vector<double> &b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i]))
      return INFINITY;
    d += (a[i] - b[i]) * (a[i] - b[i]);
    n += b[i] * b[i];
  }
  return n == 0 ? std::sqrt(d) : std::sqrt(d / n);
}

inline std::string slurp(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// How a subprocess ended and what it printed.
struct ProcessResult {
  int status = -1;
  std::string out, err;
  bool exited() const { return WIFEXITED(status); }
  int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
};

/// Runs `args` (args[0] is the program's path) with stdout and stderr
/// captured through files in `scratchDir`.
inline ProcessResult runProcess(std::vector<std::string> args,
                                const std::string &scratchDir) {
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string out = scratchDir + "/stdout", err = scratchDir + "/stderr";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  ProcessResult r;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) == 0)
    waitpid(pid, &r.status, 0);
  posix_spawn_file_actions_destroy(&fa);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

} // namespace mc::test

#endif // MODELC_TEST_RUNTIME_TESTUTIL_H

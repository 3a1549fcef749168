// Fused regions (schema 2.2) end to end: the verifier refuses each malformed
// region (every error of Verifier::checkFused, and the per-op rules applied
// to body ops) with a message naming the step and the body op; a region
// run as one mc.fused step equals, bit for bit, the same ops run as one step
// each (the plan "unfused" mechanically below): elementwise regions with
// broadcast and splat loads, casts, compare and select, tails and many
// tiles per thread; matmul- and conv2d-led epilogues; attention; and a
// dynamic batch at several sizes.
#include "Parallel.h" // detail::maxThreads: sizes the many-tiles region
#include "TestUtil.h"
#include "modelc/model.h"
#include "modelc/shapes.h"

#include <algorithm>
#include <cstring>
#include <gtest/gtest.h>
#include <memory>

using namespace mc;
using namespace mc::test;
using codegen::Plan;
using codegen::PlanRegionOp;
using codegen::PlanStep;
using rt::DType;
using rt::Model;
using rt::OpAttr;
using rt::OpAttrs;
using rt::Session;
using rt::Shape;
using rt::Status;
using K = rt::OpId;

namespace {

constexpr DType F = DType::F32;

/// A plan under construction: buffers (with batch scales when the plan has
/// a dynamic batch), plain steps and fused steps.
struct Builder {
  Plan p;
  Builder() {
    p.entry = "fused";
    p.targets = {"cpu"};
  }
  uint32_t buf(std::string name, DType t, Shape shape,
               std::vector<int64_t> scale = {},
               fb::BufferKind kind = fb::BufferKind::Arena) {
    codegen::PlanBuffer b;
    b.name = std::move(name);
    b.dtype = t;
    b.shape = std::move(shape);
    b.batchScale = std::move(scale);
    b.kind = kind;
    p.buffers.push_back(std::move(b));
    return uint32_t(p.buffers.size() - 1);
  }
  uint32_t input(const std::string &name, Shape shape,
                 std::vector<int64_t> scale = {}) {
    uint32_t i = buf(name, F, std::move(shape), std::move(scale));
    p.inputs.push_back({name, i});
    return i;
  }
  uint32_t output(const std::string &name, Shape shape,
                  std::vector<int64_t> scale = {}) {
    uint32_t i = buf(name, F, std::move(shape), std::move(scale));
    p.outputs.push_back({name, i});
    return i;
  }
  uint32_t constF32(const std::string &name, Shape shape, unsigned seed) {
    uint32_t i = buf(name, F, shape, {}, fb::BufferKind::Constant);
    p.buffers[i].data =
        floatBytes(randomFloats(size_t(rt::numElements(shape)), seed));
    return i;
  }
  /// A fused step reading `in` into `out`; its ops come from bodyOp.
  PlanStep &fused(std::vector<uint32_t> in, uint32_t out,
                  bool attention = false) {
    PlanStep &s = addStep(p, K::Fused, std::move(in), out,
                          "fused.py:" + std::to_string(p.steps.size() + 1));
    if (attention)
      setBool(s, "attention", true);
    return s;
  }
};

/// One op of a region (bodyOp appends it to a fused step).
PlanRegionOp makeOp(K op, std::vector<uint32_t> operands, DType t,
                    Shape shape, OpAttrs attrs = {},
                    std::vector<int64_t> scale = {}) {
  PlanRegionOp r;
  r.op = op;
  r.operands = std::move(operands);
  r.attrs = std::move(attrs);
  r.dtype = t;
  r.shape = std::move(shape);
  r.batchScale = std::move(scale);
  return r;
}

/// Appends an op to fused step `s`'s region and returns its value number
/// (the step's inputs are 0..n-1, then each body op's result).
uint32_t bodyOp(PlanStep &s, K op, std::vector<uint32_t> operands, DType t,
                Shape shape, OpAttrs attrs = {},
                std::vector<int64_t> scale = {}) {
  PlanRegionOp r = makeOp(op, std::move(operands), t, std::move(shape),
                          std::move(attrs), std::move(scale));
  r.location = s.location + "#" + std::to_string(s.body.size());
  s.body.push_back(std::move(r));
  return uint32_t(s.inputs.size() + s.body.size() - 1);
}

OpAttrs dims(std::vector<int64_t> d) {
  return {OpAttr::list("dims", std::move(d))};
}

/// `fused` with each fused step expanded into one step per body op: what a
/// fused step must equal bit for bit. Body values become arena buffers (the
/// last op writes the step's output); a rank-0 input read by an elementwise
/// op is broadcast to the op's shape first (the splat the fused kernel
/// makes); the anchor's reshape is a view (an alias) of the anchor's result.
Plan unfused(const Plan &fused) {
  Plan p = fused;
  p.steps.clear();
  for (const PlanStep &s : fused.steps) {
    if (s.op != K::Fused) {
      p.steps.push_back(s);
      continue;
    }
    auto newBuf = [&](std::string name, DType t, const Shape &shape,
                      const std::vector<int64_t> &scale) {
      codegen::PlanBuffer b;
      b.name = std::move(name);
      b.dtype = t;
      b.shape = shape;
      b.batchScale = scale;
      p.buffers.push_back(std::move(b));
      return uint32_t(p.buffers.size() - 1);
    };
    std::vector<uint32_t> value = s.inputs; // value number -> buffer
    for (size_t k = 0; k < s.body.size(); ++k) {
      const PlanRegionOp &r = s.body[k];
      std::string name =
          p.buffers[s.outputs[0]].name + "." + std::to_string(k);
      bool last = k + 1 == s.body.size();
      if (r.op == K::Reshape) {
        EXPECT_FALSE(last) << "an output may not be an alias";
        uint32_t view = newBuf(name, r.dtype, r.shape, r.batchScale);
        p.buffers[view].aliasOf = value[r.operands[0]];
        value.push_back(view);
        continue;
      }
      // An extra output (schema 2.7) is written by its op.
      uint32_t number = uint32_t(s.inputs.size() + k);
      auto extra = std::find(s.extraOutputs.begin(), s.extraOutputs.end(),
                             number);
      uint32_t result =
          last ? s.outputs[0]
          : extra != s.extraOutputs.end()
              ? s.outputs[1 + size_t(extra - s.extraOutputs.begin())]
              : newBuf(name, r.dtype, r.shape, r.batchScale);
      std::vector<uint32_t> in;
      for (uint32_t v : r.operands) {
        uint32_t b = value[v];
        if (v < s.inputs.size() && p.buffers[b].shape.empty() &&
            !r.shape.empty() && rt::opInfo(r.op).fusible &&
            r.op != K::BroadcastInDim) {
          uint32_t splat = newBuf(name + ".splat" + std::to_string(v),
                                  p.buffers[b].dtype, r.shape, r.batchScale);
          setInts(addStep(p, K::BroadcastInDim, {b}, splat, r.location),
                  "dims", {});
          b = splat;
        }
        in.push_back(b);
      }
      addStep(p, r.op, in, result, r.location).attrs = r.attrs;
      value.push_back(result);
    }
  }
  return p;
}

/// Random f32 inputs of `plan` at `batch` (0: a static plan), one byte
/// vector per plan input.
std::vector<std::vector<uint8_t>> randomInputs(const Plan &plan, int64_t batch,
                                               unsigned seed) {
  std::vector<std::vector<uint8_t>> in;
  for (const codegen::PlanSignature &sig : plan.inputs) {
    const codegen::PlanBuffer &b = plan.buffers[sig.buffer];
    EXPECT_TRUE(b.dtype == F || b.dtype == DType::BF16 || b.dtype == DType::F16)
        << sig.name;
    Shape shape = b.batchScale.empty()
                      ? b.shape
                      : rt::shapes::atBatch(b.shape, b.batchScale, batch);
    std::vector<float> v =
        randomFloats(size_t(rt::numElements(shape)), seed++, -2, 2);
    if (b.dtype == F) {
      in.push_back(floatBytes(v));
      continue;
    }
    std::vector<uint16_t> h = narrowBits(b.dtype, v);
    in.emplace_back(reinterpret_cast<const uint8_t *>(h.data()),
                    reinterpret_cast<const uint8_t *>(h.data() + h.size()));
  }
  return in;
}

/// Plans, writes (with the writer's self-check), loads and runs `plan` at
/// `batch` (0: a static plan) on `inputs`; each output's bytes.
std::vector<std::vector<uint8_t>>
runPlan(Plan plan, const std::vector<std::vector<uint8_t>> &inputs,
        int64_t batch = 0) {
  std::vector<std::vector<uint8_t>> out;
  Status st = codegen::planMemory(plan);
  EXPECT_TRUE(st) << st.message();
  std::vector<uint8_t> bytes;
  st = codegen::writeArtifactToBytes(plan, &bytes);
  EXPECT_TRUE(st) << st.message();
  std::unique_ptr<Model> model;
  st = Model::loadMemory(bytes.data(), bytes.size(), "fused.mcpk", &model);
  EXPECT_TRUE(st) << st.message();
  if (!st)
    return out;
  std::unique_ptr<Session> s;
  st = Session::create(*model, &s);
  EXPECT_TRUE(st) << st.message();
  if (!st)
    return out;
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const codegen::PlanBuffer &b = plan.buffers[plan.inputs[i].buffer];
    Shape shape = b.batchScale.empty()
                      ? b.shape
                      : rt::shapes::atBatch(b.shape, b.batchScale, batch);
    st = s->setInput(i, b.dtype, shape, inputs[i].data(), inputs[i].size());
    EXPECT_TRUE(st) << st.message();
  }
  st = s->run();
  EXPECT_TRUE(st) << st.message();
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    Shape shape;
    EXPECT_TRUE(s->outputShape(i, &shape));
    const codegen::PlanBuffer &b = plan.buffers[plan.outputs[i].buffer];
    std::vector<uint8_t> v(size_t(rt::numElements(shape)) *
                           rt::dtypeSize(b.dtype));
    st = s->copyOutput(i, v.data(), v.size());
    EXPECT_TRUE(st) << st.message();
    out.push_back(std::move(v));
  }
  return out;
}

/// How far the fused run of a plan is from its unfused run.
struct Diff {
  bool bitExact = true;
  double relErr = 0; // the largest over the outputs (as floats)
};

/// Runs `fused` and unfused(fused) at `batch` on the same random inputs.
Diff compareRuns(const Plan &fused, int64_t batch = 0, unsigned seed = 7) {
  Plan ref = unfused(fused);
  EXPECT_GT(ref.steps.size(), fused.steps.size());
  std::vector<std::vector<uint8_t>> in = randomInputs(fused, batch, seed);
  std::vector<std::vector<uint8_t>> a = runPlan(fused, in, batch),
                                    b = runPlan(ref, in, batch);
  Diff d;
  EXPECT_EQ(a.size(), fused.outputs.size());
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    EXPECT_EQ(a[i].size(), b[i].size()) << fused.outputs[i].name;
    if (a[i].size() != b[i].size() || a[i].empty())
      continue;
    d.bitExact &= std::memcmp(a[i].data(), b[i].data(), a[i].size()) == 0;
    // As floats (a bf16 or f16 output widened).
    DType t = fused.buffers[fused.outputs[i].buffer].dtype;
    auto floats = [&](const std::vector<uint8_t> &bytes) {
      if (t == F) {
        std::vector<float> f(bytes.size() / 4);
        std::memcpy(f.data(), bytes.data(), bytes.size());
        return f;
      }
      std::vector<float> f(bytes.size() / 2);
      for (size_t j = 0; j < f.size(); ++j) {
        uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * j, 2);
        f[j] = widen(t, h);
      }
      return f;
    };
    std::vector<float> x = floats(a[i]), y = floats(b[i]);
    d.relErr = std::max(d.relErr, relError(x.data(), y));
  }
  return d;
}

/// The fused run equals the unfused one bit for bit.
void expectFusedEqualsUnfused(const Plan &fused, int64_t batch = 0) {
  Diff d = compareRuns(fused, batch);
  EXPECT_TRUE(d.bitExact) << "relative error " << d.relErr
                          << (batch ? " at batch " + std::to_string(batch)
                                    : std::string());
}

Plan planned(Plan p) {
  Status st = codegen::planMemory(p);
  EXPECT_TRUE(st) << st.message();
  return p;
}

/// `plan` planned, written and loaded as an artifact named `name`.
std::unique_ptr<Model> loadPlanned(const Plan &plan, const char *name) {
  std::vector<uint8_t> bytes;
  Status st = codegen::writeArtifactToBytes(planned(plan), &bytes);
  EXPECT_TRUE(st) << st.message();
  std::unique_ptr<Model> m;
  st = Model::loadMemory(bytes.data(), bytes.size(), name, &m);
  EXPECT_TRUE(st) << st.message();
  return m;
}

void expectRefused(const Plan &plan, const std::string &what) {
  std::vector<uint8_t> b = writeUnchecked(plan);
  ASSERT_FALSE(b.empty());
  std::unique_ptr<Model> m;
  Status st = Model::loadMemory(b.data(), b.size(), "fused.mcpk", &m);
  ASSERT_FALSE(st) << "expected: " << what;
  EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
}

// ---------------------------------------------------------------------------
// The regions.

/// Elementwise: out f32[2, 3] = relu((x + broadcast(bias [3], dims 1)) * s)
/// with s a rank-0 input (a splat). Values: x 0, bias 1, s 2, then the
/// broadcast 3, add 4, mul 5, relu 6. Buffers: x 0, bias 1, s 2, out 3.
Plan elementwisePlan() {
  Builder b;
  uint32_t x = b.input("x", {2, 3}), bias = b.input("bias", {3}),
           s = b.input("s", {});
  uint32_t out = b.output("out", {2, 3});
  PlanStep &f = b.fused({x, bias, s}, out);
  uint32_t bb = bodyOp(f, K::BroadcastInDim, {1}, F, {2, 3}, dims({1}));
  uint32_t a = bodyOp(f, K::Add, {0, bb}, F, {2, 3});
  uint32_t m = bodyOp(f, K::Mul, {a, 2}, F, {2, 3});
  bodyOp(f, K::Relu, {m}, F, {2, 3});
  return b.p;
}

/// A matmul-led epilogue: out f32[2, 3, 8] = relu(reshape(a [6, 4] @ w
/// [4, 8]) + broadcast(bias [8], dims 2)). Values: a 0, w 1, bias 2, then
/// matmul 3, reshape 4, broadcast 5, add 6, relu 7. Buffers: a 0, w 1,
/// bias 2, out 3.
Plan matmulPlan() {
  Builder b;
  uint32_t a = b.input("a", {6, 4});
  uint32_t w = b.constF32("w", {4, 8}, 1), bias = b.constF32("bias", {8}, 2);
  uint32_t out = b.output("out", {2, 3, 8});
  PlanStep &f = b.fused({a, w, bias}, out);
  uint32_t mm = bodyOp(f, K::Matmul, {0, 1}, F, {6, 8});
  uint32_t rs = bodyOp(f, K::Reshape, {mm}, F, {2, 3, 8});
  uint32_t bb = bodyOp(f, K::BroadcastInDim, {2}, F, {2, 3, 8}, dims({2}));
  uint32_t ad = bodyOp(f, K::Add, {rs, bb}, F, {2, 3, 8});
  bodyOp(f, K::Relu, {ad}, F, {2, 3, 8});
  return b.p;
}

/// Attention [B, S=5, T=7, D=4]: out = softmax(q @ k^T * scale +
/// broadcast(mask [S, T], dims [1, 2]), axis 2) @ v, scale rank 0. Values:
/// q 0, k 1, v 2, scale 3, mask 4, then scores 5, scaled 6, mask
/// broadcast 7, masked 8, softmax 9, result 10. Buffers: q 0, k 1, v 2,
/// scale 3, mask 4, out 5. With `dynamic`, B is the batch (bounds [1, B]).
Plan attentionPlan(Builder &b, int64_t B = 3, bool dynamic = false) {
  const int64_t S = 5, T = 7, D = 4;
  std::vector<int64_t> sc = dynamic ? std::vector<int64_t>{1, 0, 0}
                                    : std::vector<int64_t>{};
  uint32_t q = b.input("q", {B, S, D}, sc), k = b.input("k", {B, T, D}, sc),
           v = b.input("v", {B, T, D}, sc), scale = b.input("scale", {}),
           mask = b.input("mask", {S, T});
  uint32_t out = b.output("attn", {B, S, D}, sc);
  PlanStep &f = b.fused({q, k, v, scale, mask}, out, /*attention=*/true);
  uint32_t s = bodyOp(f, K::Matmul, {0, 1}, F, {B, S, T},
                      {OpAttr::boolean("transpose_b", true)}, sc);
  uint32_t m = bodyOp(f, K::Mul, {s, 3}, F, {B, S, T}, {}, sc);
  uint32_t mb =
      bodyOp(f, K::BroadcastInDim, {4}, F, {B, S, T}, dims({1, 2}), sc);
  uint32_t a = bodyOp(f, K::Add, {m, mb}, F, {B, S, T}, {}, sc);
  uint32_t p = bodyOp(f, K::Softmax, {a}, F, {B, S, T},
                      {OpAttr::integer("axis", 2)}, sc);
  bodyOp(f, K::Matmul, {p, 2}, F, {B, S, D}, {}, sc);
  return b.p;
}
Plan attentionPlan() {
  Builder b;
  return attentionPlan(b);
}

OpAttrs convAttrs() {
  return {OpAttr::list("strides", {1, 1}), OpAttr::list("padding", {1, 1, 1, 1}),
          OpAttr::list("dilation", {1, 1}), OpAttr::integer("groups", 1)};
}

/// A conv2d-led epilogue on x f32[2, 3, 9, 10], weight [5, 3, 3, 3]: conv,
/// then (each optional) + broadcast(bias [5], dims 1) and + residual (an
/// input of the output's shape), the residual before the bias with
/// `residualFirst`, then relu.
Plan convPlan(bool bias, bool residual, bool residualFirst = false) {
  Builder b;
  const Shape o{2, 5, 9, 10};
  uint32_t x = b.input("x", {2, 3, 9, 10});
  std::vector<uint32_t> in{x, b.constF32("w", {5, 3, 3, 3}, 3)};
  if (bias)
    in.push_back(b.constF32("bias", {5}, 4));
  if (residual)
    in.push_back(b.input("res", o));
  uint32_t out = b.output("out", o);
  PlanStep &f = b.fused(in, out);
  uint32_t v = bodyOp(f, K::Conv2d, {0, 1}, F, o, convAttrs());
  uint32_t res = uint32_t(in.size() - 1);
  if (residual && residualFirst)
    v = bodyOp(f, K::Add, {v, res}, F, o);
  if (bias) {
    uint32_t bb = bodyOp(f, K::BroadcastInDim, {2}, F, o, dims({1}));
    v = bodyOp(f, K::Add, {v, bb}, F, o);
  }
  if (residual && !residualFirst)
    v = bodyOp(f, K::Add, {v, res}, F, o);
  bodyOp(f, K::Relu, {v}, F, o);
  return b.p;
}

} // namespace

// ---------------------------------------------------------------------------
// The verifier: every error of checkFused, on a valid plan changed once.

TEST(Fused, TheBasePlansAreValid) {
  for (const Plan &p : {elementwisePlan(), matmulPlan(), attentionPlan(),
                        convPlan(true, false), convPlan(true, true)}) {
    Plan q = planned(p);
    std::vector<uint8_t> bytes;
    Status st = codegen::writeArtifactToBytes(q, &bytes);
    EXPECT_TRUE(st) << st.message();
  }
}

TEST(Fused, VerifierRefusesMalformedSteps) {
  Plan p;
  auto fresh = [&] { p = planned(elementwisePlan()); };
  auto body = [&]() -> std::vector<PlanRegionOp> & {
    return p.steps[0].body;
  };
  fresh();
  body().clear();
  expectRefused(p, "step 0 (mc.fused at fused.py:1): a fused step needs a "
                   "body (its region's ops)");
  fresh();
  p.steps[0].outputs = {3, 3};
  expectRefused(p, "step 0 (mc.fused at fused.py:1): expected 1 output, "
                   "found 2");
  fresh();
  p.steps[0].inputs.clear();
  expectRefused(p, "a fused step needs at least one input");
  // An attention region needs an output of rank >= 2.
  fresh();
  setBool(p.steps[0], "attention", true);
  p.buffers[3].shape = {6};
  expectRefused(p, "an attention region's output buffer 3 'out' f32[6] "
                   "needs rank >= 2");
  // Only mc.fused steps have a body (checked before the kind's rules).
  fresh();
  p.steps[0].op = K::Relu;
  p.steps[0].inputs = {0};
  p.steps[0].attrs = {};
  expectRefused(p, "step 0 (mc.relu at fused.py:1): has a fused-region body, "
                   "but only mc.fused steps have one");
}

TEST(Fused, VerifierRefusesMalformedBodyOps) {
  Plan p;
  auto fresh = [&] { p = planned(elementwisePlan()); };
  auto op = [&](size_t k) -> PlanRegionOp & { return p.steps[0].body[k]; };
  const std::string relu = "step 0 (mc.fused at fused.py:1), body op 3 "
                           "(mc.relu): ";
  fresh();
  op(3).op = K::Constant; // a registry op, but not one a step may be
  expectRefused(p, "step 0 (mc.fused at fused.py:1), body op 3 "
                   "(mc.constant): unknown op 'constant'");
  fresh();
  op(3).op = K::Yield;
  expectRefused(p, "body op 3 (mc.yield): unknown op 'yield'");
  fresh();
  op(3).dtype = DType(77);
  expectRefused(p, relu + "invalid dtype 77");
  // (The "shape vector is misaligned" error needs a corrupt file: the
  // writer's flatbuffers always align int64 vectors, so no plan can make it.)
  fresh();
  op(3).batchScale = {1, 0};
  expectRefused(p, relu + "batch_scale [1, 0] does not fit shape [2, 3] (the "
                          "model has no dynamic batch)");
  fresh();
  op(3).shape = {2, -3};
  expectRefused(p, relu + "negative dim in shape [2, -3]");
  fresh();
  // Dims whose product overflows int64 (a fuzz finding: a trailing
  // reduction's operand of such a shape reached the CPU kernel, which
  // multiplied them): bounded like a buffer's.
  op(3).shape = {16, 576460752303423492};
  expectRefused(p, relu + "shape [16, 576460752303423492] has more than "
                          "68719476736 (2^36) elements, the limit for one "
                          "tensor");
  fresh();
  op(1).operands = {0, 5};
  expectRefused(p, "body op 1 (mc.add): operand value 5 is not defined before "
                   "it (the region has 3 inputs and 1 earlier ops)");
  fresh();
  op(3).operands = {6}; // its own result
  expectRefused(p, "body op 3 (mc.relu): operand value 6 is not defined "
                   "before it (the region has 3 inputs and 3 earlier ops)");
  // Every value of an elementwise region has the output's shape.
  fresh();
  op(3).shape = {3, 2};
  expectRefused(p, relu + "computes [3, 2], but every value of a fused region "
                          "has the output's shape: [2, 3]");
  // A broadcast loads an input, never a body value. (The same error for an
  // anchor cannot be reached: an anchor is body op 0, before which no body
  // value is defined, so "is not defined before it" comes first.)
  fresh();
  bodyOp(p.steps[0], K::BroadcastInDim, {5}, F, {2, 3}, dims({0, 1}));
  expectRefused(p, "body op 4 (mc.broadcast_in_dim): must read only the "
                   "step's inputs (value 5 is a body op's result)");
  // Only elementwise ops, after at most one anchor as the first op.
  fresh();
  bodyOp(p.steps[0], K::Softmax, {6}, F, {2, 3}, {OpAttr::integer("axis", 1)});
  expectRefused(p, "body op 4 (mc.softmax): cannot be in a fused region (only "
                   "elementwise ops, after at most one matmul or conv2d as "
                   "the first op)");
  fresh();
  bodyOp(p.steps[0], K::Matmul, {6, 6}, F, {2, 3});
  expectRefused(p, "body op 4 (mc.matmul): cannot be in a fused region");
  fresh();
  bodyOp(p.steps[0], K::Fused, {6}, F, {2, 3});
  expectRefused(p, "body op 4 (mc.fused): cannot be in a fused region");
  // A reshape only right after an anchor.
  fresh();
  bodyOp(p.steps[0], K::Reshape, {6}, F, {2, 3});
  expectRefused(p, "body op 4 (mc.reshape): a fused region may reshape only "
                   "its anchor's result, right after it");
  // The last op computes the output.
  fresh();
  bodyOp(p.steps[0], K::Cast, {6}, DType::BF16, {2, 3});
  expectRefused(p, "step 0 (mc.fused at fused.py:1): the body's last op "
                   "computes bf16[2, 3], but the output buffer 3 'out' "
                   "f32[2, 3] is f32[2, 3]");
}

TEST(Fused, VerifierRefusesMalformedAnchorRegions) {
  Plan p;
  auto fresh = [&] { p = planned(matmulPlan()); };
  auto op = [&](size_t k) -> PlanRegionOp & { return p.steps[0].body[k]; };
  const std::string reshape = "step 0 (mc.fused at fused.py:1), body op 1 "
                              "(mc.reshape): ";
  // The reshape changes neither the element count nor the type.
  fresh();
  op(1).shape = {2, 4, 8};
  expectRefused(p, reshape + "reshapes the anchor's buffer 4 'value 3' "
                             "f32[6, 8] to [2, 4, 8] f32, but the output is "
                             "[2, 3, 8] and the element count or type must "
                             "stay");
  fresh();
  op(1).dtype = DType::F16;
  expectRefused(p, reshape + "reshapes the anchor's buffer 4 'value 3' "
                             "f32[6, 8] to [2, 3, 8] f16");
  // Not after an op that is not an anchor: a broadcast first, then the
  // reshape of its result.
  fresh();
  op(0) = makeOp(K::BroadcastInDim, {2}, F, {2, 3, 8}, dims({2}));
  expectRefused(p, reshape + "a fused region may reshape only its anchor's "
                             "result, right after it");
  // The per-op rules hold for the anchor: its shape is matmul's.
  fresh();
  op(0).shape = {6, 9};
  expectRefused(p, "step 0 (mc.fused at fused.py:1), body op 0 (mc.matmul): "
                   "output buffer 4 'value 3' f32[6, 9]: expected shape "
                   "[6, 8]");
  // The anchor's reshape reads the anchor, and only the anchor. A reshape
  // of an input there is a view (schema 2.6), so the anchor has no reshape
  // and must compute the output's shape itself.
  fresh();
  op(1).operands = {0};
  expectRefused(p, "step 0 (mc.fused at fused.py:1), body op 0 (mc.matmul): "
                   "computes [6, 8], but every value of a fused region has "
                   "the output's shape: [2, 3, 8]");
  // A region of loads alone computes nothing (a fuzz finding: the verifier
  // took it, and no device could bind it). The anchor and its reshape:
  const std::string nothing = "step 0 (mc.fused at fused.py:1): the region "
                              "computes nothing (its body is only an anchor, "
                              "its reshape, broadcasts and views; a fused region "
                              "needs an elementwise op or a reduction)";
  fresh();
  p.steps[0].body.resize(2);
  expectRefused(p, nothing);
  // A broadcast of an input to the output's shape:
  fresh();
  p.steps[0].body = {
      makeOp(K::BroadcastInDim, {2}, F, {2, 3, 8}, dims({2}))};
  expectRefused(p, nothing);
}

TEST(Fused, VerifierRefusesMalformedAttentionRegions) {
  Plan p;
  auto fresh = [&] { p = planned(attentionPlan()); };
  auto op = [&](size_t k) -> PlanRegionOp & { return p.steps[0].body[k]; };
  const std::string where = "step 0 (mc.fused at fused.py:1), body op ";
  // Every value has the output's rank and leading dims.
  fresh();
  op(1).shape = {4, 5, 7};
  expectRefused(p, where + "1 (mc.mul): computes [4, 5, 7], but every value "
                           "of an attention region has the output's rank and "
                           "leading dims: [3, 5, 4]");
  fresh();
  op(1).shape = {15, 7};
  expectRefused(p, "body op 1 (mc.mul): computes [15, 7], but every value of "
                   "an attention region");
  // An input read directly (not broadcast) has them too.
  fresh();
  op(3).operands = {6, 4}; // the mask [5, 7] itself
  expectRefused(p, where + "3 (mc.add): reads input buffer 4 'mask' f32[5, 7], "
                           "which lacks the output's rank and leading dims "
                           "([3, 5, 4]); broadcast it in the region");
  // Softmax over the last dim only.
  fresh();
  op(4).attrs = {OpAttr::integer("axis", 1)};
  expectRefused(p, where + "4 (mc.softmax): an attention region's softmax "
                           "must be over the last dim");
  // Matmul, softmax and elementwise ops only.
  fresh();
  op(4).op = K::LogSoftmax;
  expectRefused(p, where + "4 (mc.log_softmax): cannot be in an attention "
                           "region (matmul, softmax and elementwise ops)");
  fresh();
  op(3) = makeOp(K::Reshape, {6}, F, {3, 5, 7});
  expectRefused(p, where + "3 (mc.reshape): a fused region may reshape only "
                           "its anchor's result, right after it");
  // The last op computes the output (here: a smaller output buffer).
  fresh();
  p.buffers[5].shape = {3, 5, 3};
  expectRefused(p, "step 0 (mc.fused at fused.py:1): the body's last op "
                   "computes f32[3, 5, 4], but the output buffer 5 'attn' "
                   "f32[3, 5, 3] is f32[3, 5, 3]");
}

TEST(Fused, PerOpRulesApplyToBodyOps) {
  Plan p;
  auto fresh = [&] { p = planned(elementwisePlan()); };
  auto op = [&](size_t k) -> PlanRegionOp & { return p.steps[0].body[k]; };
  // An add of mismatched dtypes: x is i32 (same bytes), the bias f32.
  fresh();
  p.buffers[0].dtype = DType::I32;
  expectRefused(p, "step 0 (mc.fused at fused.py:1), body op 1 (mc.add): "
                   "input 1 buffer 4 'value 3' f32[2, 3] must have the dtype "
                   "and shape of input 0, buffer 0 'x' i32[2, 3]");
  // An input of another shape read without a broadcast (only a rank-0
  // input is splat).
  fresh();
  op(1).operands = {0, 1};
  expectRefused(p, "body op 1 (mc.add): input 1 buffer 1 'bias' f32[3] must "
                   "have the dtype and shape of input 0");
  // The splat of a rank-0 input keeps its dtype.
  fresh();
  p.buffers[2].dtype = DType::I32;
  expectRefused(p, "body op 2 (mc.mul): input 1 buffer 6 'splat of input 2' "
                   "i32[2, 3] must have the dtype and shape of input 0");
  // A broadcast's rule.
  fresh();
  op(0).attrs = dims({0});
  expectRefused(p, "body op 0 (mc.broadcast_in_dim): output buffer 4 "
                   "'value 3' f32[2, 3]: ");
  // Attributes: missing, unknown, of the wrong kind.
  fresh();
  op(0).attrs = {};
  expectRefused(p, "body op 0 (mc.broadcast_in_dim): attribute 'dims' is "
                   "missing");
  fresh();
  op(3).attrs = {OpAttr::integer("axis", 0)};
  expectRefused(p, "body op 3 (mc.relu): unknown attribute 'axis' of mc.relu");
  fresh();
  op(2).operands = {4};
  expectRefused(p, "body op 2 (mc.mul): expected 2 input(s) and 1 output(s), "
                   "found 1 and 1");
}

TEST(Fused, DynamicBatchRegionsAreCheckedAtTheBounds) {
  // A body op's batch_scale has one entry per dim; every value has the
  // output's shape at the batch's min too.
  Builder b;
  b.p.batch = codegen::PlanBatch{1, 8, 8};
  const std::vector<int64_t> rows{1, 0};
  uint32_t x = b.input("x", {8, 6}, rows);
  uint32_t out = b.output("out", {8, 6}, rows);
  PlanStep &f = b.fused({x}, out);
  uint32_t e = bodyOp(f, K::Exp, {0}, F, {8, 6}, {}, rows);
  bodyOp(f, K::Relu, {e}, F, {8, 6}, {}, rows);
  Plan p = planned(b.p);
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(codegen::writeArtifactToBytes(p, &bytes));
  p.steps[0].body[1].batchScale = {1};
  expectRefused(p, "body op 1 (mc.relu): batch_scale [1] does not fit shape "
                   "[8, 6]");
  p = planned(b.p);
  p.steps[0].body[1].batchScale = {};
  expectRefused(p, "step 0 (mc.fused at fused.py:1) at batch 1 (the lower "
                   "bound of [1, 8]), body op 1 (mc.relu): computes [8, 6], "
                   "but every value of a fused region has the output's "
                   "shape: [1, 6]");
}

// ---------------------------------------------------------------------------
// Runs: one fused step against one step per op, on the same inputs.

TEST(Fused, ElementwiseRegionEqualsUnfused) {
  // out f32[2, 6, 5, 7] = select(c < y, c, y), c = f32(bf16((x + bias along
  // dim 1) * s)), s a rank-0 input (a splat).
  Builder b;
  const Shape o{2, 6, 5, 7};
  uint32_t x = b.input("x", o), bias = b.input("bias", {6}),
           s = b.input("s", {}), y = b.input("y", o);
  uint32_t out = b.output("out", o);
  PlanStep &f = b.fused({x, bias, s, y}, out);
  uint32_t bb = bodyOp(f, K::BroadcastInDim, {1}, F, o, dims({1}));
  uint32_t a = bodyOp(f, K::Add, {0, bb}, F, o);
  uint32_t m = bodyOp(f, K::Mul, {a, 2}, F, o);
  uint32_t h = bodyOp(f, K::Cast, {m}, DType::BF16, o);
  uint32_t c = bodyOp(f, K::Cast, {h}, F, o);
  uint32_t lt =
      bodyOp(f, K::Compare, {c, 3}, DType::I1, o,
             {OpAttr::integer("direction", int64_t(rt::CompareOp::Lt))});
  bodyOp(f, K::Select, {lt, c, 3}, F, o);
  expectFusedEqualsUnfused(b.p);
}

/// A region of three outputs (schema 2.7): out = relu(m) is the last op's,
/// a = x + broadcast(bias) and m = a * s are extra ones, each a graph
/// output too. Values: x 0, bias 1, s 2, then broadcast 3, a 4, m 5,
/// relu 6. Buffers: x 0, bias 1, s 2, out 3, a 4, m 5.
Plan multiOutputPlan(Shape o = {2, 3}) {
  Builder b;
  uint32_t x = b.input("x", o), bias = b.input("bias", {o.back()}),
           s = b.input("s", {});
  uint32_t out = b.output("out", o);
  uint32_t aOut = b.output("a", o), mOut = b.output("m", o);
  PlanStep &f = b.fused({x, bias, s}, out);
  f.outputs.push_back(aOut);
  f.outputs.push_back(mOut);
  uint32_t bb = bodyOp(f, K::BroadcastInDim, {1}, F, o,
                       dims({int64_t(o.size()) - 1}));
  uint32_t a = bodyOp(f, K::Add, {0, bb}, F, o);
  uint32_t m = bodyOp(f, K::Mul, {a, 2}, F, o);
  bodyOp(f, K::Relu, {m}, F, o);
  f.extraOutputs = {a, m};
  return b.p;
}

// Every output of a multi-output region equals its op's own step: a region
// of one tile (its result written in place), and one of 35 tiles, above
// the 32 bound per tile (values copied out of the slots).
TEST(Fused, MultiOutputRegionEqualsUnfused) {
  expectFusedEqualsUnfused(multiOutputPlan());
  expectFusedEqualsUnfused(multiOutputPlan({70, 997}));
}

TEST(Fused, VerifierRefusesMalformedExtraOutputs) {
  Plan p;
  auto fresh = [&] { p = planned(multiOutputPlan()); };
  const std::string where = "step 0 (mc.fused at fused.py:1)";
  fresh();
  p.steps[0].extraOutputs.pop_back();
  expectRefused(p, where + ": expected 2 outputs (the last body op's and 1 "
                           "extra_outputs), found 3");
  fresh();
  p.steps[0].extraOutputs = {};
  expectRefused(p, where + ": expected 1 output, found 3");
  fresh();
  p.steps[0].extraOutputs[1] = 6; // the last op's value
  expectRefused(p, where + ": extra output 1 (value 6) must be a body op's "
                           "result other than the last's");
  fresh();
  p.steps[0].extraOutputs[0] = 0; // an input
  expectRefused(p, where + ": extra output 0 (value 0) must be a body op's "
                           "result");
  fresh();
  p.steps[0].extraOutputs[0] = 3; // the broadcast
  expectRefused(p, where + ": extra output 0 (value 3) is computed by "
                           "mc.broadcast_in_dim; an extra output is an "
                           "elementwise op's result");
  fresh();
  p.steps[0].extraOutputs[1] = 4;
  expectRefused(p, where + ": extra output 1 (value 4) is an output already");
  fresh();
  p.buffers[5].shape = {3, 2};
  expectRefused(p, where + ": extra output 1 (value 5) is f32[2, 3], but "
                           "output 2 is buffer 5 'm' f32[3, 2]");
  fresh();
  p.steps[0].outputs[2] = p.steps[0].outputs[1];
  expectRefused(p, where + ": outputs 1 buffer 4 'a' f32[2, 3] and 2 buffer "
                           "4 'a' f32[2, 3] overlap");
  // Only a plain elementwise region: not an anchor's, not an attention's.
  Plan m = planned(matmulPlan());
  m.steps[0].outputs.push_back(m.steps[0].outputs[0]);
  m.steps[0].extraOutputs = {6};
  expectRefused(m, where + ": has 1 extra_outputs, but only a plain "
                           "elementwise region (no attention, anchor or "
                           "reduction) may have more than one output");
  // Only mc.fused steps have them.
  Plan e = planned(multiOutputPlan());
  e.steps[0].op = K::Relu;
  e.steps[0].body.clear();
  e.steps[0].attrs = {};
  e.steps[0].inputs = {0};
  expectRefused(e, "step 0 (mc.relu at fused.py:1): has extra_outputs, but "
                   "only mc.fused steps have them");
}

// Views (schema 2.6): a region reads an input through transposes,
// reshapes and slices at the input's strides; every view op expanded into a
// step of its own computes the same bits.
OpAttrs perm(std::vector<int64_t> p) {
  return {OpAttr::list("permutation", std::move(p))};
}
OpAttrs sliceAttrs(std::vector<int64_t> start, std::vector<int64_t> limit,
                   std::vector<int64_t> step) {
  return {OpAttr::list("start", std::move(start)),
          OpAttr::list("limit", std::move(limit)),
          OpAttr::list("strides", std::move(step))};
}

/// Elementwise: out f32[3, 4, 5] = exp(x) * (y[1::2] reshaped and
/// transposed): y f32[7, 20] -> slice rows 1, 3, 5 -> [3, 20] -> reshape
/// [3, 5, 4] -> transpose [0, 2, 1]. Tiles of 2048 elements cut the 60 here
/// once; the tile size is irrelevant to a view's addressing.
Plan elementwiseViewPlan() {
  Builder b;
  const Shape o{3, 4, 5};
  uint32_t x = b.input("x", o), y = b.input("y", {7, 20});
  uint32_t out = b.output("out", o);
  PlanStep &f = b.fused({x, y}, out);
  uint32_t s = bodyOp(f, K::Slice, {1}, F, {3, 20},
                      sliceAttrs({1, 0}, {7, 20}, {2, 1}));
  uint32_t r = bodyOp(f, K::Reshape, {s}, F, {3, 5, 4});
  uint32_t t = bodyOp(f, K::Transpose, {r}, F, o, perm({0, 2, 1}));
  uint32_t e = bodyOp(f, K::Exp, {0}, F, o);
  bodyOp(f, K::Mul, {e, t}, F, o);
  return b.p;
}

/// Attention whose q, k and v are views of one packed projection
/// f32[S=5, B=2, 3 * 8] (2 heads of 4, as MultiheadAttention): each sliced,
/// reshaped to [5, 4, 4] and transposed to [4, 5, 4]; k read with
/// transpose_b.
Plan attentionViewPlan() {
  Builder b;
  uint32_t proj = b.input("proj", {5, 2, 24}), scale = b.input("scale", {});
  uint32_t out = b.output("attn", {4, 5, 4});
  PlanStep &f = b.fused({proj, scale}, out, /*attention=*/true);
  uint32_t heads[3];
  for (int i = 0; i < 3; ++i) {
    uint32_t s = bodyOp(f, K::Slice, {0}, F, {5, 2, 8},
                        sliceAttrs({0, 0, 8 * i}, {5, 2, 8 * i + 8},
                                   {1, 1, 1}));
    uint32_t r = bodyOp(f, K::Reshape, {s}, F, {5, 4, 4});
    heads[i] = bodyOp(f, K::Transpose, {r}, F, {4, 5, 4}, perm({1, 0, 2}));
  }
  uint32_t sc = bodyOp(f, K::Matmul, {heads[0], heads[1]}, F, {4, 5, 5},
                       {OpAttr::boolean("transpose_b", true)});
  uint32_t m = bodyOp(f, K::Mul, {sc, 1}, F, {4, 5, 5});
  uint32_t p = bodyOp(f, K::Softmax, {m}, F, {4, 5, 5},
                      {OpAttr::integer("axis", 2)});
  bodyOp(f, K::Matmul, {p, heads[2]}, F, {4, 5, 4});
  return b.p;
}

TEST(Fused, ViewsEqualUnfused) {
  expectFusedEqualsUnfused(elementwiseViewPlan());
  expectFusedEqualsUnfused(attentionViewPlan());
}

TEST(Fused, VerifierRefusesMalformedViews) {
  const std::string where = "step 0 (mc.fused at fused.py:1), body op ";
  auto op = [](Plan &p, size_t k) -> PlanRegionOp & {
    return p.steps[0].body[k];
  };
  Plan p = planned(elementwiseViewPlan());
  // A slice inside a dim that is no single strided dim: reshape first,
  // then slice the merged dim.
  op(p, 0) = makeOp(K::Reshape, {1}, F, {140});
  op(p, 1) = makeOp(K::Slice, {2}, F, {60}, sliceAttrs({1}, {61}, {1}));
  op(p, 2) = makeOp(K::Reshape, {3}, F, {3, 5, 4});
  p.steps[0].body.insert(p.steps[0].body.begin() + 3,
                         makeOp(K::Transpose, {4}, F, {3, 4, 5},
                                perm({0, 2, 1})));
  op(p, 4).operands = {0};
  op(p, 5).operands = {6, 5};
  ASSERT_TRUE(codegen::planMemory(p));
  // (the plan is now: reshape, slice, reshape, transpose, exp, mul: all
  // views of one contiguous input, so it verifies)
  {
    std::vector<uint8_t> bytes = writeUnchecked(p);
    std::unique_ptr<Model> m;
    Status st = Model::loadMemory(bytes.data(), bytes.size(), "v.mcpk", &m);
    EXPECT_TRUE(st) << st.message();
  }
  // Transposed first, the merged dim is two strided dims: no view.
  p = planned(elementwiseViewPlan());
  op(p, 1) = makeOp(K::Reshape, {3}, F, {60}); // [3, 20] -> [60]
  op(p, 2) = makeOp(K::Slice, {4}, F, {60}, sliceAttrs({0}, {60}, {1}));
  p.steps[0].body.insert(p.steps[0].body.begin() + 1,
                         makeOp(K::Transpose, {2}, F, {20, 3}, perm({1, 0})));
  op(p, 1).operands = {2};
  op(p, 2).operands = {3};
  op(p, 2).shape = {60};
  op(p, 3) = makeOp(K::Slice, {4}, F, {20}, sliceAttrs({1}, {21}, {1}));
  p.steps[0].body.insert(p.steps[0].body.begin() + 4,
                         makeOp(K::Reshape, {5}, F, {4, 5}));
  expectRefused(p, where + "3 (mc.slice): slicing dim 0 of [60], a merge of "
                           "strided dims: no view");
  // A view's dtype is its operand's.
  p = planned(elementwiseViewPlan());
  op(p, 0).dtype = DType::BF16;
  expectRefused(p, where + "0 (mc.slice): a view keeps its operand's dtype "
                           "f32, not bf16");
  // Attributes the result does not have.
  p = planned(elementwiseViewPlan());
  op(p, 2).attrs = perm({1, 0, 2});
  expectRefused(p, where + "2 (mc.transpose): transpose of [3, 5, 4] gives "
                           "[5, 3, 4], not [3, 4, 5]");
  // A slice reading past its operand.
  p = planned(elementwiseViewPlan());
  op(p, 0).attrs = sliceAttrs({3, 0}, {8, 20}, {2, 1});
  expectRefused(p, where + "0 (mc.slice): slice [3, step 2] of 3 elements is "
                           "outside dim 0 of [7, 20]");
  // A view read at another shape than the region's.
  p = planned(elementwiseViewPlan());
  op(p, 4).operands = {5, 3}; // exp(x) * the reshape [3, 5, 4]
  expectRefused(p, where + "4 (mc.mul): reads the view 3 ");
  expectRefused(p, "which lacks the region's shape [3, 4, 5]");
  // A broadcast reads an input, not a view.
  p = planned(elementwiseViewPlan());
  op(p, 3) = makeOp(K::BroadcastInDim, {4}, F, {3, 4, 5}, dims({0, 1, 2}));
  expectRefused(p, where + "3 (mc.broadcast_in_dim): reads the view 4; a "
                           "view is read by the region's elementwise, "
                           "matmul or softmax ops");
  // A view cannot end a region.
  p = planned(elementwiseViewPlan());
  p.steps[0].body.resize(3);
  expectRefused(p, where + "2 (mc.transpose): a region's last op computes "
                           "its result; a view cannot be it");
  // Attention: a view without the output's leading dims.
  p = planned(attentionViewPlan());
  op(p, 9).operands = {3, 4}; // the matmul reads k's [5, 2, 8] slice
  expectRefused(p, where + "9 (mc.matmul): reads the view 3 ");
  expectRefused(p, "which lacks the output's rank and leading dims [4, 5, 4]");
}

TEST(Fused, MatmulEpilogueWithReshapeEqualsUnfused) {
  expectFusedEqualsUnfused(matmulPlan());
}

// A conv2d region runs through oneDNN's post-ops when its epilogue is one
// the library fuses (bindConvEpilogue); the unfused plan runs the same
// convolution without post-ops, then its steps. The bias is a binary
// post-op on the f32 result (not the primitive's bias, which would seed
// the accumulator), so the two are equal bit for bit.
TEST(Fused, ConvBiasReluThroughOneDnnPostOpsEqualsUnfused) {
  Diff d = compareRuns(convPlan(/*bias=*/true, /*residual=*/false));
  EXPECT_TRUE(d.bitExact) << "relative error " << d.relErr;
  EXPECT_LT(d.relErr, 1e-6);
}

TEST(Fused, ConvResidualReluEqualsUnfused) {
  // oneDNN's sum post-op rounds conv + residual otherwise than conv, then
  // add (rel err about 1e-7), so the fused kernel does not hand it a
  // residual: the generic path (the conv alone, then the rest over tiles of
  // its result) keeps fused == unfused bit for bit.
  Diff d = compareRuns(convPlan(/*bias=*/false, /*residual=*/true));
  EXPECT_TRUE(d.bitExact) << "relative error " << d.relErr;
  EXPECT_LT(d.relErr, 1e-6);
}

TEST(Fused, ConvBiasResidualReluEqualsUnfused) {
  // A binary bias with a sum post-op finds only oneDNN's reference
  // implementation, which the binder refuses: the generic path (the conv
  // alone, then the rest over tiles of its result).
  expectFusedEqualsUnfused(convPlan(/*bias=*/true, /*residual=*/true));
}

TEST(Fused, ConvResidualBeforeBiasEqualsUnfused) {
  // Not an order oneDNN's post-ops take: the generic path.
  expectFusedEqualsUnfused(
      convPlan(/*bias=*/true, /*residual=*/true, /*residualFirst=*/true));
}

TEST(Fused, AttentionRegionEqualsUnfused) {
  expectFusedEqualsUnfused(attentionPlan());
}

namespace {
/// out f32[rows, cols] = clamp(gelu(tanh(x + broadcast(r [cols], dims 1)) *
/// broadcast(c [rows], dims 0)), -0.1, 0.7) - exp(y): rows of `cols`
/// elements cross the 2048-element tiles' boundaries.
Plan tiledPlan(int64_t rows, int64_t cols, bool withAbs = false) {
  Builder b;
  const Shape o{rows, cols};
  uint32_t x = b.input("x", o), r = b.input("r", {cols}),
           c = b.input("c", {rows}), y = b.input("y", o);
  uint32_t out = b.output("out", o);
  PlanStep &f = b.fused({x, r, c, y}, out);
  uint32_t rb = bodyOp(f, K::BroadcastInDim, {1}, F, o, dims({1}));
  uint32_t cb = bodyOp(f, K::BroadcastInDim, {2}, F, o, dims({0}));
  uint32_t a = bodyOp(f, K::Add, {0, rb}, F, o);
  uint32_t t = bodyOp(f, K::Tanh, {a}, F, o);
  if (withAbs) // an op without a vectorized loop (unaryF32Loop)
    t = bodyOp(f, K::Abs, {t}, F, o);
  uint32_t m = bodyOp(f, K::Mul, {t, cb}, F, o);
  uint32_t g = bodyOp(f, K::Gelu, {m}, F, o,
                      {OpAttr::boolean("tanh_approximation", false)});
  g = bodyOp(f, K::Clamp, {g}, F, o,
             {OpAttr::real("min", -0.1), OpAttr::real("max", 0.7)});
  uint32_t e = bodyOp(f, K::Exp, {3}, F, o);
  bodyOp(f, K::Sub, {g, e}, F, o);
  return b.p;
}
} // namespace

TEST(Fused, Bf16AttentionRegionMatchesUnfusedWithinBf16) {
  // Five slices of bf16 attention on two thread slots: each slice's
  // matmuls may run oneDNN's bf16 kernels (where the CPU has them), whose
  // scratchpad is the slot's, shared by the slices the slot runs in turn;
  // the unfused steps run one batched matmul each, so the sums' order may
  // differ: within bf16's tolerance.
  Builder b;
  const DType t = DType::BF16;
  const int64_t B = 5, S = 48, T = 64, D = 32;
  uint32_t q = b.buf("q", t, {B, S, D}), k = b.buf("k", t, {B, T, D}),
           v = b.buf("v", t, {B, T, D}), scale = b.buf("scale", t, {}),
           out = b.buf("attn", t, {B, S, D});
  b.p.inputs = {{"q", q}, {"k", k}, {"v", v}, {"scale", scale}};
  b.p.outputs = {{"attn", out}};
  PlanStep &f = b.fused({q, k, v, scale}, out, /*attention=*/true);
  uint32_t sc = bodyOp(f, K::Matmul, {0, 1}, t, {B, S, T},
                       {OpAttr::boolean("transpose_b", true)});
  uint32_t m = bodyOp(f, K::Mul, {sc, 3}, t, {B, S, T});
  uint32_t p =
      bodyOp(f, K::Softmax, {m}, t, {B, S, T}, {OpAttr::integer("axis", 2)});
  bodyOp(f, K::Matmul, {p, 2}, t, {B, S, D});
  Diff d = compareRuns(b.p);
  EXPECT_LT(d.relErr, 1e-2);
}

TEST(Fused, TailTileEqualsUnfused) {
  // 5000 elements: two full tiles of 2048 and a tail of 904.
  expectFusedEqualsUnfused(tiledPlan(5, 1000));
}

TEST(Fused, ManyTilesPerThreadEqualsUnfused) {
  // More than three tiles per thread slot, and a tail.
  int64_t threads = rt::detail::maxThreads();
  int64_t rows = (3 * threads + 1) * 2048 / 997 + 2;
  ASSERT_GT(rows * 997, 3 * threads * 2048);
  ASSERT_NE(rows * 997 % 2048, 0);
  expectFusedEqualsUnfused(tiledPlan(rows, 997));
}

TEST(Fused, RegionsOfManyTilesRunAsLoopsOverTheirTilesAndEqualUnfused) {
  // 70 x 997 = 69790 elements: 35 tiles, above the 32 a region binds per
  // tile (kDirectTiles). Every op has a vectorized loop, so the tiles read
  // x and y where they lie and write the output in place.
  expectFusedEqualsUnfused(tiledPlan(70, 997));
}

TEST(Fused, RegionsOfManyTilesCopyThroughThreadSlotsAndEqualUnfused) {
  // The same with an abs, which has no loop: the kernels are bound per
  // thread slot and the inputs copied into them.
  expectFusedEqualsUnfused(tiledPlan(70, 997, /*withAbs=*/true));
}

TEST(Fused, MasksOfComparesRunAsLoopsAndEqualUnfused) {
  // out = cast(compare(relu(x), x, d), f32) * y - neg(x) over 35 tiles (as
  // max_pool2d's gradient masks its windows): the compare and its cast run
  // as one loop writing 1 or 0, and neg has a loop; every direction, so
  // the mask is true where x >= 0 for some and where x < 0 for others.
  for (int64_t dir = 0; dir < 6; ++dir) {
    SCOPED_TRACE("direction " + std::to_string(dir));
    Builder b;
    const Shape o{70, 1000};
    uint32_t x = b.input("x", o), y = b.input("y", o);
    uint32_t out = b.output("out", o);
    PlanStep &f = b.fused({x, y}, out);
    uint32_t r = bodyOp(f, K::Relu, {0}, F, o);
    uint32_t m = bodyOp(f, K::Compare, {r, 0}, DType::I1, o,
                        {OpAttr::integer("direction", dir)});
    uint32_t c = bodyOp(f, K::Cast, {m}, F, o);
    uint32_t p = bodyOp(f, K::Mul, {c, 1}, F, o);
    uint32_t n = bodyOp(f, K::Neg, {0}, F, o);
    bodyOp(f, K::Sub, {p, n}, F, o);
    expectFusedEqualsUnfused(b.p);
  }
}

namespace {
/// A conv2d (3x3, pad 1) then its bias and SiLU, x * sigmoid(x) (the mul
/// reading x first, or the sigmoid first with `sigmoidFirst`), with more
/// tiles (2 x 16 x 48 x 48: 36) than a region binds per tile: the fused
/// kernel folds the bias into the convolution and runs the sigmoid and
/// the mul as one loop over each tile, in place in the output.
Plan convSiluPlan(bool channelsLast, bool sigmoidFirst) {
  Builder b;
  const int64_t batch = 2, C = 8, K = 16, H = 48, W = 48;
  Shape in = channelsLast ? Shape{batch, H, W, C} : Shape{batch, C, H, W};
  Shape o = channelsLast ? Shape{batch, H, W, K} : Shape{batch, K, H, W};
  uint32_t x = b.input("x", in);
  uint32_t w = b.constF32("w", {K, C, 3, 3}, 3);
  uint32_t bias = b.constF32("bias", {K}, 4);
  uint32_t out = b.output("out", o);
  PlanStep &f = b.fused({x, w, bias}, out);
  OpAttrs attrs = convAttrs();
  if (channelsLast)
    attrs.set(OpAttr::boolean("channels_last", true));
  uint32_t c = bodyOp(f, K::Conv2d, {0, 1}, F, o, attrs);
  uint32_t bb =
      bodyOp(f, K::BroadcastInDim, {2}, F, o, dims({channelsLast ? 3 : 1}));
  uint32_t a = bodyOp(f, K::Add, {c, bb}, F, o);
  uint32_t sg = bodyOp(f, K::Sigmoid, {a}, F, o);
  bodyOp(f, K::Mul,
         sigmoidFirst ? std::vector<uint32_t>{sg, a}
                      : std::vector<uint32_t>{a, sg},
         F, o);
  return b.p;
}
} // namespace

TEST(Fused, ConvBiasSiluFoldsTheBiasAndEqualsUnfused) {
  for (bool channelsLast : {false, true})
    for (bool sigmoidFirst : {false, true}) {
      SCOPED_TRACE(std::string(channelsLast ? "NHWC" : "NCHW") +
                   (sigmoidFirst ? ", mul(sigmoid, x)" : ", mul(x, sigmoid)"));
      Diff d = compareRuns(convSiluPlan(channelsLast, sigmoidFirst));
      EXPECT_TRUE(d.bitExact) << "relative error " << d.relErr;
    }
}

namespace {
/// ResNet's block tail on NHWC (or NCHW): relu(conv(x) + bias + res), the
/// residual the add's first or second operand, the relu optional; 16 -> 16
/// channels at 20x20, so oneDNN runs its optimized kernels.
Plan convResidualPlan(bool channelsLast, bool residualOperandFirst,
                      bool relu) {
  Builder b;
  const int64_t batch = 2, C = 16, H = 20, W = 20;
  Shape s = channelsLast ? Shape{batch, H, W, C} : Shape{batch, C, H, W};
  uint32_t x = b.input("x", s);
  uint32_t w = b.constF32("w", {C, C, 3, 3}, 3);
  uint32_t bias = b.constF32("bias", {C}, 4);
  uint32_t res = b.input("res", s);
  uint32_t out = b.output("out", s);
  PlanStep &f = b.fused({x, w, bias, res}, out);
  OpAttrs attrs = convAttrs();
  if (channelsLast)
    attrs.set(OpAttr::boolean("channels_last", true));
  uint32_t c = bodyOp(f, K::Conv2d, {0, 1}, F, s, attrs);
  uint32_t bb =
      bodyOp(f, K::BroadcastInDim, {2}, F, s, dims({channelsLast ? 3 : 1}));
  uint32_t a = bodyOp(f, K::Add, {c, bb}, F, s);
  a = bodyOp(f, K::Add,
             residualOperandFirst ? std::vector<uint32_t>{3, a}
                                  : std::vector<uint32_t>{a, 3},
             F, s);
  if (relu)
    bodyOp(f, K::Relu, {a}, F, s);
  return b.p;
}
} // namespace

TEST(Fused, ConvBiasResidualEqualsUnfusedInBothLayouts) {
  // oneDNN 2.6 runs another kernel than the plain convolution's when the
  // residual is a post-op (binary add or sum; sum also rounds otherwise),
  // so the bias goes into the convolution and the tiles add the residual
  // and apply the relu: either operand order, with and without the relu.
  for (bool channelsLast : {false, true})
    for (bool first : {false, true})
      for (bool relu : {true, false}) {
        SCOPED_TRACE(std::string(channelsLast ? "NHWC" : "NCHW") +
                     (first ? ", add(res, y)" : ", add(y, res)") +
                     (relu ? ", relu" : ""));
        Diff d = compareRuns(convResidualPlan(channelsLast, first, relu));
        EXPECT_TRUE(d.bitExact) << "relative error " << d.relErr;
      }
}

TEST(Fused, ASigmoidReadBesidesItsSiluEqualsUnfused) {
  // out = x * sigmoid(x) + sigmoid(x) over 35 tiles: the sigmoid has a
  // second reader, so it is computed on its own (not folded into the SiLU
  // loop, which would leave its value unwritten); and the SiLU alone.
  for (bool alsoRead : {true, false}) {
    SCOPED_TRACE(alsoRead ? "sigmoid read twice" : "SiLU alone");
    Builder b;
    const Shape o{70, 1024};
    uint32_t x = b.input("x", o);
    uint32_t out = b.output("out", o);
    PlanStep &f = b.fused({x}, out);
    uint32_t s = bodyOp(f, K::Sigmoid, {0}, F, o);
    uint32_t m = bodyOp(f, K::Mul, {0, s}, F, o);
    if (alsoRead)
      bodyOp(f, K::Add, {m, s}, F, o);
    expectFusedEqualsUnfused(b.p);
  }
}

TEST(Fused, NarrowRegionsOfManyTilesRunAsLoopsAndEqualUnfused) {
  // bf16 and f16 regions of 35 tiles, the last one short: each loop
  // widens its operands, computes in f32 and rounds its result once, as
  // each unfused kernel does; the sigmoid and mul stay two loops (the
  // sigmoid's result is rounded before the mul).
  for (DType t : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(rt::dtypeName(t));
    Builder b;
    const Shape o{70, 1000};
    uint32_t x = b.buf("x", t, o), r = b.buf("r", t, {1000}),
             y = b.buf("y", t, o), out = b.buf("out", t, o);
    b.p.inputs = {{"x", x}, {"r", r}, {"y", y}};
    b.p.outputs = {{"out", out}};
    PlanStep &f = b.fused({x, r, y}, out);
    uint32_t rb = bodyOp(f, K::BroadcastInDim, {1}, t, o, dims({1}));
    uint32_t a = bodyOp(f, K::Add, {0, rb}, t, o);
    uint32_t sg = bodyOp(f, K::Sigmoid, {a}, t, o);
    uint32_t m = bodyOp(f, K::Mul, {a, sg}, t, o);
    uint32_t g = bodyOp(f, K::Gelu, {m}, t, o,
                        {OpAttr::boolean("tanh_approximation", true)});
    g = bodyOp(f, K::Clamp, {g}, t, o,
               {OpAttr::real("min", -0.1), OpAttr::real("max", 0.7)});
    uint32_t e = bodyOp(f, K::Exp, {2}, t, o);
    bodyOp(f, K::Sub, {g, e}, t, o);
    expectFusedEqualsUnfused(b.p);
  }
}

TEST(Fused, ARegionOfManyTilesNamesItsFirstFailingElement) {
  // out i32[rows, cols] = x / y with y zero at two elements, in the ranges
  // of different threads (35 tiles, more than a region binds per tile: a
  // contiguous block of tiles per thread): the error names the first, as
  // one kernel would, whichever thread reached its zero first.
  Builder b;
  const int64_t rows = 70, cols = 1024;
  const Shape o{rows, cols};
  uint32_t x = b.buf("x", DType::I32, o), y = b.buf("y", DType::I32, o);
  b.p.inputs.push_back({"x", x});
  b.p.inputs.push_back({"y", y});
  uint32_t out = b.buf("out", DType::I32, o);
  b.p.outputs.push_back({"out", out});
  PlanStep &f = b.fused({x, y}, out);
  bodyOp(f, K::Div, {0, 1}, DType::I32, o);
  std::unique_ptr<Model> m = loadPlanned(b.p, "div.mcpk");
  ASSERT_TRUE(m);
  std::unique_ptr<Session> session;
  ASSERT_TRUE(Session::create(*m, &session));
  std::vector<int32_t> xs(size_t(rows * cols), 7), ys(xs.size(), 2);
  const int64_t firstZero = 40001, secondZero = 2 * 2048 + 5;
  for (int64_t at : {firstZero, secondZero}) {
    ys.assign(ys.size(), 2);
    ys[size_t(at)] = 0;
    ys[size_t(rows * cols - 3)] = 0; // in the last thread's range
    ASSERT_TRUE(session->setInput(0, DType::I32, o, xs.data(), xs.size() * 4));
    ASSERT_TRUE(session->setInput(1, DType::I32, o, ys.data(), ys.size() * 4));
    Status st = session->run();
    ASSERT_FALSE(st);
    int64_t tileStart = at / 2048 * 2048;
    std::string want = "integer division by zero at element " +
                       std::to_string(at - tileStart) +
                       " (in the tile of the region's elements " +
                       std::to_string(tileStart) + " to ";
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
  }
}

/// A region ending in a reduction over several tiles: out f32[rows] =
/// reduce_sum(tanh(x) * y, dims [1]); each tile holds whole rows.
Plan reducingPlan(int64_t rows, int64_t cols) {
  Builder b;
  const Shape o{rows, cols};
  uint32_t x = b.input("x", o), y = b.input("y", o);
  uint32_t out = b.output("out", {rows});
  PlanStep &f = b.fused({x, y}, out);
  uint32_t t = bodyOp(f, K::Tanh, {0}, F, o);
  uint32_t m = bodyOp(f, K::Mul, {t, 1}, F, o);
  bodyOp(f, K::ReduceSum, {m}, F, {rows},
         {OpAttr::list("dims", {1}), OpAttr::boolean("keepdim", false)});
  return b.p;
}

TEST(Fused, AReductionOverSeveralTilesEqualsUnfused) {
  // 37 rows of 300: tiles of 6 rows (1800 elements), the last of 1.
  expectFusedEqualsUnfused(reducingPlan(37, 300));
  // Above kDirectTiles: 7 rows a tile, 40 tiles.
  expectFusedEqualsUnfused(reducingPlan(280, 290));
}

/// An optimizer-like update in place (schema 2.5): state w f32[2, 3] =
/// w - g * lr, lr a rank-0 input, written by the region into w itself;
/// then a copy of w to the output. Values: w 0, g 1, lr 2, then mul 3,
/// sub 4. Buffers: g 0, lr 1, w 2, out 3.
Plan inPlacePlan(const Shape &shape = {2, 3}) {
  Builder b;
  uint32_t g = b.input("g", shape), lr = b.input("lr", {});
  uint32_t w = b.buf("w", F, shape, {}, fb::BufferKind::State);
  b.p.buffers[w].data = floatBytes(randomFloats(size_t(rt::numElements(shape)), 11));
  uint32_t out = b.output("out", shape);
  PlanStep &f = b.fused({w, g, lr}, w);
  uint32_t m = bodyOp(f, K::Mul, {1, 2}, F, shape);
  bodyOp(f, K::Sub, {0, m}, F, shape);
  addStep(b.p, K::Copy, {w}, out, "fused.py:9");
  return b.p;
}

TEST(Fused, AnElementwiseRegionUpdatesStateInPlace) {
  // The region writes the state it reads; equal to the same ops one step
  // each (the sub then writes w in place, as an elementwise op may).
  expectFusedEqualsUnfused(inPlacePlan());
  // Over several tiles, each read and written in place (3 tiles of 2048
  // and a tail), and over more tiles than a region binds one by one.
  expectFusedEqualsUnfused(inPlacePlan({7, 1000}));
  expectFusedEqualsUnfused(inPlacePlan({80, 1000}));
}

TEST(Fused, VerifierRefusesRegionsWritingStateTheyMayNot) {
  const std::string state = "step 0 (mc.fused at fused.py:1): output 0 "
                            "(buffer 2 'w' f32[2, 3]) is a State buffer; only "
                            "Copy and elementwise kinds may write state";
  // Not elementwise as a whole: an attention region, a region ending in a
  // reduction (each fails on the state before its other rules).
  Plan p = planned(inPlacePlan());
  setBool(p.steps[0], "attention", true);
  expectRefused(p, state);
  p = planned(inPlacePlan());
  bodyOp(p.steps[0], K::ReduceSum, {4}, F, {2}, dims({1}));
  expectRefused(p, state);
  // In place, the input read through a broadcast (which may read element j
  // for element i).
  p = planned(inPlacePlan());
  PlanStep &f = p.steps[0];
  f.body.clear();
  uint32_t wb = bodyOp(f, K::BroadcastInDim, {0}, F, {2, 3}, dims({0, 1}));
  uint32_t m = bodyOp(f, K::Mul, {1, 2}, F, {2, 3});
  bodyOp(f, K::Sub, {wb, m}, F, {2, 3});
  expectRefused(p, "step 0 (mc.fused at fused.py:1): output buffer 2 'w' "
                   "f32[2, 3] is input 0 buffer 2 'w' f32[2, 3], which the "
                   "region reads through a broadcast or a view; a region runs "
                   "in place "
                   "only on an input it reads element for element");
  // In place on an input of another type: an i32 input at the output's
  // bytes in the arena.
  Builder b;
  uint32_t x = b.buf("x", DType::I32, {2, 3});
  b.p.inputs.push_back({"x", x});
  uint32_t out = b.output("out", {2, 3});
  PlanStep &c = b.fused({x}, out);
  bodyOp(c, K::Cast, {0}, F, {2, 3});
  p = planned(b.p);
  p.buffers[out].offset = p.buffers[x].offset;
  expectRefused(p, "step 0 (mc.fused at fused.py:1): output buffer 1 'out' "
                   "f32[2, 3] is input 0 buffer 0 'x' i32[2, 3], which the "
                   "region reads as another type or shape");
}

TEST(Fused, DynamicBatchEqualsUnfused) {
  // Two fused steps, batch bounds [1, 8]: a matmul-led epilogue over rows
  // and an attention region whose leading dim is the batch.
  Builder b;
  b.p.batch = codegen::PlanBatch{1, 8, 8};
  const std::vector<int64_t> rows{1, 0};
  uint32_t x = b.input("x", {8, 4}, rows), y = b.input("y", {8, 6}, rows);
  uint32_t w = b.constF32("w", {4, 6}, 5), bias = b.constF32("bias", {6}, 6);
  uint32_t h = b.output("h", {8, 6}, rows);
  PlanStep &f = b.fused({x, w, bias, y}, h);
  uint32_t mm = bodyOp(f, K::Matmul, {0, 1}, F, {8, 6}, {}, rows);
  uint32_t bb =
      bodyOp(f, K::BroadcastInDim, {2}, F, {8, 6}, dims({1}), rows);
  uint32_t a = bodyOp(f, K::Add, {mm, bb}, F, {8, 6}, {}, rows);
  uint32_t m = bodyOp(f, K::Mul, {a, 3}, F, {8, 6}, {}, rows);
  bodyOp(f, K::Sigmoid, {m}, F, {8, 6}, {}, rows);
  Plan p = attentionPlan(b, 8, /*dynamic=*/true);
  ASSERT_EQ(p.steps.size(), 2u);
  for (int64_t batch : {1, 3, 8})
    expectFusedEqualsUnfused(p, batch);
}

namespace {
/// The CPU device with a cap on one allocation (what a machine without the
/// memory does), naming itself as the CPU does.
class CappedDevice final : public rt::Device {
public:
  explicit CappedDevice(size_t cap) : cap_(cap) {
    EXPECT_TRUE(rt::createDevice("cpu", &cpu_));
  }
  std::string name() const override { return "cpu"; }
  std::string kind() const override { return "cpu"; }
  std::vector<std::string> targets() const override { return {"cpu"}; }
  bool hostAccessible() const override { return true; }
  Status allocate(size_t n, rt::DeviceMemory *out) override {
    if (n > cap_)
      return Status::error("cpu: cannot allocate " + std::to_string(n) +
                           " bytes");
    return cpu_->allocate(n, out);
  }
  Status copyToDevice(void *d, const void *s, size_t n) override {
    return cpu_->copyToDevice(d, s, n);
  }
  Status copyToHost(void *d, const void *s, size_t n) override {
    return cpu_->copyToHost(d, s, n);
  }
  Status synchronize() override { return cpu_->synchronize(); }

private:
  size_t cap_;
  std::unique_ptr<rt::Device> cpu_;
};
} // namespace

// A region ending in a reduction over a dim of size 0 (found by fuzzing:
// the verifier took it and session creation refused it): rows of no
// elements, so nothing before the reduction is computed and each output
// is the reduction of an empty row, as the unfused steps give: sum 0,
// mean NaN, max -inf.
TEST(Fused, ARegionReducingEmptyRowsEqualsUnfused) {
  for (K op : {K::ReduceSum, K::ReduceMean, K::ReduceMax}) {
    SCOPED_TRACE(rt::opName(op));
    Builder b;
    uint32_t x = b.input("x", {2, 8, 0});
    uint32_t out = b.output("out", {2, 8});
    PlanStep &f = b.fused({x}, out);
    uint32_t e = bodyOp(f, K::Exp, {0}, F, {2, 8, 0});
    bodyOp(f, op, {e}, F, {2, 8},
           {OpAttr::list("dims", {2}), OpAttr::boolean("keepdim", false)});
    expectFusedEqualsUnfused(b.p);
  }
}

// A region whose values are no buffers can still ask for much scratch (the
// CPU's fused kernel keeps tiles of whole rows: a fuzzed artifact reduced a
// scalar's exp over 2^31-element rows and asked for 49 GB). When the
// scratch cannot be had, the error names the step that asks the most and
// the bytes, before any step runs.
TEST(Fused, ScratchThatCannotBeHadNamesItsStep) {
  Builder b;
  uint32_t s = b.input("s", {});
  uint32_t out = b.output("out", {2, 8});
  b.fused({s}, out); // step 0
  PlanStep &f = b.p.steps.back();
  const Shape big{2, 8, 1 << 20};
  uint32_t e = bodyOp(f, K::Exp, {0}, F, big);
  bodyOp(f, K::ReduceSum, {e}, F, {2, 8},
         {OpAttr::list("dims", {2}), OpAttr::boolean("keepdim", false)});
  std::unique_ptr<Model> m = loadPlanned(b.p, "big.mcpk");
  ASSERT_TRUE(m);
  std::unique_ptr<Session> session;
  Status st = Session::create(*m, std::make_unique<CappedDevice>(1 << 20),
                              &session);
  ASSERT_FALSE(st);
  const std::string &why = st.message();
  const std::string head = "big.mcpk: step 0 (mc.fused at fused.py:1): its ";
  EXPECT_TRUE(why.compare(0, head.size(), head) == 0 &&
              why.find(" bytes of scratch memory: cpu: cannot allocate ") !=
                  std::string::npos)
      << why;
  // With the memory, it runs: sum over a row of exp(s) = 2^20 exp(s).
  ASSERT_TRUE(Session::create(*m, &session));
  float x = 0.5f;
  ASSERT_TRUE(session->setInput(0, F, {}, &x, 4));
  ASSERT_TRUE(session->run());
  std::vector<float> got(16);
  ASSERT_TRUE(session->copyOutput(0, got.data(), 64));
  EXPECT_NEAR(got[0], std::exp(0.5) * (1 << 20), 1e-3 * std::exp(0.5) * (1 << 20));
}

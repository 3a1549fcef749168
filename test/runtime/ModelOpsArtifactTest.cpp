// The ops of real models end to end: a plan using each one schema 1.1 added
// writer, the verifier and the Session, and matches the kernels called
// directly (so attributes survive serialization and dispatch); the verifier
// refuses each kind's malformed steps with a message naming the step, what
// was expected and what was found; any minor of the major loads; mutations of the
// table never crash.
#include "TestUtil.h"
#include "modelc/labels.h"
#include "modelc/model.h"
#include "modelc/version.h"

#include <gtest/gtest.h>
#include <map>
#include <set>
#include <zlib.h>

using namespace mc;
using namespace mc::test;
using codegen::Plan;
using codegen::PlanStep;
using rt::DType;
using rt::Model;
using rt::Session;
using rt::Shape;
using rt::Status;
using K = rt::OpId;

namespace {

struct Builder {
  Plan p;
  uint32_t buf(std::string name, DType t, Shape shape,
               fb::BufferKind kind = fb::BufferKind::Arena) {
    codegen::PlanBuffer b;
    b.name = std::move(name);
    b.dtype = t;
    b.shape = std::move(shape);
    b.kind = kind;
    p.buffers.push_back(b);
    return uint32_t(p.buffers.size() - 1);
  }
  uint32_t constF32(std::string name, Shape shape, unsigned seed, float lo = -1,
                    float hi = 1) {
    uint32_t i = buf(std::move(name), DType::F32, shape,
                     fb::BufferKind::Constant);
    p.buffers[i].data =
        floatBytes(randomFloats(size_t(rt::numElements(shape)), seed, lo, hi));
    return i;
  }
  PlanStep &step(K op, std::vector<uint32_t> in, uint32_t out) {
    return addStep(p, op, std::move(in), out,
                   "model.py:" + std::to_string(p.steps.size() + 1));
  }
};

/// A CNN block and transformer pieces, using each new kind at least once.
Plan modelOpsPlan() {
  Builder b;
  b.p.entry = "model_ops";
  const DType F = DType::F32;
  uint32_t x = b.buf("x", F, {1, 3, 8, 8});
  uint32_t t = b.buf("t", F, {2, 4, 6});
  uint32_t m = b.buf("m", F, {2, 4, 6});
  uint32_t ids = b.buf("ids", DType::I64, {2, 3});
  // CNN: conv 3x3 -> batch norm -> relu -> max pool (ceil) -> avg pool
  // (ceil, count_include_pad false) -> 1x1 conv; and a depthwise conv.
  uint32_t w1 = b.constF32("w1", {4, 3, 3, 3}, 1);
  uint32_t c1 = b.buf("c1", F, {1, 4, 8, 8});
  PlanStep &conv = b.step(K::Conv2d, {x, w1}, c1);
  setInts(conv, "strides", {1, 1});
  setInts(conv, "padding", {1, 1, 1, 1});
  setInts(conv, "dilation", {1, 1});
  setInt(conv, "groups", 1);
  uint32_t sc = b.constF32("bn_scale", {4}, 2), of = b.constF32("bn_off", {4}, 3),
           mu = b.constF32("bn_mean", {4}, 4),
           var = b.constF32("bn_var", {4}, 5, 0.5f, 2);
  uint32_t b1 = b.buf("b1", F, {1, 4, 8, 8});
  PlanStep &bn = b.step(K::BatchNorm, {c1, sc, of, mu, var}, b1);
  setInt(bn, "feature_axis", 1);
  setFloat(bn, "epsilon", 1e-5);
  uint32_t r1 = b.buf("r1", F, {1, 4, 8, 8});
  b.step(K::Relu, {b1}, r1);
  uint32_t mp = b.buf("mp", F, {1, 4, 5, 5});
  PlanStep &maxp = b.step(K::MaxPool2d, {r1}, mp);
  setInts(maxp, "kernel", {3, 3});
  setInts(maxp, "strides", {2, 2});
  setInts(maxp, "padding", {1, 1, 1, 1});
  setInts(maxp, "dilation", {1, 1});
  setBool(maxp, "ceil_mode", true); // 8 -> 5 (floor would be 4)
  uint32_t ap = b.buf("ap", F, {1, 4, 3, 3});
  PlanStep &avgp = b.step(K::AvgPool2d, {mp}, ap);
  setInts(avgp, "kernel", {2, 2});
  setInts(avgp, "strides", {2, 2});
  setInts(avgp, "padding", {0, 0, 0, 0});
  setInts(avgp, "dilation", {1, 1});
  setBool(avgp, "ceil_mode", true); // 5 -> 3 (floor would be 2)
  setBool(avgp, "count_include_pad", false);
  uint32_t w2 = b.constF32("w2", {2, 4, 1, 1}, 6);
  uint32_t c2 = b.buf("c2", F, {1, 2, 3, 3});
  PlanStep &pw = b.step(K::Conv2d, {ap, w2}, c2);
  setInts(pw, "strides", {1, 1});
  setInts(pw, "padding", {0, 0, 0, 0});
  setInts(pw, "dilation", {1, 1});
  setInt(pw, "groups", 1);
  uint32_t wd = b.constF32("wd", {4, 1, 3, 3}, 7);
  uint32_t dw = b.buf("dw", F, {1, 4, 4, 4});
  PlanStep &dws = b.step(K::Conv2d, {c1, wd}, dw);
  setInts(dws, "strides", {2, 2});
  setInts(dws, "padding", {1, 1, 0, 0}); // top, left only
  setInts(dws, "dilation", {1, 1});
  setInt(dws, "groups", 4);
  uint32_t ap2 = b.buf("ap2", F, {1, 4, 4, 4});
  PlanStep &avgi = b.step(K::AvgPool2d, {r1}, ap2);
  setInts(avgi, "kernel", {3, 3});
  setInts(avgi, "strides", {2, 2});
  setInts(avgi, "padding", {1, 1, 0, 0});
  setInts(avgi, "dilation", {1, 1});
  setBool(avgi, "count_include_pad", true);
  // Transformer pieces: embedding gather -> layer norm -> gelu (both forms).
  uint32_t table = b.constF32("emb", {10, 6}, 8);
  uint32_t e = b.buf("e", F, {2, 3, 6});
  setInt(b.step(K::Gather, {table, ids}, e), "axis", 0);
  uint32_t gam = b.constF32("gamma", {6}, 9), bet = b.constF32("beta", {6}, 10);
  uint32_t ln = b.buf("ln", F, {2, 3, 6});
  PlanStep &lns = b.step(K::LayerNorm, {e, gam, bet}, ln);
  setInt(lns, "axis", 2); // the last; the dialect takes no negative axes
  setFloat(lns, "epsilon", 1e-5);
  uint32_t g1 = b.buf("g1", F, {2, 3, 6}), g2 = b.buf("g2", F, {2, 3, 6});
  setBool(b.step(K::Gelu, {ln}, g1), "tanh_approximation", true);
  setBool(b.step(K::Gelu, {ln}, g2), "tanh_approximation", false);
  // Elementwise.
  auto tb = [&](const char *n, DType d = DType::F32) {
    return b.buf(n, d, {2, 4, 6});
  };
  uint32_t ab = tb("abs"), er = tb("erf"), pw2 = tb("pow"), mn = tb("min"),
           cl = tb("clamp"), cmp = tb("cmp", DType::I1),
           ncmp = tb("not", DType::I1), sel = tb("sel"), ls = tb("logsm");
  b.step(K::Abs, {t}, ab);
  b.step(K::Erf, {t}, er);
  b.step(K::Pow, {ab, m}, pw2);
  b.step(K::Minimum, {t, m}, mn);
  PlanStep &cls = b.step(K::Clamp, {t}, cl);
  setFloat(cls, "min", -0.25);
  setFloat(cls, "max", 0.5);
  setInt(b.step(K::Compare, {t, m}, cmp), "direction",
         int64_t(rt::CompareOp::Lt));
  b.step(K::Not, {cmp}, ncmp);
  b.step(K::Select, {ncmp, t, m}, sel);
  setInt(b.step(K::LogSoftmax, {t}, ls), "axis", 2);
  uint32_t rm = b.buf("rmin", F, {2, 1, 6});
  PlanStep &rms = b.step(K::ReduceMin, {t}, rm);
  setInts(rms, "dims", {1});
  setBool(rms, "keepdim", true);
  // Data movement.
  uint32_t cc = b.buf("cat", F, {2, 9, 6});
  setInt(b.step(K::Concat, {t, m, rm}, cc), "axis", 1);
  uint32_t sl = b.buf("slice", F, {2, 2, 2});
  PlanStep &sls = b.step(K::Slice, {t}, sl);
  setInts(sls, "start", {0, 1, 1});
  setInts(sls, "limit", {2, 4, 5}); // start + (count - 1) * stride + 1
  setInts(sls, "strides", {1, 2, 3});
  uint32_t pd = b.buf("pad", F, {3, 5, 8});
  PlanStep &pds = b.step(K::Pad, {t}, pd);
  setInts(pds, "low", {0, 1, 0});
  setInts(pds, "high", {1, 0, 2});
  setFloat(pds, "value", -2);
  // Dropout, its seed and offset constants here (a training step's state).
  auto i64Const = [&](const char *n, int64_t v) {
    uint32_t i = b.buf(n, DType::I64, {}, fb::BufferKind::Constant);
    std::vector<uint8_t> bytes(8);
    std::memcpy(bytes.data(), &v, 8);
    b.p.buffers[i].data = bytes;
    return i;
  };
  uint32_t seed = i64Const("seed", 0x123456789abLL),
           offset = i64Const("offset", 7), dr = tb("dropout");
  setFloat(b.step(K::Dropout, {t, seed, offset}, dr), "p", 0.25);
  // The embedding's gradient's form: its rows summed back into the table's
  // shape.
  uint32_t back = b.buf("back", F, {10, 6});
  PlanStep &sa = b.step(K::ScatterAdd, {e, ids}, back);
  setInt(sa, "axis", 0);
  setInt(sa, "size", 10);
  b.p.inputs = {{"x", x}, {"t", t}, {"m", m}, {"ids", ids}};
  for (uint32_t o : {c2, dw, ap2, g1, g2, ab, er, pw2, mn, cl, ncmp, sel, ls,
                     cc, sl, pd, dr})
    b.p.outputs.push_back({b.p.buffers[o].name, o});
  return b.p;
}

std::vector<float> inputX() { return randomFloats(3 * 64, 20, -2, 2); }
std::vector<float> inputT() { return randomFloats(48, 21, -2, 2); }
std::vector<float> inputM() { return randomFloats(48, 22, -2, 2); }
std::vector<int64_t> inputIds() { return {0, 9, -1, 3, -10, 5}; }

/// What each step must compute: the plan interpreted with direct kernel
/// calls, attributes mapped here independently of the Session.
std::map<uint32_t, std::vector<uint8_t>> interpret(const Plan &p) {
  std::map<uint32_t, std::vector<uint8_t>> v;
  auto setF = [&](uint32_t i, const std::vector<float> &f) {
    v[i] = floatBytes(f);
  };
  setF(0, inputX());
  setF(1, inputT());
  setF(2, inputM());
  std::vector<int64_t> ids = inputIds();
  v[3].resize(ids.size() * 8);
  std::memcpy(v[3].data(), ids.data(), v[3].size());
  for (size_t i = 0; i < p.buffers.size(); ++i)
    if (p.buffers[i].kind == fb::BufferKind::Constant)
      v[uint32_t(i)] = p.buffers[i].data.toVector();
  auto in = [&](uint32_t i) {
    return rt::ConstTensor{p.buffers[i].dtype, p.buffers[i].shape,
                           v[i].data()};
  };
  for (const PlanStep &s : p.steps) {
    uint32_t o = s.outputs[0];
    v[o].assign(p.buffers[o].byteSize(), 0);
    rt::MutTensor out{p.buffers[o].dtype, p.buffers[o].shape, v[o].data()};
    Status st;
    const rt::OpAttrs &A = s.attrs;
    std::vector<int64_t> strides = A.getInts("strides"),
                         padding = A.getInts("padding"),
                         dilation = A.getInts("dilation"),
                         kernel = A.getInts("kernel");
    switch (s.op) {
    case K::Conv2d: {
      rt::Conv2dParams c;
      c.strideH = strides[0];
      c.strideW = strides[1];
      c.padTop = padding[0];
      c.padLeft = padding[1];
      c.padBottom = padding[2];
      c.padRight = padding[3];
      c.dilationH = dilation[0];
      c.dilationW = dilation[1];
      c.groups = A.getInt("groups");
      st = rt::conv2d(in(s.inputs[0]), in(s.inputs[1]), c, out);
      break;
    }
    case K::MaxPool2d:
    case K::AvgPool2d: {
      rt::Pool2dParams q;
      q.kernelH = kernel[0];
      q.kernelW = kernel[1];
      q.strideH = strides[0];
      q.strideW = strides[1];
      q.padTop = padding[0];
      q.padLeft = padding[1];
      q.padBottom = padding[2];
      q.padRight = padding[3];
      q.dilationH = dilation[0];
      q.dilationW = dilation[1];
      st = s.op == K::MaxPool2d
               ? rt::maxPool2d(in(s.inputs[0]), q, out)
               : rt::avgPool2d(in(s.inputs[0]), q,
                               A.getBool("count_include_pad"), out);
      break;
    }
    case K::BatchNorm:
      st = rt::batchNorm(in(s.inputs[0]), in(s.inputs[1]), in(s.inputs[2]),
                         in(s.inputs[3]), in(s.inputs[4]), A.getFloat("epsilon"),
                         A.getInt("feature_axis"), out);
      break;
    case K::LayerNorm:
      st = rt::layerNorm(in(s.inputs[0]), in(s.inputs[1]), in(s.inputs[2]),
                         A.getInt("axis"), A.getFloat("epsilon"), out);
      break;
    case K::Relu:
      st = rt::unary(rt::OpId::Relu, in(s.inputs[0]), out);
      break;
    case K::Gather:
      st = rt::gather(in(s.inputs[0]), in(s.inputs[1]), A.getInt("axis"),
                      out);
      break;
    case K::ScatterAdd:
      st = rt::scatterAdd(in(s.inputs[0]), in(s.inputs[1]), A.getInt("axis"),
                          out);
      break;
    case K::Gelu:
      st = rt::unary(rt::OpId::Gelu, in(s.inputs[0]), out,
                     A.getBool("tanh_approximation"));
      break;
    case K::Abs:
      st = rt::unary(rt::OpId::Abs, in(s.inputs[0]), out);
      break;
    case K::Erf:
      st = rt::unary(rt::OpId::Erf, in(s.inputs[0]), out);
      break;
    case K::Not:
      st = rt::unary(rt::OpId::Not, in(s.inputs[0]), out);
      break;
    case K::Pow:
      st = rt::binary(rt::OpId::Pow, in(s.inputs[0]), in(s.inputs[1]), out);
      break;
    case K::Minimum:
      st = rt::binary(rt::OpId::Minimum, in(s.inputs[0]), in(s.inputs[1]),
                      out);
      break;
    case K::Clamp:
      st = rt::clamp(in(s.inputs[0]), A.getFloat("min"), A.getFloat("max"),
                     out);
      break;
    case K::Compare: {
      EXPECT_EQ(A.getInt("direction", -1), int64_t(rt::CompareOp::Lt));
      st = rt::compare(rt::CompareOp::Lt, in(s.inputs[0]), in(s.inputs[1]),
                       out);
      break;
    }
    case K::Select:
      st = rt::select(in(s.inputs[0]), in(s.inputs[1]), in(s.inputs[2]), out);
      break;
    case K::LogSoftmax:
      st = rt::logSoftmax(in(s.inputs[0]), A.getInt("axis"), out);
      break;
    case K::ReduceMin:
      st = rt::reduce(rt::OpId::ReduceMin, in(s.inputs[0]), A.getInts("dims"),
                      A.getBool("keepdim"), out);
      break;
    case K::Concat: {
      std::vector<rt::ConstTensor> ins;
      for (uint32_t i : s.inputs)
        ins.push_back(in(i));
      st = rt::concat(ins, A.getInt("axis"), out);
      break;
    }
    case K::Slice:
      st = rt::slice(in(s.inputs[0]), A.getInts("start"), strides, out);
      break;
    case K::Pad:
      st = rt::pad(in(s.inputs[0]), A.getInts("low"), A.getInts("high"),
                   A.getFloat("value"), out);
      break;
    case K::Dropout: {
      uint64_t seed, offset;
      std::memcpy(&seed, v[s.inputs[1]].data(), 8);
      std::memcpy(&offset, v[s.inputs[2]].data(), 8);
      st = rt::dropout(in(s.inputs[0]), seed, offset, A.getFloat("p"), out);
      break;
    }
    default:
      ADD_FAILURE() << "no reference for " << rt::opName(s.op);
    }
    EXPECT_TRUE(st) << st.message();
  }
  return v;
}

Status load(const std::vector<uint8_t> &b,
            std::unique_ptr<Model> *m = nullptr) {
  std::unique_ptr<Model> local;
  return Model::loadMemory(b.data(), b.size(), "m.mcpk", m ? m : &local);
}

Plan planned() {
  Plan p = modelOpsPlan();
  Status st = codegen::planMemory(p);
  EXPECT_TRUE(st) << st.message();
  return p;
}

void expectRefused(const Plan &plan, const std::string &what) {
  Status st = load(writeUnchecked(plan));
  ASSERT_FALSE(st) << "expected: " << what;
  EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
}

void setInputs(Session &s) {
  std::vector<float> x = inputX(), t = inputT(), m = inputM();
  std::vector<int64_t> ids = inputIds();
  ASSERT_TRUE(s.setInput(0, DType::F32, {1, 3, 8, 8}, x.data(), x.size() * 4));
  ASSERT_TRUE(s.setInput(1, DType::F32, {2, 4, 6}, t.data(), t.size() * 4));
  ASSERT_TRUE(s.setInput(2, DType::F32, {2, 4, 6}, m.data(), m.size() * 4));
  ASSERT_TRUE(s.setInput(3, DType::I64, {2, 3}, ids.data(), ids.size() * 8));
}

} // namespace

TEST(ModelOps, EveryNewKindRunsThroughTheArtifact) {
  Plan p = planned();
  std::vector<uint8_t> bytes;
  Status st = codegen::writeArtifactToBytes(p, &bytes);
  ASSERT_TRUE(st) << st.message();
  const fb::Model *t = fb::GetSizePrefixedModel(bytes.data());
  EXPECT_EQ(t->schema_version_major(), 2u);
  EXPECT_EQ(t->schema_version_minor(), rt::kSchemaVersionMinor);
  std::set<K> kinds;
  for (const PlanStep &s : p.steps)
    kinds.insert(s.op);
  // The ops schema 1.1 added (those of real models).
  for (K k :
       {K::Abs,       K::Erf,       K::Gelu,      K::Pow,       K::Minimum,
        K::Clamp,     K::Compare,   K::Select,    K::Not,       K::LogSoftmax,
        K::ReduceMin, K::Concat,    K::Slice,     K::Gather,    K::Pad,
        K::Conv2d,    K::MaxPool2d, K::AvgPool2d, K::BatchNorm, K::LayerNorm,
        K::Dropout,   K::ScatterAdd}) {
    EXPECT_TRUE(rt::opInfo(k).isStep) << rt::opName(k);
    EXPECT_TRUE(kinds.count(k)) << rt::opName(k);
  }
  std::unique_ptr<Model> model;
  st = load(bytes, &model);
  ASSERT_TRUE(st) << st.message();
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*model, &s));
  setInputs(*s);
  auto expect = interpret(p);
  // The buffers a conv2d's result flows into (steps run in order).
  std::set<uint32_t> fromConv;
  for (const PlanStep &s : p.steps) {
    bool tainted = s.op == K::Conv2d;
    for (uint32_t i : s.inputs)
      tainted |= fromConv.count(i) > 0;
    if (tainted)
      fromConv.insert(s.outputs.begin(), s.outputs.end());
  }
  for (int run = 0; run < 2; ++run) {
    st = s->run();
    ASSERT_TRUE(st) << st.message();
    for (size_t i = 0; i < p.outputs.size(); ++i) {
      const void *data;
      size_t n;
      ASSERT_TRUE(s->output(i, &data, &n));
      const std::vector<uint8_t> &ref = expect[p.outputs[i].buffer];
      ASSERT_EQ(n, ref.size()) << p.outputs[i].name;
      const codegen::PlanBuffer &b = p.buffers[p.outputs[i].buffer];
      if (b.dtype == DType::F32 && fromConv.count(p.outputs[i].buffer)) {
        // The conv2d step runs oneDNN where the reference runs im2col +
        // sgemm: another summation order, within f32's tolerance.
        std::vector<float> got(n / 4);
        std::memcpy(got.data(), data, n);
        std::vector<float> want(n / 4);
        std::memcpy(want.data(), ref.data(), n);
        EXPECT_LT(mc::test::relError(got.data(), want), 1e-5)
            << p.outputs[i].name;
        continue;
      }
      // Same kernels, same inputs: bit-identical.
      EXPECT_EQ(std::memcmp(data, ref.data(), n), 0) << p.outputs[i].name;
    }
  }
}

TEST(ModelOps, GatherIndexOutOfRangeIsRefusedWhenTheInputIsSet) {
  // Input 3 holds the gather's indices: Session::setInput checks them
  // against the gathered dim, on every device, before any step runs (a
  // device kernel could not report them; the CPU's gather still checks).
  std::unique_ptr<Model> model;
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(codegen::writeArtifactToBytes(planned(), &bytes));
  ASSERT_TRUE(load(bytes, &model));
  std::vector<rt::IndexInput> index = rt::gatherIndexInputs(*model);
  ASSERT_EQ(index.size(), 4u);
  EXPECT_EQ(index[3].dim, 10);
  EXPECT_EQ(index[3].where, "mc.gather at model.py:9");
  EXPECT_EQ(index[0].dim, 0);
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*model, &s));
  setInputs(*s);
  for (int64_t bad : {10, -11}) {
    std::vector<int64_t> ids{0, 1, 2, bad, 4, 5};
    Status st = s->setInput(3, DType::I64, {2, 3}, ids.data(), 48);
    EXPECT_NE(st.message().find("': element 3 is " + std::to_string(bad) +
                                ", an index out of range for mc.gather at "
                                "model.py:9 over a dim of 10 (indices lie in "
                                "[-10, 10))"),
              std::string::npos)
        << st.message();
  }
  // In range, negative ones from the end: accepted and run.
  std::vector<int64_t> ids{0, 1, 2, -10, 9, -1};
  ASSERT_TRUE(s->setInput(3, DType::I64, {2, 3}, ids.data(), 48));
  Status st = s->run();
  EXPECT_TRUE(st) << st.message();
}

TEST(ModelOps, OtherMinorVersionsStillLoad) {
  // Schema 2.x reads any minor of its major: the mlp with its minor version
  // patched from the current one to the next loads and runs. (Files of major 1 are refused by
  // design since 2.0; see ArtifactTest.)
  std::vector<uint8_t> b = mlpArtifact();
  const fb::Model *m = fb::GetSizePrefixedModel(b.data());
  const uint8_t *field =
      reinterpret_cast<const flatbuffers::Table *>(m)->GetAddressOf(
          fb::Model::VT_SCHEMA_VERSION_MINOR);
  ASSERT_NE(field, nullptr);
  size_t at = size_t(field - b.data());
  ASSERT_EQ(b[at], rt::kSchemaVersionMinor);
  b[at] = rt::kSchemaVersionMinor + 1;
  fixTableCrc(b);
  std::unique_ptr<Model> model;
  Status st = load(b, &model);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(model->table().schema_version_minor(), rt::kSchemaVersionMinor + 1);
  std::unique_ptr<Session> s;
  ASSERT_TRUE(Session::create(*model, &s));
  std::vector<float> x = mlpInput();
  ASSERT_TRUE(s->setInput(0, DType::F32, {kBatch, kIn}, x.data(), x.size() * 4));
  ASSERT_TRUE(s->run());
  const void *p;
  size_t n;
  ASSERT_TRUE(s->output(0, &p, &n));
  EXPECT_LT(relError(static_cast<const float *>(p), mlpReference(x).probs),
            1e-5);
}

namespace {
/// Index of the first step of `kind` in the model-ops plan.
size_t stepOf(const Plan &p, K kind, size_t nth = 0) {
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (p.steps[i].op == kind && nth-- == 0)
      return i;
  ADD_FAILURE() << "no step " << rt::opName(kind);
  return 0;
}
uint32_t bufNamed(const Plan &p, const std::string &name) {
  for (size_t i = 0; i < p.buffers.size(); ++i)
    if (p.buffers[i].name == name)
      return uint32_t(i);
  ADD_FAILURE() << "no buffer " << name;
  return 0;
}
} // namespace

TEST(ModelOps, VerifierRefusesMalformedSteps) {
  Plan p;
  auto fresh = [&] { p = planned(); };
  auto at = [&](K kind, size_t nth = 0) -> PlanStep & {
    return p.steps[stepOf(p, kind, nth)];
  };
  // (Attribute names and kinds are checked in AttributesMustMatchTheKind.)

  // Conv2d.
  fresh();
  setInts(at(K::Conv2d), "strides", {1});
  expectRefused(p, "step 0 (mc.conv2d at model.py:1): strides has 1 entries, "
                   "expected 2 ([h, w])");
  fresh();
  setInts(at(K::Conv2d), "padding", {1, 1, -1, 1});
  expectRefused(p, "padding [1, 1, -1, 1]: entry 2 is -1, expected >= 0");
  fresh();
  setInts(at(K::Conv2d), "dilation", {0, 1});
  expectRefused(p, "dilation [0, 1]: entry 0 is 0, expected >= 1");
  fresh();
  setInts(at(K::Conv2d), "padding", {2, 1, 1, 1}); // output would be 9 high
  expectRefused(p, "output buffer 5 'c1' f32[1, 4, 8, 8]: expected shape "
                   "[1, 4, 9, 8]");
  fresh();
  setInt(at(K::Conv2d, 2), "groups", 3);
  expectRefused(p, "groups 3 must divide the input channels 4 and the output "
                   "channels 4");
  fresh();
  setInt(at(K::Conv2d, 2), "groups", 2); // weight dim 1 is 1, C/groups is 2
  expectRefused(p, "weight [4, 1, 3, 3] expects 2 input channels (1 per "
                   "group x 2 groups)");
  fresh();
  setInts(at(K::Conv2d), "padding", {0, 0, 0, 0});
  setInts(at(K::Conv2d), "dilation", {5, 1}); // 11 > 8
  expectRefused(p, "the kernel [3, 3] does not fit the padded input "
                   "[1, 3, 8, 8]");
  fresh();
  p.buffers[bufNamed(p, "w1")].dtype = DType::I32;
  expectRefused(p, "buffer 4 'w1' i32[4, 3, 3, 3] must have the dtype of "
                   "input 0");
  fresh();
  setInts(at(K::Conv2d), "strides", {int64_t(1) << 40, 1});
  expectRefused(p, "entry 0 is 1099511627776, expected <= 2147483647");

  // Pooling: output size by the formula, in the step's ceil_mode.
  fresh();
  p.buffers[bufNamed(p, "mp")].shape = {1, 4, 6, 5};
  expectRefused(p, "(mc.max_pool2d at model.py:4): output buffer 12 'mp' "
                   "f32[1, 4, 6, 5]: expected shape [1, 4, 5, 5]");
  fresh();
  p.buffers[bufNamed(p, "ap")].shape = {1, 4, 3, 2}; // floor, but ceil_mode
  expectRefused(p, "expected shape [1, 4, 3, 3]");
  fresh();
  setInts(at(K::MaxPool2d), "kernel", {3, 0});
  expectRefused(p, "kernel [3, 0]: entry 1 is 0, expected >= 1");
  fresh();
  setInts(at(K::AvgPool2d), "padding", {0, 0, 0});
  expectRefused(p, "padding has 3 entries, expected 4 ([top, left, bottom, "
                   "right])");
  fresh();
  setInts(at(K::MaxPool2d), "kernel", {11, 3});
  expectRefused(p, "the window [11, 3] does not fit the padded input "
                   "[1, 4, 8, 8]");
  // Ceil mode may not add a window that starts in the trailing padding:
  // 5 with kernel 2, stride 2, padding 1: floor 3, ceil 4 -> 3.
  {
    Builder b;
    uint32_t x = b.buf("x", DType::F32, {1, 1, 5, 5});
    uint32_t y = b.buf("y", DType::F32, {1, 1, 4, 3});
    PlanStep &s = b.step(K::MaxPool2d, {x}, y);
    setInts(s, "kernel", {2, 2});
    setInts(s, "strides", {2, 2});
    setInts(s, "padding", {1, 1, 1, 1});
    setInts(s, "dilation", {1, 1});
    b.p.inputs = {{"x", x}};
    b.p.outputs = {{"y", y}};
    ASSERT_TRUE(codegen::planMemory(b.p));
    setBool(s, "ceil_mode", true);
    expectRefused(b.p, "expected shape [1, 1, 3, 3]");
  }

  // Norms.
  fresh();
  p.buffers[bufNamed(p, "bn_var")].shape = {3};
  p.buffers[bufNamed(p, "bn_var")].data = std::vector<uint8_t>(12);
  expectRefused(p, "(mc.batch_norm at model.py:2): input 4 (variance) buffer 9 "
                   "'bn_var' f32[3] must be f32[4] (the size of the feature "
                   "axis)");
  fresh();
  setInt(at(K::BatchNorm), "feature_axis", 4);
  expectRefused(p, "axis 4 is out of range for rank 4 (input 0");
  fresh();
  setFloat(at(K::BatchNorm), "epsilon", -1);
  expectRefused(p, "epsilon -1.000000 must be finite and >= 0");
  fresh();
  setInt(at(K::LayerNorm), "axis", 1); // gamma would need [3, 6]
  expectRefused(p, "input 1 (gamma) buffer 21 'gamma' f32[6] must be "
                   "f32[3, 6] (the normalized dims of input 0)");
  fresh();
  at(K::LayerNorm).inputs.pop_back();
  expectRefused(p, "expected 3 input(s) and 1 output(s), found 2 and 1");

  // Gather.
  fresh();
  p.buffers[bufNamed(p, "ids")].dtype = DType::F32;
  p.buffers[bufNamed(p, "ids")].shape = {2, 3, 2}; // same bytes
  expectRefused(p, "unsupported dtype f32 of input 1 (the indices)");
  fresh();
  setInt(at(K::Gather), "axis", 1);
  expectRefused(p, "expected shape [10, 2, 3] (data shape[:axis] + indices "
                   "shape + data shape[axis+1:])");
  fresh();
  setInt(at(K::Gather), "axis", -3);
  expectRefused(p, "axis -3 is out of range for rank 2");
  fresh();
  setInt(at(K::Gather), "axis", -2); // once taken; the dialect never did
  expectRefused(p, "axis -2 is out of range for rank 2");

  // Slice.
  fresh();
  setInts(at(K::Slice), "limit", {2, 4, 7}); // past the size 6
  expectRefused(p, "(mc.slice at model.py:");
  expectRefused(p, "dimension 2 of size 6 cannot be sliced from 1 to 7 (needs "
                   "0 <= start <= limit <= size)");
  fresh();
  setInts(at(K::Slice), "start", {0, 1, 3}); // 1 element in [3, 5), not 2
  expectRefused(p, "expected shape [2, 2, 1]");
  fresh();
  setInts(at(K::Slice), "strides", {1, 0, 3});
  expectRefused(p, "strides [1, 0, 3]: entry 1 is 0, expected >= 1");
  fresh();
  setInts(at(K::Slice), "start", {0, 1});
  expectRefused(p, "start has 2 entries, expected 3 (one per input dim)");
  fresh();
  setInts(at(K::Slice), "start", {-1, 1, 1});
  expectRefused(p, "entry 0 is -1, expected >= 0");

  // Pad.
  fresh();
  setInts(at(K::Pad), "low", {0, -1, 0});
  expectRefused(p, "low [0, -1, 0]: entry 1 is -1, expected >= 0");
  fresh();
  setInts(at(K::Pad), "high", {1, 0, 1});
  expectRefused(p, "expected shape [3, 5, 7] (input shape + low + high)");

  // Concat.
  fresh();
  at(K::Concat).inputs.pop_back(); // 4 + 4 != 9
  expectRefused(p, "expected shape [2, 8, 6] (the inputs joined along the "
                   "axis)");
  fresh();
  setInt(at(K::Concat), "axis", 2);
  expectRefused(p, "input 2 [2, 1, 6] differs from input 0 [2, 4, 6] in "
                   "dimension 1, which is not the axis");
  fresh();
  at(K::Concat).inputs = {};
  expectRefused(p, "expected at least 1 input and 1 output, found 0 and 1");
  fresh();
  setInt(at(K::Concat), "axis", 3);
  expectRefused(p, "axis 3 is out of range for rank 3");

  // Compare / Select / Not and the elementwise dtypes.
  fresh();
  p.buffers[bufNamed(p, "cmp")].dtype = DType::F32;
  expectRefused(p, "(mc.compare at model.py:");
  expectRefused(p, "must be i1[2, 4, 6] (i1 with the shape of input 0)");
  fresh();
  at(K::Select).inputs = {bufNamed(p, "t"), bufNamed(p, "t"), bufNamed(p, "m")};
  expectRefused(p, "unsupported dtype f32 of input 0 (the predicate)");
  fresh();
  at(K::Not).inputs = {bufNamed(p, "t")};
  expectRefused(p, "(mc.not at model.py:");
  expectRefused(p, "must have the dtype and shape of input 0");
  fresh();
  at(K::Compare).inputs = {bufNamed(p, "cmp"), bufNamed(p, "not")};
  at(K::Compare).outputs = {bufNamed(p, "sel")};
  p.buffers[bufNamed(p, "sel")].dtype = DType::I1;
  expectRefused(p,
                "supported: f32, f16, bf16, i32, i64 (i1 only for EQ and NE)");
  // Dropout: an i64 scalar seed and offset, p in [0, 1].
  fresh();
  at(K::Dropout).inputs[1] = bufNamed(p, "t");
  expectRefused(p, "unsupported dtype f32 of input 1 (the seed)");
  fresh();
  p.buffers[bufNamed(p, "offset")].shape = {1};
  expectRefused(p, "(mc.dropout at model.py:");
  expectRefused(p, "input 2 (the offset) buffer");
  expectRefused(p, "must be a scalar");
  fresh();
  setFloat(at(K::Dropout), "p", 1.5);
  expectRefused(p, "p 1.500000 is outside [0, 1]");
  fresh();
  at(K::Dropout).inputs[0] = bufNamed(p, "cmp");
  p.buffers[bufNamed(p, "dropout")].dtype = DType::I1;
  expectRefused(p, "unsupported dtype i1 of input 0");
  // ScatterAdd: the size attribute is the result's, the updates' middle
  // dims the indices' shape, f32 updates, integer indices.
  fresh();
  setInt(at(K::ScatterAdd), "size", 9);
  expectRefused(p, "(mc.scatter_add at model.py:");
  expectRefused(p, "has size 10 along axis 0, not the attribute size 9");
  fresh();
  setInt(at(K::ScatterAdd), "axis", 1);
  setInt(at(K::ScatterAdd), "size", 6);
  expectRefused(p, "updates dims 1..2 are [3, 6], not the indices' shape "
                   "[2, 3]");
  fresh();
  p.buffers[bufNamed(p, "back")].shape = {10, 7};
  expectRefused(p, "expected shape [10, 6] (updates shape[:axis] + [size] + "
                   "updates shape[axis + rank(indices):])");
  fresh();
  at(K::ScatterAdd).inputs = {bufNamed(p, "e"), bufNamed(p, "e")};
  expectRefused(p, "unsupported dtype f32 of input 1 (the indices)");
  fresh();
  at(K::Erf).inputs = {bufNamed(p, "cmp")};
  expectRefused(p, "must have the dtype and shape of input 0");
  fresh();
  at(K::Pow).inputs = {bufNamed(p, "t")};
  expectRefused(p, "(mc.pow at model.py:");
  expectRefused(p, "expected 2 input(s) and 1 output(s), found 1 and 1");
  fresh();
  setInt(at(K::LogSoftmax), "axis", 3);
  expectRefused(p, "(mc.log_softmax at model.py:");
  expectRefused(p, "axis 3 is out of range");
  fresh();
  setBool(at(K::ReduceMin), "keepdim", false);
  expectRefused(p, "expected shape [2, 6]");
}

namespace {
/// Byte offset in `b` of field `vt` of the attribute `name` of step `step`.
size_t attrField(const std::vector<uint8_t> &b, size_t step,
                 const std::string &name, flatbuffers::voffset_t vt) {
  const fb::Model *m = fb::GetSizePrefixedModel(b.data());
  const fb::Step *st = m->steps()->Get(uint32_t(step));
  if (st->attrs())
    for (const fb::Attr *a : *st->attrs())
      if (a->name() && a->name()->str() == name) {
        const uint8_t *f =
            reinterpret_cast<const flatbuffers::Table *>(a)->GetAddressOf(vt);
        if (f)
          return size_t(f - b.data());
      }
  ADD_FAILURE() << "no field of attribute " << name << " in step " << step;
  return 0;
}
} // namespace

TEST(ModelOps, CompareDirectionOutOfRangeIsRefused) {
  // Patch the compare step's "direction" attribute in the table to 9.
  Plan p = planned();
  std::vector<uint8_t> b;
  ASSERT_TRUE(codegen::writeArtifactToBytes(p, &b));
  size_t at = attrField(b, stepOf(p, K::Compare), "direction", fb::Attr::VT_I);
  ASSERT_NE(at, 0u);
  ASSERT_EQ(b[at], uint8_t(rt::CompareOp::Lt));
  b[at] = 9;
  fixTableCrc(b);
  Status s = load(b);
  EXPECT_NE(s.message().find("unknown compare direction 9"), std::string::npos)
      << s.message();
}

TEST(ModelOps, AttributesMustMatchTheKind) {
  // Patch an attribute's kind byte in the table: the compare's direction
  // (Int) read as a Float, and the conv's strides (Ints) as an Int.
  Plan p = planned();
  std::vector<uint8_t> b;
  ASSERT_TRUE(codegen::writeArtifactToBytes(p, &b));
  std::vector<uint8_t> c = b;
  size_t at =
      attrField(c, stepOf(p, K::Compare), "direction", fb::Attr::VT_KIND);
  ASSERT_NE(at, 0u);
  c[at] = uint8_t(fb::AttrKind::Float);
  fixTableCrc(c);
  Status s = load(c);
  EXPECT_NE(s.message().find("step 17 (mc.compare at model.py:18): attribute "
                             "'direction' has kind 2, expected 1"),
            std::string::npos)
      << s.message();
  c = b;
  at = attrField(c, stepOf(p, K::Conv2d), "strides", fb::Attr::VT_KIND);
  ASSERT_NE(at, 0u);
  c[at] = uint8_t(fb::AttrKind::Int);
  fixTableCrc(c);
  s = load(c);
  EXPECT_NE(s.message().find("step 0 (mc.conv2d at model.py:1): attribute "
                             "'strides' has kind 1, expected 3"),
            std::string::npos)
      << s.message();

  // A required attribute missing, and one the op does not declare.
  p = planned();
  eraseAttr(p.steps[stepOf(p, K::Conv2d)], "groups");
  expectRefused(p, "step 0 (mc.conv2d at model.py:1): attribute 'groups' is "
                   "missing");
  p = planned();
  setInt(p.steps[stepOf(p, K::Abs)], "axis", 0);
  expectRefused(p, "unknown attribute 'axis' of mc.abs");
}

TEST(ModelOps, TableMutationsNeverCrash) {
  // Random bytes of the table changed, checksum repaired: whatever still
  // loads must run without touching memory outside its buffers.
  std::vector<uint8_t> b;
  ASSERT_TRUE(codegen::writeArtifactToBytes(planned(), &b));
  uint32_t n = uint32_t(b[0]) | uint32_t(b[1]) << 8 | uint32_t(b[2]) << 16;
  std::mt19937 rng(11);
  int loaded = 0;
  for (int iter = 0; iter < 6000; ++iter) {
    std::vector<uint8_t> m = b;
    for (int k = 0, count = 1 + iter % 3; k < count; ++k)
      m[4 + rng() % n] = uint8_t(rng());
    fixTableCrc(m);
    std::unique_ptr<Model> model;
    if (!load(m, &model) || model->table().arena_size() > (1u << 22))
      continue;
    ++loaded;
    std::unique_ptr<Session> s;
    if (!Session::create(*model, &s))
      continue;
    for (size_t k = 0; k < model->inputs().size(); ++k) {
      const rt::TensorInfo &info = model->inputs()[k];
      std::vector<uint8_t> zeros(info.byteSize);
      ASSERT_TRUE(
          s->setInput(k, info.dtype, info.shape, zeros.data(), zeros.size()));
    }
    (void)s->run();
  }
  EXPECT_GT(loaded, 0);
}

// The executor: one arena per session, per-step tensor views built once at
// creation, so run() only dispatches to the kernels (no allocation).
#include "modelc/checkpoint.h"
#include "modelc/model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mc::rt {

namespace {

struct StepExec {
  fb::OpKind kind = fb::OpKind::Copy;
  std::vector<ConstTensor> in;
  MutTensor out{DType::F32, {}, nullptr};
  bool transposeA = false, transposeB = false, keepdim = false;
  std::vector<int64_t> ints; // reduce/broadcast dims, permutation, slice start,
                             // pad low
  std::vector<int64_t> ints2; // slice strides, pad high
  int64_t axis = 0;
  bool flag = false; // Gelu tanh form, AvgPool2d count_include_pad
  double lo = 0, hi = 0; // Clamp bounds; Pad value in lo
  double epsilon = 0;
  CompareOp compare = CompareOp::Eq;
  Conv2dParams conv;
  Pool2dParams pool;
  float *workspace = nullptr; // Conv2d im2col scratch (session-owned)
  size_t workspaceFloats = 0;
};

struct InputSlot {
  uint8_t *arenaPtr = nullptr;
  bool set = false;
  /// Some step output shares this input's arena bytes (the planner reused
  /// them once the input was dead), so run() would clobber it: keep the
  /// caller's copy here and move it in at the start of each run, which keeps
  /// "set once, run many times" correct.
  bool clobbered = false;
  std::vector<uint8_t> staging;
};

bool overlaps(uint64_t ao, uint64_t as, uint64_t bo, uint64_t bs) {
  return as && bs && ao < bo + bs && bo < ao + as;
}

Status dispatch(const StepExec &s) {
  using K = fb::OpKind;
  switch (s.kind) {
  case K::Copy:
    return copy(s.in[0], s.out);
  case K::Add:
    return binary(BinaryOp::Add, s.in[0], s.in[1], s.out);
  case K::Sub:
    return binary(BinaryOp::Sub, s.in[0], s.in[1], s.out);
  case K::Mul:
    return binary(BinaryOp::Mul, s.in[0], s.in[1], s.out);
  case K::Div:
    return binary(BinaryOp::Div, s.in[0], s.in[1], s.out);
  case K::Maximum:
    return binary(BinaryOp::Maximum, s.in[0], s.in[1], s.out);
  case K::Neg:
    return unary(UnaryOp::Neg, s.in[0], s.out);
  case K::Exp:
    return unary(UnaryOp::Exp, s.in[0], s.out);
  case K::Log:
    return unary(UnaryOp::Log, s.in[0], s.out);
  case K::Tanh:
    return unary(UnaryOp::Tanh, s.in[0], s.out);
  case K::Sigmoid:
    return unary(UnaryOp::Sigmoid, s.in[0], s.out);
  case K::Relu:
    return unary(UnaryOp::Relu, s.in[0], s.out);
  case K::Sqrt:
    return unary(UnaryOp::Sqrt, s.in[0], s.out);
  case K::Cast:
    return cast(s.in[0], s.out);
  case K::BroadcastInDim:
    return broadcastInDim(s.in[0], s.ints, s.out);
  case K::Transpose:
    return transpose(s.in[0], s.ints, s.out);
  case K::ReduceSum:
    return reduce(ReduceOp::Sum, s.in[0], s.ints, s.keepdim, s.out);
  case K::ReduceMean:
    return reduce(ReduceOp::Mean, s.in[0], s.ints, s.keepdim, s.out);
  case K::ReduceMax:
    return reduce(ReduceOp::Max, s.in[0], s.ints, s.keepdim, s.out);
  case K::Softmax:
    return softmax(s.in[0], s.axis, s.out);
  case K::MatMul:
    return matmul(s.in[0], s.in[1], s.transposeA, s.transposeB, s.out);
  // Schema 1.1.
  case K::Abs:
    return unary(UnaryOp::Abs, s.in[0], s.out);
  case K::Erf:
    return unary(UnaryOp::Erf, s.in[0], s.out);
  case K::Gelu:
    return unary(s.flag ? UnaryOp::GeluTanh : UnaryOp::Gelu, s.in[0], s.out);
  case K::Pow:
    return binary(BinaryOp::Pow, s.in[0], s.in[1], s.out);
  case K::Minimum:
    return binary(BinaryOp::Minimum, s.in[0], s.in[1], s.out);
  case K::Clamp:
    return clamp(s.in[0], s.lo, s.hi, s.out);
  case K::Compare:
    return compare(s.compare, s.in[0], s.in[1], s.out);
  case K::Select:
    return select(s.in[0], s.in[1], s.in[2], s.out);
  case K::Not:
    return unary(UnaryOp::Not, s.in[0], s.out);
  case K::LogSoftmax:
    return logSoftmax(s.in[0], s.axis, s.out);
  case K::ReduceMin:
    return reduce(ReduceOp::Min, s.in[0], s.ints, s.keepdim, s.out);
  case K::Concat:
    return concat(s.in, s.axis, s.out);
  case K::Slice:
    return slice(s.in[0], s.ints, s.ints2, s.out);
  case K::Gather:
    return gather(s.in[0], s.in[1], s.axis, s.out);
  case K::Pad:
    return pad(s.in[0], s.ints, s.ints2, s.lo, s.out);
  case K::Conv2d:
    return conv2d(s.in[0], s.in[1], s.conv, s.out, s.workspace,
                  s.workspaceFloats);
  case K::MaxPool2d:
    return maxPool2d(s.in[0], s.pool, s.out);
  case K::AvgPool2d:
    return avgPool2d(s.in[0], s.pool, s.flag, s.out);
  case K::BatchNorm:
    return batchNorm(s.in[0], s.in[1], s.in[2], s.in[3], s.in[4], s.epsilon,
                     s.axis, s.out);
  case K::LayerNorm:
    return layerNorm(s.in[0], s.in[1], s.in[2], s.axis, s.epsilon, s.out);
  }
  return Status::error("unknown op kind " + std::to_string(int(s.kind)));
}

CompareOp compareOp(fb::CompareDirection d) {
  switch (d) {
  case fb::CompareDirection::EQ:
    return CompareOp::Eq;
  case fb::CompareDirection::NE:
    return CompareOp::Ne;
  case fb::CompareDirection::LT:
    return CompareOp::Lt;
  case fb::CompareDirection::LE:
    return CompareOp::Le;
  case fb::CompareDirection::GT:
    return CompareOp::Gt;
  case fb::CompareDirection::GE:
    return CompareOp::Ge;
  }
  return CompareOp::Eq; // the verifier refuses other values
}

/// [h, w] and [top, left, bottom, right] vectors (lengths checked by the
/// verifier).
int64_t at(const flatbuffers::Vector<int64_t> *v, uint32_t i, int64_t dflt) {
  return v && i < v->size() ? v->Get(i) : dflt;
}

/// MODELC_PROFILE=1 (any value but empty or "0"): run() times every step;
/// when the session ends, a table of time per op kind and the slowest steps
/// goes to stderr. Off by default: then run() reads no clock.
bool profileRequested() {
  const char *v = std::getenv("MODELC_PROFILE");
  return v && *v && std::strcmp(v, "0") != 0;
}

} // namespace

struct Session::Impl {
  ~Impl() {
    if (profile)
      printProfile();
  }
  void printProfile() const;

  std::string name;
  bool profile = false;
  uint64_t profiledRuns = 0;
  std::vector<double> stepSeconds; // per step, summed over profiled runs

  AlignedBytes arena;
  AlignedBytes state; // the state region: persists between runs
  AlignedBytes workspace; // Conv2d im2col scratch, shared by the steps
  std::vector<StepExec> steps;
  std::vector<InputSlot> inputs;
};

void Session::Impl::printProfile() const {
  if (!profiledRuns || steps.empty())
    return;
  double total = 0;
  for (double t : stepSeconds)
    total += t;
  double runs = double(profiledRuns);
  struct Row {
    fb::OpKind kind;
    int count = 0;
    double seconds = 0;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < steps.size(); ++i) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row &r) {
      return r.kind == steps[i].kind;
    });
    if (it == rows.end()) {
      rows.push_back(Row{steps[i].kind});
      it = rows.end() - 1;
    }
    ++it->count;
    it->seconds += stepSeconds[i];
  }
  std::sort(rows.begin(), rows.end(),
            [](const Row &a, const Row &b) { return a.seconds > b.seconds; });
  std::fprintf(stderr,
               "profile: %s: %llu runs, %.3f ms per run in %zu steps "
               "(MODELC_PROFILE)\n",
               name.c_str(), (unsigned long long)profiledRuns,
               total / runs * 1e3, steps.size());
  std::fprintf(stderr, "  %-16s %6s %12s %7s\n", "op kind", "steps",
               "ms per run", "share");
  for (const Row &r : rows)
    std::fprintf(stderr, "  %-16s %6d %12.3f %6.1f%%\n",
                 fb::EnumNameOpKind(r.kind), r.count, r.seconds / runs * 1e3,
                 total > 0 ? 100.0 * r.seconds / total : 0.0);
  std::vector<size_t> order(steps.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return stepSeconds[a] > stepSeconds[b];
  });
  size_t top = std::min<size_t>(order.size(), 15);
  std::fprintf(stderr, "  slowest %zu steps:\n", top);
  for (size_t k = 0; k < top; ++k) {
    const StepExec &e = steps[order[k]];
    std::string ins;
    for (const ConstTensor &t : e.in)
      ins += (ins.empty() ? "" : ", ") + shapeString(t.shape);
    std::fprintf(stderr, "  %5zu %-12s %9.3f ms %5.1f%%  (%s) -> %s\n",
                 order[k], fb::EnumNameOpKind(e.kind),
                 stepSeconds[order[k]] / runs * 1e3,
                 total > 0 ? 100.0 * stepSeconds[order[k]] / total : 0.0,
                 ins.c_str(), shapeString(e.out.shape).c_str());
  }
}

Session::Session(const Model &model) : model_(model), impl_(new Impl()) {}
Session::~Session() = default;

Status Session::create(const Model &model, std::unique_ptr<Session> *out) {
  if (!out)
    return Status::error(model.name() + ": no output session given");
  const fb::Model &t = model.table();
  std::unique_ptr<Session> s(new Session(model));
  Impl &impl = *s->impl_;
  impl.arena = AlignedBytes(size_t(t.arena_size()));
  if (!impl.arena.data() || impl.arena.size() != t.arena_size())
    return Status::error(model.name() + ": cannot allocate an arena of " +
                         std::to_string(t.arena_size()) + " bytes");
  impl.state = AlignedBytes(size_t(model.stateSize()));
  if (!impl.state.data() || impl.state.size() != model.stateSize())
    return Status::error(model.name() + ": cannot allocate a state region of " +
                         std::to_string(model.stateSize()) + " bytes");
  s->resetState();
  // The verifier has checked every index, offset and shape used below.
  const auto &buffers = *t.buffers();
  auto bufPtr = [&](uint32_t i) -> uint8_t * {
    const fb::Buffer *b = buffers.Get(i);
    if (b->kind() == fb::BufferKind::Constant)
      return const_cast<uint8_t *>(model.constantData()) + b->offset();
    if (b->kind() == fb::BufferKind::State)
      return impl.state.data() + b->offset();
    return impl.arena.data() + b->offset();
  };
  auto shapeOf = [&](uint32_t i) {
    const auto *v = buffers.Get(i)->shape();
    return v ? Shape(v->begin(), v->end()) : Shape();
  };
  if (const auto *steps = t.steps()) {
    impl.steps.reserve(steps->size());
    for (const fb::Step *st : *steps) {
      StepExec e;
      e.kind = st->kind();
      if (st->inputs())
        for (uint32_t i : *st->inputs())
          e.in.push_back(ConstTensor{DType(buffers.Get(i)->dtype()), shapeOf(i),
                                     bufPtr(i)});
      uint32_t o = st->outputs()->Get(0);
      e.out = MutTensor{DType(buffers.Get(o)->dtype()), shapeOf(o), bufPtr(o)};
      auto ints = [](const flatbuffers::Vector<int64_t> *v) {
        return v ? std::vector<int64_t>(v->begin(), v->end())
                 : std::vector<int64_t>();
      };
      if (const auto *a = st->attrs_as_MatMulAttrs()) {
        e.transposeA = a->transpose_a();
        e.transposeB = a->transpose_b();
      } else if (const auto *r = st->attrs_as_ReduceAttrs()) {
        e.ints = ints(r->dims());
        e.keepdim = r->keepdim();
      } else if (const auto *p = st->attrs_as_TransposeAttrs()) {
        e.ints = ints(p->permutation());
      } else if (const auto *b = st->attrs_as_BroadcastAttrs()) {
        e.ints = ints(b->dims());
      } else if (const auto *sm = st->attrs_as_SoftmaxAttrs()) {
        e.axis = sm->axis();
      } else if (const auto *g = st->attrs_as_GeluAttrs()) {
        e.flag = g->tanh_approximation();
      } else if (const auto *c = st->attrs_as_ClampAttrs()) {
        e.lo = c->min();
        e.hi = c->max();
      } else if (const auto *c = st->attrs_as_CompareAttrs()) {
        e.compare = compareOp(c->direction());
      } else if (const auto *c = st->attrs_as_ConcatAttrs()) {
        e.axis = c->axis();
      } else if (const auto *sl = st->attrs_as_SliceAttrs()) {
        e.ints = ints(sl->start());
        e.ints2 = ints(sl->strides());
      } else if (const auto *g = st->attrs_as_GatherAttrs()) {
        e.axis = g->axis();
      } else if (const auto *pd = st->attrs_as_PadAttrs()) {
        e.ints = ints(pd->low());
        e.ints2 = ints(pd->high());
        e.lo = pd->value();
      } else if (const auto *c = st->attrs_as_Conv2dAttrs()) {
        e.conv.strideH = at(c->strides(), 0, 1);
        e.conv.strideW = at(c->strides(), 1, 1);
        e.conv.padTop = at(c->padding(), 0, 0);
        e.conv.padLeft = at(c->padding(), 1, 0);
        e.conv.padBottom = at(c->padding(), 2, 0);
        e.conv.padRight = at(c->padding(), 3, 0);
        e.conv.dilationH = at(c->dilation(), 0, 1);
        e.conv.dilationW = at(c->dilation(), 1, 1);
        e.conv.groups = c->groups();
        if (e.in.size() == 2)
          e.workspaceFloats = conv2dWorkspaceSize(e.in[0].shape, e.in[1].shape,
                                                  e.out.shape, e.conv);
      } else if (const auto *pl = st->attrs_as_Pool2dAttrs()) {
        e.pool.kernelH = at(pl->kernel(), 0, 1);
        e.pool.kernelW = at(pl->kernel(), 1, 1);
        e.pool.strideH = at(pl->strides(), 0, 1);
        e.pool.strideW = at(pl->strides(), 1, 1);
        e.pool.padTop = at(pl->padding(), 0, 0);
        e.pool.padLeft = at(pl->padding(), 1, 0);
        e.pool.padBottom = at(pl->padding(), 2, 0);
        e.pool.padRight = at(pl->padding(), 3, 0);
        e.pool.dilationH = at(pl->dilation(), 0, 1);
        e.pool.dilationW = at(pl->dilation(), 1, 1);
        e.flag = pl->count_include_pad();
      } else if (const auto *nm = st->attrs_as_NormAttrs()) {
        e.epsilon = nm->epsilon();
        e.axis = nm->axis();
      }
      impl.steps.push_back(std::move(e));
    }
  }
  // One im2col scratch for all Conv2d steps (they run one at a time), so
  // run() does not allocate.
  size_t scratch = 0;
  for (const StepExec &e : impl.steps)
    scratch = std::max(scratch, e.workspaceFloats);
  if (scratch) {
    // conv2d's checks bound each factor by INT_MAX: no overflow here.
    impl.workspace = AlignedBytes(scratch * sizeof(float));
    if (!impl.workspace.data())
      return Status::error(model.name() +
                           ": cannot allocate the conv2d workspace of " +
                           std::to_string(scratch * sizeof(float)) + " bytes");
    for (StepExec &e : impl.steps)
      if (e.workspaceFloats)
        e.workspace = reinterpret_cast<float *>(impl.workspace.data());
  }
  impl.name = model.name();
  impl.profile = profileRequested();
  if (impl.profile)
    impl.stepSeconds.assign(impl.steps.size(), 0.0);
  impl.inputs.resize(model.inputs().size());
  for (size_t i = 0; i < impl.inputs.size(); ++i) {
    const fb::Buffer *b = buffers.Get(model.inputs()[i].buffer);
    InputSlot &slot = impl.inputs[i];
    slot.arenaPtr = bufPtr(model.inputs()[i].buffer);
    if (const auto *steps = t.steps())
      for (const fb::Step *st : *steps)
        for (uint32_t o : *st->outputs()) {
          const fb::Buffer *ob = buffers.Get(o);
          slot.clobbered |=
              ob->kind() == fb::BufferKind::Arena &&
              overlaps(b->offset(), b->size(), ob->offset(), ob->size());
        }
    if (slot.clobbered)
      slot.staging.resize(b->size());
  }
  *out = std::move(s);
  return Status::ok();
}

Status Session::setInput(size_t index, DType dtype, const Shape &shape,
                         const void *data, size_t byteSize) {
  const auto &infos = model_.inputs();
  if (index >= infos.size())
    return Status::error("input index " + std::to_string(index) +
                         " is out of range (the model has " +
                         std::to_string(infos.size()) + " inputs)");
  const TensorInfo &info = infos[index];
  if (dtype != info.dtype || shape != info.shape) {
    bool validDType = uint8_t(dtype) <= uint8_t(DType::I1);
    return Status::error("input '" + info.name + "': expected " +
                         dtypeName(info.dtype) + shapeString(info.shape) +
                         ", got " +
                         (validDType ? std::string(dtypeName(dtype))
                                     : "dtype " + std::to_string(int(dtype))) +
                         shapeString(shape));
  }
  if (byteSize != info.byteSize)
    return Status::error("input '" + info.name + "': expected " +
                         std::to_string(info.byteSize) + " bytes for " +
                         dtypeName(info.dtype) + shapeString(info.shape) +
                         ", got " + std::to_string(byteSize));
  if (!data && byteSize)
    return Status::error("input '" + info.name + "': data is null");
  InputSlot &slot = impl_->inputs[index];
  if (byteSize)
    std::memcpy(slot.clobbered ? slot.staging.data() : slot.arenaPtr, data,
                byteSize);
  slot.set = true;
  return Status::ok();
}

Status Session::run() {
  Impl &impl = *impl_;
  for (size_t i = 0; i < impl.inputs.size(); ++i)
    if (!impl.inputs[i].set)
      return Status::error("input '" + model_.inputs()[i].name +
                           "' was never set (expected " +
                           dtypeName(model_.inputs()[i].dtype) +
                           shapeString(model_.inputs()[i].shape) + ")");
  for (const InputSlot &slot : impl.inputs)
    if (slot.clobbered && !slot.staging.empty())
      std::memcpy(slot.arenaPtr, slot.staging.data(), slot.staging.size());
  using Clock = std::chrono::steady_clock;
  Clock::time_point t0;
  if (impl.profile) {
    ++impl.profiledRuns;
    t0 = Clock::now();
  }
  for (size_t i = 0; i < impl.steps.size(); ++i) {
    Status st = dispatch(impl.steps[i]);
    if (impl.profile) {
      Clock::time_point t1 = Clock::now();
      impl.stepSeconds[i] += std::chrono::duration<double>(t1 - t0).count();
      t0 = t1;
    }
    if (!st) {
      const fb::Step *step = model_.table().steps()->Get(uint32_t(i));
      std::string loc = step->location() ? step->location()->str() : "";
      return Status::error(model_.name() + ": step " + std::to_string(i) +
                           " (" + fb::EnumNameOpKind(step->kind()) +
                           (loc.empty() ? "" : " at " + loc) +
                           "): " + st.message());
    }
  }
  return Status::ok();
}

Status Session::output(size_t index, const void **data,
                       size_t *byteSize) const {
  const auto &infos = model_.outputs();
  if (index >= infos.size())
    return Status::error("output index " + std::to_string(index) +
                         " is out of range (the model has " +
                         std::to_string(infos.size()) + " outputs)");
  const fb::Buffer *b = model_.table().buffers()->Get(infos[index].buffer);
  if (data)
    *data = impl_->arena.data() + b->offset();
  if (byteSize)
    *byteSize = size_t(b->size());
  return Status::ok();
}

} // namespace mc::rt

namespace mc::rt {

void Session::resetState() {
  if (model_.stateSize())
    std::memcpy(impl_->state.data(), model_.stateImage(),
                size_t(model_.stateSize()));
}

/// The bytes of state buffer `name` inside the session's state region,
/// after checking the caller's size and pointer (`what` names it).
static Status stateBytes(const Model &model, uint8_t *state,
                         const std::string &name, size_t byteSize,
                         const void *user, const char *what,
                         uint8_t **out) {
  size_t index;
  MC_RETURN_IF_ERROR(model.findState(name, &index));
  const TensorInfo &info = model.states()[index];
  if (byteSize != info.byteSize)
    return Status::error("state '" + name + "': expected " +
                         std::to_string(info.byteSize) + " bytes for " +
                         dtypeName(info.dtype) + shapeString(info.shape) +
                         ", got " + std::to_string(byteSize));
  if (!user && byteSize)
    return Status::error("state '" + name + "': " + what + " is null");
  *out = state + model.table().buffers()->Get(info.buffer)->offset();
  return Status::ok();
}

Status Session::readState(const std::string &name, void *dst,
                          size_t byteSize) const {
  uint8_t *bytes = nullptr;
  MC_RETURN_IF_ERROR(stateBytes(model_, impl_->state.data(), name, byteSize,
                                dst, "destination", &bytes));
  if (byteSize)
    std::memcpy(dst, bytes, byteSize);
  return Status::ok();
}

Status Session::writeState(const std::string &name, const void *src,
                           size_t byteSize) {
  uint8_t *bytes = nullptr;
  MC_RETURN_IF_ERROR(stateBytes(model_, impl_->state.data(), name, byteSize,
                                src, "source", &bytes));
  if (byteSize)
    std::memcpy(bytes, src, byteSize);
  return Status::ok();
}

Status Session::saveCheckpoint(const std::string &path,
                               const std::string &metadata) const {
  std::vector<CheckpointEntry> entries;
  entries.reserve(model_.states().size());
  for (const TensorInfo &info : model_.states()) {
    const fb::Buffer *b = model_.table().buffers()->Get(info.buffer);
    entries.push_back(CheckpointEntry{info.name, info.dtype, info.shape,
                                      impl_->state.data() + b->offset(),
                                      info.byteSize});
  }
  return writeCheckpointFile(path, entries, metadata);
}

Status Session::loadCheckpoint(const std::string &path,
                               std::string *metadata) {
  Checkpoint c;
  MC_RETURN_IF_ERROR(readCheckpointFile(path, &c));
  // Check everything before changing anything.
  std::vector<const CheckpointEntry *> match(model_.states().size());
  for (size_t i = 0; i < model_.states().size(); ++i) {
    const TensorInfo &info = model_.states()[i];
    for (const CheckpointEntry &e : c.entries)
      if (e.name == info.name)
        match[i] = &e;
    if (!match[i])
      return Status::error(path + ": the checkpoint has no state '" +
                           info.name + "' (the model's " +
                           dtypeName(info.dtype) + shapeString(info.shape) +
                           "); was it saved from another model?");
    if (match[i]->dtype != info.dtype || match[i]->shape != info.shape)
      return Status::error(path + ": state '" + info.name +
                           "' is " + dtypeName(match[i]->dtype) +
                           shapeString(match[i]->shape) +
                           " in the checkpoint but " + dtypeName(info.dtype) +
                           shapeString(info.shape) + " in the model");
  }
  for (const CheckpointEntry &e : c.entries) {
    size_t index;
    if (!model_.findState(e.name, &index))
      return Status::error(path + ": the checkpoint has state '" + e.name +
                           "', which the model does not have; was it saved "
                           "from another model?");
  }
  for (size_t i = 0; i < match.size(); ++i) {
    const fb::Buffer *b =
        model_.table().buffers()->Get(model_.states()[i].buffer);
    if (match[i]->byteSize)
      std::memcpy(impl_->state.data() + b->offset(), match[i]->data,
                  size_t(match[i]->byteSize));
  }
  if (metadata)
    *metadata = std::move(c.metadata);
  return Status::ok();
}

} // namespace mc::rt

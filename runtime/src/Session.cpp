// The executor: one arena per session, per-step tensor views bound once per
// batch size (at creation for a static model), so run() only dispatches to
// the kernels (no allocation once the batch size has been seen).
#include "ArtifactVerifier.h"
#include "modelc/checkpoint.h"
#include "modelc/device.h"
#include "modelc/labels.h"
#include "modelc/model.h"
#include "modelc/shapes.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mc::rt {

namespace {

/// One step bound to its kernel and tensors at session creation.
struct StepExec {
  OpId op = OpId::Copy;
  OpAttrs attrs;
  std::vector<RegionOp> body; // a fused step's region
  std::vector<ConstTensor> in; // shapes for the profile table
  MutTensor out{DType::F32, {}, nullptr};
  BoundKernel kernel;
};

/// The steps bound to their kernels with every shape resolved at one batch
/// size (0 for a static model).
struct Binding {
  int64_t batch = 0;
  uint64_t lastUse = 0; // for the LRU
  /// Names these steps on this memory for Device::runSteps: new for each
  /// binding, and again for all of them when the workspace moves.
  uint64_t key = 0;
  std::vector<StepExec> steps;
  /// One ValueBound per step, for the kernels that publish a bound on
  /// their output and the later steps that read it (KernelRequest's
  /// inputBounds, outputBound). Heap-allocated: bound kernels keep
  /// pointers into it while the binding moves.
  std::unique_ptr<ValueBound[]> bounds;
  /// The step that asks for the most scratch (named when it cannot be had).
  uint32_t scratchStep = 0;
  /// MODELC_PROFILE: whether this binding has run once. Its first run is
  /// left out of the table: it pays for cold memory and one-time setup
  /// (oneDNN generates its kernels at their first call), which skewed
  /// the per-run means of short sessions.
  bool ranOnce = false;
};

/// How many batch sizes a session keeps bound; binding again costs a call
/// of every kernel factory.
constexpr size_t kMaxBindings = 4;

struct InputSlot {
  uint8_t *arenaPtr = nullptr;
  bool set = false;
  size_t bytes = 0;  // given by the last setInput
  int64_t batch = 0; // its batch size; 0 when it has no batch dim
  /// Some step output shares this input's arena bytes (the planner reused
  /// them once the input was dead), so run() would clobber it: keep the
  /// caller's copy here and move it in at the start of each run, which keeps
  /// "set once, run many times" correct.
  bool clobbered = false;
  std::vector<uint8_t> staging;
};

/// `index` names one of `count` inputs or outputs (`what`).
Status checkIndex(const char *what, size_t index, size_t count) {
  if (index < count)
    return Status::ok();
  return Status::error(std::string(what) + " index " + std::to_string(index) +
                       " is out of range (the model has " +
                       std::to_string(count) + " " + what + "s)");
}

bool overlaps(uint64_t ao, uint64_t as, uint64_t bo, uint64_t bs) {
  return as && bs && ao < bo + bs && bo < ao + as;
}

Shape toShape(const flatbuffers::Vector<int64_t> *v) {
  return v ? Shape(v->begin(), v->end()) : Shape();
}

/// "model.mcpk: step 3 (mc.add at mlp.py:3)".
std::string stepWhere(const Model &model, uint32_t index) {
  const fb::Step *st = model.table().steps()->Get(index);
  std::string loc = st->location() ? st->location()->str() : "";
  return model.name() + ": step " + std::to_string(index) + " (mc." +
         st->op()->str() + (loc.empty() ? "" : " at " + loc) + ")";
}

/// `shape` against input `info`'s signature: dtype, rank, static dims, and
/// each batch dim inside `bounds`; `*batch` receives the batch size it
/// gives (0 when it has no batch dim).
Status checkInputShape(const TensorInfo &info, const BatchBounds &bounds,
                       DType dtype, const Shape &shape, int64_t *batch) {
  *batch = 0;
  bool validDType = uint8_t(dtype) <= uint8_t(DType::I1);
  auto mismatch = [&] {
    return Status::error("input '" + info.name + "': expected " +
                         info.typeString() + ", got " +
                         (validDType ? std::string(dtypeName(dtype))
                                     : "dtype " + std::to_string(int(dtype))) +
                         shapeString(shape));
  };
  if (dtype != info.dtype || shape.size() != info.shape.size())
    return mismatch();
  int64_t batchDim = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!info.dynamic() || info.batchScale[d] == 0) {
      if (shape[d] != info.shape[d])
        return mismatch();
      continue;
    }
    // The verifier allows an input only scale 1: the dim is the batch.
    std::string dim = "dimension " + std::to_string(d);
    if (shape[d] < bounds.min || shape[d] > bounds.max)
      return Status::error("input '" + info.name + "': " + dim +
                           " is the batch, which must be in [" +
                           std::to_string(bounds.min) + ", " +
                           std::to_string(bounds.max) + "]; got " +
                           std::to_string(shape[d]));
    if (batchDim >= 0 && shape[d] != *batch)
      return Status::error(
          "input '" + info.name + "': dimensions " + std::to_string(batchDim) +
          " and " + std::to_string(d) + " are both the batch, but are " +
          std::to_string(*batch) + " and " + std::to_string(shape[d]));
    batchDim = int64_t(d);
    *batch = shape[d];
  }
  return Status::ok();
}

/// MODELC_PROFILE=1 (any value but empty or "0"): run() times every step
/// with the device's StepTimer (the host clock on the CPU, events on a
/// GPU); when the session ends, a table of time per op kind and the
/// slowest steps goes to stderr (MODELC_PROFILE=all: every step, in plan
/// order, to set beside another engine's per-node profile). Off by
/// default: then run() reads no clock.
bool profileRequested() {
  const char *v = std::getenv("MODELC_PROFILE");
  return v && *v && std::strcmp(v, "0") != 0;
}

bool profileAllSteps() {
  const char *v = std::getenv("MODELC_PROFILE");
  return v && std::strcmp(v, "all") == 0;
}

} // namespace

struct Session::Impl {
  ~Impl() {
    if (profile)
      printProfile();
  }
  void printProfile() const;
  /// Binds every step with each buffer's shape at `batch`.
  Status bind(int64_t batch, Binding *out, size_t *scratch) const;
  /// Makes the binding at `batch` current: from the cache, or bound now
  /// (evicting the least recently used one), growing the workspace as
  /// needed.
  Status select(int64_t batch);
  /// Runs the current binding's steps (marking each with `timer`, if
  /// any); an error names the step.
  Status runAll(StepTimer *timer) const;
  const std::vector<StepExec> &steps() const { return bindings[current].steps; }

  const Model *model = nullptr;
  std::string name;
  bool profile = false;
  bool profileAll = false; // MODELC_PROFILE=all: every step, in order
  uint64_t profiledRuns = 0;
  std::vector<double> stepSeconds; // per step, summed over profiled runs
  /// The first runs of each binding, kept apart (printed only when the
  /// session ran nothing else).
  uint64_t firstRuns = 0;
  std::vector<double> firstSeconds;

  std::unique_ptr<Device> device;
  std::unique_ptr<StepTimer> timer; // the device's, when profiling
  DeviceMemory arena;
  DeviceMemory state;     // the state region: persists between runs
  DeviceMemory constants; // a device copy of the data section, when the
                          // host's is not device-accessible
  DeviceMemory workspace; // kernel scratch, shared by the steps
  size_t workspaceBytes = 0;
  const uint8_t *constantData = nullptr; // the device's view of the weights
  std::vector<Binding> bindings;         // at most kMaxBindings
  size_t current = 0;                    // index into bindings
  uint64_t useClock = 0;
  uint64_t keyClock = 0; // the last Binding::key given
  std::vector<InputSlot> inputs;
  /// Per input: the gathers its values index (gatherIndexInputs), checked
  /// by setInput before they reach the device.
  std::vector<IndexInput> indexInputs;
};

Status Session::Impl::bind(int64_t batch, Binding *out, size_t *scratch) const {
  const fb::Model &t = model->table();
  const auto &buffers = *t.buffers();
  auto bufPtr = [&](uint32_t i) -> uint8_t * {
    const fb::Buffer *b = buffers.Get(i);
    if (b->kind() == fb::BufferKind::Constant)
      return const_cast<uint8_t *>(constantData) + b->offset();
    if (b->kind() == fb::BufferKind::State)
      return state.get() + b->offset();
    return arena.get() + b->offset();
  };
  auto shapeOf = [&](uint32_t i) {
    const fb::Buffer *b = buffers.Get(i);
    return shapes::atBatch(toShape(b->shape()), toShape(b->batch_scale()),
                           batch);
  };
  Device &dev = *device;
  out->batch = batch;
  out->steps.clear();
  *scratch = 0;
  const auto *steps = t.steps();
  if (!steps)
    return Status::ok();
  out->steps.reserve(steps->size());
  out->bounds.reset(new ValueBound[steps->size()]);
  // The step whose first output each buffer is (-1: none). A bound is
  // passed on only for a buffer that one step writes, as its first output
  // (the one its slot describes), so the bytes a reader sees are the ones
  // that step wrote (the planner keeps a value's memory until its last
  // reader).
  std::vector<int64_t> writer(buffers.size(), -1);
  std::vector<bool> rewritten(buffers.size(), false);
  for (uint32_t index = 0; index < steps->size(); ++index)
    if (const auto *outs = steps->Get(index)->outputs())
      for (uint32_t k = 0; k < outs->size(); ++k) {
        uint32_t o = outs->Get(k);
        if (writer[o] >= 0 || k > 0)
          rewritten[o] = true;
        writer[o] = index;
      }
  std::string atBatch =
      model->dynamicBatch() ? " at batch " + std::to_string(batch) : "";
  for (uint32_t index = 0; index < steps->size(); ++index) {
    const fb::Step *st = steps->Get(index);
    StepExec e;
    findOp(st->op()->string_view(), &e.op); // checked by the verifier
    e.attrs = OpAttrs(decodeAttrs(*st));
    std::vector<bool> constant;
    if (st->inputs())
      for (uint32_t i : *st->inputs()) {
        e.in.push_back(
            ConstTensor{DType(buffers.Get(i)->dtype()), shapeOf(i), bufPtr(i)});
        constant.push_back(buffers.Get(i)->kind() == fb::BufferKind::Constant);
      }
    uint32_t o = st->outputs()->Get(0);
    e.out = MutTensor{DType(buffers.Get(o)->dtype()), shapeOf(o), bufPtr(o)};
    // A generated kernel runs on a device of its executable's target; any
    // other device runs its own kernel for the op (a file compiled for
    // several targets keeps every step's op, attributes and body).
    GeneratedKernel generated;
    bool launch = false;
    if (st->executable() >= 0) {
      const fb::Executable *exe =
          t.executables()->Get(uint32_t(st->executable()));
      std::vector<std::string> runs = dev.targets();
      launch = exe->target() && std::find(runs.begin(), runs.end(),
                                          exe->target()->str()) != runs.end();
      if (launch) {
        generated.executable = uint32_t(st->executable());
        generated.entry = st->entry() ? st->entry()->str() : "";
        generated.batch = batch;
        if (const fb::Launch *l = st->launch())
          generated.launch = LaunchInfo{l->block(), l->per_block(),
                                        l->shared_bytes(), l->units(),
                                        l->units_per_batch(),
                                        l->error_record()};
      }
    }
    if (const auto *body = st->body())
      for (const fb::RegionOp *r : *body) {
        RegionOp op{OpId::Copy, OpAttrs(decodeAttrList(r->attrs())), {},
                    DType(r->dtype()),
                    shapes::atBatch(toShape(r->shape()),
                                    toShape(r->batch_scale()), batch)};
        findOp(r->op()->string_view(), &op.op); // checked by the verifier
        if (r->operands())
          op.operands.assign(r->operands()->begin(), r->operands()->end());
        e.body.push_back(std::move(op));
      }
    KernelRequest request{e.op, e.attrs, e.in, e.out, dev,
                          e.body.empty() ? nullptr : &e.body, constant};
    request.stepIndex = index;
    if (st->inputs())
      for (uint32_t i : *st->inputs()) {
        bool arena = buffers.Get(i)->kind() == fb::BufferKind::Arena;
        int64_t w = writer[i];
        request.inputBounds.push_back(arena && !rewritten[i] && w >= 0 &&
                                              w < int64_t(index)
                                          ? &out->bounds[size_t(w)]
                                          : nullptr);
      }
    if (buffers.Get(o)->kind() == fb::BufferKind::Arena && !rewritten[o])
      request.outputBound = &out->bounds[index];
    request.location = st->location() ? st->location()->str() : "";
    if (const auto *extra = st->extra_outputs())
      for (uint32_t k = 0; k < extra->size(); ++k) {
        uint32_t o = st->outputs()->Get(k + 1); // checked by the verifier
        request.extraOutputs.push_back(
            MutTensor{DType(buffers.Get(o)->dtype()), shapeOf(o), bufPtr(o)});
        request.extraValues.push_back(extra->Get(k));
      }
    size_t bytes = 0;
    Status bound;
    if (launch) {
      request.generated = &generated;
      bound = dev.bindGenerated(request, &e.kernel);
    } else {
      KernelFactory factory = findKernel(dev.kind(), e.op);
      if (!factory)
        return Status::error(stepWhere(*model, index) + ": device " +
                             dev.name() + " has no kernel for mc." +
                             opName(e.op));
      bound = factory(request, &e.kernel, &bytes);
    }
    if (!bound)
      return Status::error(stepWhere(*model, index) + atBatch + ": " +
                           bound.message());
    if (bytes > *scratch) {
      *scratch = bytes;
      out->scratchStep = index;
    }
    out->steps.push_back(std::move(e));
  }
  return Status::ok();
}

Status Session::Impl::select(int64_t batch) {
  ++useClock;
  for (size_t i = 0; i < bindings.size(); ++i)
    if (bindings[i].batch == batch) {
      current = i;
      bindings[i].lastUse = useClock;
      return Status::ok();
    }
  Binding b;
  size_t scratch = 0;
  MC_RETURN_IF_ERROR(bind(batch, &b, &scratch));
  // One scratch for all steps (they run one at a time), so run() does not
  // allocate once bound. Binding at max first sizes it for every batch.
  if (scratch > workspaceBytes) {
    if (Status st = device->allocate(scratch, &workspace); !st)
      return Status::error(
          stepWhere(*model, b.scratchStep) + ": its " +
          std::to_string(scratch) + " bytes of scratch memory" +
          (model->dynamicBatch() ? " at batch " + std::to_string(batch)
                                 : std::string()) +
          ": " + st.message());
    workspaceBytes = scratch;
    // What a device recorded of the other bindings used the old workspace.
    for (Binding &old : bindings)
      old.key = ++keyClock;
  }
  b.lastUse = useClock;
  b.key = ++keyClock;
  if (bindings.size() < kMaxBindings) {
    bindings.push_back(std::move(b));
    current = bindings.size() - 1;
    return Status::ok();
  }
  current = 0;
  for (size_t i = 1; i < bindings.size(); ++i)
    if (bindings[i].lastUse < bindings[current].lastUse)
      current = i;
  bindings[current] = std::move(b);
  return Status::ok();
}

Status Session::Impl::runAll(StepTimer *timer) const {
  const std::vector<StepExec> &steps = this->steps();
  void *scratch = workspace.get();
  for (size_t i = 0; i < steps.size(); ++i) {
    if (timer)
      timer->mark(i);
    Status st = steps[i].kernel(scratch);
    if (!st)
      return Status::error(stepWhere(*model, uint32_t(i)) + ": " +
                           st.message());
  }
  if (timer)
    timer->mark(steps.size());
  return Status::ok();
}

void Session::Impl::printProfile() const {
  if (!(profiledRuns || firstRuns) || bindings.empty() || steps().empty())
    return;
  const std::vector<StepExec> &steps = this->steps();
  // The warm runs; the first runs only when there is nothing else.
  bool warm = profiledRuns > 0;
  const std::vector<double> &stepSeconds =
      warm ? this->stepSeconds : firstSeconds;
  double total = 0;
  for (double t : stepSeconds)
    total += t;
  double runs = double(warm ? profiledRuns : firstRuns);
  struct Row {
    OpId kind;
    int count = 0;
    double seconds = 0;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < steps.size(); ++i) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const Row &r) {
      return r.kind == steps[i].op;
    });
    if (it == rows.end()) {
      rows.push_back(Row{steps[i].op});
      it = rows.end() - 1;
    }
    ++it->count;
    it->seconds += stepSeconds[i];
  }
  std::sort(rows.begin(), rows.end(),
            [](const Row &a, const Row &b) { return a.seconds > b.seconds; });
  std::string firstNote =
      warm ? ", the first run at each batch size left out (" +
                 std::to_string(firstRuns) + ")"
           : ", first runs only: cold memory and one-time setup included";
  std::fprintf(stderr,
               "profile: %s: %llu runs, %.3f ms per run in %zu steps "
               "(MODELC_PROFILE%s)\n",
               name.c_str(), (unsigned long long)runs, total / runs * 1e3,
               steps.size(), firstNote.c_str());
  std::fprintf(stderr, "  %-16s %6s %12s %7s\n", "op kind", "steps",
               "ms per run", "share");
  for (const Row &r : rows)
    std::fprintf(stderr, "  %-16s %6d %12.3f %6.1f%%\n",
                 opName(r.kind), r.count, r.seconds / runs * 1e3,
                 total > 0 ? 100.0 * r.seconds / total : 0.0);
  std::vector<size_t> order(steps.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  size_t top = order.size();
  if (profileAll) {
    std::fprintf(stderr, "  every step, in order:\n");
  } else {
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return stepSeconds[a] > stepSeconds[b];
    });
    top = std::min<size_t>(order.size(), 15);
    std::fprintf(stderr, "  slowest %zu steps:\n", top);
  }
  for (size_t k = 0; k < top; ++k) {
    const StepExec &e = steps[order[k]];
    std::string ins;
    for (const ConstTensor &t : e.in)
      ins += (ins.empty() ? "" : ", ") + shapeString(t.shape);
    std::fprintf(stderr, "  %5zu %-12s %9.3f ms %5.1f%%  (%s) -> %s\n",
                 order[k], opName(e.op),
                 stepSeconds[order[k]] / runs * 1e3,
                 total > 0 ? 100.0 * stepSeconds[order[k]] / total : 0.0,
                 ins.c_str(), shapeString(e.out.shape).c_str());
  }
}

Session::Session(const Model &model) : model_(model), impl_(new Impl()) {}
Session::~Session() = default;

Status Session::create(const Model &model, std::unique_ptr<Session> *out) {
  std::unique_ptr<Device> device;
  MC_RETURN_IF_ERROR(createDevice("cpu", &device));
  return create(model, std::move(device), out);
}

Status Session::create(const Model &model, std::unique_ptr<Device> device,
                       std::unique_ptr<Session> *out) {
  if (!out)
    return Status::error(model.name() + ": no output session given");
  if (!device)
    return Status::error(model.name() + ": no device given");
  const fb::Model &t = model.table();
  // The file's targets against the device's, before any allocation.
  // A file compiled for several targets runs on a device of any of them.
  std::vector<std::string> runs = device->targets();
  if (const auto *targets = t.targets()) {
    std::string names;
    bool runnable = targets->size() == 0;
    for (const flatbuffers::String *target : *targets) {
      runnable |= std::find(runs.begin(), runs.end(), target->str()) !=
                  runs.end();
      names += (names.empty() ? "'" : ", '") + target->str() + "'";
    }
    if (!runnable)
      return Status::error(model.name() + ": the artifact targets " + names +
                           ", which device " + device->name() +
                           " does not run (recompile with --target naming " +
                           "one of its targets)");
  }
  // The executables next, before any allocation: a device refuses here a
  // file with no code for it (a GPU of an architecture the file lacks).
  std::vector<ExecutableView> executables;
  if (const auto *exes = t.executables())
    for (const fb::Executable *e : *exes) {
      ExecutableView v;
      v.target = e->target() ? e->target()->str() : "";
      v.format = e->format() ? e->format()->str() : "";
      if (e->entry_points())
        for (const flatbuffers::String *n : *e->entry_points())
          v.entryPoints.push_back(n->str());
      if (e->data()) {
        v.data = e->data()->data();
        v.size = e->data()->size();
      }
      executables.push_back(std::move(v));
    }
  if (Status st = device->loadExecutables(executables); !st)
    return Status::error(model.name() + ": " + st.message());
  std::unique_ptr<Session> s(new Session(model));
  Impl &impl = *s->impl_;
  Device &dev = *device;
  impl.device = std::move(device);
  MC_RETURN_IF_ERROR(dev.allocate(size_t(t.arena_size()), &impl.arena));
  MC_RETURN_IF_ERROR(dev.allocate(size_t(model.stateSize()), &impl.state));
  const uint8_t *constants = model.constantData();
  if (!dev.hostAccessible() && model.constantBytes()) {
    MC_RETURN_IF_ERROR(
        dev.allocate(size_t(model.constantBytes()), &impl.constants));
    MC_RETURN_IF_ERROR(dev.copyToDevice(impl.constants.get(), constants,
                                        size_t(model.constantBytes())));
    constants = impl.constants.get();
  }
  s->resetState();
  impl.model = &model;
  impl.constantData = constants;
  // The verifier has checked every index, offset, shape and attribute the
  // bindings use. A dynamic model binds at max first (the largest
  // workspace), then at opt, the size it expects most.
  BatchBounds bounds = model.batch();
  MC_RETURN_IF_ERROR(impl.select(bounds.max));
  if (bounds.opt != bounds.max)
    MC_RETURN_IF_ERROR(impl.select(bounds.opt));
  const auto &buffers = *t.buffers();
  impl.name = model.name();
  impl.profile = profileRequested();
  impl.profileAll = profileAllSteps();
  if (impl.profile) {
    impl.stepSeconds.assign(impl.steps().size(), 0.0);
    impl.firstSeconds.assign(impl.steps().size(), 0.0);
    impl.timer = dev.stepTimer();
  }
  impl.inputs.resize(model.inputs().size());
  impl.indexInputs = gatherIndexInputs(model);
  for (size_t i = 0; i < impl.inputs.size(); ++i) {
    const fb::Buffer *b = buffers.Get(model.inputs()[i].buffer);
    InputSlot &slot = impl.inputs[i];
    slot.arenaPtr = impl.arena.get() + b->offset(); // inputs are Arena
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
  MC_RETURN_IF_ERROR(checkIndex("input", index, infos.size()));
  const TensorInfo &info = infos[index];
  int64_t batch = 0;
  MC_RETURN_IF_ERROR(
      checkInputShape(info, model_.batch(), dtype, shape, &batch));
  size_t expected = info.byteSizeAt(batch);
  if (byteSize != expected)
    return Status::error("input '" + info.name + "': expected " +
                         std::to_string(expected) + " bytes for " +
                         dtypeName(info.dtype) + shapeString(shape) + ", got " +
                         std::to_string(byteSize));
  if (!data && byteSize)
    return Status::error("input '" + info.name + "': data is null");
  // Indices a gather reads: checked here, before any step, on every device
  // (a device kernel cannot report one out of range).
  MC_RETURN_IF_ERROR(checkGatherIndices(
      dtype, data, int64_t(byteSize / dtypeSize(dtype)),
      impl_->indexInputs[index], "input '" + info.name + "'"));
  InputSlot &slot = impl_->inputs[index];
  if (byteSize) {
    if (slot.clobbered)
      std::memcpy(slot.staging.data(), data, byteSize);
    else
      MC_RETURN_IF_ERROR(impl_->device->copyToDevice(slot.arenaPtr, data,
                                                     byteSize));
  }
  slot.set = true;
  slot.bytes = byteSize;
  slot.batch = batch;
  return Status::ok();
}

Status Session::run() {
  Impl &impl = *impl_;
  for (size_t i = 0; i < impl.inputs.size(); ++i)
    if (!impl.inputs[i].set)
      return Status::error("input '" + model_.inputs()[i].name +
                           "' was never set (expected " +
                           model_.inputs()[i].typeString() + ")");
  if (model_.dynamicBatch()) {
    // The verifier guarantees some input carries the batch.
    size_t first = impl.inputs.size();
    for (size_t i = 0; i < impl.inputs.size(); ++i) {
      int64_t b = impl.inputs[i].batch;
      if (!b)
        continue;
      if (first == impl.inputs.size())
        first = i;
      else if (b != impl.inputs[first].batch)
        return Status::error(
            "inputs '" + model_.inputs()[first].name + "' (batch " +
            std::to_string(impl.inputs[first].batch) + ") and '" +
            model_.inputs()[i].name + "' (batch " + std::to_string(b) +
            ") disagree on the batch size");
    }
    if (first < impl.inputs.size())
      MC_RETURN_IF_ERROR(impl.select(impl.inputs[first].batch));
  }
  for (const InputSlot &slot : impl.inputs)
    if (slot.clobbered && slot.bytes)
      MC_RETURN_IF_ERROR(impl.device->copyToDevice(
          slot.arenaPtr, slot.staging.data(), slot.bytes));
  StepTimer *timer = impl.profile ? impl.timer.get() : nullptr;
  // Two pointers: the std::function holds them without allocating.
  auto runAll = [&impl, timer] { return impl.runAll(timer); };
  // A profiled run times each step, so the device records nothing (key 0).
  MC_RETURN_IF_ERROR(impl.device->runSteps(
      timer ? 0 : impl.bindings[impl.current].key, runAll));
  // What the device finds when the steps are done (a fault, a kernel's
  // error record) names the device and the step; the file goes first, as
  // in the errors of the steps themselves.
  if (Status done = impl.device->synchronize(); !done)
    return Status::error(model_.name() + ": " + done.message());
  if (timer) {
    Binding &b = impl.bindings[impl.current];
    bool first = !b.ranOnce;
    b.ranOnce = true;
    ++(first ? impl.firstRuns : impl.profiledRuns);
    MC_RETURN_IF_ERROR(
        timer->collect(first ? impl.firstSeconds : impl.stepSeconds));
  }
  return Status::ok();
}

int64_t Session::batch() const {
  return model_.dynamicBatch() ? impl_->bindings[impl_->current].batch : 0;
}

Status Session::outputShape(size_t index, Shape *shape) const {
  const auto &infos = model_.outputs();
  MC_RETURN_IF_ERROR(checkIndex("output", index, infos.size()));
  if (shape)
    *shape = infos[index].shapeAt(batch());
  return Status::ok();
}

Status Session::output(size_t index, const void **data,
                       size_t *byteSize) const {
  const auto &infos = model_.outputs();
  MC_RETURN_IF_ERROR(checkIndex("output", index, infos.size()));
  const fb::Buffer *b = model_.table().buffers()->Get(infos[index].buffer);
  if (!impl_->device->hostAccessible())
    return Status::error("output '" + infos[index].name + "' lives on device " +
                         impl_->device->name() +
                         ", which the host cannot read; use copyOutput");
  if (data)
    *data = impl_->arena.get() + b->offset();
  if (byteSize)
    *byteSize = infos[index].byteSizeAt(batch());
  return Status::ok();
}

Status Session::copyOutput(size_t index, void *dst, size_t byteSize) const {
  const auto &infos = model_.outputs();
  MC_RETURN_IF_ERROR(checkIndex("output", index, infos.size()));
  const TensorInfo &info = infos[index];
  size_t expected = info.byteSizeAt(batch());
  if (byteSize != expected)
    return Status::error("output '" + info.name + "': expected a " +
                         std::to_string(expected) + "-byte buffer for " +
                         dtypeName(info.dtype) +
                         shapeString(info.shapeAt(batch())) + ", got " +
                         std::to_string(byteSize));
  if (!dst && byteSize)
    return Status::error("output '" + info.name + "': destination is null");
  const fb::Buffer *b = model_.table().buffers()->Get(info.buffer);
  return impl_->device->copyToHost(dst, impl_->arena.get() + b->offset(),
                                   byteSize);
}

const Device &Session::device() const { return *impl_->device; }

} // namespace mc::rt

namespace mc::rt {

void Session::resetState() {
  if (model_.stateSize())
    (void)impl_->device->copyToDevice(impl_->state.get(), model_.stateImage(),
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
  MC_RETURN_IF_ERROR(stateBytes(model_, impl_->state.get(), name, byteSize,
                                dst, "destination", &bytes));
  return impl_->device->copyToHost(dst, bytes, byteSize);
  return Status::ok();
}

Status Session::writeState(const std::string &name, const void *src,
                           size_t byteSize) {
  uint8_t *bytes = nullptr;
  MC_RETURN_IF_ERROR(stateBytes(model_, impl_->state.get(), name, byteSize,
                                src, "source", &bytes));
  return impl_->device->copyToDevice(bytes, src, byteSize);
  return Status::ok();
}

Status Session::saveCheckpoint(const std::string &path,
                               const std::string &metadata) const {
  // The state region as the host sees it.
  const uint8_t *state = impl_->state.get();
  std::vector<uint8_t> host;
  if (!impl_->device->hostAccessible() && model_.stateSize()) {
    host.resize(size_t(model_.stateSize()));
    MC_RETURN_IF_ERROR(
        impl_->device->copyToHost(host.data(), state, host.size()));
    state = host.data();
  }
  std::vector<CheckpointEntry> entries;
  entries.reserve(model_.states().size());
  for (const TensorInfo &info : model_.states()) {
    const fb::Buffer *b = model_.table().buffers()->Get(info.buffer);
    entries.push_back(CheckpointEntry{info.name, info.dtype, info.shape,
                                      state + b->offset(),
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
    MC_RETURN_IF_ERROR(impl_->device->copyToDevice(
        impl_->state.get() + b->offset(), match[i]->data,
        size_t(match[i]->byteSize)));
  }
  if (metadata)
    *metadata = std::move(c.metadata);
  return Status::ok();
}

} // namespace mc::rt

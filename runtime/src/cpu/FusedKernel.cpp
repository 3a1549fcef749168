// The CPU kernel of a fused region (mc.fused, made by mc-fuse): one pass
// over memory. The output is cut into tiles that stay in cache; for each
// tile, the region's inputs are loaded (copied, broadcast or splat) into
// per-thread tile buffers and the body's ops run on those buffers, one
// after the other, through the same registered kernels an unfused step
// runs, so a fused result is the unfused result bit for bit ("one source
// of numerical truth"). Only the last op's tile is written to memory.
// Where every op has a vectorized loop (the loops those kernels run), the
// tiles call the loops on pointers instead: inputs read where they lie,
// the result written in place, no copies (LoopOp).
//
// A region led by a matmul or conv2d (its epilogue) runs the anchor first
// (through oneDNN's post-ops when the epilogue is what the library can fuse,
// else its own kernel into the output, a conv's bias folded in) and then
// the elementwise rest over tiles of its result, in place.
#include "CpuKernels.h"
#include "DnnlConv.h"
#include "modelc/device.h"
#include "modelc/shapes.h"

#include "../KernelUtil.h"
#include "../Parallel.h"
#include "../VecMath.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

namespace mc::rt {
namespace {

/// Elements per tile: the body's values for one tile stay in L1/L2.
constexpr int64_t kTile = 2048;

/// Regions of at most this many tiles bind their body's kernels once per
/// tile, reading inputs of the output's layout and writing the result in
/// place (no copy into and out of the tile buffers); larger ones bind once
/// per thread slot and copy, which costs little next to their memory
/// traffic and keeps the bound kernels few.
constexpr int64_t kDirectTiles = 32;

/// How a region input becomes a tile of output-shaped values.
struct Load {
  const uint8_t* data = nullptr;
  size_t elemSize = 0;
  /// Per output dim: the input's element stride (0 where it broadcasts).
  std::vector<int64_t> strides;
  bool contiguous = false; // the output's own layout: a plain copy
  bool splat = false;      // one element everywhere
  /// Every tile holds the same values (a splat, or a broadcast along the
  /// leading dims whose pattern's length divides the tile): loaded on a
  /// slot's first tile of a run only.
  bool tileInvariant = false;
  /// A view (a transpose, reshape or slice of an input): the sizes its
  /// `strides` go with, which enumerate the value's elements row-major;
  /// empty: the strides go with the value's own shape.
  Shape dims;
};

/// Copies a run of n contiguous elements. Short runs (a view's rows of a
/// head dim, 32 floats) inline as fixed-size moves: a libc memcpy call per
/// row would cost more than the copy.
template <typename T> inline void copyRun(T* dst, const T* src, int64_t n) {
  if (n * int64_t(sizeof(T)) >= 512) {
    std::memcpy(dst, src, size_t(n) * sizeof(T));
    return;
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    __builtin_memcpy(dst + i, src + i, 8 * sizeof(T));
  for (; i < n; ++i)
    dst[i] = src[i];
}

/// Copies elements [start, start + n) of the output-shaped view of `load`
/// into dst, for elements of type T (the element size picks T: a memcpy
/// of a run-time size per element would be a libc call each).
template <typename T>
void loadTileAs(const Load& load, const Shape& valueShape, int64_t start,
                int64_t n, uint8_t* dstBytes) {
  const Shape& outShape = load.dims.empty() ? valueShape : load.dims;
  if (n <= 0)
    return;
  const T* src = reinterpret_cast<const T*>(load.data);
  T* dst = reinterpret_cast<T*>(dstBytes);
  if (load.contiguous) {
    std::memcpy(dst, src + start, size_t(n) * sizeof(T));
    return;
  }
  if (load.splat) {
    std::fill(dst, dst + n, src[0]);
    return;
  }
  // The multi-index of `start`, then runs along the last dim.
  size_t rank = outShape.size();
  int64_t idx[16] = {0};
  int64_t rem = start, offset = 0;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rem % outShape[d];
    rem /= outShape[d];
    offset += idx[d] * load.strides[d];
  }
  int64_t inner = outShape[rank - 1], innerStride = load.strides[rank - 1];
  int64_t done = 0;
  while (done < n) {
    int64_t run = std::min(n - done, inner - idx[rank - 1]);
    T* out = dst + done;
    if (innerStride == 0)
      std::fill(out, out + run, src[offset]);
    else if (innerStride == 1)
      copyRun(out, src + offset, run);
    else
      for (int64_t i = 0; i < run; ++i)
        out[i] = src[offset + i * innerStride];
    done += run;
    // Advance the multi-index by `run` (to the start of the next row).
    offset += run * innerStride;
    idx[rank - 1] += run;
    for (size_t d = rank - 1; d > 0 && idx[d] == outShape[d]; --d) {
      offset -= idx[d] * load.strides[d];
      idx[d] = 0;
      ++idx[d - 1];
      offset += load.strides[d - 1];
    }
  }
}

void loadTile(const Load& load, const Shape& outShape, int64_t start,
              int64_t n, uint8_t* dst) {
  switch (load.elemSize) {
  case 1:
    return loadTileAs<uint8_t>(load, outShape, start, n, dst);
  case 2:
    return loadTileAs<uint16_t>(load, outShape, start, n, dst);
  case 4:
    return loadTileAs<uint32_t>(load, outShape, start, n, dst);
  default:
    return loadTileAs<uint64_t>(load, outShape, start, n, dst);
  }
}

/// Row-major element strides of `shape`.
std::vector<int64_t> contiguousStrides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

/// The load of `in` broadcast to `shape` along `dims` (broadcast_in_dim's
/// rule): the input's strides where it has the dim, 0 where it repeats.
Status broadcastLoad(const ConstTensor& in, const std::vector<int64_t>& dims,
                     const Shape& shape, Load* l) {
  Status rule = shapes::broadcastInDim(in.shape, dims, shape);
  if (!rule)
    return Status::error("mc.fused: " + rule.message());
  l->data = static_cast<const uint8_t*>(in.data);
  l->elemSize = dtypeSize(in.dtype);
  l->strides.assign(shape.size(), 0);
  std::vector<int64_t> inStrides = contiguousStrides(in.shape);
  for (size_t d = 0; d < dims.size(); ++d)
    if (in.shape[d] != 1)
      l->strides[size_t(dims[d])] = inStrides[d];
  l->splat = shape.empty() ||
             std::all_of(l->strides.begin(), l->strides.end(),
                         [](int64_t x) { return x == 0; });
  l->contiguous = !l->splat && in.shape == shape &&
                  l->strides == contiguousStrides(shape);
  return Status::ok();
}

/// Body op `k`, a view op (transpose, reshape or slice of an input or of
/// another view, docs/fusion.md "Views"), recorded in `views`.
Status viewValue(const KernelRequest& r, const RegionOp& op, size_t k,
                 shapes::RegionViews* views) {
  size_t n = r.inputs.size();
  auto fail = [&](const std::string& why) {
    return Status::error("mc.fused: body op " + std::to_string(k) + " (mc." +
                         opName(op.op) + ")" + why);
  };
  if (op.operands.size() != 1 || op.operands[0] >= n + k)
    return fail(" must read one earlier value");
  uint32_t from = op.operands[0];
  if (!views->viewable(from))
    return fail(" reads a computed value; a view in a region reads an input "
                "or another view");
  Status s = views->add(uint32_t(n + k), op.op, op.attrs, op.shape, from,
                        from < n ? r.inputs[from].shape : Shape{});
  return s ? s : fail(": " + s.message());
}

/// The load of view value `v`: its input's bytes at the view's strides,
/// checked to stay inside the input.
Status viewLoad(const KernelRequest& r, const shapes::RegionViews& views,
                uint32_t v, Load* l) {
  const ConstTensor& in = r.inputs[views.input(v)];
  const shapes::StridedView& view = views.view(v);
  Shape sizes, strides;
  view.flatten(&sizes, &strides);
  if (sizes.size() > 16)
    return Status::error("mc.fused: a view of input " +
                         std::to_string(views.input(v)) + " needs " +
                         std::to_string(sizes.size()) +
                         " strided dims, above the 16 a fused step supports");
  int64_t last = view.offset, count = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    last += (sizes[d] - 1) * strides[d];
    count *= sizes[d];
  }
  if (count > 0 && (view.offset < 0 || last >= numElements(in.shape)))
    return Status::error("mc.fused: a view of input " +
                         std::to_string(views.input(v)) + " " +
                         shapeString(in.shape) + " reads outside it");
  l->elemSize = dtypeSize(in.dtype);
  l->data = static_cast<const uint8_t*>(in.data) +
            size_t(view.offset) * l->elemSize;
  l->dims = sizes;
  l->strides = strides;
  if (sizes.empty()) { // one element
    l->dims = {1};
    l->strides = {0};
  }
  return Status::ok();
}

/// The body's ops bound to the tile buffers of one thread, for tiles of
/// one length.
struct TilePlan {
  std::vector<BoundKernel> kernels; // one per elementwise body op
};

/// A compute op as a loop over the tile's pointers (unaryF32Loop,
/// binaryF32Loop, or a sigmoid and the mul by its operand as one SiLU
/// loop): values by number, computed into `result`.
struct LoopOp {
  vec::UnaryF32 unary = nullptr;
  vec::BinaryF32 binary = nullptr;
  bool clamp = false; // vec::clampF32 to [lo, hi] (mc.clamp, relu6)
  float lo = 0, hi = 0;
  int64_t a = -1, b = -1, result = -1;
  /// f32, or bf16 / f16 for every operand and the result: then the
  /// operands are widened into f32 scratch, the loop runs, and the result
  /// is rounded once, as the unfused kernel does (KernelUtil.h, viaF32).
  DType dtype = DType::F32;
};

/// A bound on an f32 region's result (a ValueBound for the readers of the
/// step's output, as DnnlConv's guard) by interval arithmetic over its
/// ops, each call: every value's largest |v| from its operands', starting
/// from the inputs' published bounds, the constants' largest |v| (taken at
/// bind) and the anchor's published bound. Infinity wherever a NaN or inf
/// could be (an operand's bound is infinite or a value could overflow f32).
/// Only ops with a rule: views, broadcasts, relu, clamp, neg, abs,
/// sigmoid, tanh, add, sub, mul, maximum, minimum; no reductions.
class RegionBound {
public:
  /// Null when a value is not f32 or an op has no rule. `anchorValue`:
  /// the value the anchor's published bound `anchor` covers (-1: none);
  /// the values before it are the anchor's own. `scan`: take the largest
  /// |v| of the constants the rules read (false: only ask whether the
  /// region has a bound).
  static std::unique_ptr<RegionBound> make(const KernelRequest& r,
                                           int64_t anchorValue,
                                           const ValueBound* anchor,
                                           bool scan = true) {
    const std::vector<RegionOp>& body = *r.body;
    size_t n = r.inputs.size();
    auto b = std::make_unique<RegionBound>();
    b->n_ = n;
    b->anchor_ = anchor;
    b->anchorValue_ = anchorValue;
    for (size_t i = 0; i < n; ++i) {
      const ConstTensor& in = r.inputs[i];
      if (in.dtype != DType::F32)
        return nullptr;
      const ValueBound* slot = r.inputBound(i);
      b->slots_.push_back(slot && slot->written ? slot : nullptr);
    }
    b->constant_.assign(n, -1.0);
    size_t firstRule =
        anchorValue >= 0 ? size_t(anchorValue) - n + 1 : size_t(0);
    for (size_t k = firstRule; k < body.size(); ++k) {
      const RegionOp& op = body[k];
      if (op.dtype != DType::F32 || op.operands.empty())
        return nullptr;
      Rule rule{op.op, op.operands[0],
                op.operands.size() > 1 ? op.operands[1] : op.operands[0]};
      switch (op.op) {
      case OpId::Clamp:
        rule.lo = op.attrs.getFloat("min");
        rule.hi = op.attrs.getFloat("max");
        break;
      case OpId::Reshape:
      case OpId::Transpose:
      case OpId::Slice:
      case OpId::BroadcastInDim:
      case OpId::Relu:
      case OpId::Neg:
      case OpId::Abs:
      case OpId::Sigmoid:
      case OpId::Tanh:
      case OpId::Add:
      case OpId::Sub:
      case OpId::Mul:
      case OpId::Maximum:
      case OpId::Minimum:
        break;
      default:
        return nullptr;
      }
      b->rules_.push_back(rule);
      // The constants the rules read (not the anchor's weights).
      for (uint32_t v : {rule.a, rule.b})
        if (scan && v < n && r.isConstant(v) && b->constant_[v] < 0)
          b->constant_[v] =
              double(vec::maxAbsF32(static_cast<const float*>(r.inputs[v].data),
                                    numElements(r.inputs[v].shape)));
    }
    b->values_.assign(n + body.size(), kInf);
    return b;
  }

  /// The largest |v| of the result on this call (infinity: unknown).
  double operator()() {
    for (size_t i = 0; i < n_; ++i)
      values_[i] = constant_[i] >= 0 ? constant_[i]
                   : slots_[i]       ? slots_[i]->maxAbs
                                     : kInf;
    size_t v = n_;
    if (anchorValue_ >= 0) {
      for (; v < size_t(anchorValue_); ++v)
        values_[v] = kInf; // the anchor's own values: not read after it
      values_[v++] = anchor_ && anchor_->written ? anchor_->maxAbs : kInf;
    }
    // Each f32 add, sub or mul rounds to nearest: within a factor
    // (1 + 2^-24) of the exact |result| above the subnormals, within
    // 2^-150 below; kUp and kTiny cover them.
    constexpr double kUp = 1.0 + 0x1p-20, kTiny = 0x1p-149;
    for (const Rule& r : rules_) {
      double a = values_[r.a], b = values_[r.b], m;
      switch (r.op) {
      case OpId::Clamp:
        m = detail::clampBound(a, r.lo, r.hi);
        break;
      case OpId::Sigmoid:
      case OpId::Tanh:
        m = 1.0;
        break;
      case OpId::Add:
      case OpId::Sub:
        m = (a + b) * kUp + kTiny;
        break;
      case OpId::Mul:
        m = a * b * kUp + kTiny;
        break;
      case OpId::Maximum:
      case OpId::Minimum:
        m = std::max(a, b);
        break;
      default:
        m = a;
        break; // views, broadcasts, relu, neg, abs
      }
      // A NaN or inf in an operand stays one (clamp and relu keep NaN);
      // beyond f32's range the value could be inf.
      if (!(a < kInf && b < kInf && m <= double(FLT_MAX)))
        m = kInf;
      values_[v++] = m;
    }
    return values_.back();
  }

private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Rule {
    OpId op;
    uint32_t a, b; // value numbers (b = a for one operand)
    float lo = 0, hi = 0;
  };
  size_t n_ = 0;
  std::vector<const ValueBound*> slots_;
  std::vector<double> constant_; // >= 0 for constant inputs
  const ValueBound* anchor_ = nullptr;
  int64_t anchorValue_ = -1;
  std::vector<Rule> rules_;
  std::vector<double> values_;
};

struct FusedState {
  Shape outShape;
  int64_t total = 0;
  size_t numInputs = 0;
  /// Value numbers (inputs first, then body results) and their dtypes.
  std::vector<DType> dtypes;
  /// value -> the load that fills its tile (inputs and broadcasts), or -1.
  std::vector<int> loadOf;
  std::vector<Load> loads;
  /// value -> byte offset of its tile buffer inside a thread's slot, or -1
  /// (an input read only through broadcasts has no tile of its own).
  std::vector<int64_t> tileOffset;
  size_t slotBytes = 0;
  int slots = 1;
  /// The body ops run per tile (body index), after the anchor and loads.
  std::vector<size_t> computeOps;
  /// Per slot: plans for full tiles and for the last, shorter one.
  std::vector<TilePlan> full, tail;
  /// Per tile, when the region has at most kDirectTiles tiles: plans whose
  /// contiguous loads read the input's bytes and whose result is the
  /// output's (see kDirectTiles); `full` and `tail` are then unused.
  bool direct = false;
  std::vector<TilePlan> perTile;
  /// Non-empty when every compute op of a region with more tiles than
  /// kDirectTiles is an f32 loop (LoopOp): the tiles then read contiguous
  /// loads where they lie and write the result into the output, no copies,
  /// and `full`, `tail` are unused.
  std::vector<LoopOp> loops;
  /// Byte offset in each slot of three f32 tiles (operands and result of
  /// a bf16 / f16 loop), or -1 when every loop is f32.
  int64_t narrowScratch = -1;
  int64_t tailLength = 0;
  // The anchor (body op 0 when it is a matmul or conv2d).
  BoundKernel anchor;
  size_t anchorWorkspace = 0;
  int64_t anchorValue = -1;     // its value number
  bool anchorInOutput = false;  // written straight into the output buffer
  size_t anchorScratchOffset = 0, anchorScratchBytes = 0;
  size_t slotsOffset = 0;
  uint8_t* output = nullptr;
  size_t outElemSize = 0;
  int64_t resultValue = 0;
  Shape anchorShape;
  /// Which of the anchor's operands are constant (its kernel's binding at
  /// run time must ask for the workspace the probe sized).
  std::vector<bool> anchorConstant;
  /// A conv2d anchor's bias folded into its binding (foldAnchorBias): the
  /// input holding it, or -1.
  int64_t anchorBiasInput = -1;
  /// Elements per tile (a multiple of rowLength).
  int64_t tile = kTile;
  /// A trailing reduction ends the region: each output element reduces
  /// rowLength consecutive elements of the values before it; 1 otherwise.
  bool reduction = false;
  int64_t rowLength = 1;
  /// The region's ops, owned here: the bound kernels refer to them.
  std::vector<RegionOp> body;
  /// Outputs 1.. (schema 2.7): the value each holds and where it goes,
  /// copied from the value's tile once the tile's ops have all run.
  std::vector<uint32_t> extraValues;
  std::vector<uint8_t*> extraData;
  /// The result's bound (RegionBound), published into `published` (the
  /// step's slot) after each call; null when nobody reads it or some op
  /// has no rule. `wantsBound`: the slot is there, so the anchor's kernel
  /// publishes its own result's bound into `anchorBound`.
  bool wantsBound = false;
  ValueBound anchorBound;
  std::unique_ptr<RegionBound> bound;
  ValueBound* published = nullptr;
};

/// Binds the body's compute ops over tile buffers in `slot`, for a tile of
/// `length` elements; with `directStart` >= 0, for the tile starting at that
/// element, with contiguous loads read where they lie and the result
/// written into the output.
Status bindTilePlan(const KernelRequest& r, const std::vector<RegionOp>& body,
                    FusedState& st, uint8_t* slot, int64_t length,
                    TilePlan* plan, int64_t directStart = -1) {
  auto tileOf = [&](int64_t v) -> uint8_t* {
    if (directStart < 0)
      return slot + st.tileOffset[size_t(v)];
    if (v == st.resultValue)
      return st.output + directStart / st.rowLength * st.outElemSize;
    int load = st.loadOf[size_t(v)];
    if (load >= 0 && st.loads[size_t(load)].contiguous) {
      const Load& l = st.loads[size_t(load)];
      return const_cast<uint8_t*>(l.data) + size_t(directStart) * l.elemSize;
    }
    return slot + st.tileOffset[size_t(v)];
  };
  for (size_t k : st.computeOps) {
    const RegionOp& op = body[k];
    KernelFactory factory = findKernel(r.device.kind(), op.op);
    if (!factory)
      return Status::error(std::string("fused region: device ") +
                           r.device.name() + " has no kernel for mc." +
                           opName(op.op));
    // The reduction ending a region reduces each row of the tile.
    bool reduce = st.reduction && k + 1 == body.size();
    Shape inShape = reduce ? Shape{length / st.rowLength, st.rowLength}
                           : Shape{length};
    Shape outShape = reduce ? Shape{length / st.rowLength} : Shape{length};
    OpAttrs attrs = op.attrs;
    if (reduce)
      attrs = OpAttrs{OpAttr::list("dims", {1}),
                      OpAttr::boolean("keepdim", false)};
    std::vector<ConstTensor> ins;
    for (uint32_t v : op.operands)
      ins.push_back(ConstTensor{st.dtypes[v], inShape, tileOf(v)});
    int64_t value = int64_t(st.numInputs + k);
    MutTensor out{op.dtype, outShape, tileOf(value)};
    BoundKernel kernel;
    size_t scratch = 0;
    Status s = factory(KernelRequest{op.op, attrs, ins, out, r.device},
                       &kernel, &scratch);
    if (!s)
      return Status::error(std::string("fused region, mc.") + opName(op.op) +
                           ": " + s.message());
    if (scratch)
      return Status::error(std::string("fused region: mc.") + opName(op.op) +
                           " needs scratch memory, which a fused tile cannot "
                           "give it");
    plan->kernels.push_back(std::move(kernel));
  }
  return Status::ok();
}

/// A conv2d region whose epilogue oneDNN computes in the convolution: conv,
/// then an optional per-channel bias (a broadcast of an input [C] along
/// the channel dim, 1 or with channels_last 3) and an optional relu, all
/// f32. False when the region is
/// anything else or the library refuses it (then the generic path runs).
/// A residual is left to the generic path: oneDNN's sum post-op rounds
/// conv + residual otherwise than conv, then add in its NCHW and blocked
/// kernels, and fused must equal unfused bit for bit (in the NHWC brgemm
/// kernels it rounds alike, but needs the residual copied into the
/// destination: 4% slower on ResNet-18; docs/decisions.md,
/// "Channels-last activations").
bool bindConvEpilogue(const KernelRequest& r, BoundKernel* out,
                      size_t* workspaceBytes) {
  const std::vector<RegionOp>& body = *r.body;
  const RegionOp& conv = body[0];
  size_t n = r.inputs.size();
  if (conv.op != OpId::Conv2d || conv.dtype != DType::F32 ||
      r.output.dtype != DType::F32 || conv.operands.size() != 2)
    return false;
  Epilogue e;
  e.inputBound = r.inputBound(conv.operands[0]);
  e.resultBound = r.outputBound;
  bool channelsLast = conv.attrs.getBool("channels_last");
  uint32_t cur = uint32_t(n); // the value the epilogue has reached
  std::vector<uint32_t> biasLoads; // broadcast values of a bias input
  for (size_t k = 1; k < body.size(); ++k) {
    const RegionOp& op = body[k];
    uint32_t value = uint32_t(n + k);
    if (op.dtype != DType::F32)
      return false;
    if (op.op == OpId::BroadcastInDim) {
      std::vector<int64_t> dims = op.attrs.getInts("dims");
      const ConstTensor& in = r.inputs[op.operands[0]];
      int64_t channelDim = channelsLast ? 3 : 1;
      if (e.bias || !biasLoads.empty() ||
          dims != std::vector<int64_t>{channelDim} || in.shape.size() != 1 ||
          in.dtype != DType::F32)
        return false;
      biasLoads.push_back(value);
      e.bias = &r.inputs[op.operands[0]];
      continue;
    }
    if (op.op == OpId::Add && op.operands.size() == 2) {
      uint32_t a = op.operands[0], b = op.operands[1];
      uint32_t other = a == cur ? b : b == cur ? a : UINT32_MAX;
      if (other == UINT32_MAX || e.activation)
        return false;
      if (!biasLoads.empty() && other == biasLoads[0] && !e.residual &&
          cur == n) {
        // the bias add, straight after the conv
      } else {
        return false;
      }
      cur = value;
      continue;
    }
    // Relu and clamp (relu6) only, exact in any order (DnnlConv's guard
    // keeps NaN as the runtime's kernels do): oneDNN's gelu, sigmoid, tanh and
    // hardswish are other approximations than the runtime's kernels (those
    // run over tiles).
    bool finiteClamp = op.op == OpId::Clamp &&
                       std::isfinite(op.attrs.getFloat("min")) &&
                       std::isfinite(op.attrs.getFloat("max")) &&
                       op.attrs.getFloat("min") <= op.attrs.getFloat("max");
    // The binding checks the conv's input for NaN before each call (the
    // library's activation would turn NaN into a bound): worth it where
    // that read costs less than the generic path's pass over the result
    // (not for a depthwise or strided conv whose input is the larger).
    // Nor when the input's writer publishes its bound (ValueBound): then
    // the guard reads nothing while that bound is finite.
    const ValueBound* known = e.inputBound;
    bool cheapGuard = numElements(r.inputs[conv.operands[0]].shape) <=
                          2 * numElements(r.output.shape) ||
                      (known && known->written);
    if (op.operands.size() == 1 && op.operands[0] == cur && !e.activation &&
        (op.op == OpId::Relu || finiteClamp) && cheapGuard) {
      e.activation = op.op;
      e.geluTanh = op.attrs.getBool("tanh_approximation");
      // The bounds as the clamp kernel converts them (to f32).
      e.clampMin = float(op.attrs.getFloat("min"));
      e.clampMax = float(op.attrs.getFloat("max"));
      cur = value;
      continue;
    }
    return false;
  }
  if (cur != n + body.size() - 1)
    return false;
  // A bias must have been added (else its broadcast feeds nothing).
  if (e.bias && cur == n)
    return false;
  return bool(bindConv2d(r.inputs[conv.operands[0]], r.inputs[conv.operands[1]],
                         conv2dParams(conv.attrs), e, r.output,
                         r.isConstant(conv.operands[1]), out, workspaceBytes));
}

/// The region's compute ops as f32 loops (LoopOp), or none when one of
/// them has no loop (clamp has one, with its bounds). A sigmoid whose only
/// reader is a mul by the sigmoid's own operand (either order) runs with it as
/// one SiLU loop (not when the sigmoid is also an output of the region).
std::vector<LoopOp> loopOps(const std::vector<RegionOp>& body,
                            const FusedState& st,
                            const std::vector<uint32_t>& extraValues) {
  std::vector<LoopOp> loops;
  auto uses = [&](int64_t v) {
    int count = v == st.resultValue;
    for (size_t k : st.computeOps)
      for (uint32_t o : body[k].operands)
        count += int64_t(o) == v;
    for (uint32_t e : extraValues)
      count += int64_t(e) == v;
    return count;
  };
  for (size_t i = 0; i < st.computeOps.size(); ++i) {
    size_t k = st.computeOps[i];
    const RegionOp& op = body[k];
    int64_t value = int64_t(st.numInputs + k);
    // A compare of f32 values read only by a cast to f32 (a mask, as
    // max_pool2d's gradient builds): one loop writing 1 or 0, no i1 tile.
    if (op.op == OpId::Compare && op.operands.size() == 2 &&
        st.dtypes[op.operands[0]] == DType::F32 &&
        st.dtypes[op.operands[1]] == DType::F32 &&
        i + 1 < st.computeOps.size() && uses(value) == 1) {
      const RegionOp& next = body[st.computeOps[i + 1]];
      vec::BinaryF32 mask =
          detail::compareMaskF32Loop(op.attrs.getInt("direction"));
      if (next.op == OpId::Cast && next.dtype == DType::F32 &&
          next.operands == std::vector<uint32_t>{uint32_t(value)} && mask) {
        LoopOp l;
        l.binary = mask;
        l.a = op.operands[0];
        l.b = op.operands[1];
        l.result = int64_t(st.numInputs + st.computeOps[i + 1]);
        loops.push_back(l);
        ++i;
        continue;
      }
    }
    DType dt = op.dtype;
    auto same = [&](uint32_t v) { return st.dtypes[v] == dt; };
    if ((dt != DType::F32 && dt != DType::BF16 && dt != DType::F16) ||
        !std::all_of(op.operands.begin(), op.operands.end(), same))
      return {};
    LoopOp l;
    l.result = value;
    l.dtype = dt;
    if (op.operands.size() == 1) {
      l.unary =
          detail::unaryF32Loop(op.op, op.attrs.getBool("tanh_approximation"))
              .fn;
      l.a = op.operands[0];
      if (op.op == OpId::Clamp) {
        // The bounds as the clamp kernel converts them.
        l.clamp = true;
        l.lo = float(op.attrs.getFloat("min"));
        l.hi = float(op.attrs.getFloat("max"));
      }
      // (In f32 only: a narrow sigmoid's result is rounded before the mul.)
      if (op.op == OpId::Sigmoid && dt == DType::F32 &&
          i + 1 < st.computeOps.size() && uses(value) == 1) {
        const RegionOp& next = body[st.computeOps[i + 1]];
        std::vector<uint32_t> xs{op.operands[0], uint32_t(value)};
        std::vector<uint32_t> sx{uint32_t(value), op.operands[0]};
        if (next.op == OpId::Mul && next.dtype == DType::F32 &&
            (next.operands == xs || next.operands == sx)) {
          l.unary = vec::siluF32; // either order: the same bits
          l.result = int64_t(st.numInputs + st.computeOps[i + 1]);
          ++i;
        }
      }
    } else if (op.operands.size() == 2) {
      l.binary = detail::binaryF32Loop(op.op);
      l.a = op.operands[0];
      l.b = op.operands[1];
    }
    if (!l.unary && !l.binary && !l.clamp)
      return {};
    loops.push_back(l);
  }
  // The last loop must write the region's result (not so when the last
  // body op is a broadcast the verifier let through for extra outputs).
  if (loops.empty() || loops.back().result != st.resultValue)
    return {};
  return loops;
}

/// Binds the anchor (body op 0) on `ins` into `out`: its registered
/// kernel, or with a folded bias the convolution with that bias.
Status bindAnchor(const KernelRequest& r, const FusedState& st,
                  const std::vector<ConstTensor>& ins, const MutTensor& out,
                  BoundKernel* kernel, size_t* scratch) {
  const RegionOp& a = (*r.body)[0];
  // The anchor publishes its result's bound where the region's does.
  ValueBound* published =
      st.wantsBound ? const_cast<ValueBound*>(&st.anchorBound) : nullptr;
  if (st.anchorBiasInput >= 0) {
    Epilogue e;
    e.bias = &r.inputs[size_t(st.anchorBiasInput)];
    e.inputBound = r.inputBound(a.operands[0]);
    e.resultBound = published;
    return bindConv2d(ins[0], ins[1], conv2dParams(a.attrs), e, out,
                      st.anchorConstant[1], kernel, scratch);
  }
  KernelFactory factory = findKernel(r.device.kind(), a.op);
  if (!factory)
    return Status::error(std::string("fused region: device ") +
                         r.device.name() + " has no kernel for mc." +
                         opName(a.op));
  KernelRequest request{a.op,    a.attrs,          ins, out, r.device,
                        nullptr, st.anchorConstant};
  for (uint32_t v : a.operands)
    request.inputBounds.push_back(r.inputBound(v));
  request.outputBound = published;
  return factory(request, kernel, scratch);
}

/// A conv2d anchor followed by its per-channel bias (body ops 1 and 2: a
/// broadcast of an f32 input [C] along the channel dim and its add to the
/// anchor, neither read by anything else) whose tail the convolution cannot
/// take (bindConvEpilogue refused it: a sigmoid, a residual): the bias
/// goes into the convolution (the same bits: oneDNN adds it to the f32
/// result, as the add would) and the tiles start after the add. Binds
/// that convolution into the output; true when it did.
bool foldAnchorBias(const KernelRequest& r, FusedState& st, size_t* scratch) {
  const std::vector<RegionOp>& body = *r.body;
  const RegionOp& a = body[0];
  size_t n = r.inputs.size();
  if (a.op != OpId::Conv2d || a.dtype != DType::F32 || !st.anchorInOutput ||
      a.operands.size() != 2 || body.size() < 4 || a.shape != st.outShape)
    return false;
  const RegionOp& b = body[1];
  const RegionOp& add = body[2];
  int64_t channelDim = a.attrs.getBool("channels_last") ? 3 : 1;
  if (b.op != OpId::BroadcastInDim || b.operands.size() != 1 ||
      b.operands[0] >= n ||
      b.attrs.getInts("dims") != std::vector<int64_t>{channelDim})
    return false;
  const ConstTensor& bias = r.inputs[b.operands[0]];
  if (bias.dtype != DType::F32 || bias.shape.size() != 1)
    return false;
  std::vector<uint32_t> ab{uint32_t(n), uint32_t(n + 1)};
  std::vector<uint32_t> ba{uint32_t(n + 1), uint32_t(n)};
  if (add.op != OpId::Add || add.dtype != DType::F32 ||
      (add.operands != ab && add.operands != ba))
    return false;
  for (size_t k = 3; k < body.size(); ++k)
    for (uint32_t v : body[k].operands)
      if (v == n || v == n + 1)
        return false;
  std::vector<ConstTensor> ins{r.inputs[a.operands[0]],
                               r.inputs[a.operands[1]]};
  st.anchorBiasInput = int64_t(b.operands[0]);
  BoundKernel kernel;
  size_t need = 0;
  if (!bindAnchor(r, st, ins, MutTensor{a.dtype, a.shape, st.output}, &kernel,
                  &need)) {
    st.anchorBiasInput = -1;
    return false;
  }
  st.anchor = std::move(kernel);
  *scratch = need;
  return true;
}

Status fusedKernel(const KernelRequest& r, BoundKernel* out,
                   size_t* workspaceBytes) {
  if (!r.body || r.body->empty())
    return Status::error("mc.fused: the step has no body");
  const std::vector<RegionOp>& body = *r.body;
  if (!r.extraOutputs.empty() &&
      (opInfo(body.front().op).epilogueAnchor || isReduction(body.back().op)))
    return Status::error("mc.fused: only a plain elementwise region (no "
                         "anchor or reduction) may have more than one output");
  if (r.extraOutputs.size() != r.extraValues.size())
    return Status::error("mc.fused: " + std::to_string(r.extraOutputs.size()) +
                         " extra outputs but " +
                         std::to_string(r.extraValues.size()) + " values");
  if (bindConvEpilogue(r, out, workspaceBytes))
    return Status::ok();
  auto st = std::make_shared<FusedState>();
  st->outShape = r.output.shape;
  // A trailing reduction ending the region: the values before it have its
  // operand's shape, and tiles hold whole rows of the reduced dims.
  const RegionOp& lastOp = body.back();
  if (isReduction(lastOp.op)) {
    uint32_t src = lastOp.operands.at(0);
    if (src < r.inputs.size())
      return Status::error("mc.fused: the reduction ending the region must "
                           "read a value it computes");
    st->reduction = true;
    st->outShape = body[src - r.inputs.size()].shape;
    std::vector<int64_t> dims = lastOp.attrs.getInts("dims");
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] != int64_t(st->outShape.size() - dims.size() + i))
        return Status::error("mc.fused: the reduction ending the region "
                             "must reduce trailing dims");
      st->rowLength *= st->outShape[size_t(dims[i])];
    }
    if (st->rowLength == 0) {
      // Rows of no elements: nothing before the reduction has a value to
      // compute, and the result is the reduction of empty rows (sum 0,
      // mean NaN, max -inf), as the unfused reduce step gives.
      Shape opShape = st->outShape;
      DType dt = body[src - r.inputs.size()].dtype;
      *out = [op = lastOp.op, opShape, dt, dims,
              keepdim = lastOp.attrs.getBool("keepdim"),
              o = r.output](void*) {
        return reduce(op, ConstTensor{dt, opShape, nullptr}, dims, keepdim,
                      o);
      };
      *workspaceBytes = 0;
      return Status::ok();
    }
    if (st->rowLength < 0 ||
        numElements(st->outShape) / st->rowLength !=
            numElements(r.output.shape))
      return Status::error("mc.fused: the reduction's output " +
                           shapeString(r.output.shape) +
                           " does not match its operand " +
                           shapeString(st->outShape));
    st->tile = std::max<int64_t>(1, kTile / st->rowLength) * st->rowLength;
  }
  st->total = numElements(st->outShape);
  if (st->outShape.size() > 16)
    return Status::error("mc.fused: rank " +
                         std::to_string(st->outShape.size()) +
                         " is above the 16 dims a fused step supports");
  st->numInputs = r.inputs.size();
  st->output = static_cast<uint8_t*>(r.output.data);
  st->outElemSize = dtypeSize(r.output.dtype);
  size_t numValues = r.inputs.size() + body.size();
  st->dtypes.resize(numValues);
  st->loadOf.assign(numValues, -1);
  st->tileOffset.assign(numValues, -1);
  st->resultValue = int64_t(numValues) - 1;
  for (size_t i = 0; i < r.inputs.size(); ++i)
    st->dtypes[i] = r.inputs[i].dtype;
  for (size_t k = 0; k < body.size(); ++k)
    st->dtypes[r.inputs.size() + k] = body[k].dtype;

  // Value `v` is read as an output-shaped tile: an input of the output's
  // shape is copied, one of rank 0 is splat.
  auto directLoad = [&](uint32_t v) -> Status {
    if (st->loadOf[v] >= 0)
      return Status::ok();
    const ConstTensor& in = r.inputs[v];
    Load l;
    l.data = static_cast<const uint8_t*>(in.data);
    l.elemSize = dtypeSize(in.dtype);
    if (in.shape == st->outShape)
      l.contiguous = true;
    else if (numElements(in.shape) == 1 && in.shape.empty())
      l.splat = true;
    else
      return Status::error("mc.fused: input " + std::to_string(v) +
                           " has shape " + shapeString(in.shape) +
                           ", neither the output's " +
                           shapeString(st->outShape) +
                           " nor a scalar; broadcast it in the region");
    st->loads.push_back(std::move(l));
    st->loadOf[v] = int(st->loads.size() - 1);
    return Status::ok();
  };

  size_t first = 0;
  // The anchor's own shape: the output's, or another one its reshape (body
  // op 1) views as the output's.
  Shape anchorShape = st->outShape;
  // The anchor's reshape reads the anchor's result (a view of an input may
  // also sit at body op 1, when the anchor has none).
  bool reshaped = body.size() > 1 && opInfo(body[0].op).epilogueAnchor &&
                  body[1].op == OpId::Reshape &&
                  body[1].operands.size() == 1 &&
                  body[1].operands[0] == r.inputs.size();
  bool anchorBound = false; // with a folded bias, bound already
  size_t anchorScratch = 0;
  // Only where the region can publish: else the anchor's bound would be
  // computed on every call for nothing.
  st->wantsBound = r.outputBound && !st->reduction &&
                   RegionBound::make(r,
                                     opInfo(body[0].op).epilogueAnchor
                                         ? int64_t(r.inputs.size())
                                         : int64_t(-1),
                                     nullptr, /*scan=*/false);
  if (opInfo(body[0].op).epilogueAnchor) {
    // The anchor: its registered kernel on the whole tensors, writing the
    // output buffer when the dtypes agree, else scratch.
    const RegionOp& a = body[0];
    first = 1;
    std::vector<ConstTensor> ins;
    for (uint32_t v : a.operands) {
      if (v >= r.inputs.size())
        return Status::error("mc.fused: the anchor must read inputs only");
      ins.push_back(r.inputs[v]);
    }
    st->anchorValue = int64_t(r.inputs.size());
    if (reshaped) {
      anchorShape = a.shape;
      if (numElements(anchorShape) != st->total)
        return Status::error("mc.fused: the anchor's result " +
                             shapeString(anchorShape) +
                             " cannot be reshaped to the output " +
                             shapeString(st->outShape));
      first = 2;
    }
    st->anchorInOutput = a.dtype == r.output.dtype && !st->reduction;
    st->anchorScratchBytes =
        st->anchorInOutput ? 0 : size_t(st->total) * dtypeSize(a.dtype);
    for (uint32_t v : a.operands)
      st->anchorConstant.push_back(r.isConstant(v));
    if (!reshaped && foldAnchorBias(r, *st, &anchorScratch)) {
      anchorBound = true;
      st->anchorValue = int64_t(r.inputs.size()) + 2;
      first = 3;
    }
    // Otherwise the anchor's output is bound below, once the workspace
    // layout is known; its own scratch comes first in the workspace.
  }
  // Loads for broadcasts, views and inputs read directly.
  shapes::RegionViews views(r.inputs.size(), numValues);
  for (size_t k = first; k < body.size(); ++k) {
    const RegionOp& op = body[k];
    uint32_t value = uint32_t(r.inputs.size() + k);
    if (shapes::isViewOp(op.op) && k + 1 < body.size()) {
      MC_RETURN_IF_ERROR(viewValue(r, op, k, &views));
      continue;
    }
    if (op.op == OpId::BroadcastInDim) {
      if (op.operands.size() != 1 || op.operands[0] >= r.inputs.size())
        return Status::error("mc.fused: a broadcast must read an input");
      Load l;
      MC_RETURN_IF_ERROR(broadcastLoad(r.inputs[op.operands[0]],
                                       op.attrs.getInts("dims"),
                                       st->outShape, &l));
      st->loads.push_back(std::move(l));
      st->loadOf[value] = int(st->loads.size() - 1);
      continue;
    }
    st->computeOps.push_back(k);
    for (uint32_t v : op.operands) {
      if (v >= value)
        return Status::error("mc.fused: body op " + std::to_string(k) +
                             " reads a value defined after it");
      if (views.isView(v) && st->loadOf[v] < 0) {
        if (body[v - r.inputs.size()].shape != st->outShape)
          return Status::error("mc.fused: the view " + std::to_string(v) +
                               " " +
                               shapeString(body[v - r.inputs.size()].shape) +
                               " does not have the region's shape " +
                               shapeString(st->outShape));
        Load l;
        MC_RETURN_IF_ERROR(viewLoad(r, views, v, &l));
        st->loads.push_back(std::move(l));
        st->loadOf[v] = int(st->loads.size() - 1);
      }
      if (v < r.inputs.size())
        MC_RETURN_IF_ERROR(directLoad(v));
    }
  }
  // The anchor's result is read back from where it was written.
  if (st->anchorValue >= 0) {
    Load l;
    l.data = st->anchorInOutput ? st->output : nullptr; // scratch: at run
    l.elemSize = dtypeSize(body[0].dtype);
    l.contiguous = true;
    st->loads.push_back(l);
    st->loadOf[st->anchorValue] = int(st->loads.size() - 1);
    if (reshaped) // the same bytes
      st->loadOf[st->anchorValue + 1] = st->loadOf[st->anchorValue];
  }
  // Loads whose every tile is the same (tiles start at multiples of the
  // tile): a splat, or a broadcast along the leading dims whose repeating
  // pattern (the product of the dims after them) divides the tile, e.g. a
  // bias [N] over [M, N] with N dividing the tile.
  for (Load& l : st->loads) {
    if (l.splat) {
      l.tileInvariant = true;
      continue;
    }
    if (!l.dims.empty() || l.contiguous || l.strides.empty())
      continue;
    size_t lead = 0;
    while (lead < l.strides.size() && l.strides[lead] == 0)
      ++lead;
    int64_t period = 1;
    for (size_t d = lead; d < st->outShape.size(); ++d)
      period *= st->outShape[d];
    l.tileInvariant = lead > 0 && period > 0 && st->tile % period == 0;
  }
  // Tile buffers: every value a compute op reads or writes.
  for (size_t v = 0; v < numValues; ++v) {
    bool used = v == size_t(st->resultValue);
    for (size_t k : st->computeOps)
      for (uint32_t o : body[k].operands)
        used |= o == v;
    for (size_t k : st->computeOps)
      used |= v == r.inputs.size() + k;
    if (!used)
      continue;
    st->tileOffset[v] = int64_t(st->slotBytes);
    st->slotBytes +=
        (size_t(st->tile) * dtypeSize(st->dtypes[v]) + 63) / 64 * 64;
  }
  if (st->computeOps.empty())
    return Status::error("mc.fused: the region computes nothing");
  for (size_t i = 0; i < r.extraOutputs.size(); ++i) {
    uint32_t v = r.extraValues[i];
    const MutTensor& o = r.extraOutputs[i];
    bool computed = v >= r.inputs.size() && v + 1 < numValues &&
                    std::find(st->computeOps.begin(), st->computeOps.end(),
                              size_t(v - r.inputs.size())) !=
                        st->computeOps.end();
    if (!computed || o.dtype != st->dtypes[v] || o.shape != st->outShape)
      return Status::error("mc.fused: extra output " + std::to_string(i) +
                           " (value " + std::to_string(v) + ") " +
                           dtypeName(o.dtype) + shapeString(o.shape) +
                           " is not a value the region's elementwise ops "
                           "compute at its shape " +
                           shapeString(st->outShape));
    st->extraValues.push_back(v);
    st->extraData.push_back(static_cast<uint8_t*>(o.data));
  }
  int64_t tiles = (st->total + st->tile - 1) / st->tile;
  st->slots = int(std::max<int64_t>(
      1, std::min<int64_t>(detail::maxThreads(), tiles)));
  st->tailLength = st->total - (tiles - 1) * st->tile;
  st->direct = tiles <= kDirectTiles;
  if (!st->direct && !st->reduction)
    st->loops = loopOps(body, *st, r.extraValues);
  if (std::any_of(st->loops.begin(), st->loops.end(),
                  [](const LoopOp& l) { return l.dtype != DType::F32; })) {
    st->narrowScratch = int64_t(st->slotBytes);
    st->slotBytes += 3 * ((size_t(st->tile) * sizeof(float) + 63) / 64 * 64);
  }

  // Workspace: [anchor scratch][anchor result if not in output][slots].
  size_t offset = 0;
  if (st->anchorValue >= 0) {
    const RegionOp& a = body[0];
    std::vector<ConstTensor> ins;
    for (uint32_t v : a.operands)
      ins.push_back(r.inputs[v]);
    // Bound twice when it writes scratch: first to learn its scratch,
    // then into its place.
    BoundKernel probe;
    MutTensor probeOut{a.dtype, anchorShape, st->output};
    if (!anchorBound)
      MC_RETURN_IF_ERROR(
          bindAnchor(r, *st, ins, probeOut, &probe, &anchorScratch));
    else
      probe = std::move(st->anchor);
    st->anchorWorkspace = anchorScratch;
    offset = (st->anchorWorkspace + 63) / 64 * 64;
    st->anchorScratchOffset = offset;
    offset += (st->anchorScratchBytes + 63) / 64 * 64;
    if (st->anchorInOutput) {
      st->anchor = std::move(probe);
    } else {
      // Written into the workspace: bound at run time (the workspace's
      // address is known only then), see below.
      st->anchor = nullptr;
    }
  }
  st->slotsOffset = offset;
  *workspaceBytes = offset + st->slotBytes * size_t(st->slots);
  if (st->wantsBound &&
      (st->bound = RegionBound::make(r, st->anchorValue, &st->anchorBound))) {
    st->published = r.outputBound;
    st->published->written = true;
  }

  // The tile kernels, bound to slot addresses relative to a null base and
  // rebound on the first run (the workspace is the session's, fixed once
  // allocated): see `ensureBound`.
  st->body = body;
  st->anchorShape = anchorShape;
  auto kernel = [st, inputs = r.inputs, inputBounds = r.inputBounds,
                 &device = r.device, boundTo = static_cast<uint8_t*>(nullptr)](
                    void* workspace) mutable -> Status {
    uint8_t* ws = static_cast<uint8_t*>(workspace);
    const std::vector<RegionOp>& bodyCopy = st->body;
    OpAttrs none;
    KernelRequest r{OpId::Fused, none, inputs,
                    MutTensor{DType::F32, st->outShape, st->output}, device,
                    &st->body};
    r.inputBounds = inputBounds; // a rebound anchor publishes as bound
    if (boundTo != ws) {
      // (Re)bind the tile kernels and a scratch-writing anchor to this
      // workspace. Sessions keep one workspace, so this runs once.
      if (st->anchorValue >= 0 && !st->anchorInOutput) {
        const RegionOp& a = bodyCopy[0];
        std::vector<ConstTensor> ins;
        for (uint32_t v : a.operands)
          ins.push_back(r.inputs[v]);
        MutTensor o{a.dtype, st->anchorShape, ws + st->anchorScratchOffset};
        size_t scratch = 0;
        MC_RETURN_IF_ERROR(bindAnchor(r, *st, ins, o, &st->anchor, &scratch));
        if (scratch > st->anchorWorkspace)
          return Status::error("mc.fused: the anchor's kernel asks for " +
                               std::to_string(scratch) +
                               " bytes of scratch at run time, " +
                               std::to_string(st->anchorWorkspace) +
                               " when bound");
        st->loads[st->loadOf[st->anchorValue]].data =
            ws + st->anchorScratchOffset;
      }
      // The tile plans, after the anchor's result has its address.
      int64_t tiles = (st->total + st->tile - 1) / st->tile;
      st->full.assign(st->direct ? 0 : st->slots, {});
      st->tail.assign(st->direct ? 0 : st->slots, {});
      st->perTile.assign(st->direct ? size_t(tiles) : 0, {});
      for (int s = 0; s < st->slots; ++s) {
        uint8_t* slot = ws + st->slotsOffset + size_t(s) * st->slotBytes;
        if (st->direct) {
          for (int64_t t = s; t < tiles; t += st->slots)
            MC_RETURN_IF_ERROR(bindTilePlan(
                r, bodyCopy, *st, slot,
                std::min(st->tile, st->total - t * st->tile),
                &st->perTile[size_t(t)], t * st->tile));
          continue;
        }
        if (!st->loops.empty())
          continue;
        MC_RETURN_IF_ERROR(
            bindTilePlan(r, bodyCopy, *st, slot, st->tile, &st->full[s]));
        MC_RETURN_IF_ERROR(bindTilePlan(r, bodyCopy, *st, slot,
                                        st->tailLength, &st->tail[s]));
      }
      boundTo = ws;
    }
    int64_t tiles = (st->total + st->tile - 1) / st->tile;
    int slots = st->slots;
    // Per slot: its first failing tile and the error. Each slot takes its
    // tiles in order, so the lowest failing tile of all is the lowest of
    // the slots' first ones: the error the CPU reports whatever the split
    // (the region's first failing elements, as one kernel would).
    std::vector<Status> failures(size_t(slots), Status::ok());
    std::vector<int64_t> failedTile(size_t(slots), tiles);
    FusedState& S = *st;
    // Whether a slot's tile-invariant loads are in its buffers (from its
    // first tile of this run on).
    std::vector<char> invariantLoaded(size_t(slots), 0);
    if (S.published) // unknown until this call has succeeded
      S.published->maxAbs = INFINITY;
    if (S.anchorValue >= 0)
      MC_RETURN_IF_ERROR(S.anchor(ws));
    // In direct mode slot s takes the tiles equal to s modulo slots (their
    // kernels are bound to its buffers), else the s-th contiguous block of
    // tiles (each thread streams through one range of memory). The same
    // bits whatever the split, since each tile is computed alone.
    detail::parallelFor(slots, 1, [&](int64_t b, int64_t e) {
      for (int64_t s = b; s < e; ++s) {
        uint8_t* slot = ws + S.slotsOffset + size_t(s) * S.slotBytes;
        int64_t first = tiles * s / slots;
        int64_t last = tiles * (s + 1) / slots, step = 1;
        if (S.direct) {
          first = s;
          last = tiles;
          step = slots;
        }
        for (int64_t t = first; t < last && failedTile[size_t(s)] == tiles;
             t += step) {
          int64_t start = t * S.tile;
          int64_t n = std::min(S.tile, S.total - start);
          for (size_t v = 0; v < S.loadOf.size(); ++v) {
            if (S.loadOf[v] < 0 || S.tileOffset[v] < 0)
              continue;
            const Load& l = S.loads[S.loadOf[v]];
            if ((S.direct || !S.loops.empty()) && l.contiguous)
              continue; // read where it lies
            if (!l.tileInvariant)
              loadTile(l, S.outShape, start, n, slot + S.tileOffset[v]);
            else if (!invariantLoaded[size_t(s)]) // a whole tile
              loadTile(l, S.outShape, 0, std::min(S.tile, S.total),
                       slot + S.tileOffset[v]);
          }
          invariantLoaded[size_t(s)] = 1;
          if (!S.loops.empty()) {
            // Value v's elements of this tile: in place for contiguous
            // loads and the result, else in the slot.
            auto at = [&](int64_t v) -> uint8_t* {
              size_t bytes = dtypeSize(S.dtypes[size_t(v)]);
              int load = S.loadOf[size_t(v)];
              if (load >= 0 && S.loads[size_t(load)].contiguous)
                return const_cast<uint8_t*>(S.loads[size_t(load)].data) +
                       size_t(start) * bytes;
              if (v == S.resultValue)
                return S.output + size_t(start) * bytes;
              return slot + S.tileOffset[size_t(v)];
            };
            size_t f32Tile = (size_t(S.tile) * sizeof(float) + 63) / 64 * 64;
            for (const LoopOp& op : S.loops) {
              float *a, *b = nullptr, *y;
              if (op.dtype == DType::F32) {
                a = reinterpret_cast<float*>(at(op.a));
                if (op.b >= 0)
                  b = reinterpret_cast<float*>(at(op.b));
                y = reinterpret_cast<float*>(at(op.result));
              } else { // widened, computed in f32, rounded once
                uint8_t* scratch = slot + S.narrowScratch;
                a = reinterpret_cast<float*>(scratch);
                detail::widenToF32(op.dtype, at(op.a), a, n);
                if (op.b >= 0) {
                  b = reinterpret_cast<float*>(scratch + f32Tile);
                  detail::widenToF32(op.dtype, at(op.b), b, n);
                }
                y = reinterpret_cast<float*>(scratch + 2 * f32Tile);
              }
              if (op.clamp)
                vec::clampF32(a, op.lo, op.hi, y, n);
              else if (op.unary)
                op.unary(a, y, n);
              else
                op.binary(a, b, y, n);
              if (op.dtype != DType::F32)
                detail::narrowFromF32(op.dtype, y, at(op.result), n);
            }
            for (size_t i = 0; i < S.extraValues.size(); ++i) {
              size_t bytes = dtypeSize(S.dtypes[S.extraValues[i]]);
              std::memcpy(S.extraData[i] + size_t(start) * bytes,
                          at(S.extraValues[i]), size_t(n) * bytes);
            }
            continue;
          }
          const TilePlan& plan = S.direct      ? S.perTile[size_t(t)]
                                 : n == S.tile ? S.full[s]
                                               : S.tail[s];
          for (const BoundKernel& k : plan.kernels) {
            Status status = k(nullptr);
            if (!status) {
              failures[size_t(s)] = Status::error(
                  status.message() + " (in the tile of the region's elements " +
                  std::to_string(start) + " to " +
                  std::to_string(start + n - 1) + ")");
              failedTile[size_t(s)] = t;
              break;
            }
          }
          if (failedTile[size_t(s)] < tiles)
            break;
          // Extra outputs: after every op of the tile has read its inputs
          // (an output may be an input's buffer, in place).
          for (size_t i = 0; i < S.extraValues.size(); ++i) {
            uint32_t v = S.extraValues[i];
            size_t bytes = dtypeSize(S.dtypes[v]);
            std::memcpy(S.extraData[i] + size_t(start) * bytes,
                        slot + S.tileOffset[v], size_t(n) * bytes);
          }
          if (S.direct)
            continue; // the result was written in place
          // Reduced, a tile of whole rows gives one element per row.
          std::memcpy(S.output + start / S.rowLength * S.outElemSize,
                      slot + S.tileOffset[S.resultValue],
                      size_t(n / S.rowLength) * S.outElemSize);
        }
      }
    });
    size_t first = size_t(std::min_element(failedTile.begin(),
                                           failedTile.end()) -
                          failedTile.begin());
    if (failures[first] && S.published)
      S.published->maxAbs = (*S.bound)();
    return failures[first];
  };
  *out = std::move(kernel);
  return Status::ok();
}

/// An attention region (matmul, scale, mask, softmax, matmul; the step's
/// "attention" attribute): every value has the output's leading dims, so
/// it runs one [S, T] slice of the leading dims at a time, the slice's
/// scores and probabilities in scratch that stays in cache, through the
/// same per-op kernels (sgemm for the matmuls). Each slice's kernels are
/// bound once, on the first run (the workspace is fixed by then).
struct AttentionState {
  std::vector<RegionOp> body;
  std::vector<ConstTensor> inputs;
  MutTensor output{DType::F32, {}, nullptr};
  size_t lead = 0;
  int64_t slices = 1;
  /// Per value: bytes of one slice; scratch offset (computed values but
  /// the last, and broadcast loads), or -1.
  std::vector<int64_t> sliceBytes, scratch;
  /// Per value read through a broadcast or as a splat: how to fill a
  /// slice.
  std::vector<int> loadOf;
  std::vector<Load> loads;
  std::vector<Shape> shapes; // per value
  std::vector<bool> isView;  // per value: a view op's (no kernel)
  size_t scratchBytes = 0;
  /// Scratch the slices' kernels ask for (a oneDNN matmul's scratchpad),
  /// at this offset in each slot: the slices of one slot run one after
  /// another, so they share it. 0 when none asks.
  size_t kernelScratch = 0, kernelScratchOffset = 0;
  std::vector<std::vector<BoundKernel>> kernels; // per slice
  uint8_t* boundTo = nullptr;
  int slots = 1;
};

Status attentionKernel(const KernelRequest& r, BoundKernel* out,
                       size_t* workspaceBytes) {
  if (!r.extraOutputs.empty())
    return Status::error("mc.fused (attention): has more than one output");
  auto st = std::make_shared<AttentionState>();
  st->body = *r.body;
  st->inputs = r.inputs;
  st->output = r.output;
  const Shape& outShape = r.output.shape;
  if (outShape.size() < 2)
    return Status::error("mc.fused (attention): the output needs rank >= 2");
  st->lead = outShape.size() - 2;
  for (size_t d = 0; d < st->lead; ++d)
    st->slices *= outShape[d];
  size_t numInputs = r.inputs.size(), numValues = numInputs + st->body.size();
  st->shapes.resize(numValues);
  st->sliceBytes.assign(numValues, 0);
  st->scratch.assign(numValues, -1);
  st->loadOf.assign(numValues, -1);
  std::vector<DType> dtypes(numValues);
  for (size_t i = 0; i < numInputs; ++i) {
    st->shapes[i] = r.inputs[i].shape;
    dtypes[i] = r.inputs[i].dtype;
  }
  auto sliceOf = [&](const Shape& sh) {
    int64_t n = 1;
    for (size_t d = st->lead; d < sh.size(); ++d)
      n *= sh[d];
    return n;
  };
  auto alloc = [&](size_t v) {
    st->scratch[v] = int64_t(st->scratchBytes);
    st->scratchBytes += (size_t(st->sliceBytes[v]) + 63) / 64 * 64;
  };
  auto leadOf = [&](const Shape& sh) {
    return sh.size() == outShape.size() &&
           std::equal(sh.begin(), sh.begin() + st->lead, outShape.begin());
  };
  shapes::RegionViews views(numInputs, numValues);
  for (size_t k = 0; k < st->body.size(); ++k) {
    const RegionOp& op = st->body[k];
    size_t v = numInputs + k;
    st->shapes[v] = op.shape;
    dtypes[v] = op.dtype;
    // A view of an input (q, k or v transposed out of a projection): read
    // slice by slice from the input's bytes, like a broadcast.
    if (shapes::isViewOp(op.op) && k + 1 < st->body.size()) {
      MC_RETURN_IF_ERROR(viewValue(r, op, k, &views));
      continue;
    }
    if (!leadOf(op.shape))
      return Status::error("mc.fused (attention): body op " +
                           std::to_string(k) + " computes " +
                           shapeString(op.shape) +
                           ", not the output's leading dims");
    st->sliceBytes[v] = sliceOf(op.shape) * int64_t(dtypeSize(op.dtype));
    if (op.op == OpId::BroadcastInDim) {
      Load l;
      MC_RETURN_IF_ERROR(broadcastLoad(r.inputs.at(op.operands.at(0)),
                                       op.attrs.getInts("dims"), op.shape,
                                       &l));
      st->loads.push_back(std::move(l));
      st->loadOf[v] = int(st->loads.size() - 1);
      alloc(v);
      continue;
    }
    for (uint32_t o : op.operands) {
      if (o >= v)
        return Status::error("mc.fused (attention): body op " +
                             std::to_string(k) +
                             " reads a value defined after it");
      if (views.isView(o)) {
        if (st->loadOf[o] >= 0)
          continue;
        if (!leadOf(st->shapes[o]))
          return Status::error("mc.fused (attention): the view " +
                               std::to_string(o) + " " +
                               shapeString(st->shapes[o]) +
                               " lacks the output's leading dims");
        Load l;
        MC_RETURN_IF_ERROR(viewLoad(r, views, o, &l));
        st->sliceBytes[o] = sliceOf(st->shapes[o]) * int64_t(l.elemSize);
        st->loads.push_back(std::move(l));
        st->loadOf[o] = int(st->loads.size() - 1);
        alloc(o);
        continue;
      }
      // A scalar input read by an elementwise op: a splat slice.
      if (o < numInputs && r.inputs[o].shape.empty() && st->loadOf[o] < 0) {
        Load l;
        l.data = static_cast<const uint8_t*>(r.inputs[o].data);
        l.elemSize = dtypeSize(r.inputs[o].dtype);
        l.splat = true;
        st->loads.push_back(std::move(l));
        st->loadOf[o] = int(st->loads.size() - 1);
        st->shapes[o] = op.shape;
        st->sliceBytes[o] = sliceOf(op.shape) * int64_t(l.elemSize);
        alloc(o);
      } else if (o < numInputs && st->loadOf[o] < 0 &&
                 !leadOf(r.inputs[o].shape)) {
        return Status::error("mc.fused (attention): input " +
                             std::to_string(o) + " " +
                             shapeString(r.inputs[o].shape) +
                             " lacks the output's leading dims");
      } else if (o < numInputs && st->loadOf[o] < 0) {
        st->sliceBytes[o] =
            sliceOf(r.inputs[o].shape) * int64_t(dtypeSize(r.inputs[o].dtype));
      }
    }
    if (k + 1 < st->body.size())
      alloc(v);
  }
  if (st->body.back().shape != outShape)
    return Status::error("mc.fused (attention): the last op computes " +
                         shapeString(st->body.back().shape) +
                         ", not the output " + shapeString(outShape));
  for (size_t v = 0; v < numValues; ++v)
    st->isView.push_back(views.isView(uint32_t(v)));
  // Binds slice b's kernels on the slot at `slot` into `kernels`; the most
  // scratch one asks for in `scratch`.
  auto bindSlice = [st, numInputs,
                    &device = r.device](int64_t b, uint8_t* slot,
                                        std::vector<BoundKernel>* kernels,
                                        size_t* scratch) -> Status {
    AttentionState& S = *st;
    auto sliceShape = [&](size_t v) {
      return Shape(S.shapes[v].begin() + S.lead, S.shapes[v].end());
    };
    auto ptr = [&](size_t v) -> uint8_t* {
      if (S.scratch[v] >= 0)
        return slot + S.scratch[v];
      if (v + 1 == numInputs + S.body.size())
        return static_cast<uint8_t*>(S.output.data) + b * S.sliceBytes[v];
      return const_cast<uint8_t*>(
                 static_cast<const uint8_t*>(S.inputs[v].data)) +
             b * S.sliceBytes[v];
    };
    for (size_t k = 0; k < S.body.size(); ++k) {
      const RegionOp& op = S.body[k];
      size_t v = numInputs + k;
      if (op.op == OpId::BroadcastInDim || S.isView[v])
        continue;
      std::vector<ConstTensor> ins;
      for (uint32_t o : op.operands) {
        DType t =
            o < numInputs ? S.inputs[o].dtype : S.body[o - numInputs].dtype;
        ins.push_back(ConstTensor{t, sliceShape(o), ptr(o)});
      }
      MutTensor res{op.dtype, sliceShape(v), ptr(v)};
      OpAttrs attrs = op.attrs;
      for (OpAttr& a : attrs.all())
        if (a.name == "axis")
          a.i -= int64_t(S.lead);
      KernelFactory f = findKernel(device.kind(), op.op);
      if (!f)
        return Status::error(std::string("attention region: no kernel "
                                         "for mc.") +
                             opName(op.op));
      BoundKernel kernel;
      size_t need = 0;
      MC_RETURN_IF_ERROR(
          f(KernelRequest{op.op, attrs, ins, res, device}, &kernel, &need));
      *scratch = std::max(*scratch, need);
      kernels->push_back(std::move(kernel));
    }
    return Status::ok();
  };
  // The kernels' own scratch, learnt from slice 0's (every slice has the
  // same shapes), bound here on a stand-in slot and dropped.
  {
    std::vector<uint8_t> standIn(st->scratchBytes + 64);
    std::vector<BoundKernel> probe;
    MC_RETURN_IF_ERROR(
        bindSlice(0, standIn.data(), &probe, &st->kernelScratch));
  }
  st->kernelScratchOffset = st->scratchBytes;
  st->scratchBytes += (st->kernelScratch + 63) / 64 * 64;
  // Slices run in parallel, one scratch per thread slot (slot s takes
  // slices s, s + slots, ...).
  st->slots = int(std::max<int64_t>(
      1, std::min<int64_t>(detail::maxThreads(), st->slices)));
  *workspaceBytes = st->scratchBytes * size_t(st->slots);
  *out = [st, bindSlice](void* workspace) -> Status {
    uint8_t* ws = static_cast<uint8_t*>(workspace);
    AttentionState& S = *st;
    if (S.boundTo != ws) {
      S.kernels.assign(size_t(S.slices), {});
      for (int64_t b = 0; b < S.slices; ++b) {
        size_t scratch = 0;
        MC_RETURN_IF_ERROR(bindSlice(b,
                                     ws + size_t(b % S.slots) * S.scratchBytes,
                                     &S.kernels[size_t(b)], &scratch));
        if (scratch > S.kernelScratch)
          return Status::error("attention region: a kernel asks for " +
                               std::to_string(scratch) +
                               " bytes of scratch at run time, " +
                               std::to_string(S.kernelScratch) + " when bound");
      }
      S.boundTo = ws;
    }
    std::vector<Status> failures(size_t(S.slots), Status::ok());
    detail::parallelFor(S.slots, 1, [&](int64_t first, int64_t last) {
      for (int64_t s = first; s < last; ++s) {
        uint8_t* slot = ws + size_t(s) * S.scratchBytes;
        for (int64_t b = s; b < S.slices; b += S.slots) {
          for (size_t v = 0; v < S.loadOf.size(); ++v)
            if (S.loadOf[v] >= 0) {
              int64_t n =
                  S.sliceBytes[v] / int64_t(S.loads[S.loadOf[v]].elemSize);
              loadTile(S.loads[S.loadOf[v]], S.shapes[v], b * n, n,
                       slot + S.scratch[v]);
            }
          for (const BoundKernel& k : S.kernels[size_t(b)]) {
            Status status = k(slot + S.kernelScratchOffset);
            if (!status) {
              failures[size_t(s)] = status;
              return;
            }
          }
        }
      }
    });
    for (const Status& f : failures)
      if (!f)
        return f;
    return Status::ok();
  };
  return Status::ok();
}

Status fusedOrAttentionKernel(const KernelRequest& r, BoundKernel* out,
                              size_t* workspaceBytes) {
  if (!r.body || r.body->empty())
    return Status::error("mc.fused: the step has no body");
  if (r.attrs.getBool("attention"))
    return attentionKernel(r, out, workspaceBytes);
  return fusedKernel(r, out, workspaceBytes);
}

MC_REGISTER_KERNEL(cpu, Fused, fusedOrAttentionKernel);

} // namespace
} // namespace mc::rt

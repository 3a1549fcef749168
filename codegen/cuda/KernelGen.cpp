// Kernel generation for the CUDA target (see KernelGen.h).
//
// Values are computed in f32 for f32, f16 and bf16 tensors, in i32 / i64
// for integer tensors and in i1 for booleans (stored as one byte). Every op
// of a region rounds its result to its own element type, as the CPU's
// per-op kernels do, so a region gives what its ops give one by one.
#include "codegen/cuda/KernelGen.h"
#include "modelc/shapes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVAttributes.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

#include "modelc/error_record.h"
#include "modelc/kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;

namespace mc::codegen::cuda {

bool isUnwrittenInput(const Plan& plan, uint32_t b);

namespace {

using rt::DType;
using rt::OpId;

/// A tensor the kernel touches: its sizes at the plan's max batch and which
/// dims scale with the batch.
struct TensorDesc {
  DType dtype = DType::F32;
  std::vector<int64_t> shape, batchScale;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

TensorDesc describe(const Plan& plan, uint32_t buffer) {
  const PlanBuffer& b = plan.buffers[buffer];
  return TensorDesc{b.dtype, b.shape, b.batchScale};
}

/// Ops that compute only in floating point here.
bool floatOnly(OpId op) {
  switch (op) {
  case OpId::Erf: case OpId::Exp: case OpId::Gelu:
  case OpId::Hardswish: case OpId::Log: case OpId::Pow: case OpId::Sigmoid:
  case OpId::Sqrt: case OpId::Tanh: case OpId::Sin: case OpId::Cos:
  case OpId::Tan: case OpId::Asin: case OpId::Acos: case OpId::Atan:
  case OpId::Sinh: case OpId::Cosh: case OpId::Asinh: case OpId::Acosh:
  case OpId::Atanh:
  case OpId::Dropout:
    return true;
  default:
    return false;
  }
}

bool isElementwiseOp(OpId op) {
  if (floatOnly(op)) // all elementwise
    return true;
  switch (op) {
  case OpId::Abs: case OpId::Add: case OpId::BroadcastInDim: case OpId::Cast:
  case OpId::Clamp: case OpId::Compare: case OpId::Copy: case OpId::Div:
  case OpId::Maximum: case OpId::Minimum: case OpId::Mul:
  case OpId::Neg: case OpId::Not: case OpId::Relu:
  case OpId::Select: case OpId::Sub:
  case OpId::Reshape: // in a region: the anchor's reshape, same flat order
    return true;
  default:
    return false;
  }
}

/// The step as a list of region ops: a fused step's body, or the step's own
/// op reading its inputs.
std::vector<PlanRegionOp> bodyOf(const Plan& plan, const PlanStep& step) {
  if (step.op == OpId::Fused)
    return step.body;
  PlanRegionOp op;
  op.op = step.op;
  op.attrs = step.attrs;
  for (uint32_t i = 0; i < step.inputs.size(); ++i)
    op.operands.push_back(i);
  const PlanBuffer& out = plan.buffers[step.outputs[0]];
  op.dtype = out.dtype;
  op.shape = out.shape;
  op.batchScale = out.batchScale;
  return {op};
}

/// Whether the step's kernel can fail, and so reports through an error
/// record (modelc/error_record.h): a gather by indices the graph computes
/// (indices that are an unwritten graph input are checked when the input
/// is set), an integer division.
bool needsErrorRecord(const Plan& plan, const PlanStep& step) {
  if (step.op == OpId::Gather || step.op == OpId::ScatterAdd)
    return plan.buffers[step.inputs[1]].kind != fb::BufferKind::Constant &&
           !isUnwrittenInput(plan, step.inputs[1]);
  for (const PlanRegionOp& op : bodyOf(plan, step))
    if (op.op == OpId::Div && !isFloat(op.dtype))
      return true;
  return false;
}

/// Dims [k, rank) with k the first of `dims` when they are exactly the
/// trailing dims of a rank-`rank` tensor; -1 otherwise.
int64_t trailingStart(const std::vector<int64_t>& dims, int64_t rank) {
  if (dims.empty())
    return -1;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != rank - int64_t(dims.size()) + int64_t(i))
      return -1;
  return dims.front();
}

/// How many dims of a shape scale with the batch (the units formula needs at
/// most one).
int scaledDims(const TensorDesc& t) {
  int n = 0;
  for (int64_t s : t.batchScale)
    n += s > 0;
  return n;
}

//===----------------------------------------------------------------------===//
// The emitter
//===----------------------------------------------------------------------===//

class Emitter {
public:
  Emitter(gpu::GPUModuleOp module, const Plan& plan, const PlanStep& step,
          const KernelFlavor& flavor)
      : b(module.getContext()), loc(b.getUnknownLoc()), plan(plan),
        step(step), flavor(flavor) {
    b.setInsertionPointToEnd(module.getBody());
    for (uint32_t i : step.inputs)
      tensors.push_back(describe(plan, i));
    tensors.push_back(describe(plan, step.outputs[0]));
    for (size_t k = 1; k < step.outputs.size(); ++k)
      extras.push_back(describe(plan, step.outputs[k]));
  }

  FailureOr<rt::LaunchInfo> emit(StringRef name, KernelKind kind) {
    withRecord = needsErrorRecord(plan, step);
    createFunction(name);
    rt::LaunchInfo launch;
    LogicalResult ok = failure();
    switch (kind) {
    case KernelKind::Elementwise:
    case KernelKind::Index:
      ok = emitElementwise();
      launch = unitsLaunch(out(), flavor.block, /*rows=*/vectorWidth);
      break;
    case KernelKind::Rows:
      ok = emitRows();
      launch = rowsLaunch();
      break;
    case KernelKind::Reduce:
      if ((step.op == OpId::Softmax || step.op == OpId::LogSoftmax) &&
          softmaxAxisByBlocks()) {
        ok = emitSoftmaxAxisBlocks();
        launch = rowsLaunch();
      } else if (step.op == OpId::Softmax || step.op == OpId::LogSoftmax) {
        ok = emitSoftmaxAxis();
        launch = unitsLaunch(
            out(), flavor.block,
            out().shape[size_t(step.attrs.getInt("axis"))]);
      } else if (reducesLeadingDims()) {
        ok = emitReduceColumns();
        launch = unitsLaunch(out(), flavor.block, 1);
        launch.perBlock = kColumnBlock;
      } else {
        ok = emitReduce();
        launch = unitsLaunch(out(), flavor.block, 1);
      }
      break;
    case KernelKind::Pool:
      ok = emitPool();
      launch = unitsLaunch(out(), flavor.block, 1);
      break;
    case KernelKind::Scatter:
      ok = emitScatterAdd();
      // A unit per column per run: the output's elements / rows per run.
      launch = unitsLaunch(out(), flavor.block, scatterRowsPerUnit());
      break;
    case KernelKind::None:
      break;
    }
    if (failed(ok))
      return failure();
    gpu::ReturnOp::create(b, loc);
    launch.errorRecord = withRecord;
    return launch;
  }

private:
  OpBuilder b;
  Location loc;
  const Plan& plan;
  const PlanStep& step;
  const KernelFlavor& flavor;
  std::vector<TensorDesc> tensors; // inputs, then the output
  /// A region's outputs 1.. (PlanStep::extraOutputs), parameters after the
  /// output's.
  std::vector<TensorDesc> extras;
  gpu::GPUFuncOp fn;
  std::vector<Value> args, extraArgs;
  Value batch; // index
  // The error record (memref<2xi64>), when the kernel can fail.
  bool withRecord = false;
  Value record;
  // While a region is evaluated: the element's flat index in the region
  // (what an integer division by zero reports).
  Value element;
  // An elementwise kernel's unit of elements first .. first + width - 1,
  // width a multiple of 4 and first aligned to it: the element being
  // evaluated is unitFirst + unitLane, so mc.dropout knows its Philox
  // counter and word statically and computes one Philox per four elements
  // (philoxWords, per counter of the unit). unitLane -1: no such unit.
  Value unitFirst;
  int64_t unitLane = -1;
  std::vector<std::pair<int64_t, std::array<Value, 4>>> philoxWords;

  const TensorDesc& out() const { return tensors.back(); }
  size_t numInputs() const { return tensors.size() - 1; }

  //===--- types and constants ---===//

  Type storageType(DType t) {
    switch (t) {
    case DType::F32: return b.getF32Type();
    case DType::F16: return b.getF16Type();
    // SPIR-V has no bf16: the lavapipe check carries its bits as i16
    // (widen and narrow below), so the kernel's logic is the same.
    case DType::BF16: return flavor.spirv ? Type(b.getI16Type())
                                          : Type(b.getBF16Type());
    case DType::I32: return b.getI32Type();
    case DType::I64: return b.getI64Type();
    case DType::I1: return b.getI8Type();
    }
    return b.getF32Type();
  }
  Type computeType(DType t) {
    if (isFloat(t))
      return b.getF32Type();
    if (t == DType::I1)
      return b.getI1Type();
    return storageType(t);
  }

  // One IR-building call per argument list: C++ leaves the order of a
  // call's arguments open (gcc and clang differ), ops land in creation
  // order, and the kernels must be the same bytes from any compiler. So
  // where two arguments would create ops (::create, idx, f32, load, cmpf,
  // select, threadId...), each gets its own statement, left to right.
  Value idx(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }
  Value f32(double v) {
    return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v)));
  }
  Value intConst(Type t, int64_t v) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(t, v));
  }
  Value constantOf(DType t, double v) {
    Type c = computeType(t);
    if (c.isF32())
      return f32(v);
    if (c.isInteger(1))
      return intConst(c, v != 0);
    return intConst(c, int64_t(v));
  }

  //===--- the function ---===//

  void createFunction(StringRef name) {
    SmallVector<Type> types;
    for (const TensorDesc& t : tensors)
      types.push_back(MemRefType::get({std::max<int64_t>(1, t.numel())},
                                      storageType(t.dtype)));
    for (const TensorDesc& t : extras)
      types.push_back(MemRefType::get({std::max<int64_t>(1, t.numel())},
                                      storageType(t.dtype)));
    size_t buffers = types.size();
    types.push_back(b.getI64Type());
    if (withRecord)
      types.push_back(MemRefType::get({2}, b.getI64Type()));
    fn = gpu::GPUFuncOp::create(b, loc, name, b.getFunctionType(types, {}));
    fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    // Every buffer starts 64-byte aligned (arena, constants, state): say so,
    // so that consecutive accesses can be vectorized.
    if (!flavor.spirv)
      for (size_t i = 0; i < buffers; ++i)
        fn.setArgAttr(i, "llvm.align", b.getI64IntegerAttr(16));
    if (flavor.spirv)
      fn->setAttr(spirv::getEntryPointABIAttrName(),
                  spirv::getEntryPointABIAttr(
                      b.getContext(), {int32_t(flavor.block), 1, 1}));
    Block& entry = fn.getBody().front();
    b.setInsertionPointToStart(&entry);
    for (size_t i = 0; i < tensors.size(); ++i)
      args.push_back(entry.getArgument(i));
    for (size_t i = tensors.size(); i < buffers; ++i)
      extraArgs.push_back(entry.getArgument(i));
    batch = arith::IndexCastOp::create(b, loc, b.getIndexType(),
                                         entry.getArgument(buffers));
    if (withRecord)
      record = entry.getArgument(buffers + 1);
  }

  /// When `failed`: records element `position` (index) failing with
  /// `value` (i64) in the error record, keeping the lowest position
  /// (modelc/error_record.h).
  void reportError(Value failed, Value position, Value value) {
    auto ifOp = scf::IfOp::create(b, loc, failed);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Type i64 = b.getI64Type();
    Value p = arith::IndexCastUIOp::create(b, loc, i64, position);
    p = arith::MinUIOp::create(
        b, loc, p, intConst(i64, int64_t(rt::kErrorRecordMaxPosition)));
    Value inverted =
        arith::SubIOp::create(b, loc, intConst(i64, 0xFFFFFFFFll), p);
    Value key = arith::ShLIOp::create(b, loc, inverted, intConst(i64, 32));
    Value lo = arith::AndIOp::create(b, loc, value, intConst(i64, 0xFFFFFFFFll));
    Value hi = arith::ShRUIOp::create(b, loc, value, intConst(i64, 32));
    Value keyLo = arith::OrIOp::create(b, loc, key, lo);
    Value word0 = idx(0);
    memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::maxu, keyLo,
                                record, ValueRange{word0});
    Value keyHi = arith::OrIOp::create(b, loc, key, hi);
    Value word1 = idx(1);
    memref::AtomicRMWOp::create(b, loc, arith::AtomicRMWKind::maxu, keyHi,
                                record, ValueRange{word1});
  }

  //===--- shapes ---===//

  /// A dim's size at the session's batch.
  Value dimSize(const TensorDesc& t, size_t d) {
    if (d < t.batchScale.size() && t.batchScale[d] > 0 && plan.batch.dynamic())
      return arith::MulIOp::create(b, loc, idx(t.batchScale[d]), batch);
    return idx(t.shape[d]);
  }
  SmallVector<Value> sizes(const TensorDesc& t) {
    SmallVector<Value> s;
    for (size_t d = 0; d < t.shape.size(); ++d)
      s.push_back(dimSize(t, d));
    return s;
  }
  Value product(ArrayRef<Value> v) {
    Value p = idx(1);
    for (Value x : v)
      p = arith::MulIOp::create(b, loc, p, x);
    return p;
  }
  /// Row-major strides of sizes `s`.
  SmallVector<Value> strides(ArrayRef<Value> s) {
    SmallVector<Value> st(s.size());
    Value run = idx(1);
    for (size_t d = s.size(); d-- > 0;) {
      st[d] = run;
      run = arith::MulIOp::create(b, loc, run, s[d]);
    }
    return st;
  }
  SmallVector<Value> delinearize(Value flat, ArrayRef<Value> s) {
    SmallVector<Value> ix(s.size());
    for (size_t d = s.size(); d-- > 0;) {
      ix[d] = arith::RemUIOp::create(b, loc, flat, s[d]);
      flat = arith::DivUIOp::create(b, loc, flat, s[d]);
    }
    return ix;
  }
  Value linearize(ArrayRef<Value> ix, ArrayRef<Value> st) {
    Value f = idx(0);
    for (size_t d = 0; d < ix.size(); ++d)
      f = arith::AddIOp::create(b,
          loc, f, arith::MulIOp::create(b, loc, ix[d], st[d]));
    return f;
  }

  //===--- loads and stores ---===//

  /// A stored f16 / bf16 value widened to f32.
  Value widen(Value v, DType t) {
    if (t == DType::BF16 && flavor.spirv) { // the bits, as i16
      Value w = arith::ExtUIOp::create(b, loc, b.getI32Type(), v);
      w = arith::ShLIOp::create(b, loc, w, intConst(b.getI32Type(), 16));
      return arith::BitcastOp::create(b, loc, b.getF32Type(), w);
    }
    return arith::ExtFOp::create(b, loc, b.getF32Type(), v);
  }
  /// An f32 value rounded to f16 / bf16 (nearest even), as stored.
  Value narrow(Value v, DType t) {
    if (t == DType::BF16 && flavor.spirv) {
      // The runtime's floatToBf16: round to nearest even on the low 16
      // bits; a NaN truncated with its quiet bit set.
      Type i32 = b.getI32Type();
      Value x = arith::BitcastOp::create(b, loc, i32, v);
      Value high = arith::ShRUIOp::create(b, loc, x, intConst(i32, 16));
      Value lsb = arith::AndIOp::create(b, loc, high, intConst(i32, 1));
      Value bias = arith::AddIOp::create(b, loc, intConst(i32, 0x7fff), lsb);
      Value biased = arith::AddIOp::create(b, loc, x, bias);
      Value rounded =
          arith::ShRUIOp::create(b, loc, biased, intConst(i32, 16));
      Value top = arith::ShRUIOp::create(b, loc, x, intConst(i32, 16));
      Value quiet = arith::OrIOp::create(b, loc, top, intConst(i32, 0x40));
      Value bits = select(isNan(v), quiet, rounded);
      return arith::TruncIOp::create(b, loc, b.getI16Type(), bits);
    }
    return arith::TruncFOp::create(b, loc, storageType(t), v);
  }

  Value load(size_t arg, Value flat) {
    Value v = memref::LoadOp::create(b, loc, args[arg], ValueRange{flat});
    DType t = tensors[arg].dtype;
    if (t == DType::F16 || t == DType::BF16)
      return widen(v, t);
    if (t == DType::I1)
      return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v,
                                     intConst(b.getI8Type(), 0));
    return v;
  }
  void store(Value v, Value flat) { storeTo(v, flat, args.back(), out().dtype); }
  void storeTo(Value v, Value flat, Value buffer, DType t) {
    if (t == DType::F16 || t == DType::BF16)
      v = narrow(v, t);
    else if (t == DType::I1)
      v = arith::ExtUIOp::create(b, loc, b.getI8Type(), v);
    memref::StoreOp::create(b, loc, v, buffer, ValueRange{flat});
  }
  /// A computed f32 value rounded to `t` (f16, bf16) and back.
  Value roundTo(Value v, DType t) {
    if (t != DType::F16 && t != DType::BF16)
      return v;
    return widen(narrow(v, t), t);
  }

  //===--- loops ---===//

  Value threadId() { return gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x); }
  Value blockId() { return gpu::BlockIdOp::create(b, loc, gpu::Dimension::x); }
  Value blockDim() { return gpu::BlockDimOp::create(b, loc, gpu::Dimension::x); }
  Value gridDim() { return gpu::GridDimOp::create(b, loc, gpu::Dimension::x); }

  /// for (i = start; i < n; i += step) body(i)
  void loop(Value start, Value n, Value stepSize,
            const std::function<void(Value)>& body) {
    auto f = scf::ForOp::create(b, loc, start, n, stepSize);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(f.getBody());
    body(f.getInductionVar());
  }
  /// A loop carrying one value: acc = body(i, acc).
  Value loopAcc(Value start, Value n, Value stepSize, Value init,
                const std::function<Value(Value, Value)>& body) {
    auto f = scf::ForOp::create(b, loc, start, n, stepSize, ValueRange{init});
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(f.getBody());
      Value next = body(f.getInductionVar(), f.getRegionIterArgs()[0]);
      scf::YieldOp::create(b, loc, next);
    }
    return f.getResult(0);
  }
  /// The grid-stride loop over `n` units.
  void gridStride(Value n, const std::function<void(Value)>& body) {
    Value bid = blockId();
    Value bdim = blockDim();
    Value blockStart = arith::MulIOp::create(b, loc, bid, bdim);
    Value tid = threadId();
    Value start = arith::AddIOp::create(b, loc, blockStart, tid);
    Value gdim = gridDim();
    Value bdim2 = blockDim();
    Value stride = arith::MulIOp::create(b, loc, gdim, bdim2);
    loop(start, n, stride, body);
  }

  //===--- launches ---===//

  /// units = the tensor's element count / rowLength, linear in the batch.
  rt::LaunchInfo unitsLaunch(const TensorDesc& t, unsigned block,
                             int64_t rowLength) {
    rt::LaunchInfo l;
    l.block = block;
    l.perBlock = block;
    uint64_t units = uint64_t(std::max<int64_t>(1, t.numel() / rowLength));
    // Units scale with the batch only when the batch is outside the row: a
    // row (or a softmax's axis) that holds the batch leaves fewer units
    // than the max batch, which divided to 0 per batch, a grid of 0, and a
    // step that never ran (a full reduction of [B, 10]). Any grid of one
    // or more is right (grid-stride loops): where the count does not
    // divide, the units are the static count.
    uint64_t max = uint64_t(std::max<int64_t>(plan.batch.max, 1));
    if (plan.batch.dynamic() && scaledDims(t) == 1 && units % max == 0) {
      l.units = 0;
      l.unitsPerBatch = units / max;
    } else {
      l.units = units;
    }
    return l;
  }
  /// One block per row, of the row's length rounded up to a power of two
  /// (32 to the flavor's block): a 256-thread block left half of itself
  /// idle on rows of 128. The kernels stride by blockDim, so any size is
  /// right; the SPIR-V flavor's workgroup size is fixed when compiled.
  rt::LaunchInfo rowsLaunch() {
    unsigned block = flavor.block;
    if (!flavor.spirv) {
      unsigned fit = 32;
      while (fit < flavor.block && int64_t(fit) < rowLength)
        fit *= 2;
      block = std::min(fit, flavor.block);
    }
    rt::LaunchInfo l = unitsLaunch(reducedTensor(), block, rowLength);
    l.perBlock = 1;
    return l;
  }

  //===--- scalar ops ---===//

  Value cmpf(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value cmpi(arith::CmpIPredicate p, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value isNan(Value x) { return cmpf(arith::CmpFPredicate::UNO, x, x); }
  Value addf(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value subf(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mulf(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value divf(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value expf(Value x) { return math::ExpOp::create(b, loc, x); }

  /// float -> integer as the CPU's cast: truncation, saturating, NaN -> 0.
  Value floatToInt(Value v, Type to) {
    unsigned bits = to.getIntOrFloatBitWidth();
    double hi = std::ldexp(1.0, int(bits) - 1);
    Value t = arith::FPToSIOp::create(b, loc, to, v);
    Value maxV = intConst(to, bits == 64 ? std::numeric_limits<int64_t>::max()
                                         : std::numeric_limits<int32_t>::max());
    Value minV = intConst(to, bits == 64 ? std::numeric_limits<int64_t>::min()
                                         : std::numeric_limits<int32_t>::min());
    t = select(cmpf(arith::CmpFPredicate::OGE, v, f32(hi)), maxV, t);
    t = select(cmpf(arith::CmpFPredicate::OLT, v, f32(-hi)), minV, t);
    Value nan = isNan(v);
    Value zero = intConst(to, 0);
    return select(nan, zero, t);
  }

  Value cast(Value v, DType from, DType to) {
    Type ct = computeType(to);
    if (isFloat(from)) {
      if (isFloat(to))
        return roundTo(v, to);
      if (to == DType::I1)
        return cmpf(arith::CmpFPredicate::UNE, v, f32(0)); // NaN -> 1
      return floatToInt(v, ct);
    }
    if (from == DType::I1) {
      if (isFloat(to))
        return arith::UIToFPOp::create(b, loc, ct, v);
      if (to == DType::I1)
        return v;
      return arith::ExtUIOp::create(b, loc, ct, v);
    }
    // i32 / i64
    if (isFloat(to))
      return roundTo(arith::SIToFPOp::create(b, loc, b.getF32Type(), v), to);
    if (to == DType::I1)
      return cmpi(arith::CmpIPredicate::ne, v, intConst(v.getType(), 0));
    unsigned fb = v.getType().getIntOrFloatBitWidth(),
             tb = ct.getIntOrFloatBitWidth();
    if (fb == tb)
      return v;
    if (fb > tb)
      return arith::TruncIOp::create(b, loc, ct, v);
    return arith::ExtSIOp::create(b, loc, ct, v);
  }

  //===--- Philox (mc.dropout) ---===//

  /// A 32-bit constant (its bits; i32 attributes hold signed values).
  Value u32(uint32_t v) {
    return intConst(b.getI32Type(), int64_t(int32_t(v)));
  }

  /// rt::philox4x32 on i32 values.
  std::array<Value, 4> philox(std::array<Value, 4> c, Value k0, Value k1) {
    for (int round = 0; round < rt::kPhiloxRounds; ++round) {
      if (round) {
        k0 = arith::AddIOp::create(b, loc, k0, u32(rt::kPhiloxW0));
        k1 = arith::AddIOp::create(b, loc, k1, u32(rt::kPhiloxW1));
      }
      auto p0 =
          arith::MulUIExtendedOp::create(b, loc, u32(rt::kPhiloxM0), c[0]);
      auto p1 =
          arith::MulUIExtendedOp::create(b, loc, u32(rt::kPhiloxM1), c[2]);
      Value w0 = arith::XOrIOp::create(
          b, loc, arith::XOrIOp::create(b, loc, p1.getHigh(), c[1]), k0);
      Value w2 = arith::XOrIOp::create(
          b, loc, arith::XOrIOp::create(b, loc, p0.getHigh(), c[3]), k1);
      c = {w0, p1.getLow(), w2, p0.getLow()};
    }
    return c;
  }

  /// The low and high 32 bits of an i64.
  std::pair<Value, Value> halves(Value v) {
    Type i32 = b.getI32Type();
    Value hi = arith::ShRUIOp::create(b, loc, v, intConst(v.getType(), 32));
    return {arith::TruncIOp::create(b, loc, i32, v),
            arith::TruncIOp::create(b, loc, i32, hi)};
  }

  /// The four words of counter `block` (index) under (seed, offset): i64.
  std::array<Value, 4> dropoutBlock(Value block, Value seed, Value offset) {
    Value blk = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), block);
    auto [c0, c1] = halves(blk);
    auto [c2, c3] = halves(offset);
    auto [k0, k1] = halves(seed);
    return philox({c0, c1, c2, c3}, k0, k1);
  }

  /// rt::dropoutWord of the element being evaluated: within a unit, from
  /// the unit's counters (one Philox per four elements); else its own.
  Value dropoutWord(Value seed, Value offset) {
    if (unitLane >= 0) {
      int64_t group = unitLane / 4;
      for (auto& [g, words] : philoxWords)
        if (g == group)
          return words[unitLane % 4];
      Value block = arith::AddIOp::create(
          b, loc, arith::DivUIOp::create(b, loc, unitFirst, idx(4)),
          idx(group));
      philoxWords.push_back({group, dropoutBlock(block, seed, offset)});
      return philoxWords.back().second[unitLane % 4];
    }
    std::array<Value, 4> w = dropoutBlock(
        arith::DivUIOp::create(b, loc, element, idx(4)), seed, offset);
    Value lane = arith::RemUIOp::create(b, loc, element, idx(4));
    Value r = w[3];
    for (int k = 2; k >= 0; --k)
      r = select(cmpi(arith::CmpIPredicate::eq, lane, idx(k)), w[k], r);
    return r;
  }

  /// One op of a region on computed values; the result rounded to `dtype`.
  FailureOr<Value> scalarOp(const PlanRegionOp& op, ArrayRef<Value> x,
                            ArrayRef<DType> types) {
    DType t = op.dtype;
    bool fl = isFloat(t);
    Value r;
    switch (op.op) {
    case OpId::Copy:
    case OpId::Reshape:
    case OpId::BroadcastInDim:
      return x[0];
    case OpId::Cast:
      return cast(x[0], types[0], t);
    case OpId::Neg:
      r = fl ? Value(arith::NegFOp::create(b, loc, x[0]))
             : Value(arith::SubIOp::create(b, loc, intConst(x[0].getType(), 0),
                                             x[0]));
      break;
    case OpId::Abs:
      if (fl) {
        r = math::AbsFOp::create(b, loc, x[0]);
      } else {
        Value negative = cmpi(arith::CmpIPredicate::slt, x[0],
                              intConst(x[0].getType(), 0));
        Value negated = arith::SubIOp::create(
            b, loc, intConst(x[0].getType(), 0), x[0]);
        r = select(negative, negated, x[0]);
      }
      break;
    case OpId::Relu: // NaN stays NaN
      if (fl) {
        Value below = cmpf(arith::CmpFPredicate::OLT, x[0], f32(0));
        Value zero = f32(0);
        r = select(below, zero, x[0]);
      } else {
        Value below = cmpi(arith::CmpIPredicate::slt, x[0],
                           intConst(x[0].getType(), 0));
        Value zero = intConst(x[0].getType(), 0);
        r = select(below, zero, x[0]);
      }
      break;
    case OpId::Exp:
      r = expf(x[0]);
      break;
    case OpId::Log:
      r = math::LogOp::create(b, loc, x[0]);
      break;
    case OpId::Tanh:
      r = math::TanhOp::create(b, loc, x[0]);
      break;
    case OpId::Sin: // libdevice's __nv_sinf: full range reduction
      r = math::SinOp::create(b, loc, x[0]);
      break;
    case OpId::Cos:
      r = math::CosOp::create(b, loc, x[0]);
      break;
    // libdevice's __nv_tanf ... __nv_atanhf; GLSL.std.450 on lavapipe.
    case OpId::Tan:
      r = math::TanOp::create(b, loc, x[0]);
      break;
    case OpId::Asin:
      r = math::AsinOp::create(b, loc, x[0]);
      break;
    case OpId::Acos:
      r = math::AcosOp::create(b, loc, x[0]);
      break;
    case OpId::Atan:
      r = math::AtanOp::create(b, loc, x[0]);
      break;
    case OpId::Sinh:
      r = math::SinhOp::create(b, loc, x[0]);
      break;
    case OpId::Cosh:
      r = math::CoshOp::create(b, loc, x[0]);
      break;
    case OpId::Asinh:
      r = math::AsinhOp::create(b, loc, x[0]);
      break;
    case OpId::Acosh:
      r = math::AcoshOp::create(b, loc, x[0]);
      break;
    case OpId::Atanh:
      r = math::AtanhOp::create(b, loc, x[0]);
      break;
    case OpId::Sqrt:
      r = math::SqrtOp::create(b, loc, x[0]);
      break;
    case OpId::Erf:
      r = math::ErfOp::create(b, loc, x[0]);
      break;
    case OpId::Sigmoid: {
      Value numerator = f32(1);
      Value one = f32(1);
      Value e = expf(arith::NegFOp::create(b, loc, x[0]));
      r = divf(numerator, addf(one, e));
      break;
    }
    case OpId::Gelu:
      if (op.attrs.getBool("tanh_approximation")) {
        // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        Value x3 = mulf(mulf(x[0], x[0]), x[0]);
        Value scale = f32(0.7978845608028654);
        Value cubic = addf(x[0], mulf(f32(0.044715), x3));
        Value inner = mulf(scale, cubic);
        Value half = mulf(f32(0.5), x[0]);
        Value one = f32(1);
        Value th = math::TanhOp::create(b, loc, inner);
        r = mulf(half, addf(one, th));
      } else {
        Value e = math::ErfOp::create(b, loc, mulf(x[0], f32(M_SQRT1_2)));
        Value half = mulf(f32(0.5), x[0]);
        Value onePlus = addf(f32(1), e);
        r = mulf(half, onePlus);
      }
      break;
    case OpId::Hardswish: {
      Value y = addf(x[0], f32(3));
      Value below = cmpf(arith::CmpFPredicate::OLT, y, f32(0));
      Value zero = f32(0);
      y = select(below, zero, y);
      Value above = cmpf(arith::CmpFPredicate::OGT, y, f32(6));
      Value six = f32(6);
      y = select(above, six, y);
      Value xy = mulf(x[0], y);
      r = divf(xy, f32(6));
      break;
    }
    case OpId::Not:
      r = arith::XOrIOp::create(b, loc, x[0], intConst(b.getI1Type(), 1));
      break;
    case OpId::Dropout: {
      // rt::dropout: the word of the element's Philox counter, kept when
      // its top 24 bits are below the threshold; x times the scale or 0.
      double p = op.attrs.getFloat("p");
      Value word = dropoutWord(x[1], x[2]);
      Value top = arith::ShRUIOp::create(b, loc, word, u32(8));
      Value keep =
          cmpi(arith::CmpIPredicate::ult, top, u32(rt::dropoutKeepBelow(p)));
      Value factor = select(keep, f32(rt::dropoutScale(p)), f32(0));
      r = mulf(x[0], factor);
      break;
    }
    case OpId::Add:
      r = fl ? addf(x[0], x[1]) : Value(arith::AddIOp::create(b, loc, x[0], x[1]));
      break;
    case OpId::Sub:
      r = fl ? subf(x[0], x[1]) : Value(arith::SubIOp::create(b, loc, x[0], x[1]));
      break;
    case OpId::Mul:
      r = fl ? mulf(x[0], x[1]) : Value(arith::MulIOp::create(b, loc, x[0], x[1]));
      break;
    case OpId::Div:
      if (fl) {
        r = divf(x[0], x[1]);
        break;
      }
      // The CPU's integer division: truncates toward zero, min / -1 wraps,
      // a zero divisor is an error (reported; the element gets 0).
      {
        Type t = x[0].getType();
        Value zero = intConst(t, 0);
        Value byZero = cmpi(arith::CmpIPredicate::eq, x[1], zero);
        Value byMinusOne = cmpi(arith::CmpIPredicate::eq, x[1], intConst(t, -1));
        Value special = arith::OrIOp::create(b, loc, byZero, byMinusOne);
        Value one = intConst(t, 1);
        Value safe = select(special, one, x[1]);
        r = arith::DivSIOp::create(b, loc, x[0], safe);
        r = select(byMinusOne, arith::SubIOp::create(b, loc, zero, x[0]), r);
        r = select(byZero, zero, r);
        if (record) {
          Value position = element ? element : idx(0);
          Value code = intConst(b.getI64Type(), 0);
          reportError(byZero, position, code);
        }
      }
      break;
    case OpId::Pow: {
      // x * x for a power of 2, as the CPU kernel computes it.
      Value two = f32(2);
      Value isSquare = cmpf(arith::CmpFPredicate::OEQ, x[1], two);
      Value square = mulf(x[0], x[0]);
      Value power = math::PowFOp::create(b, loc, x[0], x[1]);
      r = select(isSquare, square, power);
      break;
    }
    case OpId::Maximum: // NaN from either side
    case OpId::Minimum: {
      bool max = op.op == OpId::Maximum;
      if (fl) {
        // x[0] when it is NaN or wins, else x[1] (NaN there too).
        Value nan = isNan(x[0]);
        Value wins = cmpf(max ? arith::CmpFPredicate::OGT
                              : arith::CmpFPredicate::OLT,
                          x[0], x[1]);
        r = select(arith::OrIOp::create(b, loc, nan, wins), x[0], x[1]);
      } else {
        Value lo = max ? x[0] : x[1], hi = max ? x[1] : x[0];
        r = select(cmpi(arith::CmpIPredicate::slt, lo, hi), x[1], x[0]);
      }
      break;
    }
    case OpId::Clamp: {
      double lo = op.attrs.getFloat("min"), hi = op.attrs.getFloat("max");
      if (fl) {
        r = x[0];
        if (!std::isnan(lo)) {
          Value below = cmpf(arith::CmpFPredicate::OLT, r, f32(lo));
          Value l = f32(lo);
          r = select(below, l, r);
        }
        if (!std::isnan(hi)) {
          Value above = cmpf(arith::CmpFPredicate::OGT, r, f32(hi));
          Value h = f32(hi);
          r = select(above, h, r);
        }
      } else {
        Type it = x[0].getType();
        r = x[0];
        Value l = intConst(it, int64_t(std::ceil(lo)));
        Value h = intConst(it, int64_t(std::floor(hi)));
        r = select(cmpi(arith::CmpIPredicate::slt, r, l), l, r);
        r = select(cmpi(arith::CmpIPredicate::sgt, r, h), h, r);
      }
      break;
    }
    case OpId::Compare: {
      auto dir = rt::CompareOp(op.attrs.getInt("direction"));
      if (isFloat(types[0])) {
        static const arith::CmpFPredicate p[] = {
            arith::CmpFPredicate::OEQ, arith::CmpFPredicate::UNE,
            arith::CmpFPredicate::OLT, arith::CmpFPredicate::OLE,
            arith::CmpFPredicate::OGT, arith::CmpFPredicate::OGE};
        return cmpf(p[int(dir)], x[0], x[1]);
      }
      static const arith::CmpIPredicate p[] = {
          arith::CmpIPredicate::eq,  arith::CmpIPredicate::ne,
          arith::CmpIPredicate::slt, arith::CmpIPredicate::sle,
          arith::CmpIPredicate::sgt, arith::CmpIPredicate::sge};
      return cmpi(p[int(dir)], x[0], x[1]);
    }
    case OpId::Select:
      return select(x[0], x[1], x[2]);
    default:
      return failure();
    }
    return fl ? roundTo(r, t) : r;
  }

  //===--- elementwise and index kernels ---===//

  /// The value of step input `arg` read through broadcast_in_dim `dims` at
  /// output index `outIx` (an input dim of size 1 repeats).
  Value broadcastLoad(size_t arg, const std::vector<int64_t>& dims,
                      ArrayRef<Value> outIx) {
    const TensorDesc& t = tensors[arg];
    if (t.numel() == 1 && !(plan.batch.dynamic() && scaledDims(t)))
      return load(arg, idx(0));
    SmallVector<Value> s = sizes(t);
    SmallVector<Value> st = strides(s);
    Value flat = idx(0);
    for (size_t k = 0; k < t.shape.size(); ++k) {
      bool repeats = t.shape[k] == 1 && !(k < t.batchScale.size() &&
                                          t.batchScale[k] > 0);
      if (repeats)
        continue;
      flat = arith::AddIOp::create(b,
          loc, flat, arith::MulIOp::create(b, loc, outIx[dims[k]], st[k]));
    }
    return load(arg, flat);
  }

  /// Input `arg` read through view `v` (schema 2.6: a transpose, reshape or
  /// slice of it in the region) at the region's flat index `i`: `i`
  /// delinearized over the view's factors, dotted with their strides.
  Value viewLoad(size_t arg, const rt::shapes::StridedView& v, Value i) {
    std::vector<int64_t> sizes, strides;
    v.flatten(&sizes, &strides);
    SmallVector<Value> s;
    for (int64_t n : sizes)
      s.push_back(idx(n));
    SmallVector<Value> ix = delinearize(i, s);
    Value flat = idx(v.offset);
    for (size_t k = 0; k < ix.size(); ++k)
      flat = arith::AddIOp::create(
          b, loc, flat, arith::MulIOp::create(b, loc, ix[k], idx(strides[k])));
    return load(arg, flat);
  }

  /// Input `k` read at the region's flat index `i` (an input of one element
  /// is a scalar, read at 0).
  Value loadDirect(size_t k, Value i, int64_t numel) {
    bool scalar = tensors[k].numel() == 1 && numel != 1 &&
                  !(plan.batch.dynamic() && scaledDims(tensors[k]));
    return load(k, scalar ? idx(0) : i);
  }

  /// The value of region ops body[0, count) at flat index `i` of a tensor
  /// of sizes `shapeSizes` (the region's shape: every value has it, inputs
  /// reach it directly, as scalars, or through broadcast_in_dim).
  FailureOr<Value> evalRegion(const std::vector<PlanRegionOp>& body,
                              size_t count, Value i,
                              ArrayRef<Value> shapeSizes, int64_t numel,
                              DType* resultType,
                              ArrayRef<Value> preloaded = {},
                              std::vector<Value>* computed = nullptr) {
    SmallVector<Value> ix;
    auto index = [&]() -> ArrayRef<Value> {
      if (ix.empty() && !shapeSizes.empty())
        ix = delinearize(i, shapeSizes);
      return ix;
    };
    size_t nin = numInputs();
    std::vector<Value> values(nin + count);
    std::vector<DType> types(nin + count);
    for (size_t k = 0; k < nin; ++k) {
      types[k] = tensors[k].dtype;
      if (k < preloaded.size())
        values[k] = preloaded[k];
    }
    auto input = [&](size_t k) -> Value {
      if (!values[k])
        values[k] = loadDirect(k, i, numel);
      return values[k];
    };
    rt::shapes::RegionViews views(nin, nin + count);
    // Value v at the element: an input's, a view's, or a computed one.
    auto read = [&](uint32_t v) -> Value {
      if (!views.isView(v))
        return v < nin ? input(v) : values[v];
      if (!values[v]) {
        // A reshape of an input (an epilogue's, split from its anchor)
        // reads it in order: the element's own index, as before views.
        std::vector<int64_t> sizes, strides;
        views.view(v).flatten(&sizes, &strides);
        bool inOrder = views.view(v).offset == 0 && sizes.size() == 1 &&
                       strides[0] == 1 &&
                       sizes[0] == tensors[views.input(v)].numel();
        values[v] = inOrder ? input(views.input(v))
                            : viewLoad(views.input(v), views.view(v), i);
      }
      return values[v];
    };
    for (size_t j = 0; j < count; ++j) {
      const PlanRegionOp& op = body[j];
      if (rt::shapes::isViewOp(op.op) && op.operands.size() == 1 &&
          views.viewable(op.operands[0])) {
        uint32_t from = op.operands[0];
        uint32_t root = from < nin ? from : views.input(from);
        if (plan.batch.dynamic() && scaledDims(tensors[root]))
          return emitError(loc) << "a view (mc." << rt::opName(op.op)
                                << ") of an input whose size depends on the "
                                   "batch (mc-fuse makes views of static "
                                   "shapes only)";
        rt::Status st = views.add(uint32_t(nin + j), op.op, op.attrs,
                                  op.shape, from, tensors[root].shape);
        if (!st)
          return emitError(loc) << "mc." << rt::opName(op.op) << ": "
                                << st.message();
        types[nin + j] = op.dtype;
        continue;
      }
      if (op.op == OpId::BroadcastInDim && op.operands[0] < nin) {
        values[nin + j] =
            broadcastLoad(op.operands[0], op.attrs.getInts("dims"), index());
        types[nin + j] = op.dtype;
        continue;
      }
      SmallVector<Value> x;
      SmallVector<DType> xt;
      for (uint32_t v : op.operands) {
        x.push_back(read(v));
        xt.push_back(types[v]);
      }
      element = i;
      FailureOr<Value> r = scalarOp(op, x, xt);
      if (failed(r))
        return emitError(loc) << "no kernel for mc." << rt::opName(op.op);
      values[nin + j] = *r;
      types[nin + j] = op.dtype;
    }
    if (count == 0) { // the region's value is input 0 itself
      *resultType = types[0];
      return input(0);
    }
    if (computed)
      *computed = values;
    *resultType = types.back();
    return read(uint32_t(nin + count - 1)); // a view, when a reduction reads one
  }

  LogicalResult emitElementwise() {
    switch (step.op) {
    case OpId::Transpose:
    case OpId::Slice:
    case OpId::Pad:
    case OpId::Concat:
    case OpId::Gather:
      return emitIndex();
    case OpId::BatchNorm:
      return emitBatchNorm();
    default:
      break;
    }
    std::vector<PlanRegionOp> body = bodyOf(plan, step);
    SmallVector<Value> outSizes = sizes(out());
    Value n = product(outSizes);
    // Four consecutive elements per unit when every size allows it: the
    // loads and stores at consecutive addresses of 16-byte-aligned buffers
    // become 128-bit accesses (NVPTX's load/store vectorizer).
    int64_t perBatch = plan.batch.dynamic() && scaledDims(out())
                           ? out().numel() / plan.batch.max
                           : out().numel();
    if (perBatch % 4 == 0 && out().numel() >= 4)
      vectorWidth = 4;
    // 16-bit results take 8 per unit: 16-byte accesses too (4 would be
    // 8-byte ones).
    bool halfOut = out().dtype == DType::F16 || out().dtype == DType::BF16;
    if (halfOut && perBatch % 8 == 0 && out().numel() >= 8)
      vectorWidth = 8;
    Value units = arith::DivUIOp::create(b, loc, n, idx(vectorWidth));
    std::vector<bool> direct(numInputs(), false);
    for (const PlanRegionOp& op : body)
      if (op.op != OpId::BroadcastInDim && op.op != OpId::Transpose &&
          op.op != OpId::Slice)
        for (uint32_t v : op.operands)
          if (v < numInputs())
            direct[v] = true;
    LogicalResult result = success();
    gridStride(units, [&](Value u) {
      Value first = arith::MulIOp::create(b, loc, u, idx(vectorWidth));
      // Every load before any store: without alias information the
      // vectorizer cannot move a load above a store.
      // The inputs read at the element's own index are loaded first, for
      // all the unit's elements (the math between them, libdevice calls
      // with branches, would otherwise split them into other blocks).
      SmallVector<Value> at, values;
      std::vector<SmallVector<Value>> pre(vectorWidth);
      for (int64_t k = 0; k < vectorWidth; ++k) {
        at.push_back(k ? Value(arith::AddIOp::create(b, loc, first, idx(k)))
                       : first);
        pre[k].resize(numInputs());
        for (size_t in = 0; in < numInputs(); ++in)
          if (direct[in])
            pre[k][in] = loadDirect(in, at.back(), out().numel());
      }
      std::vector<SmallVector<Value>> extraValues(vectorWidth);
      philoxWords.clear();
      unitFirst = vectorWidth % 4 == 0 ? first : Value();
      for (int64_t k = 0; k < vectorWidth; ++k) {
        unitLane = unitFirst ? k : -1;
        DType t;
        std::vector<Value> computed;
        FailureOr<Value> v =
            evalRegion(body, body.size(), at[k], outSizes, out().numel(), &t,
                       pre[k], &computed);
        if (failed(v)) {
          result = failure();
          return;
        }
        values.push_back(*v);
        for (uint32_t e : step.extraOutputs)
          extraValues[k].push_back(computed.at(e));
      }
      unitLane = -1;
      philoxWords.clear();
      // Every output's stores after all of the unit's loads: an output may
      // be an input's buffer (in place).
      for (int64_t k = 0; k < vectorWidth; ++k) {
        store(values[k], at[k]);
        for (size_t e = 0; e < extras.size(); ++e)
          storeTo(extraValues[k][e], at[k], extraArgs[e], extras[e].dtype);
      }
    });
    return result;
  }

  /// Inference batch norm: (x - mean) / sqrt(var + eps) * scale + offset,
  /// per feature (the CPU kernel's order of operations).
  LogicalResult emitBatchNorm() {
    SmallVector<Value> s = sizes(out());
    int64_t axis = step.attrs.getInt("feature_axis");
    double eps = step.attrs.getFloat("epsilon");
    Value n = product(s);
    gridStride(n, [&](Value i) {
      Value c = delinearize(i, s)[axis];
      Value x = load(0, i);
      Value centered = subf(x, load(3, c));
      Value var = load(4, c);
      Value epsilon = f32(eps);
      Value dev = math::SqrtOp::create(b, loc, addf(var, epsilon));
      Value y = divf(centered, dev);
      Value scaled = mulf(y, load(1, c));
      Value offset = load(2, c);
      y = addf(scaled, offset);
      store(y, i);
    });
    return success();
  }

  /// transpose, slice, pad, concat: each output element reads (at most) one
  /// input element.
  LogicalResult emitIndex() {
    SmallVector<Value> outSizes = sizes(out());
    Value n = product(outSizes);
    gridStride(n, [&](Value i) {
      SmallVector<Value> ix = delinearize(i, outSizes);
      switch (step.op) {
      case OpId::Transpose: {
        std::vector<int64_t> perm = step.attrs.getInts("permutation");
        SmallVector<Value> st = strides(sizes(tensors[0]));
        Value flat = idx(0);
        for (size_t d = 0; d < perm.size(); ++d)
          flat = arith::AddIOp::create(b,
              loc, flat, arith::MulIOp::create(b, loc, ix[d], st[perm[d]]));
        store(load(0, flat), i);
        break;
      }
      case OpId::Slice: {
        std::vector<int64_t> start = step.attrs.getInts("start"),
                             stride = step.attrs.getInts("strides");
        SmallVector<Value> st = strides(sizes(tensors[0]));
        Value flat = idx(0);
        for (size_t d = 0; d < ix.size(); ++d) {
          Value begin = idx(start[d]);
          Value offset = arith::MulIOp::create(
              b, loc, ix[d], idx(stride.empty() ? 1 : stride[d]));
          Value src = arith::AddIOp::create(b, loc, begin, offset);
          flat = arith::AddIOp::create(b,
              loc, flat, arith::MulIOp::create(b, loc, src, st[d]));
        }
        store(load(0, flat), i);
        break;
      }
      case OpId::Pad: {
        std::vector<int64_t> low = step.attrs.getInts("low");
        SmallVector<Value> in = sizes(tensors[0]);
        SmallVector<Value> st = strides(in);
        Value inside = intConst(b.getI1Type(), 1);
        Value flat = idx(0);
        for (size_t d = 0; d < ix.size(); ++d) {
          // src = ix - low, in [0, in) (compared as signed index values)
          Value src = arith::SubIOp::create(b, loc, ix[d], idx(low[d]));
          Value aboveLow = cmpi(arith::CmpIPredicate::sge, src, idx(0));
          Value belowHigh = cmpi(arith::CmpIPredicate::slt, src, in[d]);
          Value ok = arith::AndIOp::create(b, loc, aboveLow, belowHigh);
          inside = arith::AndIOp::create(b, loc, inside, ok);
          Value safe = select(ok, src, idx(0));
          flat = arith::AddIOp::create(b,
              loc, flat, arith::MulIOp::create(b, loc, safe, st[d]));
        }
        auto ifOp = scf::IfOp::create(b, loc, computeType(out().dtype), inside,
                                        /*withElse=*/true);
        {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(ifOp.thenBlock());
          scf::YieldOp::create(b, loc, load(0, flat));
          b.setInsertionPointToStart(ifOp.elseBlock());
          scf::YieldOp::create(b,
              loc, constantOf(out().dtype, step.attrs.getFloat("value")));
        }
        store(ifOp.getResult(0), i);
        break;
      }
      case OpId::Gather: {
        // Indices are in [-dim, dim): checked at compile time, or when the
        // input that holds them is set (classifyStep). Clamped besides, so
        // the kernel never reads outside the data.
        int64_t axis = step.attrs.getInt("axis");
        const TensorDesc& data = tensors[0];
        size_t ri = tensors[1].shape.size();
        SmallVector<Value> ds = sizes(data);
        SmallVector<Value> is = sizes(tensors[1]);
        SmallVector<Value> idxPos(ix.begin() + axis, ix.begin() + axis + ri);
        Value position = linearize(idxPos, strides(is));
        Value k = load(1, position);
        if (record) { // indices the graph computes: out of range is an error
          Value k64 = k.getType().isInteger(64)
                          ? k
                          : Value(arith::ExtSIOp::create(b, loc, b.getI64Type(), k));
          Value dim = arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                                 ds[axis]);
          // k in [-dim, dim)  <=>  (u64)(k + dim) < 2 * dim (one unsigned
          // compare; a wrapped sum is huge, so out of range).
          Value shifted = arith::AddIOp::create(b, loc, k64, dim);
          Value span = arith::AddIOp::create(b, loc, dim, dim);
          Value out = cmpi(arith::CmpIPredicate::uge, shifted, span);
          reportError(out, position, k64);
        }
        k = arith::IndexCastOp::create(b, loc, b.getIndexType(), k);
        Value wrapped = arith::AddIOp::create(b, loc, k, ds[axis]);
        k = select(cmpi(arith::CmpIPredicate::slt, k, idx(0)), wrapped, k);
        Value last = arith::SubIOp::create(b, loc, ds[axis], idx(1));
        Value negative = cmpi(arith::CmpIPredicate::slt, k, idx(0));
        Value zero = idx(0);
        k = select(negative, zero, k);
        k = select(cmpi(arith::CmpIPredicate::sgt, k, last), last, k);
        SmallVector<Value> src(ix.begin(), ix.begin() + axis);
        src.push_back(k);
        src.append(ix.begin() + axis + ri, ix.end());
        store(load(0, linearize(src, strides(ds))), i);
        break;
      }
      case OpId::Concat: {
        int64_t axis = step.attrs.getInt("axis");
        // The last input whose offset along the axis is <= ix[axis].
        Value offset = idx(0);
        Value pos = ix[axis];
        for (size_t k = 0; k < numInputs(); ++k) {
          SmallVector<Value> s = sizes(tensors[k]);
          Value end = arith::AddIOp::create(b, loc, offset, s[axis]);
          Value fromStart = cmpi(arith::CmpIPredicate::uge, pos, offset);
          Value beforeEnd = cmpi(arith::CmpIPredicate::ult, pos, end);
          Value inK = arith::AndIOp::create(b, loc, fromStart, beforeEnd);
          auto ifOp = scf::IfOp::create(b, loc, inK);
          {
            OpBuilder::InsertionGuard g(b);
            b.setInsertionPointToStart(ifOp.thenBlock());
            SmallVector<Value> srcIx(ix.begin(), ix.end());
            srcIx[axis] = arith::SubIOp::create(b, loc, pos, offset);
            store(load(k, linearize(srcIx, strides(s))), i);
          }
          offset = end;
        }
        break;
      }
      default:
        break;
      }
    });
    return success();
  }

  //===--- row kernels ---===//

  int64_t rowLength = 1;
  /// Elements per unit of an elementwise kernel (1 or 4).
  int64_t vectorWidth = 1;
  /// Rows up to this many bytes (f32) stay in shared memory between the
  /// passes of softmax and layer_norm (under the 48 KiB a block has without
  /// opting in, with room for the partials; lavapipe offers 32 KiB).
  static constexpr int64_t kRowCacheBytes = 24 << 10;

  /// The block-wide reduction of `v` (every thread gets the result): a
  /// subgroup reduction, then one partial per subgroup through shared
  /// memory, folded by every thread. Subgroups are 32 lanes on NVIDIA and 8
  /// on lavapipe; nothing assumes either.
  Value blockReduce(Value v, gpu::AllReduceOperation kind, Value smem) {
    Value r = gpu::SubgroupReduceOp::create(b, loc, v, kind, /*uniform=*/false);
    Value sg = flavor.spirv ? Value(gpu::SubgroupSizeOp::create(b,
                                  loc, b.getIndexType(), nullptr))
                            : idx(32);
    Value tid = threadId();
    Value lane = arith::RemUIOp::create(b, loc, tid, sg);
    Value sub = arith::DivUIOp::create(b, loc, tid, sg);
    auto ifOp = scf::IfOp::create(b, loc, cmpi(arith::CmpIPredicate::eq, lane,
                                              idx(0)));
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      memref::StoreOp::create(b, loc, r, smem, ValueRange{sub});
    }
    gpu::BarrierOp::create(b, loc);
    Value bdim = blockDim();
    Value sgMinusOne = arith::SubIOp::create(b, loc, sg, idx(1));
    Value padded = arith::AddIOp::create(b, loc, bdim, sgMinusOne);
    Value nsub = arith::DivUIOp::create(b, loc, padded, sg);
    Value init = identity(kind);
    Value lo = idx(0);
    Value one = idx(1);
    Value total = loopAcc(lo, nsub, one, init, [&](Value j, Value acc) {
      Value p = memref::LoadOp::create(b, loc, smem, ValueRange{j});
      return combine(kind, acc, p);
    });
    // Nobody overwrites the partials before everyone has read them.
    gpu::BarrierOp::create(b, loc);
    return total;
  }
  Value identity(gpu::AllReduceOperation kind) {
    switch (kind) {
    case gpu::AllReduceOperation::MAXNUMF:
      return f32(-std::numeric_limits<float>::infinity());
    case gpu::AllReduceOperation::MINNUMF:
      return f32(std::numeric_limits<float>::infinity());
    default:
      return f32(0);
    }
  }
  Value combine(gpu::AllReduceOperation kind, Value x, Value y) {
    switch (kind) {
    case gpu::AllReduceOperation::MAXNUMF:
      return arith::MaxNumFOp::create(b, loc, x, y);
    case gpu::AllReduceOperation::MINNUMF:
      return arith::MinNumFOp::create(b, loc, x, y);
    default:
      return addf(x, y);
    }
  }
  /// A row's reduction: each thread folds a strided part of the row, then
  /// the block combines.
  Value rowReduce(gpu::AllReduceOperation kind, Value cols, Value smem,
                  const std::function<Value(Value)>& element) {
    Value tid = threadId();
    Value bdim = blockDim();
    Value init = identity(kind);
    Value part = loopAcc(tid, cols, bdim, init, [&](Value j, Value acc) {
      return combine(kind, acc, element(j));
    });
    return blockReduce(part, kind, smem);
  }

  /// A row's max or min where NaN wins, as the CPU's: the subgroup's
  /// maxnum/minnum drop NaN (an all-NaN row gave -inf), so each thread also
  /// counts the NaNs it saw, in the same pass over the row, and a row with
  /// any is NaN.
  Value rowReduceNanWins(gpu::AllReduceOperation kind, Value cols,
                         Value smem, const std::function<Value(Value)>& element) {
    Value tid = threadId();
    Value bdim = blockDim();
    auto f = scf::ForOp::create(b, loc, tid, cols, bdim,
                                ValueRange{identity(kind), f32(0)});
    {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(f.getBody());
      Value v = element(f.getInductionVar());
      Value acc = combine(kind, f.getRegionIterArgs()[0], v);
      Value nans = addf(f.getRegionIterArgs()[1],
                        select(isNan(v), f32(1), f32(0)));
      scf::YieldOp::create(b, loc, ValueRange{acc, nans});
    }
    Value r = blockReduce(f.getResult(0), kind, smem);
    Value nans =
        blockReduce(f.getResult(1), gpu::AllReduceOperation::ADD, smem);
    Value any = cmpf(arith::CmpFPredicate::OGT, nans, f32(0));
    return select(any, f32(std::numeric_limits<float>::quiet_NaN()), r);
  }

  /// The reduction a step computes: its own op, or the last op of a fused
  /// region that ends in one (the ops before it computed per element).
  const PlanRegionOp* regionReduction() const {
    return step.op == OpId::Fused && !step.body.empty() ? &step.body.back()
                                                        : nullptr;
  }
  OpId reduceOp() const {
    return regionReduction() ? regionReduction()->op : step.op;
  }
  const rt::OpAttrs& reduceAttrs() const {
    return regionReduction() ? regionReduction()->attrs : step.attrs;
  }
  /// What the reduction reads: input 0, or the region's value before it.
  TensorDesc reducedTensor() const {
    const PlanRegionOp* r = regionReduction();
    if (!r)
      return tensors[0];
    uint32_t v = r->operands[0];
    if (v < numInputs())
      return tensors[v];
    const PlanRegionOp& p = step.body[v - numInputs()];
    return TensorDesc{p.dtype, p.shape, p.batchScale};
  }
  /// Element `flat` of the reduced tensor.
  std::function<Value(Value)> reducedElement(ArrayRef<Value> s, int64_t numel) {
    if (!regionReduction())
      return [this](Value flat) { return load(0, flat); };
    SmallVector<Value> shape(s.begin(), s.end());
    return [this, shape, numel](Value flat) {
      DType t;
      FailureOr<Value> v = evalRegion(step.body, step.body.size() - 1, flat,
                                      shape, numel, &t);
      return succeeded(v) ? *v : f32(0);
    };
  }

  /// A block's shared memory: a workgroup attribution of the kernel. (A
  /// memref.alloc in space 3 lowered through convert-gpu-to-nvvm to a
  /// per-thread device malloc cast to shared: no memory shared between the
  /// warps of a block, and a heap leak per launch. The SPIR-V lowering
  /// made it a Workgroup variable, so lavapipe could not tell.)
  Value sharedBuffer(MemRefType type) {
    return fn.addWorkgroupAttribution(type, loc);
  }

  LogicalResult emitRows() {
    const TensorDesc x = reducedTensor();
    int64_t rank = int64_t(x.shape.size());
    int64_t first = rank - 1;
    if (step.op == OpId::LayerNorm)
      first = step.attrs.getInt("axis");
    else if (rt::isReduction(reduceOp()))
      first = trailingStart(reduceAttrs().getInts("dims"), rank);
    SmallVector<Value> s = sizes(x);
    Value cols = idx(1);
    rowLength = 1;
    for (int64_t d = first; d < rank; ++d) {
      cols = arith::MulIOp::create(b, loc, cols, s[d]);
      rowLength *= x.shape[d];
    }
    Value rows = arith::DivUIOp::create(b, loc, product(s), cols);
    auto smemType = MemRefType::get({64}, b.getF32Type(), AffineMap(),
                                    b.getI64IntegerAttr(3));
    Value smem = sharedBuffer(smemType);
    std::function<Value(Value)> element = reducedElement(s, x.numel());
    // Softmax and layer_norm read a row three times: when the row is static
    // and small enough, the first pass keeps it in shared memory and the
    // others read it there (each thread reads back what it wrote: no
    // barrier), so global memory is read once.
    bool static_row = true;
    for (int64_t d = first; d < rank; ++d)
      static_row &= !(size_t(d) < x.batchScale.size() && x.batchScale[d] > 0);
    bool multiPass = reduceOp() == OpId::Softmax ||
                     reduceOp() == OpId::LogSoftmax ||
                     reduceOp() == OpId::LayerNorm;
    Value cache;
    if (multiPass && static_row && rowLength * 4 <= kRowCacheBytes)
      cache = sharedBuffer(MemRefType::get(
          {rowLength}, b.getF32Type(), AffineMap(), b.getI64IntegerAttr(3)));
    Value bid = blockId();
    Value gdim = gridDim();
    loop(bid, rows, gdim, [&](Value row) {
      Value base = arith::MulIOp::create(b, loc, row, cols);
      auto at = [&](Value j) { return arith::AddIOp::create(b, loc, base, j); };
      auto in = [&](Value j) -> Value {
        if (!cache)
          return element(at(j));
        return memref::LoadOp::create(b, loc, cache, ValueRange{j});
      };
      // The first pass: from global memory, kept in the cache.
      auto first = [&](Value j) -> Value {
        Value v = element(at(j));
        if (cache)
          memref::StoreOp::create(b, loc, v, cache, ValueRange{j});
        return v;
      };
      switch (reduceOp()) {
      case OpId::Softmax:
      case OpId::LogSoftmax: {
        Value m =
            rowReduce(gpu::AllReduceOperation::MAXNUMF, cols, smem, first);
        Value sum = rowReduce(gpu::AllReduceOperation::ADD, cols, smem,
                              [&](Value j) { return expf(subf(in(j), m)); });
        bool log = step.op == OpId::LogSoftmax;
        Value lse = log ? Value(math::LogOp::create(b, loc, sum)) : Value();
        Value inv = log ? Value() : divf(f32(1), sum);
        Value tid = threadId();
        Value bdim = blockDim();
        loop(tid, cols, bdim, [&](Value j) {
          Value d = subf(in(j), m);
          Value y = log ? subf(d, lse) : mulf(expf(d), inv);
          Value dst = at(j);
          store(y, dst);
        });
        break;
      }
      case OpId::LayerNorm: {
        Value fcols = arith::UIToFPOp::create(b,
            loc, b.getF32Type(),
            arith::IndexCastOp::create(b, loc, b.getI64Type(), cols));
        Value mean = divf(
            rowReduce(gpu::AllReduceOperation::ADD, cols, smem, first), fcols);
        Value var = divf(rowReduce(gpu::AllReduceOperation::ADD, cols, smem,
                                   [&](Value j) {
                                     Value d = subf(in(j), mean);
                                     return mulf(d, d);
                                   }),
                         fcols);
        // 1 / sqrt, each rounded (the CPU's): rsqrt lowers to the
        // approximate rsqrt.approx.f32.
        Value one = f32(1);
        Value dev = math::SqrtOp::create(
            b, loc, addf(var, f32(step.attrs.getFloat("epsilon"))));
        Value rstd = divf(one, dev);
        Value tid = threadId();
        Value bdim = blockDim();
        loop(tid, cols, bdim, [&](Value j) {
          Value y = mulf(subf(in(j), mean), rstd);
          Value scaled = mulf(y, load(1, j));
          Value offset = load(2, j);
          y = addf(scaled, offset);
          store(y, at(j));
        });
        break;
      }
      default: { // trailing reductions
        OpId op = reduceOp();
        auto kind = op == OpId::ReduceMax   ? gpu::AllReduceOperation::MAXNUMF
                    : op == OpId::ReduceMin ? gpu::AllReduceOperation::MINNUMF
                                            : gpu::AllReduceOperation::ADD;
        Value r = kind == gpu::AllReduceOperation::ADD
                      ? rowReduce(kind, cols, smem, in)
                      : rowReduceNanWins(kind, cols, smem, in);
        if (op == OpId::ReduceMean)
          r = meanOf(r, cols);
        Value tid = threadId();
        Value zero = idx(0);
        auto ifOp = scf::IfOp::create(
            b, loc, cmpi(arith::CmpIPredicate::eq, tid, zero));
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        store(r, row);
        break;
      }
      }
    });
    return success();
  }

  //===--- general reductions ---===//

  /// Any dims: one thread per output element folds its reduced elements in
  /// order (f32 for floats, the integer type for max/min of integers).
  /// The reduction's start value and step, for reduceOp() in `ct`: max and
  /// min let NaN win, as the CPU's.
  Value reduceInit(OpId op, Type ct) {
    bool fl = ct.isF32();
    if (op == OpId::ReduceMax)
      return fl ? f32(-std::numeric_limits<float>::infinity())
                : intConst(ct, ct.isInteger(64)
                                   ? std::numeric_limits<int64_t>::min()
                                   : std::numeric_limits<int32_t>::min());
    if (op == OpId::ReduceMin)
      return fl ? f32(std::numeric_limits<float>::infinity())
                : intConst(ct, ct.isInteger(64)
                                   ? std::numeric_limits<int64_t>::max()
                                   : std::numeric_limits<int32_t>::max());
    return fl ? f32(0) : intConst(ct, 0);
  }
  Value reduceStep(OpId op, Type ct, Value a, Value v) {
    bool fl = ct.isF32();
    switch (op) {
    case OpId::ReduceMax: { // NaN wins
      if (!fl)
        return arith::MaxSIOp::create(b, loc, a, v);
      Value nan = isNan(v);
      Value greater = cmpf(arith::CmpFPredicate::OGT, v, a);
      return select(arith::OrIOp::create(b, loc, nan, greater), v, a);
    }
    case OpId::ReduceMin: {
      if (!fl)
        return arith::MinSIOp::create(b, loc, a, v);
      Value nan = isNan(v);
      Value less = cmpf(arith::CmpFPredicate::OLT, v, a);
      return select(arith::OrIOp::create(b, loc, nan, less), v, a);
    }
    default:
      return fl ? addf(a, v) : Value(arith::AddIOp::create(b, loc, a, v));
    }
  }
  Value meanOf(Value acc, Value count) {
    return divf(acc, arith::UIToFPOp::create(
                         b, loc, b.getF32Type(),
                         arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                                    count)));
  }

  /// Whether the reduction is over a leading prefix of dims (0, 1, ...,
  /// p - 1) with at least kColumnBlock outputs: a bias gradient's sum over
  /// the batch. Each output is then a column of a [count, n] matrix.
  static constexpr int64_t kColumnBlock = 32;
  bool reducesLeadingDims() {
    std::vector<int64_t> dims = reduceAttrs().getInts("dims");
    std::sort(dims.begin(), dims.end());
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] != int64_t(i))
        return false;
    const TensorDesc x = reducedTensor();
    if (dims.empty() || dims.size() >= x.shape.size())
      return false;
    int64_t n = 1;
    for (size_t d = dims.size(); d < x.shape.size(); ++d)
      n *= x.shape[d];
    return n >= kColumnBlock;
  }

  /// A reduction over leading dims, column-wise: a block takes 32 adjacent
  /// outputs (columns); its warp w of 32 lanes walks the reduced rows w,
  /// w + warps, ... (each load of a warp 32 adjacent values, coalesced),
  /// then warp 0 folds the warps' partials in order (deterministic). One
  /// thread per output walking all rows left most of a GPU idle for a
  /// [4096, 4096] -> [4096] bias gradient (16 blocks).
  LogicalResult emitReduceColumns() {
    const TensorDesc x = reducedTensor();
    OpId op = reduceOp();
    size_t lead = reduceAttrs().getInts("dims").size();
    SmallVector<Value> s = sizes(x);
    Value count = product(ArrayRef<Value>(s).take_front(lead));
    Value n = product(ArrayRef<Value>(s).drop_front(lead));
    Type ct = computeType(x.dtype);
    std::function<Value(Value)> element = reducedElement(s, x.numel());
    Value partials = sharedBuffer(MemRefType::get(
        {int64_t(flavor.block)}, ct, AffineMap(), b.getI64IntegerAttr(3)));
    Value width = idx(kColumnBlock);
    Value tid = threadId();
    Value lane = arith::RemUIOp::create(b, loc, tid, width);
    Value warp = arith::DivUIOp::create(b, loc, tid, width);
    Value warps = arith::DivUIOp::create(b, loc, blockDim(), width);
    Value groups = arith::DivUIOp::create(
        b, loc, arith::AddIOp::create(b, loc, n, idx(kColumnBlock - 1)),
        width);
    loop(blockId(), groups, gridDim(), [&](Value g) {
      Value col = arith::AddIOp::create(
          b, loc, arith::MulIOp::create(b, loc, g, width), lane);
      Value inside = cmpi(arith::CmpIPredicate::ult, col, n);
      // Past the last column a lane walks no rows, and still meets the
      // barriers.
      Value rows = select(inside, count, idx(0));
      Value acc = loopAcc(warp, rows, warps, reduceInit(op, ct),
                          [&](Value j, Value a) {
                            Value flat = arith::AddIOp::create(
                                b, loc, arith::MulIOp::create(b, loc, j, n),
                                col);
                            return reduceStep(op, ct, a, element(flat));
                          });
      memref::StoreOp::create(b, loc, acc, partials, ValueRange{tid});
      gpu::BarrierOp::create(b, loc);
      Value first = cmpi(arith::CmpIPredicate::eq, warp, idx(0));
      Value writes = arith::AndIOp::create(b, loc, first, inside);
      auto ifOp = scf::IfOp::create(b, loc, writes);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value total = loopAcc(idx(0), warps, idx(1), reduceInit(op, ct),
                              [&](Value w, Value a) {
                                Value at = arith::AddIOp::create(
                                    b, loc,
                                    arith::MulIOp::create(b, loc, w, width),
                                    lane);
                                Value p = memref::LoadOp::create(
                                    b, loc, partials, ValueRange{at});
                                return reduceStep(op, ct, a, p);
                              });
        if (op == OpId::ReduceMean)
          total = meanOf(total, count);
        store(total, col);
      }
      // The partials are read before the next group writes them.
      gpu::BarrierOp::create(b, loc);
    });
    return success();
  }

  /// scatter_add's units: each owns one column (an outer index and an
  /// inner one) over a run of the axis's rows, zeroes them, then walks
  /// every index in order and adds the update of those that land in its
  /// run. Every output element has one owner summing in index order, so
  /// the result is the CPU's bit for bit, with no atomics; the runs are
  /// short enough that the grid has about kScatterUnits units (an
  /// embedding's gradient has only its width in columns), at the cost of
  /// each unit reading every index.
  static constexpr int64_t kScatterUnits = 32768;
  int64_t scatterRowsPerUnit() const {
    int64_t axis = step.attrs.getInt("axis");
    int64_t len = out().shape[size_t(axis)];
    int64_t columns =
        std::max<int64_t>(1, out().numel() / std::max<int64_t>(len, 1));
    int64_t runs = std::clamp<int64_t>((kScatterUnits + columns - 1) / columns,
                                       1, std::max<int64_t>(len, 1));
    return std::max<int64_t>(1, (len + runs - 1) / runs);
  }

  LogicalResult emitScatterAdd() {
    size_t axis = size_t(step.attrs.getInt("axis"));
    int64_t len = out().shape[axis];
    int64_t rowsPerUnit = scatterRowsPerUnit();
    int64_t runs = (len + rowsPerUnit - 1) / rowsPerUnit;
    SmallVector<Value> os = sizes(out());
    Value outer = product(ArrayRef<Value>(os).take_front(axis));
    Value inner = product(ArrayRef<Value>(os).drop_front(axis + 1));
    Value count = product(sizes(tensors[1])); // the indices
    Value lenV = idx(len);
    Value runsV = idx(runs);
    Value units = arith::MulIOp::create(
        b, loc, arith::MulIOp::create(b, loc, outer, runsV), inner);
    size_t outArg = tensors.size() - 1;
    Type i64 = b.getI64Type();
    gridStride(units, [&](Value u) {
      Value j = arith::RemUIOp::create(b, loc, u, inner);
      Value t = arith::DivUIOp::create(b, loc, u, inner);
      Value run = arith::RemUIOp::create(b, loc, t, runsV);
      Value o = arith::DivUIOp::create(b, loc, t, runsV);
      Value first = arith::MulIOp::create(b, loc, run, idx(rowsPerUnit));
      Value end = arith::MinUIOp::create(
          b, loc, arith::AddIOp::create(b, loc, first, idx(rowsPerUnit)), lenV);
      // out[o, r, j] is at (o * len + r) * inner + j.
      Value outBase = arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, arith::MulIOp::create(b, loc, o, lenV),
                                inner),
          j);
      Value updBase = arith::AddIOp::create(
          b, loc,
          arith::MulIOp::create(b, loc, arith::MulIOp::create(b, loc, o, count),
                                inner),
          j);
      Value zero = constantOf(DType::F32, 0.0);
      loop(first, end, idx(1), [&](Value r) {
        store(zero,
              arith::AddIOp::create(b, loc, outBase,
                                    arith::MulIOp::create(b, loc, r, inner)));
      });
      Value from0 = idx(0);
      loop(from0, count, idx(1), [&](Value k) {
        Value raw = load(1, k);
        Value k64 = raw.getType().isInteger(64)
                        ? raw
                        : Value(arith::ExtSIOp::create(b, loc, i64, raw));
        // k in [-len, len) <=> (u64)(k + len) < 2 * len, checked in i64
        // before the (maybe 32-bit) index cast, as gather's; the row is
        // k + len, less len where that is >= len. An index out of range
        // lands in no unit's run, and is an error where the graph computes
        // the indices.
        Value shifted = arith::AddIOp::create(b, loc, k64, intConst(i64, len));
        Value inRange =
            cmpi(arith::CmpIPredicate::ult, shifted, intConst(i64, 2 * len));
        if (record) {
          Value bad = arith::XOrIOp::create(b, loc, inRange,
                                            intConst(b.getI1Type(), 1));
          reportError(bad, k, k64);
        }
        Value high =
            cmpi(arith::CmpIPredicate::uge, shifted, intConst(i64, len));
        Value lowered =
            arith::SubIOp::create(b, loc, shifted, intConst(i64, len));
        Value r64 = select(high, lowered, shifted);
        Value safe = select(inRange, r64, intConst(i64, 0));
        Value row = arith::IndexCastOp::create(b, loc, b.getIndexType(), safe);
        Value fromFirst = cmpi(arith::CmpIPredicate::sge, row, first);
        Value beforeEnd = cmpi(arith::CmpIPredicate::slt, row, end);
        Value inRun = arith::AndIOp::create(b, loc, fromFirst, beforeEnd);
        Value mine = arith::AndIOp::create(b, loc, inRange, inRun);
        auto ifOp = scf::IfOp::create(b, loc, mine);
        OpBuilder::InsertionGuard g(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value at = arith::AddIOp::create(
            b, loc, outBase, arith::MulIOp::create(b, loc, row, inner));
        Value from = arith::AddIOp::create(
            b, loc, updBase, arith::MulIOp::create(b, loc, k, inner));
        Value sum = load(outArg, at);
        Value update = load(0, from);
        store(addf(sum, update), at);
      });
    });
    return success();
  }

  LogicalResult emitReduce() {
    const TensorDesc x = reducedTensor();
    std::vector<int64_t> dims = reduceAttrs().getInts("dims");
    OpId op = reduceOp();
    SmallVector<Value> s = sizes(x);
    SmallVector<Value> st = strides(s);
    SmallVector<Value> kept, keptSt, red, redSt;
    for (size_t d = 0; d < s.size(); ++d) {
      bool reduced = llvm::is_contained(dims, int64_t(d));
      (reduced ? red : kept).push_back(s[d]);
      (reduced ? redSt : keptSt).push_back(st[d]);
    }
    Value n = product(kept);
    Value count = product(red);
    Type ct = computeType(x.dtype);
    std::function<Value(Value)> element = reducedElement(s, x.numel());
    gridStride(n, [&](Value o) {
      SmallVector<Value> oi = delinearize(o, kept);
      Value base = linearize(oi, keptSt);
      Value lo = idx(0);
      Value one = idx(1);
      Value acc = loopAcc(lo, count, one, reduceInit(op, ct),
                          [&](Value j, Value a) -> Value {
        Value flat = arith::AddIOp::create(b,
            loc, base, linearize(delinearize(j, red), redSt));
        return reduceStep(op, ct, a, element(flat));
      });
      if (op == OpId::ReduceMean)
        acc = meanOf(acc, count);
      store(acc, o);
    });
    return success();
  }

  /// Softmax over a dim other than the last with few (outer, inner)
  /// pairs and a long axis: a softmax over dim 0 of [T, 8] (attention
  /// pooling, sequence first) was 8 threads, each walking T elements
  /// three times, one load after another.
  static constexpr int64_t kFewSoftmaxUnits = 1024, kLongSoftmaxAxis = 256;
  bool softmaxAxisByBlocks() {
    int64_t len = out().shape[size_t(step.attrs.getInt("axis"))];
    return len >= kLongSoftmaxAxis &&
           out().numel() / std::max<int64_t>(len, 1) < kFewSoftmaxUnits;
  }

  /// Then one block per pair: its threads share the axis (elements
  /// `inner` apart), reduce as a row kernel does, and write.
  LogicalResult emitSoftmaxAxisBlocks() {
    SmallVector<Value> s = sizes(out());
    size_t axis = size_t(step.attrs.getInt("axis"));
    rowLength = out().shape[axis];
    Value outer = product(ArrayRef<Value>(s).take_front(axis));
    Value inner = product(ArrayRef<Value>(s).drop_front(axis + 1));
    Value len = s[axis];
    Value smem = sharedBuffer(MemRefType::get(
        {64}, b.getF32Type(), AffineMap(), b.getI64IntegerAttr(3)));
    Value units = arith::MulIOp::create(b, loc, outer, inner);
    Value bid = blockId();
    Value gdim = gridDim();
    loop(bid, units, gdim, [&](Value u) {
      std::function<Value(Value)> at = axisElement(u, inner, len);
      Value m = rowReduce(gpu::AllReduceOperation::MAXNUMF, len, smem,
                          [&](Value j) { return load(0, at(j)); });
      Value sum = rowReduce(gpu::AllReduceOperation::ADD, len, smem,
                            [&](Value j) {
                              return expf(subf(load(0, at(j)), m));
                            });
      Value tid = threadId();
      Value bdim = blockDim();
      writeSoftmax(tid, len, bdim, at, m, sum);
    });
    return success();
  }

  /// Element j of pair u's axis in a softmax over a middle dim:
  /// (u / inner) * len * inner + u % inner + j * inner.
  std::function<Value(Value)> axisElement(Value u, Value inner, Value len) {
    Value o = arith::DivUIOp::create(b, loc, u, inner);
    Value in = arith::RemUIOp::create(b, loc, u, inner);
    Value base = arith::AddIOp::create(
        b, loc,
        arith::MulIOp::create(b, loc, arith::MulIOp::create(b, loc, o, len),
                              inner),
        in);
    return [this, base, inner](Value j) -> Value {
      return arith::AddIOp::create(b, loc, base,
                                   arith::MulIOp::create(b, loc, j, inner));
    };
  }

  /// A softmax's last pass over elements from, from + stride, ... < len:
  /// x - max - log(sum) (log_softmax) or exp(x - max) / sum, stored.
  void writeSoftmax(Value from, Value len, Value stride,
                    const std::function<Value(Value)>& at, Value m,
                    Value sum) {
    bool log = step.op == OpId::LogSoftmax;
    Value lse = log ? Value(math::LogOp::create(b, loc, sum)) : Value();
    loop(from, len, stride, [&](Value j) {
      Value d = subf(load(0, at(j)), m);
      Value y = log ? subf(d, lse) : divf(expf(d), sum);
      Value dst = at(j);
      store(y, dst);
    });
  }

  /// Softmax over a dim other than the last: one thread per (outer,
  /// inner) pair walks the axis three times (max, sum, write).
  LogicalResult emitSoftmaxAxis() {
    SmallVector<Value> s = sizes(out());
    size_t axis = size_t(step.attrs.getInt("axis"));
    Value outer = product(ArrayRef<Value>(s).take_front(axis));
    Value inner = product(ArrayRef<Value>(s).drop_front(axis + 1));
    Value len = s[axis];
    gridStride(arith::MulIOp::create(b, loc, outer, inner), [&](Value u) {
      std::function<Value(Value)> at = axisElement(u, inner, len);
      Value lo = idx(0);
      Value one = idx(1);
      Value minusInf = f32(-std::numeric_limits<float>::infinity());
      Value m = loopAcc(lo, len, one, minusInf, [&](Value j, Value a) {
        return arith::MaxNumFOp::create(b, loc, a, load(0, at(j)));
      });
      Value lo2 = idx(0);
      Value one2 = idx(1);
      Value zero = f32(0);
      Value sum = loopAcc(lo2, len, one2, zero, [&](Value j, Value a) {
        return addf(a, expf(subf(load(0, at(j)), m)));
      });
      Value lo3 = idx(0);
      Value one3 = idx(1);
      writeSoftmax(lo3, len, one3, at, m, sum);
    });
    return success();
  }

  //===--- pooling ---===//

  LogicalResult emitPool() {
    const TensorDesc& x = tensors[0];
    std::vector<int64_t> k = step.attrs.getInts("kernel"),
                         st = step.attrs.getInts("strides"),
                         pad = step.attrs.getInts("padding"),
                         dil = step.attrs.getInts("dilation");
    if (dil.empty())
      dil = {1, 1};
    bool isMax = step.op == OpId::MaxPool2d;
    bool includePad = step.attrs.getBool("count_include_pad");
    // NCHW, or NHWC (channels_last): then neighbouring threads take
    // neighbouring channels, and their loads are adjacent.
    bool last = step.attrs.getBool("channels_last");
    const int hDim = last ? 1 : 2, wDim = last ? 2 : 3;
    SmallVector<Value> os = sizes(out());
    SmallVector<Value> is = sizes(x);
    Value n = product(os);
    int64_t H = x.shape[hDim], W = x.shape[wDim];
    gridStride(n, [&](Value i) {
      SmallVector<Value> oi = delinearize(i, os);
      // The input element (n, c, h, w) is at plane + (h * W + w) * pixel.
      Value plane, pixel;
      if (last) {
        plane = arith::AddIOp::create(
            b, loc,
            arith::MulIOp::create(b, loc, oi[0],
                                  product({is[1], is[2], is[3]})),
            oi[3]);
        pixel = is[3];
      } else {
        Value nc = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, oi[0], is[1]), oi[1]);
        plane = arith::MulIOp::create(b, loc, nc, idx(H * W));
        pixel = idx(1);
      }
      Value hs = arith::MulIOp::create(b, loc, oi[hDim], idx(st[0]));
      Value h0 = arith::SubIOp::create(b, loc, hs, idx(pad[0]));
      Value ws = arith::MulIOp::create(b, loc, oi[wDim], idx(st[1]));
      Value w0 = arith::SubIOp::create(b, loc, ws, idx(pad[1]));
      Value acc = isMax ? f32(-std::numeric_limits<float>::infinity()) : f32(0);
      Value cnt = f32(0), padCnt = f32(0);
      // The window, unrolled (kernels are small).
      for (int64_t kh = 0; kh < k[0]; ++kh)
        for (int64_t kw = 0; kw < k[1]; ++kw) {
          Value h = arith::AddIOp::create(b, loc, h0, idx(kh * dil[0]));
          Value w = arith::AddIOp::create(b, loc, w0, idx(kw * dil[1]));
          Value hLow = cmpi(arith::CmpIPredicate::sge, h, idx(0));
          Value hHigh = cmpi(arith::CmpIPredicate::slt, h, idx(H));
          Value inH = arith::AndIOp::create(b, loc, hLow, hHigh);
          Value wLow = cmpi(arith::CmpIPredicate::sge, w, idx(0));
          Value wHigh = cmpi(arith::CmpIPredicate::slt, w, idx(W));
          Value inW = arith::AndIOp::create(b, loc, wLow, wHigh);
          Value inside = arith::AndIOp::create(b, loc, inH, inW);
          // Inside the padded input (PyTorch's count_include_pad divisor).
          Value hPad = cmpi(arith::CmpIPredicate::slt, h, idx(H + pad[2]));
          Value wPad = cmpi(arith::CmpIPredicate::slt, w, idx(W + pad[3]));
          Value bothPad = arith::AndIOp::create(b, loc, hPad, wPad);
          Value inPad = arith::AndIOp::create(b, loc, bothPad,
                                              intConst(b.getI1Type(), 1));
          Value hSafe = select(inside, h, idx(0));
          Value width = idx(W);
          Value rowStart = arith::MulIOp::create(b, loc, hSafe, width);
          Value wSafe = select(inside, w, idx(0));
          Value inPlane = arith::MulIOp::create(
              b, loc, arith::AddIOp::create(b, loc, rowStart, wSafe), pixel);
          Value flat = arith::AddIOp::create(b, loc, plane, inPlane);
          Value v = load(0, flat);
          if (isMax) {
            Value nan = isNan(v);
            Value greater = cmpf(arith::CmpFPredicate::OGT, v, acc);
            Value better = arith::OrIOp::create(b, loc, nan, greater);
            Value take = arith::AndIOp::create(b, loc, inside, better);
            acc = select(take, v, acc);
          } else {
            acc = select(inside, addf(acc, v), acc);
            cnt = select(inside, addf(cnt, f32(1)), cnt);
            padCnt = select(inPad, addf(padCnt, f32(1)), padCnt);
          }
        }
      if (!isMax)
        acc = divf(acc, includePad ? padCnt : cnt);
      store(acc, i);
    });
    return success();
  }
};

} // namespace

/// Whether buffer B is a graph input (or a view of one) that no step
/// writes: its values at every step are the ones Session::setInput took.
bool isUnwrittenInput(const Plan& plan, uint32_t b) {
  auto root = [&](uint32_t x) {
    int64_t a = plan.buffers[x].aliasOf;
    return a >= 0 ? uint32_t(a) : x;
  };
  uint32_t r = root(b);
  // A view of the same bytes and dtype (a reshape): what the runtime's
  // recognizer takes as the input's own buffer.
  if (plan.buffers[b].dtype != plan.buffers[r].dtype ||
      plan.buffers[b].byteSize() != plan.buffers[r].byteSize())
    return false;
  bool input = false;
  for (const PlanSignature& in : plan.inputs)
    input |= root(in.buffer) == r;
  if (!input)
    return false;
  for (const PlanStep& step : plan.steps)
    for (uint32_t o : step.outputs)
      if (root(o) == r)
        return false;
  return true;
}

namespace {

/// "index 7 out of range for a dim of 5" for the first value of constant
/// indices outside [-dim, dim); "" when all are inside or the indices are
/// not a constant (a graph input is checked when set, computed ones by the
/// kernel's error record: needsErrorRecord).
std::string constantIndexOutOfRange(const PlanBuffer& ind, int64_t dim) {
  if (ind.kind != fb::BufferKind::Constant)
    return "";
  size_t width = ind.dtype == DType::I64 ? 8 : 4;
  for (size_t o = 0; o + width <= ind.data.size(); o += width) {
    int64_t v = 0;
    if (width == 8) {
      std::memcpy(&v, ind.data.data() + o, 8);
    } else {
      int32_t w;
      std::memcpy(&w, ind.data.data() + o, 4);
      v = w;
    }
    if (v < -dim || v >= dim)
      return "index " + std::to_string(v) + " out of range for a dim of " +
             std::to_string(dim);
  }
  return "";
}

} // namespace

KernelKind classifyStep(const Plan& plan, const PlanStep& step,
                        const KernelFlavor& flavor, std::string* whyNot) {
  whyNot->clear();
  auto refuse = [&](const std::string& why) {
    *whyNot = why;
    return KernelKind::None;
  };
  const PlanBuffer& outBuf = plan.buffers[step.outputs[0]];
  TensorDesc out = describe(plan, step.outputs[0]);
  if (plan.batch.dynamic() && scaledDims(out) > 1)
    return refuse("its output scales with the batch in more than one dim");
  // The device's library kernels: matmul and conv2d, and the regions they
  // lead (cuBLASLt's and cuDNN's epilogues; the target split every other
  // anchor region).
  auto isAnchor = [](OpId op) {
    return op == OpId::Matmul || op == OpId::Conv2d;
  };
  if (isAnchor(step.op) || (step.op == OpId::Fused && !step.body.empty() &&
                            isAnchor(step.body[0].op)))
    return KernelKind::None;
  // The data-parallel all-reduce pair: the device's own kernels (a copy
  // into the bucket and NCCL; the scale after it).
  if (step.op == OpId::AllReduceStart || step.op == OpId::AllReduceWait)
    return KernelKind::None;
  auto checkTypes = [&](const std::vector<PlanRegionOp>& body) {
    for (const PlanRegionOp& op : body)
      if (floatOnly(op.op) && !isFloat(op.dtype))
        return "mc." + std::string(rt::opName(op.op)) + " on " +
               rt::dtypeName(op.dtype) + " (only floats here)";
    return std::string();
  };
  switch (step.op) {
  case OpId::Fused: {
    // An attention region the target kept is cuDNN's fused attention
    // (the device's library step); the target expanded the others.
    if (step.attrs.getBool("attention"))
      return KernelKind::None;
    for (size_t j = 0; j < step.body.size(); ++j) {
      const PlanRegionOp& op = step.body[j];
      bool lastReduction =
          j + 1 == step.body.size() && rt::isReduction(op.op) && j > 0;
      bool view = rt::shapes::isViewOp(op.op) && j + 1 < step.body.size();
      if (!isElementwiseOp(op.op) && !lastReduction && !view)
        return refuse("region op mc." + std::string(rt::opName(op.op)) +
                      " (only elementwise regions, optionally ending in a "
                      "reduction, get one kernel)");
    }
    std::string why = checkTypes(step.body);
    if (!why.empty())
      return refuse(why);
    const PlanRegionOp& last = step.body.back();
    if (!rt::isReduction(last.op))
      return KernelKind::Elementwise;
    // The reduced value: the op before the reduction.
    uint32_t v = last.operands[0];
    if (v < step.inputs.size())
      return refuse("a region reducing one of its inputs");
    const PlanRegionOp& pre = step.body[v - step.inputs.size()];
    if (!isFloat(pre.dtype))
      return refuse("a region reducing integers");
    int64_t rank = int64_t(pre.shape.size());
    int64_t first = trailingStart(last.attrs.getInts("dims"), rank);
    int64_t cols = 1;
    for (int64_t d = std::max<int64_t>(first, 0); d < rank && first >= 0; ++d)
      cols *= pre.shape[d];
    return first >= 0 && cols >= 32 ? KernelKind::Rows : KernelKind::Reduce;
  }
  case OpId::Gather: {
    // Indices known at compile time are checked in range here; a graph
    // input's values are checked by Session::setInput before any step runs
    // (rt::gatherIndexInputs: the input or a view of it, written by no
    // step); computed ones by the kernel, through its error record. The
    // kernel clamps besides, so it never reads outside the data.
    const PlanBuffer& ind = plan.buffers[step.inputs[1]];
    const PlanBuffer& data = plan.buffers[step.inputs[0]];
    int64_t axis = step.attrs.getInt("axis");
    if (data.batchScale.size() > size_t(axis) && data.batchScale[axis] > 0)
      return refuse("gather along the batch dim");
    // Indices the graph computes: the kernel reports one out of range
    // through its error record (needsErrorRecord).
    std::string bad = constantIndexOutOfRange(ind, data.shape[axis]);
    return bad.empty() ? KernelKind::Index : refuse("gather " + bad);
  }
  case OpId::Transpose:
  case OpId::Slice:
  case OpId::Pad:
  case OpId::Concat:
    return KernelKind::Index;
  case OpId::ScatterAdd: {
    // Indices as gather's: constants checked here, a graph input when it is
    // set (rt::gatherIndexInputs), computed ones by the kernel's record.
    const PlanBuffer& ind = plan.buffers[step.inputs[1]];
    int64_t axis = step.attrs.getInt("axis");
    if (outBuf.dtype != DType::F32)
      return refuse("scatter_add of " +
                    std::string(rt::dtypeName(outBuf.dtype)));
    if (outBuf.batchScale.size() > size_t(axis) && outBuf.batchScale[axis] > 0)
      return refuse("scatter_add along the batch dim");
    std::string bad = constantIndexOutOfRange(ind, outBuf.shape[size_t(axis)]);
    return bad.empty() ? KernelKind::Scatter : refuse("scatter_add " + bad);
  }
  case OpId::Softmax:
  case OpId::LogSoftmax: {
    int64_t rank = int64_t(plan.buffers[step.inputs[0]].shape.size());
    if (!isFloat(outBuf.dtype))
      return refuse("softmax of integers");
    std::string why = checkTypes(bodyOf(plan, step));
    if (!why.empty())
      return refuse(why);
    return step.attrs.getInt("axis") == rank - 1 ? KernelKind::Rows
                                                  : KernelKind::Reduce;
  }
  case OpId::BatchNorm: {
    if (!isFloat(outBuf.dtype))
      return refuse("batch_norm of integers");
    std::string why = checkTypes(bodyOf(plan, step));
    return why.empty() ? KernelKind::Elementwise : refuse(why);
  }
  case OpId::LayerNorm: {
    std::string why = checkTypes(bodyOf(plan, step));
    return why.empty() ? KernelKind::Rows : refuse(why);
  }
  case OpId::ReduceSum:
  case OpId::ReduceMean:
  case OpId::ReduceMax:
  case OpId::ReduceMin: {
    const PlanBuffer& in = plan.buffers[step.inputs[0]];
    if (!isFloat(in.dtype) && (step.op == OpId::ReduceSum ||
                               step.op == OpId::ReduceMean))
      return refuse("integer sums");
    int64_t rank = int64_t(in.shape.size());
    int64_t first = trailingStart(step.attrs.getInts("dims"), rank);
    bool rows = first >= 0 && isFloat(in.dtype);
    // A row kernel needs the rows to be long enough to share out.
    int64_t cols = 1;
    for (int64_t d = std::max<int64_t>(first, 0); d < rank && rows; ++d)
      cols *= in.shape[d];
    return rows && cols >= 32 ? KernelKind::Rows : KernelKind::Reduce;
  }
  case OpId::MaxPool2d:
  case OpId::AvgPool2d: {
    if (!isFloat(outBuf.dtype))
      return refuse("pooling of " + std::string(rt::dtypeName(outBuf.dtype)));
    if (step.attrs.getInts("kernel").size() != 2)
      return refuse("pooling without a 2-d kernel");
    return KernelKind::Pool;
  }
  default:
    break;
  }
  if (isElementwiseOp(step.op)) {
    std::string why = checkTypes(bodyOf(plan, step));
    return why.empty() ? KernelKind::Elementwise : refuse(why);
  }
  return refuse("the cuda target has no kernel for mc." +
                std::string(rt::opName(step.op)));
}

FailureOr<rt::LaunchInfo> emitKernel(gpu::GPUModuleOp module, const Plan& plan,
                                     const PlanStep& step, StringRef name,
                                     const KernelFlavor& flavor) {
  std::string why;
  KernelKind kind = classifyStep(plan, step, flavor, &why);
  if (kind == KernelKind::None)
    return module.emitError() << "no kernel for step '" << name << "': "
                              << (why.empty() ? "a library step" : why);
  Emitter e(module, plan, step, flavor);
  return e.emit(name, kind);
}

void loadKernelDialects(MLIRContext& context) {
  context.loadDialect<arith::ArithDialect, gpu::GPUDialect, math::MathDialect,
                      memref::MemRefDialect, scf::SCFDialect,
                      spirv::SPIRVDialect>();
}

} // namespace mc::codegen::cuda

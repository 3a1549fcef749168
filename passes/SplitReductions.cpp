// mc-split-reductions: a reduction of many elements into few outputs
// becomes two reductions, the first with many outputs (rules in
// Passes.td). For targets whose reduction kernels give each output one
// block or one thread (cuda).
#include "ir/Batch.h"
#include "ir/MCDialect.h"
#include "ir/RegistryOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <cmath>
#include <deque>
#include <optional>

namespace mc {
#define GEN_PASS_DEF_SPLITREDUCTIONSPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

/// How one reduction splits: the input, reshaped first when `reshapeDim`
/// is set (that dim of size L becomes [L / k, k]); then a reduction over
/// `inner` (dims of the reshaped input, trailing or not), then one over
/// `outer` (dims of the first one's result).
struct Split {
  std::optional<int64_t> reshapeDim;
  int64_t k = 0;
  SmallVector<int64_t> inner, outer;
};

/// The divisors of `n` in [2, n / 2], ascending: trial division up to
/// sqrt(n), so a dim of 2^40 costs a million steps, not 2^39.
SmallVector<int64_t> properDivisors(int64_t n) {
  SmallVector<int64_t> low, high;
  for (int64_t c = 2; c <= n / c; ++c)
    if (n % c == 0) {
      low.push_back(c);
      if (c != n / c)
        high.push_back(n / c);
    }
  low.append(high.rbegin(), high.rend());
  return low;
}

class Splitter {
public:
  Splitter(int64_t maxOutputs, int64_t minReduced, int64_t inner,
           int64_t batchOpt)
      : maxOutputs(maxOutputs), minReduced(minReduced), innerTarget(inner),
        batchOpt(batchOpt) {}

  /// The split of a reduction of a value of symbolic shape `shape` (a
  /// negative dim is -c: c times the batch) over `dims`; nullopt to leave
  /// it.
  std::optional<Split> plan(ArrayRef<int64_t> shape,
                            ArrayRef<int64_t> dimsIn) const {
    SmallVector<int64_t> dims(dimsIn);
    llvm::sort(dims);
    int64_t rank = static_cast<int64_t>(shape.size());
    if (dims.empty())
      return std::nullopt;
    int64_t outputs = 1, reduced = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (llvm::is_contained(dims, d))
        reduced = mul(reduced, size(shape[d]));
      else if (shape[d] < 0)
        return std::nullopt; // scales with the batch: many outputs
      else
        outputs = mul(outputs, shape[d]);
    }
    if (outputs > maxOutputs)
      return std::nullopt;
    // The trailing run: dims [rank - t, rank) all reduced.
    size_t t = 0;
    while (t < dims.size() &&
           dims[dims.size() - 1 - t] == rank - 1 - static_cast<int64_t>(t))
      ++t;
    SmallVector<int64_t> run(dims.end() - t, dims.end());
    SmallVector<int64_t> rest(dims.begin(), dims.end() - t);
    auto count = [&](ArrayRef<int64_t> ds) {
      int64_t n = 1;
      for (int64_t d : ds)
        n = mul(n, size(shape[d]));
      return n;
    };

    if (t > 0 && !rest.empty()) {
      // Rows first, then the leading dims: a batch norm's [0, 2, 3].
      if (reduced < minReduced || count(run) < 32 || count(rest) < 2)
        return std::nullopt;
      return Split{std::nullopt, 0, run, rest};
    }

    if (t > 0) {
      // One row per output (a full reduction is one row).
      if (reduced < minReduced)
        return std::nullopt;
      // The smallest trailing part of at least `inner` elements, else the
      // largest proper part of 32 or more; both parts more than one.
      std::optional<size_t> pick;
      for (size_t j = run.size() - 1; j >= 1; --j) {
        int64_t in = count(ArrayRef<int64_t>(run).drop_front(j));
        int64_t out = count(ArrayRef<int64_t>(run).take_front(j));
        if (in < 2 || out < 2)
          continue;
        if (in >= innerTarget) {
          pick = j;
          break;
        }
        if (in >= 32)
          pick = j; // the largest proper part so far (j falls)
      }
      if (pick && count(ArrayRef<int64_t>(run).drop_front(*pick)) >= 32)
        return Split{std::nullopt, 0,
                     SmallVector<int64_t>(run.begin() + *pick, run.end()),
                     SmallVector<int64_t>(run.begin(), run.begin() + *pick)};
      // No dims boundary does: reshape the largest static reduced dim.
      std::optional<int64_t> dim = largestStatic(shape, run);
      if (!dim)
        return std::nullopt;
      int64_t after = 1;
      for (int64_t d = *dim + 1; d < rank; ++d)
        after = mul(after, size(shape[d]));
      int64_t k = 0;
      for (int64_t c : properDivisors(shape[*dim]))
        if (mul(c, after) >= innerTarget) {
          k = c;
          break;
        }
      if (k == 0)
        return std::nullopt;
      Split s{*dim, k, {}, {}};
      // In the reshaped input: dims up to `dim` keep their numbers, the k
      // part is dim + 1, later dims move up one.
      for (int64_t d : run) {
        if (d < *dim)
          s.outer.push_back(d);
        else if (d == *dim)
          s.outer.push_back(d), s.inner.push_back(d + 1);
        else
          s.inner.push_back(d + 1);
      }
      return s;
    }

    // The last dim is kept: one thread per output walks `reduced`
    // elements, one after another.
    if (reduced < 1024)
      return std::nullopt;
    std::optional<int64_t> dim = largestStatic(shape, dims);
    if (!dim)
      return std::nullopt;
    double root = std::sqrt(static_cast<double>(shape[*dim]));
    int64_t k = 0;
    for (int64_t c : properDivisors(shape[*dim]))
      if (k == 0 || std::abs(c - root) < std::abs(k - root))
        k = c;
    if (k == 0)
      return std::nullopt;
    // First over the k part (dim + 1 of the reshaped input); its result
    // has the input's dims again, `dim` now of size L / k.
    return Split{*dim, k, {*dim + 1}, dims};
  }

private:
  int64_t size(int64_t d) const { return d < 0 ? mul(-d, batchOpt) : d; }
  /// Products of sizes, saturated: a type may hold more than 2^63.
  static int64_t mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
  }
  /// The dim to reshape to [L / k, k]: the largest static one of `dims`;
  /// none when the shape holds the batch more than once (a reshape's
  /// shapes hold it at most once).
  static std::optional<int64_t> largestStatic(ArrayRef<int64_t> shape,
                                              ArrayRef<int64_t> dims) {
    if (llvm::count_if(shape, [](int64_t d) { return d < 0; }) > 1)
      return std::nullopt;
    std::optional<int64_t> best;
    for (int64_t d : dims)
      if (shape[d] >= 4 && (!best || shape[d] > shape[*best]))
        best = d;
    return best;
  }

  int64_t maxOutputs, minReduced, innerTarget, batchOpt;
};

/// The shape of a reduction's result without keepdim.
SmallVector<int64_t> reducedShape(ArrayRef<int64_t> shape,
                                  ArrayRef<int64_t> dims) {
  SmallVector<int64_t> out;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (!llvm::is_contained(dims, d))
      out.push_back(shape[d]);
  return out;
}

template <typename OpT>
Value createReduce(OpBuilder& b, Location loc, Value input,
                   ArrayRef<int64_t> dims) {
  auto element = llvm::cast<RankedTensorType>(input.getType()).getElementType();
  RankedTensorType type = mc::symbolicType(
      reducedShape(mc::symbolicShape(input.getType()), dims), element);
  SmallVector<int64_t> sorted(dims);
  llvm::sort(sorted);
  return OpT::create(b, loc, type, input, b.getDenseI64ArrayAttr(sorted),
                     /*keepdim=*/nullptr);
}

struct SplitReductionsPass
    : public mc::impl::SplitReductionsPassBase<SplitReductionsPass> {
  using SplitReductionsPassBase::SplitReductionsPassBase;

  void runOnOperation() override {
    if (maxOutputs < 1 || minReduced < 2 || inner < 2) {
      getOperation().emitError()
          << "mc-split-reductions: max-outputs must be at least 1, "
             "min-reduced and inner at least 2";
      return signalPassFailure();
    }
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(getOperation(), entry));
    if (!fn)
      return signalPassFailure();
    int64_t opt = 1;
    if (auto bounds = mc::getBatchBounds(fn))
      opt = bounds->opt;
    Splitter splitter(maxOutputs, minReduced, inner, opt);
    std::deque<Operation*> work;
    // The function's own ops: a reduction inside an mc.fused region ends
    // it and stays (a region already made, by an earlier mc-fuse).
    for (Operation& op : fn.getBody().front())
      if (isa<mc::ReduceSumOp, mc::ReduceMeanOp, mc::ReduceMaxOp,
              mc::ReduceMinOp>(op))
        work.push_back(&op);
    while (!work.empty()) {
      Operation* op = work.front();
      work.pop_front();
      if (auto r = dyn_cast<mc::ReduceSumOp>(op))
        split(r, splitter, work);
      else if (auto r = dyn_cast<mc::ReduceMeanOp>(op))
        split(r, splitter, work);
      else if (auto r = dyn_cast<mc::ReduceMaxOp>(op))
        split(r, splitter, work);
      else if (auto r = dyn_cast<mc::ReduceMinOp>(op))
        split(r, splitter, work);
    }
  }

  template <typename OpT>
  void split(OpT op, const Splitter& splitter, std::deque<Operation*>& work) {
    Value x = op.getInput();
    SmallVector<int64_t> shape = mc::symbolicShape(x.getType());
    std::optional<Split> s = splitter.plan(shape, op.getDims());
    if (!s)
      return;
    OpBuilder b(op);
    Location loc = op.getLoc();
    auto type = llvm::cast<RankedTensorType>(x.getType());
    Type element = type.getElementType();
    // Sums of f16 and bf16 add their partials in f32.
    constexpr bool sums =
        std::is_same_v<OpT, mc::ReduceSumOp> ||
        std::is_same_v<OpT, mc::ReduceMeanOp>;
    bool widen = sums && (element.isF16() || element.isBF16());
    if (widen)
      x = mc::CastOp::create(
          b, loc, mc::symbolicType(shape, b.getF32Type()), x);
    Type compute = widen ? Type(b.getF32Type()) : element;
    if (s->reshapeDim) {
      SmallVector<int64_t> reshaped(shape);
      int64_t d = *s->reshapeDim;
      reshaped[d] = shape[d] / s->k;
      reshaped.insert(reshaped.begin() + d + 1, s->k);
      x = mc::ReshapeOp::create(b, loc, mc::symbolicType(reshaped, compute),
                                x);
    }
    Value first = createReduce<OpT>(b, loc, x, s->inner);
    Value second = createReduce<OpT>(b, loc, first, s->outer);
    Value result = second;
    if (widen)
      result = mc::CastOp::create(
          b, loc,
          mc::symbolicType(mc::symbolicShape(second.getType()), element),
          result);
    if (result.getType() != op.getType()) // keepdim
      result = mc::ReshapeOp::create(b, loc, op.getType(), result);
    op.getResult().replaceAllUsesWith(result);
    op.erase();
    work.push_back(first.getDefiningOp());
    work.push_back(second.getDefiningOp());
  }
};

} // namespace

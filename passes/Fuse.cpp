// mc-fuse: producer-consumer chains of elementwise ops, and the epilogue of
// a matmul or conv2d, grouped into mc.fused regions (rules in Passes.td).
#include "passes/Passes.h"
#include "ir/RegistryOps.h"
#include "modelc/shapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <optional>
#include <queue>

namespace mc {
#define GEN_PASS_DEF_FUSEPASS
#include "passes/Passes.h.inc"
} // namespace mc

using namespace mlir;

namespace {

/// The registry entry of an mc op; null for anything else.
const mc::rt::OpInfo* registryInfo(Operation* op) {
  mc::rt::OpId id;
  if (!llvm::isa<mc::MCDialect>(op->getDialect()) ||
      !mc::rt::findOp(op->getName().getStringRef(), &id))
    return nullptr;
  return &mc::rt::opInfo(id);
}

bool fusibleElementType(Type t) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(t);
  if (!tensor)
    return false;
  Type e = tensor.getElementType();
  return e.isF32() || e.isF16() || e.isBF16() || e.isInteger(1);
}

/// Whether every operand and result of `op` has an element type fused
/// regions compute in.
bool fusibleTypes(Operation* op) {
  for (Type t : op->getOperandTypes())
    if (!fusibleElementType(t))
      return false;
  for (Type t : op->getResultTypes())
    if (!fusibleElementType(t))
      return false;
  return true;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return llvm::cast<RankedTensorType>(v.getType()).getShape();
}

bool isElementwise(Operation* op) {
  const mc::rt::OpInfo* info = registryInfo(op);
  return info && info->fusible && !llvm::isa<mc::BroadcastInDimOp>(op) &&
         op->getNumResults() == 1 && fusibleTypes(op);
}

bool isAnchor(Operation* op) {
  const mc::rt::OpInfo* info = registryInfo(op);
  return info && info->epilogueAnchor && op->getNumResults() == 1 &&
         fusibleTypes(op);
}

/// A reduction over the trailing dims of its operand (keepdim or not): it
/// may end a region, the region computing its operand tile by tile of
/// whole rows; unless it reduces everything to one value over more than
/// `maxFull` elements (a loss's mean over a batch of images, 9.6M): that
/// one row would be one tile, which leaves the cache and all threads but
/// one idle, so the elementwise ops fuse without it and it runs as its own
/// step (mc-fuse's max-full-reduction; a dynamic dim counts as fitting).
/// mc-split-reductions, before fusion, splits such reductions where it
/// can: what is left here is one it could not (a prime length).
bool isTrailingReduce(Operation* op, int64_t maxFull) {
  const mc::rt::OpInfo* info = registryInfo(op);
  if (!info || !mc::rt::isReduction(info->id) || !fusibleTypes(op))
    return false;
  auto in = llvm::cast<RankedTensorType>(op->getOperand(0).getType());
  auto dims = llvm::cast<DenseI64ArrayAttr>(op->getAttr("dims")).asArrayRef();
  SmallVector<int64_t> sorted(dims.begin(), dims.end());
  llvm::sort(sorted);
  if (sorted.empty())
    return false;
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != in.getRank() - int64_t(sorted.size()) + int64_t(i))
      return false;
  // Leading dims kept: more than one row (or a dynamic batch of them).
  if (in.getRank() > int64_t(sorted.size()))
    return true;
  int64_t n = 1;
  for (int64_t d : in.getShape()) {
    if (ShapedType::isDynamic(d))
      return true;
    if (d > 0 && n > maxFull / d)
      return false;
    n *= d;
  }
  return true;
}

bool isSplatConstant(Operation* op) {
  auto c = llvm::dyn_cast<mc::ConstantOp>(op);
  if (!c)
    return false;
  auto dense = llvm::dyn_cast<DenseElementsAttr>(c.getValue());
  return dense && dense.isSplat();
}

struct Group {
  Operation* root = nullptr;
  llvm::SmallPtrSet<Operation*, 16> members;
  /// Broadcasts read by the group that other ops also use: cloned in.
  llvm::SmallPtrSet<Operation*, 4> clonedLoads;
  bool hasAnchor = false;
  bool attention = false;
  /// Members whose value is used outside too: the region's extra results.
  llvm::SmallVector<Operation*, 4> exposed;
  /// Stores of exposed values that sit before the root: moved after it.
  llvm::SmallVector<Operation*, 4> sunkStores;
};

/// The most results a region may have (each is a kernel parameter and a
/// stream of stores).
constexpr size_t kMaxResults = 8;

/// The global an ml_program load or store names; null for other ops.
SymbolRefAttr globalOf(Operation* op) {
  if (auto l = llvm::dyn_cast<ml_program::GlobalLoadOp>(op))
    return l.getGlobalAttr();
  if (auto st = llvm::dyn_cast<ml_program::GlobalStoreOp>(op))
    return st.getGlobalAttr();
  return {};
}

/// The transposes, reshapes and slices that make `leaf` from the value
/// they start at, leaf first, as far as each is used only by the next (the
/// leaf's user joins a region) and the chain is a strided view of where it
/// starts (static shapes; shapes::applyView). Empty when the chain moves no
/// data (reshapes alone): reading the value in place is as good.
SmallVector<Operation*> viewChain(Value leaf) {
  SmallVector<Operation*> chain;
  Value cur = leaf;
  // (A splat constant becomes a rank-0 input of the region: no view of it;
  // see below.)
  while (Operation* def = cur.getDefiningOp()) {
    if (!llvm::isa<mc::TransposeOp, mc::ReshapeOp, mc::SliceOp>(def) ||
        !def->hasOneUse() || def->getBlock() != leaf.getParentBlock())
      break;
    auto in = llvm::cast<RankedTensorType>(def->getOperand(0).getType());
    auto out = llvm::cast<RankedTensorType>(def->getResult(0).getType());
    if (!in.hasStaticShape() || !out.hasStaticShape() ||
        in.getElementType() != out.getElementType())
      break;
    chain.push_back(def);
    cur = def->getOperand(0);
  }
  if (chain.empty()) // (the leaf's own shape may be dynamic)
    return chain;
  // From the start: an op the view cannot follow ends the chain there (the
  // region reads its operand, or its result, instead).
  auto shapeOf = [](Value v) {
    ArrayRef<int64_t> s = llvm::cast<RankedTensorType>(v.getType()).getShape();
    return mc::rt::shapes::Dims(s.begin(), s.end());
  };
  size_t kept = chain.size();
  mc::rt::shapes::StridedView view = mc::rt::shapes::contiguousView(shapeOf(cur));
  for (size_t i = chain.size(); i-- > 0;) {
    Operation* op = chain[i];
    if (mc::applyViewOf(op, &view))
      continue;
    // Not a view of where the chain starts: the region may still read it
    // as a view of its own operand, which it then takes as an input.
    view = mc::rt::shapes::contiguousView(shapeOf(op->getOperand(0)));
    if (mc::applyViewOf(op, &view)) {
      kept = i + 1;
    } else {
      kept = i;
      view = mc::rt::shapes::contiguousView(shapeOf(op->getResult(0)));
    }
  }
  chain.resize(kept);
  // A region reads a splat constant as its rank-0 scalar (MCToPlan), which
  // a view cannot start from.
  Value start = chain.empty() ? leaf : chain.back()->getOperand(0);
  if (Operation* def = start.getDefiningOp())
    if (isSplatConstant(def))
      chain.clear();
  if (llvm::all_of(chain, [](Operation* op) {
        return llvm::isa<mc::ReshapeOp>(op);
      }))
    chain.clear();
  return chain;
}

struct FusePass : mc::impl::FusePassBase<FusePass> {
  using Base::Base;

  void runOnOperation() override {
    auto fn = llvm::dyn_cast_or_null<func::FuncOp>(
        mc::findEntryFunction(getOperation(), entry));
    if (!fn)
      return signalPassFailure();
    Block& block = fn.getBody().front();
    llvm::DenseMap<Operation*, unsigned> position;
    auto number = [&] {
      position.clear();
      unsigned n = 0;
      for (Operation& op : block)
        position[&op] = n++;
    };
    number();
    // Attention first: its ops must not be claimed by elementwise regions.
    if (attention) {
      SmallVector<mc::SoftmaxOp> softmaxes;
      for (Operation& op : block)
        if (auto sm = llvm::dyn_cast<mc::SoftmaxOp>(op))
          softmaxes.push_back(sm);
      for (mc::SoftmaxOp sm : softmaxes)
        if (auto g = matchAttention(sm, position))
          outline(*g, position);
      number();
    }

    llvm::DenseSet<Operation*> taken;
    std::vector<Group> groups;
    // Roots from the end: a region grows backwards from its last op, so a
    // consumer claims its producers before they can start regions of
    // their own.
    for (Operation& op : llvm::reverse(block)) {
      if (taken.contains(&op) ||
          !(isElementwise(&op) || isTrailingReduce(&op, maxFullReduction)))
        continue;
      Group g = grow(&op, position, taken);
      if (g.members.size() + g.clonedLoads.size() < 2)
        continue;
      for (Operation* m : g.members)
        taken.insert(m);
      groups.push_back(std::move(g));
    }
    llvm::SetVector<Operation*> clonedLoads;
    for (Group& g : groups) {
      outline(g, position);
      clonedLoads.insert(g.clonedLoads.begin(), g.clonedLoads.end());
    }
    // A broadcast every reader of which cloned it is dead now.
    for (Operation* op : clonedLoads)
      if (op->use_empty())
        op->erase();
  }

  /// The attention pattern ending at `sm`'s consumer: matmul(q', k) ->
  /// [scale] -> [mask] -> softmax(last dim) -> matmul(p, v), where q' may
  /// be q scaled first; each intermediate used once, every value of the
  /// result's rank and leading dims, scales and masks broadcasts of values
  /// from outside (or splat constants). Casts may sit between the scores'
  /// ops and around the softmax, as mc-amp leaves them (O1 keeps the
  /// softmax in f32 between bf16 matmuls).
  std::optional<Group>
  matchAttention(mc::SoftmaxOp sm,
                 llvm::DenseMap<Operation*, unsigned>& position) {
    auto type = llvm::cast<RankedTensorType>(sm.getType());
    int64_t rank = type.getRank();
    if (rank < 2 || sm.getAxis() != uint64_t(rank - 1) || !sm->hasOneUse())
      return std::nullopt;
    Value probs = sm.getResult();
    Operation* user = *sm->getUsers().begin();
    auto probsCast = llvm::dyn_cast<mc::CastOp>(user);
    if (probsCast) {
      if (!probsCast->hasOneUse())
        return std::nullopt;
      probs = probsCast.getResult();
      user = *probsCast->getUsers().begin();
    }
    auto pv = llvm::dyn_cast<mc::MatmulOp>(user);
    if (!pv || pv->getOperand(0) != probs || pv->getOperand(1) == probs)
      return std::nullopt;
    ArrayRef<int64_t> lead = shapeOf(pv.getResult()).drop_back(2);
    auto sameLead = [&](Value v) {
      auto t = llvm::cast<RankedTensorType>(v.getType());
      return t.getRank() == rank && t.getShape().drop_back(2) == lead &&
             fusibleElementType(t);
    };
    Group g;
    g.root = pv;
    g.attention = true;
    g.members.insert(pv);
    g.members.insert(sm);
    if (probsCast) {
      if (!sameLead(probs))
        return std::nullopt;
      g.members.insert(probsCast);
    }
    // A scale or mask operand: a splat constant (read as an input) or a
    // broadcast of an outside value (cloned in when shared).
    auto takeOperand = [&](Value v) -> bool {
      Operation* def = v.getDefiningOp();
      if (!def)
        return sameLead(v);
      if (isSplatConstant(def))
        return true;
      if (auto b = llvm::dyn_cast<mc::BroadcastInDimOp>(def)) {
        if (!fusibleTypes(def))
          return false;
        if (def->hasOneUse())
          g.members.insert(def);
        else
          g.clonedLoads.insert(def);
        return true;
      }
      return sameLead(v) && !llvm::isa<mc::FusedOp>(def);
    };
    // Elementwise binary ops with one value operand: scale, mask.
    auto scaleOrMask = [&](Operation* op, Value* through) -> bool {
      if (!isElementwise(op) || op->getNumOperands() != 2 ||
          !op->hasOneUse() || !sameLead(op->getResult(0)))
        return false;
      for (int side = 0; side < 2; ++side) {
        Value main = op->getOperand(side), other = op->getOperand(1 - side);
        if (llvm::isa<mc::DivOp, mc::SubOp>(op) && side != 0)
          continue;
        Operation* def = main.getDefiningOp();
        if (!def || !def->hasOneUse())
          continue;
        if (!takeOperand(other))
          continue;
        g.members.insert(op);
        *through = main;
        return true;
      }
      return false;
    };
    Value v = sm.getInput();
    for (int steps = 0; steps < 6; ++steps) {
      Operation* def = v.getDefiningOp();
      if (!def || llvm::isa<mc::MatmulOp>(def))
        break;
      if (auto cast = llvm::dyn_cast<mc::CastOp>(def)) {
        if (!cast->hasOneUse() || !sameLead(cast.getResult()))
          return std::nullopt;
        g.members.insert(cast);
        v = cast.getInput();
        continue;
      }
      if (!scaleOrMask(def, &v))
        return std::nullopt;
    }
    auto qk = v.getDefiningOp<mc::MatmulOp>();
    if (!qk || !qk->hasOneUse() || !sameLead(qk.getResult()))
      return std::nullopt;
    g.members.insert(qk);
    // q scaled before the matmul (PyTorch's MultiheadAttention).
    Value qLeaf = qk->getOperand(0);
    if (Operation* q = qLeaf.getDefiningOp()) {
      Value through;
      if (scaleOrMask(q, &through)) // else q is read as an input
        qLeaf = through;
    }
    for (Value operand : {qk->getOperand(0), qk->getOperand(1),
                          pv->getOperand(1)})
      if (!g.members.contains(operand.getDefiningOp()) && !sameLead(operand))
        return std::nullopt;
    // q, k and v as views of the projection they come from.
    if (views && attentionViews) {
      for (Value leaf : {qLeaf, qk->getOperand(1), pv->getOperand(1)})
        if (sameLead(leaf) && !g.members.contains(leaf.getDefiningOp()))
          for (Operation* op : viewChain(leaf))
            g.members.insert(op);
      readKRowMajor(qk, g, position);
    }
    for (Operation* m : g.members)
      if (m->getBlock() != sm->getBlock())
        return std::nullopt;
    return g;
  }

  /// k joined the region as a transpose to [.., d, s] (k.transpose(-2,
  /// -1)): it is read as [.., s, d] with the scores' matmul transposing it
  /// (transpose_b), so each row of a slice is a run of contiguous head-dim
  /// elements in the projection, not one element per row (the same
  /// transpose cuDNN's attention wants, docs/cuda.md).
  void readKRowMajor(mc::MatmulOp qk, Group& g,
                     llvm::DenseMap<Operation*, unsigned>& position) {
    auto t = qk.getRhs().getDefiningOp<mc::TransposeOp>();
    if (!t || qk.getTransposeB() || !g.members.contains(t))
      return;
    SmallVector<int64_t> perm(t.getPermutation());
    size_t rank = perm.size();
    if (rank < 2)
      return;
    std::swap(perm[rank - 1], perm[rank - 2]);
    auto type = llvm::cast<RankedTensorType>(t.getType());
    SmallVector<int64_t> shape(type.getShape());
    std::swap(shape[rank - 1], shape[rank - 2]);
    OpBuilder b(t);
    auto swapped = mc::TransposeOp::create(
        b, t.getLoc(), RankedTensorType::get(shape, type.getElementType(),
                                             type.getEncoding()),
        t.getInput(), b.getDenseI64ArrayAttr(perm));
    g.members.erase(t);
    g.members.insert(swapped);
    position[swapped] = position.lookup(t);
    position.erase(t);
    qk.getRhsMutable().assign(swapped.getResult());
    qk.setTransposeB(true);
    t->erase();
  }

  /// The largest region ending at `root` under the rules.
  Group grow(Operation* root,
             const llvm::DenseMap<Operation*, unsigned>& position,
             const llvm::DenseSet<Operation*>& taken) {
    Group g;
    g.root = root;
    g.members.insert(root);
    // The region's values have the root's shape, or, under a trailing
    // reduction, its operand's.
    ArrayRef<int64_t> shape = isTrailingReduce(root, maxFullReduction)
                                  ? shapeOf(root->getOperand(0))
                                  : shapeOf(root->getResult(0));
    // Producers in decreasing program order: every user of a producer comes
    // after it, so when it is considered, each of its users that will ever
    // join has joined already.
    auto later = [&](Operation* a, Operation* b) {
      return position.lookup(a) < position.lookup(b);
    };
    std::priority_queue<Operation*, std::vector<Operation*>, decltype(later)>
        queue(later);
    llvm::SmallPtrSet<Operation*, 16> queued;
    auto pushOperands = [&](Operation* op) {
      for (Value v : op->getOperands()) {
        Operation* def = v.getDefiningOp();
        if (def && def->getBlock() == root->getBlock() &&
            queued.insert(def).second)
          queue.push(def);
      }
    };
    pushOperands(root);
    while (!queue.empty()) {
      Operation* p = queue.top();
      queue.pop();
      if (taken.contains(p) || p->getNumResults() != 1 ||
          shapeOf(p->getResult(0)) != shape)
        continue;
      // An anchor seen through a reshape (a Linear on [B, S, D] is a matmul
      // on [B*S, D] reshaped back): the reshape keeps the elements' order,
      // so the epilogue runs on the anchor's result as it lies in memory.
      if (auto r = llvm::dyn_cast<mc::ReshapeOp>(p)) {
        Operation* a = r.getInput().getDefiningOp();
        bool usersInside = llvm::all_of(p->getUsers(), [&](Operation* u) {
          return g.members.contains(u) && !isAnchor(u) &&
                 !llvm::isa<mc::BroadcastInDimOp>(u);
        });
        if (epilogues && !g.hasAnchor && g.exposed.empty() && a &&
            !taken.contains(a) &&
            isAnchor(a) && a->hasOneUse() && usersInside && fusibleTypes(p)) {
          g.members.insert(p);
          g.members.insert(a);
          g.hasAnchor = true;
          continue;
        }
        // Else a reshape of a view the region reads (an LSTM's step reads
        // its time step's rows of the input projection as slice +
        // reshape): the chain joins as a view, as a transpose or slice
        // read directly does below.
        if (views && fusibleTypes(p) &&
            llvm::all_of(p->getUsers(),
                         [&](Operation* u) { return g.members.contains(u); }))
          for (Operation* op : viewChain(p->getResult(0)))
            g.members.insert(op);
        continue;
      }
      bool allUsersInside = llvm::all_of(p->getUsers(), [&](Operation* u) {
        return g.members.contains(u);
      });
      if (auto b = llvm::dyn_cast<mc::BroadcastInDimOp>(p)) {
        if (!fusibleTypes(p))
          continue;
        // A view in the region reads only inputs (or views): a broadcast it
        // reads stays outside, an input of the region (joined, the view
        // would read a value the region computes, which mc.fused refuses).
        bool readByView = llvm::any_of(p->getUsers(), [&](Operation* u) {
          return g.members.contains(u) &&
                 llvm::isa<mc::TransposeOp, mc::ReshapeOp, mc::SliceOp>(u);
        });
        if (readByView)
          continue;
        // A load: its operand is read as an input. Cloned when something
        // outside the region reads it too.
        if (allUsersInside)
          g.members.insert(p);
        else
          g.clonedLoads.insert(p);
        continue;
      }
      SmallVector<Operation*> stores;
      if (!allUsersInside && !exposable(p, g, position, &stores))
        continue;
      // Anchors, broadcasts and views inside a region read only its inputs.
      bool readAsInput = llvm::any_of(p->getUsers(), [&](Operation* u) {
        return g.members.contains(u) &&
               (isAnchor(u) || llvm::isa<mc::BroadcastInDimOp>(u) ||
                llvm::isa<mc::TransposeOp, mc::ReshapeOp, mc::SliceOp>(u));
      });
      if (readAsInput)
        continue;
      if (!allUsersInside) {
        g.members.insert(p);
        g.exposed.push_back(p);
        g.sunkStores.append(stores.begin(), stores.end());
        pushOperands(p);
        continue;
      }
      // A transpose or slice the region reads: a view of where it starts.
      if (views && llvm::isa<mc::TransposeOp, mc::SliceOp>(p) &&
          fusibleTypes(p)) {
        for (Operation* op : viewChain(p->getResult(0)))
          g.members.insert(op);
        continue;
      }
      if (isElementwise(p)) {
        g.members.insert(p);
        pushOperands(p);
        continue;
      }
      if (epilogues && !g.hasAnchor && g.exposed.empty() && isAnchor(p)) {
        g.members.insert(p);
        g.hasAnchor = true;
        continue;
      }
    }
    // An anchor must be the region's first op: everything else in the
    // region reads it, directly or not, or reads only inputs.
    return g;
  }

  /// Whether `p`, used outside the region too, may join it as one more
  /// result: a plain elementwise region (no anchor, no reduction ending
  /// it), and each outside user after the root, or a global_store of p
  /// that can move after it (nothing between touches its global; returned
  /// in `stores`). Such users cannot feed the region: they come after all
  /// of its ops.
  bool exposable(Operation* p, const Group& g,
                 const llvm::DenseMap<Operation*, unsigned>& position,
                 SmallVectorImpl<Operation*>* stores) {
    if (!multiOutput || g.hasAnchor || g.attention || !isElementwise(p) ||
        !isElementwise(g.root) || g.exposed.size() + 2 > kMaxResults)
      return false;
    unsigned root = position.lookup(g.root);
    if (feedsAnchor(p, g, root, position))
      return false;
    for (Operation* u : p->getUsers()) {
      if (g.members.contains(u) || position.lookup(u) > root)
        continue;
      auto st = llvm::dyn_cast<ml_program::GlobalStoreOp>(u);
      if (!st || st->getBlock() != g.root->getBlock())
        return false;
      SymbolRefAttr global = st.getGlobalAttr();
      for (Operation* op = st->getNextNode(); op && op != g.root;
           op = op->getNextNode())
        if (globalOf(op) == global ||
            !(llvm::isa<mc::MCDialect, ml_program::MLProgramDialect>(
                op->getDialect())))
          return false;
      stores->push_back(u);
    }
    return true;
  }

  /// Whether a matmul or conv2d could lead a region through `p`: one
  /// used once (directly or through its reshape) among the elementwise ops
  /// `p` is computed from. Taking `p` as an extra result would keep that
  /// anchor out (a region with an extra result has none), and its epilogue
  /// (a bias and activation, which a library call may fuse) is worth more
  /// than the pass the extra result saves: `p` then stays out, as without
  /// multi-output, and the anchor leads its region.
  /// The walk stops at a value read outside the region before its root
  /// (other than by a store): that value can never join, so no anchor
  /// joins through it (AMP's finite check reads every gradient before the
  /// optimizer's regions).
  bool feedsAnchor(Operation* p, const Group& g, unsigned root,
                   const llvm::DenseMap<Operation*, unsigned>& position) {
    if (!epilogues)
      return false;
    SmallVector<Operation*> stack{p};
    llvm::SmallPtrSet<Operation*, 16> seen;
    auto blocked = [&](Operation* def) {
      return llvm::any_of(def->getUsers(), [&](Operation* u) {
        return !g.members.contains(u) && !seen.contains(u) && u != p &&
               position.lookup(u) <= root &&
               !llvm::isa<ml_program::GlobalStoreOp>(u);
      });
    };
    while (!stack.empty() && seen.size() < 64) {
      Operation* op = stack.pop_back_val();
      if (!seen.insert(op).second)
        continue;
      for (Value v : op->getOperands()) {
        Operation* def = v.getDefiningOp();
        if (!def || def->getBlock() != p->getBlock())
          continue;
        if (auto r = llvm::dyn_cast<mc::ReshapeOp>(def))
          if (r->hasOneUse())
            def = r.getInput().getDefiningOp();
        if (!def)
          continue;
        if (isAnchor(def) && def->hasOneUse())
          return true;
        if (isElementwise(def) && !blocked(def))
          stack.push_back(def);
      }
    }
    return false;
  }

  void outline(Group& g, const llvm::DenseMap<Operation*, unsigned>& position) {
    SmallVector<Operation*> ops(g.members.begin(), g.members.end());
    for (Operation* c : g.clonedLoads)
      ops.push_back(c);
    llvm::sort(ops, [&](Operation* a, Operation* b) {
      return position.lookup(a) < position.lookup(b);
    });
    // An anchor leads: move it to the front (it reads only inputs, so the
    // order of the rest is unchanged and still valid).
    auto anchorIt = llvm::find_if(ops, [](Operation* op) {
      return isAnchor(op);
    });
    if (g.hasAnchor && anchorIt != ops.end()) {
      std::rotate(ops.begin(), anchorIt, anchorIt + 1);
      // Its reshape, if any, right after it.
      Operation* anchor = ops.front();
      auto reshapeIt = llvm::find_if(ops, [&](Operation* op) {
        return llvm::isa<mc::ReshapeOp>(op) &&
               op->getOperand(0).getDefiningOp() == anchor;
      });
      if (reshapeIt != ops.end())
        std::rotate(ops.begin() + 1, reshapeIt, reshapeIt + 1);
    }
    llvm::SmallPtrSet<Operation*, 16> inRegion(ops.begin(), ops.end());
    // Inputs: values defined outside the region, in order of first use.
    llvm::SetVector<Value> inputs;
    for (Operation* op : ops)
      for (Value v : op->getOperands()) {
        Operation* def = v.getDefiningOp();
        if (!def || !inRegion.contains(def))
          inputs.insert(v);
      }
    OpBuilder b(g.root);
    // The results: the root's value, then the exposed ones in program order.
    llvm::sort(g.exposed, [&](Operation* a, Operation* b) {
      return position.lookup(a) < position.lookup(b);
    });
    SmallVector<Value> results{g.root->getResult(0)};
    for (Operation* op : g.exposed)
      results.push_back(op->getResult(0));
    SmallVector<Type> types;
    for (Value v : results)
      types.push_back(v.getType());
    auto fused = mc::FusedOp::create(b, g.root->getLoc(), TypeRange(types),
                                       ValueRange(inputs.getArrayRef()),
                                       /*attention=*/UnitAttr());
    if (g.attention)
      fused.setAttention(true);
    Block* body = b.createBlock(&fused.getBody());
    IRMapping map;
    for (Value v : inputs)
      map.map(v, body->addArgument(v.getType(), v.getLoc()));
    b.setInsertionPointToStart(body);
    for (Operation* op : ops)
      b.clone(*op, map);
    SmallVector<Value> yielded;
    for (Value v : results)
      yielded.push_back(map.lookup(v));
    mc::YieldOp::create(b, g.root->getLoc(), yielded);
    for (auto [v, r] : llvm::zip(results, fused.getResults()))
      v.replaceAllUsesWith(r);
    // Stores of extra results that came before the region now follow it,
    // in their order.
    llvm::sort(g.sunkStores, [&](Operation* a, Operation* b) {
      return position.lookup(a) < position.lookup(b);
    });
    Operation* after = fused;
    for (Operation* st : g.sunkStores) {
      st->moveAfter(after);
      after = st;
    }
    for (Operation* op : llvm::reverse(ops))
      if (!g.clonedLoads.contains(op))
        op->erase();
  }
};

} // namespace

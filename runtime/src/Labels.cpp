// Recognizing class-label inputs in an artifact, and checking label values
// (see modelc/labels.h).
#include "modelc/labels.h"
#include "ArtifactVerifier.h"
#include "modelc/kernels.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

namespace mc::rt {
namespace {

int64_t intAt(DType dtype, const uint8_t *p, int64_t i) {
  if (dtype == DType::I64) {
    int64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, p + 4 * i, 4);
  return v;
}

bool isIntLabel(DType t) { return t == DType::I32 || t == DType::I64; }

/// The step's op (the verifier has checked it is a known one).
OpId opOf(const fb::Step *s) {
  OpId id = OpId::Copy;
  if (s->op())
    findOp(s->op()->string_view(), &id);
  return id;
}

/// The integer attribute `name` of a step; `dflt` when absent.
int64_t intAttr(const fb::Step *s, const char *name, int64_t dflt) {
  return OpAttrs(decodeAttrs(*s)).getInt(name, dflt);
}

/// Buffer B (an input's) and its reshapes: arena buffers over the same
/// bytes.
std::set<uint32_t>
viewsOf(const flatbuffers::Vector<flatbuffers::Offset<fb::Buffer>> &bufs,
        uint32_t b) {
  const fb::Buffer *root = bufs.Get(b);
  std::set<uint32_t> views{b};
  for (uint32_t v = 0; v < bufs.size(); ++v) {
    const fb::Buffer *o = bufs.Get(v);
    if (o->kind() == fb::BufferKind::Arena && o->dtype() == root->dtype() &&
        o->offset() == root->offset() && o->size() == root->size())
      views.insert(v);
  }
  return views;
}

} // namespace

std::vector<LabelInput> labelInputs(const Model &model) {
  const fb::Model &t = model.table();
  std::vector<LabelInput> counts(model.inputs().size());
  if (!t.buffers() || !t.steps())
    return counts;
  const auto &bufs = *t.buffers();
  // The constant buffer each buffer copies or broadcasts (if any).
  std::map<uint32_t, uint32_t> constantOf;
  for (uint32_t b = 0; b < bufs.size(); ++b)
    if (bufs.Get(b)->kind() == fb::BufferKind::Constant)
      constantOf[b] = b;
  auto passesThrough = [](OpId k) {
    return k == OpId::Copy || k == OpId::BroadcastInDim ||
           k == OpId::Transpose;
  };
  for (const fb::Step *s : *t.steps())
    if (passesThrough(opOf(s)) && s->inputs() && s->outputs() &&
        s->inputs()->size() == 1 && s->outputs()->size() == 1) {
      auto it = constantOf.find(s->inputs()->Get(0));
      if (it != constantOf.end())
        constantOf[s->outputs()->Get(0)] = it->second;
    }
  // The values of constant buffer B as integers, if it holds DTYPE.
  auto intsOf = [&](uint32_t b, DType dtype) -> std::vector<int64_t> {
    const fb::Buffer *buf = bufs.Get(b);
    if (DType(buf->dtype()) != dtype || !buf->shape())
      return {};
    int64_t n = 1;
    for (int64_t d : *buf->shape())
      n *= d;
    const uint8_t *p = model.constantData() + buf->offset();
    std::vector<int64_t> v(size_t(std::max<int64_t>(n, 0)));
    for (int64_t i = 0; i < n; ++i)
      v[size_t(i)] = intAt(dtype, p, i);
    return v;
  };
  // C when the values are exactly [0, 1, ..., C-1].
  auto arangeLength = [](const std::vector<int64_t> &v) -> int64_t {
    for (size_t i = 0; i < v.size(); ++i)
      if (v[i] != int64_t(i))
        return 0;
    return int64_t(v.size());
  };
  // K when every value is K.
  auto oneValue = [](const std::vector<int64_t> &v) -> std::optional<int64_t> {
    if (v.empty() || std::count(v.begin(), v.end(), v[0]) != int64_t(v.size()))
      return std::nullopt;
    return v[0];
  };
  for (size_t i = 0; i < model.inputs().size(); ++i) {
    const TensorInfo &in = model.inputs()[i];
    if (!isIntLabel(in.dtype))
      continue;
    std::set<uint32_t> labels = viewsOf(bufs, in.buffer);
    std::set<int64_t> ignored; // constants the labels are compared != with
    for (const fb::Step *s : *t.steps()) {
      if (!s->inputs() || !s->outputs() || s->outputs()->size() != 1)
        continue;
      if (passesThrough(opOf(s)) && s->inputs()->size() == 1 &&
          labels.count(s->inputs()->Get(0))) {
        labels.insert(s->outputs()->Get(0));
        continue;
      }
      if (opOf(s) != OpId::Compare || s->inputs()->size() != 2)
        continue;
      int64_t direction = intAttr(s, "direction", -1);
      if (direction != int64_t(CompareOp::Eq) &&
          direction != int64_t(CompareOp::Ne))
        continue;
      uint32_t a = s->inputs()->Get(0), b = s->inputs()->Get(1);
      if (!labels.count(a))
        std::swap(a, b);
      auto c = constantOf.find(b);
      if (!labels.count(a) || c == constantOf.end())
        continue;
      std::vector<int64_t> values = intsOf(c->second, in.dtype);
      if (direction == int64_t(CompareOp::Eq)) {
        // The one-hot's [0, C): the longest, of 2 classes at least. A
        // scalar `x == 0` is an arange of 1, and no one-hot: GPT-2's
        // sequence classifier compares its token ids with the pad id,
        // which made them a 1-class label input, every id refused.
        int64_t c = arangeLength(values);
        if (c >= 2)
          counts[i].classes = std::max(counts[i].classes, c);
      } else if (std::optional<int64_t> k = oneValue(values)) {
        ignored.insert(*k);
      }
    }
    // The ignored value: the one constant the labels are compared unequal
    // with (the import's `labels != ignore_index`), outside [0, C) (one
    // inside needs no leave); none if there are several.
    if (counts[i].classes && ignored.size() == 1 &&
        (*ignored.begin() < 0 || *ignored.begin() >= counts[i].classes))
      counts[i].ignored = *ignored.begin();
  }
  return counts;
}

std::vector<IndexInput> gatherIndexInputs(const Model &model) {
  const fb::Model &t = model.table();
  std::vector<IndexInput> result(model.inputs().size());
  if (!t.buffers() || !t.steps())
    return result;
  const auto &bufs = *t.buffers();
  auto passesThrough = [](OpId k) {
    return k == OpId::Copy || k == OpId::BroadcastInDim ||
           k == OpId::Transpose || k == OpId::Reshape;
  };
  for (size_t i = 0; i < model.inputs().size(); ++i) {
    const TensorInfo &in = model.inputs()[i];
    if (!isIntLabel(in.dtype))
      continue;
    std::set<uint32_t> own = viewsOf(bufs, in.buffer);
    std::set<uint32_t> values = own; // buffers holding the input's values
    // In step order, until a step writes the input's bytes: a write after
    // its last read is the planner reusing the memory, one before a gather
    // means the gather does not read the caller's values.
    for (const fb::Step *s : *t.steps()) {
      if (!s->inputs() || !s->outputs())
        continue;
      // scatter_add (gather's gradient) indexes rows of its result.
      bool scatter = opOf(s) == OpId::ScatterAdd;
      if ((opOf(s) == OpId::Gather || scatter) && s->inputs()->size() == 2 &&
          values.count(s->inputs()->Get(1)) &&
          (!scatter || s->outputs()->size() == 1)) {
        const fb::Buffer *data =
            bufs.Get(scatter ? s->outputs()->Get(0) : s->inputs()->Get(0));
        int64_t rank = data->shape() ? int64_t(data->shape()->size()) : 0;
        int64_t axis = intAttr(s, "axis", 0);
        if (axis < 0)
          axis += rank;
        bool batchDim = data->batch_scale() &&
                        data->batch_scale()->size() > size_t(axis) &&
                        data->batch_scale()->Get(axis) != 0;
        // (A dim of the batch: the CPU's kernel checks at run time.)
        if (axis >= 0 && axis < rank && !batchDim) {
          int64_t dim = data->shape()->Get(axis);
          if (result[i].dim == 0 || dim < result[i].dim) {
            result[i].dim = dim;
            result[i].where =
                std::string(scatter ? "mc.scatter_add" : "mc.gather") + " at " +
                (s->location() ? s->location()->str()
                               : std::string("an unknown location"));
          }
        }
      }
      bool writes = false;
      for (uint32_t o : *s->outputs())
        writes |= own.count(o) > 0;
      if (writes)
        break;
      if (passesThrough(opOf(s)) && s->inputs()->size() == 1 &&
          s->outputs()->size() == 1 && values.count(s->inputs()->Get(0)))
        values.insert(s->outputs()->Get(0));
    }
  }
  return result;
}

Status checkGatherIndices(DType dtype, const void *data, int64_t count,
                          const IndexInput &index, const std::string &what) {
  if (index.dim <= 0)
    return Status::ok();
  const uint8_t *p = static_cast<const uint8_t *>(data);
  for (int64_t i = 0; i < count; ++i) {
    int64_t v = intAt(dtype, p, i);
    if (v < -index.dim || v >= index.dim)
      return Status::error(what + ": element " + std::to_string(i) + " is " +
                           std::to_string(v) + ", an index out of range for " +
                           index.where + " over a dim of " +
                           std::to_string(index.dim) + " (indices lie in [" +
                           std::to_string(-index.dim) + ", " +
                           std::to_string(index.dim) + "))");
  }
  return Status::ok();
}

Status checkLabels(DType dtype, const void *data, int64_t count,
                   int64_t classes, const std::string &what, int64_t firstIndex,
                   std::optional<int64_t> ignored) {
  if (!isIntLabel(dtype))
    return Status::error(what + ": class labels must be i32 or i64, got " +
                         dtypeName(dtype));
  const uint8_t *p = static_cast<const uint8_t *>(data);
  for (int64_t i = 0; i < count; ++i) {
    int64_t v = intAt(dtype, p, i);
    if ((v < 0 || v >= classes) && v != ignored)
      return Status::error(
          what + ": sample " + std::to_string(firstIndex + i) +
          " has class label " + std::to_string(v) + ", outside [0, " +
          std::to_string(classes) + ") for " + std::to_string(classes) +
          " classes" +
          (ignored ? " (and not the ignored " + std::to_string(*ignored) + ")"
                   : std::string()));
  }
  return Status::ok();
}

} // namespace mc::rt

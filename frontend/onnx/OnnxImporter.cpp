// ONNX import on top of the eager frontend and the tracer (see
// OnnxImporter.h): one handler per ONNX op type, written with frontend ops.
#include "frontend/onnx/OnnxImporter.h"
#include "frontend/Autograd.h"
#include "frontend/Loss.h"
#include "frontend/Ops.h"
#include "frontend/Random.h"
#include "frontend/TraceHook.h"
#include "frontend/onnx/Recurrent.h"
#include "frontend/onnx/StripRawData.h"
#include "modelc/fileio.h"

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sys/mman.h>
#include <unistd.h>
#include <unordered_map>

namespace mc {
namespace {

namespace fs = std::filesystem;
using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

constexpr int64_t kMinOpset = 13, kMaxOpset = 17;
/// The most elements a Range may make (2^31): more is a mistake in the
/// model, not a tensor anyone means to build at import.
constexpr int64_t kMaxRangeElements = int64_t(1) << 31;
/// The most bytes of initializers one model may have (all its weights,
/// external data included): the limit of one file read whole.
constexpr uint64_t kMaxWeightBytes = rt::kMaxInputFileBytes;

std::string formatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

//===----------------------------------------------------------------------===//
// Tensors from the file
//===----------------------------------------------------------------------===//

DType dtypeOf(int elemType, const std::string& what) {
  switch (elemType) {
  case TensorProto::FLOAT:
    return DType::F32;
  case TensorProto::FLOAT16:
    return DType::F16;
  case TensorProto::BFLOAT16:
    return DType::BF16;
  case TensorProto::INT32:
    return DType::I32;
  case TensorProto::INT64:
    return DType::I64;
  case TensorProto::BOOL:
    return DType::I1;
  case TensorProto::DOUBLE: // computed in f32 (doublePlaces says where)
    return DType::F32;
  default:
    break;
  }
  std::string name = TensorProto::DataType_IsValid(elemType)
                         ? TensorProto::DataType_Name(
                               static_cast<TensorProto::DataType>(elemType))
                         : std::to_string(elemType);
  throw Error(what + " has element type " + name +
              "; modelc supports FLOAT, FLOAT16, BFLOAT16, INT32, INT64 and "
              "BOOL (and DOUBLE, computed in FLOAT)");
}

/// Where GRAPH (and the graphs inside its nodes) uses DOUBLE: its inputs,
/// outputs and initializers of that type, Constant and ConstantOfShape
/// values, and Cast (or any `to` / `dtype` attribute) to it, named as
/// "Cast '/Cast_3'". PyTorch's exporter widens Python scalars to double
/// (torch.where(c, 1.0, 0.0) in 1.13), which eager PyTorch computes in
/// the tensor's float type; modelc computes them in f32.
void doublePlaces(const onnx::GraphProto& graph, std::vector<std::string>* out,
                  bool main = true) {
  auto typed = [](const onnx::ValueInfoProto& v) {
    return v.type().tensor_type().elem_type() == TensorProto::DOUBLE;
  };
  std::set<std::string> initializers;
  for (const TensorProto& t : graph.initializer())
    initializers.insert(t.name());
  for (const auto& v : graph.input()) // (IR < 4 lists initializers too)
    if (main && typed(v) && !initializers.count(v.name()))
      out->push_back("input '" + v.name() + "'");
  for (const auto& v : graph.output())
    if (main && typed(v))
      out->push_back("output '" + v.name() + "'");
  for (const TensorProto& t : graph.initializer())
    if (t.data_type() == TensorProto::DOUBLE)
      out->push_back("initializer '" + t.name() + "'");
  for (const NodeProto& n : graph.node()) {
    bool uses = false;
    for (const auto& a : n.attribute()) {
      if (a.type() == onnx::AttributeProto::TENSOR &&
          a.t().data_type() == TensorProto::DOUBLE)
        uses = true;
      if (a.type() == onnx::AttributeProto::INT &&
          (a.name() == "to" || a.name() == "dtype") &&
          a.i() == TensorProto::DOUBLE)
        uses = true;
      if (a.type() == onnx::AttributeProto::GRAPH)
        doublePlaces(a.g(), out, false);
    }
    if (uses)
      out->push_back(n.op_type() +
                     (n.name().empty() ? " (unnamed)" : " '" + n.name() + "'"));
  }
}

/// DOUBLE values as f32: rounded to nearest (below f32's smallest, to
/// zero), NaN and infinities kept; a finite value that rounds to an
/// infinity is an error naming WHAT.
void narrowDoubles(const double* from, size_t n, float* to,
                   const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    double v = from[i];
    if (std::isfinite(v) && std::isinf(static_cast<float>(v))) {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", v);
      throw Error(what + " holds " + text + " (element " + std::to_string(i) +
                  "), a DOUBLE beyond f32's range; "
                  "modelc computes DOUBLE in f32");
    }
    to[i] = static_cast<float>(v);
  }
}

/// The file an external-data tensor points at, after checking that it stays
/// inside the model's folder (no absolute path, no `..` or symlink that
/// leads out): ONNX's own loader had path traversal CVEs here.
fs::path externalDataPath(const TensorProto& t, const fs::path& modelDir) {
  std::string location;
  for (const auto& entry : t.external_data())
    if (entry.key() == "location")
      location = entry.value();
  std::string what = "initializer '" + t.name() + "'";
  if (location.empty())
    throw Error(what + ": external data has no 'location'");
  fs::path loc(location);
  if (loc.is_absolute())
    throw Error(what + ": external data location '" + location +
                "' is an absolute path; it must be relative to the model's "
                "folder '" + modelDir.string() + "'");
  std::error_code ec;
  fs::path base = fs::weakly_canonical(modelDir, ec);
  fs::path full = fs::weakly_canonical(modelDir / loc, ec);
  if (ec)
    throw Error(what + ": cannot resolve external data location '" +
                location + "': " + ec.message());
  fs::path rel = full.lexically_relative(base);
  if (rel.empty() || *rel.begin() == ".." || rel == ".")
    throw Error(what + ": external data location '" + location +
                "' resolves to '" + full.string() +
                "', outside the model's folder '" + base.string() + "'");
  return full;
}

/// Where an initializer's external data lies: its file, checked to be a
/// regular file holding `bytes` bytes from `offset`.
struct ExternalData {
  fs::path file;
  uint64_t offset = 0;
};

/// Checks an initializer's external data (`bytes` bytes) before anything is
/// allocated for it.
ExternalData locateExternalData(const TensorProto& t,
                                const fs::path& modelDir, size_t bytes) {
  fs::path file = externalDataPath(t, modelDir);
  std::string what = "initializer '" + t.name() + "'";
  uint64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : t.external_data()) {
    auto number = [&](const std::string& s) -> int64_t {
      char* end = nullptr;
      long long v = std::strtoll(s.c_str(), &end, 10);
      if (s.empty() || *end != '\0' || v < 0)
        throw Error(what + ": external data " + entry.key() + " '" + s +
                    "' is not a non-negative integer");
      return v;
    };
    if (entry.key() == "offset")
      offset = number(entry.value());
    else if (entry.key() == "length")
      length = number(entry.value());
  }
  if (length >= 0 && static_cast<uint64_t>(length) != bytes)
    throw Error(what + ": external data length " + std::to_string(length) +
                " differs from the " + std::to_string(bytes) +
                " bytes of its type and shape");
  // Checked before it is opened: a FIFO would block the open.
  uint64_t size = 0;
  rt::Status regular =
      rt::checkRegularFile(file.string(), rt::kMaxInputFileBytes, &size);
  if (!regular)
    throw Error(what + ": external data: " + regular.message());
  if (offset > size || size - offset < bytes)
    throw Error(what + ": external data file '" + file.string() + "' has " +
                std::to_string(size) + " bytes; the tensor needs " +
                std::to_string(bytes) + " from offset " +
                std::to_string(offset));
  return {file, offset};
}

/// Reads `bytes` bytes at `offset` of FILE into `dst` (a large read goes
/// straight into `dst`, past the stream's buffer).
void readFileRange(const fs::path& file, uint64_t offset, void* dst,
                   size_t bytes, const std::string& what) {
  std::ifstream in(file, std::ios::binary);
  if (in) {
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes));
  }
  if (!in)
    throw Error(what + ": cannot read '" + file.string() + "'");
}

/// Raw data of an initializer left in the model file by the importer's
/// load (onnx_wire::stripInitializerData): read into its tensor directly.
struct RawOnFile {
  fs::path file;
  onnx_wire::Span span;
};

/// Reads an initializer. Its shape, its data's size and (with
/// `weightBytes`, the running total of the model's initializers) the total
/// against kMaxWeightBytes are checked before anything is allocated.
Tensor tensorFromProto(const TensorProto& p, const fs::path& modelDir,
                       const std::string& what,
                       uint64_t* weightBytes = nullptr,
                       std::optional<RawOnFile> rawOnFile = std::nullopt) {
  DType dtype = dtypeOf(p.data_type(), what);
  // DOUBLE data is read as stored (8 bytes a value), then narrowed to f32.
  const bool f64 = p.data_type() == TensorProto::DOUBLE;
  Shape shape(p.dims().begin(), p.dims().end());
  int64_t count = 0;
  if (rt::Status s = rt::checkElementCount(shape, &count); !s)
    throw Error(what + ": " + s.message());
  size_t n = static_cast<size_t>(count);
  size_t bytes = n * rt::dtypeSize(dtype);
  size_t stored = f64 ? n * sizeof(double) : bytes;
  std::string type = std::string(rt::dtypeName(dtype)) + rt::shapeString(shape);
  if (weightBytes) {
    *weightBytes += bytes;
    if (*weightBytes > kMaxWeightBytes)
      throw Error(what + " (" + type + ") brings the model's weights to " +
                  std::to_string(*weightBytes) + " bytes, more than the "
                  "limit of " + std::to_string(kMaxWeightBytes));
  }
  // The data must hold exactly the shape's values: checked first.
  auto mismatch = [&](size_t found) {
    return Error(what + " holds " + std::to_string(found) +
                 " values; its shape " + rt::shapeString(shape) + " needs " +
                 std::to_string(n));
  };
  std::optional<ExternalData> external;
  if (p.data_location() == TensorProto::EXTERNAL) {
    external = locateExternalData(p, modelDir, stored);
  } else if (p.has_raw_data() || rawOnFile) {
    uint64_t found = rawOnFile ? rawOnFile->span.length : p.raw_data().size();
    if (found != stored)
      throw Error(what + " holds " + std::to_string(found) +
                  " bytes of raw data; " +
                  (f64 ? "DOUBLE" + rt::shapeString(shape) : type) + " needs " +
                  std::to_string(stored));
  } else if (f64) {
    if (size_t(p.double_data_size()) != n)
      throw mismatch(size_t(p.double_data_size()));
  } else {
    size_t found = 0;
    switch (dtype) {
    case DType::F32:
      found = static_cast<size_t>(p.float_data_size());
      break;
    case DType::I64:
      found = static_cast<size_t>(p.int64_data_size());
      break;
    case DType::I32:
    case DType::F16:
    case DType::BF16: // int32_data holds the 16 bits of each value
    case DType::I1:
      found = static_cast<size_t>(p.int32_data_size());
      break;
    }
    if (found != n)
      throw mismatch(found);
  }

  Tensor t = Tensor::empty(shape, dtype);
  if (f64) {
    std::vector<double> values(n);
    if (external)
      readFileRange(external->file, external->offset, values.data(), stored,
                    what + ": external data");
    else if (rawOnFile)
      readFileRange(rawOnFile->file, rawOnFile->span.offset, values.data(),
                    stored, what + ": raw data");
    else if (p.has_raw_data())
      std::memcpy(values.data(), p.raw_data().data(), stored);
    else
      std::copy(p.double_data().begin(), p.double_data().end(), values.begin());
    narrowDoubles(values.data(), n, t.data<float>(), what);
    return t;
  }
  if (external) {
    readFileRange(external->file, external->offset, t.rawData(), bytes,
                  what + ": external data");
    return t;
  }
  if (rawOnFile) {
    readFileRange(rawOnFile->file, rawOnFile->span.offset, t.rawData(), bytes,
                  what + ": raw data");
    return t;
  }
  if (p.has_raw_data()) {
    std::memcpy(t.rawData(), p.raw_data().data(), bytes);
    return t;
  }
  switch (dtype) {
  case DType::F32:
    std::copy(p.float_data().begin(), p.float_data().end(), t.data<float>());
    break;
  case DType::I64:
    std::copy(p.int64_data().begin(), p.int64_data().end(),
              t.data<int64_t>());
    break;
  case DType::I32:
    std::copy(p.int32_data().begin(), p.int32_data().end(),
              t.data<int32_t>());
    break;
  case DType::F16:
  case DType::BF16:
    for (size_t i = 0; i < n; ++i)
      t.data<uint16_t>()[i] = static_cast<uint16_t>(p.int32_data(i));
    break;
  case DType::I1:
    for (size_t i = 0; i < n; ++i)
      t.data<uint8_t>()[i] = p.int32_data(i) != 0;
    break;
  }
  return t;
}

//===----------------------------------------------------------------------===//
// Running the graph
//===----------------------------------------------------------------------===//

/// A value of the graph: its tensor, and whether it is a compile-time
/// constant (known without the graph inputs).
struct Value {
  Tensor tensor;
  bool constant = false;
  /// A float initializer of a training step (OnnxImportOptions::
  /// trainingState): a parameter, or state, whose values the step changes.
  /// Its values are known, but a node reading it is traced, never
  /// evaluated at import (a Transpose of a weight folded into a constant
  /// would leave the weight untrained).
  bool trained = false;
};

/// Stops recording while constant nodes run, and restores the tracer after.
class PausedTrace {
public:
  PausedTrace() : saved_(activeTraceHook()) { setActiveTraceHook(nullptr); }
  ~PausedTrace() { setActiveTraceHook(saved_); }
  PausedTrace(const PausedTrace&) = delete;
  PausedTrace& operator=(const PausedTrace&) = delete;

private:
  TraceHook* saved_;
};

/// Stands for one ONNX node in the trace, so the ops it records are located
/// at `loc("<node name> (<op type>)")`, and a runtime error names the node.
class NodeScope : public nn::Module {
public:
  explicit NodeScope(std::string opType) : opType_(std::move(opType)) {}
  Tensor forward(const Tensor&) override {
    throw Error("an ONNX node scope is not callable");
  }
  std::string typeName() const override { return opType_; }

private:
  std::string opType_;
};

/// What a handler sees of its node.
class NodeContext {
public:
  NodeContext(const NodeProto& node, std::vector<const Value*> inputs,
              int64_t opset, const fs::path& modelDir)
      : node(node), inputs(std::move(inputs)), opset(opset),
        modelDir(modelDir) {}

  const NodeProto& node;
  std::vector<const Value*> inputs;
  int64_t opset;
  const fs::path& modelDir;
  /// Whether the model is traced with a dynamic batch (a constant may not
  /// take the batch's shape).
  bool dynamicBatch = false;
  /// Initializers traced as state that the step updates (the running
  /// statistics of batch norms in training mode); null: none.
  const std::set<std::string>* state = nullptr;
  /// Imported for a training step (OnnxImportOptions::trainingState):
  /// training-mode Dropout draws its masks.
  bool training = false;
  bool isState(size_t i) const {
    return state && i < size_t(node.input_size()) &&
           state->count(node.input(int(i)));
  }

  size_t numInputs() const { return inputs.size(); }
  bool has(size_t i) const { return i < inputs.size() && inputs[i]; }
  const Tensor& in(size_t i) const {
    if (!has(i))
      throw Error("input " + std::to_string(i) + " is missing");
    return inputs[i]->tensor;
  }
  bool isConstant(size_t i) const { return has(i) && inputs[i]->constant; }
  /// Whether output `i` is asked for (present and named).
  bool wantsOutput(int i) const {
    return i < node.output_size() && !node.output(i).empty();
  }

  /// The values of input `i` as integers; it must be a compile-time constant.
  std::vector<int64_t> constInts(size_t i, const char* what) const {
    const Tensor& t = in(i);
    if (!isConstant(i))
      throw Error("input '" + std::string(what) + "' ('" + node.input(i) +
                  "') must be a compile-time constant; modelc needs static "
                  "shapes");
    std::vector<int64_t> v(static_cast<size_t>(t.numel()));
    if (t.dtype() == DType::I64)
      std::copy(t.data<int64_t>(), t.data<int64_t>() + t.numel(), v.begin());
    else if (t.dtype() == DType::I32)
      std::copy(t.data<int32_t>(), t.data<int32_t>() + t.numel(), v.begin());
    else
      throw Error("input '" + std::string(what) + "' must be int64 or int32, "
                  "got " + t.describe());
    return v;
  }
  double constScalar(size_t i, const char* what) const {
    if (!isConstant(i))
      throw Error("input '" + std::string(what) + "' ('" + node.input(i) +
                  "') must be a compile-time constant");
    const Tensor& t = in(i);
    if (t.numel() != 1)
      throw Error("input '" + std::string(what) + "' must hold one value, "
                  "got " + t.describe());
    if (t.dtype() == DType::I64)
      return static_cast<double>(t.data<int64_t>()[0]);
    return t.toVector()[0];
  }

  const AttributeProto* attr(const char* name) const {
    for (const AttributeProto& a : node.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  int64_t getInt(const char* name, int64_t dflt) const {
    const AttributeProto* a = attr(name);
    return a ? a->i() : dflt;
  }
  float getFloat(const char* name, float dflt) const {
    const AttributeProto* a = attr(name);
    return a ? a->f() : dflt;
  }
  std::string getString(const char* name, const std::string& dflt) const {
    const AttributeProto* a = attr(name);
    return a ? a->s() : dflt;
  }
  std::vector<int64_t> getInts(const char* name,
                               std::vector<int64_t> dflt = {}) const {
    const AttributeProto* a = attr(name);
    if (!a)
      return dflt;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  std::vector<float> getFloats(const char* name) const {
    const AttributeProto* a = attr(name);
    if (!a)
      return {};
    return std::vector<float>(a->floats().begin(), a->floats().end());
  }
  std::vector<std::string> getStrings(const char* name) const {
    const AttributeProto* a = attr(name);
    if (!a)
      return {};
    return std::vector<std::string>(a->strings().begin(), a->strings().end());
  }
};

using Handler = std::function<std::vector<Tensor>(const NodeContext&)>;

/// SoftmaxCrossEntropyLoss (SOFTMAX) or NegativeLogLikelihoodLoss: scores
/// [N, C, d1, ...] (log-probabilities for the latter), labels [N, d1, ...]
/// of int32/int64, optional weights [C]; `reduction` none, sum or mean
/// (over the weights of the counted labels, as PyTorch), `ignore_index`
/// counting nothing. Outputs the loss, and for the former the
/// log-probabilities if asked.
std::vector<Tensor> classLoss(const NodeContext& c, bool softmax) {
  const Tensor& scores = c.in(0);
  const Tensor& labels = c.in(1);
  if (scores.rank() < 2 || !rt::isFloat(scores.dtype()))
    throw Error("scores " + scores.describe() +
                " must be floats of rank 2 or more ([N, C, ...])");
  if ((labels.dtype() != DType::I32 && labels.dtype() != DType::I64) ||
      labels.rank() != scores.rank() - 1 || labels.size(0) != scores.size(0))
    throw Error("labels " + labels.describe() +
                " must be int32 or int64 of "
                "the scores' " +
                scores.describe() + " shape without dim 1");
  for (int64_t d = 1; d < labels.rank(); ++d)
    if (labels.size(d) != scores.size(d + 1))
      throw Error("labels " + labels.describe() + " must be the scores' " +
                  scores.describe() + " shape without dim 1");
  std::string reduction = c.getString("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    throw Error("reduction '" + reduction + "' is not none, sum or mean");
  int64_t classes = scores.size(1);
  DType ft = scores.dtype();
  Tensor logp = softmax ? logSoftmax(scores, 1) : scores;
  Tensor isLabel = labelMask(labels, classes);
  Tensor picked = pickLabels(logp, isLabel);
  std::optional<Tensor> weight; // per label: its class's weight, 0 ignored
  if (c.has(2)) {
    const Tensor& w = c.in(2);
    if (w.rank() != 1 || w.size(0) != classes || w.dtype() != ft)
      throw Error("weights " + w.describe() + " must be [" +
                  std::to_string(classes) + "] of the scores' type");
    Shape along(size_t(scores.rank()), 1); // [1, C, 1, ...]
    along[1] = classes;
    weight = sum(mul(reshape(w, along), cast(isLabel, ft)), {1});
  }
  if (const AttributeProto* ignore = c.attr("ignore_index")) {
    Tensor k = Tensor::full({}, double(ignore->i()), labels.dtype());
    Tensor keep = cast(ne(labels, k), ft);
    weight = weight ? mul(*weight, keep) : keep;
  }
  Tensor loss = neg(weight ? mul(picked, *weight) : picked);
  std::vector<int64_t> all;
  for (int64_t d = 0; d < loss.rank(); ++d)
    all.push_back(d);
  if (reduction == "sum")
    loss = sum(loss, all);
  else if (reduction == "mean")
    loss = weight ? div(sum(loss, all), sum(*weight, all)) : mean(loss, all);
  std::vector<Tensor> out{loss};
  if (softmax && c.wantsOutput(1))
    out.push_back(logp);
  return out;
}

int64_t normalizeAxis(int64_t axis, int64_t rank, const char* what = "axis") {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    throw Error(std::string(what) + " " + std::to_string(axis) +
                " is out of range for rank " + std::to_string(rank));
  return a;
}

/// NumPy's broadcast of two shapes (ONNX multidirectional broadcasting).
Shape broadcastShapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error("shapes " + rt::shapeString(a) + " and " +
                  rt::shapeString(b) + " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor scalarOf(double v, DType dtype) { return Tensor::scalar(v, dtype); }

/// A constant index `i` of dim `dim` of data (size n) wrapped into
/// [0, n); one outside [-n, n) is refused, naming it.
int64_t wrapConstIndex(int64_t i, int64_t n, int64_t dim, const Tensor& data) {
  if (i < -n || i >= n)
    throw Error("index " + std::to_string(i) + " is out of range for dim " +
                std::to_string(dim) + " of " + data.describe() +
                " (indices lie in [" + std::to_string(-n) + ", " +
                std::to_string(n) + "))");
  return i < 0 ? i + n : i;
}

/// Computed indices along an axis of n, as int64 with the negative ones
/// wrapped (i + n); `outside`, when given, marks those outside [-n, n)
/// (GatherElements, GatherND, ScatterElements make the runtime report
/// them; OneHot gives them `off`).
Tensor wrapIndices(const Tensor& idx, int64_t n, Tensor* outside = nullptr) {
  Tensor wide = idx.dtype() == DType::I64 ? idx : cast(idx, DType::I64);
  Tensor zero = scalarOf(0.0, DType::I64);
  Tensor wrapped = where(lt(wide, zero), wide + double(n), wide);
  if (outside)
    *outside = where(lt(wrapped, zero), scalarOf(1.0, DType::I1),
                     ge(wrapped, scalarOf(double(n), DType::I64)));
  return wrapped;
}

/// A scatter's `reduction` attribute (ScatterND, ScatterElements): none,
/// add or mul (opset 17's), else an error naming it.
std::string scatterReduction(const NodeContext& c) {
  std::string reduction = c.getString("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul")
    throw Error("reduction '" + reduction +
                "' is not one of none, add and mul (opset 17's)");
  return reduction;
}

/// Whether ScatterND's points (`coord`: k wrapped coordinates each) are a
/// box: per dim a contiguous range [start, start + count), enumerated in
/// row-major order, as PyTorch exports a slice assignment. Each point is
/// then written once.
bool scatterBox(const std::vector<int64_t>& coord, int64_t k,
                std::vector<int64_t>* start, std::vector<int64_t>* count) {
  int64_t points = int64_t(coord.size()) / k;
  start->assign(size_t(k), std::numeric_limits<int64_t>::max());
  count->assign(size_t(k), 0);
  std::vector<int64_t> last(size_t(k), -1);
  for (int64_t p = 0; p < points; ++p)
    for (int64_t d = 0; d < k; ++d) {
      int64_t c = coord[size_t(p * k + d)];
      (*start)[size_t(d)] = std::min((*start)[size_t(d)], c);
      last[size_t(d)] = std::max(last[size_t(d)], c);
    }
  int64_t box = 1;
  for (int64_t d = 0; d < k; ++d) {
    (*count)[size_t(d)] = last[size_t(d)] - (*start)[size_t(d)] + 1;
    box *= (*count)[size_t(d)];
  }
  if (box != points)
    return false;
  for (int64_t p = 0; p < points; ++p) {
    int64_t rest = p;
    for (int64_t d = k - 1; d >= 0; --d) {
      int64_t want = (*start)[size_t(d)] + rest % (*count)[size_t(d)];
      rest /= (*count)[size_t(d)];
      if (coord[size_t(p * k + d)] != want)
        return false;
    }
  }
  return true;
}

/// x's rows along `axis` picked by `source(i)` for output rows i in
/// [0, count): one gather that reorders, repeats or mirrors them (flips,
/// Tile, Pad's reflect and edge modes).
template <typename Source>
Tensor gatherAlong(const Tensor& x, int64_t axis, int64_t count,
                   Source source) {
  Tensor index = Tensor::empty({count}, DType::I64);
  for (int64_t i = 0; i < count; ++i)
    index.data<int64_t>()[i] = source(i);
  return gather(x, index, axis);
}

/// x with `axis` reversed.
Tensor reverseAxis(const Tensor& x, int64_t axis) {
  int64_t n = x.size(axis);
  return gatherAlong(x, axis, n, [n](int64_t i) { return n - 1 - i; });
}

/// 0 with x's sign where y is zero, else y: the sign of a zero that
/// floor, ceil and round keep (floor(-0.0) and round(-0.3) are -0.0).
Tensor signedZero(const Tensor& x, const Tensor& y) {
  Tensor zero = eq(y, scalarOf(0.0, y.dtype()));
  Tensor signed0 = x * 0.0;
  return where(zero, signed0, y);
}

/// floor(x) for a float tensor, exactly: below 2^23 in magnitude through a
/// truncating cast to int32 (minus 1 where that rounded up), and x itself
/// above (every float that large is an integer), NaN and inf included.
Tensor floorOf(const Tensor& x) {
  DType t = x.dtype();
  Tensor magnitude = abs(x);
  Tensor small = lt(magnitude, scalarOf(8388608.0, t));
  Tensor safe = where(small, x, scalarOf(0.0, t)); // no cast out of range
  Tensor whole = cast(safe, DType::I32);
  Tensor back = cast(whole, t);
  Tensor over = gt(back, x);
  Tensor lower = back - 1.0;
  Tensor down = where(over, lower, back);
  Tensor y = where(small, down, x);
  return signedZero(x, y);
}

/// ceil(x) = -floor(-x).
Tensor ceilOf(const Tensor& x) {
  Tensor negated = neg(x);
  Tensor f = floorOf(negated);
  return neg(f);
}

/// x rounded to the nearest integer, ties to even (ONNX Round,
/// torch.round, nearbyint): floor(x), plus 1 where the fraction passes 1/2
/// or is 1/2 and the floor is odd. x - floor(x) is exact.
Tensor roundOf(const Tensor& x) {
  DType t = x.dtype();
  Tensor f = floorOf(x);
  Tensor fraction = x - f;
  Tensor above = gt(fraction, scalarOf(0.5, t));
  Tensor tie = eq(fraction, scalarOf(0.5, t));
  Tensor halfF = f * 0.5;
  Tensor halfFloor = floorOf(halfF);
  Tensor twice = halfFloor * 2.0;
  Tensor odd = ne(twice, f);
  Tensor tieUp = where(tie, odd, scalarOf(0.0, DType::I1));
  Tensor up = where(above, scalarOf(1.0, DType::I1), tieUp);
  Tensor raised = f + 1.0;
  Tensor y = where(up, raised, f);
  return signedZero(x, y);
}

/// The product (or sum) along `axis` (kept as a dim of 1) by halving:
/// ceil(log2 n) multiplies (adds) of the axis' first half by its second
/// (an odd length padded with a 1, or a 0, first). Exact for integers
/// (wrapping as a sequential fold does); floats fold in a tree order,
/// within a few ulps per level.
Tensor foldAlong(Tensor x, int64_t axis, bool product) {
  double identity = product ? 1.0 : 0.0;
  int64_t n = x.size(axis);
  if (n == 0) {
    Shape shape = x.shape();
    shape[size_t(axis)] = 1;
    return Tensor::full(shape, identity, x.dtype());
  }
  while (n > 1) {
    if (n % 2) {
      std::vector<int64_t> low(size_t(x.rank()), 0), high(low);
      high[size_t(axis)] = 1;
      x = pad(x, low, high, identity);
      ++n;
    }
    Tensor first = sliceDim(x, axis, 0, n / 2);
    Tensor second = sliceDim(x, axis, n / 2, n);
    x = product ? first * second : first + second;
    n /= 2;
  }
  return x;
}

/// foldAlong over each of `axes`, the reduced dims kept or dropped.
Tensor foldAxes(const Tensor& x, const std::vector<int64_t>& axes, bool keep,
                bool product) {
  std::vector<bool> reduced(size_t(x.rank()), false);
  for (int64_t a : axes)
    reduced[size_t(normalizeAxis(a, x.rank()))] = true;
  Tensor y = x;
  Shape kept;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (reduced[size_t(d)])
      y = foldAlong(y, d, product);
    else
      kept.push_back(x.size(d));
  }
  return keep ? y : reshape(y, kept);
}

/// `axes` of x summed: sum() for floats; for integers (which the runtime's
/// reductions do not take: PyTorch's bucketize and counts of a mask sum
/// int64) a halving fold of adds, exact.
Tensor sumOf(const Tensor& x, const std::vector<int64_t>& axes, bool keep) {
  if (x.dtype() != DType::I64 && x.dtype() != DType::I32)
    return sum(x, axes, keep);
  return foldAxes(x, axes, keep, false);
}

/// GatherElements as a select and a max, for a dynamic batch (the flat
/// gather's base offsets would be a constant of the batch's shape): with
/// the axis moved last, out[.., j] = max over k of (position[.., j] == k ?
/// data[.., k] : lowest), n compares per output (the max of one value keeps
/// NaN and -0.0). `outside` marks indices outside the axis: whether there
/// is one is the index of a gather from one element, so one makes the
/// runtime report the node.
Tensor gatherElementsBySelect(const Tensor& data, const Tensor& position,
                              const Tensor& outside, int64_t axis,
                              bool constantData) {
  if (data.dtype() == DType::I1)
    throw Error("GatherElements of bool data with a dynamic batch is not "
                "supported (numbers are)");
  // Computed data's dim 0 is the batch; a constant's (a weight) is not.
  if (axis == 0 && !constantData)
    throw Error("GatherElements along the batch axis (axis 0) with a "
                "dynamic batch is not supported (along other axes it is)");
  int64_t rank = data.rank(), n = data.size(axis);
  std::vector<int64_t> start(size_t(rank), 0), count(data.shape()),
      step(size_t(rank), 1);
  bool narrower = false;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && position.size(d) != data.size(d)) {
      count[size_t(d)] = position.size(d);
      narrower = true;
    }
  Tensor src = narrower ? slice(data, start, count, step) : data;
  std::vector<int64_t> perm, back(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      perm.push_back(d);
  perm.push_back(axis);
  for (int64_t d = 0; d < rank; ++d)
    back[size_t(perm[size_t(d)])] = d;
  bool moved = axis != rank - 1;
  Tensor values = moved ? transpose(src, perm) : src;         // [.., n]
  Tensor at = moved ? transpose(position, perm) : position;   // [.., J]
  Tensor iota = Tensor::empty({n}, DType::I64);
  for (int64_t k = 0; k < n; ++k)
    iota.data<int64_t>()[k] = k;
  Tensor column = unsqueeze(at, -1);                          // [.., J, 1]
  Tensor pick = eq(column, iota);                             // [.., J, n]
  Tensor row = unsqueeze(values, -2);                         // [.., 1, n]
  DType t = data.dtype();
  double lowest = t == DType::I32   ? double(INT32_MIN)
                  : t == DType::I64 ? double(INT64_MIN)
                                    : -INFINITY;
  Tensor chosen = where(pick, row, scalarOf(lowest, t));
  Tensor y = amax(chosen, {-1});                              // [.., J]
  std::vector<int64_t> all;
  for (int64_t d = 0; d < rank; ++d)
    all.push_back(d);
  Tensor flags = cast(outside, DType::I32);
  Tensor misses = amax(flags, all);                           // 0 or 1
  // -0.0: x + -0.0 is x for every x, -0.0 included.
  Tensor probe = gather(Tensor::full({1}, -0.0, data.dtype()), misses, 0);
  Tensor checked = y + probe;
  return moved ? transpose(checked, back) : checked;
}

/// ONNX Einsum of one or two operands as transposes, reshapes, sums and
/// one batched matmul: the letters both operands and the output have are
/// the matmul's batch, those both have and the output does not are
/// contracted, the rest are each side's free dims; a letter only one
/// operand has and the output does not is summed first. "..." stands for
/// the same leading dims in every operand. A letter repeated within one
/// operand (a diagonal) is refused.
Tensor einsum(const std::string& equation, std::vector<Tensor> ops) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ')
      eq += ch;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t at = 0;;) {
    size_t comma = lhs.find(',', at);
    terms.push_back(lhs.substr(at, comma == std::string::npos
                                       ? std::string::npos
                                       : comma - at));
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  if (terms.size() != ops.size())
    throw Error("equation '" + equation + "' has " +
                std::to_string(terms.size()) + " operand terms for " +
                std::to_string(ops.size()) + " inputs");
  if (ops.size() > 2)
    throw Error("Einsum of " + std::to_string(ops.size()) +
                " operands is not supported (one or two are)");
  // "..." becomes letters of its own (upper case 'A'... are free for it).
  int64_t ellipsisRank = -1;
  for (size_t i = 0; i < terms.size(); ++i) {
    size_t dots = terms[i].find("...");
    if (dots == std::string::npos)
      continue;
    int64_t named = int64_t(terms[i].size()) - 3;
    int64_t r = ops[i].rank() - named;
    if (r < 0)
      throw Error("term '" + terms[i] + "' names more dims than " +
                  ops[i].describe() + " has");
    if (ellipsisRank >= 0 && r != ellipsisRank)
      throw Error("'...' stands for " + std::to_string(ellipsisRank) +
                  " dims in one operand and " + std::to_string(r) +
                  " in another; modelc needs the same dims");
    ellipsisRank = r;
  }
  // Letters the equation does not use ('...' must not alias one).
  std::string dotsLetters;
  for (char ch = 'A'; int64_t(dotsLetters.size()) < ellipsisRank; ++ch) {
    if (ch == 'Z' + 1)
      ch = 'a';
    if (ch > 'z')
      throw Error("equation '" + equation + "' leaves no letter for '...'");
    if (eq.find(ch) == std::string::npos)
      dotsLetters += ch;
  }
  auto expand = [&](std::string t) {
    size_t dots = t.find("...");
    if (dots != std::string::npos)
      t.replace(dots, 3, dotsLetters);
    return t;
  };
  for (std::string& t : terms)
    t = expand(t);
  std::string out;
  if (arrow != std::string::npos) {
    out = expand(eq.substr(arrow + 2));
  } else { // implicit: the letters used once, in order, after "..."
    std::map<char, int> count;
    for (const std::string& t : terms)
      for (char ch : t)
        ++count[ch];
    out = dotsLetters;
    for (const auto& [ch, n] : count)
      if (n == 1 && dotsLetters.find(ch) == std::string::npos)
        out += ch;
  }
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (int64_t(terms[i].size()) != ops[i].rank())
      throw Error("term '" + terms[i] + "' has " +
                  std::to_string(terms[i].size()) + " letters for " +
                  ops[i].describe());
    for (size_t d = 0; d < terms[i].size(); ++d) {
      char ch = terms[i][d];
      if (terms[i].find(ch) != d)
        throw Error("letter '" + std::string(1, ch) + "' appears twice in "
                    "term '" + terms[i] + "' (a diagonal): not supported");
      int64_t n = ops[i].size(int64_t(d));
      auto [it, fresh] = size.emplace(ch, n);
      if (!fresh && it->second != n)
        throw Error("letter '" + std::string(1, ch) + "' is " +
                    std::to_string(it->second) + " in one operand and " +
                    std::to_string(n) + " in another");
    }
  }
  for (char ch : out)
    if (!size.count(ch))
      throw Error("output letter '" + std::string(1, ch) +
                  "' is in no operand");
  auto has = [](const std::string& t, char ch) {
    return t.find(ch) != std::string::npos;
  };
  // Letters one operand alone has and the output does not: summed away.
  for (size_t i = 0; i < terms.size(); ++i) {
    std::vector<int64_t> sumDims;
    std::string kept;
    for (size_t d = 0; d < terms[i].size(); ++d) {
      char ch = terms[i][d];
      bool elsewhere = has(out, ch);
      for (size_t j = 0; j < terms.size(); ++j)
        elsewhere |= j != i && has(terms[j], ch);
      if (elsewhere)
        kept += ch;
      else
        sumDims.push_back(int64_t(d));
    }
    if (!sumDims.empty()) {
      ops[i] = sum(ops[i], sumDims, false);
      terms[i] = kept;
    }
  }
  auto permuteTo = [](const Tensor& t, const std::string& from,
                      const std::string& to) {
    std::vector<int64_t> perm;
    bool identity = true;
    for (char ch : to) {
      perm.push_back(int64_t(from.find(ch)));
      identity &= perm.back() == int64_t(perm.size()) - 1;
    }
    return identity ? t : transpose(t, perm);
  };
  if (terms.size() == 1)
    return permuteTo(ops[0], terms[0], out);
  const std::string &a = terms[0], &b = terms[1];
  std::string batch, contracted, freeA, freeB;
  for (char ch : a) {
    if (has(b, ch))
      (has(out, ch) ? batch : contracted) += ch;
    else
      freeA += ch;
  }
  for (char ch : b)
    if (!has(a, ch))
      freeB += ch;
  auto count = [&](const std::string& letters) {
    int64_t n = 1;
    for (char ch : letters)
      n *= size[ch];
    return n;
  };
  int64_t nb = count(batch), m = count(freeA), k = count(contracted),
          n = count(freeB);
  Tensor lhsT = permuteTo(ops[0], a, batch + freeA + contracted);
  Tensor rhsT = permuteTo(ops[1], b, batch + contracted + freeB);
  Tensor lhs3 = reshape(lhsT, {nb, m, k});
  Tensor rhs3 = reshape(rhsT, {nb, k, n});
  Tensor product = matmul(lhs3, rhs3);
  Shape full;
  for (char ch : batch + freeA + freeB)
    full.push_back(size[ch]);
  Tensor y = reshape(product, full);
  return permuteTo(y, batch + freeA + freeB, out);
}

/// e^x - 1 without the cancellation of exp(x) - 1 near 0, for x <= 0 (the
/// negative side of Elu, Selu and Celu): 2 tanh(x/2) / (1 - tanh(x/2)),
/// whose denominator stays in [1, 2] there. Where x > 0 it may be inf (the
/// callers select x there). One traced op per statement: the trace must not
/// depend on the order C++ evaluates operands in.
Tensor expm1NonPositive(const Tensor& x) {
  Tensor half = x * 0.5;
  Tensor t = tanh(half);
  Tensor twice = t * 2.0;
  Tensor denom = scalarOf(1.0, x.dtype()) - t;
  return twice / denom;
}

/// x where x >= 0, alpha x below (LeakyRelu).
Tensor leakyRelu(const Tensor& x, double alpha) {
  Tensor negative = lt(x, scalarOf(0.0, x.dtype())); // (traced first)
  Tensor scaled = x * alpha;
  return where(negative, scaled, x);
}

/// min(max(alpha x + beta, 0), 1) (HardSigmoid).
Tensor hardSigmoid(const Tensor& x, double alpha, double beta) {
  Tensor scaled = x * alpha;
  Tensor shifted = scaled + beta;
  return clamp(shifted, 0.0, 1.0);
}

/// x / (1 + |x|) (Softsign).
Tensor softsign(const Tensor& x) {
  Tensor magnitude = abs(x);
  Tensor denom = magnitude + 1.0;
  return x / denom;
}

/// x where x >= 0, alpha (e^(x / scale) - 1) below (Elu: scale 1; Celu:
/// scale alpha).
Tensor expLinear(const Tensor& x, double alpha, double scale) {
  Tensor negative = lt(x, scalarOf(0.0, x.dtype()));
  Tensor inner = scale == 1.0 ? x : x * (1.0 / scale);
  Tensor m = expm1NonPositive(inner);
  Tensor scaled = m * alpha;
  return where(negative, scaled, x);
}

/// log(1 + e^x) = relu(x) + log1p(e^-|x|), with log1p(u) as
/// log(w) u / (w - 1) for w = 1 + u (u itself where w rounds to 1): exact
/// to a few ulp for very negative x, where log(1 + e^x) is e^x, and no
/// overflow for large x.
Tensor softplus(const Tensor& x) {
  DType t = x.dtype();
  Tensor magnitude = abs(x);
  Tensor negated = neg(magnitude);
  Tensor u = exp(negated);
  Tensor w = u + scalarOf(1.0, t);
  Tensor d = w - scalarOf(1.0, t);
  Tensor logW = log(w);
  Tensor scaled = logW * u;
  Tensor ratio = scaled / d;
  Tensor rounded = eq(d, scalarOf(0.0, t));
  Tensor log1p = where(rounded, u, ratio);
  Tensor positive = relu(x);
  return positive + log1p;
}

/// How Resize computes an output element from the input along one axis.
struct ResizeMode {
  enum Kind { Nearest, Linear, Cubic } kind = Nearest;
  std::string transform = "half_pixel";
  std::string nearestMode = "round_prefer_floor";
  double cubicA = -0.75; // cubic_coeff_a (PyTorch's bicubic: -0.75)
  bool excludeOutside = false;
};

/// The spec's cubic convolution weights of the four neighbours
/// floor(x) - 1 .. floor(x) + 2 at fraction t of the way from floor(x).
std::array<double, 4> cubicWeights(double t, double a) {
  auto near = [a](double d) { // |d| <= 1
    return ((a + 2) * d - (a + 3)) * d * d + 1;
  };
  auto far = [a](double d) { // 1 < |d| < 2
    return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  };
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

/// ONNX Resize along one axis, from `in` to `out` elements, as a sum of
/// gathers (taps): the nearest source element, the two neighbours for
/// linear, four for cubic, each with a weight per output position, all
/// computed here. `scale` is out / in as the node gives it (its `scales`,
/// or the sizes' ratio); the coordinate transform and rounding follow the
/// ONNX spec. Source indices outside the axis read its edge (the spec's
/// edge padding; linear clamps the coordinate at 0 first, as PyTorch's
/// upsampling does, to the same values); with exclude_outside, cubic gives
/// them no weight and renormalizes the others. Weighted taps need an f32
/// x: the handler resizes f16 and bf16 in f32 and rounds once, as PyTorch
/// does (cubic's partial sums pass the input's range).
Tensor resizeAxis(const Tensor& x, int64_t axis, int64_t out, double scale,
                  const ResizeMode& mode) {
  int64_t in = x.size(axis);
  const std::string& transform = mode.transform;
  auto source = [&](int64_t o) -> double {
    if (transform == "align_corners")
      return out > 1 ? double(o) * double(in - 1) / double(out - 1) : 0.0;
    if (transform == "asymmetric")
      return double(o) / scale;
    if (transform == "pytorch_half_pixel" && out == 1)
      return 0.0;
    return (double(o) + 0.5) / scale - 0.5; // half_pixel
  };
  auto clampIndex = [&](int64_t i) {
    return std::min<int64_t>(std::max<int64_t>(i, 0), in - 1);
  };
  size_t taps = mode.kind == ResizeMode::Cubic    ? 4
                : mode.kind == ResizeMode::Linear ? 2
                                                  : 1;
  std::vector<Tensor> index;
  std::vector<std::vector<float>> weight(taps);
  for (size_t k = 0; k < taps; ++k) {
    index.push_back(Tensor::empty({out}, DType::I64));
    weight[k].resize(static_cast<size_t>(out));
  }
  for (int64_t o = 0; o < out; ++o) {
    double src = source(o);
    auto set = [&](size_t k, int64_t i, double w) {
      index[k].data<int64_t>()[o] = clampIndex(i);
      weight[k][size_t(o)] = float(w);
    };
    if (mode.kind == ResizeMode::Nearest) {
      const std::string& nm = mode.nearestMode;
      double r = nm == "floor"               ? std::floor(src)
                 : nm == "ceil"              ? std::ceil(src)
                 : nm == "round_prefer_ceil" ? std::floor(src + 0.5)
                                             : std::ceil(src - 0.5);
      set(0, int64_t(r), 1.0);
    } else if (mode.kind == ResizeMode::Linear) {
      src = std::max(src, 0.0);
      int64_t i0 = clampIndex(int64_t(std::floor(src)));
      double lambda = std::min(src - double(i0), 1.0);
      set(0, i0, 1.0 - lambda);
      set(1, i0 + 1, lambda);
    } else {
      double f = std::floor(src);
      std::array<double, 4> w = cubicWeights(src - f, mode.cubicA);
      int64_t i0 = int64_t(f) - 1;
      double total = 0;
      for (size_t k = 0; k < 4; ++k) {
        int64_t i = i0 + int64_t(k);
        if (mode.excludeOutside && (i < 0 || i >= in))
          w[k] = 0;
        total += w[k];
      }
      for (size_t k = 0; k < 4; ++k)
        set(k, i0 + int64_t(k), mode.excludeOutside ? w[k] / total : w[k]);
    }
  }
  if (taps == 1)
    return gather(x, index[0], axis);
  if (x.dtype() != DType::F32)
    throw Error("Resize: weighted taps need f32, got " + x.describe());
  // Weights shaped [out, 1, ...] to broadcast along `axis`.
  Shape wShape{out};
  for (int64_t d = axis + 1; d < x.rank(); ++d)
    wShape.push_back(1);
  Tensor sum;
  for (size_t k = 0; k < taps; ++k) {
    Tensor w = Tensor::fromVector(weight[k], wShape); // x is f32 here
    Tensor part = gather(x, index[k], axis) * w;
    sum = sum.defined() ? sum + part : part;
  }
  return sum;
}

/// NumPy matmul: 1-D operands get a dimension and lose it again, batch
/// dimensions broadcast. A 2-D right operand (a weight) is not broadcast:
/// the left one is flattened to 2-D instead.
Tensor numpyMatmul(Tensor a, Tensor b) {
  if (a.rank() == 0 || b.rank() == 0)
    throw Error("MatMul operands must have rank >= 1, got " + a.describe() +
                " and " + b.describe());
  bool vecA = a.rank() == 1, vecB = b.rank() == 1;
  if (vecA)
    a = unsqueeze(a, 0);
  if (vecB)
    b = unsqueeze(b, 1);
  Tensor y;
  if (b.rank() == 2 && a.rank() > 2) {
    Shape lead(a.shape().begin(), a.shape().end() - 1);
    Tensor y2 = matmul(reshape(a, {-1, a.size(-1)}), b);
    lead.push_back(b.size(1));
    y = reshape(y2, lead);
  } else {
    Shape batchA(a.shape().begin(), a.shape().end() - 2);
    Shape batchB(b.shape().begin(), b.shape().end() - 2);
    Shape batch = broadcastShapes(batchA, batchB);
    Shape sa = batch, sb = batch;
    sa.insert(sa.end(), a.shape().end() - 2, a.shape().end());
    sb.insert(sb.end(), b.shape().end() - 2, b.shape().end());
    // Each operand in its own statement: the traced graph must not depend
    // on the order a compiler evaluates a call's arguments in.
    bool values = a.hasValues() && b.hasValues();
    Tensor wideA = broadcastTo(a, sa, values);
    Tensor wideB = broadcastTo(b, sb, values);
    y = matmul(wideA, wideB);
  }
  if (vecA)
    y = squeeze(y, -2);
  if (vecB)
    y = squeeze(y, -1);
  return y;
}

/// Explicit pads [x1_begin, x2_begin, x1_end, x2_end] of a 2-D window op,
/// from `pads` or `auto_pad`, as the frontend's [top, left, bottom, right].
/// A 1-D window (Conv1d, MaxPool1d, AvgPool1d: an [N, C, L] input) runs as
/// a 2-D one over [N, C, 1, L]: its attributes gain a leading 1 (kernel,
/// strides, dilations) or 0 (pads).
bool isOneD(const Tensor& x) { return x.rank() == 3; }

/// auto_pad SAME_UPPER / SAME_LOWER over the spatial dims of x (as many
/// as kernel has): the output is ceil(in / stride), the padding that
/// takes split in two, the odd one at the end (UPPER) or the start.
/// Returns the begins, then the ends.
std::vector<int64_t> samePads(const Tensor& x,
                              const std::vector<int64_t>& kernel,
                              const std::vector<int64_t>& strides,
                              const std::vector<int64_t>& dilations,
                              bool upper) {
  size_t nd = kernel.size();
  std::vector<int64_t> pads(2 * nd);
  for (size_t d = 0; d < nd; ++d) {
    int64_t in = x.size(2 + int64_t(d));
    int64_t out = (in + strides[d] - 1) / strides[d];
    int64_t total = std::max<int64_t>(
        (out - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - in, 0);
    pads[d] = upper ? total / 2 : total - total / 2;
    pads[nd + d] = total - pads[d];
  }
  return pads;
}

std::vector<int64_t> windowPadding(const NodeContext& c, const Tensor& x,
                                   const std::vector<int64_t>& kernel,
                                   const std::vector<int64_t>& strides,
                                   const std::vector<int64_t>& dilations,
                                   bool oneD = false) {
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    if (oneD) {
      std::vector<int64_t> pads = c.getInts("pads", {0, 0});
      if (pads.size() != 2)
        throw Error("pads must have 2 values for a 1-D window, got " +
                    std::to_string(pads.size()));
      return {0, pads[0], 0, pads[1]};
    }
    std::vector<int64_t> pads = c.getInts("pads", {0, 0, 0, 0});
    if (pads.size() != 4)
      throw Error("pads must have 4 values for a 2-D window, got " +
                  std::to_string(pads.size()));
    return pads;
  }
  if (autoPad == "VALID")
    return {0, 0, 0, 0};
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    throw Error("unknown auto_pad '" + autoPad + "'");
  return samePads(x, kernel, strides, dilations, autoPad == "SAME_UPPER");
}

/// The attributes of a 3-D window (Conv, MaxPool over [N, C, D, H, W]):
/// strides, dilations, kernel, pads [d0, h0, w0, d1, h1, w1] (given, or
/// from auto_pad), and the output depth; the depth padding is checked.
struct Window3d {
  std::vector<int64_t> strides, dilations, kernel, pads;
  int64_t outDepth = 0;
};

Window3d window3d(const NodeContext& c, const Tensor& x,
                  std::vector<int64_t> kernel, bool ceilMode) {
  if (c.dynamicBatch)
    throw Error("a 3-D window with a dynamic batch (--batch) is not "
                "supported: its depth is batched with the batch; compile "
                "with a static batch");
  auto triple = [&](const char* name) {
    std::vector<int64_t> v = c.getInts(name, {1, 1, 1});
    if (v.size() != 3 || v[0] < 1 || v[1] < 1 || v[2] < 1)
      throw Error(std::string(name) + " must be 3 values >= 1 for a 3-D "
                                      "window");
    return v;
  };
  Window3d win{triple("strides"), triple("dilations"), std::move(kernel),
               std::vector<int64_t>(6, 0)};
  if (win.kernel.size() != 3 || win.kernel[0] < 1 || win.kernel[1] < 1 ||
      win.kernel[2] < 1)
    throw Error("kernel_shape must be 3 values >= 1 for a 3-D window");
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  if (autoPad == "NOTSET") {
    win.pads = c.getInts("pads", win.pads);
    if (win.pads.size() != 6)
      throw Error("pads must have 6 values for a 3-D window, got " +
                  std::to_string(win.pads.size()));
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    win.pads = samePads(x, win.kernel, win.strides, win.dilations,
                        autoPad == "SAME_UPPER");
  } else if (autoPad != "VALID") {
    throw Error("unknown auto_pad '" + autoPad + "'");
  }
  int64_t depth = x.size(2) + win.pads[0] + win.pads[3];
  int64_t span = win.dilations[0] * (win.kernel[0] - 1) + 1;
  if (win.pads[0] < 0 || win.pads[3] < 0 || depth < span)
    throw Error("the window (kernel depth " + std::to_string(win.kernel[0]) +
                ", dilation " + std::to_string(win.dilations[0]) +
                ") does not fit the padded depth " + std::to_string(depth) +
                " of " + x.describe());
  int64_t s = win.strides[0];
  win.outDepth = (depth - span + (ceilMode ? s - 1 : 0)) / s + 1;
  // ceil_mode: the last window must start inside the input or its left
  // padding (PyTorch's rule).
  if (ceilMode && (win.outDepth - 1) * s >= x.size(2) + win.pads[0])
    --win.outDepth;
  return win;
}

/// A 3-D window op (Conv, MaxPool) as 2-D ones, one per depth tap: x
/// padded in depth (with `padValue`, and past the end as far as the last
/// window reaches) and viewed as [N, D, C, H, W]; tap t's depth slices
/// (t * dilation + stride * j) batched as [N * D_out, C, H, W] for
/// `perTap(t, slices)`, whose results `combine` folds; then back to
/// [N, C_out, D_out, H_out, W_out]. No 3-D op: the 2-D op's kernels,
/// fusion and gradient serve it.
template <typename PerTap, typename Combine>
Tensor byDepthTaps(const Tensor& x, const Window3d& win, double padValue,
                   PerTap perTap, Combine combine) {
  int64_t n = x.size(0), ch = x.size(1), d = x.size(2);
  int64_t reach = (win.outDepth - 1) * win.strides[0] +
                  win.dilations[0] * (win.kernel[0] - 1) +
                  1; // padded depth read
  Tensor padded = pad(
      x, {0, 0, win.pads[0], 0, 0},
      {0, 0, std::max<int64_t>(reach - d - win.pads[0], 0), 0, 0}, padValue);
  Tensor byDepth = transpose(padded, {0, 2, 1, 3, 4}); // [N, D, C, H, W]
  Tensor acc;
  for (int64_t t = 0; t < win.kernel[0]; ++t) {
    Tensor taken = slice(byDepth, {0, t * win.dilations[0], 0, 0, 0},
                         {n, win.outDepth, ch, x.size(3), x.size(4)},
                         {1, win.strides[0], 1, 1, 1});
    Tensor y =
        perTap(t, reshape(taken, {n * win.outDepth, ch, x.size(3), x.size(4)}));
    acc = t == 0 ? y : combine(acc, y);
  }
  Tensor unbatched =
      reshape(acc, {n, win.outDepth, acc.size(1), acc.size(2), acc.size(3)});
  return transpose(unbatched, {0, 2, 1, 3, 4});
}

/// Conv over [N, C, D, H, W] (video models' Conv3d): a 2-D convolution
/// per depth tap with that tap's weight, summed (the bias with the first).
Tensor conv3dTaps(const Tensor& x, const Tensor& w, const Tensor& bias,
                  const Window3d& win, int64_t groups) {
  return byDepthTaps(
      x, win, 0.0,
      [&](int64_t t, const Tensor& slices) {
        Tensor tap =
            reshape(slice(w, {0, 0, t, 0, 0},
                          {w.size(0), w.size(1), 1, w.size(3), w.size(4)},
                          {1, 1, 1, 1, 1}),
                    {w.size(0), w.size(1), w.size(3), w.size(4)});
        return conv2d(slices, tap, t == 0 ? bias : Tensor(),
                      {win.strides[1], win.strides[2]},
                      {win.pads[1], win.pads[2], win.pads[4], win.pads[5]},
                      {win.dilations[1], win.dilations[2]}, groups);
      },
      [](const Tensor& a, const Tensor& b) { return add(a, b); });
}

Tensor conv3dByTaps(const NodeContext& c, const Tensor& x, const Tensor& w) {
  if (w.rank() != 5)
    throw Error("a 3-D Conv needs a weight of rank 5, got " + w.describe());
  std::vector<int64_t> shape{w.size(2), w.size(3), w.size(4)};
  if (c.getInts("kernel_shape", shape) != shape)
    throw Error("kernel_shape does not match the weight " + w.describe());
  return conv3dTaps(x, w, c.has(2) ? c.in(2) : Tensor(),
                    window3d(c, x, shape, false), c.getInt("group", 1));
}

/// A transposed convolution as the convolution it is the gradient of, over
/// the nd = rank - 2 spatial dims of x: stride - 1 zeros between the
/// input's elements, padded by dilation * (kernel - 1) - pads (`pads`:
/// nd begins then nd ends; cropped where negative, output_padding added
/// at the end), and `conv` (a stride-1 convolution with `dilations` and
/// `groups`) with the kernel transposed per group ([C_in, C_out/g, k...]
/// -> [C_out, C_in/g, k...]) and flipped in every spatial dim.
template <typename Conv>
Tensor transposedAsConv(Tensor x, const Tensor& w,
                        const std::vector<int64_t>& strides,
                        const std::vector<int64_t>& dilations,
                        const std::vector<int64_t>& pads,
                        const std::vector<int64_t>& outPad, int64_t groups,
                        Conv conv) {
  size_t nd = size_t(x.rank() - 2);
  int64_t n = x.size(0), cin = x.size(1);
  if (groups < 1 || cin % groups != 0 || w.size(0) != cin)
    throw Error("weight " + w.describe() + " does not fit input " +
                x.describe() + " with group " + std::to_string(groups));
  for (size_t d = 0; d < nd; ++d)
    if (outPad[d] < 0 || outPad[d] >= std::max(strides[d], dilations[d]))
      throw Error("output_padding must be >= 0 and below the stride or the "
                  "dilation");
  // Zeros between the elements: [N, C, d1, 1, d2, 1, ...] padded to the
  // strides, then cut to (size - 1) * stride + 1 per dim.
  if (std::any_of(strides.begin(), strides.end(),
                  [](int64_t v) { return v > 1; })) {
    Shape spread{n, cin}, cells{n, cin}, cut{n, cin};
    std::vector<int64_t> high(2, 0);
    for (size_t d = 0; d < nd; ++d) {
      int64_t size = x.size(2 + int64_t(d));
      spread.insert(spread.end(), {size, 1});
      high.insert(high.end(), {0, strides[d] - 1});
      cells.push_back(size * strides[d]);
      cut.push_back((size - 1) * strides[d] + 1);
    }
    Tensor zeros =
        pad(reshape(x, spread), std::vector<int64_t>(high.size(), 0), high);
    x = slice(reshape(zeros, cells), std::vector<int64_t>(nd + 2, 0), cut,
              std::vector<int64_t>(nd + 2, 1));
  }
  std::vector<int64_t> low(nd + 2, 0), high(nd + 2, 0), cropLow(nd + 2, 0),
      cropHigh(nd + 2, 0);
  for (size_t d = 0; d < nd; ++d) {
    int64_t full = dilations[d] * (w.size(2 + int64_t(d)) - 1);
    int64_t before = full - pads[d], after = full - pads[nd + d] + outPad[d];
    (before >= 0 ? low[2 + d] : cropLow[2 + d]) = std::abs(before);
    (after >= 0 ? high[2 + d] : cropHigh[2 + d]) = std::abs(after);
  }
  x = pad(x, low, high);
  std::vector<int64_t> count(x.shape());
  for (size_t d = 2; d < nd + 2; ++d) {
    count[d] -= cropLow[d] + cropHigh[d];
    if (count[d] < 1)
      throw Error("pads crop away the whole output");
  }
  x = slice(x, cropLow, count, std::vector<int64_t>(nd + 2, 1));
  Shape grouped{groups, cin / groups, w.size(1)},
      kernel{groups * w.size(1), cin / groups};
  std::vector<int64_t> perm{0, 2, 1};
  for (size_t d = 0; d < nd; ++d) {
    grouped.push_back(w.size(2 + int64_t(d)));
    kernel.push_back(w.size(2 + int64_t(d)));
    perm.push_back(int64_t(3 + d));
  }
  Tensor k = reshape(transpose(reshape(w, grouped), perm), kernel);
  for (size_t d = 0; d < nd; ++d)
    k = reverseAxis(k, int64_t(2 + d));
  return conv(x, k);
}

/// ConvTranspose over [N, C, D, H, W] (3-D UNets' ConvTranspose3d), as the
/// 2-D one: stride - 1 zeros between the input's voxels, padded by
/// dilation * (kernel - 1) - pads (cropped where negative, output_padding
/// added at the end), and the 3-D convolution at stride 1 with the kernel
/// transposed per group and flipped in its three spatial dims.
Tensor convTranspose3dByTaps(const NodeContext& c) {
  Tensor x = c.in(0);
  const Tensor& w = c.in(1);
  if (w.rank() != 5)
    throw Error("a 3-D ConvTranspose needs a weight of rank 5, got " +
                w.describe());
  if (c.attr("output_shape"))
    throw Error("output_shape is not supported (give pads)");
  std::string autoPad = c.getString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID")
    throw Error("auto_pad '" + autoPad + "' is not supported (give pads)");
  if (c.dynamicBatch)
    throw Error("a 3-D window with a dynamic batch (--batch) is not "
                "supported: its depth is batched with the batch; compile "
                "with a static batch");
  auto values = [&](const char* name, int64_t dflt, size_t count) {
    std::vector<int64_t> v = c.getInts(name, std::vector<int64_t>(count, dflt));
    if (v.size() != count)
      throw Error(std::string(name) + " must have " + std::to_string(count) +
                  " values for a 3-D window, got " + std::to_string(v.size()));
    return v;
  };
  std::vector<int64_t> strides = values("strides", 1, 3),
                       dilations = values("dilations", 1, 3),
                       outPad = values("output_padding", 0, 3),
                       pads = autoPad == "VALID" ? std::vector<int64_t>(6, 0)
                                                 : values("pads", 0, 6);
  int64_t groups = c.getInt("group", 1);
  for (size_t d = 0; d < 3; ++d)
    if (strides[d] < 1 || dilations[d] < 1)
      throw Error("strides and dilations must be >= 1");
  return transposedAsConv(
      x, w, strides, dilations, pads, outPad, groups,
      [&](const Tensor& xp, const Tensor& kernel) {
        int64_t kd = kernel.size(2);
        Window3d win{{1, 1, 1},
                     dilations,
                     {kd, kernel.size(3), kernel.size(4)},
                     std::vector<int64_t>(6, 0)};
        win.outDepth = xp.size(2) - dilations[0] * (kd - 1);
        if (win.outDepth < 1)
          throw Error("the kernel (depth " + std::to_string(kd) +
                      ") does not fit the input " + c.in(0).describe());
        return conv3dTaps(xp, kernel, c.has(2) ? c.in(2) : Tensor(), win,
                          groups);
      });
}

/// MaxPool over [N, C, D, H, W] (MaxPool3d): a 2-D max pool per depth
/// tap (the depth padded with -inf, which no maximum takes), folded by
/// maximum (NaN kept, as PyTorch).
Tensor maxPool3dByTaps(const NodeContext& c, const Tensor& x) {
  bool ceilMode = c.getInt("ceil_mode", 0) != 0;
  Window3d win = window3d(c, x, c.getInts("kernel_shape"), ceilMode);
  return byDepthTaps(
      x, win, -std::numeric_limits<double>::infinity(),
      [&](int64_t, const Tensor& slices) {
        return maxPool2d(slices, {win.kernel[1], win.kernel[2]},
                         {win.strides[1], win.strides[2]},
                         {win.pads[1], win.pads[2], win.pads[4], win.pads[5]},
                         {win.dilations[1], win.dilations[2]}, ceilMode);
      },
      [](const Tensor& a, const Tensor& b) { return maximum(a, b); });
}

/// AveragePool over [N, C, D, H, W] (AvgPool3d: S3D's head): a window's
/// in-input positions are a box, so its count is the depth taps' count
/// times the 2-D window's. Each tap a 2-D average pool (the depth padded
/// with zeros, which add nothing), summed, then divided by each output
/// depth's count of taps: inside the input, or with count_include_pad
/// inside the padded input up to its end (PyTorch's rule, as the 2-D
/// pool's).
Tensor avgPool3dByTaps(const NodeContext& c, const Tensor& x) {
  bool ceilMode = c.getInt("ceil_mode", 0) != 0;
  bool includePad = c.getInt("count_include_pad", 0) != 0;
  if (c.attr("dilations"))
    throw Error("dilations are not supported for AveragePool");
  Window3d win = window3d(c, x, c.getInts("kernel_shape"), ceilMode);
  Tensor sum = byDepthTaps(
      x, win, 0.0,
      [&](int64_t, const Tensor& slices) {
        return avgPool2d(slices, {win.kernel[1], win.kernel[2]},
                         {win.strides[1], win.strides[2]},
                         {win.pads[1], win.pads[2], win.pads[4], win.pads[5]},
                         ceilMode, includePad);
      },
      [](const Tensor& a, const Tensor& b) { return add(a, b); });
  int64_t d = x.size(2), lo = win.pads[0], hi = win.pads[3];
  std::vector<float> counts;
  for (int64_t j = 0; j < win.outDepth; ++j) {
    int64_t start = j * win.strides[0] - lo,
            end = std::min(start + win.kernel[0], d + hi);
    if (!includePad) {
      start = std::max<int64_t>(start, 0);
      end = std::min(end, d);
    }
    counts.push_back(float(std::max<int64_t>(end - start, 1)));
  }
  Tensor divisor = Tensor::fromVector(counts, {1, 1, win.outDepth, 1, 1});
  if (sum.dtype() != DType::F32)
    divisor = cast(divisor, sum.dtype());
  return div(sum, divisor); // broadcast along N, C, H and W
}

void requireWindowRank(const char* op, const Tensor& x) {
  if (x.rank() != 4 && x.rank() != 3)
    throw Error(std::string(op) +
                ": only 1-D and 2-D windows (an [N, C, L] "
                "or [N, C, H, W] input; Conv, ConvTranspose and the pools "
                "also 3-D) are supported, got " +
                x.describe());
}

/// x as the 2-D window's input: [N, C, 1, L] for a 1-D one.
Tensor windowInput(const Tensor& x) {
  return isOneD(x) ? reshape(x, {x.size(0), x.size(1), 1, x.size(2)}) : x;
}

/// A 2-D window's result back to the node's rank.
Tensor windowOutput(const Tensor& y, bool oneD) {
  return oneD ? reshape(y, {y.size(0), y.size(1), y.size(3)}) : y;
}

std::vector<int64_t> pairAttr(const NodeContext& c, const char* name,
                              int64_t dflt, bool oneD = false) {
  std::vector<int64_t> v = c.getInts(name, oneD ? std::vector<int64_t>{dflt}
                                                : std::vector<int64_t>{dflt,
                                                                       dflt});
  if (oneD && v.size() == 1)
    v = {1, v[0]};
  if (v.size() != 2)
    throw Error(std::string(name) + " must have " + (oneD ? "1 value" : "2 values") +
                " for a " + (oneD ? "1-D" : "2-D") + " window, got " +
                std::to_string(v.size()));
  // Before anything divides by a stride (auto_pad, the output size).
  if (v[0] < 1 || v[1] < 1)
    throw Error(std::string(name) + " must be >= 1, got [" +
                std::to_string(v[0]) + ", " + std::to_string(v[1]) + "]");
  return v;
}

Tensor reduceAxes(const NodeContext& c, const std::string& op,
                  std::vector<int64_t> axes, bool hadAxes) {
  const Tensor& x = c.in(0);
  bool keep = c.getInt("keepdims", 1) != 0;
  if (axes.empty()) {
    if (hadAxes && c.getInt("noop_with_empty_axes", 0))
      return x;
    for (int64_t d = 0; d < x.rank(); ++d)
      axes.push_back(d);
  }
  // Integer sums fold by halving, whose steps follow the axis' length.
  bool integer = x.dtype() == DType::I64 || x.dtype() == DType::I32;
  if (integer && c.dynamicBatch &&
      std::any_of(axes.begin(), axes.end(),
                  [&](int64_t a) { return normalizeAxis(a, x.rank()) == 0; }))
    throw Error("a sum of integers " + x.describe() +
                " over the batch "
                "axis with a dynamic batch (--batch) is not supported (its "
                "halving steps follow the batch size); sum floats, or "
                "compile with a static batch");
  if (op == "ReduceSum")
    return sumOf(x, axes, keep);
  if (op == "ReduceMean")
    return mean(x, axes, keep);
  if (op == "ReduceMax")
    return amax(x, axes, keep);
  if (op == "ReduceL1") {
    Tensor magnitude = abs(x);
    return sumOf(magnitude, axes, keep);
  }
  if (op == "ReduceL2" || op == "ReduceSumSquare") {
    // Squares of f16 past 255 are inf: squared and summed in f32, as
    // PyTorch accumulates a half norm.
    bool half = x.dtype() == DType::F16 || x.dtype() == DType::BF16;
    Tensor wide = half ? cast(x, DType::F32) : x;
    Tensor square = wide * wide;
    Tensor s = sumOf(square, axes, keep);
    Tensor r = op == "ReduceL2" ? sqrt(s) : s;
    return half ? cast(r, x.dtype()) : r;
  }
  if (op == "ReduceLogSum") {
    Tensor s = sum(x, axes, keep);
    return log(s);
  }
  if (op == "ReduceProd")
    return foldAxes(x, axes, keep, true);
  if (op == "ReduceLogSumExp") {
    // log(sum(exp(x - m))) + m with m the max, taken as 0 where it is
    // infinite (a row of -inf gives -inf, as torch.logsumexp).
    Tensor m = amax(x, axes, /*keepdim=*/true);
    Tensor magnitude = abs(m);
    Tensor infinite = eq(magnitude, scalarOf(INFINITY, x.dtype()));
    Tensor shift = where(infinite, scalarOf(0.0, x.dtype()), m);
    Tensor centered = x - shift;
    Tensor e = exp(centered);
    Tensor s = sum(e, axes, keep);
    Tensor l = log(s);
    Tensor back = keep ? shift : reshape(shift, s.shape());
    return l + back;
  }
  return amin(x, axes, keep);
}

Tensor compareHandler(const std::string& op, const Tensor& a,
                      const Tensor& b) {
  if (op == "Equal")
    return eq(a, b);
  if (op == "Less")
    return lt(a, b);
  if (op == "LessOrEqual")
    return le(a, b);
  if (op == "Greater")
    return gt(a, b);
  return ge(a, b);
}

/// An activation of RNN, GRU and LSTM by its ONNX name (any case, as
/// onnxruntime reads them), taking its alpha and beta from the node's
/// activation_alpha / activation_beta lists in order, as far as they go,
/// for the activations that have those parameters; otherwise their ONNX
/// operator's defaults (Affine and ScaledTanh have none: they need them).
onnx_recurrent::Activation recurrentActivation(const std::string& name,
                                               const std::vector<float>& alphas,
                                               size_t* nextAlpha,
                                               const std::vector<float>& betas,
                                               size_t* nextBeta) {
  std::string lower;
  for (char ch : name)
    lower += char(std::tolower(static_cast<unsigned char>(ch)));
  auto param = [&](const std::vector<float>& list, size_t* next,
                   const char* what, std::optional<double> dflt) {
    if (*next < list.size())
      return double(list[(*next)++]);
    if (!dflt)
      throw Error("activation " + name + " needs a value in " + what);
    return *dflt;
  };
  using A = onnx_recurrent::Activation;
  if (lower == "sigmoid")
    return A([](const Tensor& x) { return sigmoid(x); });
  if (lower == "tanh")
    return A([](const Tensor& x) { return tanh(x); });
  if (lower == "relu")
    return A([](const Tensor& x) { return relu(x); });
  if (lower == "softsign")
    return A([](const Tensor& x) { return softsign(x); });
  if (lower == "softplus")
    return A([](const Tensor& x) { return softplus(x); });
  if (lower == "leakyrelu") {
    double alpha = param(alphas, nextAlpha, "activation_alpha", 0.01);
    return A([alpha](const Tensor& x) { return leakyRelu(x, alpha); });
  }
  if (lower == "thresholdedrelu") {
    double alpha = param(alphas, nextAlpha, "activation_alpha", 1.0);
    return A([alpha](const Tensor& x) {
      Tensor above = gt(x, scalarOf(alpha, x.dtype()));
      return where(above, x, scalarOf(0.0, x.dtype()));
    });
  }
  if (lower == "elu") {
    double alpha = param(alphas, nextAlpha, "activation_alpha", 1.0);
    return A([alpha](const Tensor& x) { return expLinear(x, alpha, 1.0); });
  }
  if (lower == "hardsigmoid") {
    double alpha = param(alphas, nextAlpha, "activation_alpha", 0.2);
    double beta = param(betas, nextBeta, "activation_beta", 0.5);
    return A([alpha, beta](const Tensor& x) {
      return hardSigmoid(x, alpha, beta);
    });
  }
  if (lower == "affine") {
    double alpha = param(alphas, nextAlpha, "activation_alpha", std::nullopt);
    double beta = param(betas, nextBeta, "activation_beta", std::nullopt);
    return A([alpha, beta](const Tensor& x) { return x * alpha + beta; });
  }
  if (lower == "scaledtanh") {
    double alpha = param(alphas, nextAlpha, "activation_alpha", std::nullopt);
    double beta = param(betas, nextBeta, "activation_beta", std::nullopt);
    return A([alpha, beta](const Tensor& x) { return tanh(x * beta) * alpha; });
  }
  throw Error("unknown activation '" + name +
              "' (ONNX's are Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
              "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, "
              "Softplus)");
}

/// RNN, GRU and LSTM (opsets 7 and 14: inputs X, W, R, B, sequence_lens,
/// initial_h, initial_c, P), built from the frontend's ops.
std::vector<Tensor> recurrentHandler(const NodeContext& c,
                                     onnx_recurrent::Cell cell) {
  using namespace onnx_recurrent;
  Layer layer;
  layer.cell = cell;
  layer.hiddenSize = c.getInt("hidden_size", 0);
  if (c.attr("hidden_size") && layer.hiddenSize <= 0)
    throw Error("hidden_size must be positive, got " +
                std::to_string(layer.hiddenSize));
  std::string dir = c.getString("direction", "forward");
  if (dir == "bidirectional")
    layer.numDirections = 2;
  else if (dir == "reverse")
    layer.reverse = true;
  else if (dir != "forward")
    throw Error("direction must be forward, reverse or bidirectional, got '" +
                dir + "'");
  int64_t layout = c.getInt("layout", 0);
  if (layout != 0 && layout != 1)
    throw Error("layout must be 0 or 1, got " + std::to_string(layout));
  layer.batchFirst = layout == 1;
  if (c.attr("clip"))
    layer.clip = c.getFloat("clip", 0.0f);
  layer.inputForget = c.getInt("input_forget", 0) != 0;
  layer.linearBeforeReset = c.getInt("linear_before_reset", 0) != 0;
  std::vector<std::string> names = c.getStrings("activations");
  int per = activationsPerDirection(cell);
  if (names.empty()) { // (a list of another length: build() refuses it)
    const char* defaults[] = {"Sigmoid", "Tanh", "Tanh"};
    for (int d = 0; d < layer.numDirections; ++d)
      for (int k = 0; k < per; ++k)
        names.push_back(cell == Cell::Rnn ? "Tanh" : defaults[k]);
  }
  std::vector<float> alphas = c.getFloats("activation_alpha");
  std::vector<float> betas = c.getFloats("activation_beta");
  size_t nextAlpha = 0, nextBeta = 0;
  for (const std::string& name : names)
    layer.activations.push_back(
        recurrentActivation(name, alphas, &nextAlpha, betas, &nextBeta));

  Operands in;
  in.x = c.in(0);
  in.w = c.in(1);
  in.r = c.in(2);
  auto optional = [&](size_t i) { return c.has(i) ? c.in(i) : Tensor(); };
  // A constant zero state is the absent one (build() checks its shape
  // first). PyTorch exports its default zero state as a constant of the
  // batch's shape, which a dynamic batch could not hold; a constant state
  // of other values cannot follow a dynamic batch either.
  auto isZero = [&](size_t i, const char* what) {
    if (!c.isConstant(i))
      return false;
    std::vector<float> v = c.in(i).toVector();
    bool zero = std::all_of(v.begin(), v.end(), [](float e) { return e == 0; });
    if (!zero && c.dynamicBatch)
      throw Error(std::string(what) + " is a constant " + c.in(i).describe() +
                  ", of one batch size; with a dynamic batch (--batch) an "
                  "initial state must be computed from the inputs (or be "
                  "zero)");
    return zero;
  };
  in.b = optional(3);
  in.initialH = optional(5);
  in.zeroInitialH = isZero(5, "initial_h");
  if (cell == Cell::Lstm) {
    in.initialC = optional(6);
    in.zeroInitialC = isZero(6, "initial_c");
    in.peepholes = optional(7);
  }
  if (c.has(4)) {
    // Every sequence as long as X's: the lengths say nothing. Shorter
    // ones would need masked steps (and, reversed, a per-sequence
    // reversal); modelc unrolls one length.
    std::vector<int64_t> lens = c.constInts(4, "sequence_lens");
    int64_t steps = in.x.rank() == 3 ? in.x.size(layer.batchFirst ? 1 : 0) : 0;
    int64_t batch = in.x.rank() == 3 ? in.x.size(layer.batchFirst ? 0 : 1) : 0;
    if (in.x.rank() == 3 && int64_t(lens.size()) != batch)
      throw Error("sequence_lens has " + std::to_string(lens.size()) +
                  " entries; X " + in.x.describe() + " holds " +
                  std::to_string(batch) + " sequences");
    for (int64_t len : lens)
      if (len != steps)
        throw Error("sequence_lens holds " + std::to_string(len) +
                    ", but X's sequences are " + std::to_string(steps) +
                    " long; modelc imports only sequences of X's full "
                    "length (variable lengths are not supported)");
  }
  Results out = build(layer, in);
  return {out.y, out.yH, out.yC};
}

/// The handlers, one per op type (opsets 13 to 17).
const std::unordered_map<std::string, Handler>& handlers() {
  static const std::unordered_map<std::string, Handler> table = [] {
    std::unordered_map<std::string, Handler> h;
    using R = std::vector<Tensor>;
    auto unary = [&](const char* name, Tensor (*fn)(const Tensor&)) {
      h[name] = [fn](const NodeContext& c) { return R{fn(c.in(0))}; };
    };
    unary("Relu", relu);
    unary("Sigmoid", sigmoid);
    unary("Tanh", tanh);
    unary("Erf", erf);
    unary("HardSwish", hardswish);
    unary("Sqrt", sqrt);
    unary("Neg", neg);
    unary("Exp", exp);
    unary("Log", log);
    unary("Abs", abs);
    unary("Sin", sin);
    unary("Cos", cos);
    unary("Tan", tan);
    unary("Asin", asin);
    unary("Acos", acos);
    unary("Atan", atan);
    unary("Sinh", sinh);
    unary("Cosh", cosh);
    unary("Asinh", asinh);
    unary("Acosh", acosh);
    unary("Atanh", atanh);
    unary("Not", logicalNot);
    auto binary = [&](const char* name,
                      Tensor (*fn)(const Tensor&, const Tensor&)) {
      h[name] = [fn](const NodeContext& c) { return R{fn(c.in(0), c.in(1))}; };
    };
    binary("Add", add);
    binary("Sub", sub);
    binary("Mul", mul);
    binary("Div", div);
    h["Pow"] = [](const NodeContext& c) {
      Tensor e = c.in(1);
      if (e.dtype() != c.in(0).dtype())
        e = cast(e, c.in(0).dtype());
      return R{pow(c.in(0), e)};
    };
    for (const char* name : {"Max", "Min", "Sum"})
      h[name] = [op = std::string(name)](const NodeContext& c) {
        Tensor acc = c.in(0);
        for (size_t i = 1; i < c.numInputs(); ++i)
          acc = op == "Max" ? maximum(acc, c.in(i))
                : op == "Min" ? minimum(acc, c.in(i))
                              : add(acc, c.in(i));
        return R{acc};
      };
    for (const char* name :
         {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
      h[name] = [op = std::string(name)](const NodeContext& c) {
        return R{compareHandler(op, c.in(0), c.in(1))};
      };
    h["Reciprocal"] = [](const NodeContext& c) {
      return R{div(scalarOf(1.0, c.in(0).dtype()), c.in(0))};
    };
    h["LeakyRelu"] = [](const NodeContext& c) {
      return R{leakyRelu(c.in(0), c.getFloat("alpha", 0.01f))};
    };
    // Activations made of other ops (no mc op of their own): their
    // ONNX definitions, with PyTorch's accuracy near 0.
    h["HardSigmoid"] = [](const NodeContext& c) {
      return R{hardSigmoid(c.in(0), c.getFloat("alpha", 0.2f),
                           c.getFloat("beta", 0.5f))};
    };
    h["Elu"] = [](const NodeContext& c) {
      return R{expLinear(c.in(0), c.getFloat("alpha", 1.0f), 1.0)};
    };
    h["Celu"] = [](const NodeContext& c) {
      double alpha = c.getFloat("alpha", 1.0f);
      if (!(alpha != 0.0))
        throw Error("alpha must be nonzero, got " + std::to_string(alpha));
      return R{expLinear(c.in(0), alpha, alpha)};
    };
    h["Selu"] = [](const NodeContext& c) {
      Tensor e = expLinear(c.in(0), c.getFloat("alpha", 1.67326319217681884765625f),
                           1.0);
      return R{e * double(c.getFloat("gamma", 1.05070102214813232421875f))};
    };
    h["Softplus"] = [](const NodeContext& c) { return R{softplus(c.in(0))}; };
    h["Softsign"] = [](const NodeContext& c) { return R{softsign(c.in(0))}; };
    h["RNN"] = [](const NodeContext& c) {
      return recurrentHandler(c, onnx_recurrent::Cell::Rnn);
    };
    h["GRU"] = [](const NodeContext& c) {
      return recurrentHandler(c, onnx_recurrent::Cell::Gru);
    };
    h["LSTM"] = [](const NodeContext& c) {
      return recurrentHandler(c, onnx_recurrent::Cell::Lstm);
    };
    h["Resize"] = [](const NodeContext& c) {
      Tensor x = c.in(0);
      std::string mode = c.getString("mode", "nearest");
      std::string transform =
          c.getString("coordinate_transformation_mode", "half_pixel");
      std::string nearestMode =
          c.getString("nearest_mode", "round_prefer_floor");
      if (mode != "nearest" && mode != "linear" && mode != "cubic")
        throw Error("mode '" + mode +
                    "' is not supported (nearest, linear and cubic are)");
      if (transform != "half_pixel" && transform != "pytorch_half_pixel" &&
          transform != "align_corners" && transform != "asymmetric")
        throw Error("coordinate_transformation_mode '" + transform +
                    "' is not supported (half_pixel, pytorch_half_pixel, "
                    "align_corners and asymmetric are)");
      if (nearestMode != "round_prefer_floor" &&
          nearestMode != "round_prefer_ceil" && nearestMode != "floor" &&
          nearestMode != "ceil")
        throw Error("nearest_mode '" + nearestMode + "' is not supported");
      ResizeMode how;
      how.kind = mode == "cubic"    ? ResizeMode::Cubic
                 : mode == "linear" ? ResizeMode::Linear
                                    : ResizeMode::Nearest;
      how.transform = transform;
      how.nearestMode = nearestMode;
      how.cubicA = c.getFloat("cubic_coeff_a", -0.75f);
      how.excludeOutside = c.getInt("exclude_outside", 0) != 0;
      if (how.excludeOutside && how.kind != ResizeMode::Cubic)
        throw Error("exclude_outside=1 is supported with mode 'cubic' only "
                    "(got '" +
                    mode + "')");
      if (x.dtype() != DType::F32 && x.dtype() != DType::F16 &&
          x.dtype() != DType::BF16)
        throw Error("Resize of " + x.describe() + ": modelc resizes float "
                    "tensors");
      int64_t rank = x.rank();
      std::vector<double> scales;
      std::vector<int64_t> sizes;
      if (c.has(2) && c.in(2).numel() > 0) {
        if (!c.isConstant(2))
          throw Error("input 'scales' must be a compile-time constant; "
                      "modelc needs static shapes");
        std::vector<float> v = c.in(2).toVector();
        scales.assign(v.begin(), v.end());
      } else if (c.has(3) && c.in(3).numel() > 0) {
        sizes = c.constInts(3, "sizes");
      } else {
        throw Error("needs 'scales' or 'sizes'");
      }
      if (int64_t(scales.size() + sizes.size()) != rank)
        throw Error("has " + std::to_string(scales.size() + sizes.size()) +
                    " scales or sizes for input " + x.describe() +
                    "; ONNX asks one per dimension");
      for (int64_t d = 0; d < rank; ++d) {
        int64_t in = x.size(d);
        double scale;
        int64_t out;
        if (!scales.empty()) {
          scale = scales[size_t(d)];
          if (!(scale > 0) || !std::isfinite(scale))
            throw Error("scale " + std::to_string(scale) + " of dim " +
                        std::to_string(d) + " must be finite and > 0");
          out = int64_t(std::floor(double(in) * scale));
        } else {
          out = sizes[size_t(d)];
          if (out < 1)
            throw Error("size " + std::to_string(out) + " of dim " +
                        std::to_string(d) + " must be >= 1");
          scale = double(out) / double(in);
        }
        if (out < 1)
          throw Error("dim " + std::to_string(d) + " of " + x.describe() +
                      " resizes to " + std::to_string(out) + " elements");
        if (out == in && scale == 1.0)
          continue;
        if (in == 0)
          throw Error("cannot resize the empty dim " + std::to_string(d) +
                      " of " + x.describe());
        if (how.kind != ResizeMode::Nearest && x.dtype() != DType::F32)
          x = cast(x, DType::F32);
        x = resizeAxis(x, d, out, scale, how);
      }
      return R{x.dtype() == c.in(0).dtype() ? x : cast(x, c.in(0).dtype())};
    };
    // Floor, Ceil and Round of floats, exact, from a truncating cast
    // (floorOf). ONNX defines them for floats only.
    for (const char* name : {"Floor", "Ceil", "Round"})
      h[name] = [op = std::string(name)](const NodeContext& c) {
        const Tensor& x = c.in(0);
        if (!rt::isFloat(x.dtype()))
          throw Error(op + " of " + x.describe() + ": ONNX defines " + op +
                      " for float tensors");
        if (op == "Floor")
          return R{floorOf(x)};
        return R{op == "Ceil" ? ceilOf(x) : roundOf(x)};
      };
    // GatherElements (torch.gather): out[i] = data[i with i_axis replaced
    // by indices[i]], as a gather from the flattened data at the linear
    // index base[i] + indices[i] * stride(axis). An index outside
    // [-n, n) becomes one past the data, so the gather reports it (a
    // constant one is reported here) instead of reading another row.
    h["GatherElements"] = [](const NodeContext& c) {
      const Tensor& data = c.in(0);
      const Tensor& idx = c.in(1);
      if (idx.dtype() != DType::I32 && idx.dtype() != DType::I64)
        throw Error("indices " + idx.describe() + " must be int32 or int64");
      if (idx.rank() != data.rank() || data.rank() == 0)
        throw Error("indices " + idx.describe() + " must have the rank of "
                    "data " + data.describe() + " (and that rank >= 1)");
      int64_t rank = data.rank();
      int64_t axis = normalizeAxis(c.getInt("axis", 0), rank);
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && idx.size(d) > data.size(d))
          throw Error("indices " + idx.describe() + " is larger than data " +
                      data.describe() + " in dim " + std::to_string(d));
      int64_t n = data.size(axis);
      if (c.isConstant(1)) {
        for (int64_t i : c.constInts(1, "indices"))
          wrapConstIndex(i, n, axis, data);
      }
      Tensor outside;
      Tensor position = wrapIndices(idx, n, &outside);
      if (c.dynamicBatch)
        return R{gatherElementsBySelect(data, position, outside, axis,
                                        c.isConstant(0))};
      std::vector<int64_t> stride(size_t(rank), 1);
      for (int64_t d = rank - 2; d >= 0; --d)
        stride[size_t(d)] = stride[size_t(d + 1)] * data.size(d + 1);
      int64_t total = stride[0] * data.size(0);
      Tensor base = Tensor::empty(idx.shape(), DType::I64);
      int64_t count = base.numel();
      for (int64_t i = 0; i < count; ++i) {
        int64_t rest = i, offset = 0;
        for (int64_t d = rank - 1; d >= 0; --d) {
          int64_t coord = rest % idx.size(d);
          rest /= idx.size(d);
          if (d != axis)
            offset += coord * stride[size_t(d)];
        }
        base.data<int64_t>()[i] = offset;
      }
      Tensor step = position * double(stride[size_t(axis)]);
      Tensor linear = base + step;
      Tensor checked = where(outside, scalarOf(double(total), DType::I64),
                             linear);
      Tensor flat = reshape(data, {total});
      return R{gather(flat, checked, 0)};
    };
    // GatherND (torch.diagonal's export, advanced indexing): each index
    // tuple (indices' last dim, k values) picks a slice of data after its
    // first batch_dims dims, as one gather of rows: data viewed as
    // [B * P, rest...] (B the batch dims' product, P the k indexed dims'),
    // the row of each tuple b * P + sum_j i_j * stride_j computed from the
    // indices (negative ones wrapped; one out of range made one past the
    // rows, so the gather reports it, and refused at import when constant).
    h["GatherND"] = [](const NodeContext& c) {
      const Tensor& data = c.in(0);
      const Tensor& idx = c.in(1);
      int64_t b = c.getInt("batch_dims", 0);
      if (idx.dtype() != DType::I64 && idx.dtype() != DType::I32)
        throw Error("indices " + idx.describe() + " must be int64 or int32");
      if (idx.rank() < 1 || b < 0 || b >= idx.rank() || b >= data.rank())
        throw Error("indices " + idx.describe() + " and batch_dims " +
                    std::to_string(b) + " do not fit data " + data.describe());
      int64_t k = idx.size(-1);
      if (k < 1 || b + k > data.rank())
        throw Error("indices " + idx.describe() + " index " +
                    std::to_string(k) + " dims of data " + data.describe() +
                    " after " + std::to_string(b) + " batch dims");
      for (int64_t d = 0; d < b; ++d)
        if (idx.size(d) != data.size(d))
          throw Error("indices " + idx.describe() + " and data " +
                      data.describe() + " differ in batch dim " +
                      std::to_string(d));
      if (c.dynamicBatch && !c.isConstant(0))
        throw Error("GatherND of a computed value with a dynamic batch "
                    "(--batch) is not supported: its rows would mix the "
                    "batch with other dims");
      Shape tuples(idx.shape().begin(), idx.shape().end() - 1);
      Shape rowShape{1};
      int64_t batch = 1, per = 1;
      for (int64_t d = 0; d < data.rank(); ++d) {
        if (d < b)
          batch *= data.size(d);
        else if (d < b + k)
          per *= data.size(d);
        else
          rowShape.push_back(data.size(d));
      }
      rowShape[0] = batch * per;
      if (c.isConstant(1)) {
        std::vector<int64_t> all = c.constInts(1, "indices");
        for (size_t e = 0; e < all.size(); ++e) {
          int64_t d = b + int64_t(e) % k;
          wrapConstIndex(all[e], data.size(d), d, data);
        }
      }
      // No tuples: an empty result (also where a dim of data is 0).
      if (rt::numElements(tuples) == 0) {
        Shape shape = tuples;
        shape.insert(shape.end(), rowShape.begin() + 1, rowShape.end());
        return R{Tensor::zeros(shape, data.dtype())};
      }
      Tensor wide = idx.dtype() == DType::I64 ? idx : cast(idx, DType::I64);
      // Each tuple's row within its batch entry, and whether it is outside
      // (built from the first index: no constant of the tuples' shape,
      // which under --batch would hold one batch size).
      Tensor row, outside;
      for (int64_t j = 0; j < k; ++j) {
        int64_t n = data.size(b + j), stride = 1;
        for (int64_t e = j + 1; e < k; ++e)
          stride *= data.size(b + e);
        Tensor i = reshape(sliceDim(wide, -1, j, j + 1), tuples);
        Tensor bad;
        Tensor term = wrapIndices(i, n, &bad) * double(stride);
        outside = j == 0 ? bad : where(outside, scalarOf(1.0, DType::I1), bad);
        row = j == 0 ? term : row + term;
      }
      // Plus each tuple's batch entry times P.
      if (b > 0) {
        Tensor base = Tensor::empty(tuples, DType::I64);
        int64_t inner = base.numel() / batch;
        for (int64_t t = 0; t < base.numel(); ++t)
          base.data<int64_t>()[t] = (t / inner) * per;
        row = row + base;
      }
      Tensor checked =
          where(outside, scalarOf(double(batch * per), DType::I64), row);
      return R{gather(reshape(data, rowShape), checked, 0)};
    };
    // GridSample (F.grid_sample: spatial transformers, flow warping,
    // deformable attention), bilinear and nearest, zeros, border and
    // reflection padding, either align_corners, as PyTorch computes it:
    // the grid unnormalized to pixel coordinates (border: clamped;
    // reflection: reflected, then clamped), then per corner a gather from
    // the flattened input at (n * C + c) * H * W + y * W + x, the corners
    // outside the input (zeros) selected away, not multiplied by 0, so
    // an inf at the border stays out. Bicubic is refused.
    h["GridSample"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      const Tensor& grid = c.in(1);
      std::string mode = c.getString("mode", "bilinear");
      std::string padding = c.getString("padding_mode", "zeros");
      bool corners = c.getInt("align_corners", 0) != 0;
      if (mode != "bilinear" && mode != "nearest")
        throw Error("mode '" + mode +
                    "' is not supported (bilinear and "
                    "nearest are)");
      if (padding != "zeros" && padding != "border" && padding != "reflection")
        throw Error("unknown padding_mode '" + padding + "'");
      if (x.rank() != 4 || grid.rank() != 4 || grid.size(3) != 2 ||
          grid.size(0) != x.size(0))
        throw Error("needs X [N, C, H, W] and grid [N, H_out, W_out, 2], got " +
                    x.describe() + " and " + grid.describe());
      if (!rt::isFloat(x.dtype()) || grid.dtype() != x.dtype())
        throw Error("X and grid must be floats of one type, got " +
                    x.describe() + " and " + grid.describe());
      if (c.dynamicBatch)
        throw Error("GridSample with a dynamic batch (--batch) is not "
                    "supported: its gather offsets hold one batch size");
      int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
      int64_t ho = grid.size(1), wo = grid.size(2);
      // Pixel coordinates of one axis (g: [N, H_out, W_out]).
      auto pixels = [&](const Tensor& g, int64_t size) {
        Tensor p = corners ? ((g + 1.0) * 0.5) * double(size - 1)
                           : ((g + 1.0) * double(size) - 1.0) * 0.5;
        if (padding == "border")
          return clamp(p, 0.0, double(size - 1));
        if (padding == "reflection") {
          // PyTorch's reflect_coordinates over [lo, hi] (twice the
          // bounds: [0, 2(size-1)] with align_corners, else
          // [-1, 2 size - 1]), then clamped.
          double lo = corners ? 0.0 : -0.5;
          double span = corners ? double(size - 1) : double(size);
          if (span <= 0)
            return Tensor::zeros(p.shape(), p.dtype());
          Tensor a = abs(p - lo);
          Tensor flips = floorOf(a / span);
          Tensor extra = a - flips * span;
          Tensor odd = sub(flips, floorOf(flips * 0.5) * 2.0);
          Tensor r = where(eq(odd, scalarOf(0.0, p.dtype())), extra + lo,
                           (extra * -1.0) + (span + lo));
          return clamp(r, 0.0, double(size - 1));
        }
        return p;
      };
      Tensor gx = reshape(sliceDim(grid, 3, 0, 1), {n, ho, wo});
      Tensor gy = reshape(sliceDim(grid, 3, 1, 2), {n, ho, wo});
      Tensor px = pixels(gx, w), py = pixels(gy, h);
      Tensor flat = reshape(x, {n * ch * h * w});
      Tensor base = Tensor::empty({n, ch, 1}, DType::I64);
      for (int64_t i = 0; i < n * ch; ++i)
        base.data<int64_t>()[i] = i * h * w;
      // The input at integer coordinates (xi, yi) (float tensors of whole
      // numbers), times `weight`, and 0 where the corner is outside.
      auto corner = [&](const Tensor& xi, const Tensor& yi,
                        const Tensor& weight) {
        Tensor zero = scalarOf(0.0, xi.dtype());
        Tensor inside =
            where(ge(xi, zero),
                  where(le(xi, scalarOf(double(w - 1), xi.dtype())),
                        where(ge(yi, zero),
                              le(yi, scalarOf(double(h - 1), xi.dtype())),
                              scalarOf(0.0, DType::I1)),
                        scalarOf(0.0, DType::I1)),
                  scalarOf(0.0, DType::I1));
        Tensor cx = cast(clamp(xi, 0.0, double(w - 1)), DType::I64);
        Tensor cy = cast(clamp(yi, 0.0, double(h - 1)), DType::I64);
        Tensor at = reshape(cy * double(w) + cx, {n, 1, ho * wo});
        Tensor v = reshape(gather(flat, at + base, 0), {n, ch, ho, wo});
        Tensor wt = reshape(weight, {n, 1, ho, wo});
        return where(reshape(inside, {n, 1, ho, wo}), v * wt,
                     scalarOf(0.0, x.dtype()));
      };
      // A grid point that is NaN or infinite samples nothing: NaN (PyTorch
      // gives NaN in bilinear zeros mode and an edge pixel or 0 in others,
      // by how its kernels happen to compare and clamp).
      Tensor inf = scalarOf(INFINITY, x.dtype());
      Tensor finite =
          where(lt(abs(gx), inf), lt(abs(gy), inf), scalarOf(0.0, DType::I1));
      auto valid = [&](const Tensor& sampled) {
        return where(reshape(finite, {n, 1, ho, wo}), sampled,
                     scalarOf(NAN, x.dtype()));
      };
      if (mode == "nearest") {
        Tensor one = Tensor::full({n, ho, wo}, 1.0, x.dtype());
        return R{valid(corner(roundOf(px), roundOf(py), one))};
      }
      // PyTorch's corners and weights: nw, ne, sw, se, summed in order.
      Tensor x0 = floorOf(px), y0 = floorOf(py);
      Tensor x1 = x0 + 1.0, y1 = y0 + 1.0;
      Tensor sum = corner(x0, y0, (x1 - px) * (y1 - py));
      sum = sum + corner(x1, y0, (px - x0) * (y1 - py));
      sum = sum + corner(x0, y1, (x1 - px) * (py - y0));
      sum = sum + corner(x1, y1, (px - x0) * (py - y0));
      return R{valid(sum)};
    };
    // EyeLike (torch.diagonal's export): ones on diagonal k of a 2-D
    // tensor of the input's shape, in `dtype` (default the input's): a
    // constant.
    h["EyeLike"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      if (x.rank() != 2)
        throw Error("needs a 2-D input, got " + x.describe());
      DType dtype = c.attr("dtype")
                        ? dtypeOf(int(c.getInt("dtype", 0)), "dtype")
                        : x.dtype();
      int64_t rows = x.size(0), cols = x.size(1), k = c.getInt("k", 0);
      std::vector<float> eye(size_t(rows * cols), 0.0f);
      for (int64_t i = 0; i < rows; ++i)
        if (i + k >= 0 && i + k < cols)
          eye[size_t(i * cols + i + k)] = 1.0f;
      Tensor t = Tensor::fromVector(eye, {rows, cols});
      return R{dtype == DType::F32 ? t : cast(t, dtype)};
    };
    // OneHot (F.one_hot): `on` where an index equals its position along the
    // inserted axis, else `off` (values = [off, on]), by one compare with
    // a range broadcast along that axis. depth must be a constant; negative
    // indices count from depth's end; an index outside [-depth, depth)
    // gives a row of `off`, as the spec says.
    h["OneHot"] = [](const NodeContext& c) {
      Tensor idx = c.in(0);
      double d = c.constScalar(1, "depth");
      if (!(d >= 1) || d > double(std::numeric_limits<int32_t>::max()))
        throw Error("depth must be a number >= 1, got " + std::to_string(d));
      int64_t depth = int64_t(d);
      const Tensor& values = c.in(2);
      if (values.numel() != 2)
        throw Error("values must hold [off, on], got " + values.describe());
      int64_t rank = idx.rank() + 1;
      int64_t axis = normalizeAxis(c.getInt("axis", -1), rank);
      Tensor wrapped = wrapIndices(idx, depth);
      Shape along(size_t(rank), 1);
      along[size_t(axis)] = depth;
      Tensor positions = Tensor::empty(along, DType::I64);
      for (int64_t i = 0; i < depth; ++i)
        positions.data<int64_t>()[i] = i;
      Tensor hot = eq(unsqueeze(wrapped, axis), positions);
      Tensor flat = reshape(values, {2});
      Tensor off = reshape(sliceDim(flat, 0, 0, 1), {});
      Tensor on = reshape(sliceDim(flat, 0, 1, 2), {});
      return R{where(hot, on, off)};
    };
    // ScatterElements (Tensor.scatter / scatter_add: one-hot targets,
    // index_put along an axis): no scatter op; for each of the m index
    // slices j along the axis (in order, so the last write wins, and
    // reductions apply in order as onnxruntime does), one select over
    // data's shape where the position along the axis equals the index:
    // m elementwise passes, so m is capped at 64. Indices smaller than
    // data in the other dims are padded with -1 (matching nothing). An
    // index outside [-n, n) would match nothing and be lost: the indices
    // also feed a gather from n zeros, which reports it at run time (a
    // constant one is refused here).
    h["ScatterElements"] = [](const NodeContext& c) {
      const Tensor& data = c.in(0);
      const Tensor& idx = c.in(1);
      const Tensor& updates = c.in(2);
      std::string reduction = scatterReduction(c);
      if (idx.dtype() != DType::I64 && idx.dtype() != DType::I32)
        throw Error("indices " + idx.describe() + " must be int64 or int32");
      int64_t rank = data.rank();
      if (rank == 0 || idx.rank() != rank || updates.shape() != idx.shape() ||
          updates.dtype() != data.dtype())
        throw Error("indices " + idx.describe() + " and updates " +
                    updates.describe() + " must have one shape, of data " +
                    data.describe() + "'s rank and dtype");
      int64_t axis = normalizeAxis(c.getInt("axis", 0), rank);
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis && idx.size(d) > data.size(d))
          throw Error("indices " + idx.describe() + " are larger than data " +
                      data.describe() + " in dim " + std::to_string(d));
      if (reduction != "none" && data.dtype() == DType::I1)
        throw Error("reduction '" + reduction + "' of bool data " +
                    data.describe() + " is not supported (numbers are)");
      if (axis == 0 && c.dynamicBatch)
        throw Error("ScatterElements along the batch axis (axis 0) with a "
                    "dynamic batch (--batch) is not supported (one select "
                    "per index entry along it); along other axes it is");
      int64_t n = data.size(axis), m = idx.size(axis);
      if (m > 64)
        throw Error("indices " + idx.describe() + " hold " + std::to_string(m) +
                    " entries along axis " + std::to_string(axis) +
                    "; modelc scatters with one "
                    "select per entry and takes at most 64");
      if (c.isConstant(1))
        for (int64_t v : c.constInts(1, "indices"))
          wrapConstIndex(v, n, axis, data);
      if (m == 0 || idx.numel() == 0)
        return R{data};
      Tensor outside;
      Tensor wrapped = wrapIndices(idx, n, &outside);
      // The run-time range check: a gather from n zeros at each index
      // (one past them where outside), which reports one outside.
      Tensor checkIdx = where(outside, scalarOf(double(n), DType::I64),
                              scalarOf(0.0, DType::I64));
      // (-0.0: x + -0.0 is x for every x, -0.0 included.)
      Tensor probe = gather(Tensor::full({n}, -0.0, data.dtype()),
                            reshape(checkIdx, {idx.numel()}), 0);
      // Padded to data's shape in the other dims (-1: no position).
      std::vector<int64_t> low(size_t(rank), 0), high(size_t(rank), 0);
      for (int64_t d = 0; d < rank; ++d)
        if (d != axis)
          high[size_t(d)] = data.size(d) - idx.size(d);
      Shape along(size_t(rank), 1);
      along[size_t(axis)] = n;
      Tensor positions = Tensor::empty(along, DType::I64);
      for (int64_t i = 0; i < n; ++i)
        positions.data<int64_t>()[i] = i;
      Tensor acc = data;
      for (int64_t j = 0; j < m; ++j) {
        Tensor ij = pad(sliceDim(wrapped, axis, j, j + 1), low, high, -1.0);
        Tensor uj = pad(sliceDim(updates, axis, j, j + 1), low, high, 0.0);
        Tensor hit = eq(positions, ij); // broadcast along the axis
        Tensor u = broadcastTo(uj, data.shape());
        Tensor value = reduction == "add"   ? add(acc, u)
                       : reduction == "mul" ? mul(acc, u)
                                            : u;
        acc = where(hit, value, acc);
      }
      // The probe's first element (-0.0, 0 or false) joins the result, so
      // the gather that checks every index runs.
      Tensor first = reshape(sliceDim(probe, 0, 0, 1), {});
      if (data.dtype() == DType::I1)
        return R{where(first, scalarOf(1.0, DType::I1), acc)};
      return R{acc + first};
    };
    // PRelu: x where x >= 0, slope * x below (slope broadcast to x, as
    // ONNX's unidirectional broadcast).
    h["PRelu"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      Tensor negative = lt(x, scalarOf(0.0, x.dtype()));
      Tensor scaled = x * c.in(1);
      return R{where(negative, scaled, x)};
    };
    // DepthToSpace (pixel_shuffle) and SpaceToDepth: a reshape, a
    // transpose and a reshape, in ONNX's DCR and CRD orders.
    h["DepthToSpace"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      int64_t b = c.getInt("blocksize", 0);
      std::string mode = c.getString("mode", "DCR");
      if (x.rank() != 4)
        throw Error("needs an [N, C, H, W] input, got " + x.describe());
      if (b < 1 || x.size(1) % (b * b) != 0)
        throw Error("blocksize " + std::to_string(b) + " must be >= 1 and "
                    "its square must divide the channels of " +
                    x.describe());
      if (mode != "DCR" && mode != "CRD")
        throw Error("mode '" + mode + "' is not DCR or CRD");
      int64_t n = x.size(0), ch = x.size(1) / (b * b), h = x.size(2),
              w = x.size(3);
      Tensor split = mode == "DCR" ? reshape(x, {n, b, b, ch, h, w})
                                   : reshape(x, {n, ch, b, b, h, w});
      Tensor moved = mode == "DCR" ? transpose(split, {0, 3, 4, 1, 5, 2})
                                   : transpose(split, {0, 1, 4, 2, 5, 3});
      return R{reshape(moved, {n, ch, h * b, w * b})};
    };
    h["SpaceToDepth"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      int64_t b = c.getInt("blocksize", 0);
      if (x.rank() != 4)
        throw Error("needs an [N, C, H, W] input, got " + x.describe());
      if (b < 1 || x.size(2) % b != 0 || x.size(3) % b != 0)
        throw Error("blocksize " + std::to_string(b) + " must be >= 1 and "
                    "divide the height and width of " + x.describe());
      int64_t n = x.size(0), ch = x.size(1), h = x.size(2) / b,
              w = x.size(3) / b;
      Tensor split = reshape(x, {n, ch, h, b, w, b});
      Tensor moved = transpose(split, {0, 3, 5, 1, 2, 4});
      return R{reshape(moved, {n, ch * b * b, h, w})};
    };
    h["IsNaN"] = [](const NodeContext& c) { return R{ne(c.in(0), c.in(0))}; };
    h["IsInf"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      bool negative = c.getInt("detect_negative", 1) != 0;
      bool positive = c.getInt("detect_positive", 1) != 0;
      if (!negative && !positive)
        return R{lt(x, scalarOf(-INFINITY, x.dtype()))}; // all false
      Tensor m = negative && positive ? abs(x) : x;
      double inf = negative && !positive ? -INFINITY : INFINITY;
      return R{eq(m, scalarOf(inf, x.dtype()))};
    };
    h["Sign"] = [](const NodeContext& c) {
      // 1, -1, else 0 (NaN included), as torch.sign and onnxruntime.
      const Tensor& x = c.in(0);
      DType t = x.dtype();
      Tensor positive = gt(x, scalarOf(0.0, t));
      Tensor negative = lt(x, scalarOf(0.0, t));
      Tensor low = where(negative, scalarOf(-1.0, t), scalarOf(0.0, t));
      return R{where(positive, scalarOf(1.0, t), low)};
    };
    auto requireBool = [](const NodeContext& c) {
      for (size_t i = 0; i < 2; ++i)
        if (c.in(i).dtype() != DType::I1)
          throw Error("operand " + std::to_string(i) + " is " +
                      c.in(i).describe() + "; the logical ops take bool");
    };
    h["And"] = [requireBool](const NodeContext& c) {
      requireBool(c);
      return R{where(c.in(0), c.in(1), scalarOf(0.0, DType::I1))};
    };
    h["Or"] = [requireBool](const NodeContext& c) {
      requireBool(c);
      return R{where(c.in(0), scalarOf(1.0, DType::I1), c.in(1))};
    };
    h["Xor"] = [requireBool](const NodeContext& c) {
      requireBool(c);
      Tensor notB = logicalNot(c.in(1));
      return R{where(c.in(0), notB, c.in(1))};
    };
    h["Tile"] = [](const NodeContext& c) {
      Tensor x = c.in(0);
      std::vector<int64_t> repeats = c.constInts(1, "repeats");
      if (int64_t(repeats.size()) != x.rank())
        throw Error("repeats has " + std::to_string(repeats.size()) +
                    " values; " + x.describe() + " needs " +
                    std::to_string(x.rank()));
      for (int64_t d = 0; d < x.rank(); ++d) {
        int64_t r = repeats[size_t(d)];
        if (r < 0)
          throw Error("repeats must be >= 0, got " + std::to_string(r));
        if (r == 1)
          continue;
        // The rows of axis d, r times over.
        int64_t n = x.size(d);
        x = gatherAlong(x, d, n * r, [n](int64_t i) { return i % n; });
      }
      return R{x};
    };
    // ArgMax / ArgMin: the first (or, select_last_index, the last) index
    // where x equals its extreme along the axis; NaN counts as the extreme,
    // as in PyTorch.
    for (const char* name : {"ArgMax", "ArgMin"})
      h[name] = [isMax = std::string(name) == "ArgMax"](const NodeContext& c) {
        const Tensor& x = c.in(0);
        if (x.rank() == 0)
          throw Error("needs a tensor of rank >= 1, got " + x.describe());
        int64_t axis = normalizeAxis(c.getInt("axis", 0), x.rank());
        bool keep = c.getInt("keepdims", 1) != 0;
        bool last = c.getInt("select_last_index", 0) != 0;
        int64_t n = x.size(axis);
        if (n == 0)
          throw Error("dim " + std::to_string(axis) + " of " + x.describe() +
                      " is empty: it has no extreme");
        Tensor m = isMax ? amax(x, {axis}, true) : amin(x, {axis}, true);
        Tensor hit = eq(x, m);
        if (rt::isFloat(x.dtype())) {
          Tensor nan = ne(x, x);
          hit = where(nan, scalarOf(1.0, DType::I1), hit);
        }
        Shape iotaShape{n};
        for (int64_t d = axis + 1; d < x.rank(); ++d)
          iotaShape.push_back(1);
        Tensor iota = Tensor::empty(iotaShape, DType::I64);
        for (int64_t i = 0; i < n; ++i)
          iota.data<int64_t>()[i] = i;
        Tensor miss = scalarOf(last ? -1.0 : double(n), DType::I64);
        Tensor index = where(hit, iota, miss);
        return R{last ? amax(index, {axis}, keep) : amin(index, {axis}, keep)};
      };
    // TopK (opset 11 on): the frontend's topk, sorted whatever `sorted`
    // says (any order is allowed with sorted=0).
    h["TopK"] = [](const NodeContext& c) {
      std::vector<int64_t> k = c.constInts(1, "K");
      if (k.size() != 1)
        throw Error("K must hold one value, got " + std::to_string(k.size()));
      auto [values, indices] = topk(c.in(0), k[0], c.getInt("axis", -1),
                                    c.getInt("largest", 1) != 0);
      return R{values, indices};
    };
    h["Trilu"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      if (x.rank() < 2)
        throw Error("needs a tensor of rank >= 2, got " + x.describe());
      int64_t k = c.has(1) ? static_cast<int64_t>(c.constScalar(1, "k")) : 0;
      bool upper = c.getInt("upper", 1) != 0;
      int64_t rows = x.size(x.rank() - 2), cols = x.size(x.rank() - 1);
      Tensor keep = Tensor::empty({rows, cols}, DType::I1);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          keep.data<uint8_t>()[i * cols + j] =
              upper ? (j - i >= k) : (j - i <= k);
      return R{where(keep, x, scalarOf(0.0, x.dtype()))};
    };
    h["Mod"] = [](const NodeContext& c) {
      const Tensor& a = c.in(0);
      const Tensor& b = c.in(1);
      if (a.dtype() != DType::I32 && a.dtype() != DType::I64)
        throw Error("Mod of " + a.describe() +
                    ": modelc computes Mod of integers (int32, int64)");
      // The C remainder (fmod=1), a - b * trunc(a / b); Python's (fmod=0,
      // the default) adds b where the remainder's sign is not b's.
      Tensor q = div(a, b);
      Tensor p = mul(q, b);
      Tensor r = sub(a, p);
      if (c.getInt("fmod", 0) != 0)
        return R{r};
      Tensor zero = scalarOf(0.0, a.dtype());
      Tensor rNegative = lt(r, zero);
      Tensor bNegative = lt(b, zero);
      Tensor bPositive = logicalNot(bNegative);
      Tensor signsDiffer = where(rNegative, bPositive, bNegative);
      Tensor nonzero = ne(r, zero);
      Tensor fix = where(nonzero, signsDiffer, scalarOf(0.0, DType::I1));
      Tensor shifted = add(r, b);
      return R{where(fix, shifted, r)};
    };
    // ScatterND with constant indices: data with the rows the indices name
    // replaced by updates' rows (or, with a reduction, combined with them).
    // Data is viewed as [P, S] rows (P the product of the k dims an index
    // addresses, S the rest); the result is one gather of rows from data's
    // rows followed by the new ones, in a row map built here. So it needs
    // no scatter op: PyTorch exports in-place slice assignment (z[:, 1:3]
    // = y) so, and a ScatterND of constants (Swin's shifted-window mask)
    // evaluates at import. Repeated indices: the last one wins, as in
    // onnxruntime; with a reduction they are refused.
    h["ScatterND"] = [](const NodeContext& c) {
      const Tensor& data = c.in(0);
      const Tensor& updates = c.in(2);
      std::string reduction = scatterReduction(c);
      if (!c.isConstant(1))
        throw Error("ScatterND with computed indices is not supported "
                    "(modelc builds its row map from constant indices, as "
                    "PyTorch exports slice assignment)");
      bool computed = !c.isConstant(0) || !c.isConstant(2);
      if (computed && c.dynamicBatch)
        throw Error("ScatterND on computed values with a dynamic batch "
                    "(--batch) is not supported: its indices address the "
                    "batch axis, so its row map holds one batch size");
      std::vector<int64_t> idx = c.constInts(1, "indices");
      const Shape& is = c.in(1).shape();
      if (is.empty() || is.back() < 1 || is.back() > data.rank())
        throw Error("indices " + c.in(1).describe() + " must end in a dim "
                    "of 1 to " + std::to_string(data.rank()) + " for data " +
                    data.describe());
      int64_t k = is.back(), points = int64_t(idx.size()) / k;
      Shape want(is.begin(), is.end() - 1);
      int64_t rows = 1, rowSize = 1;
      for (int64_t d = 0; d < data.rank(); ++d) {
        (d < k ? rows : rowSize) *= data.size(d);
        if (d >= k)
          want.push_back(data.size(d));
      }
      if (updates.shape() != want || updates.dtype() != data.dtype())
        throw Error("updates " + updates.describe() + " must be " +
                    std::string(rt::dtypeName(data.dtype())) +
                    rt::shapeString(want));
      if (reduction != "none" && data.dtype() == DType::I1)
        throw Error("reduction '" + reduction + "' of bool data " +
                    data.describe() + " is not supported (numbers are)");
      if (points == 0 || rowSize == 0)
        return R{data};
      // Each point's coordinates in data's first k dims, wrapped.
      std::vector<int64_t> coord(size_t(points * k));
      for (int64_t p = 0; p < points; ++p)
        for (int64_t d = 0; d < k; ++d)
          coord[size_t(p * k + d)] =
              wrapConstIndex(idx[size_t(p * k + d)], data.size(d), d, data);
      auto combine = [&](const Tensor& old, const Tensor& fresh) {
        return reduction == "add" ? add(old, fresh) : mul(old, fresh);
      };
      std::vector<int64_t> start, count;
      if (scatterBox(coord, k, &start, &count)) {
        // A box (slice assignment, z[:, 1:3] = y and z[..., -1] += v):
        // the updates padded into place and selected where the box is, all
        // elementwise (fused into one pass), with no row map of data's
        // size.
        std::vector<int64_t> low(start), high, step(size_t(data.rank()), 1);
        Shape boxShape(count.begin(), count.end());
        for (int64_t d = 0; d < data.rank(); ++d) {
          if (d >= k) {
            low.push_back(0);
            boxShape.push_back(data.size(d));
          }
          high.push_back(data.size(d) - low[size_t(d)] - boxShape[size_t(d)]);
        }
        Tensor fresh = reshape(updates, boxShape);
        if (reduction != "none")
          fresh = combine(slice(data, low, boxShape, step), fresh);
        Tensor placed = pad(fresh, low, high);
        // The box as the product of one mask per partly covered dim.
        Tensor inBox = scalarOf(1.0, DType::I1);
        for (int64_t d = 0; d < k; ++d) {
          if (boxShape[size_t(d)] == data.size(d))
            continue;
          Shape along(size_t(data.rank()), 1);
          along[size_t(d)] = data.size(d);
          Tensor m = Tensor::empty(along, DType::I1);
          for (int64_t i = 0; i < data.size(d); ++i)
            m.data<uint8_t>()[i] =
                i >= low[size_t(d)] && i < low[size_t(d)] + count[size_t(d)];
          inBox = where(inBox, m, scalarOf(0.0, DType::I1));
        }
        return R{where(inBox, placed, data)};
      }
      // Otherwise a gather of rows from [data rows; update rows]:
      // source[r] is the row that row r takes, the last update winning.
      Tensor source = Tensor::empty({rows}, DType::I64);
      Tensor target = Tensor::empty({points}, DType::I64);
      int64_t* src = source.data<int64_t>();
      for (int64_t r = 0; r < rows; ++r)
        src[r] = r;
      for (int64_t p = 0; p < points; ++p) {
        int64_t row = 0;
        for (int64_t d = 0; d < k; ++d)
          row = row * data.size(d) + coord[size_t(p * k + d)];
        if (reduction != "none" && src[row] >= rows)
          throw Error("indices repeat a row (row " + std::to_string(row) +
                      " of data " + data.describe() + ") with reduction '" +
                      reduction +
                      "': not supported (only 'none' takes "
                      "the last)");
        src[row] = rows + p;
        target.data<int64_t>()[p] = row;
      }
      Tensor dataRows = reshape(data, {rows, rowSize});
      Tensor fresh = reshape(updates, {points, rowSize});
      if (reduction != "none")
        fresh = combine(gather(dataRows, target, 0), fresh);
      Tensor all = concat({dataRows, fresh}, 0);
      return R{reshape(gather(all, source, 0), data.shape())};
    };
    // CumSum as a log-step prefix sum (Hillis-Steele): ceil(log2 n) adds of
    // the running sum and itself shifted by 1, 2, 4, ... along the axis
    // (exact for integers; floats sum in another order than a sequential
    // scan, within a few ulps per level).
    h["CumSum"] = [](const NodeContext& c) {
      Tensor x = c.in(0);
      if (x.rank() == 0)
        throw Error("needs a tensor of rank >= 1, got " + x.describe());
      int64_t axis = normalizeAxis(
          static_cast<int64_t>(c.constScalar(1, "axis")), x.rank());
      bool exclusive = c.getInt("exclusive", 0) != 0;
      bool reverse = c.getInt("reverse", 0) != 0;
      int64_t n = x.size(axis);
      if (n == 0)
        return R{x};
      // t shifted by k along the axis: k zeros first, its last k dropped.
      auto shift = [&](const Tensor& t, int64_t k) {
        std::vector<int64_t> low(size_t(t.rank()), 0), high(low);
        low[size_t(axis)] = k;
        Tensor padded = pad(t, low, high);
        std::vector<int64_t> start(size_t(t.rank()), 0), count(t.shape()),
            step(size_t(t.rank()), 1);
        return slice(padded, start, count, step);
      };
      if (reverse)
        x = reverseAxis(x, axis);
      if (exclusive)
        x = shift(x, 1);
      Tensor y = x;
      for (int64_t k = 1; k < n; k *= 2) {
        Tensor moved = shift(y, k);
        y = add(y, moved);
      }
      return R{reverse ? reverseAxis(y, axis) : y};
    };
    h["Clip"] = [](const NodeContext& c) {
      Tensor x = c.in(0);
      bool isFloat = rt::isFloat(x.dtype());
      bool constBounds = (!c.has(1) || c.isConstant(1)) &&
                         (!c.has(2) || c.isConstant(2));
      if (constBounds && (isFloat || (c.has(1) && c.has(2)))) {
        double inf = std::numeric_limits<double>::infinity();
        double lo = c.has(1) ? c.constScalar(1, "min") : -inf;
        double hi = c.has(2) ? c.constScalar(2, "max") : inf;
        return R{clamp(x, lo, hi)};
      }
      if (c.has(1))
        x = maximum(x, c.in(1));
      if (c.has(2))
        x = minimum(x, c.in(2));
      return R{x};
    };
    h["Softmax"] = [](const NodeContext& c) {
      return R{softmax(c.in(0), c.getInt("axis", -1))};
    };
    h["LogSoftmax"] = [](const NodeContext& c) {
      return R{logSoftmax(c.in(0), c.getInt("axis", -1))};
    };
    // F.cross_entropy and F.nll_loss (a loss exported with its model, to
    // train from ONNX): log_softmax for the former, then the frontend's
    // pick of the label's class (crossEntropy's one-hot product, which the
    // runtime recognizes as class labels and checks), class weights,
    // ignore_index and the reduction.
    for (const char* name :
         {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})
      h[name] = [softmax = std::string(name) == "SoftmaxCrossEntropyLoss"](
                    const NodeContext& c) { return classLoss(c, softmax); };
    for (const char* name :
         {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceLogSumExp",
          "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
          "ReduceLogSum"})
      h[name] = [op = std::string(name)](const NodeContext& c) {
        return R{reduceAxes(c, op, c.getInts("axes"), false)};
      };
    h["ReduceSum"] = [](const NodeContext& c) { // axes is an input since 13
      std::vector<int64_t> axes;
      if (c.has(1))
        axes = c.constInts(1, "axes");
      return R{reduceAxes(c, "ReduceSum", axes, true)};
    };
    h["Einsum"] = [](const NodeContext& c) {
      std::vector<Tensor> ops;
      for (size_t i = 0; i < c.numInputs(); ++i)
        ops.push_back(c.in(i));
      return R{einsum(c.getString("equation", ""), ops)};
    };
    h["MatMul"] = [](const NodeContext& c) {
      return R{numpyMatmul(c.in(0), c.in(1))};
    };
    h["Gemm"] = [](const NodeContext& c) {
      const Tensor& a = c.in(0);
      const Tensor& b = c.in(1);
      if (a.rank() != 2 || b.rank() != 2)
        throw Error("Gemm needs 2-D operands, got " + a.describe() + " and " +
                    b.describe());
      Tensor y = matmul(a, b, c.getInt("transA", 0) != 0,
                        c.getInt("transB", 0) != 0);
      double alpha = c.getFloat("alpha", 1.0f);
      double beta = c.getFloat("beta", 1.0f);
      if (alpha != 1.0)
        y = y * alpha;
      if (c.has(2) && beta != 0.0) {
        Tensor bias = c.in(2);
        if (beta != 1.0)
          bias = bias * beta;
        y = add(y, bias);
      }
      return R{y};
    };
    h["Conv"] = [](const NodeContext& c) {
      if (c.in(0).rank() == 5)
        return R{conv3dByTaps(c, c.in(0), c.in(1))};
      requireWindowRank("Conv", c.in(0));
      bool oneD = isOneD(c.in(0));
      Tensor x = windowInput(c.in(0));
      Tensor w = c.in(1);
      if (oneD && w.rank() != 3)
        throw Error("a 1-D Conv needs a weight of rank 3, got " +
                    w.describe());
      if (oneD)
        w = reshape(w, {w.size(0), w.size(1), 1, w.size(2)});
      std::vector<int64_t> strides = pairAttr(c, "strides", 1, oneD);
      std::vector<int64_t> dilations = pairAttr(c, "dilations", 1, oneD);
      std::vector<int64_t> kernel =
          c.getInts("kernel_shape", w.rank() == 4
                                        ? std::vector<int64_t>{w.size(2),
                                                               w.size(3)}
                                        : std::vector<int64_t>{});
      if (oneD && kernel.size() == 1)
        kernel = {1, kernel[0]};
      if (kernel.size() != 2)
        throw Error(std::string("kernel_shape must have ") +
                    (oneD ? "1 value" : "2 values"));
      std::vector<int64_t> pads =
          windowPadding(c, x, kernel, strides, dilations, oneD);
      return R{windowOutput(conv2d(x, w, c.has(2) ? c.in(2) : Tensor(),
                                   strides, pads, dilations,
                                   c.getInt("group", 1)),
                            oneD)};
    };
    // ConvTranspose as the convolution it is the gradient of: the input
    // with stride - 1 zeros between its pixels, padded by
    // dilation * (kernel - 1) - pads (cropped where negative, output_padding
    // added at the end), convolved at stride 1 with the kernel transposed
    // per group ([C_in, C_out/g, kh, kw] -> [C_out, C_in/g, kh, kw]) and
    // flipped. The zeros cost stride^2 more multiplies than a direct
    // kernel would.
    h["ConvTranspose"] = [](const NodeContext& c) {
      if (c.in(0).rank() == 5)
        return R{convTranspose3dByTaps(c)};
      requireWindowRank("ConvTranspose", c.in(0));
      bool oneD = isOneD(c.in(0));
      Tensor x = windowInput(c.in(0));
      Tensor w = c.in(1);
      if (w.rank() != (oneD ? 3 : 4))
        throw Error("the weight must have rank " +
                    std::to_string(oneD ? 3 : 4) + ", got " + w.describe());
      if (oneD)
        w = reshape(w, {w.size(0), w.size(1), 1, w.size(2)});
      if (c.attr("output_shape"))
        throw Error("output_shape is not supported (give pads)");
      std::string autoPad = c.getString("auto_pad", "NOTSET");
      if (autoPad != "NOTSET" && autoPad != "VALID")
        throw Error("auto_pad '" + autoPad + "' is not supported (give pads)");
      std::vector<int64_t> strides = pairAttr(c, "strides", 1, oneD);
      std::vector<int64_t> dilations = pairAttr(c, "dilations", 1, oneD);
      std::vector<int64_t> outPad = oneD ? c.getInts("output_padding", {0})
                                         : c.getInts("output_padding", {0, 0});
      if (oneD && outPad.size() == 1)
        outPad = {0, outPad[0]};
      if (outPad.size() != 2)
        throw Error("output_padding must have one value per spatial dim");
      std::vector<int64_t> pads = autoPad == "VALID"
                                      ? std::vector<int64_t>{0, 0, 0, 0}
                                      : windowPadding(c, x, {1, 1}, {1, 1},
                                                      {1, 1}, oneD);
      int64_t groups = c.getInt("group", 1);
      // pads as [top, left, bottom, right]: begins, then ends.
      Tensor y = transposedAsConv(
          x, w, strides, dilations, pads, outPad, groups,
          [&](const Tensor& xp, const Tensor& kernel) {
            return conv2d(xp, kernel, c.has(2) ? c.in(2) : Tensor(), {1, 1},
                          {0, 0, 0, 0}, dilations, groups);
          });
      return R{windowOutput(y, oneD)};
    };
    // The pools' kernel_shape, as a 2-D window's.
    auto poolKernel = [](const NodeContext& c, bool oneD) {
      std::vector<int64_t> kernel = c.getInts("kernel_shape");
      if (oneD && kernel.size() == 1)
        kernel = {1, kernel[0]};
      if (kernel.size() != 2)
        throw Error(std::string("kernel_shape must have ") +
                    (oneD ? "1 value" : "2 values"));
      return kernel;
    };
    h["MaxPool"] = [poolKernel](const NodeContext& c) {
      if (c.wantsOutput(1))
        throw Error("the Indices output is not supported");
      if (c.in(0).rank() == 5)
        return R{maxPool3dByTaps(c, c.in(0))};
      requireWindowRank("MaxPool", c.in(0));
      bool oneD = isOneD(c.in(0));
      Tensor x = windowInput(c.in(0));
      if (c.wantsOutput(1))
        throw Error("the Indices output is not supported");
      std::vector<int64_t> kernel = poolKernel(c, oneD);
      std::vector<int64_t> strides = pairAttr(c, "strides", 1, oneD);
      std::vector<int64_t> dilations = pairAttr(c, "dilations", 1, oneD);
      std::vector<int64_t> pads =
          windowPadding(c, x, kernel, strides, dilations, oneD);
      return R{windowOutput(maxPool2d(x, kernel, strides, pads, dilations,
                                      c.getInt("ceil_mode", 0) != 0),
                            oneD)};
    };
    h["AveragePool"] = [poolKernel](const NodeContext& c) {
      if (c.in(0).rank() == 5)
        return R{avgPool3dByTaps(c, c.in(0))};
      requireWindowRank("AveragePool", c.in(0));
      bool oneD = isOneD(c.in(0));
      Tensor x = windowInput(c.in(0));
      std::vector<int64_t> kernel = poolKernel(c, oneD);
      std::vector<int64_t> strides = pairAttr(c, "strides", 1, oneD);
      std::vector<int64_t> pads =
          windowPadding(c, x, kernel, strides, {1, 1}, oneD);
      return R{windowOutput(avgPool2d(x, kernel, strides, pads,
                                      c.getInt("ceil_mode", 0) != 0,
                                      c.getInt("count_include_pad", 0) != 0),
                            oneD)};
    };
    h["GlobalAveragePool"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      std::vector<int64_t> dims;
      for (int64_t d = 2; d < x.rank(); ++d)
        dims.push_back(d);
      return R{mean(x, dims, /*keepdim=*/true)};
    };
    h["GlobalMaxPool"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      std::vector<int64_t> dims;
      for (int64_t d = 2; d < x.rank(); ++d)
        dims.push_back(d);
      return R{amax(x, dims, /*keepdim=*/true)};
    };
    h["BatchNormalization"] = [](const NodeContext& c) {
      double eps = c.getFloat("epsilon", 1e-5f);
      if (c.getInt("training_mode", 0) != 0) {
        // A model exported for training (TrainingMode.TRAINING): the
        // batch's mean and biased variance, through which gradients flow
        // (the frontend's batchNormTraining); the running statistics, if
        // asked, as the ONNX spec has them: input * momentum + batch's *
        // (1 - momentum), with the batch's biased variance.
        Tensor mean, var;
        Tensor y =
            batchNormTraining(c.in(0), c.in(1), c.in(2), eps, 1, &mean, &var);
        R out{y};
        double m = c.getFloat("momentum", 0.9f);
        // Initializer statistics are the step's state, updated as PyTorch
        // updates them (its momentum is 1 - ONNX's; the unbiased variance).
        if (TraceHook* hook = activeTraceHook();
            hook && c.isState(3) && c.isState(4)) {
          NoGradGuard noGrad;
          if (c.in(0).numel() / c.in(0).size(1) < 2)
            throw Error("training needs more than one value per channel, "
                        "got input " +
                        c.in(0).describe());
          auto [running, runningVar] = batchNormRunningUpdate(
              c.in(0), mean, var, c.in(3), c.in(4), 1.0 - m);
          hook->assign(c.in(3), running);
          hook->assign(c.in(4), runningVar);
        }
        Tensor keep = Tensor::scalar(m, y.dtype()),
               take = Tensor::scalar(1.0 - m, y.dtype());
        if (c.wantsOutput(1))
          out.push_back(add(mul(c.in(3), keep), mul(mean, take)));
        if (c.wantsOutput(2))
          out.push_back(add(mul(c.in(4), keep), mul(var, take)));
        return out;
      }
      if (c.wantsOutput(1) || c.wantsOutput(2))
        throw Error("the running mean and variance outputs exist only with "
                    "training_mode=1");
      return R{batchNorm(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), eps, 1)};
    };
    h["LayerNormalization"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      if (c.wantsOutput(1) || c.wantsOutput(2))
        throw Error("the Mean and InvStdDev outputs are not supported");
      int64_t axis = normalizeAxis(c.getInt("axis", -1), x.rank());
      Shape normalized(x.shape().begin() + axis, x.shape().end());
      Tensor gamma = broadcastTo(c.in(1), normalized);
      Tensor beta = c.has(2) ? broadcastTo(c.in(2), normalized)
                             : Tensor::zeros(normalized, x.dtype());
      return R{layerNorm(x, gamma, beta, axis, c.getFloat("epsilon", 1e-5f))};
    };
    // InstanceNormalization (InstanceNorm2d; torch's GroupNorm exports as
    // a reshape to [N, groups, -1], this, a reshape back and the affine):
    // each (n, c)'s spatial values normalized, as a layer norm over the
    // flattened spatial dims (the one-pass row kernel), then scale and B
    // per channel.
    h["InstanceNormalization"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      if (x.rank() < 3)
        throw Error("needs an [N, C, D1, ...] input, got " + x.describe());
      int64_t channels = x.size(1), spatial = 1;
      for (int64_t d = 2; d < x.rank(); ++d)
        spatial *= x.size(d);
      for (size_t i : {size_t(1), size_t(2)})
        if (c.in(i).shape() != Shape{channels})
          throw Error(std::string(i == 1 ? "scale " : "B ") +
                      c.in(i).describe() + " must be [" +
                      std::to_string(channels) + "], one per channel of " +
                      x.describe());
      if (spatial == 0)
        throw Error("cannot normalize the empty spatial dims of " +
                    x.describe());
      Tensor rows = reshape(x, {x.size(0), channels, spatial});
      Tensor ones = Tensor::full({spatial}, 1.0, x.dtype());
      Tensor zeros = Tensor::zeros({spatial}, x.dtype());
      Tensor normalized = layerNorm(rows, ones, zeros, 2,
                                    c.getFloat("epsilon", 1e-5f));
      Tensor y = reshape(normalized, x.shape());
      // The affine, unless it is the identity GroupNorm's export gives.
      auto constantAll = [&](size_t i, double v) {
        if (!c.isConstant(i))
          return false;
        for (float e : c.in(i).toVector())
          if (e != v)
            return false;
        return true;
      };
      Shape perChannel(size_t(x.rank()), 1);
      perChannel[1] = channels;
      if (!constantAll(1, 1.0)) {
        Tensor scale = reshape(c.in(1), perChannel);
        y = y * scale;
      }
      if (!constantAll(2, 0.0)) {
        Tensor bias = reshape(c.in(2), perChannel);
        y = y + bias;
      }
      return R{y};
    };
    h["Transpose"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      std::vector<int64_t> perm;
      for (int64_t d = x.rank() - 1; d >= 0; --d)
        perm.push_back(d);
      return R{transpose(x, c.getInts("perm", perm))};
    };
    h["Reshape"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      std::vector<int64_t> shape = c.constInts(1, "shape");
      if (c.getInt("allowzero", 0) == 0)
        for (size_t i = 0; i < shape.size(); ++i)
          if (shape[i] == 0) {
            if (static_cast<int64_t>(i) >= x.rank())
              throw Error("shape " + rt::shapeString(shape) + " copies "
                          "dimension " + std::to_string(i) + " of " +
                          x.describe() + ", which it does not have");
            shape[i] = x.shape()[i];
          }
      return R{reshape(x, shape)};
    };
    h["Flatten"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      int64_t axis = c.getInt("axis", 1);
      if (axis < 0)
        axis += x.rank();
      if (axis < 0 || axis > x.rank())
        throw Error("axis " + std::to_string(c.getInt("axis", 1)) +
                    " is out of range for " + x.describe());
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < x.rank(); ++d)
        (d < axis ? outer : inner) *= x.shape()[d];
      return R{reshape(x, {outer, inner})};
    };
    h["Concat"] = [](const NodeContext& c) {
      std::vector<Tensor> parts;
      for (size_t i = 0; i < c.numInputs(); ++i)
        parts.push_back(c.in(i));
      return R{concat(parts, c.getInt("axis", 0))};
    };
    h["Slice"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      std::vector<int64_t> starts = c.constInts(1, "starts");
      std::vector<int64_t> ends = c.constInts(2, "ends");
      std::vector<int64_t> axes, steps;
      if (c.has(3)) {
        axes = c.constInts(3, "axes");
      } else {
        for (size_t i = 0; i < starts.size(); ++i)
          axes.push_back(static_cast<int64_t>(i));
      }
      steps = c.has(4) ? c.constInts(4, "steps")
                       : std::vector<int64_t>(starts.size(), 1);
      if (ends.size() != starts.size() || axes.size() != starts.size() ||
          steps.size() != starts.size())
        throw Error("starts, ends, axes and steps differ in length");
      // A negative step takes the same elements as the positive one from
      // the last element taken, reversed (by a gather) afterwards.
      std::vector<int64_t> start(x.rank(), 0), count(x.shape()),
          step(x.rank(), 1), reversed;
      for (size_t i = 0; i < starts.size(); ++i) {
        int64_t ax = normalizeAxis(axes[i], x.rank());
        int64_t dim = x.shape()[ax];
        int64_t st = steps[i];
        if (st == 0)
          throw Error("step 0 on axis " + std::to_string(axes[i]));
        auto clampIndex = [dim](int64_t v, int64_t lo, int64_t hi) {
          if (v < 0)
            v += dim;
          return std::min(std::max(v, lo), hi);
        };
        int64_t first, n;
        if (st > 0) {
          int64_t s = clampIndex(starts[i], 0, dim);
          int64_t e = clampIndex(ends[i], 0, dim);
          n = e > s ? (e - s + st - 1) / st : 0;
          first = s;
        } else {
          int64_t s = clampIndex(starts[i], 0, dim - 1);
          int64_t e = clampIndex(ends[i], -1, dim - 1);
          n = s > e ? (s - e - st - 1) / -st : 0;
          first = s + (n - 1) * st;
          if (n > 1)
            reversed.push_back(ax);
        }
        start[ax] = n ? first : 0;
        count[ax] = n;
        step[ax] = st > 0 ? st : -st;
      }
      Tensor y = slice(x, start, count, step);
      for (int64_t ax : reversed)
        y = reverseAxis(y, ax);
      return R{y};
    };
    h["Split"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      int64_t axis = normalizeAxis(c.getInt("axis", 0), x.rank());
      int64_t dim = x.shape()[axis];
      int outputs = c.node.output_size();
      std::vector<int64_t> sizes;
      if (c.has(1)) {
        sizes = c.constInts(1, "split");
      } else {
        if (dim % outputs)
          throw Error("cannot split dimension " + std::to_string(dim) +
                      " into " + std::to_string(outputs) + " equal parts");
        sizes.assign(outputs, dim / outputs);
      }
      int64_t total = 0;
      for (int64_t s : sizes) {
        // A negative size would let the others add up to the dimension
        // ([-1, 4] of 3) and slice backwards.
        if (s < 0 || s > dim)
          throw Error("split sizes " + rt::shapeString(sizes) +
                      " must each lie in [0, " + std::to_string(dim) +
                      "] (dimension " + std::to_string(axis) + " of " +
                      x.describe() + ")");
        total += s;
      }
      if (static_cast<int>(sizes.size()) != outputs || total != dim)
        throw Error("split sizes " + rt::shapeString(sizes) + " do not cut "
                    "dimension " + std::to_string(dim) + " into " +
                    std::to_string(outputs) + " outputs");
      R out;
      int64_t at = 0;
      for (int64_t s : sizes) {
        out.push_back(sliceDim(x, axis, at, at + s));
        at += s;
      }
      return out;
    };
    h["Gather"] = [](const NodeContext& c) {
      return R{gather(c.in(0), c.in(1), c.getInt("axis", 0))};
    };
    h["Unsqueeze"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      std::vector<int64_t> axes = c.constInts(1, "axes");
      int64_t rank = x.rank() + static_cast<int64_t>(axes.size());
      for (int64_t& a : axes)
        a = normalizeAxis(a, rank);
      std::sort(axes.begin(), axes.end());
      if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
        throw Error("axes name output dim " +
                    std::to_string(*std::adjacent_find(axes.begin(),
                                                       axes.end())) +
                    " twice (each axis must be unique)");
      Shape shape;
      size_t next = 0;
      for (int64_t d = 0; d < rank; ++d) {
        if (std::binary_search(axes.begin(), axes.end(), d))
          shape.push_back(1);
        else
          shape.push_back(x.shape()[next++]);
      }
      return R{reshape(x, shape)};
    };
    h["Squeeze"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      std::vector<int64_t> axes;
      if (c.has(1)) {
        axes = c.constInts(1, "axes");
        for (int64_t& a : axes) {
          a = normalizeAxis(a, x.rank());
          if (x.shape()[a] != 1)
            throw Error("cannot squeeze dimension " + std::to_string(a) +
                        " of " + x.describe() + ": it is not 1");
        }
      } else {
        for (int64_t d = 0; d < x.rank(); ++d)
          if (x.shape()[d] == 1)
            axes.push_back(d);
      }
      Shape shape;
      for (int64_t d = 0; d < x.rank(); ++d)
        if (std::find(axes.begin(), axes.end(), d) == axes.end())
          shape.push_back(x.shape()[d]);
      return R{reshape(x, shape)};
    };
    h["Expand"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      Shape shape = broadcastShapes(x.shape(), c.constInts(1, "shape"));
      return R{broadcastTo(x, shape)};
    };
    h["Shape"] = [](const NodeContext& c) {
      const Shape& s = c.in(0).shape();
      int64_t r = static_cast<int64_t>(s.size());
      auto clampIndex = [r](int64_t v) {
        if (v < 0)
          v += r;
        return std::min(std::max<int64_t>(v, 0), r);
      };
      int64_t b = clampIndex(c.getInt("start", 0));
      int64_t e = clampIndex(c.getInt("end", r));
      int64_t n = std::max<int64_t>(e - b, 0);
      Tensor t = Tensor::empty({n}, DType::I64);
      std::copy(s.begin() + b, s.begin() + b + n, t.data<int64_t>());
      return R{t};
    };
    h["ConstantOfShape"] = [](const NodeContext& c) {
      std::vector<int64_t> shape = c.constInts(0, "input");
      DType dtype = DType::F32;
      double value = 0;
      if (const AttributeProto* a = c.attr("value")) {
        Tensor v = tensorFromProto(a->t(), c.modelDir, "attribute 'value'");
        if (v.numel() != 1)
          throw Error("attribute 'value' must hold one value");
        dtype = v.dtype();
        value = v.dtype() == DType::I64
                    ? static_cast<double>(v.data<int64_t>()[0])
                    : v.toVector()[0];
      }
      return R{Tensor::full(shape, value, dtype)};
    };
    h["Constant"] = [](const NodeContext& c) {
      if (c.node.attribute_size() != 1)
        throw Error("a Constant needs exactly one attribute");
      const AttributeProto& a = c.node.attribute(0);
      if (a.name() == "value")
        return R{tensorFromProto(a.t(), c.modelDir, "attribute 'value'")};
      if (a.name() == "value_float")
        return R{Tensor::scalar(a.f(), DType::F32)};
      if (a.name() == "value_int")
        return R{Tensor::scalar(static_cast<double>(a.i()), DType::I64)};
      if (a.name() == "value_floats") {
        std::vector<float> v(a.floats().begin(), a.floats().end());
        return R{Tensor::fromVector(v, {static_cast<int64_t>(v.size())})};
      }
      if (a.name() == "value_ints") {
        Tensor t = Tensor::empty({a.ints_size()}, DType::I64);
        std::copy(a.ints().begin(), a.ints().end(), t.data<int64_t>());
        return R{t};
      }
      throw Error("attribute '" + a.name() + "' is not supported");
    };
    h["Identity"] = [](const NodeContext& c) { return R{c.in(0)}; };
    h["Dropout"] = [](const NodeContext& c) {
      // Training mode drops nothing at ratio 0 (torchvision's Swin passes
      // training=True with p=0 in eval): that is the identity too.
      bool training =
          c.has(2) && (!c.isConstant(2) || c.constScalar(2, "training_mode"));
      bool ratioZero = c.has(1) && c.isConstant(1) &&
                       c.constScalar(1, "ratio") == 0.0;
      if (training && !ratioZero) {
        if (!c.training)
          throw Error("training_mode must be a constant false, or the ratio "
                      "a constant 0 (export the model in eval mode, or "
                      "compile a training step with --train)");
        if (!c.isConstant(2))
          throw Error("training_mode must be a constant (it is computed)");
        // A node of constants is evaluated at import (the trace paused):
        // its one mask would be a constant of every step.
        if (!activeTraceHook())
          throw Error("a training-mode Dropout of constant data would draw "
                      "one mask at import for every step; only a Dropout of "
                      "values the step computes is supported");
        // A training step: mc.dropout with the generator's seed and offset
        // (the step's rng.seed and rng.offset state), or the node's own
        // seed attribute. The mask, if asked: where a one survives.
        double ratio = c.has(1) ? c.constScalar(1, "ratio") : 0.5;
        if (!(ratio >= 0 && ratio < 1))
          throw Error("the ratio " + std::to_string(ratio) +
                      " must be in [0, 1)");
        auto [seed, offset] = Generator::global().draw();
        if (const AttributeProto* a = c.attr("seed"))
          seed = i64Scalar(uint64_t(a->i()));
        const Tensor& x = c.in(0);
        R out{dropout(x, seed, offset, ratio)};
        if (c.wantsOutput(1)) {
          NoGradGuard noGrad;
          // Ones of x's shape made from x's dims (a batch-sized constant
          // would be one batch size's).
          Tensor ones = broadcastTo(Tensor::scalar(1.0, x.dtype()), x.shape());
          out.push_back(ne(dropout(ones, seed, offset, ratio),
                           Tensor::scalar(0.0, x.dtype())));
        }
        return out;
      }
      R out{c.in(0)};
      if (c.wantsOutput(1)) // inference keeps everything
        out.push_back(Tensor::full(c.in(0).shape(), 1.0, DType::I1));
      return out;
    };
    h["Cast"] = [](const NodeContext& c) {
      // A Cast to DOUBLE is one to f32 (dtypeOf; modelc has no f64): the
      // identity on f32, and exact for torch.isinf and torch.isnan, which
      // PyTorch exports as a Cast to double read by IsInf / IsNaN.
      DType to = dtypeOf(static_cast<int>(c.getInt("to", 0)),
                         "the target of Cast");
      const Tensor& x = c.in(0);
      return R{x.dtype() == to ? x : cast(x, to)};
    };
    h["Where"] = [](const NodeContext& c) {
      return R{where(c.in(0), c.in(1), c.in(2))};
    };
    h["Range"] = [](const NodeContext& c) {
      DType dtype = c.in(0).dtype();
      double start = c.constScalar(0, "start");
      double limit = c.constScalar(1, "limit");
      double delta = c.constScalar(2, "delta");
      if (!std::isfinite(start) || !std::isfinite(limit) ||
          !std::isfinite(delta))
        throw Error("start, limit and delta must be finite, got " +
                    formatDouble(start) + ", " + formatDouble(limit) +
                    " and " + formatDouble(delta));
      if (delta == 0)
        throw Error("delta is 0");
      // Converted to an integer only once it is known to fit (a double out
      // of int64's range converts to anything).
      double count = std::max(std::ceil((limit - start) / delta), 0.0);
      if (count > double(kMaxRangeElements))
        throw Error("Range(" + formatDouble(start) + ", " +
                    formatDouble(limit) + ", " + formatDouble(delta) +
                    ") has " + formatDouble(count) + " elements, more than "
                    "the limit of " + std::to_string(kMaxRangeElements));
      int64_t n = static_cast<int64_t>(count);
      Tensor t = Tensor::empty({n}, dtype);
      for (int64_t i = 0; i < n; ++i) {
        double v = start + static_cast<double>(i) * delta;
        switch (dtype) {
        case DType::I64:
          t.data<int64_t>()[i] = static_cast<int64_t>(v);
          break;
        case DType::I32:
          t.data<int32_t>()[i] = static_cast<int32_t>(v);
          break;
        case DType::F32:
          t.data<float>()[i] = static_cast<float>(v);
          break;
        default:
          throw Error("Range of " + c.in(0).describe() +
                      " is not supported (int32, int64 or float)");
        }
      }
      return R{t};
    };
    h["Pad"] = [](const NodeContext& c) {
      const Tensor& x = c.in(0);
      std::string mode = c.getString("mode", "constant");
      if (mode != "constant" && mode != "reflect" && mode != "edge")
        throw Error("mode '" + mode +
                    "' is not supported (constant, reflect and edge are)");
      std::vector<int64_t> pads = c.constInts(1, "pads");
      if (static_cast<int64_t>(pads.size()) != 2 * x.rank())
        throw Error("pads has " + std::to_string(pads.size()) +
                    " values; " + x.describe() + " needs " +
                    std::to_string(2 * x.rank()));
      std::vector<int64_t> low(pads.begin(), pads.begin() + x.rank());
      std::vector<int64_t> high(pads.begin() + x.rank(), pads.end());
      if (mode != "constant") {
        // Each padded axis is one gather: indices past the ends mirror
        // (reflect, without the edge) or repeat the edge.
        Tensor y = x;
        for (int64_t d = 0; d < x.rank(); ++d) {
          int64_t n = x.size(d), b = low[size_t(d)], e = high[size_t(d)];
          if (b == 0 && e == 0)
            continue;
          if (b < 0 || e < 0)
            throw Error("negative pads (cropping) are not supported");
          if (n == 0)
            throw Error("cannot " + mode + "-pad the empty dim " +
                        std::to_string(d) + " of " + x.describe());
          if (mode == "reflect" && (b > n - 1 || e > n - 1))
            throw Error("reflect pads of dim " + std::to_string(d) + " (" +
                        std::to_string(b) + ", " + std::to_string(e) +
                        ") must be below its size " + std::to_string(n));
          bool edge = mode == "edge";
          y = gatherAlong(y, d, b + n + e, [=](int64_t out) {
            int64_t i = out - b; // the position in x, before the ends
            if (edge)
              return std::min<int64_t>(std::max<int64_t>(i, 0), n - 1);
            return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i;
          });
        }
        return R{y};
      }
      for (int64_t p : pads)
        if (p < 0)
          throw Error("negative pads (cropping) are not supported");
      double value = c.has(2) ? c.constScalar(2, "constant_value") : 0.0;
      return R{pad(x, low, high, value)};
    };
    return h;
  }();
  return table;
}

/// Nodes whose outputs are compile-time constants even when an input is not.
bool alwaysConstant(const std::string& op) { return op == "Shape"; }

class Importer {
public:
  Importer(std::string path, const OnnxImportOptions& options)
      : path_(std::move(path)), options_(options) {}

  jit::TracedModule run();

private:
  void load();
  void checkOpset();
  std::string nodeLabel(int i) const;
  /// The handler of `node` (named `label` in errors: "node 'x'"); an
  /// error naming the op, the node and the opset when there is none. An If
  /// has none (runNode takes it).
  std::unordered_map<std::string, Handler>::const_iterator
  handler(const NodeProto& node, const std::string& label) const;
  void runNode(const NodeProto& node, const std::string& label,
               NodeScope* scope);
  void runIf(const NodeProto& node, const std::string& label, NodeScope* scope);
  /// Fills state_: each training-mode batch norm's running mean and
  /// variance, initializers read by nothing else; an error naming the node
  /// where that does not hold (they would not update as in PyTorch).
  void findTrainingState();
  /// `value`, or the checkpoint's tensor named `name` with --weights
  /// (OnnxImportOptions::weights), checked to have value's dtype and
  /// shape.
  Tensor trainedValue(const std::string& name, Tensor value);

  std::string path_;
  /// OnnxImportOptions::weights by name (filled once, by run()).
  std::unordered_map<std::string, const rt::CheckpointEntry*> weights_;
  const OnnxImportOptions& options_;
  onnx::ModelProto model_;
  fs::path modelDir_;
  /// Where each main-graph initializer's raw data lies in the model file
  /// (left out of model_ by load()), by initializer index.
  std::vector<std::optional<onnx_wire::Span>> rawData_;
  int64_t opset_ = 0;
  std::unordered_map<std::string, Value> values_;
  std::vector<std::unique_ptr<NodeScope>> scopes_;
  /// NodeContext::state: the initializers traced as module buffers.
  std::set<std::string> state_;
};

void Importer::load() {
  // Refused before reading: anything but a regular file (a FIFO would
  // block, /dev/zero never ends), and more than protobuf can parse.
  int fd = -1;
  uint64_t size = 0;
  rt::Status st =
      rt::openRegularFile(path_, rt::kMaxInputFileBytes, &fd, &size);
  if (!st)
    throw Error(st.message());
  // The file is mapped, not read, and protobuf parses it without the main
  // graph's initializer raw data (onnx_wire::stripInitializerData), whose
  // pages are never touched: run() reads each weight from the file into its
  // tensor. The weights are in memory once.
  void* map = size ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0)
                   : nullptr;
  int mapErrno = errno;
  ::close(fd);
  if (map == MAP_FAILED)
    throw Error("cannot read '" + path_ + "': " + std::strerror(mapErrno));
  const auto* bytes = static_cast<const uint8_t*>(map);
  std::optional<onnx_wire::StrippedModel> stripped =
      onnx_wire::stripInitializerData(bytes, size);
  // Protobuf parses at most 2 GB; the weights left out do not count.
  constexpr size_t kMaxParse = std::numeric_limits<int>::max();
  size_t toParse = stripped ? stripped->bytes.size() : size;
  bool parsed = false;
  if (toParse <= kMaxParse) {
    if (stripped) {
      parsed = model_.ParseFromString(stripped->bytes);
      rawData_ = std::move(stripped->rawData);
    } else { // not well-formed wire format: protobuf's parse says how
      parsed = model_.ParseFromArray(bytes, static_cast<int>(size));
    }
  }
  if (map)
    ::munmap(map, size);
  if (toParse > kMaxParse)
    throw Error("'" + path_ + "' has " + std::to_string(toParse) +
                " bytes of graph to parse (besides its initializers' raw "
                "data), more than the 2 GB protobuf parses; save the model "
                "with its weights as external data");
  if (!parsed)
    throw Error("cannot parse '" + path_ + "' as an ONNX model: the file is "
                "truncated or corrupt (not a valid ModelProto)");
  if (!model_.has_graph())
    throw Error("'" + path_ + "' is not an ONNX model: it has no graph");
  modelDir_ = fs::absolute(fs::path(path_)).parent_path();
}

void Importer::checkOpset() {
  bool found = false;
  for (const auto& imp : model_.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx") {
      opset_ = imp.version();
      found = true;
    }
  if (!found)
    throw Error("'" + path_ + "' imports no version of the default ONNX "
                "opset (ai.onnx)");
  if (opset_ < kMinOpset || opset_ > kMaxOpset)
    throw Error("'" + path_ + "' uses ONNX opset " + std::to_string(opset_) +
                "; modelc imports opsets " + std::to_string(kMinOpset) +
                " to " + std::to_string(kMaxOpset) +
                " (export with opset_version=" + std::to_string(kMaxOpset) +
                ")");
}

std::string Importer::nodeLabel(int i) const {
  const NodeProto& n = model_.graph().node(i);
  if (!n.name().empty())
    return "'" + n.name() + "'";
  return "#" + std::to_string(i) +
         (n.output_size() ? " (output '" + n.output(0) + "')" : "");
}

/// A node's name in errors: 'name', else its first output.
std::string branchNodeLabel(const NodeProto& n) {
  if (!n.name().empty())
    return "'" + n.name() + "'";
  return n.output_size() ? "(output '" + n.output(0) + "')" : "(unnamed)";
}

std::unordered_map<std::string, Handler>::const_iterator
Importer::handler(const NodeProto& node, const std::string& label) const {
  const std::string& op = node.op_type();
  bool defaultDomain = node.domain().empty() || node.domain() == "ai.onnx";
  // An If's branches are checked when the one it takes runs: the other
  // may hold ops modelc does not import.
  if (defaultDomain && op == "If")
    return handlers().end();
  auto it = handlers().find(op);
  if (!defaultDomain || it == handlers().end())
    throw Error("unsupported ONNX op '" +
                (defaultDomain ? op : node.domain() + "." + op) + "' in " +
                label + " (opset " + std::to_string(opset_) + ")");
  return it;
}

/// If, where the condition is a constant at import (PyTorch exports
/// shape-dependent choices so: LocalResponseNorm, diagonal): the branch it
/// takes, inlined (its nodes run here, seeing the outer graph's values),
/// its outputs the If's. modelc has no control flow: a condition computed
/// at run time is refused.
void Importer::runIf(const NodeProto& node, const std::string& label,
                     NodeScope* scope) {
  auto cond = node.input_size() ? values_.find(node.input(0)) : values_.end();
  if (cond == values_.end())
    throw Error(label + ": its condition is not defined by an earlier node, "
                        "a graph input or an initializer");
  if (!cond->second.constant)
    throw Error(label + ": a condition computed at run time is not "
                        "supported (modelc has no control flow; it takes an If "
                        "whose condition is known at import, as PyTorch's "
                        "shape-dependent ones are)");
  // A condition from shapes would be the traced batch's, and a branch
  // choice is nothing the two trace runs compare.
  if (options_.batch)
    throw Error(label +
                ": an If with a dynamic batch (--batch) is not "
                "supported: its condition may depend on the batch size, "
                "which the import cannot follow; compile with a static "
                "batch");
  const Tensor& c = cond->second.tensor;
  if (c.numel() != 1)
    throw Error(label + ": the condition must hold one value, got " +
                c.describe());
  bool taken = c.toVector()[0] != 0;
  const char* branchName = taken ? "then_branch" : "else_branch";
  const onnx::GraphProto* branch = nullptr;
  for (const AttributeProto& a : node.attribute())
    if (a.name() == branchName && a.has_g())
      branch = &a.g();
  if (!branch)
    throw Error(label + ": no " + branchName + " graph");
  if (branch->output_size() != node.output_size())
    throw Error(label + ": its " + branchName + " has " +
                std::to_string(branch->output_size()) + " outputs, the If " +
                std::to_string(node.output_size()));
  // The branch's names (initializers, node outputs) are its own: the
  // outer values they shadow are put back after it.
  std::vector<std::pair<std::string, std::optional<Value>>> shadowed;
  auto define = [&](const std::string& name) {
    auto v = values_.find(name);
    shadowed.emplace_back(name, v == values_.end()
                                    ? std::nullopt
                                    : std::optional<Value>(v->second));
    if (v != values_.end())
      values_.erase(v);
  };
  for (const TensorProto& t : branch->initializer())
    define(t.name());
  for (const NodeProto& n : branch->node())
    for (const std::string& o : n.output())
      if (!o.empty())
        define(o);
  for (const TensorProto& t : branch->initializer())
    values_[t.name()] =
        Value{tensorFromProto(t, modelDir_,
                              label + ": " + branchName + " initializer '" +
                                  t.name() + "'"),
              true};
  for (const NodeProto& n : branch->node())
    runNode(n,
            label + ", " + branchName + " node " + branchNodeLabel(n) + " (" +
                n.op_type() + ")",
            scope);
  std::vector<Value> outs;
  for (const auto& out : branch->output()) {
    auto v = values_.find(out.name());
    if (v == values_.end())
      throw Error(label + ": " + branchName + " output '" + out.name() +
                  "' is not computed by any of its nodes");
    outs.push_back(v->second);
  }
  for (auto it = shadowed.rbegin(); it != shadowed.rend(); ++it) {
    if (it->second)
      values_[it->first] = *it->second;
    else
      values_.erase(it->first);
  }
  for (int k = 0; k < node.output_size(); ++k)
    if (!node.output(k).empty())
      values_[node.output(k)] = outs[size_t(k)];
}

void Importer::runNode(const NodeProto& node, const std::string& label,
                       NodeScope* scope) {
  const std::string& op = node.op_type();
  if (op == "If")
    return runIf(node, label, scope);
  auto it = handler(node, label);

  std::vector<const Value*> inputs;
  bool allConstant = true, readsTrained = false;
  for (const std::string& name : node.input()) {
    if (name.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    auto v = values_.find(name);
    if (v == values_.end())
      throw Error(label + ": input '" + name + "' is not defined by an "
                  "earlier node, a graph input or an initializer");
    inputs.push_back(&v->second);
    allConstant = allConstant && v->second.constant;
    readsTrained = readsTrained || v->second.trained;
  }
  // A node of constants and a training step's initializers (a Transpose of
  // a weight) is traced, so the step trains them; its values are known all
  // the same: a later node may read them as compile-time constants (a
  // shape computed from a weight's), and traces through them.
  bool trainedValues = allConstant && readsTrained && !alwaysConstant(op);
  bool constant = (allConstant && !readsTrained) || alwaysConstant(op);
  NodeContext ctx(node, std::move(inputs), opset_, modelDir_);
  // A node of constants is evaluated, not traced: nothing of it follows
  // the batch (nor of one of constants and weights).
  ctx.dynamicBatch = options_.batch.has_value() && !constant && !trainedValues;
  ctx.state = &state_;
  ctx.training = options_.trainingState;
  std::vector<Tensor> outputs;
  try {
    if (constant) {
      PausedTrace paused;
      outputs = it->second(ctx);
    } else {
      TraceHook* hook = activeTraceHook();
      if (hook)
        hook->enterModule(*scope);
      try {
        outputs = it->second(ctx);
      } catch (...) {
        if (hook)
          hook->exitModule(*scope);
        throw;
      }
      if (hook)
        hook->exitModule(*scope);
    }
  } catch (const Error& e) {
    throw Error(label + ": " + e.what());
  }
  for (int k = 0; k < node.output_size(); ++k) {
    if (node.output(k).empty())
      continue;
    if (k >= static_cast<int>(outputs.size()))
      throw Error(label + ": output " + std::to_string(k) + " ('" +
                  node.output(k) + "') is not supported");
    values_[node.output(k)] =
        Value{constant ? trainedValue(node.output(k), outputs[k]) : outputs[k],
              constant || trainedValues, trainedValues};
  }
}

Tensor Importer::trainedValue(const std::string& name, Tensor value) {
  auto it = weights_.find(name);
  if (it == weights_.end())
    return value;
  const rt::CheckpointEntry& e = *it->second;
  if (e.dtype != value.dtype() || e.shape != value.shape())
    throw Error("--weights: the checkpoint holds '" + name + "' as " +
                std::string(rt::dtypeName(e.dtype)) + rt::shapeString(e.shape) +
                ", but the model's is " + value.describe() +
                " (a checkpoint of another model, or of another size?)");
  Tensor trained = Tensor::empty(e.shape, e.dtype);
  if (e.byteSize)
    std::memcpy(trained.rawData(), e.data, size_t(e.byteSize));
  if (options_.weightsUsed)
    options_.weightsUsed->insert(name);
  return trained;
}

/// Whether NODE is a BatchNormalization with training_mode set.
bool trainingBatchNorm(const NodeProto& node) {
  if (node.op_type() != "BatchNormalization")
    return false;
  for (const auto& a : node.attribute())
    if (a.name() == "training_mode")
      return a.i() != 0;
  return false;
}

/// How many node inputs of GRAPH and the graphs inside it name each value.
void countReads(const onnx::GraphProto& graph,
                std::map<std::string, int>* reads) {
  for (const NodeProto& n : graph.node()) {
    for (const std::string& in : n.input())
      if (!in.empty())
        ++(*reads)[in];
    for (const auto& a : n.attribute())
      if (a.type() == onnx::AttributeProto::GRAPH)
        countReads(a.g(), reads);
  }
}

void Importer::findTrainingState() {
  const onnx::GraphProto& graph = model_.graph();
  std::map<std::string, int> reads;
  countReads(graph, &reads);
  std::set<std::string> initializers;
  for (const TensorProto& t : graph.initializer())
    initializers.insert(t.name());
  for (int i = 0; i < graph.node_size(); ++i) {
    const NodeProto& n = graph.node(i);
    for (const auto& a : n.attribute())
      if (a.type() == onnx::AttributeProto::GRAPH)
        for (const NodeProto& inner : a.g().node())
          if (trainingBatchNorm(inner))
            throw Error("node " + nodeLabel(i) + " (" + n.op_type() +
                        "): a batch norm in training mode inside it; "
                        "modelc trains those only in the main graph");
    if (!trainingBatchNorm(n))
      continue;
    for (int k = 3; k < 5; ++k) {
      std::string name = k < n.input_size() ? n.input(k) : "";
      const char* what = k == 3 ? "running mean" : "running variance";
      if (!initializers.count(name))
        throw Error("node " + nodeLabel(i) + " (BatchNormalization): its " +
                    what + " '" + name +
                    "' is not an initializer; for "
                    "--train modelc keeps a training-mode batch norm's "
                    "running statistics as state it updates");
      if (reads[name] != 1)
        throw Error("node " + nodeLabel(i) + " (BatchNormalization): its " +
                    what + " '" + name + "' is read by " +
                    std::to_string(reads[name] - 1) +
                    " other node input(s); "
                    "modelc updates a running statistic once per step, as "
                    "state of one batch norm");
      state_.insert(name);
    }
  }
}

jit::TracedModule Importer::run() {
  load();
  checkOpset();
  const onnx::GraphProto& graph = model_.graph();
  // Unsupported ops first: the checker would report an op it does not know
  // either, without saying that modelc is what lacks it.
  for (int i = 0; i < graph.node_size(); ++i)
    handler(graph.node(i), "node " + nodeLabel(i));
  // Refuse external data outside the model's folder before anything reads
  // a file (the checker included).
  for (const TensorProto& t : graph.initializer())
    if (t.data_location() == TensorProto::EXTERNAL)
      externalDataPath(t, modelDir_);
  try {
    onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(model_.ir_version()));
    std::unordered_map<std::string, int> opsets;
    for (const auto& imp : model_.opset_import())
      opsets[imp.domain()] = static_cast<int>(imp.version());
    ctx.set_opset_imports(opsets);
    ctx.set_model_dir(modelDir_.string());
    onnx::checker::LexicalScopeContext lex;
    // The initializers whose raw data load() left in the file are shown to
    // the checker as what they are: data stored in a file (the model's own)
    // rather than inline. The graph is small without its weights.
    onnx::GraphProto checked = graph;
    for (int i = 0; i < checked.initializer_size(); ++i) {
      if (size_t(i) >= rawData_.size() || !rawData_[i])
        continue;
      TensorProto* t = checked.mutable_initializer(i);
      t->clear_raw_data();
      t->set_data_location(TensorProto::EXTERNAL);
      t->clear_external_data();
      auto* location = t->add_external_data();
      location->set_key("location");
      location->set_value(fs::path(path_).filename().string());
    }
    onnx::checker::check_graph(checked, ctx, lex);
  } catch (const std::exception& e) {
    // One line: the checker's message without its "==> Context" dump.
    std::string msg = e.what(), line;
    msg = msg.substr(0, msg.find("==> Context"));
    for (char ch : msg)
      if (ch != '\n' || (!line.empty() && line.back() != ' '))
        line += ch == '\n' ? ' ' : ch;
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    throw Error("'" + path_ + "' is not a valid ONNX model: " + line);
  }
  std::vector<std::string> doubles;
  doublePlaces(graph, &doubles);
  if (!doubles.empty() && options_.warn) {
    std::string list;
    for (size_t i = 0; i < doubles.size() && i < 4; ++i)
      list += (i ? ", " : "") + doubles[i];
    if (doubles.size() > 4)
      list += " and " + std::to_string(doubles.size() - 4) + " more";
    options_.warn("'" + path_ + "' uses DOUBLE (f64) in " +
                  std::to_string(doubles.size()) + " place" +
                  (doubles.size() > 1 ? "s" : "") + " (" + list +
                  "); modelc has no f64 and computes them in f32, as eager "
                  "PyTorch computes the Python scalars its exporter widens "
                  "to double; results differ from f64 ones by f32's "
                  "rounding (integers cast to DOUBLE round above 2^24), "
                  "are infinite where an f64 value would pass f32's range "
                  "(3.4e38), and a DOUBLE graph input is f32 in the "
                  "artifact");
  }

  // The running statistics of batch norms in training mode: for a
  // training step, state the step updates as PyTorch does (module
  // buffers), not parameters.
  if (options_.trainingState)
    findTrainingState();
  if (options_.weights)
    for (const rt::CheckpointEntry& e : options_.weights->entries)
      weights_[e.name] = &e;
  std::vector<std::pair<std::string, Tensor>> buffers;
  // Initializers: named parameters (and compile-time constants).
  std::vector<std::pair<std::string, Tensor>> parameters;
  std::set<std::string> initializerNames;
  uint64_t weightBytes = 0;
  for (int i = 0; i < graph.initializer_size(); ++i) {
    const TensorProto& t = graph.initializer(i);
    std::optional<RawOnFile> raw;
    if (size_t(i) < rawData_.size() && rawData_[i])
      raw = RawOnFile{path_, *rawData_[i]};
    Tensor value =
        trainedValue(t.name(), tensorFromProto(t, modelDir_,
                                               "initializer '" + t.name() + "'",
                                               &weightBytes, raw));
    // The tensor now holds the values: free the parsed copy, so the weights
    // are in memory once while the graph is traced.
    TensorProto* parsed = model_.mutable_graph()->mutable_initializer(i);
    std::string().swap(*parsed->mutable_raw_data());
    google::protobuf::RepeatedField<float>().Swap(
        parsed->mutable_float_data());
    google::protobuf::RepeatedField<int32_t>().Swap(
        parsed->mutable_int32_data());
    google::protobuf::RepeatedField<int64_t>().Swap(
        parsed->mutable_int64_data());
    google::protobuf::RepeatedField<double>().Swap(
        parsed->mutable_double_data());
    (state_.count(t.name()) ? buffers : parameters)
        .emplace_back(t.name(), value);
    values_[t.name()] = Value{value, /*constant=*/true,
                              options_.trainingState && isFloat(value.dtype())};
    initializerNames.insert(t.name());
  }
  if (graph.sparse_initializer_size())
    throw Error("'" + path_ + "' has sparse initializers, which modelc does "
                "not support");

  // Graph inputs (an input that has an initializer is that constant).
  jit::TraceOptions traceOptions;
  traceOptions.functionName = options_.functionName;
  traceOptions.buffers = std::move(buffers);
  // The importer owns its tensors: the module shares their storage.
  traceOptions.shareWeightStorage = true;
  std::vector<Tensor> examples;
  std::vector<std::string> inputNames, known;
  for (const auto& input : graph.input())
    if (!initializerNames.count(input.name()))
      known.push_back(input.name());
  for (const auto& [name, shape] : options_.inputShapes)
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const std::string& k : known)
        list += (list.empty() ? "" : ", ") + k;
      throw Error("--input-shape names '" + name + "', which is not an input "
                  "of '" + path_ + "' (inputs: " + list + ")");
    }
  for (const auto& input : graph.input()) {
    const std::string& name = input.name();
    if (initializerNames.count(name))
      continue;
    std::string what = "input '" + name + "'";
    if (!input.type().has_tensor_type())
      throw Error(what + " is not a tensor");
    auto given = options_.inputShapes.find(name);
    bool givenBatch = given != options_.inputShapes.end() &&
                      !given->second.empty() && given->second[0] < 0;
    if (givenBatch && !options_.batch)
      throw Error("--input-shape gives " + what + " a batch dim ('?'), "
                  "which needs --batch=MIN..MAX");
    if (options_.batch) {
      const auto& declared = input.type().tensor_type();
      bool fixedLead = declared.has_shape() &&
                       (declared.shape().dim_size() == 0 ||
                        declared.shape().dim(0).has_dim_value());
      if (given != options_.inputShapes.end() && !givenBatch)
        throw Error("--batch: --input-shape fixes every dimension of " +
                    what + "; with a dynamic batch, its leading dimension is "
                    "the batch: write it '?' (--input-shape " + name +
                    "=?x...)");
      if (fixedLead && givenBatch)
        throw Error("--batch: --input-shape " + name + "=?x... makes dim 0 "
                    "the batch, but the model fixes " + what + "'s dim 0 "
                    "to " +
                    (declared.shape().dim_size()
                         ? std::to_string(declared.shape().dim(0).dim_value())
                         : std::string("nothing (a scalar)")) +
                    "; a fixed leading dim cannot carry the batch");
      if (fixedLead || (!declared.has_shape() && !givenBatch))
        throw Error("--batch: " + what + " has no symbolic leading "
                    "dimension (a dim_param such as 'batch', or '?' in "
                    "--input-shape " + name + "=?x...); with a dynamic "
                    "batch, every input's leading dimension is the batch");
    }
    const auto& tt = input.type().tensor_type();
    DType dtype = dtypeOf(tt.elem_type(), what);
    std::string hint = options_.batch
                           ? "; give its other dimensions with --input-shape " +
                                 name + "=?xD1x... ('?' is the batch)"
                           : "; give its shape with --input-shape " + name +
                                 "=D0xD1x...";
    Shape shape;
    // The size a batch dim is traced at; the probe run varies it.
    auto batchTraceSize = [&] {
      const jit::DynamicBatch& b = *options_.batch;
      return b.opt ? b.opt : b.max;
    };
    if (!tt.has_shape()) {
      if (given == options_.inputShapes.end())
        throw Error(what + " has no declared shape" + hint);
      shape = given->second;
      if (givenBatch)
        shape[0] = batchTraceSize();
    } else {
      int rank = tt.shape().dim_size();
      if (given != options_.inputShapes.end() &&
          static_cast<int>(given->second.size()) != rank)
        throw Error("--input-shape gives " + what + " rank " +
                    std::to_string(given->second.size()) +
                    "; the model declares rank " + std::to_string(rank));
      for (int d = 0; d < rank; ++d) {
        const auto& dim = tt.shape().dim(d);
        bool fixed = dim.has_dim_value();
        if (given != options_.inputShapes.end()) {
          int64_t v = given->second[d];
          if (d == 0 && givenBatch) {
            shape.push_back(batchTraceSize());
            continue;
          }
          if (fixed && dim.dim_value() != v)
            throw Error("--input-shape gives " + what + " dimension " +
                        std::to_string(d) + " the size " + std::to_string(v) +
                        "; the model fixes it to " +
                        std::to_string(dim.dim_value()));
          shape.push_back(v);
        } else if (fixed) {
          shape.push_back(dim.dim_value());
        } else if (d == 0 && options_.batch) {
          shape.push_back(batchTraceSize());
        } else {
          throw Error(what + " has a dynamic dimension " + std::to_string(d) +
                      (dim.has_dim_param() ? " ('" + dim.dim_param() + "')"
                                           : std::string()) +
                      hint);
        }
      }
    }
    // Shape-only: the graph is traced without running it, so nothing is
    // computed on made-up input values and no activation is allocated.
    if (rt::Status s = rt::checkElementCount(shape); !s)
      throw Error(what + ": " + s.message());
    Tensor example = Tensor::shapeOnly(shape, dtype);
    values_[name] = Value{example, /*constant=*/false};
    examples.push_back(example);
    inputNames.push_back(name);
  }
  traceOptions.inputNames = inputNames;
  traceOptions.dynamicBatch = options_.batch;
  for (const auto& output : graph.output())
    traceOptions.outputNames.push_back(output.name());

  // One scope per node, for locations.
  std::vector<std::pair<std::string, const nn::Module*>> modules;
  for (int i = 0; i < graph.node_size(); ++i) {
    const NodeProto& n = graph.node(i);
    scopes_.push_back(std::make_unique<NodeScope>(n.op_type()));
    modules.emplace_back(n.name().empty() && n.output_size() ? n.output(0)
                                                             : n.name(),
                         scopes_.back().get());
  }

  // The traced function gets fresh views of the examples: rebind inputs.
  auto body = [&](const std::vector<Tensor>& in) {
    for (size_t k = 0; k < in.size(); ++k)
      values_[inputNames[k]] = Value{in[k], /*constant=*/false};
    for (int i = 0; i < graph.node_size(); ++i)
      runNode(graph.node(i),
              "node " + nodeLabel(i) + " (" + graph.node(i).op_type() + ")",
              scopes_[size_t(i)].get());
    std::vector<Tensor> results;
    for (const auto& output : graph.output()) {
      auto v = values_.find(output.name());
      if (v == values_.end())
        throw Error("graph output '" + output.name() + "' is not computed "
                    "by any node");
      results.push_back(v->second.tensor);
    }
    return results;
  };
  return jit::traceFunction(body, examples, parameters, modules,
                            traceOptions);
}

} // namespace

void parseOnnxInputShape(const std::string& spec, OnnxImportOptions& options) {
  size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--input-shape expects NAME=D0xD1x... (for example "
                "x=1x3x224x224), got '" + spec + "'");
  std::string name = spec.substr(0, eq), dims = spec.substr(eq + 1);
  Shape shape;
  size_t at = 0;
  while (!dims.empty() && at <= dims.size()) {
    size_t end = dims.find_first_of("x,", at);
    std::string d =
        dims.substr(at, end == std::string::npos ? std::string::npos
                                                 : end - at);
    char* stop = nullptr;
    long long v = std::strtoll(d.c_str(), &stop, 10);
    if (d == "?") {
      // The dynamic batch (with --batch), as the leading dim only.
      if (!shape.empty())
        throw Error("--input-shape " + spec + ": '?' (the batch) may only "
                    "be the leading dimension");
      v = -1;
    } else if (d.empty() || *stop != '\0' || v < 0) {
      throw Error("--input-shape " + spec + ": '" + d +
                  "' is not a dimension size (or '?', the batch, first)");
    }
    shape.push_back(v);
    if (end == std::string::npos)
      break;
    at = end + 1;
  }
  options.inputShapes[name] = shape;
}

jit::TracedModule importOnnx(const std::string& path,
                             const OnnxImportOptions& options) {
  return Importer(path, options).run();
}

} // namespace mc

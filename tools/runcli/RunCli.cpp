// modelc-run's logic: argument parsing, npy in/out, timing, inspection and
// comparison, all over the runtime's C++ API. Every failure is a message and
// exit code 1; nothing throws out of the *Main functions.
#include "tools/runcli/RunCli.h"

#include "modelc/device.h"
#include "modelc/fileio.h"
#include "modelc/model.h"
#include "modelc/npy.h"
#include "modelc/version.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace mc::cli {

using rt::DType;
using rt::Status;

namespace {

const char kUsage[] =
    "usage: %s MODEL.mcpk --input NAME=FILE.npy ... [--output-dir DIR] "
    "[--bench N [--batch B]] [--device cpu|cuda[:N]|auto]\n"
    "       %s --inspect MODEL.mcpk\n"
    "       %s --compare A.npy B.npy [--rtol X]\n"
    "       %s --train MODEL.mcpk --data NAME=FILE.npy ... --batch B --epochs "
    "E ...\n"
    "\n"
    "Runs a modelc artifact with the CPU runtime. Each output is written to\n"
    "DIR/<output name>.npy (bf16 outputs as f4). --bench N times N runs after\n"
    "warm-up runs (N/10, and at least 0.2 s) and prints the median and p90\n"
    "latency; for an\n"
    "artifact with a dynamic batch it times batch B (default: the artifact's\n"
    "opt), the rows of each --input repeated up to B. --device\n"
    "picks the device (default: the best one present; with --device auto\n"
    "it says which, and why). --inspect\n"
    "describes the artifact; --compare prints ||a-b||/||b|| and max |a-b| and\n"
    "fails when they differ by more than rtol (default 1e-5). --train runs a\n"
    "compiled training step over a dataset (see --train --help).\n";

std::string toolName(int argc, char **argv) {
  if (argc < 1 || !argv[0])
    return "modelc-run";
  std::string s = argv[0];
  size_t slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

int error(const std::string &tool, const std::string &msg) {
  std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), msg.c_str());
  return 1;
}

/// Runs `body`, turning an escaping exception into an error exit.
template <typename F> int guarded(const std::string &tool, F body) {
  try {
    return body();
  } catch (const std::exception &e) {
    return error(tool, std::string("internal error: ") + e.what());
  } catch (...) {
    return error(tool, "internal error");
  }
}

bool parseInt(const std::string &s, long long *out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end)
    return false;
  *out = v;
  return true;
}

bool parseDouble(const std::string &s, double *out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (errno || *end)
    return false;
  *out = v;
  return true;
}

std::string typeString(DType t, const rt::Shape &s) {
  return std::string(rt::dtypeName(t)) + rt::shapeString(s);
}

/// Element i of a tensor as a double (exact for every dtype but large i64).
double elementAt(DType t, const uint8_t *p, int64_t i) {
  switch (t) {
  case DType::F32:
    return reinterpret_cast<const float *>(p)[i];
  case DType::F16:
    return rt::halfToFloat(reinterpret_cast<const uint16_t *>(p)[i]);
  case DType::BF16:
    return rt::bf16ToFloat(reinterpret_cast<const uint16_t *>(p)[i]);
  case DType::I32:
    return reinterpret_cast<const int32_t *>(p)[i];
  case DType::I64:
    return double(reinterpret_cast<const int64_t *>(p)[i]);
  case DType::I1:
    return p[i] != 0;
  }
  return 0;
}

/// The mc-amp report: which element type each op computes in, and why.
void printPrecision(const fb::Model &t) {
  std::map<std::string, int> counts;
  std::printf("\nprecision (mc-amp decisions, forward ops):\n");
  std::printf("  %-5s %-14s %-5s %-36s %s\n", "step", "op", "type", "reason",
              "location");
  if (t.steps()) {
    for (flatbuffers::uoffset_t i = 0; i < t.steps()->size(); ++i) {
      const fb::Step *s = t.steps()->Get(i);
      // A fused step: each op of its region, as "fused/matmul".
      if (s->body())
        for (const fb::RegionOp *r : *s->body()) {
          if (!r->precision())
            continue;
          ++counts[r->precision()->str()];
          std::string op = std::string("fused/") + r->op()->c_str();
          std::printf("  %-5u %-14s %-5s %-36s %s\n", i, op.c_str(),
                      r->precision()->c_str(),
                      r->precision_reason() ? r->precision_reason()->c_str()
                                            : "",
                      r->location() ? r->location()->c_str() : "");
        }
      if (!s->precision())
        continue;
      ++counts[s->precision()->str()];
      std::printf("  %-5u %-14s %-5s %-36s %s\n", i,
                  s->op()->c_str(), s->precision()->c_str(),
                  s->precision_reason() ? s->precision_reason()->c_str() : "",
                  s->location() ? s->location()->c_str() : "");
    }
  }
  if (counts.empty()) {
    std::printf("  (no AMP decisions: compiled without --amp)\n");
    return;
  }
  std::printf("  total:");
  for (const auto &[type, n] : counts)
    std::printf(" %s %d", type.c_str(), n);
  std::printf("\n");
}

int inspect(const std::string &tool, const std::string &path,
            bool precision) {
  std::unique_ptr<rt::Model> model;
  // Inspecting needs no device of the file's targets.
  Status st = rt::Model::loadFile(path, &model, /*checkTargets=*/false);
  if (!st)
    return error(tool, st.message());
  const fb::Model &t = model->table();
  auto str = [](const flatbuffers::String *s) {
    return s ? s->str() : std::string();
  };
  std::printf("file:       %s (%llu bytes)\n", path.c_str(),
              (unsigned long long)model->fileSize());
  std::printf("producer:   %s %s\n", str(t.producer()).c_str(),
              str(t.producer_version()).c_str());
  std::printf("schema:     %u.%u\n", t.schema_version_major(),
              t.schema_version_minor());
  std::printf("entry:      %s\n", str(t.entry()).c_str());
  std::string targets;
  if (t.targets())
    for (const flatbuffers::String *s : *t.targets())
      targets += (targets.empty() ? "" : ", ") + s->str();
  std::printf("targets:    %s\n", targets.empty() ? "-" : targets.c_str());
  if (const auto *exes = t.executables())
    for (const fb::Executable *e : *exes) {
      size_t launched = 0, checking = 0;
      if (const auto *steps = t.steps())
        for (const fb::Step *s : *steps) {
          launched += s->executable() >= 0;
          checking += s->executable() >= 0 && s->launch() &&
                      s->launch()->error_record();
        }
      std::string records =
          checking ? ", " + std::to_string(checking) +
                         " of them with an error record"
                   : "";
      std::printf("executable: %s %s, %zu bytes, %u entry points (%zu steps "
                  "launch generated kernels%s)\n",
                  str(e->target()).c_str(), str(e->format()).c_str(),
                  size_t(e->data() ? e->data()->size() : 0),
                  e->entry_points() ? e->entry_points()->size() : 0u,
                  launched, records.c_str());
    }
  if (model->dynamicBatch()) {
    rt::BatchBounds b = model->batch();
    std::printf("batch:      %lld..%lld (opt %lld)\n", (long long)b.min,
                (long long)b.max, (long long)b.opt);
  }
  auto sigs = [](const char *title, const std::vector<rt::TensorInfo> &list) {
    std::printf("%s (%zu):\n", title, list.size());
    for (const rt::TensorInfo &i : list)
      std::printf("  %-24s %s\n", i.name.c_str(), i.typeString().c_str());
  };
  sigs("inputs", model->inputs());
  sigs("outputs", model->outputs());
  if (const fb::PlanStats *u = t.unfused())
    std::printf("arena:      %llu bytes (one step per op: %llu)\n",
                (unsigned long long)t.arena_size(),
                (unsigned long long)u->arena_size());
  else
    std::printf("arena:      %llu bytes\n", (unsigned long long)t.arena_size());
  std::map<std::string, int> kinds;
  size_t numSteps = t.steps() ? t.steps()->size() : 0;
  if (t.steps())
    for (const fb::Step *s : *t.steps())
      ++kinds[s->op()->c_str()];
  std::string perKind;
  for (const auto &[k, n] : kinds)
    perKind += (perKind.empty() ? "" : ", ") + k + " " + std::to_string(n);
  std::printf("steps:      %zu%s%s%s\n", numSteps, perKind.empty() ? "" : " (",
              perKind.c_str(), perKind.empty() ? "" : ")");
  // What fusion saved: the compiler records the same model planned with one
  // step per op (schema 2.2, Model.unfused).
  {
    std::set<uint32_t> outputs;
    if (t.outputs())
      for (const fb::TensorSig *o : *t.outputs())
        outputs.insert(o->buffer());
    unsigned long long written = 0;
    size_t regions = 0, attention = 0;
    if (t.steps() && t.buffers())
      for (const fb::Step *s : *t.steps()) {
        regions += s->body() && s->body()->size();
        if (s->body() && s->attrs())
          for (const fb::Attr *a : *s->attrs())
            attention += a->name() && a->name()->str() == "attention" &&
                         a->i() != 0;
        if (s->outputs())
          for (uint32_t o : *s->outputs()) {
            const fb::Buffer *b = t.buffers()->Get(o);
            if (b->kind() == fb::BufferKind::Arena && !outputs.count(o))
              written += b->size();
          }
      }
    const char *atMax = model->dynamicBatch() ? ", at the max batch" : "";
    // Attention regions: the CPU's fused attention kernel; cuDNN's fused
    // attention on the CUDA device (docs/cuda.md).
    std::string attn =
        attention ? ", " + std::to_string(attention) + " of them attention"
                  : "";
    if (const fb::PlanStats *u = t.unfused()) {
      std::printf("fusion:     %zu fused steps%s (one step per op: %llu "
                  "steps)\n",
                  regions, attn.c_str(), (unsigned long long)u->steps());
      std::printf("written:    %llu bytes of intermediates per run (one step "
                  "per op: %llu)%s\n",
                  written, (unsigned long long)u->intermediate_bytes(), atMax);
    } else {
      std::printf("fusion:     %zu fused steps%s\n", regions, attn.c_str());
      std::printf("written:    %llu bytes of intermediates per run%s\n",
                  written, atMax);
    }
  }
  size_t constants = 0;
  unsigned long long weightBytes = 0;
  if (t.buffers())
    for (const fb::Buffer *b : *t.buffers())
      if (b->kind() == fb::BufferKind::Constant) {
        ++constants;
        weightBytes += b->size();
      }
  std::printf("weights:    %llu bytes in %zu constant buffers (data section "
              "%llu bytes, 64-byte aligned)\n",
              weightBytes, constants, (unsigned long long)t.data_size());
  if (!model->states().empty()) {
    std::printf("state (%zu, %llu bytes; training):\n", model->states().size(),
                (unsigned long long)model->stateSize());
    for (const rt::TensorInfo &i : model->states())
      std::printf("  %-24s %s\n", i.name.c_str(),
                  typeString(i.dtype, i.shape).c_str());
  }
  if (precision)
    printPrecision(t);
  return 0;
}

int compare(const std::string &tool, const std::string &a, const std::string &b,
            double rtol) {
  rt::NpyArray x, y;
  Status st = rt::readNpy(a, &x);
  if (!st)
    return error(tool, st.message());
  st = rt::readNpy(b, &y);
  if (!st)
    return error(tool, st.message());
  if (x.dtype != y.dtype || x.shape != y.shape)
    return error(tool, a + " is " + typeString(x.dtype, x.shape) + " but " + b +
                           " is " + typeString(y.dtype, y.shape));
  int64_t n = rt::numElements(x.shape);
  if (x.dtype == DType::I32 || x.dtype == DType::I64 || x.dtype == DType::I1) {
    // Integers (ids, indices, masks) match exactly, compared as integers:
    // through double, 2^62 and 2^62 + 1 were equal.
    auto at = [](const rt::NpyArray &arr, int64_t i) -> int64_t {
      if (arr.dtype == DType::I64)
        return reinterpret_cast<const int64_t *>(arr.data.data())[i];
      if (arr.dtype == DType::I32)
        return reinterpret_cast<const int32_t *>(arr.data.data())[i];
      return arr.data[size_t(i)] != 0;
    };
    int64_t differ = 0, first = -1;
    for (int64_t i = 0; i < n; ++i)
      if (at(x, i) != at(y, i) && differ++ == 0)
        first = i;
    std::printf("%s vs %s: %s, %lld of %lld elements differ (integers match "
                "exactly): %s\n",
                a.c_str(), b.c_str(), typeString(x.dtype, x.shape).c_str(),
                (long long)differ, (long long)n, differ ? "FAIL" : "ok");
    if (differ)
      return error(tool, "element " + std::to_string(first) + " is " +
                             std::to_string(at(x, first)) + " in " + a +
                             " and " + std::to_string(at(y, first)) + " in " +
                             b);
    return 0;
  }
  double diff2 = 0, ref2 = 0, maxAbs = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    double u = elementAt(x.dtype, x.data.data(), i);
    double v = elementAt(y.dtype, y.data.data(), i);
    if (std::isnan(u) || std::isnan(v)) {
      ++nans;
      continue;
    }
    // Equal infinities match, and stay out of the norms: an infinite
    // reference norm made any other error 0.
    if (u == v && std::isinf(v))
      continue;
    double d = std::fabs(u - v);
    diff2 += d * d;
    ref2 += v * v;
    maxAbs = std::max(maxAbs, d);
  }
  // An infinite difference (+inf against -inf or a number) is an infinite
  // error, not inf / inf.
  double rel = diff2 == 0           ? 0.0
               : std::isinf(diff2) ? INFINITY
                                   : std::sqrt(diff2) / std::sqrt(ref2);
  bool ok = nans == 0 && rel <= rtol;
  std::printf("%s vs %s: %s, rel_err %.3e, max_abs_err %.3e, rtol %.1e: %s\n",
              a.c_str(), b.c_str(), typeString(x.dtype, x.shape).c_str(), rel,
              maxAbs, rtol, ok ? "ok" : "FAIL");
  if (nans)
    return error(tool, std::to_string(nans) + " element(s) are NaN");
  if (!ok)
    return error(tool, "relative error " + std::to_string(rel) +
                           " exceeds rtol " + std::to_string(rtol));
  return 0;
}

/// Reads input `name` from `path` into `*arr` and sets it; the session
/// checks the shape (a dynamic batch takes any size within its bounds).
Status loadInput(const rt::Model &model, const std::string &name,
                 const std::string &path, rt::Session &session,
                 std::set<size_t> &given, std::vector<rt::NpyArray> &arrays) {
  size_t index;
  MC_RETURN_IF_ERROR(model.findInput(name, &index));
  if (!given.insert(index).second)
    return Status::error("input '" + name + "' is given twice");
  const rt::TensorInfo &info = model.inputs()[index];
  rt::NpyArray &arr = arrays[index];
  Status st = rt::readNpy(path, &arr);
  if (!st)
    return Status::error("input '" + name + "': " + st.message());
  // bf16 has no NumPy dtype: a bf16 input takes an f4 file, rounded (RNE).
  if (info.dtype == DType::BF16 && arr.dtype == DType::F32) {
    std::vector<uint8_t> bf(arr.data.size() / 2);
    MC_RETURN_IF_ERROR(rt::cast({DType::F32, arr.shape, arr.data.data()},
                                {DType::BF16, arr.shape, bf.data()}));
    arr.dtype = DType::BF16;
    arr.data = std::move(bf);
  }
  st = session.setInput(index, arr.dtype, arr.shape, arr.data.data(),
                        arr.data.size());
  if (!st)
    return Status::error(st.message() +
                         (info.dtype == DType::BF16 ? " (as an f4 .npy)" : "") +
                         " from " + path);
  return Status::ok();
}

/// `arr` with its dim `dim` made `size` long by repeating its rows (row i
/// is row i % n): inputs for --bench at a batch other than the file's.
rt::NpyArray cycleRows(const rt::NpyArray &arr, size_t dim, int64_t size) {
  rt::NpyArray out = arr;
  int64_t n = arr.shape[dim];
  out.shape[dim] = size;
  size_t outer = 1, row = rt::dtypeSize(arr.dtype);
  for (size_t d = 0; d < dim; ++d)
    outer *= size_t(arr.shape[d]);
  for (size_t d = dim + 1; d < arr.shape.size(); ++d)
    row *= size_t(arr.shape[d]);
  out.data.resize(outer * size_t(size) * row);
  for (size_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < size; ++i)
      std::memcpy(out.data.data() + (o * size_t(size) + size_t(i)) * row,
                  arr.data.data() + (o * size_t(n) + size_t(i % n)) * row, row);
  return out;
}

/// Sets every input at batch `batch` for --bench (inputs without a batch
/// dim stay as they are).
Status setInputsAtBatch(const rt::Model &model,
                        const std::vector<rt::NpyArray> &arrays, int64_t batch,
                        rt::Session &session) {
  for (size_t i = 0; i < arrays.size(); ++i) {
    const rt::TensorInfo &info = model.inputs()[i];
    for (size_t d = 0; d < info.batchScale.size(); ++d)
      if (info.batchScale[d]) { // inputs: 1, the batch itself
        rt::NpyArray a = cycleRows(arrays[i], d, batch);
        MC_RETURN_IF_ERROR(session.setInput(i, a.dtype, a.shape, a.data.data(),
                                            a.data.size()));
        break;
      }
  }
  return Status::ok();
}

/// The batch --bench times: `requested` (0: none given) checked against
/// the model, else a dynamic model's opt; 0 for a static model (the size
/// it was compiled for).
Status benchBatch(const rt::Model &model, long long requested, int64_t *batch) {
  *batch = 0;
  if (model.dynamicBatch()) {
    rt::BatchBounds b = model.batch();
    *batch = requested ? requested : b.opt;
    if (*batch < b.min || *batch > b.max)
      return Status::error("--batch " + std::to_string(requested) +
                           " is outside the artifact's batch bounds [" +
                           std::to_string(b.min) + ", " +
                           std::to_string(b.max) + "]");
    return Status::ok();
  }
  if (!requested)
    return Status::ok();
  // A static artifact runs only at the batch it was compiled for: the
  // leading dim of its first input.
  const auto &inputs = model.inputs();
  if (inputs.empty() || inputs[0].shape.empty())
    return Status::error("--batch " + std::to_string(requested) +
                         ": the artifact has static shapes and no batch "
                         "dimension (recompile it with a dynamic batch)");
  if (requested != inputs[0].shape[0])
    return Status::error(
        "--batch " + std::to_string(requested) +
        ": the artifact was compiled for batch " +
        std::to_string(inputs[0].shape[0]) + " (input '" + inputs[0].name +
        "' is " + inputs[0].typeString() +
        ") and has no dynamic batch; recompile it with one to time other "
        "sizes");
  return Status::ok();
}

/// Times `count` runs after warm-up ones and prints the median and p90.
/// Warm-up is a tenth of the runs (1 to 10) and at least 0.2 s: on this
/// project's 2-core VM a 1.7 ms region ran its first ~20 runs in 8 ms
/// (idle threads woken late), which a single warm-up run left in the
/// median of `--bench 10` (7.99 ms against 1.73).
Status benchmark(rt::Session &session, long long count, int64_t batch) {
  long long warmup = 0;
  auto start = std::chrono::steady_clock::now();
  auto warming = [&] {
    if (warmup < std::min(10LL, std::max(1LL, count / 10)))
      return true;
    return warmup < 10 * std::max(count, 10LL) &&
           std::chrono::steady_clock::now() - start <
               std::chrono::milliseconds(200);
  };
  for (; warming(); ++warmup)
    MC_RETURN_IF_ERROR(session.run());
  std::vector<double> ms;
  ms.reserve(size_t(count));
  for (long long i = 0; i < count; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Status st = session.run();
    auto t1 = std::chrono::steady_clock::now();
    MC_RETURN_IF_ERROR(st);
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  auto pct = [&](double p) {
    return ms[std::min(ms.size() - 1, size_t(p * double(ms.size() - 1) + 0.5))];
  };
  std::string at = batch ? " at batch " + std::to_string(batch) : "";
  std::printf("bench: %lld runs%s after %lld warm-up: median %.4g ms, p90 "
              "%.4g ms\n",
              count, at.c_str(), warmup, pct(0.5), pct(0.9));
  return Status::ok();
}

int run(const std::string &tool, const std::string &modelPath,
        const std::vector<std::pair<std::string, std::string>> &givenInputs,
        const std::string &outDir, long long bench, long long batch,
        const std::string &deviceSpec) {
  std::unique_ptr<rt::Model> model;
  Status st = rt::Model::loadFile(modelPath, &model);
  if (!st)
    return error(tool, st.message());
  int64_t benchAt = 0;
  if (!(st = benchBatch(*model, batch, &benchAt)))
    return error(tool, st.message());
  std::unique_ptr<rt::Device> device;
  std::string why;
  if (!(st = rt::createDevice(deviceSpec.empty() ? "auto" : deviceSpec,
                               &device, &why, artifactTargets(*model))))
    return error(tool, st.message());
  // "running on cpu (--device auto; cuda skipped: no CUDA driver: ...)"
  if (deviceSpec == "auto")
    std::fprintf(stderr, "%s: running on %s (--device auto; %s)\n",
                 tool.c_str(), device->name().c_str(), why.c_str());
  std::unique_ptr<rt::Session> session;
  st = rt::Session::create(*model, std::move(device), &session);
  if (!st)
    return error(tool, st.message());
  // NAME=FILE splits at the first '=' unless the model has an input whose
  // name holds one ('a=b=x.npy' is input 'a=b' where there is one).
  std::vector<std::pair<std::string, std::string>> inputs = givenInputs;
  for (auto &[name, path] : inputs) {
    size_t index;
    std::string whole = name + "=" + path;
    for (size_t eq = whole.find('=', name.size() + 1);
         !model->findInput(name, &index) && eq != std::string::npos &&
         eq + 1 < whole.size();
         eq = whole.find('=', eq + 1))
      if (model->findInput(whole.substr(0, eq), &index)) {
        path = whole.substr(eq + 1);
        name = whole.substr(0, eq);
      }
  }
  std::set<size_t> given;
  std::vector<rt::NpyArray> arrays(model->inputs().size());
  for (const auto &[name, path] : inputs) {
    st = loadInput(*model, name, path, *session, given, arrays);
    if (!st)
      return error(tool, st.message());
  }
  for (size_t i = 0; i < model->inputs().size(); ++i)
    if (!given.count(i)) {
      const rt::TensorInfo &info = model->inputs()[i];
      return error(tool, "input '" + info.name + "' (" + info.typeString() +
                             ") is not given; pass --input " + info.name +
                             "=FILE.npy");
    }
  st = session->run();
  if (!st)
    return error(tool, st.message());
  if (!outDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(outDir, ec);
    if (ec)
      return error(tool, outDir + ": cannot create the output directory: " +
                             ec.message());
  }
  // The outputs of the run at the inputs' batch, before --bench may run
  // another size. Every file is named and checked before any is written:
  // a run that fails on its sixth output must not have replaced five.
  size_t count = model->outputs().size();
  std::vector<std::string> where(count, "(not written; pass --output-dir)");
  if (!outDir.empty()) {
    // The files this run read: no output may be one of them.
    std::vector<std::pair<std::string, std::string>> readFrom{
        {"the model", modelPath}};
    for (const auto &[input, path] : inputs)
      readFrom.push_back({"input '" + input + "'", path});
    std::set<std::string> used;
    for (size_t i = 0; i < count; ++i) {
      const std::string &name = model->outputs()[i].name;
      std::string file = sanitizeOutputName(name);
      for (int k = 1; used.count(file); ++k) // two names that sanitize alike
        file = sanitizeOutputName(name + "_" + std::to_string(k));
      used.insert(file);
      where[i] = (std::filesystem::path(outDir) / (file + ".npy")).string();
      std::error_code ec;
      auto status = std::filesystem::status(where[i], ec);
      if (std::filesystem::exists(status) &&
          !std::filesystem::is_regular_file(status))
        return error(tool, "output '" + name + "' would be written to " +
                               where[i] + ", which is not a regular file; "
                               "nothing was written");
      for (const auto &[what, path] : readFrom)
        if (rt::sameFile(where[i], path))
          return error(tool, "output '" + name + "' would be written to " +
                                 where[i] + ", which is " + what + " (" +
                                 path + "); nothing was written");
    }
  }
  for (size_t i = 0; i < count; ++i) {
    const rt::TensorInfo &info = model->outputs()[i];
    rt::Shape shape;
    if (!(st = session->outputShape(i, &shape)))
      return error(tool, st.message());
    std::vector<uint8_t> bytes(info.byteSizeAt(session->batch()));
    if (!(st = session->copyOutput(i, bytes.data(), bytes.size())))
      return error(tool, st.message());
    if (!outDir.empty() &&
        !(st = rt::writeNpy(where[i], info.dtype, shape, bytes.data())))
      return error(tool, st.message());
    std::printf("%s %s%s -> %s\n", info.name.c_str(),
                typeString(info.dtype, shape).c_str(),
                info.dtype == DType::BF16 ? " (written as f4)" : "",
                where[i].c_str());
  }
  if (bench > 0) {
    if (benchAt && benchAt != session->batch() &&
        !(st = setInputsAtBatch(*model, arrays, benchAt, *session)))
      return error(tool, st.message());
    if (!(st = benchmark(*session, bench, benchAt)))
      return error(tool, st.message());
  }
  return 0;
}

} // namespace

std::string sanitizeOutputName(const std::string &name) {
  std::string s;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    s += ok ? c : '_';
  }
  if (s.empty() || s[0] == '.')
    s = "_" + s; // never "", ".", ".." or a hidden file
  return s.substr(0, 200);
}

std::vector<std::string> artifactTargets(const rt::Model &model) {
  std::vector<std::string> out;
  if (const auto *targets = model.table().targets())
    for (const flatbuffers::String *t : *targets)
      out.push_back(t->str());
  return out;
}

int inspectMain(int argc, char **argv) {
  std::string tool = toolName(argc, argv);
  return guarded(tool, [&] {
    std::string path;
    bool precision = false;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "-h" || a == "--help") {
        std::printf("usage: %s MODEL.mcpk [--precision]\n", tool.c_str());
        return 0;
      }
      if (a == "--precision") {
        precision = true;
        continue;
      }
      if (!path.empty() || (a.size() > 1 && a[0] == '-'))
        return error(tool, "unexpected argument '" + a + "'");
      path = a;
    }
    if (path.empty())
      return error(tool, "no model given (usage: " + tool + " MODEL.mcpk)");
    return inspect(tool, path, precision);
  });
}

int compareMain(int argc, char **argv) {
  std::string tool = toolName(argc, argv);
  return guarded(tool, [&] {
    std::vector<std::string> files;
    double rtol = 1e-5;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "-h" || a == "--help") {
        std::printf("usage: %s A.npy B.npy [--rtol X]\n", tool.c_str());
        return 0;
      }
      if (a == "--rtol" || a.rfind("--rtol=", 0) == 0) {
        std::string v =
            a == "--rtol" ? (i + 1 < argc ? argv[++i] : "") : a.substr(7);
        if (!parseDouble(v, &rtol) || !(rtol >= 0))
          return error(tool,
                       "--rtol needs a non-negative number, got '" + v + "'");
      } else if (a.size() > 1 && a[0] == '-') {
        return error(tool, "unknown option '" + a + "'");
      } else {
        files.push_back(a);
      }
    }
    if (files.size() != 2)
      return error(tool, "expected two .npy files (A B), got " +
                             std::to_string(files.size()));
    return compare(tool, files[0], files[1], rtol);
  });
}

namespace {

int runOrForward(int argc, char **argv) {
  std::string tool = toolName(argc, argv);
  for (int i = 1; i < argc; ++i)
    if (argv[i] && std::string(argv[i]) == "--train")
      return trainMain(argc, argv); // its own options (Train.cpp)
  return guarded(tool, [&]() -> int {
    std::string model, outDir;
    std::vector<std::pair<std::string, std::string>> inputs;
    long long bench = 0, batch = 0;
    std::string deviceSpec; // "": auto, silently
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      // --opt VALUE or --opt=VALUE
      auto value = [&](const char *opt, std::string *out) {
        std::string o = opt;
        if (a == o) {
          if (i + 1 >= argc)
            return false;
          *out = argv[++i];
          return true;
        }
        if (a.rfind(o + "=", 0) == 0) {
          *out = a.substr(o.size() + 1);
          return true;
        }
        return false;
      };
      std::string v;
      if (a == "-h" || a == "--help") {
        std::printf(kUsage, tool.c_str(), tool.c_str(), tool.c_str(),
                    tool.c_str());
        return 0;
      }
      if (a == "--version") {
        std::printf("%s %s\n", tool.c_str(), rt::modelcVersion());
        return 0;
      }

      // `--inspect M` and `M --inspect` both work: every other argument
      // goes along.
      if (a == "--inspect" || a == "--compare") {
        std::vector<char *> args{argv[0]};
        for (int j = 1; j < argc; ++j)
          if (j != i)
            args.push_back(argv[j]);
        return a == "--inspect" ? inspectMain(int(args.size()), args.data())
                                : compareMain(int(args.size()), args.data());
      }
      if (value("--input", &v) || value("-i", &v)) {
        size_t eq = v.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
          return error(tool, "--input needs NAME=FILE.npy, got '" + v + "'");
        inputs.emplace_back(v.substr(0, eq), v.substr(eq + 1));
      } else if (value("--output-dir", &v) || value("-o", &v)) {
        if (v.empty())
          return error(tool, "--output-dir needs a directory, got ''");
        if (!outDir.empty() && outDir != v)
          return error(tool, "--output-dir is given twice ('" + outDir +
                                 "' and '" + v + "')");
        outDir = v;
      } else if (value("--device", &v)) {
        deviceSpec = v;
      } else if (value("--bench", &v)) {
        if (!parseInt(v, &bench) || bench < 1)
          return error(tool, "--bench needs a positive count, got '" + v + "'");
      } else if (value("--batch", &v)) {
        if (!parseInt(v, &batch) || batch < 1)
          return error(tool, "--batch needs a positive size, got '" + v + "'");
      } else if (a == "--input" || a == "--output-dir" || a == "--bench" ||
                 a == "--device" || a == "--batch" || a == "-i" || a == "-o") {
        return error(tool, a + " needs a value");
      } else if (a.size() > 1 && a[0] == '-') {
        return error(tool, "unknown option '" + a + "' (see --help)");
      } else if (!model.empty()) {
        return error(tool, "more than one model given ('" + model + "', '" + a +
                               "')");
      } else {
        model = a;
      }
    }
    if (model.empty())
      return error(tool, "no model given (see --help)");
    if (batch && !bench)
      return error(tool, "--batch sets the batch size --bench times; pass "
                         "--bench N too (a run takes the batch of its inputs)");
    return run(tool, model, inputs, outDir, bench, batch, deviceSpec);
  });
}

} // namespace

int runMain(int argc, char **argv) {
  int rc = runOrForward(argc, argv);
  // Everything printed arrived: `--inspect > /dev/full` is an error.
  Status st = rt::finishStdout();
  if (rc == 0 && !st)
    return error(toolName(argc, argv), st.message());
  return rc;
}

} // namespace mc::cli

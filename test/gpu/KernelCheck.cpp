// See KernelCheck.h.
#include "KernelCheck.h"
#include "modelc/error_record.h"

#include "SpirvLowering.h"

#include "codegen/cuda/KernelGen.h"
#include "modelc/device.h"
#include "modelc/kernels.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <regex>

namespace mc::gputest {
namespace {

using codegen::Plan;
using codegen::PlanBuffer;
using codegen::PlanRegionOp;
using codegen::PlanStep;
using rt::DType;
using Shape = std::vector<int64_t>;

const char* kindName(codegen::cuda::KernelKind k) {
  switch (k) {
  case codegen::cuda::KernelKind::Elementwise: return "elementwise";
  case codegen::cuda::KernelKind::Index: return "index";
  case codegen::cuda::KernelKind::Rows: return "rows";
  case codegen::cuda::KernelKind::Reduce: return "reduce";
  case codegen::cuda::KernelKind::Pool: return "pool";
  case codegen::cuda::KernelKind::Scatter:
    return "scatter";
  default: return "none";
  }
}

size_t bytesOf(const PlanBuffer& b, int64_t batch) {
  int64_t n = 1;
  for (size_t d = 0; d < b.shape.size(); ++d)
    n *= (d < b.batchScale.size() && b.batchScale[d] > 0)
             ? b.batchScale[d] * batch
             : b.shape[d];
  return size_t(n) * rt::dtypeSize(b.dtype);
}
Shape shapeAt(const PlanBuffer& b, int64_t batch) {
  Shape s = b.shape;
  for (size_t d = 0; d < s.size(); ++d)
    if (d < b.batchScale.size() && b.batchScale[d] > 0)
      s[d] = b.batchScale[d] * batch;
  return s;
}

/// What an output holds before the kernel runs: NaN for floats, 0xA5
/// bytes for integers and i1 (165, neither true nor false), so an element
/// the kernel never writes cannot pass for a small value (a softmax over a
/// long axis is under the tolerance everywhere).
void fillUnwritten(std::vector<uint8_t>& bytes, DType t) {
  std::fill(bytes.begin(), bytes.end(), uint8_t(0xA5));
  auto pattern = [&](const void* p, size_t n) {
    for (size_t o = 0; o + n <= bytes.size(); o += n)
      std::memcpy(bytes.data() + o, p, n);
  };
  uint32_t f32 = 0x7fc00000u;
  uint16_t f16 = 0x7e00u, bf16 = 0x7fc0u;
  if (t == DType::F32)
    pattern(&f32, 4);
  else if (t == DType::F16)
    pattern(&f16, 2);
  else if (t == DType::BF16)
    pattern(&bf16, 2);
}

void fillRandom(std::vector<uint8_t>& bytes, DType t, std::mt19937& rng,
                bool positive) {
  std::uniform_real_distribution<float> u(positive ? 0.1f : -3.f, 3.f);
  size_t n = bytes.size() / rt::dtypeSize(t);
  for (size_t i = 0; i < n; ++i) {
    float v = u(rng);
    switch (t) {
    case DType::F32:
      std::memcpy(bytes.data() + 4 * i, &v, 4);
      break;
    case DType::F16: {
      uint16_t h = rt::floatToHalf(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
      break;
    }
    case DType::BF16: {
      uint16_t h = rt::floatToBf16(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
      break;
    }
    case DType::I32: {
      int32_t x = int32_t(std::lround(v * 10));
      std::memcpy(bytes.data() + 4 * i, &x, 4);
      break;
    }
    case DType::I64: {
      int64_t x = std::lround(v * 10);
      std::memcpy(bytes.data() + 8 * i, &x, 8);
      break;
    }
    case DType::I1:
      bytes[i] = v > 0;
      break;
    default:
      break;
    }
  }
}

/// Whether element i of two f16 or bf16 buffers are neighbours: the same
/// sign and one ulp apart. Each op rounds its f32 result to its element
/// type, and f32 results that differ in their last bits (another order of
/// a sum) round to neighbours when the exact value lies near a halfway
/// point: a bf16 layer_norm gave 3.640625 for the CPU's 3.65625, 4.3e-3
/// relative, over --tol's 1e-4 for a right kernel. Counted apart
/// (StepCheck::oneUlp); tests of rounding want none.
bool neighbours(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                DType t, size_t i) {
  if (t != DType::F16 && t != DType::BF16)
    return false;
  uint16_t x, y;
  std::memcpy(&x, a.data() + 2 * i, 2);
  std::memcpy(&y, b.data() + 2 * i, 2);
  // Infinities and NaNs (an all-ones exponent) have no neighbours.
  int exponent = t == DType::F16 ? 0x7C00 : 0x7F80;
  if ((x & exponent) == exponent || (y & exponent) == exponent ||
      (x & 0x8000) != (y & 0x8000))
    return false;
  return std::abs(int(x) - int(y)) == 1;
}

double valueAt(const std::vector<uint8_t>& bytes, DType t, size_t i) {
  switch (t) {
  case DType::F32: {
    float v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  case DType::F16: {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return rt::halfToFloat(h);
  }
  case DType::BF16: {
    uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return rt::bf16ToFloat(h);
  }
  case DType::I32: {
    int32_t v;
    std::memcpy(&v, bytes.data() + 4 * i, 4);
    return v;
  }
  case DType::I64: {
    int64_t v;
    std::memcpy(&v, bytes.data() + 8 * i, 8);
    return double(v);
  }
  case DType::I1:
    return bytes[i];
  default:
    return 0;
  }
}

} // namespace

bool checkStep(const Plan& plan, size_t index, int64_t batch, bool positive,
               VulkanRunner& runner, StepCheck* out, std::string* error,
               const std::vector<std::vector<uint8_t>>* given,
               const std::vector<int>* inPlace) {

    const PlanStep& step = plan.steps[index];
    batch = plan.batch.dynamic() ? batch : 0;
    auto fail = [&](const std::string& why) {
      *error = "step " + std::to_string(index) + " (mc." +
               rt::opName(step.op) + "): " + why;
      return false;
    };
    std::mt19937 rng(7);
    std::vector<std::vector<uint8_t>> ins;
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      uint32_t i = step.inputs[k];
      // Buffers are sized at the max batch (the kernel's memref types).
      const PlanBuffer& b = plan.buffers[i];
      std::vector<uint8_t> bytes(bytesOf(b, plan.batch.dynamic()
                                                ? plan.batch.max
                                                : 0));
      fillRandom(bytes, b.dtype, rng, positive);
      bool indexed =
          step.op == rt::OpId::Gather || step.op == rt::OpId::ScatterAdd;
      if (indexed && k == 1 && b.data.empty()) {
        // Run-time indices (a graph input, checked in range when set):
        // every value of [-dim, dim), negative ones included; the dim is
        // gather's data's, scatter_add's result's.
        const PlanBuffer& data =
            plan.buffers[step.op == rt::OpId::Gather ? step.inputs[0]
                                                     : step.outputs[0]];
        int64_t dim = data.shape[size_t(step.attrs.getInt("axis"))];
        std::uniform_int_distribution<int64_t> u(-dim, dim - 1);
        size_t width = rt::dtypeSize(b.dtype);
        for (size_t o = 0; o + width <= bytes.size(); o += width) {
          int64_t v = u(rng);
          if (width == 8) {
            std::memcpy(bytes.data() + o, &v, 8);
          } else {
            int32_t w = int32_t(v);
            std::memcpy(bytes.data() + o, &w, 4);
          }
        }
      }
      if (!b.data.empty())
        bytes = b.data.toVector();
      if (given && k < given->size() && !(*given)[k].empty()) {
        if ((*given)[k].size() != bytes.size())
          return fail("input " + std::to_string(k) + " given " +
                      std::to_string((*given)[k].size()) + " bytes, not " +
                      std::to_string(bytes.size()));
        bytes = (*given)[k];
      }
      ins.push_back(std::move(bytes));
    }
    const PlanBuffer& ob = plan.buffers[step.outputs[0]];
    size_t outMax = bytesOf(ob, plan.batch.dynamic() ? plan.batch.max : 0);

    // The CPU's kernel.
    std::unique_ptr<rt::Device> cpu;
    if (!rt::createDevice("cpu", &cpu))
      return fail("no cpu device");
    std::vector<rt::ConstTensor> cin;
    for (size_t k = 0; k < ins.size(); ++k) {
      const PlanBuffer& b = plan.buffers[step.inputs[k]];
      cin.push_back({b.dtype, shapeAt(b, batch), ins[k].data()});
    }
    std::vector<uint8_t> want(outMax, 0);
    rt::MutTensor cout{ob.dtype, shapeAt(ob, batch), want.data()};
    // A region's outputs 1.. (schema 2.7).
    std::vector<std::vector<uint8_t>> wantExtra, gotExtra;
    for (size_t k = 1; k < step.outputs.size(); ++k) {
      const PlanBuffer& eb = plan.buffers[step.outputs[k]];
      size_t bytes = bytesOf(eb, plan.batch.dynamic() ? plan.batch.max : 0);
      wantExtra.emplace_back(bytes, 0);
      gotExtra.emplace_back(bytes, 0);
    }
    std::vector<rt::RegionOp> body;
    for (const PlanRegionOp& r : step.body) {
      rt::RegionOp op{r.op, r.attrs, r.operands, r.dtype, r.shape};
      for (size_t d = 0; d < op.shape.size(); ++d)
        if (d < r.batchScale.size() && r.batchScale[d] > 0)
          op.shape[d] = r.batchScale[d] * batch;
      body.push_back(std::move(op));
    }
    rt::KernelRequest request{step.op, step.attrs, cin, cout, *cpu,
                                  body.empty() ? nullptr : &body};
    for (size_t k = 1; k < step.outputs.size(); ++k) {
      const PlanBuffer& eb = plan.buffers[step.outputs[k]];
      request.extraOutputs.push_back(
          {eb.dtype, shapeAt(eb, batch), wantExtra[k - 1].data()});
      request.extraValues.push_back(step.extraOutputs.at(k - 1));
    }
    rt::KernelFactory factory = rt::findKernel("cpu", step.op);
    if (!factory)
      return fail("the cpu has no kernel for it");
    rt::BoundKernel bound;
    size_t scratch = 0;
    rt::Status st = factory(request, &bound, &scratch);
    if (!st)
      return fail("cpu kernel: " + st.message());
    std::vector<uint8_t> workspace(scratch + 64);
    // A failing CPU kernel is checked against the generated kernel's error
    // record below, when it has one.
    rt::Status cpuRun = bound(workspace.data());

    // The generated kernel, through SPIR-V.
    mlir::DialectRegistry registry;
    registerSpirvLoweringDialects(registry);
    mlir::MLIRContext context(registry);
    codegen::cuda::loadKernelDialects(context);
    mlir::OpBuilder b(&context);
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::ModuleOp::create(b.getUnknownLoc());
    (*module)->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(),
                       b.getUnitAttr());
    b.setInsertionPointToEnd(module->getBody());
    auto gm = mlir::gpu::GPUModuleOp::create(b, b.getUnknownLoc(), "k");
    codegen::cuda::KernelFlavor flavor;
    flavor.spirv = true;
    flavor.block = 64;
    std::string why;
    auto kind = codegen::cuda::classifyStep(plan, step, flavor, &why);
    if (kind == codegen::cuda::KernelKind::None) {
      out->skipped = why.empty() ? "a library step" : why;
      return true;
    }
    out->kind = kindName(kind);
    auto launch = codegen::cuda::emitKernel(gm, plan, step, "k0", flavor);
    if (mlir::failed(launch))
      return fail("kernel generation failed");
    if (!cpuRun && !launch->errorRecord)
      return fail("cpu kernel: " + cpuRun.message());
    auto words = lowerGpuModuleToSpirv(*module, error);
    if (mlir::failed(words))
      return fail(*error);
    std::vector<uint8_t> got(outMax, 0);
    fillUnwritten(got, ob.dtype);
    for (size_t k = 1; k < step.outputs.size(); ++k)
      fillUnwritten(gotExtra[k - 1], plan.buffers[step.outputs[k]].dtype);
    std::vector<uint8_t> batchBytes(8);
    std::memcpy(batchBytes.data(), &batch, 8);
    // The GPU's inputs: a copy, since a kernel run in place overwrites them.
    std::vector<std::vector<uint8_t>> gpuIns = ins;
    std::vector<std::vector<uint8_t>*> bufs;
    for (auto& in : gpuIns)
      bufs.push_back(&in);
    auto outputBuffer = [&](size_t k, std::vector<uint8_t>* own) {
      int j = inPlace && k < inPlace->size() ? (*inPlace)[k] : -1;
      if (j < 0)
        return own;
      if (size_t(j) >= gpuIns.size() || gpuIns[size_t(j)].size() != own->size())
        return static_cast<std::vector<uint8_t>*>(nullptr);
      return &gpuIns[size_t(j)];
    };
    for (size_t k = 0; k < step.outputs.size(); ++k) {
      std::vector<uint8_t>* b = outputBuffer(k, k ? &gotExtra[k - 1] : &got);
      if (!b)
        return fail("in place: output " + std::to_string(k) +
                    " cannot be written into input " +
                    std::to_string((*inPlace)[k]) + " (no such input, or "
                    "another size)");
      bufs.push_back(b);
    }
    bufs.push_back(&batchBytes);
    std::vector<uint8_t> record(launch->errorRecord ? rt::kErrorRecordBytes : 0);
    if (launch->errorRecord)
      bufs.push_back(&record);
    uint64_t units = launch->unitsAt(batch);
    // A small grid on purpose: the grid-stride loops must cover the rest.
    // But llvmpipe ends every loop of an invocation once its loops have
    // run 65535 iterations in all (LP_MAX_TGSI_LOOP_ITERATIONS), silently:
    // the grid grows until each invocation's share (about 4 passes over the
    // largest tensor, spread over the threads that share it) stays under
    // that, and a kernel whose work cannot be spread so far (a reduction to
    // two outputs of 65536 rows each) is skipped, saying why.
    uint64_t largest = 1;
    auto count = [&](const Shape& shape) {
      largest = std::max(largest, uint64_t(rt::numElements(shape)));
    };
    for (uint32_t b : step.inputs)
      count(shapeAt(plan.buffers[b], batch));
    for (uint32_t b : step.outputs)
      count(shapeAt(plan.buffers[b], batch));
    for (const rt::RegionOp& op : body)
      count(op.shape);
    const uint64_t block = flavor.block;
    // (Vulkan guarantees 65535 workgroups along x.)
    const uint64_t unitGroups = std::min<uint64_t>(
        65535, std::max<uint64_t>(1, (units + launch->perBlock - 1) /
                                         launch->perBlock));
    // A unit per thread (elementwise, softmax over an axis, a reduction's
    // output), or a block per unit (rows, columns): the units each thread
    // takes in turn, times about 4 passes over a unit's share of the
    // largest tensor plus the loops every unit runs (a block's reduction).
    const uint64_t unitLen = (largest + std::max<uint64_t>(units, 1) - 1) /
                             std::max<uint64_t>(units, 1);
    const bool cooperative = launch->perBlock < block;
    auto tripsPerThread = [&](uint64_t g) {
      uint64_t turns =
          cooperative ? (units + g * launch->perBlock - 1) / (g * launch->perBlock)
                      : (units + g * block - 1) / (g * block);
      // block / perBlock threads share a unit (a row: the block; a
      // column of the column reduction: its warps).
      uint64_t perUnit =
          cooperative
              ? 4 * ((unitLen * launch->perBlock + block - 1) / block) + 32
              : 4 * unitLen + 8;
      return std::max<uint64_t>(turns, 1) * perUnit;
    };
    constexpr uint64_t kLoopBudget = 50000;
    uint64_t wide = std::min<uint64_t>(unitGroups, 7);
    while (wide < unitGroups && tripsPerThread(wide) > kLoopBudget)
      wide = std::min(unitGroups, wide * 2);
    if (tripsPerThread(wide) > kLoopBudget) {
      out->skipped = "beyond lavapipe's loop limit: about " +
                     std::to_string(tripsPerThread(wide)) +
                     " loop iterations per invocation at the widest grid "
                     "(llvmpipe ends an invocation's loops after 65535)";
      return true;
    }
    uint32_t groups = uint32_t(std::min<uint64_t>(wide, UINT32_MAX));
    std::string dispatchError;
    if (!runner.dispatch(*words, "k0", bufs, groups, 1, 1, &dispatchError)) {
      // Limits of lavapipe, not of a GPU, which dispatch checks after the
      // module's validation and interface: skipped, saying which (the
      // kernel's code is the same at sizes that fit, checked on smaller
      // models).
      std::vector<size_t> sizes;
      for (const std::vector<uint8_t>* b : bufs)
        sizes.push_back(b->size());
      std::string why = runner.beyondLimits(sizes);
      if (!why.empty() && dispatchError == why) {
        out->skipped = "beyond lavapipe's limits: " + why;
        return true;
      }
      return fail(dispatchError);
    }
    for (size_t k = 0; k < step.outputs.size(); ++k) {
      std::vector<uint8_t>& own = k ? gotExtra[k - 1] : got;
      if (bufs[gpuIns.size() + k] != &own)
        own = *bufs[gpuIns.size() + k];
    }

    if (launch->errorRecord) {
      uint64_t words[2];
      std::memcpy(words, record.data(), sizeof words);
      rt::ErrorRecord e = rt::decodeErrorRecord(words);
      if (e.failed) {
        std::vector<std::vector<int64_t>> shapes;
        for (const rt::ConstTensor& t : cin)
          shapes.push_back(t.shape);
        out->deviceError =
            rt::kernelErrorMessage(step.op, step.attrs, shapes, e);
      }
    }
    if (!cpuRun) {
      // The CPU's fused regions name the element inside its tile: the
      // element of the region, as the kernel names it.
      std::string m = cpuRun.message();
      std::smatch g;
      static const std::regex tile(
          "at element ([0-9]+) \\(in the tile of the region's elements "
          "([0-9]+) to [0-9]+\\)");
      if (std::regex_search(m, g, tile))
        m = g.prefix().str() + "at element " +
            std::to_string(std::stoll(g[1]) + std::stoll(g[2])) +
            g.suffix().str();
      out->cpuError = m;
      return true; // the output is not compared: the step failed
    }
    // Every output, the worst element of all (its index counts the
    // elements of the outputs before it).
    double worst = 0;
    size_t worstAt = 0, elements = 0;
    out->cpu = out->lavapipe = 0;
    out->oneUlp = 0;
    for (size_t k = 0; k < step.outputs.size(); ++k) {
      const PlanBuffer& b = plan.buffers[step.outputs[k]];
      const std::vector<uint8_t>& w = k ? wantExtra[k - 1] : want;
      const std::vector<uint8_t>& g = k ? gotExtra[k - 1] : got;
      size_t n = bytesOf(b, batch) / rt::dtypeSize(b.dtype);
      for (size_t i = 0; i < n; ++i) {
        double wv = valueAt(w, b.dtype, i), gv = valueAt(g, b.dtype, i);
        if ((std::isnan(wv) && std::isnan(gv)) || wv == gv) // infinities too
          continue;
        if (neighbours(w, g, b.dtype, i)) {
          ++out->oneUlp;
          continue;
        }
        double err = std::fabs(wv - gv) / std::max(1.0, std::fabs(wv));
        if (!(err <= worst)) {
          worst = std::isnan(err) ? INFINITY : err;
          worstAt = elements + i;
          out->cpu = wv;
          out->lavapipe = gv;
        }
      }
      if (!k && n && worst == 0) {
        out->cpu = valueAt(w, b.dtype, 0);
        out->lavapipe = valueAt(g, b.dtype, 0);
      }
      elements += n;
    }
    out->elements = elements;
    out->worst = worst;
    out->worstAt = worstAt;
    return true;
}

} // namespace mc::gputest

// The CUDA device's generated kernels: the artifact's executables (a cubin
// per SM architecture, PTX for newer GPUs), the one that runs on this GPU
// loaded as a module, and each step's launch bound to its tensors (the
// kernel ABI of Launch in runtime/schema/mcpk.fbs).
#include "CudaDevice.h"

#include <algorithm>
#include <cstdio>
#include <cctype>
#include <climits>
#include <cstring>
#include <set>

namespace mc::rt::cuda {

namespace {

/// An architecture, sm_XY: X the major (one or more digits), Y the minor.
struct Arch {
  int major = -1, minor = 0;
  char suffix = 0; // 'a' (this exact architecture only), 'f', or none
  bool valid() const { return major >= 0; }
  std::string text() const {
    return "sm_" + std::to_string(major) + std::to_string(minor) +
           (suffix ? std::string(1, suffix) : "");
  }
};

/// "90" -> 9.0, "100a" -> 10.0 (arch-specific), "86" -> 8.6.
Arch parseArch(const std::string& s) {
  Arch a;
  size_t i = 0;
  while (i < s.size() && i < 4 && s[i] >= '0' && s[i] <= '9')
    ++i;
  if (i < 2)
    return a;
  int num = std::stoi(s.substr(0, i));
  a.major = num / 10;
  a.minor = num % 10;
  if (i < s.size()) {
    if (i + 1 != s.size() || (s[i] != 'a' && s[i] != 'f'))
      return Arch{};
    a.suffix = s[i];
  }
  return a;
}

/// The `.target sm_XY` of PTX text (invalid when it has none).
Arch ptxTarget(const ExecutableView& v) {
  std::string text(reinterpret_cast<const char*>(v.data),
                   std::min<size_t>(v.size, 1 << 16));
  size_t at = text.find(".target");
  if (at == std::string::npos)
    return Arch{};
  size_t sm = text.find("sm_", at);
  if (sm == std::string::npos || sm > at + 32)
    return Arch{};
  size_t end = sm + 3;
  while (end < text.size() && std::isalnum(static_cast<unsigned char>(text[end])))
    ++end;
  return parseArch(text.substr(sm + 3, end - sm - 3));
}

constexpr char kCubinPrefix[] = "cuda-cubin-sm_";
constexpr char kPtxFormat[] = "cuda-ptx";

} // namespace

std::string CudaDevice::entryFormat(const std::string& entry) const {
  auto it = entries_.find(entry);
  return it == entries_.end() ? "" : exes_[it->second.executable].format;
}

Status CudaDevice::loadExecutables(const std::vector<ExecutableView>& views) {
  MC_RETURN_IF_ERROR(makeCurrent());
  const CudaDriver& d = driver();
  for (CUmodule m : modules_)
    d.moduleUnload(m);
  modules_.clear();
  entries_.clear();
  functions_.clear();
  exes_ = views;
  // How well each executable fits this GPU (0: it does not run here): a
  // cubin runs on its major architecture from its minor up (sm_80 on
  // sm_86), an arch-specific one (sm_90a) on that architecture only, PTX
  // wherever its .target is not newer than the GPU (the driver compiles
  // it). Per entry point, the best fit wins.
  struct Best {
    size_t executable = 0;
    int rank = 0;
  };
  std::map<std::string, Best> best;
  // Every executable that can run an entry, best first: a cubin the driver
  // refuses (one older than the ptxas that made it) falls back to the PTX.
  std::map<std::string, std::vector<Best>> candidates;
  std::vector<std::string> held;
  std::set<std::string> entries;
  for (size_t i = 0; i < views.size(); ++i) {
    const ExecutableView& v = views[i];
    if (v.target != "cuda")
      continue;
    int rank = 0;
    std::string what = v.format;
    if (v.format.rfind(kCubinPrefix, 0) == 0) {
      Arch a = parseArch(v.format.substr(sizeof kCubinPrefix - 1));
      if (a.valid() && a.major == ccMajor_ &&
          (a.suffix == 'a' ? a.minor == ccMinor_ : a.minor <= ccMinor_))
        rank = 100 + 2 * a.minor + (a.suffix == 'a' ? 1 : 0);
    } else if (v.format == kPtxFormat) {
      Arch a = ptxTarget(v);
      if (a.valid())
        what += " (.target " + a.text() + ")";
      if (!a.valid() || a.major < ccMajor_ ||
          (a.major == ccMajor_ && a.minor <= ccMinor_))
        rank = 1;
    }
    if (std::find(held.begin(), held.end(), what) == held.end())
      held.push_back(what);
    for (const std::string& e : v.entryPoints) {
      entries.insert(e);
      if (rank > best[e].rank)
        best[e] = Best{i, rank};
      if (rank > 0)
        candidates[e].push_back(Best{i, rank});
    }
  }
  std::string missing;
  for (const std::string& e : entries)
    if (best[e].rank == 0)
      missing += (missing.empty() ? "'" : ", '") + e + "'";
  if (!missing.empty()) {
    std::string holds;
    for (const std::string& h : held)
      holds += (holds.empty() ? "" : ", ") + h;
    std::string sm = "sm_" + std::to_string(ccMajor_) + std::to_string(ccMinor_);
    return Status::error(
        "no CUDA code in the artifact runs on " + name() + ", an " +
        gpuText() + ": it holds " + holds + " (a cubin runs on its own major "
        "architecture from its minor up, PTX on architectures at or after its "
        ".target), so entry " + missing + " has none for " + sm +
        "; recompile the model with a cubin for " + sm + " or with PTX");
  }
  std::map<size_t, CUmodule> loaded;
  std::map<size_t, std::pair<CUresult, std::string>> refused;
  auto load = [&](size_t index) -> CUresult {
    if (loaded.count(index))
      return CUDA_SUCCESS;
    if (refused.count(index))
      return refused[index].first;
    const ExecutableView& v = views[index];
    // A copy: PTX must end in a NUL and a cubin be aligned, and the
    // artifact's bytes are neither for sure.
    std::string image(reinterpret_cast<const char*>(v.data), v.size);
    char log[8192] = {0};
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log, reinterpret_cast<void*>(uintptr_t(sizeof log - 1))};
    CUmodule m = nullptr;
    CUresult r = d.moduleLoadDataEx(&m, image.c_str(), 2, options, values);
    if (r != CUDA_SUCCESS) {
      refused[index] = {r, name() + " (" + gpuText() + "): loading " +
                               "executable " + std::to_string(index) + " (" +
                               v.format + ") failed: " + errorText(d, r) +
                               (log[0] ? std::string(": ") + log : "")};
      return r;
    }
    modules_.push_back(m);
    loaded[index] = m;
    return CUDA_SUCCESS;
  };
  bool toldFallback = false;
  for (auto& [entry, list] : candidates) {
    std::stable_sort(list.begin(), list.end(),
                     [](const Best& a, const Best& b) { return a.rank > b.rank; });
    size_t chosen = list.size();
    for (size_t k = 0; k < list.size() && chosen == list.size(); ++k) {
      CUresult r = load(list[k].executable);
      if (r == CUDA_SUCCESS)
        chosen = k;
      else if (r == CUDA_ERROR_OUT_OF_MEMORY)
        break; // no other image fits better
    }
    if (chosen == list.size())
      return Status::error(refused[list.front().executable].second);
    if (chosen > 0 && !toldFallback) {
      std::fprintf(stderr, "modelc: %s; running its entry points from "
                   "executable %zu (%s) instead\n",
                   refused[list.front().executable].second.c_str(),
                   list[chosen].executable,
                   views[list[chosen].executable].format.c_str());
      toldFallback = true;
    }
    entries_[entry] =
        LoadedEntry{list[chosen].executable, loaded[list[chosen].executable]};
  }
  return Status::ok();
}

Status CudaDevice::bindGenerated(const KernelRequest& r, BoundKernel* out) {
  MC_RETURN_IF_ERROR(makeCurrent());
  const CudaDriver& d = driver();
  const GeneratedKernel& g = *r.generated;
  auto entry = entries_.find(g.entry);
  if (entry == entries_.end())
    return Status::error("entry '" + g.entry + "' of executable " +
                         std::to_string(g.executable) +
                         " is in no CUDA executable " + name() + " loaded");
  CUfunction& f = functions_[g.entry];
  if (!f)
    MC_RETURN_IF_ERROR(
        check(d.moduleGetFunction(&f, entry->second.module, g.entry.c_str()),
              "cuModuleGetFunction('" + g.entry + "')"));
  const LaunchInfo& l = g.launch;
  if (l.block < 1 || l.block > 1024 || l.perBlock < 1)
    return Status::error("launch of '" + g.entry + "' has block " +
                         std::to_string(l.block) + " and per_block " +
                         std::to_string(l.perBlock));
  if (l.sharedBytes > (48u << 10)) {
    if (l.sharedBytes > sharedOptin_)
      return Status::error("launch of '" + g.entry + "' asks for " +
                           std::to_string(l.sharedBytes) +
                           " bytes of shared memory per block; " + gpuText() +
                           " gives at most " + std::to_string(sharedOptin_));
    MC_RETURN_IF_ERROR(
        check(d.funcSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 int(l.sharedBytes)),
              "cuFuncSetAttribute(max dynamic shared memory of '" + g.entry +
                  "')"));
  }
  int maxThreads = 0;
  MC_RETURN_IF_ERROR(check(
      d.funcGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f),
      "cuFuncGetAttribute"));
  if (int(l.block) > maxThreads)
    return Status::error("launch of '" + g.entry + "' has blocks of " +
                         std::to_string(l.block) + " threads; the kernel runs "
                         "at most " + std::to_string(maxThreads) + " on " +
                         gpuText() + " (its registers)");
  int perSM = 0;
  MC_RETURN_IF_ERROR(
      check(d.occupancyMaxActiveBlocksPerMultiprocessor(
                &perSM, f, int(l.block), size_t(l.sharedBytes)),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor"));
  if (perSM < 1)
    return Status::error("launch of '" + g.entry + "' (block " +
                         std::to_string(l.block) + ", " +
                         std::to_string(l.sharedBytes) +
                         " bytes of shared memory) cannot run on " + gpuText());
  // Kernels stride over their units by the grid, so any grid is right: a
  // few waves of resident blocks keep the GPU busy without idle blocks.
  // At least one block: the kernel strides over its units, and no unit
  // count is 0 at a batch >= 1 (a launch it skipped left a step unrun).
  uint64_t units = l.unitsAt(g.batch);
  uint64_t blocks = std::max<uint64_t>(1, (units + l.perBlock - 1) / l.perBlock);
  uint64_t cap = std::max<uint64_t>(1, 4ull * uint64_t(smCount_) * perSM);
  uint32_t grid = uint32_t(std::min<uint64_t>({blocks, cap, INT_MAX}));
  // The parameters: a pointer per input, one per output (schema 2.7: the
  // main output, then the extra ones), the batch (int64).
  struct Args {
    std::vector<CUdeviceptr> pointers;
    int64_t batch = 0;
    CUdeviceptr record = 0; // the error record, when the kernel has one
    std::vector<void*> params;
    // The record's slot goes back to the device with the kernel.
    CudaDevice* device = nullptr;
    size_t recordId = 0;
    ~Args() {
      if (device)
        device->releaseErrorRecord(recordId);
    }
  };
  auto args = std::make_shared<Args>();
  for (const ConstTensor& t : r.inputs)
    args->pointers.push_back(CUdeviceptr(t.data));
  args->pointers.push_back(CUdeviceptr(r.output.data));
  for (const MutTensor& t : r.extraOutputs)
    args->pointers.push_back(CUdeviceptr(t.data));
  args->batch = g.batch;
  for (CUdeviceptr& p : args->pointers)
    args->params.push_back(&p);
  args->params.push_back(&args->batch);
  if (l.errorRecord) {
    // A kernel that can fail: its error record, the last parameter.
    MC_RETURN_IF_ERROR(errorRecord(r, &args->record, &args->recordId));
    args->device = this;
    args->params.push_back(&args->record);
  }
  *out = step(r, [this, f, args, grid, block = l.block, shared = l.sharedBytes,
                  entryName = g.entry](void*) {
    CUresult e = driver().launchKernel(f, grid, 1, 1, block, 1, 1, shared,
                                       stream_, args->params.data(), nullptr);
    if (e != CUDA_SUCCESS)
      return Status::error(name() + ": cuLaunchKernel of '" + entryName +
                           "' (grid " + std::to_string(grid) + ", block " +
                           std::to_string(block) + ", " +
                           std::to_string(shared) +
                           " bytes of shared memory) failed: " +
                           errorText(driver(), e));
    return Status::ok();
  });
  return Status::ok();
}

} // namespace mc::rt::cuda

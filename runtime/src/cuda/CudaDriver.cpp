// Loading the CUDA driver and the CUDA libraries at run time (see
// CudaDriver.h): one binary runs on machines with and without a GPU.
#include "CudaDriver.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>

namespace mc::rt::cuda {

namespace {

/// Where the CUDA toolkit keeps its libraries, after the loader's search.
std::vector<std::string> toolkitDirs() {
  std::vector<std::string> dirs;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v)
      dirs.push_back(std::string(v) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  dirs.push_back("/usr/local/cuda/targets/x86_64-linux/lib");
  return dirs;
}

} // namespace

void* openLibrary(const std::vector<std::string>& names, std::string* error) {
  std::string firstError;
  for (const std::string& n : names) {
    dlerror();
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL))
      return h;
    if (firstError.empty())
      if (const char* e = dlerror())
        firstError = e;
  }
  std::vector<std::string> dirs = toolkitDirs();
  for (const std::string& d : dirs)
    for (const std::string& n : names)
      if (void* h = dlopen((d + "/" + n).c_str(), RTLD_NOW | RTLD_LOCAL))
        return h;
  if (error) {
    std::string list, where;
    for (const std::string& n : names)
      list += (list.empty() ? "" : " or ") + n;
    for (const std::string& d : dirs)
      where += (where.empty() ? "" : ", ") + d;
    *error = list + " not found (the loader's search: " +
             (firstError.empty() ? "nothing" : firstError) + "; then " +
             where + ")";
  }
  return nullptr;
}

std::string errorText(const CudaDriver& d, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.getErrorName)
    d.getErrorName(r, &name);
  if (d.getErrorString)
    d.getErrorString(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(int(r));
  if (text)
    s += std::string(" (") + text + ")";
  return s;
}

std::string bytesText(size_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  if (u == 0)
    return std::to_string(bytes) + " bytes";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s (%zu bytes)", v, units[u], bytes);
  return buf;
}

Status loadDriver(const char* library, CudaDriver* out) {
  dlerror();
  // The driver comes with the GPU's kernel module, in the system's
  // library folders: only the loader's search (never the toolkit's stub
  // libcuda.so, which fails every call).
  void* h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    // The loader's reason, unless it only says the file is not there.
    const char* e = dlerror();
    std::string detail = e && !std::strstr(e, "No such file")
                             ? std::string(" (") + e + ")"
                             : "";
    return Status::error(std::string("no CUDA driver: ") + library +
                         " not found" + detail);
  }
  CudaDriver d;
  // cuEventElapsedTime_v2 (CUDA 12.8) has the signature of the first one.
  auto find = [h](const char* symbol) {
    void* f = dlsym(h, symbol);
    if (!f && std::string(symbol) == "cuEventElapsedTime_v2")
      f = dlsym(h, "cuEventElapsedTime");
    return f;
  };
#define MC_CUDA_LOAD(member, fn, symbol)                                       \
  d.member = reinterpret_cast<decltype(d.member)>(find(symbol));               \
  if (!d.member) {                                                             \
    dlclose(h);                                                                \
    return Status::error(std::string("the CUDA driver ") + library +           \
                         " lacks " + symbol + " (too old a driver?)");         \
  }
  MC_CUDA_DRIVER_FUNCTIONS(MC_CUDA_LOAD)
#undef MC_CUDA_LOAD
  CUresult r = d.init(0);
  if (r != CUDA_SUCCESS) {
    std::string text = errorText(d, r);
    dlclose(h);
    return Status::error("the CUDA driver is there, but cuInit failed: " +
                         text);
  }
  d.driverGetVersion(&d.version);
  // The handle stays open for the life of the process (DeviceMemory
  // deleters may run during static destruction).
  *out = d;
  return Status::ok();
}

const CudaDriver* driver(std::string* why) {
  static CudaDriver d;
  static std::string reason;
  static bool loaded = false;
  static std::once_flag once;
  std::call_once(once, [] {
    // MODELC_CUDA_DRIVER: another driver library (the tests' fake one).
    const char* other = std::getenv("MODELC_CUDA_DRIVER");
    Status st = loadDriver(other && *other ? other : "libcuda.so.1", &d);
    loaded = st.isOk();
    reason = st.message();
  });
  if (!loaded && why)
    *why = reason;
  return loaded ? &d : nullptr;
}

} // namespace mc::rt::cuda

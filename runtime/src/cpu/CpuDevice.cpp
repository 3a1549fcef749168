// The CPU device: host memory, copies are memcpy, steps run synchronously on
// the calling thread (kernels use the runtime's thread pool inside).
#include "modelc/device.h"

#include <cstdlib>
#include <cstring>

namespace mc::rt {
namespace {

class CpuDevice final : public Device {
public:
  std::string name() const override { return "cpu"; }
  std::string kind() const override { return "cpu"; }
  std::vector<std::string> targets() const override { return {"cpu"}; }
  bool hostAccessible() const override { return true; }

  Status allocate(size_t bytes, DeviceMemory* out) override {
    if (!bytes) {
      *out = DeviceMemory(nullptr, [](uint8_t*) {});
      return Status::ok();
    }
    size_t rounded = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p)
      return Status::error("cpu: cannot allocate " + std::to_string(bytes) +
                           " bytes");
    // Zeroed, so a buffer read before any step wrote it is deterministic.
    std::memset(p, 0, rounded);
    *out = DeviceMemory(static_cast<uint8_t*>(p),
                        [](uint8_t* q) { std::free(q); });
    return Status::ok();
  }
  Status copyToDevice(void* dst, const void* src, size_t n) override {
    if (n)
      std::memcpy(dst, src, n);
    return Status::ok();
  }
  Status copyToHost(void* dst, const void* src, size_t n) override {
    if (n)
      std::memcpy(dst, src, n);
    return Status::ok();
  }
  Status synchronize() override { return Status::ok(); }
};

Status createCpu(int ordinal, std::unique_ptr<Device>* out) {
  if (ordinal != 0)
    return Status::error("there is one cpu device (cpu), not cpu:" +
                         std::to_string(ordinal));
  *out = std::make_unique<CpuDevice>();
  return Status::ok();
}

DeviceKindRegistration cpuKind(DeviceKind{"cpu", 0, createCpu,
                                          [] { return 1; }, {"cpu"}});

} // namespace
} // namespace mc::rt

// Test harness: runs one SPIR-V compute kernel on a Vulkan device (lavapipe
// in CI) with plain Vulkan calls. No MLIR here.
#ifndef MODELC_TEST_GPU_VULKANRUNNER_H
#define MODELC_TEST_GPU_VULKANRUNNER_H

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mc::gputest {

class VulkanRunner {
public:
  /// The CPU device (lavapipe) if there is one, else the first device with a
  /// compute queue; VK_ICD_FILENAMES narrows what the loader sees. Null, with
  /// the reason in *whyNot, when there is no usable Vulkan 1.2 device.
  static std::unique_ptr<VulkanRunner> create(std::string *whyNot);
  ~VulkanRunner();
  VulkanRunner(const VulkanRunner &) = delete;
  VulkanRunner &operator=(const VulkanRunner &) = delete;

  /// Runs entry point `entry` of `spirv` once over groupsX x groupsY x
  /// groupsZ workgroups and waits. buffers[i] is bound at set 0, binding i
  /// (kernel argument i; a scalar argument is a buffer of its bytes, see
  /// SpirvLowering.h); each is copied in before and read back after, so
  /// every buffer is in and out. The module is checked with SPIRV-Tools'
  /// validator first. Returns false with the reason in *error.
  bool dispatch(const std::vector<uint32_t> &spirv, const std::string &entry,
                const std::vector<std::vector<uint8_t> *> &buffers,
                uint32_t groupsX, uint32_t groupsY, uint32_t groupsZ,
                std::string *error);

  /// Why buffers of these sizes cannot be bound here: more than the device
  /// binds per stage, or one over its storage buffer range (lavapipe: 32
  /// buffers, 128 MiB; limits a GPU does not share). Empty when they can.
  /// dispatch() checks them last, failing with this text.
  std::string beyondLimits(const std::vector<size_t> &bytes) const;

  /// Lanes per subgroup: 8 on lavapipe, 32 on NVIDIA.
  uint32_t subgroupSize() const { return subgroupSize_; }
  const std::string &deviceName() const { return deviceName_; }

private:
  VulkanRunner() = default;
  bool init(std::string *whyNot);
  int32_t memoryType(uint32_t allowedTypes) const;

  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool commandPool_ = VK_NULL_HANDLE;
  uint32_t queueFamily_ = 0;
  uint32_t apiVersion_ = 0;
  uint32_t subgroupSize_ = 0;
  bool lost_ = false; // a dispatch timed out: its kernel may still run
  std::string deviceName_;
  VkPhysicalDeviceLimits limits_{};
  VkPhysicalDeviceMemoryProperties memory_{};
};

} // namespace mc::gputest

#endif // MODELC_TEST_GPU_VULKANRUNNER_H

// Test harness: one compute dispatch with plain Vulkan (see VulkanRunner.h).
#include "test/gpu/VulkanRunner.h"

#include <spirv-tools/libspirv.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <set>

namespace mc::gputest {
namespace {

// Long enough for a big kernel on a 2-core lavapipe; a kernel that loops
// forever fails the test instead of hanging CTest.
constexpr uint64_t kFenceTimeoutNs = 120ull * 1000 * 1000 * 1000;

const char *resultName(VkResult result) {
  switch (result) {
#define MC_VK_RESULT(name)                                                     \
  case name:                                                                   \
    return #name;
    MC_VK_RESULT(VK_NOT_READY)
    MC_VK_RESULT(VK_TIMEOUT)
    MC_VK_RESULT(VK_INCOMPLETE)
    MC_VK_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    MC_VK_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    MC_VK_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    MC_VK_RESULT(VK_ERROR_DEVICE_LOST)
    MC_VK_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    MC_VK_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    MC_VK_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    MC_VK_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    MC_VK_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    MC_VK_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    MC_VK_RESULT(VK_ERROR_UNKNOWN)
    MC_VK_RESULT(VK_ERROR_INVALID_SHADER_NV)
#undef MC_VK_RESULT
  default:
    return nullptr;
  }
}

bool check(VkResult result, const char *call, std::string *error) {
  if (result == VK_SUCCESS)
    return true;
  if (error) {
    const char *name = resultName(result);
    *error = std::string(call) +
             " failed: " + (name ? name : "VkResult " + std::to_string(result));
  }
  return false;
}

bool fail(std::string *error, std::string message) {
  if (error)
    *error = std::move(message);
  return false;
}

std::string versionString(uint32_t version) {
  return std::to_string(VK_API_VERSION_MAJOR(version)) + "." +
         std::to_string(VK_API_VERSION_MINOR(version));
}

// What the runner needs to know from the module before Vulkan sees it: its
// GLCompute entry points, their workgroup sizes, the (set, binding) of each
// resource variable and which variables each function uses.
struct SpirvInterface {
  std::map<std::string, uint32_t> entryPoints;           // name to function id
  std::map<uint32_t, std::array<uint32_t, 3>> localSize; // by function id
  std::map<uint32_t, std::set<uint32_t>> pointersUsed;   // by function id
  std::map<uint32_t, uint32_t> bindingOf, setOf;         // by variable id
};

SpirvInterface scanInterface(const std::vector<uint32_t> &words) {
  constexpr uint32_t kOpEntryPoint = 15, kOpExecutionMode = 16,
                     kOpFunction = 54, kOpLoad = 61, kOpStore = 62,
                     kOpAccessChain = 65, kOpInBoundsAccessChain = 66,
                     kOpDecorate = 71;
  constexpr uint32_t kGLCompute = 5, kLocalSize = 17, kBinding = 33,
                     kDescriptorSet = 34;
  SpirvInterface result;
  uint32_t function = 0;
  // The validator has accepted the module, so the word counts are sound.
  for (size_t at = 5; at < words.size();) {
    uint32_t count = words[at] >> 16, opcode = words[at] & 0xffff;
    const uint32_t *operands = &words[at + 1];
    if (opcode == kOpEntryPoint && count > 3 && operands[0] == kGLCompute) {
      const char *name = reinterpret_cast<const char *>(&operands[2]);
      result.entryPoints[std::string(name, strnlen(name, (count - 3) * 4))] =
          operands[1];
    }
    if (opcode == kOpExecutionMode && count == 6 && operands[1] == kLocalSize)
      result.localSize[operands[0]] = {operands[2], operands[3], operands[4]};
    if (opcode == kOpDecorate && count == 4 && operands[1] == kBinding)
      result.bindingOf[operands[0]] = operands[2];
    if (opcode == kOpDecorate && count == 4 && operands[1] == kDescriptorSet)
      result.setOf[operands[0]] = operands[2];
    if (opcode == kOpFunction)
      function = operands[1];
    // How MLIR's serializer reaches a resource: a load, store or access
    // chain with the variable as its pointer.
    if (opcode == kOpLoad || opcode == kOpAccessChain ||
        opcode == kOpInBoundsAccessChain)
      result.pointersUsed[function].insert(operands[2]);
    if (opcode == kOpStore)
      result.pointersUsed[function].insert(operands[0]);
    at += std::max<uint32_t>(count, 1);
  }
  return result;
}

bool validate(const std::vector<uint32_t> &words, uint32_t apiVersion,
              std::string *error) {
  if (words.size() < 5 || words[0] != 0x07230203)
    return fail(error, "not a SPIR-V module: " + std::to_string(words.size()) +
                           " words, no SPIR-V magic number first");
  spv_target_env env = apiVersion >= VK_API_VERSION_1_3 ? SPV_ENV_VULKAN_1_3
                                                        : SPV_ENV_VULKAN_1_2;
  spvtools::SpirvTools tools(env);
  std::string messages;
  tools.SetMessageConsumer([&](spv_message_level_t, const char *,
                               const spv_position_t &position,
                               const char *message) {
    messages +=
        "word " + std::to_string(position.index) + ": " + message + "\n";
  });
  if (!tools.Validate(words))
    return fail(error, "the SPIR-V module is invalid (spirv-val, " +
                           std::string(spvTargetEnvDescription(env)) + "):\n" +
                           messages);
  return true;
}

// Every handle one dispatch creates, destroyed in reverse order whatever
// happens.
struct DispatchResources {
  VkDevice device;
  VkCommandPool commandPool;
  std::vector<VkBuffer> buffers;
  std::vector<VkDeviceMemory> memories;
  VkShaderModule shader = VK_NULL_HANDLE;
  VkDescriptorSetLayout setLayout = VK_NULL_HANDLE;
  VkPipelineLayout pipelineLayout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkDescriptorPool descriptorPool = VK_NULL_HANDLE;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;

  ~DispatchResources() {
    if (!device)
      return; // abandoned after a timeout
    if (fence)
      vkDestroyFence(device, fence, nullptr);
    if (commands)
      vkFreeCommandBuffers(device, commandPool, 1, &commands);
    if (descriptorPool)
      vkDestroyDescriptorPool(device, descriptorPool, nullptr);
    if (pipeline)
      vkDestroyPipeline(device, pipeline, nullptr);
    if (pipelineLayout)
      vkDestroyPipelineLayout(device, pipelineLayout, nullptr);
    if (setLayout)
      vkDestroyDescriptorSetLayout(device, setLayout, nullptr);
    if (shader)
      vkDestroyShaderModule(device, shader, nullptr);
    for (VkBuffer buffer : buffers)
      vkDestroyBuffer(device, buffer, nullptr);
    for (VkDeviceMemory memory : memories)
      vkFreeMemory(device, memory, nullptr);
  }
};

} // namespace

std::unique_ptr<VulkanRunner> VulkanRunner::create(std::string *whyNot) {
  std::unique_ptr<VulkanRunner> runner(new VulkanRunner());
  if (!runner->init(whyNot))
    return nullptr;
  return runner;
}

VulkanRunner::~VulkanRunner() {
  if (lost_)
    return; // a kernel still runs on the device: destroying it would hang
  if (device_) {
    vkDeviceWaitIdle(device_);
    if (commandPool_)
      vkDestroyCommandPool(device_, commandPool_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (instance_)
    vkDestroyInstance(instance_, nullptr);
}

bool VulkanRunner::init(std::string *whyNot) {
  uint32_t loaderVersion = VK_API_VERSION_1_0;
  if (!check(vkEnumerateInstanceVersion(&loaderVersion),
             "vkEnumerateInstanceVersion", whyNot))
    return false;
  if (loaderVersion < VK_API_VERSION_1_2)
    return fail(whyNot, "the Vulkan loader is " + versionString(loaderVersion) +
                            ", need 1.2");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "modelc-lavapipe-tests";
  app.apiVersion = VK_API_VERSION_1_3;
  VkInstanceCreateInfo instanceInfo{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  instanceInfo.pApplicationInfo = &app;
  if (!check(vkCreateInstance(&instanceInfo, nullptr, &instance_),
             "vkCreateInstance (is a Vulkan driver installed? "
             "mesa-vulkan-drivers has lavapipe)",
             whyNot))
    return false;

  uint32_t count = 0;
  if (!check(vkEnumeratePhysicalDevices(instance_, &count, nullptr),
             "vkEnumeratePhysicalDevices", whyNot))
    return false;
  std::vector<VkPhysicalDevice> devices(count);
  if (!check(vkEnumeratePhysicalDevices(instance_, &count, devices.data()),
             "vkEnumeratePhysicalDevices", whyNot))
    return false;
  // Prefer the CPU device (lavapipe), then any with a compute queue.
  std::string seen;
  for (int wantCpu = 1; wantCpu >= 0 && !physical_; --wantCpu) {
    for (VkPhysicalDevice candidate : devices) {
      VkPhysicalDeviceProperties props;
      vkGetPhysicalDeviceProperties(candidate, &props);
      if (wantCpu)
        seen += std::string(seen.empty() ? "" : ", ") + props.deviceName +
                " (Vulkan " + versionString(props.apiVersion) + ")";
      if (wantCpu != (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) ||
          props.apiVersion < VK_API_VERSION_1_2)
        continue;
      uint32_t families = 0;
      vkGetPhysicalDeviceQueueFamilyProperties(candidate, &families, nullptr);
      std::vector<VkQueueFamilyProperties> familyProps(families);
      vkGetPhysicalDeviceQueueFamilyProperties(candidate, &families,
                                               familyProps.data());
      for (uint32_t i = 0; i < families && !physical_; ++i) {
        if (familyProps[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
          physical_ = candidate;
          queueFamily_ = i;
          deviceName_ = props.deviceName;
          apiVersion_ = std::min(props.apiVersion, VK_API_VERSION_1_3);
          limits_ = props.limits;
        }
      }
      if (physical_)
        break;
    }
  }
  if (!physical_)
    return fail(whyNot, "no Vulkan 1.2 device with a compute queue (devices: " +
                            (seen.empty() ? std::string("none") : seen) +
                            "); for lavapipe install mesa-vulkan-drivers and "
                            "set VK_ICD_FILENAMES=/usr/share/vulkan/icd.d/"
                            "lvp_icd.x86_64.json");
  vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);

  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 props2{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props2.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(physical_, &props2);
  subgroupSize_ = subgroup.subgroupSize;
  constexpr VkSubgroupFeatureFlags kNeeded =
      VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  if (!(subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ||
      (subgroup.supportedOperations & kNeeded) != kNeeded)
    return fail(whyNot, deviceName_ + " lacks subgroup arithmetic in compute "
                                      "shaders (gpu.subgroup_reduce)");

  // Enable every feature the device has (Int64, Float16, Int8, 8- and 16-bit
  // storage, robust buffer access): the kernels decide what they use.
  VkPhysicalDeviceVulkan12Features features12{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features features11{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  features11.pNext = &features12;
  VkPhysicalDeviceFeatures2 features{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &features11;
  vkGetPhysicalDeviceFeatures2(physical_, &features);

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queueInfo{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queueInfo.queueFamilyIndex = queueFamily_;
  queueInfo.queueCount = 1;
  queueInfo.pQueuePriorities = &priority;
  VkDeviceCreateInfo deviceInfo{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  deviceInfo.pNext = &features;
  deviceInfo.queueCreateInfoCount = 1;
  deviceInfo.pQueueCreateInfos = &queueInfo;
  if (!check(vkCreateDevice(physical_, &deviceInfo, nullptr, &device_),
             "vkCreateDevice", whyNot))
    return false;
  vkGetDeviceQueue(device_, queueFamily_, 0, &queue_);

  VkCommandPoolCreateInfo poolInfo{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  poolInfo.queueFamilyIndex = queueFamily_;
  return check(vkCreateCommandPool(device_, &poolInfo, nullptr, &commandPool_),
               "vkCreateCommandPool", whyNot);
}

int32_t VulkanRunner::memoryType(uint32_t allowedTypes) const {
  constexpr VkMemoryPropertyFlags kWanted =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i)
    if ((allowedTypes & (1u << i)) &&
        (memory_.memoryTypes[i].propertyFlags & kWanted) == kWanted)
      return static_cast<int32_t>(i);
  return -1;
}

std::string VulkanRunner::beyondLimits(const std::vector<size_t> &bytes) const {
  if (bytes.size() > limits_.maxPerStageDescriptorStorageBuffers)
    return std::to_string(bytes.size()) +
           " buffers, the device binds at most " +
           std::to_string(limits_.maxPerStageDescriptorStorageBuffers);
  for (size_t i = 0; i < bytes.size(); ++i)
    if (bytes[i] > limits_.maxStorageBufferRange)
      return "buffer " + std::to_string(i) + " has " +
             std::to_string(bytes[i]) +
             " bytes, over the device's storage "
             "buffer range of " +
             std::to_string(limits_.maxStorageBufferRange);
  return "";
}

bool VulkanRunner::dispatch(const std::vector<uint32_t> &spirv,
                            const std::string &entry,
                            const std::vector<std::vector<uint8_t> *> &buffers,
                            uint32_t groupsX, uint32_t groupsY,
                            uint32_t groupsZ, std::string *error) {
  if (lost_)
    return fail(error, "the Vulkan device was abandoned after a timeout");
  // Everything Vulkan would take as undefined behaviour (and lavapipe might
  // crash on) is checked here first.
  if (!validate(spirv, apiVersion_, error))
    return false;
  SpirvInterface interface = scanInterface(spirv);
  auto found = interface.entryPoints.find(entry);
  if (found == interface.entryPoints.end()) {
    std::string names;
    for (const auto &[name, id] : interface.entryPoints)
      names += (names.empty() ? "" : ", ") + name;
    return fail(error, "no GLCompute entry point '" + entry +
                           "' in the SPIR-V module (it has: " +
                           (names.empty() ? "none" : names) + ")");
  }
  auto size = interface.localSize.find(found->second);
  if (size != interface.localSize.end()) {
    const auto &[x, y, z] = size->second;
    const uint32_t *most = limits_.maxComputeWorkGroupSize;
    if (x > most[0] || y > most[1] || z > most[2] ||
        uint64_t{x} * y * z > limits_.maxComputeWorkGroupInvocations)
      return fail(error,
                  "kernel '" + entry + "' has workgroups of " +
                      std::to_string(x) + "x" + std::to_string(y) + "x" +
                      std::to_string(z) +
                      " threads; the "
                      "device allows " +
                      std::to_string(most[0]) + "x" + std::to_string(most[1]) +
                      "x" + std::to_string(most[2]) + " and " +
                      std::to_string(limits_.maxComputeWorkGroupInvocations) +
                      " in all");
  }
  // A kernel's arguments are bindings 0..n-1; with one kernel in the module
  // the buffer count must be n, with several at least what this one uses.
  uint32_t moduleBindings = 0, usedBindings = 0;
  for (const auto &[id, binding] : interface.bindingOf) {
    if (interface.setOf[id] != 0)
      return fail(error, "variable %" + std::to_string(id) +
                             " is in descriptor set " +
                             std::to_string(interface.setOf[id]) +
                             "; the runner binds set 0 only");
    moduleBindings = std::max(moduleBindings, binding + 1);
    if (interface.pointersUsed[found->second].count(id))
      usedBindings = std::max(usedBindings, binding + 1);
  }
  if (interface.entryPoints.size() == 1 ? buffers.size() != moduleBindings
                                        : buffers.size() < usedBindings)
    return fail(error, "kernel '" + entry + "' has " +
                           std::to_string(interface.entryPoints.size() == 1
                                              ? moduleBindings
                                              : usedBindings) +
                           " bindings (one per argument), got " +
                           std::to_string(buffers.size()) + " buffers");
  const uint32_t groups[3] = {groupsX, groupsY, groupsZ};
  for (int d = 0; d < 3; ++d)
    if (groups[d] == 0 || groups[d] > limits_.maxComputeWorkGroupCount[d])
      return fail(error,
                  "workgroup count " + std::to_string(groups[d]) +
                      " in dimension " + "xyz"[d] + " is outside 1.." +
                      std::to_string(limits_.maxComputeWorkGroupCount[d]));
  std::vector<size_t> sizes;
  for (size_t i = 0; i < buffers.size(); ++i) {
    sizes.push_back(buffers[i] ? buffers[i]->size() : 0);
    if (sizes.back() == 0)
      return fail(error, "buffer " + std::to_string(i) +
                             " has 0 bytes; a "
                             "storage buffer needs 1.." +
                             std::to_string(limits_.maxStorageBufferRange));
  }
  // Last, so that a kernel past them has passed every other check.
  if (std::string why = beyondLimits(sizes); !why.empty())
    return fail(error, why);

  DispatchResources res{device_, commandPool_};
  std::vector<VkDescriptorSetLayoutBinding> layoutBindings;
  std::vector<VkDescriptorBufferInfo> bufferInfos;
  // One host vector given for several bindings is one device buffer bound
  // to each (a kernel run in place: an output that is an input's buffer).
  std::vector<size_t> firstOf(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    firstOf[i] = size_t(std::find(buffers.begin(), buffers.end(), buffers[i]) -
                        buffers.begin());
    if (firstOf[i] != i) {
      layoutBindings.push_back({static_cast<uint32_t>(i),
                                VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
      bufferInfos.push_back(bufferInfos[firstOf[i]]);
      continue;
    }
    VkBufferCreateInfo bufferInfo{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bufferInfo.size = buffers[i]->size();
    bufferInfo.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
    bufferInfo.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkBuffer buffer;
    if (!check(vkCreateBuffer(device_, &bufferInfo, nullptr, &buffer),
               "vkCreateBuffer", error))
      return false;
    res.buffers.push_back(buffer);
    VkMemoryRequirements needs;
    vkGetBufferMemoryRequirements(device_, buffer, &needs);
    int32_t type = memoryType(needs.memoryTypeBits);
    if (type < 0)
      return fail(error, "no host-visible coherent memory for buffer " +
                             std::to_string(i));
    VkMemoryAllocateInfo allocInfo{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    allocInfo.allocationSize = needs.size;
    allocInfo.memoryTypeIndex = static_cast<uint32_t>(type);
    VkDeviceMemory memory;
    if (!check(vkAllocateMemory(device_, &allocInfo, nullptr, &memory),
               "vkAllocateMemory", error))
      return false;
    res.memories.push_back(memory);
    void *mapped;
    if (!check(vkBindBufferMemory(device_, buffer, memory, 0),
               "vkBindBufferMemory", error) ||
        !check(vkMapMemory(device_, memory, 0, VK_WHOLE_SIZE, 0, &mapped),
               "vkMapMemory", error))
      return false;
    std::memcpy(mapped, buffers[i]->data(), buffers[i]->size());
    vkUnmapMemory(device_, memory);
    layoutBindings.push_back({static_cast<uint32_t>(i),
                              VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                              VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
    bufferInfos.push_back({buffer, 0, VK_WHOLE_SIZE});
  }

  VkShaderModuleCreateInfo shaderInfo{
      VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  shaderInfo.codeSize = spirv.size() * sizeof(uint32_t);
  shaderInfo.pCode = spirv.data();
  VkDescriptorSetLayoutCreateInfo setLayoutInfo{
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  setLayoutInfo.bindingCount = static_cast<uint32_t>(layoutBindings.size());
  setLayoutInfo.pBindings = layoutBindings.data();
  if (!check(vkCreateShaderModule(device_, &shaderInfo, nullptr, &res.shader),
             "vkCreateShaderModule", error) ||
      !check(vkCreateDescriptorSetLayout(device_, &setLayoutInfo, nullptr,
                                         &res.setLayout),
             "vkCreateDescriptorSetLayout", error))
    return false;
  VkPipelineLayoutCreateInfo pipelineLayoutInfo{
      VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pipelineLayoutInfo.setLayoutCount = 1;
  pipelineLayoutInfo.pSetLayouts = &res.setLayout;
  if (!check(vkCreatePipelineLayout(device_, &pipelineLayoutInfo, nullptr,
                                    &res.pipelineLayout),
             "vkCreatePipelineLayout", error))
    return false;
  VkComputePipelineCreateInfo pipelineInfo{
      VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pipelineInfo.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  pipelineInfo.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipelineInfo.stage.module = res.shader;
  pipelineInfo.stage.pName = entry.c_str();
  pipelineInfo.layout = res.pipelineLayout;
  if (!check(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &pipelineInfo,
                                      nullptr, &res.pipeline),
             "vkCreateComputePipelines", error))
    return false;

  VkDescriptorSet set = VK_NULL_HANDLE;
  if (!buffers.empty()) {
    VkDescriptorPoolSize poolSize{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  static_cast<uint32_t>(buffers.size())};
    VkDescriptorPoolCreateInfo poolInfo{
        VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    poolInfo.maxSets = 1;
    poolInfo.poolSizeCount = 1;
    poolInfo.pPoolSizes = &poolSize;
    VkDescriptorSetAllocateInfo setInfo{
        VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    setInfo.descriptorSetCount = 1;
    setInfo.pSetLayouts = &res.setLayout;
    if (!check(vkCreateDescriptorPool(device_, &poolInfo, nullptr,
                                      &res.descriptorPool),
               "vkCreateDescriptorPool", error))
      return false;
    setInfo.descriptorPool = res.descriptorPool;
    if (!check(vkAllocateDescriptorSets(device_, &setInfo, &set),
               "vkAllocateDescriptorSets", error))
      return false;
    std::vector<VkWriteDescriptorSet> writes;
    for (size_t i = 0; i < buffers.size(); ++i) {
      VkWriteDescriptorSet write{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      write.dstSet = set;
      write.dstBinding = static_cast<uint32_t>(i);
      write.descriptorCount = 1;
      write.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      write.pBufferInfo = &bufferInfos[i];
      writes.push_back(write);
    }
    vkUpdateDescriptorSets(device_, static_cast<uint32_t>(writes.size()),
                           writes.data(), 0, nullptr);
  }

  VkCommandBufferAllocateInfo commandInfo{
      VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  commandInfo.commandPool = commandPool_;
  commandInfo.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  commandInfo.commandBufferCount = 1;
  VkCommandBufferBeginInfo beginInfo{
      VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  beginInfo.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (!check(vkAllocateCommandBuffers(device_, &commandInfo, &res.commands),
             "vkAllocateCommandBuffers", error) ||
      !check(vkBeginCommandBuffer(res.commands, &beginInfo),
             "vkBeginCommandBuffer", error))
    return false;
  vkCmdBindPipeline(res.commands, VK_PIPELINE_BIND_POINT_COMPUTE, res.pipeline);
  if (set)
    vkCmdBindDescriptorSets(res.commands, VK_PIPELINE_BIND_POINT_COMPUTE,
                            res.pipelineLayout, 0, 1, &set, 0, nullptr);
  vkCmdDispatch(res.commands, groupsX, groupsY, groupsZ);
  // The kernel's writes must be visible to the host reads below.
  VkMemoryBarrier toHost{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  toHost.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
  toHost.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(res.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &toHost, 0, nullptr, 0,
                       nullptr);
  if (!check(vkEndCommandBuffer(res.commands), "vkEndCommandBuffer", error))
    return false;

  VkFenceCreateInfo fenceInfo{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &res.commands;
  if (!check(vkCreateFence(device_, &fenceInfo, nullptr, &res.fence),
             "vkCreateFence", error) ||
      !check(vkQueueSubmit(queue_, 1, &submit, res.fence), "vkQueueSubmit",
             error))
    return false;
  VkResult waited =
      vkWaitForFences(device_, 1, &res.fence, VK_TRUE, kFenceTimeoutNs);
  if (waited == VK_TIMEOUT) {
    // The kernel still runs and uses every handle: leak them, and the device,
    // rather than wait forever; the runner is unusable from here on.
    res.device = VK_NULL_HANDLE;
    lost_ = true;
    return fail(error, "kernel '" + entry + "' ran longer than " +
                           std::to_string(kFenceTimeoutNs / 1000000000) +
                           " s; the Vulkan device is abandoned");
  }
  if (!check(waited, "vkWaitForFences", error))
    return false;

  for (size_t i = 0, m = 0; i < buffers.size(); ++i) {
    if (firstOf[i] != i)
      continue; // read back through its first binding
    void *mapped;
    if (!check(
            vkMapMemory(device_, res.memories[m], 0, VK_WHOLE_SIZE, 0, &mapped),
            "vkMapMemory", error))
      return false;
    std::memcpy(buffers[i]->data(), mapped, buffers[i]->size());
    vkUnmapMemory(device_, res.memories[m]);
    ++m;
  }
  return true;
}

} // namespace mc::gputest

// The device and kernel registries (see modelc/device.h).
#include "modelc/device.h"

#include <algorithm>
#include <map>
#include <utility>

namespace mc::rt {

Device::~Device() = default;

Status Device::loadExecutables(const std::vector<ExecutableView>& e) {
  return Status::ok();
}

Status Device::bindGenerated(const KernelRequest& request, BoundKernel*) {
  return Status::error("device " + name() + " cannot launch generated "
                       "kernels (entry '" +
                       (request.generated ? request.generated->entry : "") +
                       "')");
}

namespace {

std::map<std::pair<std::string, OpId>, KernelFactory>& kernels() {
  static std::map<std::pair<std::string, OpId>, KernelFactory> table;
  return table;
}

std::vector<DeviceKind>& kinds() {
  static std::vector<DeviceKind> table;
  return table;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v)
    s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

} // namespace

void registerKernel(const char* device, OpId op, KernelFactory factory) {
  kernels()[{device, op}] = factory;
}

KernelFactory findKernel(const std::string& device, OpId op) {
  auto it = kernels().find({device, op});
  return it == kernels().end() ? nullptr : it->second;
}

void registerDeviceKind(DeviceKind kind) {
  kinds().push_back(std::move(kind));
  std::stable_sort(kinds().begin(), kinds().end(),
                   [](const DeviceKind& a, const DeviceKind& b) {
                     return a.priority > b.priority;
                   });
}

const std::vector<DeviceKind>& deviceKinds() { return kinds(); }

std::vector<std::string> availableDevices() {
  std::vector<std::string> out;
  for (const DeviceKind& k : kinds()) {
    int n = k.count ? k.count() : 0;
    if (k.name == "cpu" && n > 0) {
      out.push_back("cpu");
      continue;
    }
    for (int i = 0; i < n; ++i)
      out.push_back(k.name + ":" + std::to_string(i));
  }
  return out;
}

std::vector<std::string> offeredTargets() {
  std::vector<std::string> out;
  for (const DeviceKind& k : kinds())
    if (k.count && k.count() > 0)
      for (const std::string& t : k.targets)
        if (std::find(out.begin(), out.end(), t) == out.end())
          out.push_back(t);
  return out;
}

Status createDevice(const std::string& spec, std::unique_ptr<Device>* out) {
  if (spec == "auto") {
    for (const DeviceKind& k : kinds())
      if (k.count && k.count() > 0)
        return k.create(0, out);
    return Status::error("no device is available");
  }
  std::string name = spec;
  int ordinal = 0;
  size_t colon = spec.find(':');
  if (colon != std::string::npos) {
    name = spec.substr(0, colon);
    std::string digits = spec.substr(colon + 1);
    if (digits.empty() || digits.size() > 4 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      return Status::error("device '" + spec +
                           "': expected NAME or NAME:N, such as cuda:0");
    ordinal = std::stoi(digits);
  }
  for (const DeviceKind& k : kinds()) {
    if (k.name != name)
      continue;
    int n = k.count ? k.count() : 0;
    if (ordinal >= n)
      return Status::error(
          "device '" + spec + "' is not present (" +
          (n ? std::to_string(n) + " " + name + " device(s)" : "none") +
          "; available: " + join(availableDevices()) + ")");
    return k.create(ordinal, out);
  }
  std::vector<std::string> known;
  for (const DeviceKind& k : kinds())
    known.push_back(k.name);
  return Status::error("unknown device '" + spec + "' (known: " + join(known) +
                       ", auto)");
}

} // namespace mc::rt

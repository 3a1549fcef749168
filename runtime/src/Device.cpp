// The device and kernel registries (see modelc/device.h).
#include "modelc/device.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <utility>

namespace mc::rt {

Device::~Device() = default;
StepTimer::~StepTimer() = default;

namespace {

/// The host clock between marks: right for steps that run synchronously.
class HostStepTimer final : public StepTimer {
public:
  void mark(size_t index) override {
    Clock::time_point now = Clock::now();
    if (index > 0) { // step index - 1 ran since the last mark
      if (elapsed_.size() < index)
        elapsed_.resize(index, 0.0);
      elapsed_[index - 1] += std::chrono::duration<double>(now - last_).count();
    }
    last_ = now;
  }
  Status collect(std::vector<double>& seconds) override {
    for (size_t i = 0; i < elapsed_.size() && i < seconds.size(); ++i)
      seconds[i] += elapsed_[i];
    std::fill(elapsed_.begin(), elapsed_.end(), 0.0);
    return Status::ok();
  }

private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_;
  std::vector<double> elapsed_;
};

} // namespace

Status Device::runSteps(uint64_t, const std::function<Status()>& runAll) {
  return runAll();
}

std::unique_ptr<StepTimer> Device::stepTimer() {
  return std::make_unique<HostStepTimer>();
}

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

/// Why kind `k` has no device here ("" when it does not say).
static std::string absence(const DeviceKind& k) {
  return k.whyAbsent ? k.whyAbsent() : std::string();
}

Status createDevice(const std::string& spec, std::unique_ptr<Device>* out,
                    std::string* why, const std::vector<std::string>& targets) {
  if (spec == "auto") {
    // Kinds in priority order: the first with a device (that runs one of
    // the targets) wins; why the ones before it were skipped is what
    // "auto" says.
    std::string skipped;
    for (const DeviceKind& k : kinds()) {
      bool present = k.count && k.count() > 0;
      bool runs = targets.empty();
      for (const std::string& t : targets)
        runs |= std::find(k.targets.begin(), k.targets.end(), t) !=
                k.targets.end();
      if (present && !runs) {
        skipped += (skipped.empty() ? "" : "; ") + k.name +
                   " skipped: the artifact targets " + join(targets);
        continue;
      }
      if (present) {
        MC_RETURN_IF_ERROR(k.create(0, out));
        if (why) {
          std::vector<std::string> lower;
          for (const DeviceKind& o : kinds())
            if (o.priority < k.priority)
              lower.push_back(o.name);
          *why = !skipped.empty() ? skipped
                 : lower.empty()  ? "the only device kind in this runtime"
                                  : "preferred over " + join(lower);
        }
        return Status::ok();
      }
      std::string reason = absence(k);
      skipped += (skipped.empty() ? "" : "; ") + k.name + " skipped: " +
                 (reason.empty() ? "no device" : reason);
    }
    return Status::error("no device is available (" + skipped + ")");
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
    if (ordinal >= n) {
      std::string reason = n ? "" : absence(k);
      return Status::error(
          "device '" + spec + "' is not present (" +
          (n ? std::to_string(n) + " " + name + " device(s)"
             : reason.empty() ? "none" : reason) +
          "; available: " + join(availableDevices()) + ")");
    }
    return k.create(ordinal, out);
  }
  std::vector<std::string> known;
  for (const DeviceKind& k : kinds())
    known.push_back(k.name);
  return Status::error("unknown device '" + spec + "' (known: " + join(known) +
                       ", auto)");
}

} // namespace mc::rt

// nn modules (see nn.h).
#include "frontend/nn.h"
#include "frontend/TraceHook.h"

#include <cmath>

namespace mc::nn {

Module::~Module() = default;

Tensor Module::operator()(const Tensor& x) {
  TraceHook* hook = activeTraceHook();
  if (hook)
    hook->enterModule(*this);
  struct Exit {
    TraceHook* hook;
    const Module& m;
    ~Exit() {
      if (hook)
        hook->exitModule(m);
    }
  } exit{hook, *this};
  return forward(x);
}

Tensor& Module::registerParameter(const std::string& name, Tensor t) {
  for (auto& [n, p] : params_)
    if (n == name)
      throw Error("parameter '" + name + "' registered twice");
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

void Module::addChild(const std::string& name, std::shared_ptr<Module> m) {
  if (!m)
    throw Error("submodule '" + name + "' is null");
  children_.emplace_back(name, std::move(m));
}

std::vector<std::pair<std::string, Tensor>> Module::namedParameters() const {
  std::vector<std::pair<std::string, Tensor>> out = params_;
  for (const auto& [name, child] : children_)
    for (auto& [pname, p] : child->namedParameters())
      out.emplace_back(name + "." + pname, p);
  return out;
}

std::vector<std::pair<std::string, const Module*>>
Module::namedModules() const {
  std::vector<std::pair<std::string, const Module*>> out;
  out.emplace_back("", this);
  for (const auto& [name, child] : children_)
    for (auto& [sub, m] : child->namedModules())
      out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  return out;
}

Linear::Linear(int64_t inFeatures, int64_t outFeatures, bool withBias) {
  if (inFeatures <= 0 || outFeatures <= 0)
    throw Error("Linear: features must be positive, got in=" +
                std::to_string(inFeatures) +
                " out=" + std::to_string(outFeatures));
  float bound = 1.0f / std::sqrt(static_cast<float>(inFeatures));
  weight = registerParameter(
      "weight", Tensor::uniform({outFeatures, inFeatures}, -bound, bound));
  if (withBias)
    bias = registerParameter("bias",
                             Tensor::uniform({outFeatures}, -bound, bound));
}

Tensor Linear::forward(const Tensor& x) { return linear(x, weight, bias); }

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (auto& m : modules)
    push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> m) {
  registerModule(std::to_string(children().size()), std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& [name, child] : children())
    y = (*child)(y);
  return y;
}

} // namespace mc::nn

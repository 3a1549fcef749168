// ResNet-18 (see resnet18.h).
#include "examples/resnet/resnet18.h"

#include <cmath>
#include <cstring>
#include <string>

namespace mc::models {

namespace {

std::shared_ptr<nn::Conv2d> conv3x3(int64_t in, int64_t out,
                                    int64_t stride = 1) {
  return std::make_shared<nn::Conv2d>(in, out, 3, stride, /*padding=*/1,
                                      /*dilation=*/1, /*groups=*/1,
                                      /*bias=*/false);
}

/// Overwrites `t` in place (its storage is shared with the module).
void assign(Tensor& t, const Tensor& value) {
  std::memcpy(t.rawData(), value.rawData(), t.byteSize());
}

} // namespace

BasicBlock::BasicBlock(int64_t inPlanes, int64_t planes, int64_t stride) {
  conv1 = registerModule("conv1", conv3x3(inPlanes, planes, stride));
  bn1 = registerModule("bn1", std::make_shared<nn::BatchNorm2d>(planes));
  relu = registerModule("relu", std::make_shared<nn::ReLU>());
  conv2 = registerModule("conv2", conv3x3(planes, planes));
  bn2 = registerModule("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  if (stride != 1 || inPlanes != planes) {
    downsample = registerModule(
        "downsample",
        std::make_shared<nn::Sequential>(
            std::initializer_list<std::shared_ptr<nn::Module>>{
                std::make_shared<nn::Conv2d>(inPlanes, planes, 1, stride, 0, 1,
                                             1, /*bias=*/false),
                std::make_shared<nn::BatchNorm2d>(planes)}));
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = (*relu)((*bn1)((*conv1)(x)));
  out = (*bn2)((*conv2)(out));
  Tensor identity = downsample ? (*downsample)(x) : x;
  return (*relu)(out + identity);
}

ResNet::ResNet(const std::vector<int64_t>& blocksPerStage,
               int64_t numClasses) {
  if (blocksPerStage.size() != 4)
    throw Error("ResNet: expects 4 stages, got " +
                std::to_string(blocksPerStage.size()));
  conv1 = registerModule("conv1", std::make_shared<nn::Conv2d>(
                                      3, 64, 7, 2, 3, 1, 1, /*bias=*/false));
  bn1 = registerModule("bn1", std::make_shared<nn::BatchNorm2d>(64));
  relu = registerModule("relu", std::make_shared<nn::ReLU>());
  maxpool = registerModule("maxpool", std::make_shared<nn::MaxPool2d>(3, 2, 1));
  int64_t inPlanes = 64;
  for (int64_t stage = 0; stage < 4; ++stage) {
    int64_t planes = 64 << stage;
    auto layer = std::make_shared<nn::Sequential>();
    for (int64_t i = 0; i < blocksPerStage[stage]; ++i) {
      int64_t stride = (stage > 0 && i == 0) ? 2 : 1;
      layer->push_back(std::make_shared<BasicBlock>(inPlanes, planes, stride));
      inPlanes = planes;
    }
    layers.push_back(
        registerModule("layer" + std::to_string(stage + 1), layer));
  }
  avgpool = registerModule("avgpool",
                           std::make_shared<nn::AdaptiveAvgPool2d>(1));
  fc = registerModule("fc", std::make_shared<nn::Linear>(512, numClasses));
}

Tensor ResNet::forward(const Tensor& x) {
  Tensor y = (*maxpool)((*relu)((*bn1)((*conv1)(x))));
  for (auto& layer : layers)
    y = (*layer)(y);
  y = flatten((*avgpool)(y), 1);
  return (*fc)(y);
}

std::shared_ptr<ResNet> resnet18(int64_t numClasses) {
  auto model = std::make_shared<ResNet>(std::vector<int64_t>{2, 2, 2, 2},
                                        numClasses);
  // torchvision: kaiming_normal_(mode="fan_out", nonlinearity="relu"),
  // std = sqrt(2 / (out_channels * kh * kw)).
  for (auto& [path, m] : model->namedModules()) {
    auto* conv = dynamic_cast<const nn::Conv2d*>(m);
    if (!conv)
      continue;
    Tensor w = conv->weight;
    const Shape& s = w.shape();
    double stdev = std::sqrt(2.0 / static_cast<double>(s[0] * s[2] * s[3]));
    assign(w, Tensor::randn(s) * stdev);
  }
  return model;
}

void randomizeBatchNorms(nn::Module& model) {
  for (auto& [path, m] : model.namedModules()) {
    auto* bn = dynamic_cast<const nn::BatchNorm2d*>(m);
    if (!bn)
      continue;
    Shape s = bn->weight.shape();
    Tensor weight = bn->weight, bias = bn->bias, mean = bn->runningMean,
           var = bn->runningVar;
    assign(weight, Tensor::uniform(s, 0.5f, 1.5f));
    assign(bias, Tensor::randn(s) * 0.1);
    assign(mean, Tensor::randn(s) * 0.1);
    assign(var, Tensor::uniform(s, 0.5f, 1.5f));
  }
}

} // namespace mc::models

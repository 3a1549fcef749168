// ResNet-18 (torchvision.models.resnet18's architecture and state_dict
// names) built from the frontend's nn modules.
#ifndef MODELC_EXAMPLES_RESNET_RESNET18_H
#define MODELC_EXAMPLES_RESNET_RESNET18_H

#include "frontend/nn.h"

#include <memory>

namespace mc::models {

/// torchvision's BasicBlock: two 3x3 conv-bn pairs and a residual, with a
/// 1x1 conv-bn `downsample` on the shortcut when the shape changes.
class BasicBlock : public nn::Module {
public:
  BasicBlock(int64_t inPlanes, int64_t planes, int64_t stride = 1);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "BasicBlock"; }

  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::BatchNorm2d> bn1, bn2;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::Sequential> downsample; // null when not needed
};

/// torchvision's ResNet with BasicBlocks: 7x7/2 stem conv, bn, relu,
/// 3x3/2 max pool, four stages (64, 128, 256, 512 channels), global average
/// pool, flatten, fc. Inference only (BatchNorm uses running statistics).
class ResNet : public nn::Module {
public:
  ResNet(const std::vector<int64_t>& blocksPerStage, int64_t numClasses);
  Tensor forward(const Tensor& x) override;
  std::string typeName() const override { return "ResNet"; }

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::ReLU> relu;
  std::shared_ptr<nn::MaxPool2d> maxpool;
  std::vector<std::shared_ptr<nn::Sequential>> layers; // layer1 .. layer4
  std::shared_ptr<nn::AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<nn::Linear> fc;
};

/// ResNet-18 ([2, 2, 2, 2] BasicBlocks), initialized like torchvision:
/// convs kaiming_normal_(mode="fan_out", nonlinearity="relu"), BatchNorm
/// weight 1 and bias 0, fc as nn::Linear; from the default generator.
std::shared_ptr<ResNet> resnet18(int64_t numClasses = 1000);

/// Fills every BatchNorm2d's weight, bias, running_mean and running_var of
/// `model` with random values (the default generator), so that inference
/// with a freshly made model exercises every BatchNorm term, as trained
/// weights would: weight in [0.5, 1.5), bias and mean N(0, 0.1^2), var in
/// [0.5, 1.5).
void randomizeBatchNorms(nn::Module& model);

} // namespace mc::models

#endif // MODELC_EXAMPLES_RESNET_RESNET18_H

// Compiled training (trace -> --train pipeline -> runtime) against eager
// training, and dynamic loss scaling under fault injection.
#include "frontend/Autograd.h"
#include "frontend/Loss.h"
#include "frontend/Optim.h"
#include "frontend/Random.h"
#include "frontend/jit/Train.h"

#include "ErrorOf.h"

#include <gtest/gtest.h>
#include <map>
#include <optional>

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mc;
using mc::test::errorOf;

namespace {

std::shared_ptr<nn::Sequential> makeModel(uint64_t seed) {
  manualSeed(seed);
  return std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Linear>(8, 16), std::make_shared<nn::Tanh>(),
          std::make_shared<nn::Linear>(16, 4)});
}

/// n labels in [0, classes).
Tensor randomLabels(std::mt19937_64& gen, int64_t n, int64_t classes) {
  Tensor y = Tensor::empty({n}, DType::I64);
  for (int64_t k = 0; k < n; ++k)
    y.data<int64_t>()[k] = static_cast<int64_t>(gen() % classes);
  return y;
}

struct Batch {
  Tensor x, y;
};

std::vector<Batch> makeBatches(int n) {
  std::mt19937_64 gen(11);
  std::vector<Batch> batches;
  for (int i = 0; i < n; ++i) {
    Tensor x = Tensor::randn({6, 8}, &gen);
    batches.push_back(Batch{x, randomLabels(gen, 6, 4)});
  }
  return batches;
}

Tensor classify(const Tensor& out, const std::vector<Tensor>& batch) {
  return crossEntropy(out, batch[1]);
}

double relErr(const Tensor& a, const Tensor& b) { return relativeError(a, b); }

/// A batch's input and labels: a Batch, or {input, labels}.
std::pair<const Tensor&, const Tensor&> inputAndLabels(const Batch& b) {
  return {b.x, b.y};
}
std::pair<const Tensor&, const Tensor&>
inputAndLabels(const std::vector<Tensor>& b) {
  return {b[0], b[1]};
}

/// Eager training: one step per batch (cross-entropy, backward, `opt`);
/// the losses.
template <typename B>
std::vector<float> trainEagerly(nn::Module& model, optim::Optimizer& opt,
                                const std::vector<B>& batches) {
  std::vector<float> losses;
  for (const B& b : batches) {
    auto [x, y] = inputAndLabels(b);
    opt.zeroGrad();
    Tensor loss = crossEntropy(model(x), y);
    losses.push_back(loss.toVector()[0]);
    loss.backward();
    opt.step();
  }
  return losses;
}

/// Eager: optimizer on module A. Compiled: the same model B (same init),
/// stepped by the runtime. After 10 steps every parameter agrees.
/// With `updateTol`, each parameter's change over the 10 steps (compiled
/// against eager) is checked too, to that relative error: a tighter check
/// than the parameters', which the initial values dominate. With the
/// pipeline's maxGradNorm, eager training clips by optim::clipGradNorm
/// (every step must clip), and the step's optimizer.grad_norm state is
/// the last eager norm. With a schedule (lrSchedule, warmupSteps), eager
/// training steps an optim::LRScheduler of the same options after each
/// step, and the step's optimizer.lr state is the last step's rate.
void expectCompiledEqualsEager(
    const std::function<std::unique_ptr<optim::Optimizer>(
        std::vector<Tensor>)>& makeOptimizer,
    const TrainPipelineOptions& pipeline, double updateTol = 0) {
  auto eager = makeModel(5);
  auto compiled = makeModel(5);
  std::map<std::string, Tensor> initial;
  for (auto& [name, p] : eager->namedParameters())
    initial[name] = p.clone();
  std::vector<Batch> batches = makeBatches(10);
  std::vector<Tensor> params;
  for (auto& [name, p] : eager->namedParameters())
    params.push_back(const_cast<Tensor&>(p).setRequiresGrad());
  auto opt = makeOptimizer(params);
  std::optional<optim::LRScheduler> schedule;
  bool scheduled = pipeline.lrSchedule != "constant" || pipeline.warmupSteps;
  if (scheduled)
    schedule.emplace(*opt, optim::ScheduleOptions{pipeline.lrSchedule,
                                                  pipeline.warmupSteps,
                                                  pipeline.totalSteps});
  std::vector<float> eagerLosses;
  float lastNorm = 0;
  double lastLr = 0;
  for (const Batch& b : batches) {
    opt->zeroGrad();
    Tensor loss = crossEntropy((*eager)(b.x), b.y);
    eagerLosses.push_back(loss.toVector()[0]);
    loss.backward();
    if (pipeline.maxGradNorm > 0) {
      lastNorm =
          optim::clipGradNorm(params, pipeline.maxGradNorm).toVector()[0];
      EXPECT_GT(lastNorm, pipeline.maxGradNorm); // clipped
    }
    lastLr = opt->lr();
    opt->step();
    if (schedule)
      schedule->step();
  }

  jit::TrainingOptions options;
  options.pipeline = pipeline;
  jit::TrainingStep step = jit::compileTraining(
      *compiled, classify, {batches[0].x, batches[0].y}, options);
  for (size_t i = 0; i < batches.size(); ++i) {
    float loss = step.step({batches[i].x, batches[i].y});
    EXPECT_NEAR(loss, eagerLosses[i], 1e-5 * std::max(1.0f, eagerLosses[i]))
        << "step " << i;
  }
  for (auto& [name, p] : eager->namedParameters()) {
    double err = relErr(step.state(name), p);
    EXPECT_LT(err, 1e-5) << name << ": rel err " << err;
    if (updateTol > 0) {
      const Tensor& p0 = initial.at(name);
      double u = relErr(step.state(name) - p0, p - p0);
      EXPECT_LT(u, updateTol) << name << ": the update's rel err " << u;
    }
  }
  if (pipeline.maxGradNorm > 0)
    EXPECT_NEAR(step.state("optimizer.grad_norm").toVector()[0], lastNorm,
                1e-5 * lastNorm);
  if (scheduled)
    EXPECT_NEAR(step.state("optimizer.lr").toVector()[0], lastLr,
                1e-6 * std::fabs(lastLr) + 1e-12);
}

TEST(Training, CompiledSgdEqualsEagerAfterTenSteps) {
  TrainPipelineOptions pipeline;
  pipeline.optimizer = "sgd";
  pipeline.lr = 0.1;
  pipeline.momentum = 0.9;
  pipeline.weightDecay = 0.01;
  pipeline.nesterov = true;
  expectCompiledEqualsEager(
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(
            std::move(p), optim::SGDOptions{0.1, 0.9, 0.0, 0.01, true});
      },
      pipeline);
}

/// AdamW with options `o`, eager and compiled alike; each update to 1e-6.
void expectCompiledAdamWEqualsEager(const optim::AdamWOptions& o) {
  TrainPipelineOptions pipeline;
  pipeline.optimizer = "adamw";
  pipeline.lr = o.lr;
  pipeline.beta1 = o.beta1;
  pipeline.beta2 = o.beta2;
  pipeline.eps = o.eps;
  pipeline.weightDecay = o.weightDecay;
  expectCompiledEqualsEager(
      [o](std::vector<Tensor> p) {
        return std::make_unique<optim::AdamW>(std::move(p), o);
      },
      pipeline, 1e-6);
}

TEST(Training, CompiledAdamWEqualsEagerAfterTenSteps) {
  expectCompiledAdamWEqualsEager({0.01, 0.9, 0.999, 1e-8, 0.01});
}

// The bias corrections 1 - beta^t are computed to f32's precision, as the
// eager optimizer (and PyTorch) computes them in double: with beta2 =
// 0.99999, 1 - pow(beta2, t) in f32 was 7e-4 off (beta2's rounding), and
// every update with it.
TEST(Training, CompiledAdamWBiasCorrectionsMatchDoubleWithBeta2NearOne) {
  expectCompiledAdamWEqualsEager({0.01, 0.9, 0.99999, 1e-8, 0});
}

/// A conv-bn-relu-pool network in training mode: the compiled step (conv,
/// pool and batch-norm derivatives, running statistics as state) equals
/// eager training after 10 AdamW steps, running statistics included.
TEST(Training, CompiledConvBatchNormPoolEqualsEager) {
  auto makeCnn = [] {
    manualSeed(7);
    auto m = std::make_shared<nn::Sequential>(
        std::initializer_list<std::shared_ptr<nn::Module>>{
            // No conv bias before a batch norm (as in ResNets): its exact
            // gradient is 0, and AdamW would turn rounding noise into
            // full-size steps that differ between eager and compiled.
            std::make_shared<nn::Conv2d>(2, 4, 3, 1, 1, 1, 1, false),
            std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::MaxPool2d>(2),
            std::make_shared<nn::Conv2d>(4, 4, 3, 2, 1, 1, 2, false),
            std::make_shared<nn::BatchNorm2d>(4), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::AvgPool2d>(2), std::make_shared<nn::Flatten>(),
            std::make_shared<nn::Linear>(4, 3)});
    m->train();
    return m;
  };
  auto eager = makeCnn(), compiled = makeCnn();
  std::mt19937_64 gen(3);
  std::vector<std::vector<Tensor>> batches;
  for (int i = 0; i < 10; ++i) {
    Tensor y = Tensor::empty({5}, DType::I64);
    for (int k = 0; k < 5; ++k)
      y.data<int64_t>()[k] = static_cast<int64_t>(gen() % 3);
    batches.push_back({Tensor::randn({5, 2, 8, 8}, &gen), y});
  }
  std::vector<Tensor> params;
  for (auto& [name, p] : eager->namedParameters())
    params.push_back(const_cast<Tensor&>(p).setRequiresGrad());
  optim::AdamW opt(params, {0.01, 0.9, 0.999, 1e-8, 0.01});
  std::vector<float> eagerLosses = trainEagerly(*eager, opt, batches);
  jit::TrainingOptions options;
  options.pipeline.optimizer = "adamw";
  options.pipeline.lr = 0.01;
  options.pipeline.weightDecay = 0.01;
  jit::TrainingStep step =
      jit::compileTraining(*compiled, classify, batches[0], options);
  for (size_t i = 0; i < batches.size(); ++i)
    EXPECT_NEAR(step.step(batches[i]), eagerLosses[i],
                1e-5 * std::max(1.0f, eagerLosses[i]))
        << "step " << i;
  auto entries = eager->namedParameters();
  for (auto& b : eager->namedBuffers())
    entries.push_back(b);
  for (auto& [name, t] : entries) {
    double err = relErr(step.state(name), t);
    EXPECT_LT(err, 1e-5) << name << ": rel err " << err;
  }
  // The module's buffers were not touched by tracing; copying the state
  // back brings the running statistics with the parameters.
  Tensor before = compiled->namedBuffers()[0].second.clone();
  EXPECT_EQ(relErr(before, Tensor::zeros({4})), 0);
  step.copyParametersTo(*compiled);
  EXPECT_LT(relErr(compiled->namedBuffers()[0].second,
                   eager->namedBuffers()[0].second),
            1e-5);
}

// Dropout in training: the compiled step draws the masks eager code
// draws (the same Philox words at the same offsets), so losses and
// parameters agree as without it, and the step's rng.offset state moves on
// by one per dropout per step.
TEST(Training, DropoutCompiledEqualsEagerAfterTenSteps) {
  auto makeNet = [] {
    manualSeed(13);
    auto m = std::make_shared<nn::Sequential>(
        std::initializer_list<std::shared_ptr<nn::Module>>{
            std::make_shared<nn::Linear>(8, 32), std::make_shared<nn::ReLU>(),
            std::make_shared<nn::Dropout>(0.3),
            std::make_shared<nn::Linear>(32, 32), std::make_shared<nn::Tanh>(),
            std::make_shared<nn::Dropout>(0.5),
            std::make_shared<nn::Linear>(32, 4)});
    m->train();
    return m;
  };
  auto eager = makeNet(), compiled = makeNet(), reference = makeNet();
  std::vector<Batch> batches = makeBatches(10);
  std::vector<Tensor> params;
  for (auto& [name, p] : eager->namedParameters())
    params.push_back(const_cast<Tensor&>(p).setRequiresGrad());
  optim::SGD opt(params, optim::SGDOptions{0.1, 0.9, 0.0, 0.0, false});
  Generator::global().manualSeed(99);
  std::vector<float> eagerLosses = trainEagerly(*eager, opt, batches);
  EXPECT_EQ(Generator::global().offset(), 20u);
  // Without dropout the first loss is another one: the masks are there.
  reference->eval();
  float noDropout =
      crossEntropy((*reference)(batches[0].x), batches[0].y).toVector()[0];
  EXPECT_GT(std::fabs(noDropout - eagerLosses[0]), 1e-3);

  Generator::global().manualSeed(99);
  jit::TrainingOptions options;
  options.pipeline.optimizer = "sgd";
  options.pipeline.lr = 0.1;
  options.pipeline.momentum = 0.9;
  jit::TrainingStep step = jit::compileTraining(
      *compiled, classify, {batches[0].x, batches[0].y}, options);
  EXPECT_EQ(Generator::global().offset(), 0u); // tracing draws nothing
  for (size_t i = 0; i < batches.size(); ++i)
    EXPECT_NEAR(step.step({batches[i].x, batches[i].y}), eagerLosses[i],
                1e-5 * std::max(1.0f, eagerLosses[i]))
        << "step " << i;
  for (auto& [name, p] : eager->namedParameters()) {
    double err = relErr(step.state(name), p);
    EXPECT_LT(err, 1e-5) << name << ": rel err " << err;
  }
  EXPECT_EQ(step.state("rng.offset").data<int64_t>()[0], 20);
  step.copyParametersTo(*compiled);
  EXPECT_EQ(Generator::global().offset(), 20u);
}

/// A transformer encoder layer with dropout 0.2 (on the attention weights,
/// after the attention, inside and after the feed-forward: four per step),
/// mean-pooled into a linear classifier.
struct TinyEncoder : nn::Module {
  TinyEncoder() {
    layer = registerModule("layer", std::make_shared<nn::TransformerEncoderLayer>(
                                        16, 2, 32, 0.2, "gelu"));
    head = registerModule("head", std::make_shared<nn::Linear>(16, 4));
  }
  Tensor forward(const Tensor& x) override {
    return (*head)(mean((*layer)(x), {1}));
  }
  std::string typeName() const override { return "TinyEncoder"; }
  std::shared_ptr<nn::TransformerEncoderLayer> layer;
  std::shared_ptr<nn::Linear> head;
};

TEST(Training, TransformerWithDropoutCompiledEqualsEager) {
  auto make = [] {
    manualSeed(17);
    auto m = std::make_shared<TinyEncoder>();
    m->train();
    return m;
  };
  auto eager = make(), compiled = make();
  std::mt19937_64 gen(5);
  std::vector<std::vector<Tensor>> batches;
  for (int i = 0; i < 5; ++i)
    batches.push_back({Tensor::randn({3, 6, 16}, &gen),
                       randomLabels(gen, 3, 4)});
  std::vector<Tensor> params;
  for (auto& [name, p] : eager->namedParameters())
    params.push_back(const_cast<Tensor&>(p).setRequiresGrad());
  optim::SGD opt(params, optim::SGDOptions{0.05, 0.0, 0.0, 0.0, false});
  Generator::global().manualSeed(3);
  std::vector<float> eagerLosses = trainEagerly(*eager, opt, batches);
  EXPECT_EQ(Generator::global().offset(), 20u);
  Generator::global().manualSeed(3);
  jit::TrainingOptions options;
  options.pipeline.optimizer = "sgd";
  options.pipeline.lr = 0.05;
  jit::TrainingStep step =
      jit::compileTraining(*compiled, classify, batches[0], options);
  for (size_t i = 0; i < batches.size(); ++i)
    EXPECT_NEAR(step.step(batches[i]), eagerLosses[i],
                1e-5 * std::max(1.0f, eagerLosses[i]))
        << "step " << i;
  for (auto& [name, p] : eager->namedParameters())
    EXPECT_LT(relErr(step.state(name), p), 1e-5) << name;
  EXPECT_EQ(step.state("rng.offset").data<int64_t>()[0], 20);
}

/// Gradient clipping: eager optim::clipGradNorm before each step, compiled
/// --max-grad-norm, at a max small enough that every step clips.
TEST(Training, ClippedGradientsCompiledEqualEager) {
  TrainPipelineOptions sgd;
  sgd.optimizer = "sgd";
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  sgd.weightDecay = 0.01;
  sgd.maxGradNorm = 0.05;
  expectCompiledEqualsEager(
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(
            std::move(p), optim::SGDOptions{0.1, 0.9, 0.0, 0.01, false});
      },
      sgd, 1e-4);
  TrainPipelineOptions adamw;
  adamw.optimizer = "adamw";
  adamw.lr = 0.01;
  adamw.maxGradNorm = 0.05;
  expectCompiledEqualsEager(
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::AdamW>(
            std::move(p), optim::AdamWOptions{0.01, 0.9, 0.999, 1e-8, 0.01});
      },
      adamw, 1e-4);
}

/// Learning-rate schedules, eager optim::LRScheduler against the compiled
/// step's: AdamW with 3 warmup steps and linear decay to 0 at step 8 (10
/// steps, so the last two at rate 0), SGD on a cosine past its end (the
/// rate rises again after step 6, as Hugging Face's does), and a constant
/// rate after warmup.
TEST(Training, LearningRateSchedulesCompiledEqualEager) {
  TrainPipelineOptions adamw;
  adamw.optimizer = "adamw";
  adamw.lr = 0.02;
  adamw.lrSchedule = "linear";
  adamw.warmupSteps = 3;
  adamw.totalSteps = 8;
  expectCompiledEqualsEager(
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::AdamW>(
            std::move(p), optim::AdamWOptions{0.02, 0.9, 0.999, 1e-8, 0.01});
      },
      adamw, 1e-4);
  TrainPipelineOptions sgd;
  sgd.optimizer = "sgd";
  sgd.lr = 0.2;
  sgd.momentum = 0.9;
  sgd.lrSchedule = "cosine";
  sgd.totalSteps = 6;
  auto makeSgd = [](std::vector<Tensor> p) {
    return std::make_unique<optim::SGD>(
        std::move(p), optim::SGDOptions{0.2, 0.9, 0.0, 0.0, false});
  };
  expectCompiledEqualsEager(makeSgd, sgd, 1e-4);
  sgd.lrSchedule = "constant";
  sgd.totalSteps = 0;
  sgd.warmupSteps = 4;
  expectCompiledEqualsEager(makeSgd, sgd, 1e-4);
}

/// Fine-tuning with the first layer frozen: eager training leaves
/// requires_grad off on 0.*, the compiled step has --freeze=0. Losses and
/// the trained parameters agree; the frozen ones are unchanged and are no
/// state of the step (nor have optimizer state).
TEST(Training, FrozenLayerCompiledEqualsEager) {
  auto eager = makeModel(5), compiled = makeModel(5);
  Tensor frozenBefore = eager->namedParameters()[0].second.clone();
  std::vector<Batch> batches = makeBatches(10);
  std::vector<Tensor> params;
  for (auto& [name, p] : eager->namedParameters())
    if (name.rfind("0.", 0) != 0)
      params.push_back(const_cast<Tensor&>(p).setRequiresGrad());
  ASSERT_EQ(params.size(), 2u);
  optim::AdamW opt(params, {0.01, 0.9, 0.999, 1e-8, 0.01});
  std::vector<float> eagerLosses = trainEagerly(*eager, opt, batches);
  jit::TrainingOptions options;
  options.pipeline.optimizer = "adamw";
  options.pipeline.lr = 0.01;
  options.pipeline.freeze = {"0"};
  jit::TrainingStep step = jit::compileTraining(
      *compiled, classify, {batches[0].x, batches[0].y}, options);
  for (size_t i = 0; i < batches.size(); ++i)
    EXPECT_NEAR(step.step({batches[i].x, batches[i].y}), eagerLosses[i],
                1e-5 * std::max(1.0f, eagerLosses[i]))
        << "step " << i;
  std::vector<std::string> names = step.stateNames();
  for (auto& [name, p] : eager->namedParameters()) {
    bool frozen = name.rfind("0.", 0) == 0;
    EXPECT_EQ(std::count(names.begin(), names.end(), name), frozen ? 0 : 1)
        << name;
    EXPECT_EQ(std::count(names.begin(), names.end(), name + ".exp_avg"),
              frozen ? 0 : 1)
        << name;
    if (!frozen)
      EXPECT_LT(relErr(step.state(name), p), 1e-5) << name;
  }
  EXPECT_EQ(relErr(eager->namedParameters()[0].second, frozenBefore), 0);
  // The trained parameters go back to the module; the frozen ones are
  // the module's already.
  step.copyParametersTo(*compiled);
  auto copied = compiled->namedParameters();
  auto trained = eager->namedParameters();
  for (size_t i = 0; i < trained.size(); ++i)
    EXPECT_LT(relErr(copied[i].second, trained[i].second), 1e-5)
        << trained[i].first;
  // Freezing everything leaves nothing to train: refused by name.
  options.pipeline.freeze = {"0", "2"};
  EXPECT_NE(errorOf([&] {
              jit::compileTraining(*compiled, classify,
                                   {batches[0].x, batches[0].y}, options);
            }).find("not frozen by --freeze"),
            std::string::npos);
}

/// Gradient accumulation over 3 micro-batches: eager backward of loss / 3
/// on each, the optimizer (and clipping) every third; the compiled step with
/// --grad-accum=3 is called once per micro-batch. Losses of every micro-batch
/// and the parameters after 4 updates agree; between updates the
/// parameters stay as they were.
TEST(Training, GradientAccumulationCompiledEqualsEager) {
  for (const std::string kind : {"sgd", "adamw"}) {
    SCOPED_TRACE(kind);
    auto eager = makeModel(5), compiled = makeModel(5);
    std::vector<Batch> batches = makeBatches(12);
    std::vector<Tensor> params;
    for (auto& [name, p] : eager->namedParameters())
      params.push_back(const_cast<Tensor&>(p).setRequiresGrad());
    std::unique_ptr<optim::Optimizer> opt;
    if (kind == "sgd")
      opt = std::make_unique<optim::SGD>(
          params, optim::SGDOptions{0.1, 0.9, 0.0, 0.0, false});
    else
      opt = std::make_unique<optim::AdamW>(
          params, optim::AdamWOptions{0.01, 0.9, 0.999, 1e-8, 0.01});
    double clip = kind == "adamw" ? 0.05 : 0;
    std::vector<float> eagerLosses;
    opt->zeroGrad();
    for (size_t i = 0; i < batches.size(); ++i) {
      Tensor loss = crossEntropy((*eager)(batches[i].x), batches[i].y);
      eagerLosses.push_back(loss.toVector()[0]);
      (loss * (1.0 / 3)).backward();
      if ((i + 1) % 3 == 0) {
        if (clip > 0)
          optim::clipGradNorm(params, clip);
        opt->step();
        opt->zeroGrad();
      }
    }
    jit::TrainingOptions options;
    options.pipeline.optimizer = kind;
    options.pipeline.lr = kind == "sgd" ? 0.1 : 0.01;
    options.pipeline.momentum = kind == "sgd" ? 0.9 : 0.0;
    options.pipeline.gradAccum = 3;
    options.pipeline.maxGradNorm = clip;
    jit::TrainingStep step = jit::compileTraining(
        *compiled, classify, {batches[0].x, batches[0].y}, options);
    for (size_t i = 0; i < batches.size(); ++i)
      EXPECT_NEAR(step.step({batches[i].x, batches[i].y}), eagerLosses[i],
                  1e-5 * std::max(1.0f, eagerLosses[i]))
          << "micro-batch " << i;
    for (auto& [name, p] : eager->namedParameters())
      EXPECT_LT(relErr(step.state(name), p), 1e-5) << name;
    EXPECT_EQ(step.state("optimizer.step").data<int64_t>()[0], 4);
    EXPECT_EQ(step.state("optimizer.micro_step").data<int64_t>()[0], 0);
    // A micro-batch of the next group: gradients kept, nothing updated.
    std::map<std::string, Tensor> before;
    for (auto& [name, p] : eager->namedParameters())
      before[name] = step.state(name);
    step.step({batches[0].x, batches[0].y});
    for (auto& [name, p] : before)
      EXPECT_EQ(relErr(step.state(name), p), 0) << name;
    EXPECT_EQ(step.state("optimizer.step").data<int64_t>()[0], 4);
    EXPECT_EQ(step.state("optimizer.micro_step").data<int64_t>()[0], 1);
    EXPECT_GT(relErr(step.state("2.weight.grad_accum"), Tensor::zeros({4, 16})),
              0);
  }
}

/// Accumulation under dynamic loss scaling (fp16 training with
/// gradient_accumulation_steps): the scale is GradScaler's, updated once per
/// group on its last micro-batch. A power-of-two scale changes no value, so
/// clean groups train as without scaling; an inf in one micro-batch skips
/// its whole group (parameters, momentum and the step count as they were,
/// the sums restarted) and halves the scale at the group's end only; the
/// growth interval counts groups, not micro-batches.
TEST(Training, GradientAccumulationWithLossScalingSkipsWholeGroups) {
  std::vector<Batch> batches = makeBatches(6);
  jit::TrainingOptions options;
  options.pipeline.optimizer = "sgd";
  options.pipeline.lr = 0.1;
  options.pipeline.momentum = 0.9;
  options.pipeline.gradAccum = 3;
  auto plainModel = makeModel(6);
  jit::TrainingStep plain = jit::compileTraining(
      *plainModel, classify, {batches[0].x, batches[0].y}, options);
  options.pipeline.lossScaling = "on";
  options.pipeline.scaleInit = 1024;
  options.pipeline.scaleInterval = 2;
  auto scaledModel = makeModel(6);
  jit::TrainingStep scaled = jit::compileTraining(
      *scaledModel, classify, {batches[0].x, batches[0].y}, options);
  auto scale = [&] { return scaled.state("loss_scale").toVector()[0]; };
  auto updates = [&] {
    return scaled.state("optimizer.step").data<int64_t>()[0];
  };
  const std::vector<std::string> names = {"0.weight", "0.bias", "2.weight",
                                          "2.bias"};

  // Group 1 (calls 0-2), clean: the same values as without scaling.
  for (int i = 0; i < 3; ++i) {
    float a = plain.step({batches[i].x, batches[i].y});
    float b = scaled.step({batches[i].x, batches[i].y});
    EXPECT_NEAR(b, a, 1e-6f * std::max(1.0f, std::fabs(a))) << "call " << i;
    EXPECT_EQ(scale(), 1024.0f) << "call " << i;
  }
  for (const std::string& name : names)
    EXPECT_LT(relErr(scaled.state(name), plain.state(name)), 1e-6) << name;
  EXPECT_EQ(updates(), 1);

  // Group 2, an inf in its second micro-batch: the scale holds until the
  // group ends, then halves; nothing of the update changes.
  std::map<std::string, Tensor> before;
  for (const std::string& name : names)
    before[name] = scaled.state(name);
  Tensor momentum = scaled.state("0.weight.momentum_buffer");
  Tensor poisoned = batches[4].x.clone();
  poisoned.data<float>()[3] = std::numeric_limits<float>::infinity();
  scaled.step({batches[3].x, batches[3].y});
  scaled.step({poisoned, batches[4].y});
  EXPECT_EQ(scale(), 1024.0f) << "changed before the group's end";
  scaled.step({batches[5].x, batches[5].y});
  EXPECT_EQ(scale(), 512.0f);
  EXPECT_EQ(updates(), 1);
  for (const std::string& name : names)
    EXPECT_EQ(relErr(scaled.state(name), before[name]), 0) << name;
  EXPECT_EQ(relErr(scaled.state("0.weight.momentum_buffer"), momentum), 0);
  EXPECT_EQ(scaled.state("0.weight.grad_accum").toVector(),
            Tensor::zeros({16, 8}).toVector())
      << "the skipped group's sums were not restarted";

  // Groups 3 and 4, clean: they update, and the scale doubles at the end of
  // the second (interval 2), not after two micro-batches.
  for (int g = 0; g < 2; ++g)
    for (int i = 0; i < 3; ++i) {
      float loss = scaled.step({batches[i].x, batches[i].y});
      EXPECT_TRUE(std::isfinite(loss));
      EXPECT_EQ(scale(), g == 1 && i == 2 ? 1024.0f : 512.0f)
          << "group " << g + 3 << ", micro-batch " << i;
    }
  EXPECT_EQ(updates(), 3);
  EXPECT_GT(relErr(scaled.state("0.weight"), before["0.weight"]), 0);
}

/// Biases without weight decay (a parameter group with weight_decay 0):
/// eager excludeFromWeightDecay, compiled --no-weight-decay='*.bias'.
TEST(Training, NoWeightDecayGroupCompiledEqualsEager) {
  TrainPipelineOptions adamw;
  adamw.optimizer = "adamw";
  adamw.lr = 0.01;
  adamw.weightDecay = 0.5;
  adamw.noWeightDecay = {"*.bias"};
  // makeModel's parameters: 0.weight, 0.bias, 2.weight, 2.bias.
  expectCompiledEqualsEager(
      [](std::vector<Tensor> p) {
        auto opt = std::make_unique<optim::AdamW>(
            p, optim::AdamWOptions{0.01, 0.9, 0.999, 1e-8, 0.5});
        opt->excludeFromWeightDecay(p[1]);
        opt->excludeFromWeightDecay(p[3]);
        return opt;
      },
      adamw, 1e-4);
  TrainPipelineOptions sgd;
  sgd.optimizer = "sgd";
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  sgd.weightDecay = 0.5;
  sgd.noWeightDecay = {"*.bias"};
  expectCompiledEqualsEager(
      [](std::vector<Tensor> p) {
        auto opt = std::make_unique<optim::SGD>(
            p, optim::SGDOptions{0.1, 0.9, 0.0, 0.5, false});
        opt->excludeFromWeightDecay(p[1]);
        opt->excludeFromWeightDecay(p[3]);
        return opt;
      },
      sgd, 1e-4);
}

/// torch.optim.Adam (`--optimizer=adam`): the L2 term on the gradient,
/// compiled as eagerly, with and without weight decay; the biases excluded
/// from it as a parameter group.
TEST(Training, AdamWithL2WeightDecayCompiledEqualsEager) {
  for (double decay : {0.0, 0.2}) {
    SCOPED_TRACE("weight decay " + std::to_string(decay));
    TrainPipelineOptions adam;
    adam.optimizer = "adam";
    adam.lr = 0.01;
    adam.weightDecay = decay;
    if (decay > 0)
      adam.noWeightDecay = {"*.bias"};
    expectCompiledEqualsEager(
        [decay](std::vector<Tensor> p) {
          auto opt = std::make_unique<optim::Adam>(
              p, optim::AdamOptions{0.01, 0.9, 0.999, 1e-8, decay});
          if (decay > 0) {
            opt->excludeFromWeightDecay(p[1]);
            opt->excludeFromWeightDecay(p[3]);
          }
          return opt;
        },
        adam, 1e-4);
  }
}

TEST(Training, StateNamesFollowTheModel) {
  auto model = makeModel(1);
  std::vector<Batch> batches = makeBatches(1);
  jit::TrainingOptions options;
  options.pipeline.optimizer = "adamw";
  jit::TrainingStep step = jit::compileTraining(
      *model, classify, {batches[0].x, batches[0].y}, options);
  std::vector<std::string> names = step.stateNames();
  for (const char* expected :
       {"0.weight", "0.bias", "2.weight", "2.bias", "0.weight.exp_avg",
        "0.weight.exp_avg_sq", "optimizer.step"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end())
        << expected;
}

/// A gradient forced to inf skips the update (parameters and optimizer
/// state untouched), halves the scale, and training goes on; with
/// interval=3, three clean steps in a row double the scale.
TEST(Training, LossScalingSkipsNonFiniteStepsAndGrows) {
  auto model = makeModel(2);
  std::vector<Batch> batches = makeBatches(4);
  jit::TrainingOptions options;
  options.pipeline.optimizer = "sgd";
  options.pipeline.lr = 0.1;
  options.pipeline.momentum = 0.9;
  options.pipeline.lossScaling = "on";
  options.pipeline.scaleInit = 1024;
  options.pipeline.scaleInterval = 3;
  jit::TrainingStep step = jit::compileTraining(
      *model, classify, {batches[0].x, batches[0].y}, options);
  auto scale = [&] { return step.state("loss_scale").toVector()[0]; };
  EXPECT_EQ(scale(), 1024.0f);

  Tensor w0 = step.state("0.weight");
  Tensor poisoned = batches[0].x.clone();
  poisoned.data<float>()[3] = std::numeric_limits<float>::infinity();
  // The inf saturates tanh, so the loss stays finite, but the first layer's
  // weight gradient is 0 * inf = NaN: only the gradients are poisoned.
  step.step({poisoned, batches[0].y});
  EXPECT_EQ(relErr(step.state("0.weight"), w0), 0.0) << "update not skipped";
  EXPECT_EQ(step.state("optimizer.step").toVector()[0], 0.0f);
  EXPECT_EQ(step.state("0.weight.momentum_buffer").toVector(),
            Tensor::zeros({16, 8}).toVector());
  EXPECT_EQ(scale(), 512.0f);

  // Training goes on: clean steps update, and the third doubles the scale.
  for (int i = 1; i <= 3; ++i) {
    float loss = step.step({batches[i].x, batches[i].y});
    EXPECT_TRUE(std::isfinite(loss));
    EXPECT_EQ(scale(), i < 3 ? 512.0f : 1024.0f) << "after clean step " << i;
  }
  EXPECT_GT(relErr(step.state("0.weight"), w0), 0.0);
  EXPECT_EQ(step.state("optimizer.step").toVector()[0], 3.0f);
}

TEST(Training, ClearErrors) {
  auto model = makeModel(3);
  std::vector<Batch> batches = makeBatches(1);
  // A loss that is not a scalar.
  EXPECT_THROW(jit::compileTraining(
                   *model,
                   [](const Tensor& out, const std::vector<Tensor>&) {
                     return out;
                   },
                   {batches[0].x, batches[0].y}),
               Error);
  jit::TrainingStep step = jit::compileTraining(
      *model, classify, {batches[0].x, batches[0].y});
  // A batch of the wrong shape names the input.
  try {
    step.step({Tensor::zeros({5, 8}), batches[0].y});
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(step.state("nope"), Error);
}

// Issue 12 item 6: labels outside [0, classes) trained silently on an
// all-zero one-hot row (loss -0); PyTorch raises "Target 4 is out of
// bounds". Refused in eager mode and by the compiled step, naming the
// sample, the value and the class count; the step runs on after.
TEST(Training, OutOfRangeLabelsAreRefused) {
  auto model = makeModel(3);
  std::vector<Batch> batches = makeBatches(1);
  jit::TrainingStep step = jit::compileTraining(
      *model, classify, {batches[0].x, batches[0].y});
  for (int64_t bad : {int64_t(4), int64_t(-1), int64_t(1) << 40}) {
    Tensor y = batches[0].y.clone();
    y.data<int64_t>()[2] = bad;
    std::string expect = "sample 2 has class label " + std::to_string(bad) +
                         ", outside [0, 4) for 4 classes";
    EXPECT_EQ(errorOf([&] { step.step({batches[0].x, y}); }),
              "training step: batch tensor 1 (labels): " + expect);
    EXPECT_EQ(errorOf([&] { crossEntropy((*model)(batches[0].x), y); }),
              "cross_entropy: labels: " + expect);
  }
  float loss = step.step({batches[0].x, batches[0].y});
  EXPECT_GT(loss, 0.1f) << "a valid batch still trains";
}

/// An integer input compared with one id (GPT-2's sequence classifier
/// looks for its pad token: ids == 0) is no class-label input: ids of any
/// value run, where they were refused as labels of 1 class. The labels
/// are still recognized.
TEST(Training, AnIdInputComparedWithAPadIdIsNoLabelInput) {
  auto model = makeModel(3);
  std::vector<Batch> batches = makeBatches(1);
  Tensor ids = Tensor::empty({6, 5}, DType::I64);
  for (int64_t k = 0; k < ids.numel(); ++k)
    ids.data<int64_t>()[k] = k % 7 ? 10 + k : 0;
  auto lossFn = [](const Tensor& out, const std::vector<Tensor>& batch) {
    Tensor pads = cast(eq(batch[2], Tensor::scalar(0, DType::I64)), DType::F32);
    Tensor share = mean(pads, {0, 1});
    Tensor weight = share + 1.0;
    return crossEntropy(out, batch[1]) * weight;
  };
  jit::TrainingStep step =
      jit::compileTraining(*model, lossFn, {batches[0].x, batches[0].y, ids});
  EXPECT_GT(step.step({batches[0].x, batches[0].y, ids}), 0.1f);
  Tensor y = batches[0].y.clone();
  y.data<int64_t>()[1] = 9;
  EXPECT_NE(errorOf([&] {
              step.step({batches[0].x, y, ids});
            }).find("sample 1 has class label 9, outside [0, 4)"),
            std::string::npos);
}

} // namespace

namespace {

/// Trains `eager` (eager autograd and optim::AdamW) and `compiled` (the
/// compiled step), which start alike, on `batches` of (input, labels) with
/// cross-entropy: every step's loss and every final parameter agree to
/// 1e-5, and with `updateTol` each parameter's change over the steps too.
void expectAdamWTrainingAgrees(nn::Module& eager, nn::Module& compiled,
                               const std::vector<std::vector<Tensor>>& batches,
                               const optim::AdamWOptions& o,
                               double updateTol = 0) {
  std::map<std::string, Tensor> initial;
  std::vector<Tensor> params;
  for (auto& [name, p] : eager.namedParameters()) {
    initial[name] = p.clone();
    params.push_back(const_cast<Tensor&>(p).setRequiresGrad());
  }
  optim::AdamW opt(params, o);
  std::vector<float> eagerLosses = trainEagerly(eager, opt, batches);
  jit::TrainingOptions options;
  options.pipeline.optimizer = "adamw";
  options.pipeline.lr = o.lr;
  options.pipeline.beta1 = o.beta1;
  options.pipeline.beta2 = o.beta2;
  options.pipeline.eps = o.eps;
  options.pipeline.weightDecay = o.weightDecay;
  jit::TrainingStep step =
      jit::compileTraining(compiled, classify, batches[0], options);
  for (size_t i = 0; i < batches.size(); ++i) {
    float loss = step.step(batches[i]);
    EXPECT_NEAR(loss, eagerLosses[i], 1e-5 * std::max(1.0f, eagerLosses[i]))
        << "step " << i;
  }
  for (auto& [name, p] : eager.namedParameters()) {
    double err = relErr(step.state(name), p);
    EXPECT_LT(err, 1e-5) << name << ": rel err " << err;
    if (updateTol > 0) {
      const Tensor& p0 = initial.at(name);
      double u = relErr(step.state(name) - p0, p - p0);
      EXPECT_LT(u, updateTol) << name << ": the update's rel err " << u;
    }
  }
}

/// Token ids -> embedding -> mean over the sequence -> linear: a model
/// whose training needs gather's derivative.
class BagOfEmbeddings : public nn::Module {
public:
  BagOfEmbeddings() {
    table = registerModule("table", std::make_shared<nn::Embedding>(10, 8));
    head = registerModule("head", std::make_shared<nn::Linear>(8, 4));
  }
  Tensor forward(const Tensor& ids) override {
    return (*head)(mean((*table)(ids), {1}));
  }
  std::string typeName() const override { return "BagOfEmbeddings"; }
  std::shared_ptr<nn::Embedding> table;
  std::shared_ptr<nn::Linear> head;
};

TEST(Training, EmbeddingModelCompiledEqualsEager) {
  std::mt19937_64 gen(21);
  std::vector<std::vector<Tensor>> batches;
  for (int i = 0; i < 10; ++i) {
    Tensor ids = Tensor::empty({6, 5}, DType::I64);
    for (int k = 0; k < 30; ++k)
      ids.data<int64_t>()[k] = static_cast<int64_t>(gen() % 10);
    batches.push_back({ids, randomLabels(gen, 6, 4)});
  }
  manualSeed(8);
  BagOfEmbeddings eager;
  manualSeed(8);
  BagOfEmbeddings compiled;
  expectAdamWTrainingAgrees(eager, compiled, batches,
                            {0.05, 0.9, 0.999, 1e-8, 0.01});
}

/// A sequence classifier: a bidirectional LSTM over [B, T, 4], a GRU over
/// its outputs, and the GRU's last state to 4 classes.
class RecurrentClassifier : public nn::Module {
public:
  RecurrentClassifier() {
    lstm = registerModule(
        "lstm", std::make_shared<nn::LSTM>(4, 6, 1, true, /*batchFirst=*/true,
                                           0.0, /*bidirectional=*/true));
    gru =
        registerModule("gru", std::make_shared<nn::GRU>(12, 5, 1, true, true));
    head = registerModule("head", std::make_shared<nn::Linear>(5, 4));
  }
  Tensor forward(const Tensor& x) override {
    Tensor seq = lstm->run(x).output;            // [B, T, 12]
    return (*head)(squeeze(gru->run(seq).h, 0)); // [1, B, 5] -> [B, 4]
  }
  std::string typeName() const override { return "RecurrentClassifier"; }
  std::shared_ptr<nn::LSTM> lstm;
  std::shared_ptr<nn::GRU> gru;
  std::shared_ptr<nn::Linear> head;
};

/// Backpropagation through time, compiled (mc-autodiff of the unrolled
/// layers) against eager autograd: AdamW, 10 steps.
TEST(Training, RecurrentModelCompiledEqualsEager) {
  std::mt19937_64 gen(23);
  std::vector<std::vector<Tensor>> batches;
  for (int i = 0; i < 10; ++i) {
    Tensor x = Tensor::randn({6, 5, 4}, &gen);
    batches.push_back({x, randomLabels(gen, 6, 4)});
  }
  manualSeed(9);
  RecurrentClassifier eager;
  manualSeed(9);
  RecurrentClassifier compiled;
  expectAdamWTrainingAgrees(eager, compiled, batches,
                            {0.02, 0.9, 0.999, 1e-8, 0.01}, 1e-4);
}

} // namespace

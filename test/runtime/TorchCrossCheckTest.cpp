// The NN kernels against PyTorch (CPU): torch_crosscheck.py writes inputs and
// torch.nn.functional results as .npy; the kernels run on the same inputs and
// must agree to a relative error of 1e-5. Skipped (visibly) where
// /usr/bin/python3 cannot import torch.
#include "modelc/kernels.h"
#include "modelc/npy.h"

#include <cmath>
#include <cstdlib>
#include <gtest/gtest.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace mc::rt;

namespace {

class TorchCrossCheck : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/modelc-torch-XXXXXX";
    if (!mkdtemp(tmpl))
      return;
    dir_ = tmpl;
    std::string cmd = std::string(MODELC_TEST_PYTHON) + " " +
                      MODELC_TORCH_SCRIPT + " " + dir_ + " >/dev/null 2>&1";
    int rc = std::system(cmd.c_str());
    status_ = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }
  static void TearDownTestSuite() {
    if (!dir_.empty())
      std::system(("rm -rf " + dir_).c_str());
  }
  void SetUp() override {
    if (status_ == 77 || status_ == 127)
      GTEST_SKIP() << "no PyTorch: " << MODELC_TEST_PYTHON
                   << " cannot import torch";
    ASSERT_EQ(status_, 0) << "torch_crosscheck.py failed";
  }
  NpyArray load(const std::string &name, const std::string &what) {
    NpyArray a;
    Status st = readNpy(dir_ + "/" + name + "." + what + ".npy", &a);
    EXPECT_TRUE(st) << st.message();
    return a;
  }
  static ConstTensor view(const NpyArray &a) {
    return {a.dtype, a.shape, a.data.data()};
  }
  /// Runs `f` into a tensor shaped like the reference and compares.
  template <typename F> void check(const std::string &name, F f) {
    NpyArray ref = load(name, "ref");
    std::vector<float> y(size_t(numElements(ref.shape)), NAN);
    Status st = f(MutTensor{DType::F32, ref.shape, y.data()});
    ASSERT_TRUE(st) << name << ": " << st.message();
    const float *r = reinterpret_cast<const float *>(ref.data.data());
    double d = 0, n = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_FALSE(std::isnan(y[i]) || std::isnan(r[i])) << name << " " << i;
      d += (double(y[i]) - r[i]) * (double(y[i]) - r[i]);
      n += double(r[i]) * r[i];
    }
    double rel = n ? std::sqrt(d / n) : std::sqrt(d);
    EXPECT_LT(rel, 1e-5) << name;
    RecordProperty(name + "_rel_err", std::to_string(rel));
  }
  Status conv(const std::string &name, Conv2dParams p, const MutTensor &out) {
    NpyArray x = load(name, "x"), w = load(name, "w");
    return conv2d(view(x), view(w), p, out);
  }

  static std::string dir_;
  static int status_;
};
std::string TorchCrossCheck::dir_;
int TorchCrossCheck::status_ = -1;

Conv2dParams convP(int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t pb,
                   int64_t pr, int64_t dh, int64_t dw, int64_t g) {
  Conv2dParams p;
  p.strideH = sh, p.strideW = sw, p.padTop = pt, p.padLeft = pl,
  p.padBottom = pb, p.padRight = pr, p.dilationH = dh, p.dilationW = dw,
  p.groups = g;
  return p;
}
Pool2dParams poolP(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                   int64_t pw, int64_t dh = 1, int64_t dw = 1) {
  Pool2dParams p;
  p.kernelH = kh, p.kernelW = kw, p.strideH = sh, p.strideW = sw,
  p.padTop = p.padBottom = ph, p.padLeft = p.padRight = pw, p.dilationH = dh,
  p.dilationW = dw;
  return p;
}

} // namespace

TEST_F(TorchCrossCheck, Conv2d) {
  check("conv_groups", [&](const MutTensor &o) {
    return conv("conv_groups", convP(2, 1, 1, 2, 1, 2, 1, 2, 2), o);
  });
  check("conv_asym", [&](const MutTensor &o) {
    return conv("conv_asym", convP(2, 2, 2, 1, 1, 0, 1, 1, 1), o);
  });
  check("conv_dw", [&](const MutTensor &o) {
    return conv("conv_dw", convP(2, 2, 1, 1, 1, 1, 1, 1, 8), o);
  });
  check("conv_1x1", [&](const MutTensor &o) {
    return conv("conv_1x1", convP(1, 1, 0, 0, 0, 0, 1, 1, 1), o);
  });
  check("conv_stem", [&](const MutTensor &o) {
    return conv("conv_stem", convP(2, 2, 3, 3, 3, 3, 1, 1, 1), o);
  });
}

TEST_F(TorchCrossCheck, MaxPoolCeilMode) {
  check("maxpool_ceil", [&](const MutTensor &o) {
    return maxPool2d(view(load("maxpool_ceil", "x")), poolP(3, 3, 2, 2, 1, 1),
                     o);
  });
  check("maxpool_dil", [&](const MutTensor &o) {
    return maxPool2d(view(load("maxpool_dil", "x")),
                     poolP(3, 2, 2, 1, 1, 1, 2, 3), o);
  });
}

TEST_F(TorchCrossCheck, AvgPoolCeilModeBothPadModes) {
  check("avgpool_excl", [&](const MutTensor &o) {
    return avgPool2d(view(load("avgpool_excl", "x")), poolP(3, 3, 2, 2, 1, 1),
                     false, o);
  });
  check("avgpool_incl", [&](const MutTensor &o) {
    return avgPool2d(view(load("avgpool_excl", "x")), poolP(3, 3, 2, 2, 1, 1),
                     true, o);
  });
  check("avgpool_ceil_nopad", [&](const MutTensor &o) {
    return avgPool2d(view(load("avgpool_ceil_nopad", "x")),
                     poolP(3, 3, 2, 2, 0, 0), false, o);
  });
}

TEST_F(TorchCrossCheck, BatchAndLayerNorm) {
  check("batch_norm", [&](const MutTensor &o) {
    const char *n = "batch_norm";
    NpyArray x = load(n, "x"), s = load(n, "scale"), b = load(n, "offset"),
             m = load(n, "mean"), v = load(n, "var");
    return batchNorm(view(x), view(s), view(b), view(m), view(v), 1e-5, 1, o);
  });
  check("layer_norm", [&](const MutTensor &o) {
    NpyArray x = load("layer_norm", "x"), g = load("layer_norm", "gamma"),
             b = load("layer_norm", "beta");
    return layerNorm(view(x), view(g), view(b), 2, 1e-5, o);
  });
  check("layer_norm2", [&](const MutTensor &o) {
    NpyArray x = load("layer_norm2", "x"), g = load("layer_norm2", "gamma"),
             b = load("layer_norm2", "beta");
    return layerNorm(view(x), view(g), view(b), -2, 1e-6, o);
  });
}

TEST_F(TorchCrossCheck, GeluErfAndLogSoftmax) {
  struct Case {
    const char *name;
    OpId op;
    bool tanh; // Gelu's tanh approximation
  };
  for (Case c : {Case{"gelu_tanh", OpId::Gelu, true},
                 Case{"gelu", OpId::Gelu, false},
                 Case{"erf", OpId::Erf, false}})
    check(c.name, [&, c](const MutTensor &o) {
      return unary(c.op, view(load(c.name, "x")), o, c.tanh);
    });
  check("log_softmax", [&](const MutTensor &o) {
    return logSoftmax(view(load("log_softmax", "x")), -1, o);
  });
  check("log_softmax1", [&](const MutTensor &o) {
    return logSoftmax(view(load("log_softmax1", "x")), 1, o);
  });
}

// CPU kernels of CNNs and transformers: conv2d (im2col + sgemm, depthwise
// direct), max/avg pooling, batch and layer norm, log_softmax. NCHW, f32.
// Loops run over contiguous rows so the compiler vectorizes them.
#include "KernelUtil.h"
#include "VecMath.h"
#include "modelc/kernels.h"
#include "modelc/shapes.h"

#include <algorithm>
#include <cblas.h>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace mc::rt {

using detail::checkRank;
using detail::kParallelGrain;
using detail::normalizeAxis;
using detail::parallelFor;
using detail::typeString;
using detail::unsupportedDType;

namespace {

std::string str(int64_t v) { return std::to_string(v); }

/// ceil(a / b) for b > 0, any sign of a.
int64_t ceilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}
/// floor(a / b) for b > 0, any sign of a.
int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/// The output positions o in [0, n) whose input position o * stride + off
/// lies in [0, size): [*lo, *hi), with 0 <= *lo <= *hi <= n (empty when
/// *lo == *hi). Both ends stay inside [0, n) even when padding and dilation
/// put a whole tap outside the input (callers size zero fills with them).
void validOut(int64_t n, int64_t stride, int64_t off, int64_t size,
              int64_t *lo, int64_t *hi) {
  *lo = std::min<int64_t>(n, std::max<int64_t>(0, ceilDiv(-off, stride)));
  *hi = std::min<int64_t>(n, floorDiv(size - 1 - off, stride) + 1);
  if (*hi < *lo)
    *hi = *lo;
}

/// The window taps k in [0, kSize) whose position start + k * dil lies in
/// [lo, hi): their count.
int64_t tapsInside(int64_t start, int64_t dil, int64_t kSize, int64_t lo,
                   int64_t hi) {
  int64_t kmin = std::max<int64_t>(0, ceilDiv(lo - start, dil));
  int64_t kmax = std::min<int64_t>(kSize - 1, floorDiv(hi - 1 - start, dil));
  return kmax >= kmin ? kmax - kmin + 1 : 0;
}

struct ConvDims {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups, cg, og;
  bool depthwise, pointwise;
};

Status checkConv(const ConstTensor &input, const ConstTensor &weight,
                 const Conv2dParams &p, const MutTensor &out, ConvDims *d) {
  const char *op = "conv2d";
  MC_RETURN_IF_ERROR(checkRank(op, "input", input.shape));
  MC_RETURN_IF_ERROR(checkRank(op, "weight", weight.shape));
  MC_RETURN_IF_ERROR(checkRank(op, "result", out.shape));
  for (DType t : {input.dtype, weight.dtype, out.dtype})
    if (t != DType::F32)
      return unsupportedDType(op, t, "f32");
  if (input.shape.size() != 4 || weight.shape.size() != 4 ||
      out.shape.size() != 4)
    return Status::error("conv2d: input " + shapeString(input.shape) +
                         ", weight " + shapeString(weight.shape) +
                         " and result " + shapeString(out.shape) +
                         " must all be rank 4 (NCHW, OIHW)");
  Shape expect;
  Status rule = shapes::conv2d(
      input.shape, weight.shape, {p.strideH, p.strideW},
      {p.padTop, p.padLeft, p.padBottom, p.padRight},
      {p.dilationH, p.dilationW}, p.groups, &expect);
  if (!rule)
    return Status::error("conv2d: " + rule.message());
  if (out.shape != expect)
    return Status::error("conv2d: result shape " + shapeString(out.shape) +
                         ", expected " + shapeString(expect));
  d->n = input.shape[0];
  d->c = input.shape[1];
  d->h = input.shape[2];
  d->w = input.shape[3];
  d->o = weight.shape[0];
  d->kh = weight.shape[2];
  d->kw = weight.shape[3];
  d->groups = p.groups;
  d->cg = d->c / p.groups;
  d->og = d->o / p.groups;
  d->oh = expect[2];
  d->ow = expect[3];
  if (d->cg * d->kh * d->kw > INT_MAX || d->oh * d->ow > INT_MAX ||
      d->og > INT_MAX)
    return Status::error("conv2d: a dimension exceeds the BLAS int range");
  d->depthwise = p.groups == d->c && d->o == d->c;
  d->pointwise = d->kh == 1 && d->kw == 1 && p.strideH == 1 &&
                 p.strideW == 1 && p.padTop == 0 && p.padLeft == 0 &&
                 p.padBottom == 0 && p.padRight == 0;
  return Status::ok();
}

/// col[(c*KH + kh)*KW + kw][oh*OW + ow] = x[c][ih][iw] (0 outside) for one
/// image and group, rows `ld` floats apart (OH*OW, or N*OH*OW when the
/// images of a batch sit side by side); x points at the group's first
/// channel. Every element is written once (no separate zero fill);
/// channels are split among threads.
void im2col(const float *x, const ConvDims &d, const Conv2dParams &p,
            float *col, int64_t ld) {
  int64_t plane = d.h * d.w;
  int64_t perChannel = d.kh * d.kw * d.oh * d.ow;
  parallelFor(d.cg, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(perChannel, 1)),
              [&](int64_t cb, int64_t ce) {
  for (int64_t c = cb; c < ce; ++c) {
    const float *xc = x + c * plane;
    for (int64_t kh = 0; kh < d.kh; ++kh)
      for (int64_t kw = 0; kw < d.kw; ++kw) {
        float *row = col + ((c * d.kh + kh) * d.kw + kw) * ld;
        int64_t offH = kh * p.dilationH - p.padTop;
        int64_t offW = kw * p.dilationW - p.padLeft;
        int64_t ohLo, ohHi, owLo, owHi;
        validOut(d.oh, p.strideH, offH, d.h, &ohLo, &ohHi);
        validOut(d.ow, p.strideW, offW, d.w, &owLo, &owHi);
        std::memset(row, 0, size_t(ohLo * d.ow) * sizeof(float));
        for (int64_t oh = ohLo; oh < ohHi; ++oh) {
          float *r = row + oh * d.ow;
          const float *xr = xc + (oh * p.strideH + offH) * d.w + offW;
          for (int64_t ow = 0; ow < owLo; ++ow)
            r[ow] = 0;
          if (p.strideW == 1) {
            std::memcpy(r + owLo, xr + owLo,
                        size_t(owHi - owLo) * sizeof(float));
          } else {
            for (int64_t ow = owLo; ow < owHi; ++ow)
              r[ow] = xr[ow * p.strideW];
          }
          for (int64_t ow = owHi; ow < d.ow; ++ow)
            r[ow] = 0;
        }
        std::memset(row + ohHi * d.ow, 0,
                    size_t((d.oh - ohHi) * d.ow) * sizeof(float));
      }
  }
  });
}

/// groups == C == O: one KHxKW filter per channel, accumulated row by row.
void depthwise(const float *x, const float *wt, const ConvDims &d,
               const Conv2dParams &p, float *y) {
  int64_t plane = d.h * d.w, pOut = d.oh * d.ow;
  int64_t perPlane = std::max<int64_t>(1, pOut * d.kh * d.kw);
  parallelFor(d.n * d.c, std::max<int64_t>(1, kParallelGrain / perPlane),
              [&](int64_t pb, int64_t pe) {
  for (int64_t nc = pb; nc < pe; ++nc) {
    const float *xc = x + nc * plane;
    const float *wc = wt + (nc % d.c) * d.kh * d.kw;
    float *yc = y + nc * pOut;
    std::memset(yc, 0, size_t(pOut) * sizeof(float));
    for (int64_t oh = 0; oh < d.oh; ++oh) {
      float *yr = yc + oh * d.ow;
      for (int64_t kh = 0; kh < d.kh; ++kh) {
        int64_t ih = oh * p.strideH - p.padTop + kh * p.dilationH;
        if (ih < 0 || ih >= d.h)
          continue;
        const float *xr = xc + ih * d.w;
        for (int64_t kw = 0; kw < d.kw; ++kw) {
          float wv = wc[kh * d.kw + kw];
          int64_t offW = kw * p.dilationW - p.padLeft;
          int64_t lo, hi;
          validOut(d.ow, p.strideW, offW, d.w, &lo, &hi);
          const float *xs = xr + offW;
          if (p.strideW == 1)
            for (int64_t ow = lo; ow < hi; ++ow)
              yr[ow] += wv * xs[ow];
          else
            for (int64_t ow = lo; ow < hi; ++ow)
              yr[ow] += wv * xs[ow * p.strideW];
        }
      }
    }
  }
  });
}

/// How conv2d computes a shape (a function of the shapes alone, so the
/// workspace size and the kernel agree):
///  - Depthwise: direct loops, planes split among threads;
///  - PerImage: per image and group, im2col into [K, P] (skipped for 1x1
///    stride-1 unpadded convs: the input already is that matrix) and one
///    sgemm [Og, K] x [K, P];
///  - Batched (groups == 1, several images, small P = OH*OW, not 1x1
///    stride 1 unpadded, which needs no im2col at all): im2col of all
///    images side by side into [K, N*P], one sgemm [O, K] x [K, N*P] into
///    scratch, then a copy to [N, O, P]. One large sgemm instead of N small
///    ones: better blocking and both threads busy on 7x7 and 14x14 maps.
enum class ConvAlgo { Depthwise, PerImage, Batched };

/// Batched when every image's product is small (BLAS does well from about
/// this many columns on) and the images together are not huge.
constexpr int64_t kBatchedMaxP = 256;

ConvAlgo convAlgo(const ConvDims &d) {
  if (d.depthwise)
    return ConvAlgo::Depthwise;
  if (d.groups == 1 && d.n > 1 && d.oh * d.ow <= kBatchedMaxP && !d.pointwise)
    return ConvAlgo::Batched;
  return ConvAlgo::PerImage;
}

/// Scratch floats of an algorithm (0: none).
int64_t convWorkspace(const ConvDims &d, ConvAlgo a) {
  int64_t kDim = d.cg * d.kh * d.kw, pOut = d.oh * d.ow;
  switch (a) {
  case ConvAlgo::Depthwise:
    return 0;
  case ConvAlgo::PerImage:
    return d.pointwise ? 0 : kDim * pOut;
  case ConvAlgo::Batched:
    return (kDim + d.o) * d.n * pOut;
  }
  return 0;
}

} // namespace

namespace {
Shape channelsFirst(const Shape &s) { return {s[0], s[3], s[1], s[2]}; }
} // namespace

size_t conv2dWorkspaceSize(const Shape &input, const Shape &weight,
                           const Shape &out, const Conv2dParams &params) {
  if (params.channelsLast) {
    // The reference runs NCHW: input and result transposed in the
    // workspace, then the NCHW convolution's own scratch.
    if (input.size() != 4 || out.size() != 4)
      return 0;
    Conv2dParams nchw = params;
    nchw.channelsLast = false;
    return size_t(numElements(input) + numElements(out)) +
           conv2dWorkspaceSize(channelsFirst(input), weight, channelsFirst(out),
                               nchw);
  }
  ConvDims d;
  ConstTensor in{DType::F32, input, nullptr}, wt{DType::F32, weight, nullptr};
  MutTensor o{DType::F32, out, nullptr};
  if (!checkConv(in, wt, params, o, &d))
    return 0;
  return size_t(convWorkspace(d, convAlgo(d)));
}

Status conv2d(const ConstTensor &input, const ConstTensor &weight,
              const Conv2dParams &params, const MutTensor &out,
              float *workspace, size_t workspaceFloats) {
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&input, &weight};
    Status st = detail::viaF32(
        "conv2d", ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return conv2d(in[0], in[1], params, o, workspace, workspaceFloats); });
    if (narrow || !st)
      return st;
  }
  if (params.channelsLast) {
    if (input.shape.size() != 4 || out.shape.size() != 4 ||
        input.dtype != DType::F32 || out.dtype != DType::F32)
      return Status::error("conv2d: channels_last input " +
                           shapeString(input.shape) + " and result " +
                           shapeString(out.shape) + " must be f32 rank 4");
    Shape expect;
    Status rule = shapes::conv2d(
        input.shape, weight.shape, {params.strideH, params.strideW},
        {params.padTop, params.padLeft, params.padBottom, params.padRight},
        {params.dilationH, params.dilationW}, params.groups, &expect, true);
    if (!rule)
      return Status::error("conv2d: " + rule.message());
    if (out.shape != expect)
      return Status::error("conv2d: result shape " + shapeString(out.shape) +
                           ", expected " + shapeString(expect) +
                           " (channels_last)");
    size_t inFloats = size_t(numElements(input.shape)),
           outFloats = size_t(numElements(out.shape));
    if (workspaceFloats < inFloats + outFloats)
      return Status::error(
          "conv2d: workspace of " + std::to_string(workspaceFloats) +
          " floats is smaller than the channels_last copies' " +
          std::to_string(inFloats + outFloats));
    Conv2dParams nchw = params;
    nchw.channelsLast = false;
    ConstTensor inT{DType::F32, channelsFirst(input.shape), workspace};
    MutTensor outT{DType::F32, channelsFirst(out.shape), workspace + inFloats};
    MC_RETURN_IF_ERROR(transpose(input, {0, 3, 1, 2},
                                 MutTensor{DType::F32, inT.shape, workspace}));
    MC_RETURN_IF_ERROR(conv2d(inT, weight, nchw, outT,
                              workspace + inFloats + outFloats,
                              workspaceFloats - inFloats - outFloats));
    return transpose(ConstTensor{DType::F32, outT.shape, outT.data},
                     {0, 2, 3, 1}, out);
  }
  ConvDims d;
  MC_RETURN_IF_ERROR(checkConv(input, weight, params, out, &d));
  const float *x = static_cast<const float *>(input.data);
  const float *wt = static_cast<const float *>(weight.data);
  float *y = static_cast<float *>(out.data);
  int64_t pOut = d.oh * d.ow, kDim = d.cg * d.kh * d.kw;
  if (numElements(out.shape) == 0)
    return Status::ok();
  if (kDim == 0) { // no input channels: an empty sum
    std::memset(y, 0, size_t(numElements(out.shape)) * sizeof(float));
    return Status::ok();
  }
  ConvAlgo algo = convAlgo(d);
  if (algo == ConvAlgo::Depthwise) {
    depthwise(x, wt, d, params, y);
    return Status::ok();
  }
  // A caller's workspace sized for another plan (smaller) still works: the
  // batched plan falls back to per-image.
  if (algo == ConvAlgo::Batched &&
      workspaceFloats < size_t(convWorkspace(d, algo)))
    algo = ConvAlgo::PerImage;
  if (workspaceFloats < size_t(convWorkspace(d, algo)))
    return Status::error("conv2d: workspace of " +
                         std::to_string(workspaceFloats) +
                         " floats is smaller than the " +
                         str(convWorkspace(d, algo)) + " im2col needs");
  if (algo == ConvAlgo::Batched) {
    int64_t cols = d.n * pOut;
    if (cols > INT_MAX)
      algo = ConvAlgo::PerImage;
    else {
      float *col = workspace, *tmp = workspace + kDim * cols;
      for (int64_t n = 0; n < d.n; ++n)
        im2col(x + n * d.c * d.h * d.w, d, params, col + n * pOut, cols);
      detail::sgemm(false, false, d.o, cols, kDim, wt, kDim, col, cols, tmp,
                    cols);
      // tmp [O, N, P] -> y [N, O, P]
      parallelFor(d.n * d.o, std::max<int64_t>(1, kParallelGrain / pOut),
                  [&](int64_t b, int64_t e) {
                    for (int64_t no = b; no < e; ++no) {
                      int64_t n = no / d.o, o = no % d.o;
                      std::memcpy(y + no * pOut, tmp + (o * d.n + n) * pOut,
                                  size_t(pOut) * sizeof(float));
                    }
                  });
      return Status::ok();
    }
  }
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t g = 0; g < d.groups; ++g) {
      const float *xg = x + (n * d.c + g * d.cg) * d.h * d.w;
      const float *colm = xg; // 1x1, stride 1, unpadded: [Cg, H*W] already
      if (!d.pointwise) {
        im2col(xg, d, params, workspace, pOut);
        colm = workspace;
      }
      // y[n, g*Og:(g+1)*Og] [Og, P] = W_g [Og, K] x col [K, P]
      detail::sgemm(false, false, d.og, pOut, kDim, wt + g * d.og * kDim,
                    kDim, colm, pOut, y + (n * d.o + g * d.og) * pOut, pOut);
    }
  return Status::ok();
}

Status conv2d(const ConstTensor &input, const ConstTensor &weight,
              const Conv2dParams &params, const MutTensor &out) {
  std::vector<float> ws(
      conv2dWorkspaceSize(input.shape, weight.shape, out.shape, params));
  return conv2d(input, weight, params, out, ws.data(), ws.size());
}

namespace {

Status checkPool(const char *op, const ConstTensor &input,
                 const Pool2dParams &p, const MutTensor &out) {
  if (p.channelsLast) { // the NCHW checks on the NCHW reading of the shapes
    if (input.shape.size() != 4 || out.shape.size() != 4)
      return Status::error(std::string(op) + ": input " +
                           shapeString(input.shape) + " and result " +
                           shapeString(out.shape) +
                           " must be rank 4 (NHWC, channels_last)");
    Pool2dParams q = p;
    q.channelsLast = false;
    return checkPool(
        op, ConstTensor{input.dtype, channelsFirst(input.shape), input.data}, q,
        MutTensor{out.dtype, channelsFirst(out.shape), out.data});
  }
  MC_RETURN_IF_ERROR(checkRank(op, "input", input.shape));
  MC_RETURN_IF_ERROR(checkRank(op, "result", out.shape));
  if (input.dtype != DType::F32 || out.dtype != DType::F32)
    return unsupportedDType(op, input.dtype != DType::F32 ? input.dtype
                                                          : out.dtype,
                            "f32");
  if (input.shape.size() != 4 || out.shape.size() != 4 ||
      out.shape[0] != input.shape[0] || out.shape[1] != input.shape[1])
    return Status::error(std::string(op) + ": input " +
                         shapeString(input.shape) + " and result " +
                         shapeString(out.shape) +
                         " must be rank 4 (NCHW) with equal N and C");
  if (p.kernelH < 1 || p.kernelW < 1 || p.strideH < 1 || p.strideW < 1 ||
      p.dilationH < 1 || p.dilationW < 1 || p.padTop < 0 || p.padLeft < 0 ||
      p.padBottom < 0 || p.padRight < 0)
    return Status::error(std::string(op) +
                         ": kernel, strides and dilations must be >= 1 and "
                         "paddings >= 0");
  // ceil_mode is the caller's choice, so either size of the shape library's
  // formula is fine (the kernel itself reads only positions inside the
  // input, so it does not hold callers to the rule's padding limit).
  int64_t kernel[2] = {p.kernelH, p.kernelW}, stride[2] = {p.strideH, p.strideW},
          dil[2] = {p.dilationH, p.dilationW};
  int64_t padBegin[2] = {p.padTop, p.padLeft},
          padEnd[2] = {p.padBottom, p.padRight};
  for (int i = 0; i < 2; ++i) {
    int64_t in = input.shape[2 + i], got = out.shape[2 + i];
    int64_t lo = shapes::pooledSize(in, kernel[i], stride[i], padBegin[i],
                                    padEnd[i], dil[i], false);
    int64_t hi = shapes::pooledSize(in, kernel[i], stride[i], padBegin[i],
                                    padEnd[i], dil[i], true);
    if (lo < 1)
      return Status::error(std::string(op) + ": the window " +
                           shapes::str({kernel[0], kernel[1]}) +
                           " does not fit the padded input " +
                           shapeString(input.shape));
    if (got != lo && got != hi)
      return Status::error(std::string(op) + ": result " +
                           shapeString(out.shape) + " has " +
                           (i ? "width " : "height ") + str(got) +
                           ", expected " + str(lo) +
                           (hi != lo ? " (or " + str(hi) + " in ceil mode)"
                                     : std::string()));
  }
  return Status::ok();
}

/// Pooling over NHWC (checked by checkPool): each output position's C
/// values are one contiguous vector, updated by each tap's contiguous
/// input vector, so the channel loop vectorizes. Taps are visited in the
/// NCHW loops' order (kh, then kw), so sums round alike.
template <bool Max>
void poolChannelsLast(const ConstTensor &input, const Pool2dParams &p,
                      bool countIncludePad, const MutTensor &out) {
  int64_t n = input.shape[0], h = input.shape[1], w = input.shape[2],
          c = input.shape[3], oh = out.shape[1], ow = out.shape[2];
  const float *x = static_cast<const float *>(input.data);
  float *y = static_cast<float *>(out.data);
  const float ninf = -std::numeric_limits<float>::infinity();
  int64_t hLo = countIncludePad ? -p.padTop : 0,
          hHi = countIncludePad ? h + p.padBottom : h;
  int64_t wLo = countIncludePad ? -p.padLeft : 0,
          wHi = countIncludePad ? w + p.padRight : w;
  int64_t perRow = std::max<int64_t>(1, ow * c * p.kernelH * p.kernelW);
  parallelFor(
      n * oh, std::max<int64_t>(1, kParallelGrain / perRow),
      [&](int64_t rb, int64_t re) {
        for (int64_t row = rb; row < re; ++row) {
          int64_t b = row / oh, i = row % oh, hs = i * p.strideH - p.padTop;
          for (int64_t j = 0; j < ow; ++j) {
            float *yv = y + (row * ow + j) * c;
            for (int64_t k = 0; k < c; ++k)
              yv[k] = Max ? ninf : 0.0f;
            int64_t ws = j * p.strideW - p.padLeft;
            for (int64_t kh = 0; kh < p.kernelH; ++kh) {
              int64_t ih = hs + kh * p.dilationH;
              if (ih < 0 || ih >= h)
                continue;
              for (int64_t kw = 0; kw < p.kernelW; ++kw) {
                int64_t iw = ws + kw * p.dilationW;
                if (iw < 0 || iw >= w)
                  continue;
                const float *xv = x + ((b * h + ih) * w + iw) * c;
                if (Max) // NaN propagates (as PyTorch): v != v is NaN.
                  for (int64_t k = 0; k < c; ++k)
                    yv[k] = (xv[k] > yv[k] || xv[k] != xv[k]) ? xv[k] : yv[k];
                else
                  for (int64_t k = 0; k < c; ++k)
                    yv[k] += xv[k];
              }
            }
            if (!Max) {
              int64_t cnt = tapsInside(hs, p.dilationH, p.kernelH, hLo, hHi) *
                            tapsInside(ws, p.dilationW, p.kernelW, wLo, wHi);
              for (int64_t k = 0; k < c; ++k)
                yv[k] = cnt ? yv[k] / float(cnt) : 0.0f;
            }
          }
        }
      });
}

} // namespace

Status maxPool2d(const ConstTensor &input, const Pool2dParams &p,
                 const MutTensor &out) {
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&input};
    Status st = detail::viaF32(
        "max_pool2d", ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return maxPool2d(in[0], p, o); });
    if (narrow || !st)
      return st;
  }
  MC_RETURN_IF_ERROR(checkPool("max_pool2d", input, p, out));
  if (p.channelsLast) {
    poolChannelsLast<true>(input, p, false, out);
    return Status::ok();
  }
  int64_t nc = input.shape[0] * input.shape[1], h = input.shape[2],
          w = input.shape[3], oh = out.shape[2], ow = out.shape[3];
  const float *x = static_cast<const float *>(input.data);
  float *y = static_cast<float *>(out.data);
  const float ninf = -std::numeric_limits<float>::infinity();
  int64_t perPlane = std::max<int64_t>(1, oh * ow * p.kernelH * p.kernelW);
  parallelFor(nc, std::max<int64_t>(1, kParallelGrain / perPlane),
              [&](int64_t cb, int64_t ce) {
  for (int64_t c = cb; c < ce; ++c) {
    const float *xc = x + c * h * w;
    float *yc = y + c * oh * ow;
    for (int64_t i = 0; i < oh; ++i) {
      float *yr = yc + i * ow;
      for (int64_t j = 0; j < ow; ++j)
        yr[j] = ninf;
      for (int64_t kh = 0; kh < p.kernelH; ++kh) {
        int64_t ih = i * p.strideH - p.padTop + kh * p.dilationH;
        if (ih < 0 || ih >= h)
          continue;
        const float *xr = xc + ih * w;
        for (int64_t kw = 0; kw < p.kernelW; ++kw) {
          int64_t offW = kw * p.dilationW - p.padLeft, lo, hi;
          validOut(ow, p.strideW, offW, w, &lo, &hi);
          const float *xs = xr + offW;
          // NaN propagates (as PyTorch): v != v is NaN.
          for (int64_t j = lo; j < hi; ++j) {
            float v = xs[j * p.strideW];
            yr[j] = (v > yr[j] || v != v) ? v : yr[j];
          }
        }
      }
    }
  }
  });
  return Status::ok();
}

Status avgPool2d(const ConstTensor &input, const Pool2dParams &p,
                 bool countIncludePad, const MutTensor &out) {
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&input};
    Status st = detail::viaF32(
        "avg_pool2d", ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return avgPool2d(in[0], p, countIncludePad, o); });
    if (narrow || !st)
      return st;
  }
  MC_RETURN_IF_ERROR(checkPool("avg_pool2d", input, p, out));
  if (p.channelsLast) {
    poolChannelsLast<false>(input, p, countIncludePad, out);
    return Status::ok();
  }
  int64_t nc = input.shape[0] * input.shape[1], h = input.shape[2],
          w = input.shape[3], oh = out.shape[2], ow = out.shape[3];
  const float *x = static_cast<const float *>(input.data);
  float *y = static_cast<float *>(out.data);
  // Divisor of a window: its taps inside the padded input (count_include_pad)
  // or inside the input; separable in h and w.
  int64_t hLo = countIncludePad ? -p.padTop : 0,
          hHi = countIncludePad ? h + p.padBottom : h;
  int64_t wLo = countIncludePad ? -p.padLeft : 0,
          wHi = countIncludePad ? w + p.padRight : w;
  int64_t perPlane = std::max<int64_t>(1, oh * ow * p.kernelH * p.kernelW);
  parallelFor(nc, std::max<int64_t>(1, kParallelGrain / perPlane),
              [&](int64_t cb, int64_t ce) {
  for (int64_t c = cb; c < ce; ++c) {
    const float *xc = x + c * h * w;
    float *yc = y + c * oh * ow;
    for (int64_t i = 0; i < oh; ++i) {
      float *yr = yc + i * ow;
      for (int64_t j = 0; j < ow; ++j)
        yr[j] = 0;
      int64_t hs = i * p.strideH - p.padTop;
      for (int64_t kh = 0; kh < p.kernelH; ++kh) {
        int64_t ih = hs + kh * p.dilationH;
        if (ih < 0 || ih >= h)
          continue;
        const float *xr = xc + ih * w;
        for (int64_t kw = 0; kw < p.kernelW; ++kw) {
          int64_t offW = kw * p.dilationW - p.padLeft, lo, hi;
          validOut(ow, p.strideW, offW, w, &lo, &hi);
          const float *xs = xr + offW;
          for (int64_t j = lo; j < hi; ++j)
            yr[j] += xs[j * p.strideW];
        }
      }
      int64_t cntH = tapsInside(hs, p.dilationH, p.kernelH, hLo, hHi);
      for (int64_t j = 0; j < ow; ++j) {
        int64_t ws = j * p.strideW - p.padLeft;
        int64_t cnt = cntH * tapsInside(ws, p.dilationW, p.kernelW, wLo, wHi);
        // A window with no tap inside (only possible with paddings larger
        // than the kernel) gives 0, as PyTorch.
        yr[j] = cnt ? yr[j] / float(cnt) : 0.0f;
      }
    }
  }
  });
  return Status::ok();
}

/// The checks batch_norm and layer_norm share: an f32 operand of a
/// supported rank, a result of its type and shape, and an axis in range
/// (normalized in place).
static Status checkNormOperands(const char *op, const ConstTensor &x,
                                const MutTensor &out, int64_t &axis) {
  MC_RETURN_IF_ERROR(checkRank(op, "operand", x.shape));
  MC_RETURN_IF_ERROR(detail::sameTypeAndShape(op, "result", x.dtype, x.shape,
                                              out.dtype, out.shape));
  if (x.dtype != DType::F32)
    return unsupportedDType(op, x.dtype, "f32");
  if (!normalizeAxis(axis, x.shape.size()))
    return Status::error(std::string(op) + ": axis " + str(axis) +
                         " is out of range for operand " +
                         shapeString(x.shape));
  return Status::ok();
}

Status batchNorm(const ConstTensor &x, const ConstTensor &scale,
                 const ConstTensor &offset, const ConstTensor &mean,
                 const ConstTensor &variance, double epsilon, int64_t axis,
                 const MutTensor &out) {
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&x, &scale, &offset, &mean, &variance};
    Status st = detail::viaF32(
        "batch_norm", ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return batchNorm(in[0], in[1], in[2], in[3], in[4], epsilon, axis, o); });
    if (narrow || !st)
      return st;
  }
  const char *op = "batch_norm";
  MC_RETURN_IF_ERROR(checkNormOperands(op, x, out, axis));
  int64_t c = x.shape[axis];
  const char *names[] = {"scale", "offset", "mean", "variance"};
  const ConstTensor *params[] = {&scale, &offset, &mean, &variance};
  for (int k = 0; k < 4; ++k)
    if (params[k]->dtype != DType::F32 || params[k]->shape != Shape{c})
      return Status::error(std::string("batch_norm: ") + names[k] + " " +
                           typeString(params[k]->dtype, params[k]->shape) +
                           " is not f32[" + str(c) + "]");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (size_t d = size_t(axis) + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  const float *px = static_cast<const float *>(x.data);
  const float *ps = static_cast<const float *>(scale.data);
  const float *pb = static_cast<const float *>(offset.data);
  const float *pm = static_cast<const float *>(mean.data);
  const float *pv = static_cast<const float *>(variance.data);
  float *py = static_cast<float *>(out.data);
  parallelFor(outer * c, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1)),
              [&](int64_t b0, int64_t e0) {
    for (int64_t ok = b0; ok < e0; ++ok) {
      int64_t k = ok % c;
      float a = float(double(ps[k]) / std::sqrt(double(pv[k]) + epsilon));
      vec::scaleShiftF32(px + ok * inner, pm[k], a, pb[k], py + ok * inner,
                         inner);
    }
  });
  return Status::ok();
}

Status layerNorm(const ConstTensor &x, const ConstTensor &gamma,
                 const ConstTensor &beta, int64_t axis, double epsilon,
                 const MutTensor &out) {
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&x, &gamma, &beta};
    Status st = detail::viaF32(
        "layer_norm", ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return layerNorm(in[0], in[1], in[2], axis, epsilon, o); });
    if (narrow || !st)
      return st;
  }
  const char *op = "layer_norm";
  MC_RETURN_IF_ERROR(checkNormOperands(op, x, out, axis));
  Shape norm(x.shape.begin() + axis, x.shape.end());
  for (const ConstTensor *t : {&gamma, &beta})
    if (t->dtype != DType::F32 || t->shape != norm)
      return Status::error(std::string("layer_norm: ") +
                           (t == &gamma ? "gamma " : "beta ") +
                           typeString(t->dtype, t->shape) + " is not " +
                           typeString(DType::F32, norm) +
                           " (the normalized dims)");
  int64_t rows = 1, len = numElements(norm);
  for (int64_t d = 0; d < axis; ++d)
    rows *= x.shape[d];
  if (len == 0)
    return Status::ok();
  const float *px = static_cast<const float *>(x.data);
  const float *pg = static_cast<const float *>(gamma.data);
  const float *pb = static_cast<const float *>(beta.data);
  float *py = static_cast<float *>(out.data);
  // Rows split among threads; each row is one vec::layerNormRow (double
  // lanes for the mean and variance, see there).
  parallelFor(rows, std::max<int64_t>(1, kParallelGrain / 4 / len),
              [&](int64_t b, int64_t e) {
                for (int64_t r = b; r < e; ++r)
                  vec::layerNormRow(px + r * len, pg, pb, py + r * len, len,
                                    epsilon);
              });
  return Status::ok();
}

Status logSoftmax(const ConstTensor &a, int64_t axis, const MutTensor &out) {
  {
    bool narrow = false;
    const ConstTensor *const ins[] = {&a};
    Status st = detail::viaF32(
        "log_softmax", ins, out, &narrow,
        [&](const ConstTensor *in, const MutTensor &o) { return logSoftmax(in[0], axis, o); });
    if (narrow || !st)
      return st;
  }
  const char *op = "log_softmax";
  MC_RETURN_IF_ERROR(checkRank(op, "operand", a.shape));
  MC_RETURN_IF_ERROR(detail::sameTypeAndShape(op, "result", a.dtype, a.shape,
                                              out.dtype, out.shape));
  if (a.dtype != DType::F32)
    return unsupportedDType(op, a.dtype, "f32");
  if (!normalizeAxis(axis, a.shape.size()))
    return Status::error("log_softmax: axis " + str(axis) +
                         " is out of range for rank " + str(a.shape.size()));
  int64_t outer = 1, inner = 1, len = a.shape[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= a.shape[d];
  for (size_t d = size_t(axis) + 1; d < a.shape.size(); ++d)
    inner *= a.shape[d];
  const float *x = static_cast<const float *>(a.data);
  float *y = static_cast<float *>(out.data);
  if (len == 0)
    return Status::ok();
  int64_t grain = std::max<int64_t>(1, kParallelGrain / 4 / len);
  if (inner == 1) { // rows along the last axis: the vectorized row kernel
    parallelFor(outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o)
        vec::logSoftmaxRow(x + o * len, y + o * len, len);
    });
    return Status::ok();
  }
  parallelFor(outer * inner, grain, [&](int64_t b, int64_t e) {
    for (int64_t oi = b; oi < e; ++oi) {
      int64_t o = oi / inner, i = oi % inner;
      const float *xs = x + o * len * inner + i;
      float *ys = y + o * len * inner + i;
      // x - max - log(sum(exp(x - max))); a NaN makes the row NaN.
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < len; ++j) {
        float v = xs[j * inner];
        m = (m != m || m >= v) ? m : v;
      }
      double sum = 0;
      for (int64_t j = 0; j < len; ++j)
        sum += double(vec::fastExp(xs[j * inner] - m));
      float lse = float(std::log(sum));
      for (int64_t j = 0; j < len; ++j)
        ys[j * inner] = (xs[j * inner] - m) - lse;
    }
  });
  return Status::ok();
}

} // namespace mc::rt

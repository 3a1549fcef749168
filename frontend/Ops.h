// Eager ops on Tensor. Each runs the runtime's CPU kernel and, while a trace
// is active, records itself. Binary ops broadcast like NumPy/PyTorch; the
// trace gets the explicit mc.broadcast_in_dim this implies.
#ifndef MODELC_FRONTEND_OPS_H
#define MODELC_FRONTEND_OPS_H

#include "frontend/Tensor.h"

namespace mc {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);

Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor sqrt(const Tensor& a);

/// Batched matmul with mc.matmul's rules: equal ranks >= 2, equal batch dims.
Tensor matmul(const Tensor& a, const Tensor& b, bool transposeA = false,
              bool transposeB = false);
/// x @ w^T + b with w [out, in] (PyTorch's nn.functional.linear).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

/// NumPy-style broadcast to `shape`.
Tensor broadcastTo(const Tensor& a, const Shape& shape);
/// mc.broadcast_in_dim: operand dim i becomes result dim dims[i].
Tensor broadcastInDim(const Tensor& a, const Shape& shape,
                      const std::vector<int64_t>& dims);
/// One entry may be -1 (inferred). Shares storage with `a`.
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor transpose(const Tensor& a, const std::vector<int64_t>& permutation);
/// Negative dims count from the end.
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims,
           bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims,
            bool keepdim = false);
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims,
            bool keepdim = false);
Tensor softmax(const Tensor& a, int64_t axis);
Tensor cast(const Tensor& a, DType dtype);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);

/// Relative error ||a - b|| / ||b|| in double (NaN if either has a NaN).
double relativeError(const Tensor& a, const Tensor& b);

} // namespace mc

#endif // MODELC_FRONTEND_OPS_H

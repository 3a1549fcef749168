// Dropout for test/gpu/prepare.sh: the cuda kernels' masks must be the
// CPU's (Philox4x32-10 at the given seed and offset), so the outputs agree
// exactly; rows of 67 (a unit per element) and 64 (four per unit).
module {
  func.func @forward(%x: tensor<?x67xf32> {mc.name = "x"}, %v: tensor<?x64xf32> {mc.name = "v"},
                     %seed: tensor<i64> {mc.name = "seed"}, %offset: tensor<i64> {mc.name = "offset"})
      -> (tensor<?x67xf32> {mc.name = "x_drop"}, tensor<?x64xf32> {mc.name = "v_drop"})
      attributes {mc.batch = array<i64: 1, 16, 16>} {
    %0 = mc.dropout %x, %seed, %offset, p = 0.1 : tensor<?x67xf32>
    %1 = mc.dropout %v, %seed, %offset, p = 0.5 : tensor<?x64xf32>
    return %0, %1 : tensor<?x67xf32>, tensor<?x64xf32>
  }
}

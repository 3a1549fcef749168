// Dropout on the cuda target: rows of 67 (one element per unit, the Philox
// word picked by the index's low bits), of 64 (four f32 per unit, one
// Philox per unit), bf16 and f16 (eight per unit, two Philox calls); the
// seed and offset are graph inputs (a training step's state), so their
// high 32 bits are exercised by negative values; a dynamic batch.
module {
  func.func @forward(%x: tensor<?x67xf32> {mc.name = "x"}, %v: tensor<?x64xf32> {mc.name = "v"},
                     %h: tensor<?x64xbf16> {mc.name = "h"}, %g: tensor<?x64xf16> {mc.name = "g"},
                     %seed: tensor<i64> {mc.name = "seed"}, %offset: tensor<i64> {mc.name = "offset"})
      -> (tensor<?x67xf32> {mc.name = "x_drop"}, tensor<?x64xf32> {mc.name = "v_drop"},
          tensor<?x64xbf16> {mc.name = "h_drop"}, tensor<?x64xf16> {mc.name = "g_drop"})
      attributes {mc.batch = array<i64: 1, 8, 8>} {
    %0 = mc.dropout %x, %seed, %offset, p = 0.1 : tensor<?x67xf32>
    %1 = mc.dropout %v, %seed, %offset, p = 0.5 : tensor<?x64xf32>
    %2 = mc.dropout %h, %seed, %offset, p = 0.25 : tensor<?x64xbf16>
    %3 = mc.dropout %g, %seed, %offset, p = 0.9 : tensor<?x64xf16>
    return %0, %1, %2, %3 : tensor<?x67xf32>, tensor<?x64xf32>, tensor<?x64xbf16>, tensor<?x64xf16>
  }
}

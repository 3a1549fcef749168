// A layer norm and an elementwise sqrt: the PTX computes both square roots
// correctly rounded (sqrt.rn.f32), as the CPU does.
module {
  func.func @forward(%x: tensor<8x32xf32> {mc.name = "x"}, %g: tensor<32xf32> {mc.name = "g"}) -> (tensor<8x32xf32> {mc.name = "n"}, tensor<8x32xf32> {mc.name = "r"}) {
    %n = mc.layer_norm %x, %g, %g, axis = 1, epsilon = 1.0e-05 : tensor<8x32xf32>, tensor<32xf32>
    %a = mc.abs %x : tensor<8x32xf32>
    %r = mc.sqrt %a : tensor<8x32xf32>
    return %n, %r : tensor<8x32xf32>, tensor<8x32xf32>
  }
}

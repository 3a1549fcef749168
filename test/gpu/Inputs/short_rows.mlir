// Min and max over rows shorter than a row kernel's block (33 and 7 of 64
// threads): threads with no element of the row fold nothing, and their
// partial must be the identity. On lavapipe they read 0 through MLIR 22's
// scf-to-spirv lowering of a zero-trip loop (llvm/llvm-project#211981),
// which test/gpu/SpirvLowering.cpp guards; negative rows show it for max,
// positive ones for min.
module {
  func.func @forward(%x: tensor<3x33xf32> {mc.name = "x"}, %y: tensor<5x7xf32> {mc.name = "y"}) -> (tensor<3xf32> {mc.name = "lo"}, tensor<3xf32> {mc.name = "hi"}, tensor<5xf32> {mc.name = "neg_hi"}) {
    %0 = mc.reduce_min %x, dims = [1] : (tensor<3x33xf32>) -> tensor<3xf32>
    %1 = mc.reduce_max %x, dims = [1] : (tensor<3x33xf32>) -> tensor<3xf32>
    %2 = mc.neg %y : tensor<5x7xf32>
    %3 = mc.reduce_max %2, dims = [1] : (tensor<5x7xf32>) -> tensor<5xf32>
    return %0, %1, %3 : tensor<3xf32>, tensor<3xf32>, tensor<5xf32>
  }
}

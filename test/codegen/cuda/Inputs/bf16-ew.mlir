// A bf16 elementwise region: 8 elements per unit, so its loads and stores
// are 16 bytes wide (ld/st.global.v4.b32), as an f32 region's 4 are.
module {
  func.func @forward(%x: tensor<64x64xbf16> {mc.name = "x"}, %y: tensor<64x64xbf16> {mc.name = "y"}) -> (tensor<64x64xbf16> {mc.name = "out"}) {
    %0 = mc.add %x, %y : tensor<64x64xbf16>
    %1 = mc.gelu %0 : tensor<64x64xbf16>
    return %1 : tensor<64x64xbf16>
  }
}

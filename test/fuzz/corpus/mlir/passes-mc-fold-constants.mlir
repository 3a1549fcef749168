0
ml_program.global private @w(dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]> : tensor<3x2xf32>) : tensor<3x2xf32>
func.func @slices(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %w = ml_program.global_load_const @w : tensor<3x2xf32>
  %0 = mc.slice %w, start = [0, 0], limit = [2, 2], strides = [1, 1] : (tensor<3x2xf32>) -> tensor<2x2xf32>
  %1 = mc.matmul %x, %0 : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %1 : tensor<2x2xf32>
}


func.func @mask(%x: tensor<2x2xf32>, %b: tensor<2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>) {
  %row = mc.constant dense<[[0], [1]]> : tensor<2x1xi64>
  %col = mc.constant dense<[[0, 1]]> : tensor<1x2xi64>
  %r = mc.broadcast_in_dim %row, dims = [0, 1] : (tensor<2x1xi64>) -> tensor<2x2xi64>
  %c = mc.broadcast_in_dim %col, dims = [0, 1] : (tensor<1x2xi64>) -> tensor<2x2xi64>
  %gt = mc.compare GT, %c, %r : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi1>
  %neg = mc.constant dense<-1.0e9> : tensor<2x2xf32>
  %zero = mc.constant dense<0.0> : tensor<2x2xf32>
  %m = mc.select %gt, %neg, %zero : tensor<2x2xi1>, tensor<2x2xf32>
  %0 = mc.add %x, %m : tensor<2x2xf32>
  %bb = mc.broadcast_in_dim %b, dims = [1] : (tensor<2xf32>) -> tensor<2x2xf32>
  return %0, %bb : tensor<2x2xf32>, tensor<2x2xf32>
}


ml_program.global private mutable @t(dense<1.0> : tensor<3x2xf32>) : tensor<3x2xf32>
func.func @not_folded() -> (tensor<2x2xf32>, tensor<1x2xf32>) {
  %t = ml_program.global_load @t : tensor<3x2xf32>
  %0 = mc.slice %t, start = [0, 0], limit = [2, 2], strides = [1, 1] : (tensor<3x2xf32>) -> tensor<2x2xf32>
  %w = mc.constant dense<1.0> : tensor<3x2xf32>
  %i = mc.constant dense<[7]> : tensor<1xi64>
  %1 = mc.gather %w, %i, axis = 0 : (tensor<3x2xf32>, tensor<1xi64>) -> tensor<1x2xf32>
  return %0, %1 : tensor<2x2xf32>, tensor<1x2xf32>
}

// RUN: modelc-opt %s -split-input-file -verify-diagnostics

// One negative test per verifier error of the mc ops.

func.func @add_mismatched_types(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "mc.add"(%a, %b) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @add_bool(%a: tensor<2xi1>) -> tensor<2xi1> {
  // expected-error @+1 {{operand #0 must be ranked tensor of numeric values}}
  %0 = mc.add %a, %a : tensor<2xi1>
  return %0 : tensor<2xi1>
}

// -----

func.func @exp_int(%a: tensor<2xi32>) -> tensor<2xi32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point (f32, f16, bf16) values}}
  %0 = mc.exp %a : tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----

func.func @unsupported_element_type(%a: tensor<2xf64>) -> tensor<2xf64> {
  // expected-error @+1 {{operand #0 must be ranked tensor of numeric values}}
  %0 = mc.neg %a : tensor<2xf64>
  return %0 : tensor<2xf64>
}

// -----

func.func @unranked(%a: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{must be ranked tensor}}
  %0 = "mc.relu"(%a) : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @constant_type_mismatch() -> tensor<3xf32> {
  // expected-error @+1 {{all of {value, result} have same type}}
  %0 = "mc.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @cast_shape(%a: tensor<2xf32>) -> tensor<3xf16> {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %0 = mc.cast %a : tensor<2xf32> to tensor<3xf16>
  return %0 : tensor<3xf16>
}

// -----

func.func @broadcast_rank(%a: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{dims [0, 1] has 2 entries, expected the input rank 1}}
  %0 = mc.broadcast_in_dim %a, dims = [0, 1] : (tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_out_of_range(%a: tensor<3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{dims[0] = 2 is out of range for result rank 2}}
  %0 = mc.broadcast_in_dim %a, dims = [2] : (tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_duplicate(%a: tensor<1x1xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{maps two input dimensions to result dimension 1}}
  %0 = mc.broadcast_in_dim %a, dims = [1, 1] : (tensor<1x1xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_size(%a: tensor<4xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{input dimension 0 of size 4 cannot broadcast to result dimension 1 of size 3}}
  %0 = mc.broadcast_in_dim %a, dims = [1] : (tensor<4xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @broadcast_element_type(%a: tensor<3xf32>) -> tensor<2x3xf16> {
  // expected-error @+1 {{all of {input, result} have same element type}}
  %0 = mc.broadcast_in_dim %a, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf16>
  return %0 : tensor<2x3xf16>
}

// -----

func.func @reshape_count(%a: tensor<2x3xf32>) -> tensor<7xf32> {
  // expected-error @+1 {{cannot reshape 'tensor<2x3xf32>' (6 elements) to 'tensor<7xf32>' (7 elements)}}
  %0 = mc.reshape %a : (tensor<2x3xf32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----

func.func @reshape_element_type(%a: tensor<2x3xf32>) -> tensor<6xi32> {
  // expected-error @+1 {{all of {input, result} have same element type}}
  %0 = mc.reshape %a : (tensor<2x3xf32>) -> tensor<6xi32>
  return %0 : tensor<6xi32>
}

// -----

func.func @transpose_size(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{permutation [1, 0, 2] has 3 entries, expected the input rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.transpose %a, permutation = [1, 0, 2] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @transpose_not_permutation(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{permutation [1, 1] is not a permutation of [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.transpose %a, permutation = [1, 1] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @transpose_result(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<3x2xf32>' are incompatible with return type(s) of operation 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.transpose %a, permutation = [1, 0] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @reduce_out_of_range(%a: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{reduction dimension 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.reduce_sum %a, dims = [2] : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @reduce_repeated(%a: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{reduction dimension 1 appears twice in [1, 1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.reduce_mean %a, dims = [1, 1] : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @reduce_result(%a: tensor<2x3xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<2x1xf32>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.reduce_max %a, dims = [1] keepdim : (tensor<2x3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @matmul_rank(%a: tensor<3xf32>, %b: tensor<3x2xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{expects operands of rank >= 2, got lhs [3] and rhs [3, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.matmul %a, %b : tensor<3xf32>, tensor<3x2xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @matmul_unequal_rank(%a: tensor<2x4x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x4x2xf32> {
  // expected-error @+2 {{expects operands of equal rank (broadcast batch dimensions explicitly)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.matmul %a, %b : tensor<2x4x3xf32>, tensor<3x2xf32> -> tensor<2x4x2xf32>
  return %0 : tensor<2x4x2xf32>
}

// -----

func.func @matmul_batch(%a: tensor<2x4x3xf32>, %b: tensor<5x3x2xf32>) -> tensor<2x4x2xf32> {
  // expected-error @+2 {{expects equal batch dimensions, got lhs [2, 4, 3] and rhs [5, 3, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.matmul %a, %b : tensor<2x4x3xf32>, tensor<5x3x2xf32> -> tensor<2x4x2xf32>
  return %0 : tensor<2x4x2xf32>
}

// -----

func.func @matmul_contracting(%a: tensor<4x3xf32>, %b: tensor<4x2xf32>) -> tensor<4x2xf32> {
  // expected-error @+2 {{contracting dimensions differ: lhs [4, 3] has K = 3, rhs [4, 2] has K = 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.matmul %a, %b : tensor<4x3xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @matmul_element_types(%a: tensor<4x3xf32>, %b: tensor<3x2xf16>) -> tensor<4x2xf32> {
  // expected-error @+2 {{expects operands of one element type, got 'f32' and 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.matmul %a, %b : tensor<4x3xf32>, tensor<3x2xf16> -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

func.func @matmul_result(%a: tensor<4x3xf32>, %b: tensor<3x2xf32>) -> tensor<4x3xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<4x2xf32>' are incompatible with return type(s) of operation 'tensor<4x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.matmul %a, %b : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @matmul_int(%a: tensor<4x3xi32>, %b: tensor<3x2xi32>) -> tensor<4x2xi32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point (f32, f16, bf16) values}}
  %0 = mc.matmul %a, %b : tensor<4x3xi32>, tensor<3x2xi32> -> tensor<4x2xi32>
  return %0 : tensor<4x2xi32>
}

// -----

func.func @softmax_axis(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = mc.softmax %a, axis = 2 : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

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

// -----

func.func @clamp_bounds(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{min 6.000000e+00 is greater than max 0.000000e+00}}
  %0 = mc.clamp %a, min = 6.0, max = 0.0 : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @dropout_p(%x: tensor<2xf32>, %s: tensor<i64>, %o: tensor<i64>) -> tensor<2xf32> {
  // expected-error @+1 {{p 1.500000e+00 is outside [0, 1]}}
  %0 = mc.dropout %x, %s, %o, p = 1.5 : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @dropout_seed(%x: tensor<2xf32>, %s: tensor<1xi64>, %o: tensor<i64>) -> tensor<2xf32> {
  // expected-error @+1 {{operand #1 must be 0D tensor of 64-bit signless integer values}}
  %0 = "mc.dropout"(%x, %s, %o) {p = 0.5 : f64} : (tensor<2xf32>, tensor<1xi64>, tensor<i64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @compare_types(%a: tensor<2xf32>, %b: tensor<2xi32>) -> tensor<2xi1> {
  // expected-error @+1 {{requires all operands to have the same type}}
  %0 = mc.compare EQ, %a, %b : (tensor<2xf32>, tensor<2xi32>) -> tensor<2xi1>
  return %0 : tensor<2xi1>
}

// -----

func.func @select_pred(%p: tensor<3xi1>, %a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{all of {pred, result} have same shape}}
  %0 = mc.select %p, %a, %a : tensor<3xi1>, tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @not_float(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = mc.not %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @log_softmax_axis(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %0 = mc.log_softmax %a, axis = -1 : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @concat_axis(%a: tensor<2x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.concat %a, %a axis = 2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @concat_mismatch(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) -> tensor<5x3xf32> {
  // expected-error @+2 {{input 1 [3, 3] differs from input 0 [2, 3] in dimension 0, which is not the axis}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.concat %a, %b axis = 1 : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----

func.func @concat_element_types(%a: tensor<2xf32>, %b: tensor<2xi32>) -> tensor<4xf32> {
  // expected-error @+2 {{expects inputs of one element type, got 'f32' and 'i32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.concat %a, %b axis = 0 : (tensor<2xf32>, tensor<2xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @concat_rank(%a: tensor<2xf32>, %b: tensor<2x1xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{input 1 has rank 2, expected 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.concat %a, %b axis = 0 : (tensor<2xf32>, tensor<2x1xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @slice_bounds(%a: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+2 {{dimension 0 of size 4 cannot be sliced from 3 to 5 (needs 0 <= start <= limit <= size)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.slice %a, start = [3], limit = [5], strides = [1] : (tensor<4xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @slice_stride(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{stride 0 in dimension 0 must be >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.slice %a, start = [0], limit = [4], strides = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @slice_rank(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{start, limit and strides need 1 entries (the input rank), got 2, 1 and 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.slice %a, start = [0, 0], limit = [4], strides = [1] : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @gather_axis(%a: tensor<4x2xf32>, %i: tensor<3xi32>) -> tensor<3x2xf32> {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.gather %a, %i, axis = 2 : (tensor<4x2xf32>, tensor<3xi32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @gather_float_indices(%a: tensor<4x2xf32>, %i: tensor<3xf32>) -> tensor<3x2xf32> {
  // expected-error @+1 {{operand #1 must be ranked tensor of index integer (i32, i64) values}}
  %0 = mc.gather %a, %i, axis = 0 : (tensor<4x2xf32>, tensor<3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

func.func @scatter_add_indices_shape(%g: tensor<2x4xf32>, %i: tensor<3xi64>) -> tensor<10x4xf32> {
  // expected-error @+2 {{updates dims 0..0 are [2], not the indices' shape [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.scatter_add %g, %i, axis = 0, size = 10 : (tensor<2x4xf32>, tensor<3xi64>) -> tensor<10x4xf32>
  return %0 : tensor<10x4xf32>
}

// -----

func.func @scatter_add_axis(%g: tensor<2x4xf32>, %i: tensor<2xi64>) -> tensor<10x4xf32> {
  // expected-error @+2 {{axis 2 and indices of rank 1 do not fit updates of rank 2 (axis + rank(indices) <= rank(updates))}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.scatter_add %g, %i, axis = 2, size = 10 : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<10x4xf32>
  return %0 : tensor<10x4xf32>
}

// -----

func.func @scatter_add_size_zero(%g: tensor<2x4xf32>, %i: tensor<2xi64>) -> tensor<0x4xf32> {
  // expected-error @+2 {{size 0 with indices: no index can be in range}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.scatter_add %g, %i, axis = 0, size = 0 : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<0x4xf32>
  return %0 : tensor<0x4xf32>
}

// -----

func.func @scatter_add_result(%g: tensor<2x4xf32>, %i: tensor<2xi64>) -> tensor<9x4xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<10x4xf32>' are incompatible with return type(s) of operation 'tensor<9x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.scatter_add %g, %i, axis = 0, size = 10 : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<9x4xf32>
  return %0 : tensor<9x4xf32>
}

// -----

func.func @scatter_add_bf16(%g: tensor<2x4xbf16>, %i: tensor<2xi64>) -> tensor<10x4xbf16> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float values}}
  %0 = mc.scatter_add %g, %i, axis = 0, size = 10 : (tensor<2x4xbf16>, tensor<2xi64>) -> tensor<10x4xbf16>
  return %0 : tensor<10x4xbf16>
}

// -----

func.func @pad_negative(%a: tensor<4xf32>) -> tensor<3xf32> {
  // expected-error @+2 {{padding of dimension 0 is negative (low -1, high 0)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.pad %a, low = [-1], high = [0], value = 0.0 : (tensor<4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @pad_rank(%a: tensor<4xf32>) -> tensor<5xf32> {
  // expected-error @+2 {{low and high need 1 entries (the input rank), got 2 and 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.pad %a, low = [1, 0], high = [0], value = 0.0 : (tensor<4xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @conv_rank(%x: tensor<3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{expects input [N, C, H, W] and weight [O, C/groups, KH, KW], got [3, 8, 8] and [4, 3, 3, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{weight [4, 3, 3, 3] expects 3 input channels (3 per group x 1 groups), input [1, 4, 8, 8] has 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_groups(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32> {
  // expected-error @+2 {{groups 3 must divide the input channels 4 and the output channels 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 3 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
  return %0 : tensor<1x6x6x6xf32>
}

// -----

func.func @conv_attrs(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{expects strides and dilation [h, w] and padding [top, left, bottom, right], got [1, 1], [1, 1] and [0, 0]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0], dilation = [1, 1], groups = 1 : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{strides [0, 1] must be >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [0, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_dilation(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{dilation [1, 0] must be >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 0], groups = 1 : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_padding(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{padding [0, -1, 0, 0] must be >= 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, -1, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv_too_small(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32> {
  // expected-error @+2 {{the kernel [3, 3] does not fit the padded input [1, 3, 2, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  return %0 : tensor<1x4x1x1xf32>
}

// -----

func.func @conv_element_types(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32> {
  // expected-error @+2 {{expects input and weight of one element type, got 'f32' and 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @pool_rank(%x: tensor<4x8x8xf32>) -> tensor<4x4x4xf32> {
  // expected-error @+2 {{expects input [N, C, H, W], got [4, 8, 8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.max_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] : (tensor<4x8x8xf32>) -> tensor<4x4x4xf32>
  return %0 : tensor<4x4x4xf32>
}

// -----

func.func @pool_kernel(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32> {
  // expected-error @+2 {{kernel [2] must be [h, w] with sizes >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.max_pool2d %x, kernel = [2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
  return %0 : tensor<1x4x4x4xf32>
}

// -----

func.func @pool_padding(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x5x5xf32> {
  // expected-error @+2 {{padding [2, 2, 2, 2] must be at most half the kernel [2, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.max_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [2, 2, 2, 2], dilation = [1, 1] : (tensor<1x4x8x8xf32>) -> tensor<1x4x5x5xf32>
  return %0 : tensor<1x4x5x5xf32>
}

// -----

func.func @pool_too_small(%x: tensor<1x4x2x2xf32>) -> tensor<1x4x1x1xf32> {
  // expected-error @+2 {{the window [3, 3] does not fit the padded input [1, 4, 2, 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.max_pool2d %x, kernel = [3, 3], strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1] : (tensor<1x4x2x2xf32>) -> tensor<1x4x1x1xf32>
  return %0 : tensor<1x4x1x1xf32>
}

// -----

func.func @pool_result(%x: tensor<1x4x9x9xf32>) -> tensor<1x4x5x5xf32> {
  // Without ceil_mode, 4 windows fit, not 5.
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<1x4x4x4xf32>' are incompatible with return type(s) of operation 'tensor<1x4x5x5xf32>'}}
  %0 = mc.max_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] : (tensor<1x4x9x9xf32>) -> tensor<1x4x5x5xf32>
  return %0 : tensor<1x4x5x5xf32>
}

// -----

func.func @avg_pool_dilation(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x3x3xf32> {
  // expected-error @+2 {{dilation must be [1, 1] for average pooling}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.avg_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [2, 2] : (tensor<1x4x8x8xf32>) -> tensor<1x4x3x3xf32>
  return %0 : tensor<1x4x3x3xf32>
}

// -----

func.func @batch_norm_axis(%x: tensor<1x4x2x2xf32>, %c: tensor<4xf32>) -> tensor<1x4x2x2xf32> {
  // expected-error @+1 {{feature_axis 4 is out of range for rank 4}}
  %0 = mc.batch_norm %x, %c, %c, %c, %c, epsilon = 1.0e-05, feature_axis = 4 : tensor<1x4x2x2xf32>, tensor<4xf32>
  return %0 : tensor<1x4x2x2xf32>
}

// -----

func.func @batch_norm_size(%x: tensor<1x4x2x2xf32>, %c: tensor<3xf32>) -> tensor<1x4x2x2xf32> {
  // expected-error @+1 {{expects scale, offset, mean and variance of shape [4] (the size of feature axis 1), got 'tensor<3xf32>'}}
  %0 = mc.batch_norm %x, %c, %c, %c, %c, epsilon = 1.0e-05, feature_axis = 1 : tensor<1x4x2x2xf32>, tensor<3xf32>
  return %0 : tensor<1x4x2x2xf32>
}

// -----

func.func @batch_norm_element_type(%x: tensor<1x4x2x2xf32>, %c: tensor<4xf16>) -> tensor<1x4x2x2xf32> {
  // expected-error @+1 {{expects parameters of the input's element type 'f32', got 'tensor<4xf16>'}}
  %0 = mc.batch_norm %x, %c, %c, %c, %c, epsilon = 1.0e-05, feature_axis = 1 : tensor<1x4x2x2xf32>, tensor<4xf16>
  return %0 : tensor<1x4x2x2xf32>
}

// -----

func.func @batch_norm_epsilon(%x: tensor<1x4x2x2xf32>, %c: tensor<4xf32>) -> tensor<1x4x2x2xf32> {
  // expected-error @+1 {{epsilon must be finite and >= 0, got -1}}
  %0 = mc.batch_norm %x, %c, %c, %c, %c, epsilon = -1.0, feature_axis = 1 : tensor<1x4x2x2xf32>, tensor<4xf32>
  return %0 : tensor<1x4x2x2xf32>
}

// -----

// A NaN epsilon (an ONNX BatchNormalization the onnx fuzz target wrote)
// reached the artifact writer, whose verifier refused it as a compiler bug.
func.func @batch_norm_epsilon_nan(%x: tensor<1x4x2x2xf32>, %c: tensor<4xf32>) -> tensor<1x4x2x2xf32> {
  // expected-error @+1 {{epsilon must be finite and >= 0, got nan}}
  %0 = mc.batch_norm %x, %c, %c, %c, %c, epsilon = 0x7FF8000000000000, feature_axis = 1 : tensor<1x4x2x2xf32>, tensor<4xf32>
  return %0 : tensor<1x4x2x2xf32>
}

// -----

func.func @layer_norm_axis(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = mc.layer_norm %x, %g, %g, axis = 2, epsilon = 1.0e-05 : tensor<2x8xf32>, tensor<8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @layer_norm_shape(%x: tensor<2x8xf32>, %g: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{expects gamma and beta of the normalized shape (input dimensions from axis 1 on), got 'tensor<2x8xf32>' for input 'tensor<2x8xf32>'}}
  %0 = mc.layer_norm %x, %g, %g, axis = 1, epsilon = 1.0e-05 : tensor<2x8xf32>, tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @layer_norm_element_type(%x: tensor<2x8xf32>, %g: tensor<8xbf16>) -> tensor<2x8xf32> {
  // expected-error @+1 {{expects gamma and beta of the input's element type 'f32', got 'tensor<8xbf16>'}}
  %0 = mc.layer_norm %x, %g, %g, axis = 1, epsilon = 1.0e-05 : tensor<2x8xf32>, tensor<8xbf16>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @layer_norm_epsilon(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{epsilon must be finite and >= 0, got -1.000000e-05}}
  %0 = mc.layer_norm %x, %g, %g, axis = 1, epsilon = -1.0e-05 : tensor<2x8xf32>, tensor<8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @layer_norm_epsilon_inf(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{epsilon must be finite and >= 0, got inf}}
  %0 = mc.layer_norm %x, %g, %g, axis = 1, epsilon = 0x7FF0000000000000 : tensor<2x8xf32>, tensor<8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @all_reduce_start_bucket_size(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> tensor<9xf32> {
  // expected-error @+1 {{result must be the 1-D bucket of every operand's elements, 'tensor<10xf32>'; got 'tensor<9xf32>'}}
  %0 = mc.all_reduce_start %a, %b ranks = 2 : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<9xf32>
  return %0 : tensor<9xf32>
}

// -----

func.func @all_reduce_start_mixed_types(%a: tensor<2xf32>, %b: tensor<2xbf16>) -> tensor<4xf32> {
  // expected-error @+1 {{operand 1 is 'tensor<2xbf16>', but the bucket's element type is 'f32'}}
  %0 = mc.all_reduce_start %a, %b ranks = 2 : (tensor<2xf32>, tensor<2xbf16>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce_start_no_ranks(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{ranks must be >= 1, got 0}}
  %0 = mc.all_reduce_start %a ranks = 0 : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @all_reduce_start_empty() -> tensor<0xf32> {
  // expected-error @+1 {{needs at least one tensor to reduce}}
  %0 = mc.all_reduce_start ranks = 2 : () -> tensor<0xf32>
  return %0 : tensor<0xf32>
}

// -----

func.func @all_reduce_wait_not_started(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{waits on a value no mc.all_reduce_start made}}
  %0 = mc.all_reduce_wait %a scale = 5.000000e-01 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @all_reduce_wait_scale(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mc.all_reduce_start %a ranks = 2 : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{scale must be finite and > 0, got 0}}
  %1 = mc.all_reduce_wait %0 scale = 0.000000e+00 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// channels_last reads [N, H, W, C]: an NCHW input has 8 "channels" here.
func.func @conv_channels_last_layout(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x6x6x4xf32> {
  // expected-error @+2 {{weight [4, 3, 3, 3] expects 3 input channels (3 per group x 1 groups), input [1, 8, 3, 8] has 8 (the channels_last input [1, 3, 8, 8] read as NCHW)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1 channels_last : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x6x6x4xf32>
  return %0 : tensor<1x6x6x4xf32>
}

// -----

func.func @pool_channels_last_result(%x: tensor<1x8x8x4xf32>) -> tensor<1x4x4x2xf32> {
  // expected-error @+2 {{'mc.max_pool2d' op inferred type(s) 'tensor<1x4x4x4xf32>' are incompatible with return type(s) of operation 'tensor<1x4x4x2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = mc.max_pool2d %x, kernel = [2, 2], strides = [2, 2], padding = [0, 0, 0, 0], dilation = [1, 1] channels_last : (tensor<1x8x8x4xf32>) -> tensor<1x4x4x2xf32>
  return %0 : tensor<1x4x4x2xf32>
}

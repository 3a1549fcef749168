// RUN: modelc-opt %s -split-input-file -verify-diagnostics

// One negative test per verifier error of mc.fused.

func.func @arity(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has 1 inputs but its body takes 2 arguments}}
  %0 = mc.fused %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %1 = mc.neg %a : tensor<4xf32>
    mc.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @arg_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{input 0 has type 'tensor<4xf32>' but body argument 0 has type 'tensor<4xf16>'}}
  %0 = mc.fused %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf16>):
    %1 = mc.cast %a : tensor<4xf16> to tensor<4xf32>
    mc.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @yield_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{yields 'tensor<4xf16>' but its results have types 'tensor<4xf32>'}}
  %0 = mc.fused %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = mc.cast %a : tensor<4xf32> to tensor<4xf16>
    mc.yield %1 : tensor<4xf16>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @not_fusible(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = mc.fused %x : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    // expected-error @+1 {{cannot be in an mc.fused region: only elementwise ops, after at most one matmul or conv2d as the first op}}
    %1 = mc.softmax %a, axis = 1 : tensor<4x4xf32>
    mc.yield %1 : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @anchor_not_first(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = mc.fused %x : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    %1 = mc.neg %a : tensor<4x4xf32>
    // expected-error @+1 {{cannot be in an mc.fused region}}
    %2 = mc.matmul %1, %a : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    mc.yield %2 : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @other_shape(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = mc.fused %x : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    // expected-error @+1 {{computes a value of another shape than the region's result}}
    %1 = mc.broadcast_in_dim %a, dims = [1, 2] : (tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %2 = mc.neg %a : tensor<4x4xf32>
    mc.yield %2 : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @broadcast_of_value(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mc.fused %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = mc.neg %a : tensor<4xf32>
    // expected-error @+1 {{must take the region's inputs as operands}}
    %2 = mc.broadcast_in_dim %1, dims = [0] : (tensor<4xf32>) -> tensor<4xf32>
    mc.yield %2 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

ml_program.global private @g(dense<1.0> : tensor<4xf32>) : tensor<4xf32>
func.func @foreign(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mc.fused %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    // expected-error @+1 {{cannot be in an mc.fused region (only mc ops of the registry)}}
    %1 = ml_program.global_load_const @g : tensor<4xf32>
    mc.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @reshape_not_of_anchor(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = mc.fused %x : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %1 = mc.neg %a : tensor<2x4xf32>
    // expected-error @+1 {{in an mc.fused region may only reshape the anchor's result, right after it}}
    %2 = mc.reshape %1 : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %3 = mc.neg %2 : tensor<2x4xf32>
    mc.yield %3 : tensor<2x4xf32>
  }
  return %0 : tensor<2x4xf32>
}

// -----

// A view (schema 2.6) read at another shape than the region's.
func.func @view_of_other_shape(%x: tensor<4x2xf32>, %y: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %0 = mc.fused %x, %y : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%a: tensor<4x2xf32>, %b: tensor<4x2xf32>):
    %1 = mc.transpose %a, permutation = [1, 0] : (tensor<4x2xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{reads the view 'tensor<2x4xf32>', which lacks the region's shape}}
    %2 = mc.neg %1 : tensor<2x4xf32>
    %3 = mc.add %b, %b : tensor<4x2xf32>
    mc.yield %3 : tensor<4x2xf32>
  }
  return %0 : tensor<4x2xf32>
}

// -----

// A broadcast reads inputs, not views.
func.func @broadcast_of_view(%x: tensor<2x4xf32>, %y: tensor<3x4x2xf32>) -> tensor<3x4x2xf32> {
  %0 = mc.fused %x, %y : (tensor<2x4xf32>, tensor<3x4x2xf32>) -> tensor<3x4x2xf32> {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<3x4x2xf32>):
    %1 = mc.transpose %a, permutation = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
    // expected-error @+1 {{reads the view 'tensor<4x2xf32>', which lacks the region's shape}}
    %2 = mc.broadcast_in_dim %1, dims = [1, 2] : (tensor<4x2xf32>) -> tensor<3x4x2xf32>
    %3 = mc.add %b, %2 : tensor<3x4x2xf32>
    mc.yield %3 : tensor<3x4x2xf32>
  }
  return %0 : tensor<3x4x2xf32>
}

// -----

// A view cannot end a region: the region would compute nothing.
func.func @view_last(%x: tensor<2x4xf32>) -> tensor<4x2xf32> {
  %0 = mc.fused %x : (tensor<2x4xf32>) -> tensor<4x2xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    // expected-error @+1 {{cannot be in an mc.fused region}}
    %1 = mc.transpose %a, permutation = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
    mc.yield %1 : tensor<4x2xf32>
  }
  return %0 : tensor<4x2xf32>
}

// -----

func.func @reshape_to_other_shape(%x: tensor<4x2xf32>, %w: tensor<2x4xf32>) -> tensor<4x4xf32> {
  %0 = mc.fused %x, %w : (tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x2xf32>, %b: tensor<2x4xf32>):
    %1 = mc.matmul %a, %b : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    // expected-error @+1 {{computes a value of another shape than the region's result}}
    %2 = mc.reshape %1 : (tensor<4x4xf32>) -> tensor<2x8xf32>
    mc.yield %1 : tensor<4x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @attention_rank(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{with attention needs a result of rank >= 2}}
  %0 = mc.fused %x {attention} : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %1 = mc.neg %a : tensor<4xf32>
    mc.yield %1 : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @attention_op(%x: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %0 = mc.fused %x {attention} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  ^bb0(%a: tensor<2x4x4xf32>):
    // expected-error @+1 {{cannot be in an attention region (matmul, softmax and elementwise ops)}}
    %1 = mc.log_softmax %a, axis = 2 : tensor<2x4x4xf32>
    mc.yield %1 : tensor<2x4x4xf32>
  }
  return %0 : tensor<2x4x4xf32>
}

// -----

func.func @attention_leading(%x: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %0 = mc.fused %x {attention} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  ^bb0(%a: tensor<2x4x4xf32>):
    // expected-error @+1 {{computes 'tensor<2x4x4x1xf32>', but every value of an attention region has the result's rank and leading dims}}
    %1 = mc.broadcast_in_dim %a, dims = [0, 1, 2] : (tensor<2x4x4xf32>) -> tensor<2x4x4x1xf32>
    %2 = mc.softmax %a, axis = 2 : tensor<2x4x4xf32>
    mc.yield %2 : tensor<2x4x4xf32>
  }
  return %0 : tensor<2x4x4xf32>
}

// -----

func.func @attention_softmax_axis(%x: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %0 = mc.fused %x {attention} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  ^bb0(%a: tensor<2x4x4xf32>):
    // expected-error @+1 {{in an attention region must be over the last dim}}
    %1 = mc.softmax %a, axis = 1 : tensor<2x4x4xf32>
    mc.yield %1 : tensor<2x4x4xf32>
  }
  return %0 : tensor<2x4x4xf32>
}

// -----

func.func @attention_broadcast(%x: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %0 = mc.fused %x {attention} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  ^bb0(%a: tensor<2x4x4xf32>):
    %1 = mc.neg %a : tensor<2x4x4xf32>
    // expected-error @+1 {{must take the region's inputs as operands}}
    %2 = mc.broadcast_in_dim %1, dims = [0, 1, 2] : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    mc.yield %2 : tensor<2x4x4xf32>
  }
  return %0 : tensor<2x4x4xf32>
}

// -----

func.func @reduction_not_trailing(%x: tensor<4x8xf32>) -> tensor<8xf32> {
  %0 = mc.fused %x : (tensor<4x8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %1 = mc.exp %a : tensor<4x8xf32>
    // expected-error @+1 {{ends an mc.fused region but does not reduce the trailing dims of its operand}}
    %2 = mc.reduce_sum %1, dims = [0] : (tensor<4x8xf32>) -> tensor<8xf32>
    mc.yield %2 : tensor<8xf32>
  }
  return %0 : tensor<8xf32>
}

// -----

// A view that is no strided view of the input: a slice inside a dim that
// merges two strided dims (a transpose, then a flattening reshape).
func.func @not_a_strided_view(%x: tensor<4x2xf32>) -> tensor<3xf32> {
  %0 = mc.fused %x : (tensor<4x2xf32>) -> tensor<3xf32> {
  ^bb0(%a: tensor<4x2xf32>):
    %1 = mc.transpose %a, permutation = [1, 0] : (tensor<4x2xf32>) -> tensor<2x4xf32>
    %2 = mc.reshape %1 : (tensor<2x4xf32>) -> tensor<8xf32>
    // expected-error @+1 {{in an mc.fused region is no strided view of the region's input: slicing dim 0 of [8], a merge of strided dims: no view}}
    %3 = mc.slice %2, start = [1], limit = [4], strides = [1] : (tensor<8xf32>) -> tensor<3xf32>
    %4 = mc.neg %3 : tensor<3xf32>
    mc.yield %4 : tensor<3xf32>
  }
  return %0 : tensor<3xf32>
}

// -----

func.func @main_result_not_last(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{must yield its last op's value first (its main result)}}
  %0:2 = mc.fused %x : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    %1 = mc.neg %a : tensor<4xf32>
    %2 = mc.abs %1 : tensor<4xf32>
    mc.yield %1, %2 : tensor<4xf32>, tensor<4xf32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

func.func @extra_result_with_anchor(%x: tensor<4x2xf32>, %w: tensor<2x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{has 2 results, but only a plain elementwise region (no attention, anchor or reduction) may have more than one}}
  %0:2 = mc.fused %x, %w : (tensor<4x2xf32>, tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  ^bb0(%a: tensor<4x2xf32>, %b: tensor<2x4xf32>):
    %1 = mc.matmul %a, %b : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    %2 = mc.relu %1 : tensor<4x4xf32>
    %3 = mc.neg %2 : tensor<4x4xf32>
    mc.yield %3, %2 : tensor<4x4xf32>, tensor<4x4xf32>
  }
  return %0#0 : tensor<4x4xf32>
}

// -----

func.func @extra_result_with_reduction(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has 2 results, but only a plain elementwise region}}
  %0:2 = mc.fused %x : (tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  ^bb0(%a: tensor<4x8xf32>):
    %1 = mc.exp %a : tensor<4x8xf32>
    %2 = mc.reduce_sum %1, dims = [1] : (tensor<4x8xf32>) -> tensor<4xf32>
    mc.yield %2, %1 : tensor<4xf32>, tensor<4x8xf32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

func.func @extra_result_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{yields one value twice (result 2)}}
  %0:3 = mc.fused %x : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    %1 = mc.neg %a : tensor<4xf32>
    %2 = mc.abs %1 : tensor<4xf32>
    mc.yield %2, %1, %1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

func.func @extra_result_broadcast(%x: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  // expected-error @+1 {{result 1 must be computed by an elementwise op of the body (not an input, a broadcast or a view)}}
  %0:2 = mc.fused %x, %s : (tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>, %b: tensor<f32>):
    %1 = mc.broadcast_in_dim %b, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %2 = mc.add %a, %1 : tensor<4xf32>
    mc.yield %2, %1 : tensor<4xf32>, tensor<4xf32>
  }
  return %0#0 : tensor<4xf32>
}

// -----

func.func @extra_result_input(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{result 1 must be computed by an elementwise op of the body}}
  %0:2 = mc.fused %x : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    %1 = mc.neg %a : tensor<4xf32>
    mc.yield %1, %a : tensor<4xf32>, tensor<4xf32>
  }
  return %0#0 : tensor<4xf32>
}

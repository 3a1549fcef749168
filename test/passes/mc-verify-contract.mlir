// RUN: modelc-opt %s --mc-verify-contract -split-input-file -verify-diagnostics | FileCheck %s

// Accepted: an MLP layer with a named parameter. The pass changes nothing.
// CHECK-LABEL: func @forward
// CHECK: mc.matmul
ml_program.global private @w(dense<1.0> : tensor<3x8xf32>) : tensor<3x8xf32>
func.func @forward(%x: tensor<4x8xf32> {mc.name = "x"}) -> tensor<4x3xf32> {
  %w = ml_program.global_load_const @w : tensor<3x8xf32>
  %0 = mc.matmul %x, %w transpose_b : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x3xf32>
  %1 = mc.relu %0 : tensor<4x3xf32>
  return %1 : tensor<4x3xf32>
}

// -----

// expected-error @+1 {{argument 0 ('x') has a dynamic shape 'tensor<?x8xf32>'; codegen needs static shapes, or batch bounds on the entry function (mc.batch; modelc compile --batch=MIN..MAX)}}
func.func @dynamic(%x: tensor<?x8xf32> {mc.name = "x"}) -> tensor<?x8xf32> {
  %0 = mc.relu %x : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// A dynamic batch with its bounds is accepted; the pass changes nothing.
// CHECK-LABEL: func @dynamic_batch
// CHECK-SAME: mc.batch = array<i64: 1, 64, 64>
func.func @dynamic_batch(%x: tensor<?x8xf32> {mc.name = "x"}) -> tensor<?x8xf32> attributes {mc.batch = array<i64: 1, 64, 64>} {
  %0 = mc.relu %x : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

// The runtime learns the batch from the inputs' leading dims: no other
// input dim may be dynamic.
// expected-error @+1 {{argument 0 ('x') has type 'tensor<8x?xf32>': only the leading (batch) dimension of an input may be dynamic}}
func.func @dynamic_inner(%x: tensor<8x?xf32> {mc.name = "x"}) -> tensor<8x?xf32> attributes {mc.batch = array<i64: 1, 64, 64>} {
  %0 = mc.relu %x : tensor<8x?xf32>
  return %0 : tensor<8x?xf32>
}

// -----

// An input's leading dim is the batch itself, not a multiple of it.
// expected-error @+1 {{argument 0 ('x') has type 'tensor<?x8xf32, #mc.batch<[2]>>': an input's leading dim is the batch itself, not a multiple of it}}
func.func @multiple_input(%x: tensor<?x8xf32, #mc.batch<[2]>> {mc.name = "x"}) -> tensor<?x8xf32, #mc.batch<[2]>> attributes {mc.batch = array<i64: 1, 64, 64>} {
  %0 = mc.relu %x : tensor<?x8xf32, #mc.batch<[2]>>
  return %0 : tensor<?x8xf32, #mc.batch<[2]>>
}

// -----

// expected-error @+1 {{has batch bounds (mc.batch) but no argument with a dynamic leading dimension, so the runtime could not learn the batch}}
func.func @bounds_without_batch(%x: tensor<4x8xf32> {mc.name = "x"}) -> tensor<4x8xf32> attributes {mc.batch = array<i64: 1, 64, 64>} {
  %0 = mc.relu %x : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Low-precision float math runs on the CPU (computed in f32, rounded once).
// CHECK-LABEL: func @low_precision
func.func @low_precision(%x: tensor<4x8xbf16>, %h: tensor<4x8xf16>) -> (tensor<4x8xbf16>, tensor<4x8xf16>) {
  %0 = mc.exp %x : tensor<4x8xbf16>
  %1 = mc.add %h, %h : tensor<4x8xf16>
  return %0, %1 : tensor<4x8xbf16>, tensor<4x8xf16>
}

// -----

func.func @no_kernel(%p: tensor<4xi1>) -> tensor<4xi1> {
  // expected-error @+1 {{'mc.compare' op on 'i1' has no kernel on the cpu target (f32, f16, bf16, i32, i64; i1 for EQ/NE)}}
  %0 = mc.compare LT, %p, %p : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
}

// -----

// Casts and data movement run on any element type.
// CHECK-LABEL: func @casts
func.func @casts(%x: tensor<4xf32>) -> tensor<2x2xbf16> {
  %0 = mc.cast %x : tensor<4xf32> to tensor<4xbf16>
  %1 = mc.reshape %0 : (tensor<4xbf16>) -> tensor<2x2xbf16>
  return %1 : tensor<2x2xbf16>
}

// -----

func.func @foreign_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'arith.addf' op is outside the codegen contract}}
  %0 = arith.addf %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// expected-error @+1 {{more than one public function ('a', 'b'); choose the entry with entry=NAME}}
module {
  func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
  func.func @b(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{no public func.func to compile}}
module {
  func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// Training state: mutable globals read and stored by the step.
// CHECK-LABEL: func @step
ml_program.global private mutable @state(dense<0.0> : tensor<4xf32>) : tensor<4xf32>
func.func @step(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = ml_program.global_load @state : tensor<4xf32>
  %0 = mc.add %s, %x : tensor<4xf32>
  ml_program.global_store @state = %0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @arith_constant(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'arith.constant' op is outside the codegen contract}}
  %c = arith.constant dense<1.0> : tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// Issue 12 item 11: duplicate names and overflowing sizes are the input's
// mistakes, reported here, not by the artifact writer as "a lowering or
// planning bug".
// expected-error @+1 {{arguments 0 and 1 are both named 'x' (mc.name); input and output names must be unique}}
func.func @duplicate_inputs(%a: tensor<2xf32> {mc.name = "x"}, %b: tensor<2xf32> {mc.name = "x"}) -> (tensor<2xf32> {mc.name = "y"}) {
  %0 = mc.add %a, %b : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// expected-error @+1 {{results 0 and 1 are both named 'y' (mc.name); input and output names must be unique}}
func.func @duplicate_outputs(%a: tensor<2xf32> {mc.name = "x"}) -> (tensor<2xf32> {mc.name = "y"}, tensor<2xf32> {mc.name = "y"}) {
  %0 = mc.neg %a : tensor<2xf32>
  return %0, %a : tensor<2xf32>, tensor<2xf32>
}

// -----

// An input may share its name with an output.
// CHECK-LABEL: func @input_named_like_output
func.func @input_named_like_output(%a: tensor<2xf32> {mc.name = "x"}) -> (tensor<2xf32> {mc.name = "x"}) {
  %0 = mc.neg %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// expected-error @+1 {{argument 0 ('x') of type 'tensor<4611686018427387904x4xf32>' is too large: it has more than 68719476736 (2^36) elements, the limit for one tensor}}
func.func @huge_input(%a: tensor<4611686018427387904x4xf32> {mc.name = "x"}) -> tensor<4611686018427387904x4xf32> {
  %0 = mc.neg %a : tensor<4611686018427387904x4xf32>
  return %0 : tensor<4611686018427387904x4xf32>
}

// -----

// Just over the limit, far from overflowing: 2^16 x (2^20 + 1) elements.
// expected-error @+1 {{argument 0 ('x') of type 'tensor<65536x1048577xi1>' is too large: it has more than 68719476736 (2^36) elements, the limit for one tensor}}
func.func @over_element_limit(%a: tensor<65536x1048577xi1> {mc.name = "x"}) -> tensor<65536x1048577xi1> {
  %0 = mc.not %a : tensor<65536x1048577xi1>
  return %0 : tensor<65536x1048577xi1>
}

// -----

func.func @huge_temporary(%a: tensor<1073741824x1xf32> {mc.name = "x"}) -> tensor<f32> {
  // expected-error @+1 {{result 0 of type 'tensor<1073741824x1073741824x8xf32>' is too large: it has more than 68719476736 (2^36) elements, the limit for one tensor}}
  %0 = mc.broadcast_in_dim %a, dims = [0, 1] : (tensor<1073741824x1xf32>) -> tensor<1073741824x1073741824x8xf32>
  %1 = mc.reduce_sum %0, dims = [0, 1, 2] : (tensor<1073741824x1073741824x8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// expected-error @+1 {{parameter 'big' of type 'tensor<4611686018427387904x2xi64>' is too large: it has more than 68719476736 (2^36) elements, the limit for one tensor}}
ml_program.global private @big(dense<0> : tensor<4611686018427387904x2xi64>) : tensor<4611686018427387904x2xi64>
func.func @huge_parameter(%a: tensor<2xi64> {mc.name = "x"}) -> tensor<2xi64> {
  return %a : tensor<2xi64>
}

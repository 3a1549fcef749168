// modelc's passes. One pass per .cpp, one lit test per pass flag under
// test/passes/<flag>.mlir.
#ifndef MC_PASSES_TD
#define MC_PASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyContractPass : Pass<"mc-verify-contract", "mlir::ModuleOp"> {
  let summary = "check that a module is something codegen accepts";
  let description = [{
    The boundary between the frontend (tracer, importers, hand-written
    `.mlir`) and codegen, in the style of torch-mlir's backend contract. The
    pass changes nothing; it fails with an error naming the op, the value and
    the rule when:

    - the entry function (`entry`, or the only public `func.func`) is missing;
    - an op is outside the contract (only `mc` ops, `func.return` and
      `ml_program.global_load_const` may appear in the entry function, and
      only functions and immutable `ml_program.global`s at module level);
    - a tensor has a dynamic shape or an unsupported element type;
    - the target has no kernel for an op at its element type (the CPU
      target computes float math in f32; `mc-amp` work lands later).

    ```mlir
    // Rejected: dynamic batch dimension.
    func.func @forward(%x: tensor<?x8xf32> {mc.name = "x"}) -> tensor<?x8xf32> {
      %0 = mc.relu %x : tensor<?x8xf32>
      return %0 : tensor<?x8xf32>
    }
    // error: 'func.func' op argument 0 ('x') has a dynamic shape
    //        'tensor<?x8xf32>'; codegen needs static shapes
    ```
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "the codegen target whose kernels to check against (cpu)">,
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the entry function (default: the only public func.func)">,
  ];
  let dependentDialects = ["::mc::MCDialect"];
}

#endif // MC_PASSES_TD

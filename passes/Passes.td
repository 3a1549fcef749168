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
      `ml_program.global_load_const` / `global_load` / `global_store` may
      appear in the entry function, and only functions and
      `ml_program.global`s, immutable parameters or mutable training state,
      at module level);
    - a tensor has a dynamic shape or an unsupported element type;
    - the target has no kernel for an op at its element type (the CPU
      target computes float math in f32, f16 and bf16, integer arithmetic
      in i32 and i64; an ordering comparison of i1 has no kernel).

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

def AutodiffPass : Pass<"mc-autodiff", "mlir::ModuleOp"> {
  let summary = "differentiate a loss with respect to every parameter";
  let description = [{
    Reverse-mode autodiff of the entry function (`entry`, or the only public
    `func.func`). Its result `loss-index` (default 0) must be a scalar float
    loss (rank 0 or one element). The pass differentiates it with respect
    to every float parameter the function reads (`ml_program.global_load_const`
    or `ml_program.global_load` of an `ml_program.global`; several loads of
    one global sum) and rewrites the function in place to return the loss
    and one gradient per parameter, in global declaration order, named by
    `mc.name` result attributes `loss` and `grad.<global>`. Other results are
    dropped: the function becomes a training step (`mc-optimizer` runs next).

    Each op's derivative is declared with the op (`DifferentiableOpInterface`,
    PyTorch's formulas, the same rules as the eager autograd): the pass walks
    the function backwards from a splat `1.0` seed (tagged
    `mc.autodiff_seed`, which `mc-loss-scaling` replaces with the loss
    scale), accumulates adjoints with `mc.add`, and differentiates only the
    ops between a parameter and the loss. An op there without a derivative
    (today `mc.conv2d`, the pools, `mc.batch_norm` and strided `mc.slice`;
    a foreign op; a `func.call`: inline first) is an error that
    names it. A parameter that does not reach the loss gets no gradient (as
    in PyTorch, so no optimizer touches it) and a warning. A parameter
    `freeze` names (its name, or a module path it lies under) is a
    constant, as `requires_grad=False` makes it in PyTorch. Run
    `mc-loss-scaling` right after this pass if at all: canonicalization may
    merge the tagged seed with other constants.

    ```mlir
    // Before:
    ml_program.global private @w(dense<...> : tensor<3x4xf32>) : tensor<3x4xf32>
    func.func @forward(%x: tensor<8x4xf32>) -> tensor<f32> {
      %w = ml_program.global_load_const @w : tensor<3x4xf32>
      %0 = mc.matmul %x, %w transpose_b : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
      %1 = mc.reduce_mean %0, dims = [0, 1] : (tensor<8x3xf32>) -> tensor<f32>
      return %1 : tensor<f32>
    }
    // After --mc-autodiff:
    func.func @forward(%x: tensor<8x4xf32>) -> (tensor<f32> {mc.name = "loss"},
                                               tensor<3x4xf32> {mc.name = "grad.w"}) {
      %w = ml_program.global_load_const @w : tensor<3x4xf32>
      %0 = mc.matmul %x, %w transpose_b : tensor<8x4xf32>, tensor<3x4xf32> -> tensor<8x3xf32>
      %1 = mc.reduce_mean %0, dims = [0, 1] : (tensor<8x3xf32>) -> tensor<f32>
      %seed = mc.constant {mc.autodiff_seed} dense<1.000000e+00> : tensor<f32>
      %2 = mc.reshape %seed : (tensor<f32>) -> tensor<1x1xf32>
      %3 = mc.broadcast_in_dim %2, dims = [0, 1] : (tensor<1x1xf32>) -> tensor<8x3xf32>
      %n = mc.constant dense<2.400000e+01> : tensor<8x3xf32>
      %4 = mc.div %3, %n : tensor<8x3xf32>
      %gw = mc.matmul %4, %x transpose_a : tensor<8x3xf32>, tensor<8x4xf32> -> tensor<3x4xf32>
      return %1, %gw : tensor<f32>, tensor<3x4xf32>
    }
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the function to differentiate (default: the only public one)">,
    Option<"lossIndex", "loss-index", "unsigned", /*default=*/"0",
           "which result of the function is the loss">,
    ListOption<"freeze", "freeze", "std::string",
               "parameters to leave untrained: a global named NAME, or "
               "NAME.<anything> (a module path: `encoder` freezes "
               "encoder.layers.0.weight); each must match one">,
  ];
  let dependentDialects = ["::mc::MCDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def OptimizerPass : Pass<"mc-optimizer", "mlir::ModuleOp"> {
  let summary = "append the optimizer update to a training step";
  let description = [{
    Runs after `mc-autodiff`, on a function returning `(loss, grad.<p>...)`.
    Every parameter `p` becomes a mutable global, read with
    `ml_program.global_load`; the optimizer's state becomes mutable globals
    next to it (`<p>.momentum_buffer` for SGD with momentum, `<p>.exp_avg`
    and `<p>.exp_avg_sq` for Adam and AdamW, and the step counter
    `optimizer.step`); the updates follow PyTorch's formulas (torch.optim.SGD,
    Adam, whose weight decay is an L2 term added to the gradient, and
    AdamW, whose decay scales the weight) and
    end in `ml_program.global_store`s; the function then returns the loss
    alone. With `max-grad-norm`, the gradients are first scaled by
    `min(1, max / (norm + 1e-6))`, `norm` the L2 norm of all of them
    together (torch.nn.utils.clip_grad_norm_), which the state
    `optimizer.grad_norm` keeps for logging. The update's state changes
    only where the step's `grads_finite` (from `mc-loss-scaling`) and
    `update_due` (from `mc-grad-accum`: the last micro-batch of a group)
    results, when present, are true; both are dropped from the results.
    With `lr-schedule` other than
    constant, or `warmup-steps`, the learning rate of step `t` (counted
    from 0, `optimizer.step`) is `lr * factor(t)` as Hugging Face's
    schedules compute it (warmup `t / warmup`, then constant, linear decay
    to 0 at `total-steps`, or a half cosine), kept in `optimizer.lr`. The artifact carries all of it as persistent state that the
    runtime updates in place.

    ```mlir
    // Before (after mc-autodiff):
    ml_program.global private @w(dense<...> : tensor<3x4xf32>) : tensor<3x4xf32>
    func.func @forward(%x: tensor<8x4xf32>) -> (tensor<f32> {mc.name = "loss"},
                                               tensor<3x4xf32> {mc.name = "grad.w"}) {
      %w = ml_program.global_load_const @w : tensor<3x4xf32>
      ...
      return %loss, %gw : tensor<f32>, tensor<3x4xf32>
    }
    // After --mc-optimizer=kind=sgd lr=0.1:
    ml_program.global private mutable @w(dense<...> : tensor<3x4xf32>) : tensor<3x4xf32>
    ml_program.global private mutable @optimizer.step(dense<0.0> : tensor<f32>) : tensor<f32>
    func.func @forward(%x: tensor<8x4xf32>) -> (tensor<f32> {mc.name = "loss"}) {
      %w = ml_program.global_load @w : tensor<3x4xf32>
      ...
      %lr = mc.constant dense<1.000000e-01> : tensor<3x4xf32>
      %0 = mc.mul %gw, %lr : tensor<3x4xf32>
      %1 = mc.sub %w, %0 : tensor<3x4xf32>
      ml_program.global_store @w = %1 : tensor<3x4xf32>
      ...
      return %loss : tensor<f32>
    }
    ```
  }];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"sgd\"",
           "the optimizer: sgd, adam or adamw">,
    Option<"lr", "lr", "std::optional<double>", /*default=*/"std::nullopt",
           "learning rate (default: 0.01 for sgd, 1e-3 for adam and adamw)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "std::optional<double>",
           /*default=*/"std::nullopt",
           "weight decay (default: 0 for sgd and adam, 0.01 for adamw)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "Adam(W) beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999",
           "Adam(W) beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "Adam(W) epsilon">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"0.0",
           "clip the gradients' global L2 norm to this before the update, "
           "as torch.nn.utils.clip_grad_norm_ (0: no clipping)">,
    ListOption<"noDecay", "no-weight-decay", "std::string",
               "glob patterns of parameters without weight decay (as "
               "optimizer parameter groups with weight_decay 0: '*.bias', "
               "'*norm*'); each must match one">,
    Option<"lrSchedule", "lr-schedule", "std::string",
           /*default=*/"\"constant\"",
           "the learning rate over the steps: constant, linear or cosine "
           "(Hugging Face's get_*_schedule_with_warmup)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "steps of linear warmup from 0 to lr">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"0",
           "the step at which linear decay reaches 0 and cosine its "
           "minimum (needed by both)">,
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the training-step function (default: the only public one)">,
  ];
  let dependentDialects = ["::mc::MCDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def AutoMixedPrecisionPass : Pass<"mc-amp", "mlir::ModuleOp"> {
  let summary = "mixed precision: casts per op policy (O1) or whole model (O2)";
  let description = [{
    Chooses, for every floating-point mc op, the element type it computes
    in, inserts `mc.cast`s where its operands have another, and records the
    decision and its reason on the op (`mc.precision`, `mc.precision_reason`,
    carried into the artifact and shown by `modelc inspect --precision`).
    Conventions of PyTorch autocast and Paddle AMP:

    - **O1**: ops on the low-precision list (default `mc.matmul`,
      `mc.conv2d`) compute in `dtype`; ops on the f32 list (softmax,
      log_softmax, layer_norm, batch_norm, exp, log, pow, reduce_sum,
      reduce_mean) compute in f32; every other op follows its inputs, and the
      widest wins when they differ.
    - **O2**: every floating-point op computes in `dtype` except the norms
      (layer_norm, batch_norm) and the f32 list overrides; parameters stay f32
      in their globals (master weights) and are cast after loading.

    The function's signature keeps its types (results are cast back), a
    value is cast to a type once however many ops use it, and lists can be
    changed per op kind (`low-ops`, `f32-ops`) and per op location
    (`locations=NAME:f32,NAME:bf16`, NAME as in `loc("NAME")`).

    ```mlir
    // O1, bf16: the matmul runs in bf16, the softmax in f32.
    %xb = mc.cast %x : tensor<8x64xf32> to tensor<8x64xbf16>
    %wb = mc.cast %w : tensor<10x64xf32> to tensor<10x64xbf16>
    %0 = mc.matmul %xb, %wb transpose_b {mc.precision = "bf16",
           mc.precision_reason = "O1: low-precision list"} : ...
    %1 = mc.cast %0 : tensor<8x10xbf16> to tensor<8x10xf32>
    %2 = mc.softmax %1, axis = 1 {mc.precision = "f32",
           mc.precision_reason = "O1: f32 list"} : tensor<8x10xf32>
    ```
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"bf16\"",
           "the low-precision type: bf16 or f16">,
    Option<"level", "level", "std::string", /*default=*/"\"O1\"",
           "O1 (per-op lists) or O2 (whole model except norms)">,
    ListOption<"lowOps", "low-ops", "std::string",
               "op names added to the low-precision list">,
    ListOption<"f32Ops", "f32-ops", "std::string",
               "op names added to the f32 list">,
    ListOption<"locations", "locations", "std::string",
               "per-location overrides NAME:f32 or NAME:<dtype>">,
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the function (default: the only public one)">,
  ];
  let dependentDialects = ["::mc::MCDialect"];
}

def DataParallelPartitionPass : Pass<"mc-dp-partition", "mlir::ModuleOp"> {
  let summary = "the SPMD training step of one of N data-parallel ranks";
  let description = [{
    Runs right after `mc-autodiff`, on `(loss, grad.<p>...)`. Each rank runs
    the same step on its own shard of the global batch (the function's
    inputs are one rank's shard: trace at the per-rank batch); the gradients
    become the mean over the ranks, so the optimizer sees the gradient of the
    global batch's mean loss (the average of the per-rank mean losses, which
    is that mean when shards are equal).

    The gradients are grouped into buckets of about `bucket-mb` MB in the
    order the backward pass produces them (the position of each gradient's
    defining op). A bucket's `mc.all_reduce_start` is placed right after its
    last gradient exists, so it is on the wire while the rest of the
    backward pass runs; every `mc.all_reduce_wait` is placed just before the
    return, after the whole backward pass, and its result (scaled by
    1 / ranks) is cut back into the gradients with `mc.slice` and
    `mc.reshape`. `mc-loss-scaling` and `mc-optimizer` come after and see
    ordinary gradients: the finite check runs on the reduced gradients,
    which are equal on every rank (an inf or NaN on one rank reaches every
    rank through the sum), so every rank skips the same steps.

    ```mlir
    // before
    %gb = mc.reduce_sum %d, dims = [0] : (tensor<8x4xf32>) -> tensor<4xf32>
    %gw = mc.matmul %d, %x transpose_a : ...
    return %loss, %gw, %gb
    // after, ranks=2, one bucket
    %gb = mc.reduce_sum ...
    %gw = mc.matmul ...
    %b = mc.all_reduce_start %gb, %gw ranks = 2 : (...) -> tensor<16xf32>
    %s = mc.all_reduce_wait %b scale = 5.000000e-01 : tensor<16xf32>
    %0 = mc.slice %s ... ; %1 = mc.reshape %0 ...
    return %loss, %1, ...
    ```
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1",
           "number of data-parallel processes (>= 1; 1 leaves the step as is)">,
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"25.0",
           "bucket size in MB (2^20 bytes); a bucket closes once it holds "
           "at least this much">,
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the training-step function (default: the only public one)">,
  ];
  let dependentDialects = ["::mc::MCDialect"];
}

def GradAccumPass : Pass<"mc-grad-accum", "mlir::ModuleOp"> {
  let summary = "gradient accumulation over N calls of a training step";
  let description = [{
    Runs after `mc-autodiff` (and `mc-dp-partition`), before
    `mc-loss-scaling` and `mc-optimizer`. Each call of the step is one
    micro-batch: it adds its gradients to `<p>.grad_accum`, and the step
    returns the group's mean so far, `(accumulated + g) / N`, in place of
    `grad.<p>`. The counter `optimizer.micro_step` (i64) tells the N-th call
    of a group, which restarts the sums at 0; `update_due` (an `i1`
    scalar, true on that call) is added to the results. `mc-loss-scaling`
    then checks and updates its scale on due calls only, and
    `mc-optimizer` updates on due calls only: one PyTorch loop that calls
    `backward()` on `loss / N` for each micro-batch, then `step()` (and
    GradScaler's `step` and `update`) and `zero_grad()` every N.

    ```mlir
    %micro = ml_program.global_load @optimizer.micro_step : tensor<i64>
    %due = mc.compare EQ, %micro, %last : ...
    %sum = mc.add %acc, %gw : tensor<3x4xf32>
    ml_program.global_store @w.grad_accum = %sum_or_zero : tensor<3x4xf32>
    %mean = mc.mul %sum, %one_nth : tensor<3x4xf32>
    return %loss, %mean, %due
    ```
  }];
  let options = [
    Option<"steps", "steps", "int64_t", /*default=*/"1",
           "micro-batches per update (1: the pass does nothing)">,
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the training-step function (default: the only public one)">,
  ];
  let dependentDialects = ["::mc::MCDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def LossScalingPass : Pass<"mc-loss-scaling", "mlir::ModuleOp"> {
  let summary = "dynamic loss scaling inside the training step";
  let description = [{
    Runs between `mc-autodiff` and `mc-optimizer`. The backward pass is
    seeded with the loss scale instead of 1 (so every low-precision
    intermediate of the backward pass is scaled up, which is the point);
    the gradients are unscaled (multiplied by 1 / scale, as GradScaler does);
    `grads_finite` (an `i1` scalar: every gradient element is finite) is
    added to the results, and `mc-optimizer` keeps parameters and optimizer
    state unchanged on a step where it is false. The scale and its growth
    counter are mutable globals (`loss_scale`, `loss_scale.growth_tracker`)
    updated as torch.cuda.amp.GradScaler does: times `backoff` and counter
    reset on overflow; times `growth` after `interval` clean steps in a
    row. After `mc-grad-accum` (an `update_due` result), the check sees a
    group's summed gradients and the scale changes on due calls only, as
    GradScaler's `update()` once per optimizer step. Nothing leaves the
    graph: no host synchronisation per step.

    ```mlir
    %scale = ml_program.global_load @loss_scale : tensor<f32>
    // ... backward seeded with %scale ...
    %inv = mc.div %one, %scale : tensor<f32>
    %g = mc.mul %gw_scaled, %inv_b : tensor<3x4xf32>
    %finite = ... : tensor<i1>
    ml_program.global_store @loss_scale = %new_scale : tensor<f32>
    return %loss, %g, %finite
    ```
  }];
  let options = [
    Option<"init", "init", "double", /*default=*/"65536.0",
           "initial loss scale">,
    Option<"growth", "growth", "double", /*default=*/"2.0",
           "scale factor after `interval` clean steps">,
    Option<"backoff", "backoff", "double", /*default=*/"0.5",
           "scale factor on a step with inf or NaN gradients">,
    Option<"interval", "interval", "int64_t", /*default=*/"2000",
           "clean steps between growths">,
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the training-step function (default: the only public one)">,
  ];
  let dependentDialects = ["::mc::MCDialect",
                           "::mlir::ml_program::MLProgramDialect"];
}

def FusePass : Pass<"mc-fuse", "mlir::ModuleOp"> {
  let summary = "group elementwise chains and epilogues into mc.fused regions";
  let description = [{
    Memory traffic, not arithmetic, makes an op-by-op model slow: every
    unfused elementwise op reads and writes the whole tensor. This pass
    groups producer-consumer chains of the entry function into `mc.fused`
    regions, which a backend runs as one step (one pass over memory on the
    CPU, one kernel on a GPU). Which ops may join is the op registry's
    business (`mcFusible`, `mcEpilogueAnchor` in ir/MCOps.td), not a list
    in the pass.

    Rules (greedy, from each region's last op backwards, as XLA's
    instruction fusion):

    - An elementwise op (`mcFusible`) joins the region of its consumer when
      every user of its result is already in that region: work is never
      duplicated. Its result must have the region's shape.
    - Multiple outputs (option `multi-output`): in a plain elementwise
      region (no anchor, no reduction ending it), an elementwise op whose
      value is also used outside joins too, and the value becomes another
      result of the region, when every outside user comes after the
      region's last op (a `global_store` of it before then moves down
      after the region, if nothing between touches that global): an
      optimizer's new moments and new parameter in one pass, a forward
      value the backward pass reads written by the region that uses it.
      Still computed once, and written once.
    - A `mc.broadcast_in_dim` joins as a load: it only indexes, so it is
      cloned into every region that reads it (its operand becomes a region
      input) and the original stays if something else uses it.
    - A splat constant is read as a region input (the backend broadcasts
      the scalar; no full tensor is made).
    - One `mc.matmul` or `mc.conv2d` (`mcEpilogueAnchor`) may lead a region
      whose elementwise ops are its epilogue (bias, residual add,
      activation), when the region consumes all of its result.
    - A reduction over the trailing dims of a value the region computes
      may end it (the region computes that value a tile of whole rows at a
      time): the region's other values have the reduction's operand shape.
      A reduction to one value of more than `max-full-reduction`
      elements (65536; a loss's mean over a batch of images) does not:
      its one row would be one tile, out of cache with all threads but
      one idle. `mc-split-reductions` runs before this pass and splits
      such reductions in two (rows of the trailing dims, which may end a
      region, then the partials); one it could not split runs as its own
      step.
    - Integer arithmetic (i32, i64) stays unfused; f32, f16, bf16 and i1
      values fuse.
    - Everything else is a boundary: library calls other than the anchor,
      reductions, softmax, log_softmax, layer_norm and batch_norm (their
      own kernels, never split), shape ops, globals and their stores
      (state updates alias), and other regions.
    - A region of one op stays that op.
    - The attention pattern, `matmul(q, k)`, an optional scale and mask
      (elementwise ops whose other operand is a splat constant or a
      broadcast), `softmax` over the last dim and `matmul(p, v)`, with an
      optional scale of q before the first matmul, each intermediate used
      once, becomes one region marked `attention` (found first, so its ops
      are not claimed by elementwise regions). A backend gives it one
      kernel; the CPU runs it one `[S, T]` slice of the batch and heads at a
      time, the scores staying in cache.
    - Views (option `views`): the transposes, reshapes and slices that make
      an attention region's q, k and v out of a projection (PyTorch's
      MultiheadAttention slices the packed in_proj result, splits the heads
      and transposes them), and a transpose an elementwise region reads,
      join the region when each is a strided view of the value they start
      from (`shapes::applyView`; static shapes). The device reads the
      input's bytes at those strides: no step copies them.

    Every op of a region has all its users inside the region except the
    last and the extra results', whose outside users all come after the
    last: grouping cannot create a cycle.

    ```mlir
    // Before:
    %0 = mc.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
    %1 = mc.add %x, %0 : tensor<8x4xf32>
    %2 = mc.relu %1 : tensor<8x4xf32>
    // After:
    %2 = mc.fused %b, %x : (tensor<4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> {
    ^bb0(%a0: tensor<4xf32>, %a1: tensor<8x4xf32>):
      %0 = mc.broadcast_in_dim %a0, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
      %1 = mc.add %a1, %0 : tensor<8x4xf32>
      %2 = mc.relu %1 : tensor<8x4xf32>
      mc.yield %2 : tensor<8x4xf32>
    }
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the entry function (default: the only public func.func)">,
    Option<"epilogues", "epilogues", "bool", /*default=*/"true",
           "let matmul and conv2d lead a region (their epilogue)">,
    Option<"attention", "attention", "bool", /*default=*/"true",
           "mark the attention pattern as one region">,
    Option<"views", "views", "bool", /*default=*/"true",
           "let a region read an input through transposes, reshapes and "
           "slices (strided views) instead of a step copying it">,
    Option<"attentionViews", "attention-views", "bool", /*default=*/"true",
           "with views: let an attention region read q, k and v as views">,
    Option<"multiOutput", "multi-output", "bool", /*default=*/"true",
           "let an elementwise value used outside join a region as one "
           "more result">,
    Option<"maxFullReduction", "max-full-reduction", "int64_t",
           /*default=*/"65536",
           "the most elements a reduction to one value may reduce and "
           "still end a region">,
  ];
  let dependentDialects = ["::mc::MCDialect"];
}

def SplitReductionsPass : Pass<"mc-split-reductions", "mlir::ModuleOp"> {
  let summary = "split a long reduction with few outputs into two";
  let description = [{
    A GPU reduction kernel gives each output a block (rows) or a thread
    (other dims). A reduction of many elements into few outputs then runs
    on a few SMs of a GPU of 132: the loss's mean over a batch, the
    non-finite check of a [4096, 4096] gradient under loss scaling (one
    block walking 16M elements), a batch norm's statistics over N, H and W
    (one thread per channel). As XLA's tree reduction rewriter does, this
    pass rewrites such a reduction into two: the first over an inner part
    of the reduced elements, with many outputs, the second over what is
    left, now short. Codegen runs it with its targets' limits
    (`Target::reductionSplit`): the CPU's are full reductions of more than
    65536 elements when fusing (a region's tile is whole rows), cuda's
    the defaults, fused or not.

    An `mc.reduce_sum`, `reduce_mean`, `reduce_max` or `reduce_min` of at
    most `max-outputs` outputs is split when:

    - its dims end in a run of trailing dims but are not only that run
      (`[0, 2, 3]` of NCHW) and the run holds 32 elements or more: first
      over the run (rows), then over the other dims;
    - its dims are one trailing run (rows, or everything) of at least
      `min-reduced` elements: first over the smallest trailing part of at
      least `inner` elements (else the largest proper one, if 32 or more),
      then the rest; where no dims boundary does it (one long dim), that
      dim is reshaped to `[L / k, k]`, k the smallest divisor of L with
      `k * (the dims after it) >= inner`;
    - the last dim is kept (one thread per output walks the elements) and
      it reduces at least 1024 elements per output: its largest reduced
      dim L becomes `[L / k, k]`, k the divisor nearest to sqrt(L), and
      the first reduction is over k.

    Each new reduction is looked at again (a full reduction of 2^24
    elements becomes three). A sum or mean of f16 or bf16 sums in f32 (a
    cast before, one after), so the partials are not rounded to the narrow
    type. Means of equal-sized parts give the mean; max and min are exact;
    sums differ from one pass by rounding only. `keepdim` is kept by a
    reshape at the end. Dims of dynamic size are sized at the batch's OPT
    and never reshaped, nor is a shape that holds the batch twice.

    ```mlir
    // Before:
    %0 = mc.reduce_min %g, dims = [0, 1] : (tensor<4096x4096xf32>) -> tensor<f32>
    // After:
    %0 = mc.reduce_min %g, dims = [1] : (tensor<4096x4096xf32>) -> tensor<4096xf32>
    %1 = mc.reduce_min %0, dims = [0] : (tensor<4096xf32>) -> tensor<f32>
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the entry function (default: the only public func.func)">,
    Option<"maxOutputs", "max-outputs", "int64_t", /*default=*/"1024",
           "split only reductions with at most this many outputs">,
    Option<"minReduced", "min-reduced", "int64_t", /*default=*/"8192",
           "split row reductions of at least this many elements per output">,
    Option<"inner", "inner", "int64_t", /*default=*/"4096",
           "the elements per output the first of two row reductions aims at">,
  ];
  let dependentDialects = ["::mc::MCDialect"];
}

def RaiseLayerNormPass : Pass<"mc-raise-layer-norm", "mlir::ModuleOp"> {
  let summary = "a layer norm written out in ops becomes one mc.layer_norm";
  let description = [{
    PyTorch exports `nn.LayerNorm` to ONNX below opset 17 as
    ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add: five steps
    after fusion, each a pass over the activations, where mc.layer_norm is
    one (onnxruntime's LayerNormFusion does the same). Matched:

    - `d = x - broadcast(reduce_mean(x))`, `v = reduce_mean(pow(d, 2))`
      (or `mul(d, d)`), `y = d / broadcast(sqrt(v + eps))`, both means
      keepdim over the same trailing dims `[axis, rank)` of static size,
      `eps` a splat, every intermediate used only inside the pattern:
      `mc.layer_norm(x, ones, zeros, axis, eps)`;
    - then `layer_norm(x, ones, zeros) * broadcast(g)` folds `g` in as
      gamma, and `layer_norm(x, g, zeros) + broadcast(b)` folds `b` in as
      beta, where the broadcast spreads a tensor of the normalized shape
      over the trailing dims (either operand order).

    Anything else is left as it is. The same formula as the ops it
    replaces (biased variance, epsilon inside the root), computed by the
    layer_norm kernel: results agree to rounding, not bit for bit. Runs in
    the compile pipeline (inference); training keeps the ops it was given.

    ```mlir
    // Before:
    %m = mc.reduce_mean %x, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %mb = mc.broadcast_in_dim %m, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
    %d = mc.sub %x, %mb : tensor<4x8xf32>
    %sq = mc.mul %d, %d : tensor<4x8xf32>
    %v = mc.reduce_mean %sq, dims = [1] keepdim : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %e = mc.constant dense<1.0e-05> : tensor<4x1xf32>
    %ve = mc.add %v, %e : tensor<4x1xf32>
    %s = mc.sqrt %ve : tensor<4x1xf32>
    %sb = mc.broadcast_in_dim %s, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x8xf32>
    %n = mc.div %d, %sb : tensor<4x8xf32>
    %gb = mc.broadcast_in_dim %g, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
    %y = mc.mul %n, %gb : tensor<4x8xf32>
    // After:
    %zeros = mc.constant dense<0.0> : tensor<8xf32>
    %y = mc.layer_norm %x, %g, %zeros, axis = 1, epsilon = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the entry function (default: the only public func.func)">,
  ];
  let dependentDialects = ["::mc::MCDialect"];
}

def PretransposeWeightsPass
    : Pass<"mc-pretranspose-weights", "mlir::ModuleOp"> {
  let summary = "store the constant weights that matmuls read transposed "
                "in the layout they are read in";
  let description = [{
    For inference on a target whose matrix products run faster with the
    right operand as `[..., K, N]` (the CPU: oneDNN's and OpenBLAS's sgemm,
    measured in docs/benchmarks.md): `mc.matmul %x, %w transpose_b` where
    `%w` is a constant (`mc.constant`, or `ml_program.global_load_const`
    of an immutable global) becomes `mc.matmul %x, %wt` with `%wt` a new
    `mc.constant` holding `%w` with its last two dimensions swapped,
    computed here once. `nn.Linear` weights (`[out, in]`, read transposed)
    are the case.

    A constant is rewritten only when every use of it is such a matmul's
    right operand, so the file never holds a weight twice (a tied
    embedding, also read by a gather, is left), not a splat (the same
    either way), and not when every such matmul multiplies fewer than 8
    rows (static, or at a dynamic batch's favoured size, `mc.batch`'s OPT):
    oneDNN runs such near matrix-vector products faster from `[N, K]` (a
    dot product per output). Any element type. The products compute the same sums; the library may
    round them differently.

    ```mlir
    // Before:
    %w = ml_program.global_load_const @w : tensor<3x8xf32>
    %0 = mc.matmul %x, %w transpose_b : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x3xf32>
    // After:
    %wt = mc.constant dense<...> : tensor<8x3xf32>
    %0 = mc.matmul %x, %wt : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the entry function (default: the only public func.func)">,
  ];
  let dependentDialects = ["::mc::MCDialect"];
}

def ChannelsLastPass : Pass<"mc-channels-last", "mlir::ModuleOp"> {
  let summary = "run convolutions and pooling on NHWC activations";
  let description = [{
    For inference on a target whose convolutions run faster on NHWC
    activations than on NCHW ones reordered per call (the CPU: oneDNN's
    brgemm kernels take NHWC directly; measured in docs/decisions.md,
    "Channels-last activations"; cuda: cuDNN's tensor-core kernels, whose
    plans for NCHW transpose into their workspace at each call): each f32
    or bf16 `mc.conv2d`, and each
    `mc.max_pool2d` and `mc.avg_pool2d` when a convolution moved, gets
    `channels_last`, between `mc.transpose` of its input to NHWC
    (`[0, 2, 3, 1]`) and of its result back to NCHW (`[0, 3, 1, 2]`).
    The weights stay OIHW.

    Those NHWC -> NCHW transposes then move down through what follows
    until they meet their inverse and cancel:
    - an elementwise op (mc-fuse's: every operand of the result's shape)
      whose operands are such transposes, broadcasts (a bias's
      `broadcast_in_dim` is rebuilt with its dims mapped, `[1]` -> `[3]`)
      or splat constants;
    - a reduction (`reduce_sum`, `reduce_mean`, `reduce_max`,
      `reduce_min`), its dims mapped;
    - a concat of such transposes, its axis mapped;
    and a transpose that moves only size-1 dims becomes a reshape (a
    global average pool's `[N, 1, 1, C]`). A transpose that meets anything
    else stays. Only NHWC -> NCHW transposes (`[0, 3, 1, 2]`) move, so
    attention's head transposes (`[0, 2, 1, 3]`) stay where mc-fuse looks
    for them. f16 convolutions are left NCHW (on most CPUs oneDNN has no
    f16 kernel, and the reference would transpose around each) unless
    `f16` is set (the cuda target: cuDNN's tensor cores). Training
    graphs never run it (autodiff
    refuses `channels_last`).

    ```mlir
    // Before:
    %0 = mc.conv2d %x, %w, strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1
        : (tensor<1x8x4x4xf32>, tensor<8x8x3x3xf32>) -> tensor<1x8x4x4xf32>
    %1 = mc.relu %0 : tensor<1x8x4x4xf32>
    // After:
    %t = mc.transpose %x, permutation = [0, 2, 3, 1] : (tensor<1x8x4x4xf32>) -> tensor<1x4x4x8xf32>
    %0 = mc.conv2d %t, %w, strides = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1 channels_last
        : (tensor<1x4x4x8xf32>, tensor<8x8x3x3xf32>) -> tensor<1x4x4x8xf32>
    %1 = mc.relu %0 : tensor<1x4x4x8xf32>
    %2 = mc.transpose %1, permutation = [0, 3, 1, 2] : (tensor<1x4x4x8xf32>) -> tensor<1x8x4x4xf32>
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the entry function (default: the only public func.func)">,
    Option<"f16", "f16", "bool", /*default=*/"false",
           "f16 convolutions too (cuDNN's NHWC tensor-core kernels)">,
  ];
  let dependentDialects = ["::mc::MCDialect"];
}

def FoldBatchNormPass : Pass<"mc-fold-batch-norm", "mlir::ModuleOp"> {
  let summary = "fold inference batch_norm into the conv2d before it";
  let description = [{
    For inference: `mc.batch_norm(mc.conv2d(x, W) [+ broadcast(b)])` whose
    weight, statistics and parameters are constants (`mc.constant` or
    `ml_program.global_load_const`) becomes `mc.conv2d(x, W') +
    broadcast(b')` with, per output channel c,
    `s = scale[c] / sqrt(variance[c] + epsilon)`, `W'[c] = W[c] * s` and
    `b'[c] = (b[c] - mean[c]) * s + offset[c]` (b = 0 without a bias),
    computed at compile time in double and rounded once to the weight's
    type. f32 weights only; the folded convolution must be the batch
    norm's only user of it (feature axis 1, NCHW). A batch norm that does
    not match is left as it is.

    ```mlir
    // Before:
    %0 = mc.conv2d %x, %w, ... : (...) -> tensor<1x4x6x6xf32>
    %1 = mc.batch_norm %0, %s, %o, %m, %v, epsilon = 1.0e-05, feature_axis = 1
        : tensor<1x4x6x6xf32>, tensor<4xf32>
    // After:
    %w2 = mc.constant dense<...> : tensor<4x3x3x3xf32>
    %b2 = mc.constant dense<...> : tensor<4xf32>
    %0 = mc.conv2d %x, %w2, ... : (...) -> tensor<1x4x6x6xf32>
    %1 = mc.broadcast_in_dim %b2, dims = [1] : (tensor<4xf32>) -> tensor<1x4x6x6xf32>
    %2 = mc.add %0, %1 : tensor<1x4x6x6xf32>
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the entry function (default: the only public func.func)">,
  ];
  let dependentDialects = ["::mc::MCDialect"];
}

def FoldConstantsPass : Pass<"mc-fold-constants", "mlir::ModuleOp"> {
  let summary = "compute constant subgraphs once, at compile time";
  let description = [{
    An op of the entry function whose operands are all constants
    (`mc.constant`, or `ml_program.global_load_const` of an immutable
    global) is computed at compile time by the runtime's own CPU kernel for
    it (the same code that would run it: "one source of numerical truth")
    and replaced by an `mc.constant`. Examples: the slices of
    `MultiheadAttention`'s `in_proj_weight` (made at every run otherwise),
    a causal mask built from `arange`, comparisons and `select`, a position
    embedding gathered at constant positions.

    Not folded: a `broadcast_in_dim` on its own (fusion reads the small
    tensor; folding would write the large one into the file), results over
    `max-bytes` (16 MiB by default) unless the op alone reads constants at
    least as large (the file does not grow: mc-amp's cast of a weight to
    bf16 replaces the f32 weight by its half-size cast), dynamic shapes, and an op whose kernel
    fails at compile time (a gather index out of range stays a run-time
    error). In the train pipeline (`globals=false`) no global is a
    constant: the parameters are immutable globals until mc-autodiff and
    mc-optimizer have read them, and an op folded on one would have no
    gradient.

    ```mlir
    // Before:
    %w = ml_program.global_load_const @in_proj_weight : tensor<192x64xf32>
    %q = mc.slice %w, start = [0, 0], limit = [64, 64], strides = [1, 1]
        : (tensor<192x64xf32>) -> tensor<64x64xf32>
    // After:
    %q = mc.constant dense<...> : tensor<64x64xf32>
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "the entry function (default: the only public func.func)">,
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"16 << 20",
           "the largest result folded, in bytes">,
    Option<"globals", "globals", "bool", /*default=*/"true",
           "whether immutable globals count as constants (the train "
           "pipeline: false, since its globals are the parameters "
           "mc-autodiff differentiates and the state it updates)">,
  ];
  let dependentDialects = ["::mc::MCDialect"];
}

#endif // MC_PASSES_TD

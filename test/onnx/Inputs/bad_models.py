# Writes small ONNX files for the importer's error tests (and one good model
# with external data), built with onnx's helper API:
#   bad_models.py OUTDIR
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(os.path.join(out, "model"), exist_ok=True)


def mlp(name, opset=13, batch=2):
    """y = relu(x @ w + b), w [64, 64] (a large enough tensor that cutting
    the file in half cuts it)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="matmul"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="add"),
             helper.make_node("Relu", ["hb"], ["y"], name="relu")]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 64])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph,
                             opset_imports=[helper.make_opsetid("", opset)])


def save(model, name):
    onnx.save(model, os.path.join(out, name))


# An op modelc does not import.
graph = helper.make_graph(
    [helper.make_node("Det", ["x"], ["d"], name="det0")], "det",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])],
    [helper.make_tensor_value_info("d", TensorProto.FLOAT, [])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "unsupported.onnx")

# Another, in a node without a name (named by its output).
graph = helper.make_graph(
    [helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["keep"])],
    "nms",
    [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, 4]),
     helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 4])],
    [helper.make_tensor_value_info("keep", TensorProto.INT64, [4, 3])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
     "unsupported-unnamed.onnx")

# A shape computed from an input's values, not from its shape.
graph = helper.make_graph(
    [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape0")],
    "dynamic_reshape",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "value-shape.onnx")

# A node reading a value nothing defines.
graph = helper.make_graph(
    [helper.make_node("Relu", ["nowhere"], ["y"], name="relu0")], "undefined",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "undefined-input.onnx")

# An opset outside 13..17, and a dynamic batch dimension.
save(mlp("old", opset=11), "opset11.onnx")
save(mlp("dynamic", batch="N"), "dynamic.onnx")

# The MLP cut in half (inside the weights).
data = mlp("mlp").SerializeToString()
open(os.path.join(out, "truncated.onnx"), "wb").write(data[: len(data) // 2])

# Weights in a file next to the model: accepted. The reference output is
# computed with numpy.
model = mlp("external")
w = numpy_helper.to_array(model.graph.initializer[0])
b = numpy_helper.to_array(model.graph.initializer[1])
onnx.save_model(model, os.path.join(out, "model", "external.onnx"),
                save_as_external_data=True, all_tensors_to_one_file=True,
                location="weights.bin", size_threshold=0)
x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "ref_y.npy"), np.maximum(x @ w + b, 0))

# External data whose location leaves the model's folder: refused. The file
# it names exists, so the refusal is for the location, not a missing file.
outside = os.path.join(out, "outside.bin")
open(outside, "wb").write(np.zeros(64 * 64, np.float32).tobytes())
link = os.path.join(out, "model", "link.bin")
if os.path.lexists(link):
    os.remove(link)
os.symlink(os.path.abspath(outside), link)


def with_location(name, location):
    m = mlp(name)
    w = m.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    entry = w.external_data.add()
    entry.key, entry.value = "location", location
    save(m, os.path.join("model", name + ".onnx"))


with_location("dotdot", "../outside.bin")
with_location("absolute", os.path.abspath(outside))
with_location("symlink", "link.bin")


# Issue 12 item 2: a window op with strides [0, 0] (the output size divides
# by the stride).
def window_op(op, name, **attrs):
    rng = np.random.default_rng(0)
    inits = []
    inputs = ["x"]
    if op == "Conv":
        inits.append(numpy_helper.from_array(
            rng.standard_normal((3, 2, 3, 3)).astype(np.float32), "w"))
        inputs.append("w")
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["y"], name=name, **attrs)], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                       ["n", "c", "h", "w"])], inits)
    save(helper.make_model(graph,
                           opset_imports=[helper.make_opsetid("", 13)]),
         name + ".onnx")


window_op("Conv", "conv-stride0", strides=[0, 0])
window_op("Conv", "conv-stride0-same", strides=[0, 0], auto_pad="SAME_UPPER")
window_op("MaxPool", "maxpool-stride0", kernel_shape=[2, 2], strides=[0, 0])
window_op("AveragePool", "avgpool-stride0", kernel_shape=[2, 2],
          strides=[0, 0])
window_op("Conv", "conv-dilation0", dilations=[0, 1])

# Issue 12 item 8: Split sizes with a negative entry that still add up to
# the dimension, and a Range with an infinite limit.
graph = helper.make_graph(
    [helper.make_node("Split", ["x", "split"], ["a", "b"], name="split0",
                      axis=0)], "split",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["a", 2]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, ["b", 2])],
    [numpy_helper.from_array(np.array([-1, 4], np.int64), "split")])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "split-negative.onnx")


def range_model(name, limit, delta=1.0):
    graph = helper.make_graph(
        [helper.make_node("Range", ["start", "limit", "delta"], ["r"],
                          name="range0"),
         helper.make_node("Add", ["x", "r"], ["y"], name="add0")], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
        [numpy_helper.from_array(np.array(0, np.float32), "start"),
         numpy_helper.from_array(np.array(limit, np.float32), "limit"),
         numpy_helper.from_array(np.array(delta, np.float32), "delta")])
    save(helper.make_model(graph,
                           opset_imports=[helper.make_opsetid("", 13)]),
         name + ".onnx")


range_model("range-inf", np.inf)
range_model("range-nan", np.nan)
range_model("range-huge", 1e30)

# A BatchNormalization whose epsilon is NaN (the onnx fuzz target): the
# artifact writer's verifier refused it as a compiler bug.
graph = helper.make_graph(
    [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                      name="bn0", epsilon=float("nan"))], "bn-nan",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 3])],
    [numpy_helper.from_array(np.ones(2, np.float32), n)
     for n in ("s", "b", "m", "v")])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "bn-nan-epsilon.onnx")

# Unsqueeze naming one axis twice (the checker allows it; the importer read
# past the input's shape).
graph = helper.make_graph(
    [helper.make_node("Unsqueeze", ["x", "axes"], ["y"], name="unsq0")],
    "unsqueeze-dup",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b", "c"])],
    [numpy_helper.from_array(np.array([0, -4], np.int64), "axes")])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "unsqueeze-duplicate-axes.onnx")

# Resize in a mode the spec does not have, and exclude_outside (a cubic
# option) with linear.
for name, attrs in (("resize-bad-mode", dict(mode="bicubic")),
                    ("resize-exclude-linear",
                     dict(mode="linear", exclude_outside=1))):
    graph = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["y"],
                          name="resize0", **attrs)],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 8, 8])],
        [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32),
                                 "scales")])
    save(helper.make_model(graph,
                           opset_imports=[helper.make_opsetid("", 13)]),
         name + ".onnx")

# Mod of floats (modelc computes Mod of integers).
graph = helper.make_graph(
    [helper.make_node("Mod", ["a", "b"], ["r"], name="mod0", fmod=1)],
    "mod-float",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4]),
     helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])],
    [helper.make_tensor_value_info("r", TensorProto.FLOAT, [4])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "mod-float.onnx")

# Floor of integers (ONNX defines Floor, Ceil and Round for floats).
graph = helper.make_graph(
    [helper.make_node("Floor", ["a"], ["r"], name="floor0")],
    "floor-int",
    [helper.make_tensor_value_info("a", TensorProto.INT64, [4])],
    [helper.make_tensor_value_info("r", TensorProto.INT64, [4])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "floor-int.onnx")

# ReduceMean of integers (mc.reduce_mean is defined for floats; integer
# sums are folded by the importer).
graph = helper.make_graph(
    [helper.make_node("ReduceMean", ["a"], ["r"], name="imean0",
                      keepdims=0)],
    "reducesum-int",
    [helper.make_tensor_value_info("a", TensorProto.INT64, [2, 3])],
    [helper.make_tensor_value_info("r", TensorProto.INT64, [])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "reducesum-int.onnx")

# Two training-mode batch norms sharing one running mean and variance (a
# module called twice): for --train, refused (modelc updates a running
# statistic once per step).
stats = [helper.make_tensor(n, TensorProto.FLOAT, [2], v) for n, v in
         [("g", [1, 1]), ("b", [0, 0]), ("rm", [0, 0]), ("rv", [1, 1])]]
graph = helper.make_graph(
    [helper.make_node("BatchNormalization", ["x", "g", "b", "rm", "rv"],
                      ["y1"], name="bn1", training_mode=1),
     helper.make_node("BatchNormalization", ["y1", "g", "b", "rm", "rv"],
                      ["y2"], name="bn2", training_mode=1),
     helper.make_node("ReduceMean", ["y2"], ["loss"], name="mean0",
                      keepdims=0)],
    "bn-shared-stats",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 2, 3])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], stats)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]),
     "bn-shared-stats.onnx")

# A training-mode Dropout of Constant nodes only: a node of constants,
# evaluated at import, whose one mask would be every step's (one reading a
# float initializer, a parameter, is traced); and a Dropout whose
# training_mode is computed.
consts = [helper.make_tensor("ratio", TensorProto.FLOAT, [], [0.5]),
          helper.make_tensor("on", TensorProto.BOOL, [], [True])]
const_nodes = [
    helper.make_node("Constant", [], [name], name=name + "0",
                     value=helper.make_tensor(name + "v", kind, dims, vals))
    for name, kind, dims, vals in [("w", TensorProto.FLOAT, [2, 3], [1] * 6),
                                   ("r", TensorProto.FLOAT, [], [0.5]),
                                   ("t", TensorProto.BOOL, [], [True])]]
graph = helper.make_graph(
    const_nodes +
    [helper.make_node("Dropout", ["w", "r", "t"], ["wd"], name="drop0"),
     helper.make_node("Mul", ["x", "wd"], ["y"], name="mul0"),
     helper.make_node("ReduceMean", ["y"], ["loss"], name="mean0",
                      keepdims=0)],
    "dropout-constant",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], consts)
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "dropout-constant.onnx")
graph = helper.make_graph(
    [helper.make_node("ReduceMean", ["x"], ["m"], name="mean1", keepdims=0),
     helper.make_node("Greater", ["m", "ratio"], ["computed"], name="gt0"),
     helper.make_node("Dropout", ["x", "ratio", "computed"], ["xd"],
                      name="drop1"),
     helper.make_node("ReduceMean", ["xd"], ["loss"], name="mean0",
                      keepdims=0)],
    "dropout-computed-mode",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    consts[:1])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "dropout-computed-mode.onnx")

# SoftmaxCrossEntropyLoss with 3 labels for 2 samples.
graph = helper.make_graph(
    [helper.make_node("SoftmaxCrossEntropyLoss", ["s", "l"], ["r"],
                      name="sce0")],
    "sce-labels",
    [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 5]),
     helper.make_tensor_value_info("l", TensorProto.INT64, [3])],
    [helper.make_tensor_value_info("r", TensorProto.FLOAT, [])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "sce-labels.onnx")

# A DOUBLE initializer (in double_data) holding a value past f32's range:
# modelc computes DOUBLE in f32, where it would be an infinity.
graph = helper.make_graph(
    [helper.make_node("Cast", ["a"], ["d"], name="todouble", to=11),
     helper.make_node("Add", ["d", "c"], ["r"], name="add0")],
    "double-overflow",
    [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("r", TensorProto.DOUBLE, [2])],
    [helper.make_tensor("c", TensorProto.DOUBLE, [2], [0.5, -1e300])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "double-overflow.onnx")

# GatherElements with a constant index past its axis (3 along a dim of 3).
graph = helper.make_graph(
    [helper.make_node("GatherElements", ["x", "idx"], ["y"], name="ge0",
                      axis=1)],
    "gather-elements-range",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
    [numpy_helper.from_array(np.array([[0, 3], [1, -3]], np.int64), "idx")])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "gather-elements-range.onnx")

# ScatterND by computed indices (modelc builds its row map from constant
# ones), by repeated rows with reduction add, and into a computed value
# with a dynamic batch (--batch): its row map holds one batch size.
graph = helper.make_graph(
    [helper.make_node("ScatterND", ["x", "idx", "upd"], ["y"],
                      name="scatter0")],
    "scatter-indices-input",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3]),
     helper.make_tensor_value_info("idx", TensorProto.INT64, [1, 1])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])],
    [numpy_helper.from_array(np.ones((1, 3), np.float32), "upd")])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "scatter-indices-input.onnx")
graph = helper.make_graph(
    [helper.make_node("ScatterND", ["x", "idx", "upd"], ["y"],
                      name="scatter1", reduction="add")],
    "scatter-repeat-add",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])],
    [numpy_helper.from_array(np.array([[2], [0], [2]], np.int64), "idx"),
     numpy_helper.from_array(np.ones((3, 3), np.float32), "upd")])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]),
     "scatter-repeat-add.onnx")
graph = helper.make_graph(
    [helper.make_node("ScatterND", ["x", "idx", "upd"], ["y"],
                      name="scatter2")],
    "scatter-dynamic-batch",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    [numpy_helper.from_array(np.array([[1]], np.int64), "idx"),
     numpy_helper.from_array(np.ones((1, 3), np.float32), "upd")])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "scatter-dynamic-batch.onnx")

# GridSample in bicubic mode (bilinear and nearest are imported).
graph = helper.make_graph(
    [helper.make_node("GridSample", ["x", "grid"], ["y"], name="sample0",
                      mode="bicubic")],
    "grid-bicubic",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4]),
     helper.make_tensor_value_info("grid", TensorProto.FLOAT, [1, 2, 2, 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]),
     "grid-bicubic.onnx")

# ScatterElements with 65 entries along its axis (one select each: at
# most 64).
graph = helper.make_graph(
    [helper.make_node("ScatterElements", ["x", "idx", "upd"], ["y"],
                      name="scatter3", axis=0)],
    "scatter-elements-long",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [70, 2]),
     helper.make_tensor_value_info("idx", TensorProto.INT64, [65, 2]),
     helper.make_tensor_value_info("upd", TensorProto.FLOAT, [65, 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [70, 2])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "scatter-elements-long.onnx")

# ConvTranspose given its output_shape (modelc takes pads).
graph = helper.make_graph(
    [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="deconv0",
                      strides=[2, 2], output_shape=[8, 8])],
    "deconv-output-shape",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])],
    [numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "w")])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]),
     "deconv-output-shape.onnx")

# Issue 12 item 4: external data that is a FIFO (opening it blocked).
fifo = os.path.join(out, "model", "data.fifo")
if not os.path.exists(fifo):
    os.mkfifo(fifo)
with_location("fifo", "data.fifo")

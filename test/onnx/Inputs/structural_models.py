# Writes ONNX models for the structural-import tests (built with onnx's
# helper API), with their inputs and PyTorch's outputs as .npy files:
#   structural_models.py OUTDIR
# int_div.onnx   y = float(Div(x, z)) for int64 graph inputs x and z: the
#                importer must not divide by zero examples (issue 12 item 9);
#                reference: torch.div(x, z, rounding_mode="trunc").
# huge.onnx      relu, sigmoid, a bias add and a where of a 2^35-element
#                (128 GiB) input: imports only if the importer neither runs
#                the model nor broadcasts a constant to the input's size;
#                huge_conv.onnx a conv with a bias over such an input.
# over_limit_input.onnx / over_limit_init.onnx / short_init.onnx
#                a graph input and initializers beyond the element limit, or
#                with less data than their shape needs.
# weights.onnx   y = relu(x @ w1 + b) @ w2: w1 [256, 128] f32 in raw_data
#                (128 KiB: read from the file into its tensor, then shared
#                with the module as a dense_resource), w2 in float_data (the
#                typed field protobuf parses), b a splat; reference: torch.
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(graph, name, opset=17):
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, os.path.join(out, name + ".onnx"))


# int64 division by a graph input, with signs that tell truncation from
# flooring.
x = np.array([[7, -7, 100, -100, 0, 9], [1, 2, -3, 4, 5, -6]], np.int64)
z = np.array([[2, 2, -7, 7, 3, -4], [-1, 3, 2, -5, 1, 7]], np.int64)
save(helper.make_graph(
    [helper.make_node("Div", ["x", "z"], ["q"], name="div"),
     helper.make_node("Cast", ["q"], ["y"], name="cast",
                      to=TensorProto.FLOAT)],
    "int_div",
    [helper.make_tensor_value_info("x", TensorProto.INT64, ["batch", 6]),
     helper.make_tensor_value_info("z", TensorProto.INT64, ["batch", 6])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6])]),
    "int_div")
np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "z.npy"), z)
ref = torch.div(torch.from_numpy(x), torch.from_numpy(z),
                rounding_mode="trunc").float().numpy()
np.save(os.path.join(out, "ref_y.npy"), ref)

# A 128 GiB activation: [2^18, 2^17] f32, and constants broadcast against
# it (a bias Add, a Where against a scalar): the constants must not be
# broadcast to its size.
save(helper.make_graph(
    [helper.make_node("Relu", ["x"], ["r"], name="relu"),
     helper.make_node("Sigmoid", ["r"], ["s"], name="sigmoid"),
     helper.make_node("Add", ["s", "bias"], ["a"], name="add"),
     helper.make_node("Less", ["a", "half"], ["low"], name="less"),
     helper.make_node("Where", ["low", "half", "a"], ["y"], name="where")],
    "huge",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1 << 18, 1 << 17])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1 << 18, 1 << 17])],
    [numpy_helper.from_array(np.linspace(-1, 1, 1 << 17, dtype=np.float32),
                             "bias"),
     numpy_helper.from_array(np.array(0.5, np.float32), "half")]),
    "huge")

# A conv with a bias over a 2^35-element input ([2^14, 8, 512, 512]).
save(helper.make_graph(
    [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv")],
    "huge_conv",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                   [1 << 14, 8, 512, 512])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                   [1 << 14, 8, 512, 512])],
    [numpy_helper.from_array(np.ones((8, 8, 1, 1), np.float32), "w"),
     numpy_helper.from_array(np.arange(8, dtype=np.float32), "b")]),
    "huge_conv")

# Beyond the limit of 2^36 elements per tensor.
save(helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"], name="relu")],
    "over_limit_input",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1 << 20, 1 << 20])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1 << 20, 1 << 20])]),
    "over_limit_input")


def init_model(name, dims, raw):
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims,
                    raw_data=raw)
    save(helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)], [w]),
        name)


# Raw data that does not match the dims (helper.make_tensor refuses it).
init_model("over_limit_init", [1 << 20, 1 << 20], b"\0" * 4)
init_model("short_init", [1 << 30], b"\0" * 4)


# Weights as an exporter writes them (raw_data), one in the typed field.
rng = np.random.default_rng(3)
w1 = rng.standard_normal((256, 128)).astype(np.float32)
w2 = rng.standard_normal((128, 10)).astype(np.float32)
b = np.full((128,), 0.25, np.float32)
xw = rng.standard_normal((4, 256)).astype(np.float32)
inits = [numpy_helper.from_array(w1, "w1"),
         helper.make_tensor("w2", TensorProto.FLOAT, w2.shape,
                            w2.flatten().tolist()),
         numpy_helper.from_array(b, "b")]
assert inits[0].HasField("raw_data") and not inits[1].HasField("raw_data")
save(helper.make_graph(
    [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
     helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
     helper.make_node("Relu", ["hb"], ["r"], name="relu"),
     helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")],
    "weights",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 256])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 10])], inits),
    "weights")
np.save(os.path.join(out, "xw.npy"), xw)
ref = torch.relu(torch.from_numpy(xw) @ torch.from_numpy(w1) +
                 torch.from_numpy(b)) @ torch.from_numpy(w2)
np.save(os.path.join(out, "ref_weights.npy"), ref.numpy())

# Writes ONNX models for the structural-import tests (built with onnx's
# helper API), with their inputs and PyTorch's outputs as .npy files:
#   structural_models.py OUTDIR
# int_div.onnx   y = float(Div(x, z)) for int64 graph inputs x and z: the
#                importer must not divide by zero examples (issue 12 item 9);
#                reference: torch.div(x, z, rounding_mode="trunc").
# huge.onnx      relu of a 2^35-element (128 GiB) input: imports only if
#                the importer does not run the model.
# over_limit_input.onnx / over_limit_init.onnx / short_init.onnx
#                a graph input and initializers beyond the element limit, or
#                with less data than their shape needs.
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

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

# A 128 GiB activation: [2^18, 2^17] f32.
save(helper.make_graph(
    [helper.make_node("Relu", ["x"], ["r"], name="relu"),
     helper.make_node("Sigmoid", ["r"], ["y"], name="sigmoid")],
    "huge",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1 << 18, 1 << 17])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1 << 18, 1 << 17])]),
    "huge")

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

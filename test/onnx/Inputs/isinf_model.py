"""Writes OUT/isinf.onnx (IsInf three ways: both signs, detect_negative=0,
detect_positive=0; PyTorch exports torch.isinf through a Cast to double,
which modelc refuses, so the graph is built here), OUT/x.npy and NumPy's
answers OUT/ref_{both,pos,neg}.npy.

    isinf_model.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
x = np.array([[1.0, np.inf, -np.inf, np.nan, -0.0, 3e38]], np.float32)
nodes = [helper.make_node("IsInf", ["x"], ["both"]),
         helper.make_node("IsInf", ["x"], ["pos"], detect_negative=0),
         helper.make_node("IsInf", ["x"], ["neg"], detect_positive=0)]
graph = helper.make_graph(
    nodes, "isinf", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                   list(x.shape))],
    [helper.make_tensor_value_info(n, TensorProto.BOOL, list(x.shape))
     for n in ("both", "pos", "neg")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "isinf.onnx"))
np.save(os.path.join(out, "x.npy"), x)
np.save(os.path.join(out, "ref_both.npy"), np.isinf(x))
np.save(os.path.join(out, "ref_pos.npy"), np.isposinf(x))
np.save(os.path.join(out, "ref_neg.npy"), np.isneginf(x))

"""Graphs PyTorch does not export, built here with NumPy's answers:
OUT/isinf.onnx (IsInf three ways: both signs, detect_negative=0,
detect_positive=0; PyTorch exports torch.isinf through a Cast to double,
which modelc refuses) with OUT/x.npy and OUT/ref_{both,pos,neg}.npy; and
OUT/argmax_last.onnx (ArgMax and ArgMin with select_last_index=1, over
ties) with OUT/t.npy and OUT/ref_{last_max,last_min}.npy; and
OUT/cumsum_modes.onnx (CumSum exclusive, reverse, both, on 7 elements,
which the log-step sum covers in 3 levels) with OUT/c.npy and
OUT/ref_{excl,rev,excl_rev}.npy; and OUT/gather_elements.onnx
(GatherElements with negative indices, which torch.gather refuses, along
axes 0 and 2 of a 3-D tensor, and with int32 indices) with OUT/g.npy,
OUT/gi.npy, OUT/gj.npy and OUT/ref_{along0,along2}.npy, and
OUT/gi_bad.npy (an index of 2 along a dim of 2);
OUT/gather_elements_dyn.onnx is that graph with a symbolic batch,
OUT/gather_elements_axis2.onnx its gather along axis 2 alone, with
OUT/gj_bad.npy (an index of -5 along a dim of 4); and OUT/space_ops.onnx
(DepthToSpace in DCR order, SpaceToDepth back, ReduceSumSquare,
ReduceLogSum) with OUT/d.npy and OUT/ref_{dcr,s2d,sumsq,logsum}.npy; and
OUT/weight_gather.onnx (GatherElements along axis 0 of a weight by
batch-carrying indices, ReduceL2 of large f16 values) with OUT/wi.npy,
OUT/h.npy and OUT/ref_{picked,l2}.npy.
; and OUT/hyperbolic.onnx (Sinh, Cosh, Asinh, Acosh, Atanh, which
PyTorch 1.13 cannot export) with OUT/hx.npy, OUT/hu.npy and
OUT/ref_{sinh,cosh,asinh,acosh,atanh}.npy from NumPy in double; and
OUT/scatter_modes.onnx (ScatterND into a graph input with constant
indices: repeated rows, whose last update wins as in onnxruntime, and the
add and mul reductions of opset 16, over rows, single elements and a
box of rows) with
OUT/sd.npy, OUT/su.npy and OUT/ref_{last,radd,rmul,eadd,emul,badd,
bmul}.npy; and OUT/conv3d_same.onnx (a 3-D Conv with auto_pad
SAME_UPPER, which PyTorch does not export) with OUT/v.npy and
OUT/ref_vsame.npy from NumPy in double; OUT/onehot_eye.onnx (OneHot
along axis 0 with negative and out-of-range indices and float values,
EyeLike with k = 1 in int64) with OUT/oi.npy and OUT/ref_{hot0,eye}.npy;
OUT/if_computed.onnx (an If on a graph input, refused);
OUT/if_shadow.onnx (an If whose taken branch has an initializer named as
an outer one, which the outer Add after it must not see) with
OUT/sx.npy and OUT/ref_shadowed.npy, and OUT/if_dyn.onnx (a constant
condition with a symbolic batch: refused under --batch);
OUT/double_data.onnx (a DOUBLE initializer in double_data: f32's
largest value written as 3.4028235e38, which rounds to it, a value
below f32's smallest, which rounds to 0, and 0.5) with OUT/dx.npy and
OUT/ref_dsum.npy;
OUT/bn_training.onnx (BatchNormalization with training_mode=1 and its
running-statistics outputs) with OUT/bx.npy and
OUT/ref_{by,brmean,brvar}.npy from NumPy in double;
OUT/batch_sum.onnx and OUT/batch_scatter.onnx (an integer sum over
the batch axis and a ScatterElements along it, refused under --batch);
OUT/empty_gathers.onnx (GatherND and ScatterElements of empty indices)
with OUT/ex.npy, OUT/ei.npy, OUT/ej.npy and OUT/ref_{enone,esame}.npy;
OUT/gathernd.onnx
(GatherND of computed indices: batch_dims 0 with tuples of 2, batch_dims
1, negative indices) with OUT/nd.npy, OUT/ndi.npy, OUT/ndj.npy,
OUT/ref_{nd0,nd1}.npy and OUT/ndi_bad.npy (an index of 3 along a dim of
3); OUT/scatter_elements.onnx (ScatterElements of computed indices
along axis 0 with repeated and negative ones: the last write wins, and the
mul reduction applies each) with OUT/se.npy, OUT/sei.npy,
OUT/ref_{se_none,se_mul}.npy and OUT/sei_bad.npy (an index of 3 along a
dim of 3); and
OUT/avgpool3d_pad.onnx (a
3-D AveragePool with count_include_pad=1 and pads, which PyTorch exports
as a Pad instead) with OUT/ref_vavg.npy; OUT/conv3d_dyn.onnx is a 3-D
Conv with a symbolic batch.

    hand_models.py OUT
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

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

t = np.array([[3.0, 1.0, 3.0, 1.0, 2.0], [0.0, 0.0, -1.0, 5.0, -1.0]],
             np.float32)
nodes = [helper.make_node("ArgMax", ["t"], ["last_max"], axis=1, keepdims=0,
                          select_last_index=1),
         helper.make_node("ArgMin", ["t"], ["last_min"], axis=1, keepdims=0,
                          select_last_index=1)]
graph = helper.make_graph(
    nodes, "argmax_last",
    [helper.make_tensor_value_info("t", TensorProto.FLOAT, list(t.shape))],
    [helper.make_tensor_value_info(n, TensorProto.INT64, [2])
     for n in ("last_max", "last_min")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "argmax_last.onnx"))
np.save(os.path.join(out, "t.npy"), t)
flipped = t[:, ::-1]
np.save(os.path.join(out, "ref_last_max.npy"),
        t.shape[1] - 1 - np.argmax(flipped, axis=1))
np.save(os.path.join(out, "ref_last_min.npy"),
        t.shape[1] - 1 - np.argmin(flipped, axis=1))

c = np.array([[1, 2, 3, 4, 5, 6, 7], [-3, 0, 9, -1, 2, 8, -5]], np.int64)
axis = numpy_helper.from_array(np.array(1, np.int64), "axis")
nodes = [helper.make_node("CumSum", ["c", "axis"], ["excl"], exclusive=1),
         helper.make_node("CumSum", ["c", "axis"], ["rev"], reverse=1),
         helper.make_node("CumSum", ["c", "axis"], ["excl_rev"], exclusive=1,
                          reverse=1)]
graph = helper.make_graph(
    nodes, "cumsum_modes",
    [helper.make_tensor_value_info("c", TensorProto.INT64, list(c.shape))],
    [helper.make_tensor_value_info(n, TensorProto.INT64, list(c.shape))
     for n in ("excl", "rev", "excl_rev")], [axis])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "cumsum_modes.onnx"))
np.save(os.path.join(out, "c.npy"), c)
inclusive = np.cumsum(c, axis=1)
np.save(os.path.join(out, "ref_excl.npy"), inclusive - c)
backward = np.cumsum(c[:, ::-1], axis=1)[:, ::-1]
np.save(os.path.join(out, "ref_rev.npy"), backward)
np.save(os.path.join(out, "ref_excl_rev.npy"), backward - c)

g = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) * 0.5 - 3.0
gi = np.array([[[-1, 0, 1, -2]], [[1, -2, 0, -1]]], np.int64)  # [2, 1, 4]
gj = np.array([[[3, -4], [-1, 0], [2, -3]],
               [[0, 1], [-2, 3], [-4, 2]]], np.int32)  # [2, 3, 2]
nodes = [helper.make_node("GatherElements", ["g", "gi"], ["along0"], axis=0),
         helper.make_node("GatherElements", ["g", "gj"], ["along2"],
                          axis=-1)]
graph = helper.make_graph(
    nodes, "gather_elements",
    [helper.make_tensor_value_info("g", TensorProto.FLOAT, list(g.shape)),
     helper.make_tensor_value_info("gi", TensorProto.INT64, list(gi.shape)),
     helper.make_tensor_value_info("gj", TensorProto.INT32, list(gj.shape))],
    [helper.make_tensor_value_info("along0", TensorProto.FLOAT,
                                   list(gi.shape)),
     helper.make_tensor_value_info("along2", TensorProto.FLOAT,
                                   list(gj.shape))])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "gather_elements.onnx"))
# The same graph with a symbolic batch (--batch: GatherElements as selects;
# along the batch axis it is refused), and its gather along axis 2 alone.
for value in list(graph.input) + list(graph.output):
    value.type.tensor_type.shape.dim[0].dim_param = "batch"
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "gather_elements_dyn.onnx"))
graph = helper.make_graph([nodes[1]], "gather_elements_axis2",
                          [graph.input[0], graph.input[2]],
                          [graph.output[1]])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "gather_elements_axis2.onnx"))
np.save(os.path.join(out, "g.npy"), g)
np.save(os.path.join(out, "gi.npy"), gi)
np.save(os.path.join(out, "gj.npy"), gj)
# Output i is g[gi[i], i1, i2]: the rows of g that gi's shape covers.
np.save(os.path.join(out, "ref_along0.npy"),
        np.take_along_axis(g[:, :1, :], gi % 2, axis=0))
np.save(os.path.join(out, "ref_along2.npy"),
        np.take_along_axis(g, gj.astype(np.int64) % 4, axis=2))
bad = gi.copy()
bad[1, 0, 2] = 2  # dim 0 has 2 rows
np.save(os.path.join(out, "gi_bad.npy"), bad)
bad = gj.copy()
bad[1, 2, 0] = -5  # dim 2 has 4 columns
np.save(os.path.join(out, "gj_bad.npy"), bad)

# DepthToSpace in DCR order and SpaceToDepth (PyTorch exports neither),
# ReduceSumSquare and ReduceLogSum, against the ONNX spec's formulas.
d = np.arange(2 * 8 * 3 * 2, dtype=np.float32).reshape(2, 8, 3, 2) * 0.25
nodes = [helper.make_node("DepthToSpace", ["d"], ["dcr"], blocksize=2,
                          mode="DCR"),
         helper.make_node("SpaceToDepth", ["dcr"], ["s2d"], blocksize=2),
         helper.make_node("ReduceSumSquare", ["d"], ["sumsq"], axes=[1, 3],
                          keepdims=0),
         helper.make_node("ReduceLogSum", ["d"], ["logsum"], axes=[2],
                          keepdims=1)]
graph = helper.make_graph(
    nodes, "space_ops",
    [helper.make_tensor_value_info("d", TensorProto.FLOAT, list(d.shape))],
    [helper.make_tensor_value_info("dcr", TensorProto.FLOAT, [2, 2, 6, 4]),
     helper.make_tensor_value_info("s2d", TensorProto.FLOAT, [2, 8, 3, 2]),
     helper.make_tensor_value_info("sumsq", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("logsum", TensorProto.FLOAT,
                                   [2, 8, 1, 2])])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "space_ops.onnx"))
np.save(os.path.join(out, "d.npy"), d)
n_, c_, h_, w_ = d.shape
dcr = d.reshape(n_, 2, 2, c_ // 4, h_, w_).transpose(0, 3, 4, 1, 5, 2)
dcr = dcr.reshape(n_, c_ // 4, h_ * 2, w_ * 2)
np.save(os.path.join(out, "ref_dcr.npy"), dcr)
s2d = dcr.reshape(n_, c_ // 4, h_, 2, w_, 2).transpose(0, 3, 5, 1, 2, 4)
np.save(os.path.join(out, "ref_s2d.npy"), s2d.reshape(n_, c_, h_, w_))
np.save(os.path.join(out, "ref_sumsq.npy"), (d * d).sum(axis=(1, 3)))
np.save(os.path.join(out, "ref_logsum.npy"),
        np.log(d.sum(axis=2, keepdims=True)))

# GatherElements along axis 0 of a weight (no batch in it) by indices that
# carry the batch (with --batch: a select per index, allowed on a constant's
# axis 0), and ReduceL2 of f16 values whose squares pass f16's range
# (squared and summed in f32).
w_ge = np.array([[1.0, -2.0], [3.5, 4.0], [-5.0, 6.25]], np.float32)
nodes = [helper.make_node("GatherElements", ["w", "wi"], ["picked"], axis=0),
         helper.make_node("ReduceL2", ["h"], ["l2"], axes=[1], keepdims=0)]
graph = helper.make_graph(
    nodes, "weight_gather",
    [helper.make_tensor_value_info("wi", TensorProto.INT64, ["batch", 2]),
     helper.make_tensor_value_info("h", TensorProto.FLOAT16, ["batch", 3])],
    [helper.make_tensor_value_info("picked", TensorProto.FLOAT,
                                   ["batch", 2]),
     helper.make_tensor_value_info("l2", TensorProto.FLOAT16, ["batch"])],
    [numpy_helper.from_array(w_ge, "w")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "weight_gather.onnx"))
wi = np.array([[2, 0], [-1, 1], [0, -2], [1, 2]], np.int64)
np.save(os.path.join(out, "wi.npy"), wi)
np.save(os.path.join(out, "ref_picked.npy"),
        np.take_along_axis(w_ge, wi % 3, axis=0))
h = np.array([[300, 300, 300], [-1000, 5, 0], [0.5, 0.25, 0], [60000, 1, 1]],
             np.float16)
np.save(os.path.join(out, "h.npy"), h)
np.save(os.path.join(out, "ref_l2.npy"),
        np.sqrt((h.astype(np.float32) ** 2).sum(1)).astype(np.float16))

# The hyperbolic functions and their inverses, over their domains and past
# them: signed zeros, tiny values, overflow (sinh, cosh of 90), infinities,
# NaN, acosh below 1 and atanh at and beyond +-1.
hx = np.array([[0.0, -0.0, 1e-20, -3.5, 2.0, 1.0, 0.5, 90.0, -90.0, np.inf,
                -np.inf, np.nan, 7.25, 40.0]], np.float32)
hu = np.array([[0.0, -0.0, 1e-20, 0.5, -0.75, 0.999, 1.0, -1.0, 1.5, np.nan,
                0.25, -0.3, 1e-3, 0.9]], np.float32)
nodes = [helper.make_node("Sinh", ["hx"], ["sinh"]),
         helper.make_node("Cosh", ["hx"], ["cosh"]),
         helper.make_node("Asinh", ["hx"], ["asinh"]),
         helper.make_node("Acosh", ["hx"], ["acosh"]),
         helper.make_node("Atanh", ["hu"], ["atanh"])]
graph = helper.make_graph(
    nodes, "hyperbolic",
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(hx.shape))
     for n in ("hx", "hu")],
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(hx.shape))
     for n in ("sinh", "cosh", "asinh", "acosh", "atanh")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "hyperbolic.onnx"))
np.save(os.path.join(out, "hx.npy"), hx)
np.save(os.path.join(out, "hu.npy"), hu)
with np.errstate(all="ignore"):
    d, du = hx.astype(np.float64), hu.astype(np.float64)
    for name, value in (("sinh", np.sinh(d)), ("cosh", np.cosh(d)),
                        ("asinh", np.arcsinh(d)), ("acosh", np.arccosh(d)),
                        ("atanh", np.arctanh(du))):
        np.save(os.path.join(out, "ref_" + name + ".npy"),
                value.astype(np.float32))

# ScatterND into computed data with constant indices (opset 17): repeated
# rows under reduction none (the last update wins, as onnxruntime applies
# them in order), and the add and mul reductions, over whole rows (k = 1)
# and single elements (k = 2), NaN included.
sd = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0], [0.5, np.nan, 2.0],
               [-1.0, 8.0, 0.0]], np.float32)
su = np.array([[10.0, 20.0, 30.0], [-1.0, -2.0, -3.0], [2.0, 0.5, -4.0]],
              np.float32)
rows_dup = np.array([[1], [3], [1]], np.int64)
rows = np.array([[0], [-2], [3]], np.int64)
elems = np.array([[0, 1], [2, 2], [3, -3]], np.int64)
nodes = [helper.make_node("ScatterND", ["sd", "rows_dup", "su"], ["last"]),
         helper.make_node("ScatterND", ["sd", "rows", "su"], ["radd"],
                          reduction="add"),
         helper.make_node("ScatterND", ["sd", "rows", "su"], ["rmul"],
                          reduction="mul"),
         helper.make_node("Reshape", ["su", "flat"], ["su_flat"]),
         helper.make_node("Slice", ["su_flat", "s0", "s3"], ["su3"]),
         helper.make_node("ScatterND", ["sd", "elems", "su3"], ["eadd"],
                          reduction="add"),
         helper.make_node("ScatterND", ["sd", "elems", "su3"], ["emul"],
                          reduction="mul"),
         # A box of rows 1 and 2 (slice assignment's form: pad and select),
         # with each reduction.
         helper.make_node("ScatterND", ["sd", "box", "su2"], ["badd"],
                          reduction="add"),
         helper.make_node("ScatterND", ["sd", "box", "su2"], ["bmul"],
                          reduction="mul")]
graph = helper.make_graph(
    nodes, "scatter_modes",
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape))
     for n, v in (("sd", sd), ("su", su))],
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(sd.shape))
     for n in ("last", "radd", "rmul", "eadd", "emul", "badd", "bmul")],
    [numpy_helper.from_array(rows_dup, "rows_dup"),
     numpy_helper.from_array(rows, "rows"),
     numpy_helper.from_array(elems, "elems"),
     numpy_helper.from_array(np.array([-1], np.int64), "flat"),
     numpy_helper.from_array(np.array([0], np.int64), "s0"),
     numpy_helper.from_array(np.array([3], np.int64), "s3"),
     numpy_helper.from_array(np.array([[1], [2]], np.int64), "box"),
     numpy_helper.from_array(su[1:], "su2")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 17)]),
          os.path.join(out, "scatter_modes.onnx"))
np.save(os.path.join(out, "sd.npy"), sd)
np.save(os.path.join(out, "su.npy"), su)
ref = {"last": sd.copy(), "radd": sd.copy(), "rmul": sd.copy(),
       "eadd": sd.copy(), "emul": sd.copy(), "badd": sd.copy(),
       "bmul": sd.copy()}
ref["badd"][1:3] += su[1:]
ref["bmul"][1:3] *= su[1:]
for r, u in zip(rows_dup[:, 0], su):
    ref["last"][r] = u
for r, u in zip(rows[:, 0], su):
    ref["radd"][r] += u
    ref["rmul"][r] *= u
picked = su.reshape(-1)[:3]
for (i, j), u in zip(elems, picked):
    ref["eadd"][i, j] += u
    ref["emul"][i, j] *= u
for name, value in ref.items():
    np.save(os.path.join(out, "ref_" + name + ".npy"), value)

# A 3-D Conv with auto_pad SAME_UPPER, strides (2, 2, 1), kernel (3, 2, 3),
# against a direct NumPy sum in double; and one with a symbolic batch.
v = np.random.default_rng(7).standard_normal((1, 2, 5, 6, 4)).astype(
    np.float32)
wv = np.random.default_rng(8).standard_normal((3, 2, 3, 2, 3)).astype(
    np.float32)
graph = helper.make_graph(
    [helper.make_node("Conv", ["v", "wv"], ["vsame"], auto_pad="SAME_UPPER",
                      strides=[2, 2, 1])],
    "conv3d_same",
    [helper.make_tensor_value_info("v", TensorProto.FLOAT, list(v.shape))],
    [helper.make_tensor_value_info("vsame", TensorProto.FLOAT,
                                   [1, 3, 3, 3, 4])],
    [numpy_helper.from_array(wv, "wv")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "conv3d_same.onnx"))
np.save(os.path.join(out, "v.npy"), v)
strides, kern = (2, 2, 1), wv.shape[2:]
outs = [-(-v.shape[2 + i] // strides[i]) for i in range(3)]
lo = []
hi = []
for i in range(3):
    total = max((outs[i] - 1) * strides[i] + kern[i] - v.shape[2 + i], 0)
    lo.append(total // 2)
    hi.append(total - total // 2)
vp = np.pad(v.astype(np.float64), [(0, 0), (0, 0)] + list(zip(lo, hi)))
ref = np.zeros((1, 3, *outs))
for od in range(outs[0]):
    for oh in range(outs[1]):
        for ow in range(outs[2]):
            win = vp[:, :, od * 2:od * 2 + 3, oh * 2:oh * 2 + 2, ow:ow + 3]
            ref[:, :, od, oh, ow] = np.einsum("ncdhw,ocdhw->no", win, wv)
np.save(os.path.join(out, "ref_vsame.npy"), ref.astype(np.float32))
graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
graph.output[0].type.tensor_type.shape.dim[0].dim_param = "batch"
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "conv3d_dyn.onnx"))

# A 3-D AveragePool with count_include_pad=1 and pads in every dim: each
# window's mean over its 18 padded positions, zeros included.
graph = helper.make_graph(
    [helper.make_node("AveragePool", ["v"], ["vavg"], kernel_shape=[3, 2, 3],
                      strides=[2, 2, 1], pads=[1, 0, 1, 1, 1, 1],
                      count_include_pad=1)],
    "avgpool3d_pad",
    [helper.make_tensor_value_info("v", TensorProto.FLOAT, list(v.shape))],
    [helper.make_tensor_value_info("vavg", TensorProto.FLOAT,
                                   [1, 2, 3, 3, 4])])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "avgpool3d_pad.onnx"))
vp = np.pad(v.astype(np.float64), [(0, 0), (0, 0), (1, 1), (0, 1), (1, 1)])
ref = np.zeros((1, 2, 3, 3, 4))
for od in range(3):
    for oh in range(3):
        for ow in range(4):
            ref[:, :, od, oh, ow] = vp[:, :, od * 2:od * 2 + 3,
                                       oh * 2:oh * 2 + 2,
                                       ow:ow + 3].mean(axis=(2, 3, 4))
np.save(os.path.join(out, "ref_vavg.npy"), ref.astype(np.float32))

# OneHot along axis 0: indices -1 (the last position), 4 (past depth 4:
# a column of off) and 0, values [off, on] = [-1, 5]; EyeLike k = 1 as
# int64 of a [3, 4] input.
oi = np.array([[-1, 4], [0, 2]], np.int64)
nodes = [helper.make_node("OneHot", ["oi", "depth", "vals"], ["hot0"],
                          axis=0),
         helper.make_node("EyeLike", ["eyein"], ["eye"], k=1,
                          dtype=TensorProto.INT64)]
graph = helper.make_graph(
    nodes, "onehot_eye",
    [helper.make_tensor_value_info("oi", TensorProto.INT64, [2, 2])],
    [helper.make_tensor_value_info("hot0", TensorProto.FLOAT, [4, 2, 2]),
     helper.make_tensor_value_info("eye", TensorProto.INT64, [3, 4])],
    [numpy_helper.from_array(np.array(4, np.int64), "depth"),
     numpy_helper.from_array(np.array([-1.0, 5.0], np.float32), "vals"),
     numpy_helper.from_array(np.zeros((3, 4), np.float32), "eyein")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "onehot_eye.onnx"))
np.save(os.path.join(out, "oi.npy"), oi)
hot = np.full((4, 2, 2), -1.0, np.float32)
for (a, b), v in np.ndenumerate(oi):
    if -4 <= v < 4:
        hot[v % 4, a, b] = 5.0
np.save(os.path.join(out, "ref_hot0.npy"), hot)
np.save(os.path.join(out, "ref_eye.npy"), np.eye(3, 4, k=1, dtype=np.int64))

# An If on a graph input: a condition computed at run time (refused).
then_g = helper.make_graph(
    [helper.make_node("Identity", ["fx"], ["fy_then"])], "then", [],
    [helper.make_tensor_value_info("fy_then", TensorProto.FLOAT, [2])])
else_g = helper.make_graph(
    [helper.make_node("Neg", ["fx"], ["fy_else"])], "else", [],
    [helper.make_tensor_value_info("fy_else", TensorProto.FLOAT, [2])])
graph = helper.make_graph(
    [helper.make_node("If", ["flag"], ["fy"], name="choose",
                      then_branch=then_g, else_branch=else_g)],
    "if_computed",
    [helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
     helper.make_tensor_value_info("fx", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("fy", TensorProto.FLOAT, [2])])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "if_computed.onnx"))

# GatherND of computed indices: tuples (i, j) into nd's first two dims
# (batch_dims 0), and with batch_dims 1 single indices into dim 1 per batch
# entry; negative indices count from the end.
nd = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) - 7.5
ndi = np.array([[[1, -1], [0, 2]], [[-2, 0], [1, 1]]], np.int64)  # [2,2,2]
ndj = np.array([[[2], [-3]], [[0], [1]]], np.int64)  # [2, 2, 1]
nodes = [helper.make_node("GatherND", ["nd", "ndi"], ["nd0"]),
         helper.make_node("GatherND", ["nd", "ndj"], ["nd1"], batch_dims=1)]
graph = helper.make_graph(
    nodes, "gathernd",
    [helper.make_tensor_value_info("nd", TensorProto.FLOAT, [2, 3, 4]),
     helper.make_tensor_value_info("ndi", TensorProto.INT64, [2, 2, 2]),
     helper.make_tensor_value_info("ndj", TensorProto.INT64, [2, 2, 1])],
    [helper.make_tensor_value_info("nd0", TensorProto.FLOAT, [2, 2, 4]),
     helper.make_tensor_value_info("nd1", TensorProto.FLOAT, [2, 2, 4])])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "gathernd.onnx"))
np.save(os.path.join(out, "nd.npy"), nd)
np.save(os.path.join(out, "ndi.npy"), ndi)
np.save(os.path.join(out, "ndj.npy"), ndj)
ref0 = np.stack([np.stack([nd[i, j] for i, j in row]) for row in ndi])
ref1 = np.stack([np.stack([nd[b, j[0]] for j in ndj[b]]) for b in range(2)])
np.save(os.path.join(out, "ref_nd0.npy"), ref0)
np.save(os.path.join(out, "ref_nd1.npy"), ref1)
bad = ndi.copy()
bad[1, 1] = [1, 3]  # dim 1 has 3 entries
np.save(os.path.join(out, "ndi_bad.npy"), bad)

# ScatterElements along axis 0 with computed indices, repeated (rows 0
# and 2 of column 0 both write row 2) and negative (-1: row 2).
se = np.arange(12, dtype=np.float32).reshape(3, 4) - 4.0
sei = np.array([[2, 0, -1, 1], [-1, 1, 0, 1]], np.int64)
seu = np.array([[10.0, 20.0, 30.0, 40.0], [-1.0, -2.0, 0.5, 3.0]],
               np.float32)
nodes = [helper.make_node("ScatterElements", ["se", "sei", "seu"],
                          ["se_none"], axis=0),
         helper.make_node("ScatterElements", ["se", "sei", "seu"],
                          ["se_mul"], axis=0, reduction="mul")]
graph = helper.make_graph(
    nodes, "scatter_elements",
    [helper.make_tensor_value_info("se", TensorProto.FLOAT, [3, 4]),
     helper.make_tensor_value_info("sei", TensorProto.INT64, [2, 4])],
    [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4])
     for n in ("se_none", "se_mul")],
    [numpy_helper.from_array(seu, "seu")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 16)]),
          os.path.join(out, "scatter_elements.onnx"))
np.save(os.path.join(out, "se.npy"), se)
np.save(os.path.join(out, "sei.npy"), sei)
none, prod = se.copy(), se.copy()
for j in range(sei.shape[0]):  # in order, as onnxruntime applies them
    for k in range(sei.shape[1]):
        none[sei[j, k] % 3, k] = seu[j, k]
        prod[sei[j, k] % 3, k] *= seu[j, k]
np.save(os.path.join(out, "ref_se_none.npy"), none)
np.save(os.path.join(out, "ref_se_mul.npy"), prod)
bad = sei.copy()
bad[1, 3] = 3
np.save(os.path.join(out, "sei_bad.npy"), bad)

# An If whose taken branch defines an initializer 'w' as the outer graph
# does: the branch sees its own, the outer Add after the If the outer one.
sx = np.array([1.0, 2.0], np.float32)
w_outer = np.array([10.0, 20.0], np.float32)
then_g = helper.make_graph(
    [helper.make_node("Mul", ["sx", "w"], ["branch_out"])], "then", [],
    [helper.make_tensor_value_info("branch_out", TensorProto.FLOAT, [2])],
    [numpy_helper.from_array(np.array([3.0, 3.0], np.float32), "w")])
else_g = helper.make_graph(
    [helper.make_node("Neg", ["sx"], ["else_out"])], "else", [],
    [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [2])])
graph = helper.make_graph(
    [helper.make_node("If", ["flag"], ["chosen"], name="pick",
                      then_branch=then_g, else_branch=else_g),
     helper.make_node("Add", ["chosen", "w"], ["shadowed"])],
    "if_shadow",
    [helper.make_tensor_value_info("sx", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("shadowed", TensorProto.FLOAT, [2])],
    [numpy_helper.from_array(np.array(True), "flag"),
     numpy_helper.from_array(w_outer, "w")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "if_shadow.onnx"))
np.save(os.path.join(out, "sx.npy"), sx)
np.save(os.path.join(out, "ref_shadowed.npy"), sx * 3.0 + w_outer)
graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
graph.output[0].type.tensor_type.shape.dim[0].dim_param = "batch"
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "if_dyn.onnx"))

# GatherND and ScatterElements of empty (computed) indices: an empty
# result, and the data unchanged.
ex = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
nodes = [helper.make_node("GatherND", ["ex", "ei"], ["enone"]),
         helper.make_node("ScatterElements", ["ex", "ej", "eu"], ["esame"],
                          axis=1)]
graph = helper.make_graph(
    nodes, "empty_gathers",
    [helper.make_tensor_value_info("ex", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("ei", TensorProto.INT64, [0, 2]),
     helper.make_tensor_value_info("ej", TensorProto.INT64, [0, 3])],
    [helper.make_tensor_value_info("enone", TensorProto.FLOAT, [0]),
     helper.make_tensor_value_info("esame", TensorProto.FLOAT, [2, 3])],
    [numpy_helper.from_array(np.zeros((0, 3), np.float32), "eu")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "empty_gathers.onnx"))
np.save(os.path.join(out, "ex.npy"), ex)
np.save(os.path.join(out, "ei.npy"), np.zeros((0, 2), np.int64))
np.save(os.path.join(out, "ej.npy"), np.zeros((0, 3), np.int64))
np.save(os.path.join(out, "ref_enone.npy"), np.zeros((0,), np.float32))
np.save(os.path.join(out, "ref_esame.npy"), ex)

# Under --batch: an integer sum over the batch axis and a ScatterElements
# along it are refused by name.
graph = helper.make_graph(
    [helper.make_node("ReduceSum", ["bi"], ["bsum"], keepdims=0,
                      name="batchsum"),
     helper.make_node("ScatterElements", ["bf", "bidx", "bf"], ["bsc"],
                      axis=0, name="batchscatter")],
    "batch_axis_ops",
    [helper.make_tensor_value_info("bi", TensorProto.INT64, ["batch", 3]),
     helper.make_tensor_value_info("bf", TensorProto.FLOAT, ["batch", 3]),
     helper.make_tensor_value_info("bidx", TensorProto.INT64,
                                   ["batch", 3])],
    [helper.make_tensor_value_info("bsum", TensorProto.INT64, []),
     helper.make_tensor_value_info("bsc", TensorProto.FLOAT, ["batch", 3])])
sum_only = helper.make_graph([graph.node[0]], "batch_sum",
                             [graph.input[0]], [graph.output[0]])
onnx.save(helper.make_model(sum_only,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "batch_sum.onnx"))
scatter_only = helper.make_graph([graph.node[1]], "batch_scatter",
                                 [graph.input[1], graph.input[2]],
                                 [graph.output[1]])
onnx.save(helper.make_model(scatter_only,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "batch_scatter.onnx"))

# BatchNormalization with training_mode=1 (a model exported for
# training) and its running-statistics outputs, which PyTorch's export
# leaves unread: the batch's mean and biased variance normalize, and the
# running values are input * momentum + batch's * (1 - momentum) (the
# ONNX spec's, biased variance), from NumPy in double.
bx = np.random.default_rng(9).standard_normal((4, 3, 2, 5)).astype(
    np.float32) * 2 + 1
bscale = np.array([1.5, -0.5, 2.0], np.float32)
bbias = np.array([0.1, 0.2, -0.3], np.float32)
bmean0 = np.array([0.5, -1.0, 0.0], np.float32)
bvar0 = np.array([1.0, 2.0, 0.5], np.float32)
graph = helper.make_graph(
    [helper.make_node("BatchNormalization",
                      ["bx", "bscale", "bbias", "bmean0", "bvar0"],
                      ["by", "brmean", "brvar"], name="bntrain",
                      epsilon=1e-3, momentum=0.8, training_mode=1)],
    "bn_training",
    [helper.make_tensor_value_info("bx", TensorProto.FLOAT, [4, 3, 2, 5])],
    [helper.make_tensor_value_info("by", TensorProto.FLOAT, [4, 3, 2, 5]),
     helper.make_tensor_value_info("brmean", TensorProto.FLOAT, [3]),
     helper.make_tensor_value_info("brvar", TensorProto.FLOAT, [3])],
    [numpy_helper.from_array(v, n) for v, n in
     [(bscale, "bscale"), (bbias, "bbias"), (bmean0, "bmean0"),
      (bvar0, "bvar0")]])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 15)]),
          os.path.join(out, "bn_training.onnx"))
xd = bx.astype(np.float64)
m = xd.mean(axis=(0, 2, 3))
v = xd.var(axis=(0, 2, 3))
shape = (1, 3, 1, 1)
y = ((xd - m.reshape(shape)) / np.sqrt(v.reshape(shape) + 1e-3) *
     bscale.reshape(shape) + bbias.reshape(shape))
np.save(os.path.join(out, "bx.npy"), bx)
np.save(os.path.join(out, "ref_by.npy"), y.astype(np.float32))
np.save(os.path.join(out, "ref_brmean.npy"),
        (bmean0 * 0.8 + m * 0.2).astype(np.float32))
np.save(os.path.join(out, "ref_brvar.npy"),
        (bvar0 * 0.8 + v * 0.2).astype(np.float32))

# A DOUBLE initializer in double_data, computed in f32: 3.4028235e38 is
# above FLT_MAX but rounds to it (not an infinity), 1e-50 rounds to 0.
dx = np.array([1.0, -2.0, 0.25], np.float32)
graph = helper.make_graph(
    [helper.make_node("Cast", ["dx"], ["dwide"], name="widen", to=11),
     helper.make_node("Add", ["dwide", "dc"], ["dsum"], name="dadd")],
    "double_data",
    [helper.make_tensor_value_info("dx", TensorProto.FLOAT, [3])],
    [helper.make_tensor_value_info("dsum", TensorProto.DOUBLE, [3])],
    [helper.make_tensor("dc", TensorProto.DOUBLE, [3],
                        [3.4028235e38, 1e-50, 0.5])])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "double_data.onnx"))
np.save(os.path.join(out, "dx.npy"), dx)
np.save(os.path.join(out, "ref_dsum.npy"),
        np.array([np.finfo(np.float32).max, -2.0, 0.75], np.float32))

# For --train: a weight reshaped by a shape computed from another float
# initializer (Cast of [6, 4] to INT64). Nodes reading initializers are
# traced for a training step, so the weight trains, and their values stay
# known, so the Reshape still reads its shape as a compile-time constant.
graph = helper.make_graph(
    [helper.make_node("Cast", ["sf"], ["si"], name="shape_cast", to=7),
     helper.make_node("Reshape", ["w", "si"], ["w2"], name="reshape_w"),
     helper.make_node("MatMul", ["tx", "w2"], ["ty"], name="mm"),
     helper.make_node("ReduceMean", ["ty"], ["tloss"], name="mean",
                      keepdims=0)],
    "train_weight_shape",
    [helper.make_tensor_value_info("tx", TensorProto.FLOAT, [2, 6])],
    [helper.make_tensor_value_info("tloss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(np.arange(24, dtype=np.float32).reshape(4, 6)
                             / 24, "w"),
     numpy_helper.from_array(np.array([6, 4], np.float32), "sf")])
onnx.save(helper.make_model(graph,
                            opset_imports=[helper.make_opsetid("", 13)]),
          os.path.join(out, "train_weight_shape.onnx"))

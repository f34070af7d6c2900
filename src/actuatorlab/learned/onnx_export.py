"""ONNX export and int8 quantization of learned actuators, for fast CPU inference (optional extra).

``pip install actuatorlab[onnx]`` (``onnx`` + ``onnxruntime``). Without them every function here
raises a one-line :class:`~actuatorlab.errors.ModelError` saying so; nothing else in actuatorlab
needs them.

:func:`export_onnx` writes the network's exact float32 graph (same equations as
:mod:`actuatorlab.models.nets`: the Transformer with its four heads, or the window MLP) with a
dynamic batch axis: input ``x`` (N, history + 1, n_features) normalized float32, outputs
``torque`` (N, C), ``force_raw`` (N, 3) (or (N, C) for a joint-frame force head: the external joint
torques, :mod:`actuatorlab.learned.force_frame`), ``gate_logit`` (N,), ``condition_logit`` (N, C); with
``fused=True`` as fewer, larger operators (opset 23 ``Attention``, the heads as two products),
the form to run fast. :func:`quantize_int8` applies onnxruntime's dynamic quantization (int8
weights per output channel, uint8 activations quantized per call), which runs the weight
products on VNNI int8 instructions where the CPU has them; the attention products between
activations stay float32, and by default (``float_ends``) the input projection and the heads
stay float32 too. Quantization changes the numbers: measure its error (``bench/actuator.py`` reports
it) before using it in a rollout. :class:`OnnxActuator` runs such a file with onnxruntime.
GRU / LSTM export is not implemented.

Speed on a 2-core AVX-512-VNNI CPU (``bench/README.md``): per sample the Transformer costs about
25 MFLOP, nearly all in the weight products; int8 runs those at 600-800 GOP/s per core here, so
LayerNorm, GELU, attention and the per-call quantization take ~40 % of the time, and the fused
graph trims the operator count for that reason.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from ..errors import ModelError
from ..models.nets import GatedTransformer, Heads, WindowMLP

__all__ = ["onnx_available", "export_onnx", "quantize_int8", "OnnxActuator"]

OPSET = 20  # Gelu(approximate="tanh") is an opset-20 operator
OPSET_FUSED = 23  # Attention is an opset-23 operator (onnx >= 1.18, onnxruntime >= 1.23 on the CPU)
INPUT, HEAD = "input/", "head/"  # node-name prefixes of the input projection and of the output heads
#: roles that ``quantize_int8(..., float_ends=True)`` (the default) keeps in float32
FLOAT_ROLES = (INPUT, HEAD)


def onnx_available() -> bool:
    """Whether the optional ``onnx`` and ``onnxruntime`` packages are importable."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _require():
    if not onnx_available():
        raise ModelError("ONNX export needs the optional packages onnx and onnxruntime: install the extra "
                         "'onnx' (pip install 'actuatorlab[onnx]')")


class _Graph:
    """Tiny helper that names nodes and initializers."""

    def __init__(self):
        from onnx import helper, numpy_helper
        self.h, self.nh = helper, numpy_helper
        self.nodes, self.inits, self.n = [], [], 0

    def const(self, value, name=None, dtype=np.float32) -> str:
        self.n += 1
        name = name or f"c{self.n}"
        self.inits.append(self.nh.from_array(np.asarray(value, dtype), name))
        return name

    def op(self, kind: str, inputs, n_out: int = 1, role: str = "", **attrs):
        """Append a node; its name is ``role`` + its first output (roles: :data:`FLOAT_ROLES`)."""
        self.n += 1
        outs = [f"{kind.lower()}{self.n}_{i}" for i in range(n_out)]
        self.nodes.append(self.h.make_node(kind, list(inputs), outs, name=role + outs[0], **attrs))
        return outs[0] if n_out == 1 else outs

    def linear(self, x: str, W, b=None, role: str = "") -> str:
        """x @ W.T + b for an equinox weight W (out, in)."""
        y = self.op("MatMul", [x, self.const(np.asarray(W).T)], role=role)
        return y if b is None else self.op("Add", [y, self.const(b)])

    def layernorm(self, x: str, ln) -> str:
        return self.op("LayerNormalization", [x, self.const(ln.weight), self.const(ln.bias)], axis=-1,
                       epsilon=float(ln.eps))

    def silu(self, x: str) -> str:
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def mlp(self, x: str, mlp, act, role: str = "") -> str:
        for i, layer in enumerate(mlp.layers):
            x = self.linear(x, layer.weight, layer.bias, role)
            if i < len(mlp.layers) - 1:
                x = act(x)
        return x


def _heads(g: _Graph, z: str, heads, fused: bool = False) -> list[str]:
    mlps = (heads.torque, heads.force, heads.gate, heads.condition)
    if fused:  # the four one-hidden-layer heads as two products: [W1_t W1_f W1_g W1_c], block-diagonal W2
        W1 = np.concatenate([np.asarray(m.layers[0].weight).T for m in mlps], axis=1)
        b1 = np.concatenate([np.asarray(m.layers[0].bias) for m in mlps])
        widths = [m.layers[0].weight.shape[0] for m in mlps]
        sizes = [m.layers[1].weight.shape[0] for m in mlps]
        W2 = np.zeros((sum(widths), sum(sizes)), np.float32)
        r = c = 0
        for m, w, o in zip(mlps, widths, sizes):
            W2[r:r + w, c:c + o] = np.asarray(m.layers[1].weight).T
            r, c = r + w, c + o
        b2 = np.concatenate([np.asarray(m.layers[1].bias) for m in mlps])
        u = g.silu(g.op("Add", [g.op("MatMul", [z, g.const(W1)], role=HEAD), g.const(b1)]))
        y = g.op("Add", [g.op("MatMul", [u, g.const(W2)], role=HEAD), g.const(b2)])
        outs = list(g.op("Split", [y, g.const(sizes, dtype=np.int64)], n_out=4, axis=-1))
    else:
        outs = [g.mlp(z, m, g.silu, HEAD) for m in mlps]
    outs[2] = g.op("Squeeze", [outs[2], g.const([-1], dtype=np.int64)])  # (N, 1) -> (N,)
    return outs


def _transformer(g: _Graph, net: GatedTransformer, fused: bool = False) -> list[str]:
    d = net.pos.shape[1]
    h = g.op("Add", [g.linear("x", net.inp.weight, net.inp.bias, INPUT), g.const(net.pos)])   # (N, T, d)
    for blk in net.blocks:
        H = blk.attn.n_heads
        hd = d // H
        a = g.layernorm(h, blk.ln1)
        qkvg = g.linear(a, blk.attn.qkvg.weight, blk.attn.qkvg.bias)
        q, k, v, gate = g.op("Split", [qkvg, g.const([d] * 4, dtype=np.int64)], n_out=4, axis=-1)
        if fused:  # softmax(q_h k_h^T / sqrt(hd)) v_h for every head in one kernel (opset 23), (N, T, d) in and out
            y = g.op("Attention", [q, k, v], q_num_heads=H, kv_num_heads=H)  # scale 1/sqrt(hd) by default
        else:
            shape = g.const([0, 0, H, hd], dtype=np.int64)
            q = g.op("Transpose", [g.op("Reshape", [q, shape])], perm=[0, 2, 1, 3])   # (N, H, T, hd)
            k = g.op("Transpose", [g.op("Reshape", [k, shape])], perm=[0, 2, 3, 1])   # (N, H, hd, T)
            v = g.op("Transpose", [g.op("Reshape", [v, shape])], perm=[0, 2, 1, 3])
            s = g.op("Mul", [g.op("MatMul", [q, k]), g.const(1.0 / math.sqrt(hd))])
            y = g.op("MatMul", [g.op("Softmax", [s], axis=-1), v])                     # (N, H, T, hd)
            y = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]), g.const([0, 0, d], dtype=np.int64)])
        y = g.op("Mul", [g.op("Sigmoid", [gate]), y])
        h = g.op("Add", [h, g.linear(y, blk.attn.out.weight, blk.attn.out.bias)])
        f = g.op("Gelu", [g.linear(g.layernorm(h, blk.ln2), blk.ff1.weight, blk.ff1.bias)], approximate="tanh")
        h = g.op("Add", [h, g.linear(f, blk.ff2.weight, blk.ff2.bias)])
    z = g.op("ReduceMean", [g.layernorm(h, net.ln_f), g.const([1], dtype=np.int64)], keepdims=0)
    return _heads(g, z, net.heads, fused)


def _mlp(g: _Graph, net: WindowMLP, fused: bool = False) -> list[str]:
    x = g.op("Flatten", ["x"], axis=1)
    for i, layer in enumerate(net.trunk.layers):  # the first layer reads the features: the "input" role
        x = g.silu(g.linear(x, layer.weight, layer.bias, INPUT if i == 0 else ""))  # final_activation=silu
    z = x
    return _heads(g, z, net.heads, fused)


def export_onnx(net, path: str | Path, *, n_frames: int | None = None, fused: bool = False) -> Path:
    """Write ``net`` (a :class:`GatedTransformer` or :class:`WindowMLP`) as an ONNX float32 model.

    ``fused=False``: opset 20, elementary operators (attention as MatMul / Softmax / Transpose),
    for any ONNX runtime of the last years (what ``actuatorlab export --onnx`` writes).
    ``fused=True``: the same equations with fewer, larger kernels, opset 23 (onnxruntime >= 1.23):
    attention as one ``Attention`` operator per block, the four heads as two products
    (concatenated first layers, block-diagonal second layers) and one ``Split``. Same outputs to
    float32 rounding; faster on the CPU (``bench/actuator.py``)."""
    _require()
    import onnx
    from onnx import TensorProto, helper

    path = Path(path)
    g = _Graph()
    if isinstance(net, GatedTransformer):
        T, F = net.pos.shape[0], net.inp.in_features
        outs = _transformer(g, net, fused)
    elif isinstance(net, WindowMLP):
        if n_frames is None:
            raise ModelError(f"{path}: exporting an MLP needs n_frames (history + 1)")
        T = n_frames
        assert isinstance(net.trunk.in_size, int), "a WindowMLP's trunk takes the flattened window"
        F = net.trunk.in_size // T
        outs = _mlp(g, net, fused)
    else:
        raise ModelError(f"{path}: ONNX export supports the transformer and mlp architectures, "
                         f"not {type(net).__name__}")
    C = net.heads.torque.out_size
    names = ["torque", "force_raw", "gate_logit", "condition_logit"]
    shapes = [["N", C], ["N", net.heads.force.out_size], ["N"], ["N", C]]  # force: 3, or C (joint frame)
    for o, name in zip(outs, names):
        g.nodes.append(helper.make_node("Identity", [o], [name]))
    graph = helper.make_graph(g.nodes, "actuatorlab_learned",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", T, F])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)],
                              g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET_FUSED if fused else OPSET)],
                              producer_name="actuatorlab")
    model.ir_version = 11 if fused else 10
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    onnx.save(model, str(tmp))
    tmp.replace(path)
    return path


def quantize_int8(src: str | Path, dst: str | Path, *, per_channel: bool = True, float_ends: bool = True) -> Path:
    """Dynamic int8 quantization of the weight matrix products of an exported model (onnxruntime).

    Weights int8 (per output channel when ``per_channel``), activations uint8 with a scale computed
    per call; products between activations (attention) stay float32. ``float_ends`` (default)
    keeps the input projection and the output heads (the products named with :data:`FLOAT_ROLES`
    by :func:`export_onnx`) in float32: on trained networks about a tenth of the all-int8 error
    (torque head 0.2 % vs 2 % relative RMS) for 3-7 % of the batch-32 throughput
    (``bench/README.md``); ``float_ends=False`` quantizes every weight product. Written atomically."""
    _require()
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    dst = Path(dst)
    keep = []
    if float_ends:
        keep = [n.name for n in onnx.load(str(src), load_external_data=False).graph.node
                if n.name.startswith(FLOAT_ROLES)]
    root = logging.getLogger()
    quiet = _DropPreprocessHint()
    root.addFilter(quiet)  # onnxruntime logs a generic pre-processing hint on the root logger
    tmp = dst.with_name(f".{dst.name}.tmp")
    try:
        # DefaultTensorType: the type of any tensor that shape inference cannot follow (all float32 here)
        quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8, per_channel=per_channel,
                         op_types_to_quantize=["MatMul"], nodes_to_exclude=keep,
                         extra_options={"MatMulConstBOnly": True, "DefaultTensorType": onnx.TensorProto.FLOAT})
        tmp.replace(dst)
    finally:
        root.removeFilter(quiet)
        tmp.unlink(missing_ok=True)
    return dst


class _DropPreprocessHint(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


class OnnxActuator:
    """An exported learned actuator run by onnxruntime on the CPU: ``(N, T, F)`` normalized float32
    windows in, :class:`~actuatorlab.models.nets.Heads` of numpy arrays out (leading axis N)."""

    def __init__(self, path: str | Path, *, threads: int = 1):
        _require()
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = int(threads)
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.log_severity_level = 3
        try:
            # onnxruntime fuses an Add followed by a LayerNormalization into SkipLayerNormalization,
            # whose CPU kernel ran ~10x slower than the two operators on this machine (onnxruntime
            # 1.32: 210 vs 17 + 3 us on a (32, 9, 192) float32 tensor); keep them apart
            self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"],
                                                disabled_optimizers=["SkipLayerNormFusion"])
        except Exception as e:  # onnxruntime raises its own exception types
            raise ModelError(f"{path}: cannot load ONNX model ({str(e).splitlines()[0]})") from None
        self.path = str(path)
        self._out = ["torque", "force_raw", "gate_logit", "condition_logit"]

    def __call__(self, x: np.ndarray) -> Heads:
        return Heads(*self.session.run(self._out, {"x": np.ascontiguousarray(x, np.float32)}))

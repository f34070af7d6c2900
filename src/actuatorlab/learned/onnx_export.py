"""ONNX export and int8 quantization of learned actuators, for fast CPU inference (optional extra).

``pip install actuatorlab[onnx]`` (``onnx`` + ``onnxruntime``). Without them every function here
raises a one-line :class:`~actuatorlab.errors.ModelError` saying so; nothing else in actuatorlab
needs them.

:func:`export_onnx` writes the network's exact float32 graph (same equations as
:mod:`actuatorlab.learned.nets`: the Transformer with its four heads, or the window MLP) with a
dynamic batch axis: input ``x`` (N, history + 1, n_features) normalized float32, outputs
``torque`` (N, C), ``force_raw`` (N, 3), ``gate_logit`` (N,), ``condition_logit`` (N, C). :func:`quantize_int8`
applies onnxruntime's dynamic quantization (int8 weights per output channel, uint8 activations
quantized per call), which runs the weight products on VNNI int8 instructions where the CPU has
them; the attention products between activations stay float32. Quantization changes the
numbers: measure its error (``bench/actuator.py`` reports it) before using it in a rollout.
:class:`OnnxActuator` runs such a file with onnxruntime. GRU / LSTM export is not implemented.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np

from ..errors import ModelError
from .nets import GatedTransformer, Heads, WindowMLP

__all__ = ["onnx_available", "export_onnx", "quantize_int8", "OnnxActuator"]

OPSET = 20  # Gelu(approximate="tanh") is an opset-20 operator


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
        raise ModelError("ONNX export needs the optional packages onnx and onnxruntime "
                         "(pip install 'actuatorlab[onnx]')")


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

    def op(self, kind: str, inputs, n_out: int = 1, **attrs):
        self.n += 1
        outs = [f"{kind.lower()}{self.n}_{i}" for i in range(n_out)]
        self.nodes.append(self.h.make_node(kind, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def linear(self, x: str, W, b=None) -> str:
        """x @ W.T + b for an equinox weight W (out, in)."""
        y = self.op("MatMul", [x, self.const(np.asarray(W).T)])
        return y if b is None else self.op("Add", [y, self.const(b)])

    def layernorm(self, x: str, ln) -> str:
        return self.op("LayerNormalization", [x, self.const(ln.weight), self.const(ln.bias)], axis=-1,
                       epsilon=float(ln.eps))

    def silu(self, x: str) -> str:
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def mlp(self, x: str, mlp, act) -> str:
        for i, layer in enumerate(mlp.layers):
            x = self.linear(x, layer.weight, layer.bias)
            if i < len(mlp.layers) - 1:
                x = act(x)
        return x


def _heads(g: _Graph, z: str, heads) -> list[str]:
    outs = [g.mlp(z, m, g.silu) for m in (heads.torque, heads.force, heads.gate, heads.condition)]
    outs[2] = g.op("Squeeze", [outs[2], g.const([-1], dtype=np.int64)])  # (N, 1) -> (N,)
    return outs


def _transformer(g: _Graph, net: GatedTransformer) -> list[str]:
    d = net.pos.shape[1]
    h = g.op("Add", [g.linear("x", net.inp.weight, net.inp.bias), g.const(net.pos)])   # (N, T, d)
    for blk in net.blocks:
        H = blk.attn.n_heads
        hd = d // H
        a = g.layernorm(h, blk.ln1)
        qkvg = g.linear(a, blk.attn.qkvg.weight, blk.attn.qkvg.bias)
        q, k, v, gate = g.op("Split", [qkvg, g.const([d] * 4, dtype=np.int64)], n_out=4, axis=-1)
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
    return _heads(g, z, net.heads)


def _mlp(g: _Graph, net: WindowMLP) -> list[str]:
    x = g.op("Flatten", ["x"], axis=1)
    z = g.silu(g.mlp(x, net.trunk, g.silu))  # final_activation=silu
    return _heads(g, z, net.heads)


def export_onnx(net, path: str | Path, *, n_frames: int | None = None) -> Path:
    """Write ``net`` (a :class:`GatedTransformer` or :class:`WindowMLP`) as an ONNX float32 model."""
    _require()
    import onnx
    from onnx import TensorProto, helper

    path = Path(path)
    if isinstance(net, GatedTransformer):
        T, F = net.pos.shape[0], net.inp.in_features
        build = _transformer
    elif isinstance(net, WindowMLP):
        F = None
        build = _mlp
        T = n_frames
        if T is None:
            raise ModelError(f"{path}: exporting an MLP needs n_frames (history + 1)")
        F = net.trunk.in_size // T
    else:
        raise ModelError(f"{path}: ONNX export supports the transformer and mlp architectures, "
                         f"not {type(net).__name__}")
    g = _Graph()
    outs = build(g, net)
    C = net.heads.torque.out_size
    names = ["torque", "force_raw", "gate_logit", "condition_logit"]
    shapes = [["N", C], ["N", 3], ["N"], ["N", C]]
    for o, name in zip(outs, names):
        g.nodes.append(helper.make_node("Identity", [o], [name]))
    graph = helper.make_graph(g.nodes, "actuatorlab_learned",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", T, F])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)],
                              g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="actuatorlab")
    model.ir_version = 10
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    onnx.save(model, str(tmp))
    tmp.replace(path)
    return path


def quantize_int8(src: str | Path, dst: str | Path, *, per_channel: bool = True) -> Path:
    """Dynamic int8 quantization of the weight matrix products of an exported model (onnxruntime)."""
    _require()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    dst = Path(dst)
    root = logging.getLogger()
    quiet = _DropPreprocessHint()
    root.addFilter(quiet)  # onnxruntime logs a generic pre-processing hint on the root logger
    try:
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=per_channel,
                         op_types_to_quantize=["MatMul"], extra_options={"MatMulConstBOnly": True})
    finally:
        root.removeFilter(quiet)
    return dst


class _DropPreprocessHint(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


class OnnxActuator:
    """An exported learned actuator run by onnxruntime on the CPU: ``(N, T, F)`` normalized float32
    windows in, :class:`~actuatorlab.learned.nets.Heads` of numpy arrays out (leading axis N)."""

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
            self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime raises its own exception types
            raise ModelError(f"{path}: cannot load ONNX model ({str(e).splitlines()[0]})") from None
        self.path = str(path)
        self._out = ["torque", "force_raw", "gate_logit", "condition_logit"]

    def __call__(self, x: np.ndarray) -> Heads:
        return Heads(*self.session.run(self._out, {"x": np.ascontiguousarray(x, np.float32)}))

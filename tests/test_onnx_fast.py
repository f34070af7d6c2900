"""Fast CPU inference of learned actuators: the fused onnxruntime graph and its int8 variants.

The fused graph (``export_onnx(fused=True)``) must compute the JAX network's numbers (float32
rounding only); int8 must stay within the bound measured on these networks, and keeping the input
projection and the heads float32 (``float_ends``, the default) must actually reduce the error.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from actuatorlab.errors import ModelError  # noqa: E402
from actuatorlab.learned import make_net  # noqa: E402
from actuatorlab.learned.onnx_export import (FLOAT_ROLES, OnnxActuator, export_onnx,  # noqa: E402
                                             quantize_int8)

N_FEATURES, N_CHANNELS, HISTORY = 11, 3, 4
SIZES = {"transformer": dict(d=32, n_heads=4, n_layers=2, ff=48, head_width=24),
         "mlp": dict(width=32, depth=2, d=32, head_width=24)}


@pytest.fixture(scope="module")
def nets():
    return {a: make_net(a, n_features=N_FEATURES, n_channels=N_CHANNELS, history=HISTORY,
                        key=jax.random.PRNGKey(3), **SIZES[a]) for a in SIZES}


@pytest.fixture(scope="module")
def data(nets):
    x = np.random.default_rng(0).normal(size=(256, HISTORY + 1, N_FEATURES)).astype(np.float32)
    ref = {a: [np.asarray(r) for r in jax.jit(jax.vmap(n))(x)] for a, n in nets.items()}
    return x, ref


def rel_rms(out, ref) -> list[float]:
    return [float(np.sqrt(np.mean((o - r) ** 2)) / np.sqrt(np.mean(r ** 2))) for o, r in zip(out, ref)]


def op_types(path) -> list[str]:
    return [n.op_type for n in onnx.load(str(path)).graph.node]


def weight_products(path) -> int:
    g = onnx.load(str(path)).graph
    consts = {i.name for i in g.initializer}
    return sum(n.op_type == "MatMul" and n.input[1] in consts for n in g.node)


@pytest.mark.parametrize("arch", ["transformer", "mlp"])
def test_fused_graph_computes_the_jax_network(tmp_path, nets, data, arch):
    x, ref = data
    std = export_onnx(nets[arch], tmp_path / "std.onnx", n_frames=HISTORY + 1)
    fused = export_onnx(nets[arch], tmp_path / "fused.onnx", n_frames=HISTORY + 1, fused=True)
    ops = op_types(fused)
    # the fusion happened: one attention kernel per block, the heads as two products
    assert ops.count("Attention") == (2 if arch == "transformer" else 0)
    assert "Transpose" not in ops and "Softmax" not in ops
    assert weight_products(fused) == weight_products(std) - 6  # 8 head products -> 2
    for batch in (x[:1], x):  # batch 1 and a batch
        out = OnnxActuator(fused)(batch)
        for o, r in zip(out, ref[arch]):
            r = r[:len(batch)]
            assert o.shape == r.shape
            np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-5)


def test_int8_error_bounds_and_float_ends(tmp_path, nets, data):
    """Dynamic int8 on the fused graph: relative RMS error per head within 5 % with every weight
    product int8 (measured 0.7-1.6 % on this network, 0.6-3 % on paper-sized ones,
    bench/README.md) and within 1.5 % with the default float32 input projection and heads
    (measured 0.3-0.6 %), which must be below the all-int8 error on every head."""
    x, ref = data
    f32 = export_onnx(nets["transformer"], tmp_path / "t.onnx", fused=True)
    q_all = quantize_int8(f32, tmp_path / "t8a.onnx", float_ends=False)
    q_ends = quantize_int8(f32, tmp_path / "t8.onnx")  # default: float_ends
    e_all = rel_rms(OnnxActuator(q_all)(x), ref["transformer"])
    e_ends = rel_rms(OnnxActuator(q_ends)(x), ref["transformer"])
    assert max(e_all) < 0.05 and min(e_all) > 1e-4  # quantized, and close
    assert max(e_ends) < 0.015 and min(e_ends) > 1e-4
    assert all(b < a for a, b in zip(e_all, e_ends)), (e_all, e_ends)
    # float_ends keeps exactly the input projection and the head products in float32
    g = onnx.load(str(q_ends)).graph
    assert sum(n.op_type == "MatMul" and n.name.startswith(FLOAT_ROLES) for n in g.node) == 3
    assert not any(n.op_type == "MatMul" and not n.name.startswith(FLOAT_ROLES) for n in g.node)
    assert not any(n.op_type == "MatMul" for n in onnx.load(str(q_all)).graph.node)


def test_onnx_actuator_on_a_bad_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ModelError) as e:
        OnnxActuator(bad)
    assert str(e.value).startswith(f"{bad}: cannot load ONNX model") and "\n" not in str(e.value)

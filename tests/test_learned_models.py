"""Learned actuator networks: gradients, causality, sizes, float32, checkpoints and their errors.

Tiny sizes everywhere except the parameter-count checks (which only build shapes). The
``physics_x64`` session fixture (conftest) has x64 on, so every float32 assertion here holds under
x64; the x64-off path is checked explicitly.
"""

from __future__ import annotations

import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actuatorlab.errors import ModelError, UnknownNameError
from actuatorlab.learned import (ARCHS, FeatureLayout, Heads, Normalizer, assemble_frame, build_window,
                                 contact_force, fit_normalizer, init_history, load_learned, make_net,
                                 param_count, push_history, read_header, save_learned, sliding_windows)
from actuatorlab.learned.checkpoint import MAGIC

LAYOUT = FeatureLayout(("shoulder", "elbow"), ("q_target", "q", "dq", "err", "current"), ("gripper",), history=4)
TINY = {"transformer": dict(d=16, n_heads=2, n_layers=2, ff=24, head_width=8),
        "mlp": dict(width=16, depth=2, d=16, head_width=8),
        "gru": dict(hidden=12, n_layers=2, head_width=8),
        "lstm": dict(hidden=12, n_layers=2, head_width=8)}
#: the reference layout of the size checks: 5 channels x 9 features + the gripper, 8 history frames
REF = dict(n_features=5 * 9 + 1, n_channels=5, history=8)
#: the architectures that take any window layout ("actuator_net" takes one joint's (err, dq) only,
#: tests/test_export_targets.py; "window_stats" is a condition detector on per-channel inputs,
#: tests/test_condition.py)
WINDOW_ARCHS = sorted(set(ARCHS) - {"actuator_net", "actuator_lstm", "window_stats"})


def tiny(arch, seed=0, layout=LAYOUT):
    return make_net(arch, n_features=layout.n_features, n_channels=layout.n_channels, history=layout.history,
                    key=jax.random.PRNGKey(seed), **TINY[arch])


def windows(n, layout=LAYOUT, seed=1):
    return jax.random.normal(jax.random.PRNGKey(seed), (n, layout.n_frames, layout.n_features), jnp.float32)


def test_registry_lists_archs_on_unknown_name():
    assert set(ARCHS) == {"transformer", "mlp", "gru", "lstm", "actuator_net", "actuator_lstm", "window_stats"}
    with pytest.raises(UnknownNameError, match="available: actuator_lstm, actuator_net, gru, lstm, mlp, transformer"):
        make_net("cnn", n_features=4, n_channels=1, history=2, key=jax.random.PRNGKey(0))
    with pytest.raises(UnknownNameError, match="available: d, ff, force_out, head_width, n_heads, n_layers"):
        make_net("transformer", n_features=4, n_channels=1, history=2, key=jax.random.PRNGKey(0), width=3)
    # the force head's width is an option of the networks with output heads only
    with pytest.raises(UnknownNameError, match="unknown size option of 'actuator_net' 'force_out'"):
        make_net("actuator_net", n_features=4, n_channels=1, history=2, key=jax.random.PRNGKey(0), force_out=4)
    net = make_net("mlp", n_features=8, n_channels=4, history=2, key=jax.random.PRNGKey(0), width=8, depth=1, d=8,
                   head_width=8, force_out=4)
    assert net(jnp.zeros((3, 8))).force_raw.shape == (4,)


@pytest.mark.parametrize("arch", WINDOW_ARCHS)
def test_gradients_reach_every_parameter_and_are_finite(arch):
    net = tiny(arch)
    x = windows(6)

    def loss(net):
        h = jax.vmap(net)(x)
        # every head contributes, with a target so no leaf sits at a stationary point by symmetry
        return sum(jnp.mean((v - 0.3) ** 2) for v in h) + jnp.mean(contact_force(h) ** 2)

    g = eqx.filter_jit(eqx.filter_grad(loss))(net)
    leaves = jax.tree_util.tree_leaves(eqx.filter(g, eqx.is_inexact_array))
    params = jax.tree_util.tree_leaves(eqx.filter(net, eqx.is_inexact_array))
    assert len(leaves) == len(params) > 0
    for leaf in leaves:
        assert leaf.dtype == jnp.float32
        assert bool(jnp.all(jnp.isfinite(leaf)))
        # every parameter array receives gradient (no dead / unused block)
        assert float(jnp.max(jnp.abs(leaf))) > 0.0


@pytest.mark.parametrize("arch", WINDOW_ARCHS)
def test_forward_is_float32_with_and_without_x64(arch):
    net = tiny(arch)
    x64_input = np.random.default_rng(0).normal(size=(LAYOUT.n_frames, LAYOUT.n_features))  # float64
    assert jax.config.jax_enable_x64  # the session fixture
    fwd = eqx.filter_jit(net)
    h = fwd(x64_input)
    assert isinstance(h, Heads)
    assert [v.shape for v in h] == [(2,), (3,), (), (2,)]
    assert all(v.dtype == jnp.float32 for v in h)
    with jax.enable_x64(False):
        h32 = fwd(jnp.asarray(x64_input, jnp.float32))
    assert all(v.dtype == jnp.float32 for v in h32)
    np.testing.assert_allclose(np.asarray(h.torque), np.asarray(h32.torque), rtol=1e-5, atol=1e-6)


def test_import_does_not_touch_x64():
    code = ("import jax; before = jax.config.jax_enable_x64; "
            "import actuatorlab, actuatorlab.app.cli, actuatorlab.app.jobs, actuatorlab.learned, actuatorlab.sim.arm; "
            "import jax.numpy as jnp; "
            "assert jax.config.jax_enable_x64 == before == False, jax.config.jax_enable_x64; "
            "assert jnp.zeros(1).dtype == jnp.float32; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_default_transformer_size_and_matched_ablations():
    counts = {a: param_count(eqx.filter_eval_shape(make_net, a, key=jax.random.PRNGKey(0), **REF)) for a in WINDOW_ARCHS}
    # the paper reports 1.44 M; d=192, 4 blocks, FF 384, 4 heads, four SiLU heads of width 192
    assert 1.40e6 <= counts["transformer"] <= 1.55e6, counts
    for a in ("mlp", "gru", "lstm"):
        assert abs(counts[a] / counts["transformer"] - 1.0) <= 0.25, counts


def test_transformer_structure_as_specified():
    net = eqx.filter_eval_shape(make_net, "transformer", key=jax.random.PRNGKey(0), **REF)
    assert len(net.blocks) == 4 and net.pos.shape == (9, 192)
    blk = net.blocks[0]
    assert blk.attn.n_heads == 4 and blk.ff1.out_features == 384 and blk.attn.qkvg.out_features == 4 * 192


def test_sliding_windows_are_causal_and_complete():
    rng = np.random.default_rng(0)
    frames = rng.normal(size=(30, 3)).astype(np.float32)
    w = np.asarray(sliding_windows(frames, 4))
    assert w.shape == (30, 5, 3)
    np.testing.assert_array_equal(w[:, -1], frames)          # last row = current frame
    np.testing.assert_array_equal(w[10], frames[6:11])       # oldest first
    np.testing.assert_array_equal(w[1], frames[[0, 0, 0, 0, 1]])  # padded with the first frame, not later ones
    k = 17
    pert = frames.copy()
    pert[k] += 100.0
    w2 = np.asarray(sliding_windows(pert, 4))
    np.testing.assert_array_equal(w2[:k], w[:k])                 # the past never sees the future
    assert np.all(np.any(w2[k:k + 5] != w[k:k + 5], axis=(1, 2)))  # the frame is seen for history+1 steps
    np.testing.assert_array_equal(w2[k + 5:], w[k + 5:])


@pytest.mark.parametrize("arch", WINDOW_ARCHS)
def test_online_inference_is_causal(arch):
    """Frame-by-frame inference (the lax.scan a rollout uses) equals offline windows, and perturbing
    a future frame never changes a present output."""
    net = tiny(arch)
    T = 16
    frames = jax.random.normal(jax.random.PRNGKey(3), (T, LAYOUT.n_features), jnp.float32)

    @jax.jit
    def online(frames):
        def step(hist, f):
            out = net(build_window(hist, f))
            return push_history(hist, f), out.torque
        return jax.lax.scan(step, init_history(frames[0], LAYOUT.history), frames)[1]

    y = online(frames)
    offline = jax.vmap(net)(sliding_windows(frames, LAYOUT.history)).torque
    np.testing.assert_allclose(np.asarray(y), np.asarray(offline), rtol=1e-5, atol=1e-6)
    k = 9
    y2 = online(frames.at[k].add(5.0))
    np.testing.assert_array_equal(np.asarray(y2[:k]), np.asarray(y[:k]))
    assert float(jnp.max(jnp.abs(y2[k] - y[k]))) > 1e-6  # the present frame does matter


def test_assemble_frame_orders_features_and_jits():
    f = jax.jit(lambda pc, g: assemble_frame(LAYOUT, pc, g))(
        {"q_target": jnp.array([1.0, 2.0]), "q": jnp.array([3.0, 4.0]), "dq": jnp.zeros(2),
         "err": jnp.array([-2.0, -2.0]), "current": jnp.array([0.5, 0.6]), "unused": jnp.ones(2)},
        {"gripper": jnp.asarray(0.01)})
    assert f.dtype == jnp.float32 and f.shape == (LAYOUT.n_features,)
    assert f[LAYOUT.index("elbow", "q")] == 4.0 and f[LAYOUT.index("shoulder", "current")] == 0.5
    assert LAYOUT.feature_names[-1] == "gripper" and f[-1] == pytest.approx(0.01)
    with pytest.raises(ModelError, match="missing \\['current'\\]"):
        assemble_frame(LAYOUT, {"q_target": jnp.zeros(2), "q": jnp.zeros(2), "dq": jnp.zeros(2),
                                "err": jnp.zeros(2)}, {"gripper": 0.0})


def test_normalizer_fits_training_frames_and_keeps_constants_finite():
    rng = np.random.default_rng(0)
    x = np.c_[rng.normal(3.0, 2.0, 5000), np.full(5000, 12.0)]  # second column: constant voltage
    n = fit_normalizer(x)
    assert n.mean.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(n.mean), [3.0, 12.0], atol=0.1)
    np.testing.assert_allclose(np.asarray(n.std), [2.0, 1.0], atol=0.1)
    z = np.asarray(n.apply(x))
    assert abs(z[:, 0].std() - 1.0) < 1e-3 and np.all(z[:, 1] == 0.0)
    assert Normalizer.from_dict(n.to_dict()).to_dict() == n.to_dict()
    with pytest.raises(ModelError, match="std > 0"):
        Normalizer.from_dict({"mean": [0.0], "std": [0.0]})


def _save(tmp_path, arch="transformer", name="m.eqx"):
    net = tiny(arch, seed=5)
    norm = fit_normalizer(np.random.default_rng(1).normal(size=(200, LAYOUT.n_features)))
    path = save_learned(tmp_path / name, net, layout=LAYOUT, normalizer=norm, arch=arch, sizes=TINY[arch],
                        meta={"trained_steps": 12, "data": ["a.parquet"]})
    return path, net, norm


@pytest.mark.parametrize("arch", WINDOW_ARCHS)
def test_checkpoint_round_trip_is_exact(tmp_path, arch):
    path, net, norm = _save(tmp_path, arch)
    m = load_learned(path, layout=LAYOUT)
    assert m.arch == arch and m.layout == LAYOUT and m.meta == {"trained_steps": 12, "data": ["a.parquet"]}
    for a, b in zip(jax.tree_util.tree_leaves(eqx.filter(net, eqx.is_array)),
                    jax.tree_util.tree_leaves(eqx.filter(m.net, eqx.is_array))):
        assert a.dtype == b.dtype == jnp.float32
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(m.normalizer.std), np.asarray(norm.std))
    x = windows(1)[0]
    np.testing.assert_array_equal(np.asarray(m(x).torque), np.asarray(net(norm.apply(x)).torque))
    assert read_header(path)["params"] == param_count(net)
    assert not list(tmp_path.glob("*.tmp"))  # atomic write left nothing behind


def test_corrupt_and_truncated_checkpoints_give_one_line_errors(tmp_path):
    path, _, _ = _save(tmp_path)
    data = path.read_bytes()
    cases = {"truncated": data[:-7], "short header": data[:len(MAGIC) + 20], "not ours": b"PK\x03\x04" + data[4:],
             "flipped weight": data[:-3] + bytes(b ^ 0xFF for b in data[-3:]), "empty": b"",
             "bad json": data[:len(MAGIC) + 8] + b"{" * 10 + data[len(MAGIC) + 18:]}
    for what, blob in cases.items():
        bad = tmp_path / f"bad_{what.replace(' ', '_')}.eqx"
        bad.write_bytes(blob)
        with pytest.raises(ModelError) as e:
            load_learned(bad)
        msg = str(e.value)
        assert msg.startswith(str(bad) + ": ") and "\n" not in msg, (what, msg)
    with pytest.raises(ModelError, match="cannot read"):
        load_learned(tmp_path / "missing.eqx")


def test_mismatched_layout_is_refused_naming_what_differs(tmp_path):
    path, _, _ = _save(tmp_path)
    other = FeatureLayout(("shoulder", "wrist"), LAYOUT.per_channel, ("gripper",), history=8)
    with pytest.raises(ModelError) as e:
        load_learned(path, layout=other)
    msg = str(e.value)
    assert msg.startswith(f"{path}: feature layout mismatch") and "\n" not in msg
    assert "channels ['shoulder', 'elbow'] vs ['shoulder', 'wrist']" in msg and "history 4 vs 8" in msg
    assert "per_channel" not in msg  # only what differs
    with pytest.raises(ModelError, match="does not match arch 'mlp'"):
        save_learned(tmp_path / "x.eqx", tiny("transformer"), layout=LAYOUT,
                     normalizer=fit_normalizer(np.zeros((3, LAYOUT.n_features))), arch="mlp", sizes=TINY["mlp"])


def test_onnx_export_without_the_extra_is_a_clear_error(tmp_path, monkeypatch):
    from actuatorlab.learned import onnx_export

    monkeypatch.setattr(onnx_export, "onnx_available", lambda: False)
    with pytest.raises(ModelError, match=r"pip install 'actuatorlab\[onnx\]'"):
        onnx_export.export_onnx(tiny("transformer"), tmp_path / "t.onnx")


@pytest.mark.parametrize("arch", ["transformer", "mlp"])
def test_onnx_export_is_exact_and_int8_close(tmp_path, arch):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from actuatorlab.learned.onnx_export import OnnxActuator, export_onnx, quantize_int8

    net = make_net(arch, n_features=LAYOUT.n_features, n_channels=2, history=LAYOUT.history,
                   key=jax.random.PRNGKey(2), **{**TINY[arch], **({"d": 32, "head_width": 32} if arch == "transformer" else {})})
    x = np.asarray(windows(64))
    ref = jax.jit(lambda x: jax.vmap(net)(x))(x)
    f32 = export_onnx(net, tmp_path / "m.onnx", n_frames=LAYOUT.n_frames)
    out = OnnxActuator(f32)(x)
    for o, r in zip(out, ref):
        assert o.shape == r.shape
        np.testing.assert_allclose(o, np.asarray(r), rtol=1e-4, atol=1e-5)
    q = OnnxActuator(quantize_int8(f32, tmp_path / "m8.onnx"))(x)
    for o, r in zip(q, ref):
        r = np.asarray(r)
        assert np.sqrt(np.mean((o - r) ** 2)) <= 0.1 * np.sqrt(np.mean(r ** 2)) + 1e-3  # int8: close, not exact
    with pytest.raises(ModelError, match="ONNX export supports the transformer and mlp"):
        export_onnx(tiny("gru"), tmp_path / "g.onnx")


def test_transformer_files_of_structure_1_still_load(tmp_path):
    """Files written before q, k, v and the gate shared one matrix (header without "structure")."""
    import hashlib
    import io
    import json
    import struct

    from actuatorlab.learned.checkpoint import _AttentionV1

    path, net, norm = _save(tmp_path)
    d = net.pos.shape[1]
    v1 = lambda a: _AttentionV1(eqx.tree_at(lambda l: (l.weight, l.bias), eqx.nn.Linear(d, 3 * d, key=jax.random.PRNGKey(0)),
                                            (a.qkvg.weight[:3 * d], a.qkvg.bias[:3 * d])),
                                eqx.tree_at(lambda l: (l.weight, l.bias), eqx.nn.Linear(d, d, key=jax.random.PRNGKey(0)),
                                            (a.qkvg.weight[3 * d:], a.qkvg.bias[3 * d:])), a.out, a.n_heads)
    old = eqx.tree_at(lambda n: [b.attn for b in n.blocks], net, [v1(b.attn) for b in net.blocks])
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, old)
    w = buf.getvalue()
    header = read_header(path)
    del header["structure"]
    header.update(weights_nbytes=len(w), weights_sha256=hashlib.sha256(w).hexdigest())
    hb = json.dumps(header).encode()
    path.write_bytes(MAGIC + struct.pack("<Q", len(hb)) + hb + w)
    m = load_learned(path)
    x = windows(3)
    for a, b in zip(jax.vmap(m.net)(x), jax.vmap(net)(x)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

"""Learned actuators in the whole-robot rollouts: one API with the analytic models, MJX = native,
gradients through the simulator reach every network parameter, a tiny model overfits a tiny
dataset through MJX, causal online inference, model files.

Tiny MLPs on 4-8 control-step windows of the OpenManipulator-X. The MJX gradient compiles in a
few minutes on a 2-core CPU the first time (the compilation cache fixture keeps it for reruns);
it is compiled once for the module and shared.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from actuatorlab.errors import ModelError
from actuatorlab.learned.arm import (LearnedWindows, _units, arm_loss, load_arm_model, make_learned_arm,
                                     save_arm_model)
from actuatorlab.models.features import Normalizer
from actuatorlab.precision import physics_precision
from actuatorlab.robots import load_robot
from actuatorlab.sim.arm import ArmInputs, ArmOutputs, ArmState, initial_state, make_inputs, make_mjx_rollout
from actuatorlab.sim.arm_learned import LearnedInputs, OnlineEstimator, trainable
from actuatorlab.sim.arm_native import rollout_native

FEATS = ("q_target", "q", "dq", "err")
T = 8


@pytest.fixture(scope="module")
def setup():
    with physics_precision():
        r = load_robot("open_manipulator_x")
        ch = r.joint_names[:4]
        F = len(ch) * len(FEATS)
        norm = Normalizer(np.zeros(F), np.full(F, 0.3))
        model = make_learned_arm(r, "mlp", channels=ch, per_channel=FEATS, normalizer=norm, effort_scale=0.5,
                                 history=2, key=jax.random.PRNGKey(3), width=16, depth=1, d=16, head_width=16)
        # a tiny "measured" dataset: the nominal analytic model stepping two joints, 2 windows
        q0 = np.array([[0.1, -0.3, 0.2, 0.4, 0.0], [-0.2, 0.1, 0.0, -0.3, 0.0]])
        tgt = q0 + np.array([[0.15, 0.0, -0.1, 0.0, 0.0], [0.0, 0.12, 0.0, 0.1, 0.0]])
        x = ArmInputs(*[np.stack(v) for v in zip(*[make_inputs(r, np.tile(t, (T, 1))) for t in tgt])])
        s0 = ArmState(*[np.stack(v) for v in zip(*[initial_state(r, q=q) for q in q0])])
        _, meas = rollout_native(r, r.nominal_params(), x, s0)
        wgt = np.zeros((2, T, 5))
        wgt[..., :4] = 1.0
        force = np.zeros((2, T, 3))
        force[1, 4:, 2] = -0.5  # a labelled contact (force gauge) in the second window
        w = LearnedWindows(inputs=LearnedInputs(*x), state0=s0, q_meas=meas.q, wgt=wgt, force=force,
                           force_w=np.ones((2, T)), condition=np.array([[0.0, 0, 0, 0], [0, 0, 1, 0]]))
        roll = jax.vmap(make_mjx_rollout(r).with_heads, in_axes=(None, 0, 0, None))
        units = _units(r)
        diff, static = eqx.partition(model, trainable(model))

        @eqx.filter_jit
        def value_and_grad(d, w):
            return eqx.filter_value_and_grad(lambda d: arm_loss(eqx.combine(d, static), w, roll, units)[0])(d)

    return dict(robot=r, model=model, w=w, x=x, s0=s0, meas=meas, vg=value_and_grad, diff=diff, static=static)


def test_same_api_and_mjx_matches_native(setup):
    """Learned and analytic parameters go through the same entry points and give the same output
    structure; the MJX and native learned rollouts agree to round-off."""
    r, m, x, s0 = setup["robot"], setup["model"], setup["x"], setup["s0"]
    with physics_precision():
        sa, oa = rollout_native(r, r.nominal_params(), x, s0)
        sn, on = rollout_native(r, m, LearnedInputs(*x), s0)
        sm, om = eqx.filter_jit(jax.vmap(make_mjx_rollout(r), in_axes=(None, 0, 0)))(m, LearnedInputs(*x), s0)
    for a, b, c in ((sa, sn, sm), (oa, on, om)):
        assert type(a) is type(b) is type(c)
        assert [np.shape(v) for v in a] == [np.shape(v) for v in b] == [np.shape(v) for v in c]
    assert isinstance(on, ArmOutputs) and isinstance(sn, ArmState)
    np.testing.assert_allclose(np.asarray(om.q), on.q, atol=1e-9)
    np.testing.assert_allclose(np.asarray(om.tau_motor), on.tau_motor, atol=1e-7)
    # the network does drive the joints: its rollout is not the analytic one
    assert np.abs(on.q - oa.q)[:, -1, :4].max() > 1e-3
    # effort within the channel's bounds, recorded as the motor effort
    E = np.array(m.effort_limit)
    assert np.all(np.abs(on.tau_motor[..., :4]) <= E + 1e-12)


def test_residual_with_zero_correction_is_the_analytic_model(setup):
    r, x, s0 = setup["robot"], setup["x"], setup["s0"]
    with physics_precision():
        m = make_learned_arm(r, "mlp", channels=r.joint_names[:4], per_channel=FEATS,
                             normalizer=setup["model"].normalizer, effort_scale=0.1, residual=True, history=2,
                             width=8, depth=1, d=8, head_width=8)
        _, oa = rollout_native(r, r.nominal_params(), x, s0)
        _, orr = rollout_native(r, m, LearnedInputs(*x), s0)
    np.testing.assert_array_equal(orr.q, oa.q)


def test_gradients_reach_every_network_parameter(setup):
    with physics_precision():
        loss, g = setup["vg"](setup["diff"], setup["w"])
    leaves = jax.tree.leaves(g)
    assert np.isfinite(float(loss)) and leaves
    for leaf in leaves:
        assert leaf.dtype == jnp.float32
        assert np.all(np.isfinite(np.asarray(leaf)))
        assert float(jnp.max(jnp.abs(leaf))) > 0.0  # every weight matrix / bias gets a gradient
    # only the network is trained: the normalizer and the analytic base are not in the gradient
    assert g.normalizer.mean is None and all(v is None for v in g.base.values())


def test_tiny_model_overfits_through_the_simulator(setup):
    """40 Adam steps on 2 windows through MJX cut the position loss by at least 5x."""
    d, w = setup["diff"], setup["w"]
    opt = optax.adam(3e-3)
    st = opt.init(d)
    losses = []
    with physics_precision():
        for _ in range(40):
            loss, g = setup["vg"](d, w)
            losses.append(float(loss))
            upd, st = opt.update(g, st, d)
            d = eqx.apply_updates(d, upd)
        losses.append(float(setup["vg"](d, w)[0]))
    assert np.all(np.isfinite(losses))
    assert losses[-1] < losses[0] / 5.0, losses


def test_online_inference_is_causal(setup):
    m, x = setup["model"], setup["x"]
    meas = setup["meas"]

    def run(q):
        est = OnlineEstimator(m)
        return [est.step(x.q_target[0, k], q[k], meas.dq[0, k], x.v_supply[0, k], x.enable[0, k])["effort"]
                for k in range(T)]

    q = meas.q[0].copy()
    a = run(q)
    q[5, 1] += 0.3  # perturb a future frame
    b = run(q)
    for k in range(5):
        np.testing.assert_array_equal(a[k], b[k])
    assert np.abs(a[5] - b[5]).max() > 0


def test_arm_model_file_roundtrip_and_errors(setup, tmp_path):
    r, m, x, s0 = setup["robot"], setup["model"], setup["x"], setup["s0"]
    save_arm_model(tmp_path, r.name, m, None)
    r2, m2, d = load_arm_model(tmp_path / "arm_model.json", r.name)
    assert d["kind"] == "learned" and m2.layout == m.layout
    with physics_precision():
        _, o1 = rollout_native(r, m, LearnedInputs(*x), s0)
        _, o2 = rollout_native(r2, m2, LearnedInputs(*x), s0)
    np.testing.assert_array_equal(o1.q, o2.q)
    with pytest.raises(ModelError, match="trained for robot"):
        load_arm_model(tmp_path / "arm_model.json", "other_robot")
    wpath = tmp_path / d["weights"]
    raw = bytearray(wpath.read_bytes())
    raw[-5] ^= 0xFF
    wpath.write_bytes(bytes(raw))
    with pytest.raises(ModelError) as e:
        load_arm_model(tmp_path / "arm_model.json")
    assert str(wpath) in str(e.value) and "\n" not in str(e.value)
    # a layout that does not match the weights' is refused in one line
    save_arm_model(tmp_path, r.name, m, None)
    import json

    jd = json.loads((tmp_path / "arm_model.json").read_text())
    jd["layout"]["per_channel"] = ["q", "dq", "err", "q_target"]
    (tmp_path / "arm_model.json").write_text(json.dumps(jd))
    with pytest.raises(ModelError, match="feature layout mismatch"):
        load_arm_model(tmp_path / "arm_model.json")

"""Sensorless end-effector force: the momentum observer recovers a known external torque in a
MuJoCo simulation, the Jacobian mapping agrees with finite differences and recovers a force
applied at the end effector, every estimator is causal, the linear current-to-torque fit recovers
a known gain and offset, a negative gain is clamped and reported, the head training lowers the
force error, and `estimate-force --json` has its keys."""

from __future__ import annotations

import json

import jax
import mujoco
import numpy as np
import pytest

from actuatorlab.sim.dynamics import ArmDynamics, force_from_torque
from actuatorlab.sim.force import (DEFAULT_TAU_S, Calibration, ForceFrame, ForceLog, estimate_log, fit_calibration,
                                        make_estimator)
from actuatorlab.robots import load_robot


def job_config(path, fields: dict) -> str:
    """A ``--config`` file holding ``fields`` (a job's options without a flag)."""
    path.write_text(json.dumps(fields))
    return str(path)

DT = 0.01
Q0 = np.array([0.1, -0.6, 0.3, 0.5])


@pytest.fixture(scope="module")
def dyn():
    return ArmDynamics(load_robot("open_manipulator_x"))


def _cal(dyn, gain=1.0, offset=0.0):
    n = dyn.n
    z = np.zeros(n)
    return Calibration(dyn.joints, np.full(n, gain), np.full(n, offset), np.full(n, gain), False, z, z, z,
                       np.full(n, 0.05), z, z, 0, 0.02, 0.1)


def _log(dyn, q, dq, cur, name="sim"):
    """A ForceLog in robot order (the gripper column stays zero); ``cur`` is the motor torque /
    current of the 4 arm joints."""
    T = q.shape[0]
    n = dyn.robot.n_joints
    full = lambda a: np.concatenate([a, np.zeros((T, n - a.shape[1]))], 1)  # noqa: E731
    fr = ForceFrame(full(q), full(q), full(dq), np.full((T, n), 12.0), np.ones((T, n)), full(cur),
                    np.zeros((T, n)), np.full((T, n), 30.0))
    return ForceLog(name, fr, np.arange(T) * DT, np.zeros((T, 3)), True, np.zeros(T, bool), "train", "sim",
                    {"load": "none", "contact": "none", "restricted": "none"})


def _simulate(dyn, seconds, tau_ext=None, force=None, amp=0.15):
    """Closed loop in MuJoCo on the estimator's own model: gravity compensation + PD at 100 Hz
    (held over 5 physics steps of 2 ms) tracking slow sinusoids, plus a constant external joint
    torque ``tau_ext`` or a constant end-effector force ``force`` (base frame, at the end-effector
    point). Returns q, dq, tau_m at the 100 Hz samples."""
    m = mujoco.MjModel.from_xml_string("<mujoco/>") if dyn is None else dyn.model
    d = mujoco.MjData(m)
    m.opt.timestep = 0.002
    d.qpos[:] = Q0
    body = m.body(dyn.ee_body).id
    T = int(seconds / DT)
    Q, DQ, TAU = np.zeros((T, 4)), np.zeros((T, 4)), np.zeros((T, 4))
    for k in range(T):
        t = k * DT
        qd = Q0 + amp * np.sin(2 * np.pi * 0.25 * t + np.arange(4))
        Q[k], DQ[k] = d.qpos, d.qvel
        tau = dyn.gravity(d.qpos.copy()) + 8.0 * (qd - d.qpos) - 0.8 * d.qvel
        TAU[k] = tau
        for _ in range(5):
            d.qfrc_applied[:] = tau + (0.0 if tau_ext is None else tau_ext)
            if force is not None:
                mujoco.mj_forward(m, d)
                mujoco.mj_applyFT(m, d, np.asarray(force, float), np.zeros(3), d.xpos[body].copy(), body,
                                  d.qfrc_applied)
            mujoco.mj_step(m, d)
    return Q, DQ, TAU


def test_momentum_observer_recovers_a_constant_external_torque(dyn):
    tau_ext = np.array([0.08, -0.15, 0.12, 0.05])  # [N.m]
    q, dq, tau_m = _simulate(dyn, 3.0, tau_ext=tau_ext)
    assert np.ptp(q, axis=0).min() > 0.1  # the arm really moves (C^T qd and M(q) matter)
    mo = make_estimator("momentum_observer", dyn.robot, dyn=dyn, calibration=_cal(dyn), k_o=20.0)
    mo.reset()
    r = np.array([mo.step(_log(dyn, q, dq, tau_m).frame(k)).tau_ext for k in range(q.shape[0])])
    late = r[150:]  # after 1.5 s (>> 1/K_O = 50 ms)
    err = np.abs(late - tau_ext).max(axis=0)
    assert np.all(err <= 0.03 * np.abs(tau_ext) + 2e-3), (late.mean(0), tau_ext)
    # first-order response: ~63 % of the step after 1/K_O
    assert 0.4 < r[5, 1] / tau_ext[1] < 0.9


def test_jacobian_matches_finite_differences(dyn):
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = Q0 + rng.uniform(-0.5, 0.5, 4)
        J = dyn.jacobian(q)
        h = 1e-6
        Jfd = np.stack([(dyn.ee_position(q + h * e) - dyn.ee_position(q - h * e)) / (2 * h) for e in np.eye(4)], 1)
        np.testing.assert_allclose(J, Jfd, atol=1e-7)
        # the pseudo-inverse recovers any force from the torque it makes
        f = rng.normal(size=3)
        np.testing.assert_allclose(force_from_torque(J, J.T @ f), f, atol=1e-9)


def test_coriolis_transpose_is_the_kinetic_energy_gradient(dyn):
    # C(q, qd)^T qd = 1/2 d/dq (qd^T M(q) qd) (Christoffel symbols); checked by finite differences
    rng = np.random.default_rng(1)
    q, dq = Q0 + rng.uniform(-0.4, 0.4, 4), rng.uniform(-2.0, 2.0, 4)
    h = 1e-6
    grad = np.array([(dq @ dyn.mass_matrix(q + h * e) @ dq - dq @ dyn.mass_matrix(q - h * e) @ dq) / (4 * h)
                     for e in np.eye(4)])
    ct = dyn.coriolis_transpose(q, dq)
    assert np.abs(ct).max() > 1e-3  # not trivially zero at this speed
    np.testing.assert_allclose(ct, grad, atol=1e-7)


def test_observer_and_mapping_recover_an_end_effector_force_in_simulation(dyn):
    f = np.array([0.6, -0.4, -1.2])  # [N], base frame, at the end-effector point
    q, dq, tau_m = _simulate(dyn, 2.5, force=f, amp=0.02)
    mo = make_estimator("momentum_observer", dyn.robot, dyn=dyn, calibration=_cal(dyn))
    out = estimate_log(mo, _log(dyn, q, dq, tau_m))
    err = np.abs(out["force"][120:] - f).max()
    assert err < 0.05 * np.linalg.norm(f), out["force"][-1]


def _free_motion(dyn, seconds=6.0):
    q, dq, tau = _simulate(dyn, seconds, amp=0.4)
    return q, dq


def test_linear_map_recovers_known_gain_and_offset(dyn):
    q, dq = _free_motion(dyn)
    # current of a motor with known gain/offset that produces the inverse-dynamics torque of the
    # estimator's own (filtered) signals: the least squares must return them
    from actuatorlab.sim.force_data import _filtered

    gain, offset = np.array([2.4, 1.9, 2.1, 0.8]), np.array([0.02, -0.05, 0.1, 0.0])
    lg = _log(dyn, q, dq, np.zeros_like(q))
    qq, dq_f, ddq, _ = _filtered(lg, np.arange(4), DEFAULT_TAU_S, DT)
    tau = np.array([dyn.inverse_dynamics(qq[k], dq_f[k], ddq[k]) for k in range(len(q))])
    # the fit low-passes the current like the velocity; a first-order filter is linear, so feed the
    # torque's inverse filter: i_k such that LPF(i)_k = (tau_k - b) / a
    a = DT / (DEFAULT_TAU_S + DT)
    target = (tau - offset) / gain
    cur = np.empty_like(target)
    cur[0] = target[0]
    cur[1:] = target[:-1] + (target[1:] - target[:-1]) / a
    cal = fit_calibration(dyn, [_log(dyn, q, dq, cur)], friction=False)
    np.testing.assert_allclose(cal.gain, gain, rtol=1e-6)
    np.testing.assert_allclose(cal.offset, offset, atol=1e-6)
    assert not cal.warnings and not cal.clamped
    # and id_linear then reads zero force on this free motion
    out = estimate_log(make_estimator("id_linear", dyn.robot, dyn=dyn, calibration=cal), _log(dyn, q, dq, cur))
    assert np.abs(out["force"][5:]).max() < 1e-6


def test_negative_gain_is_clamped_and_reported(dyn):
    q, dq, tau = _simulate(dyn, 4.0, amp=0.4)
    cur = tau.copy()
    cur[:, 2] *= -1.0  # joint3's current sensor wired the wrong way round
    cal = fit_calibration(dyn, [_log(dyn, q, dq, cur)], friction=False, min_gain=0.1)
    assert cal.clamped == ("joint3",)
    assert cal.raw_gain[2] < 0 and cal.gain[2] == pytest.approx(0.1)
    assert "joint3" in cal.warnings[0] and "negative" in cal.warnings[0]
    assert np.all(cal.gain[[0, 1, 3]] > 0.5)


def _tiny_learned(robot):
    from actuatorlab.learned.arm import make_learned_arm
    from actuatorlab.models.features import Normalizer

    feats = ("q_target", "q", "dq", "err", "current")
    F = 4 * len(feats)
    return make_learned_arm(robot, "mlp", channels=robot.joint_names[:4], per_channel=feats,
                            normalizer=Normalizer(np.zeros(F), np.ones(F)), effort_scale=0.5, history=3,
                            key=jax.random.PRNGKey(1), width=8, depth=1, d=8, head_width=8)


def test_every_estimator_is_causal(dyn):
    rng = np.random.default_rng(2)
    T, k0 = 40, 25
    q = Q0 + 0.05 * np.cumsum(rng.normal(size=(T, 4)), 0) * DT
    dq = rng.normal(size=(T, 4)) * 0.2
    cur = rng.normal(size=(T, 4)) * 0.3
    lg = _log(dyn, q, dq, cur)
    fr2 = ForceFrame(*[a.copy() for a in lg.frames])
    for a in fr2:
        a[k0:] += rng.normal(size=a[k0:].shape)  # perturb the future from frame k0 on
    lg2 = ForceLog(lg.name, fr2, lg.time, lg.force, True, lg.contact, "train", "sim", lg.conditions)
    cal = _cal(dyn, 2.0, 0.01)
    calf = Calibration(**{**cal.__dict__, "friction": True, "coulomb": np.full(4, 0.1), "play_width": np.full(4, 0.05)})
    ests = [make_estimator("id_linear", dyn.robot, dyn=dyn, calibration=cal),
            make_estimator("id_friction", dyn.robot, dyn=dyn, calibration=calf),
            make_estimator("momentum_observer", dyn.robot, dyn=dyn, calibration=calf),
            # soft gate: the tiny untrained gate stays below 0.5, where the default force is exactly 0
            make_estimator("learned", dyn.robot, model=_tiny_learned(dyn.robot), soft_gate=True)]
    for est in ests:
        a, b = estimate_log(est, lg), estimate_log(est, lg2)
        assert np.array_equal(a["force"][:k0], b["force"][:k0]), est.name
        assert not np.allclose(a["force"][k0:], b["force"][k0:]), est.name  # the perturbation is seen


def test_unknown_method_and_missing_inputs(dyn):
    from actuatorlab.errors import ModelError, UnknownNameError

    with pytest.raises(UnknownNameError, match="momentum_observer"):
        make_estimator("kalman", dyn.robot)
    with pytest.raises(ModelError, match="calibration"):
        make_estimator("id_linear", dyn.robot, dyn=dyn)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    from actuatorlab.synth import run_synth

    out = tmp_path_factory.mktemp("force") / "syn"
    run_synth("open_manipulator_x", "smoke", out, seed=1)
    return out


def test_train_heads_lowers_the_force_error(smoke, tmp_path):
    from actuatorlab.learned.heads import HeadsConfig, train_heads
    from actuatorlab.logs import load_logs

    trajs = load_logs([smoke / "heldout"])  # a push, its no-contact pair and a payload: labelled forces
    d = train_heads("open_manipulator_x", trajs, trajs, HeadsConfig(arch="mlp", sizes=dict(width=32, depth=2, d=32,
                                                                                          head_width=32),
                                                                   steps=100, batch=64, eval_every=100, lr=3e-3),
                    out=tmp_path / "run", progress=False)
    assert d["training"]["torque_head"].startswith("untrained")
    rows = [json.loads(s) for s in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    first = next(r["force_mae"] for r in rows if "force_mae" in r)
    assert d["training"]["best_val_force_mae"] < 0.5 * first
    # fine-tuning the heads of a given model leaves its trunk and torque head untouched
    from actuatorlab.learned.arm import load_arm_model

    m0 = load_arm_model(tmp_path / "run" / "arm_model.json")[1]
    d2 = train_heads("open_manipulator_x", trajs, trajs, HeadsConfig(steps=2, batch=64, eval_every=2, lr=3e-3),
                     out=tmp_path / "run2", init=m0, progress=False)
    assert d2["training"]["torque_head"] == "as initialised" and not d2["training"]["trunk_trained"]
    m1 = load_arm_model(tmp_path / "run2" / "arm_model.json")[1]
    same = lambda a, b: all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))  # noqa: E731
    assert same(m0.net.trunk, m1.net.trunk) and same(m0.net.heads.torque, m1.net.heads.torque)
    assert not same(m0.net.heads.force, m1.net.heads.force)


def test_lazy_training_windows_equal_the_stored_ones(smoke, tmp_path):
    """train_heads gathers its training windows per batch (head_data(lazy=True)): every window, at
    log starts too, equals the stored one, labels included, at about 1 / (H + 1) of the memory."""
    from actuatorlab.learned.arm import load_arm_model
    from actuatorlab.learned.head_data import LazyWindows, head_data
    from actuatorlab.learned.heads import HeadsConfig, train_heads
    from actuatorlab.logs import load_logs
    from actuatorlab.robots import load_robot

    trajs = load_logs([smoke / "heldout"])
    train_heads("open_manipulator_x", trajs, trajs, HeadsConfig(arch="mlp", sizes=dict(width=8, depth=1, d=8, head_width=8),
                                                                steps=1, batch=8, eval_every=1),
                out=tmp_path / "run", progress=False)
    model = load_arm_model(tmp_path / "run" / "arm_model.json")[1]
    robot = load_robot("open_manipulator_x")
    eager, lazy = head_data(robot, model, trajs), head_data(robot, model, trajs, lazy=True)
    assert isinstance(lazy.x, LazyWindows) and lazy.n == eager.n and lazy.x.shape == eager.x.shape
    np.testing.assert_array_equal(np.asarray(lazy.x), eager.x)
    idx = np.random.default_rng(0).integers(0, eager.n, 64)
    for a, b in zip(jax.tree.leaves(eager.take(idx)), jax.tree.leaves(lazy.take(idx))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    n, H1, F = eager.x.shape  # stored: n (H + 1) F numbers; gathered: n F frames + n (H + 1) indices
    assert lazy.x.frames.nbytes + lazy.x.src.nbytes == 4 * n * (F + H1) < eager.x.nbytes / 5


def test_cli_estimate_force_json(smoke, tmp_path, capsys):
    from actuatorlab.app.cli import main
    from actuatorlab.learned.arm import save_arm_model

    robot = load_robot("open_manipulator_x")
    save_arm_model(tmp_path / "run", robot.name, _tiny_learned(robot), None)
    capsys.readouterr()
    assert main(["estimate-force", str(tmp_path / "run" / "arm_model.json"), str(smoke / "heldout"),
                 "--robot", robot.name, "--calibrate", str(smoke / "train"), "--json",
                 "--report", str(tmp_path / "force.html"), "--out", str(tmp_path / "force.csv")]) == 0
    r = json.loads(capsys.readouterr().out)
    rows = (tmp_path / "force.csv").read_text().splitlines()
    assert rows[0].startswith("log,time,learned/force_x") and len(rows) == 1 + r["n_frames"]
    methods = {"learned", "id_linear", "id_friction", "momentum_observer"}
    for key in ("force_mae", "force_mae_by_task", "gate_accuracy", "false_positive_contact_rate"):
        assert set(r[key]) == methods, key
    assert all(v >= 0 for v in r["force_mae"].values())
    assert set(r["force_mae_by_task"]["id_linear"]) == {"lift_hold", "push_hold", "no_contact"}
    assert 0 <= r["false_positive_contact_rate"]["momentum_observer"] <= 1
    assert "gain_warnings" in r and (tmp_path / "force.html").stat().st_size > 100_000
    assert r["contact_rule"]["learned"] == "sigmoid(gate) > 0.5; force 0 elsewhere"
    # the classical methods are never calibrated on evaluated logs
    assert main(["estimate-force", "-", str(smoke / "train"), "--robot", robot.name,
                 "--calibrate", str(smoke / "train")]) == 2
    assert "overlap" in capsys.readouterr().err


def _tiny_heads_model():
    """A small untrained MLP arm model over the OpenManipulator-X's 4 arm joints, and its number of
    input features per frame."""
    from actuatorlab.learned.arm import DEFAULT_FEATURES, make_learned_arm
    from actuatorlab.models.features import Normalizer

    robot = load_robot("open_manipulator_x")
    ch = robot.joint_names[:4]
    nf = len(ch) * len(DEFAULT_FEATURES)
    m = make_learned_arm(robot, "mlp", channels=ch, per_channel=DEFAULT_FEATURES, normalizer=Normalizer(
        np.zeros(nf), np.ones(nf)), effort_scale=1.0, key=jax.random.PRNGKey(0), width=8, depth=1, d=4, head_width=4)
    return m, nf


def test_heads_loss_contact_weight_and_in_contact_mae():
    """J's force term is linear in the contact weight w_c: (1 + w_c contact) huber; the in-contact
    MAE averages |f_hat - f| over labelled frames in contact only."""
    from actuatorlab.learned.head_data import HeadData
    from actuatorlab.learned.heads import heads_loss

    m, nf = _tiny_heads_model()
    rng = np.random.default_rng(0)
    N = 6
    d = HeadData(rng.normal(size=(N, m.layout.history + 1, nf)).astype(np.float32),
                 rng.normal(size=(N, 3)).astype(np.float32) * 3, np.array([1, 1, 1, 1, 1, 0], np.float32),
                 np.array([1, 0, 1, 0, 0, 1], np.float32), np.ones((N, 4), np.float32))
    F = {w: float(heads_loss(m, d, contact_weight=w)[1]["force"]) for w in (0.0, 4.0, 9.0)}
    assert F[9.0] > F[4.0] > F[0.0] > 0
    assert (F[9.0] - F[4.0]) / 5 == pytest.approx((F[4.0] - F[0.0]) / 4, rel=1e-5)
    assert float(heads_loss(m, d)[0]) == pytest.approx(float(heads_loss(m, d, contact_weight=4.0)[0]))
    heads = jax.vmap(lambda x: m.net(m.normalizer.apply(x)))(d.x)
    f_hat = np.asarray(jax.nn.sigmoid(heads.gate_logit))[:, None] * np.asarray(heads.force_raw)
    sel = (d.force_w * d.contact) > 0  # frames 0 and 2 (frame 5 is in contact but unlabelled)
    want = np.abs(f_hat[sel] - d.force[sel]).mean()
    assert float(heads_loss(m, d)[1]["force_mae_contact"]) == pytest.approx(want, rel=1e-5)


def test_validation_in_chunks_equals_one_call():
    """val_metrics scores a set chunk by chunk (the last chunk padded with rows that count nowhere)
    and gives heads_loss's terms on the whole set in one call, also on gathered (lazy) windows."""
    from actuatorlab.learned.head_data import HeadData, LazyWindows
    from actuatorlab.learned.heads import heads_loss, val_metrics

    m, nf = _tiny_heads_model()
    rng = np.random.default_rng(1)
    N, H = 23, m.layout.history
    frames = rng.normal(size=(N, nf)).astype(np.float32)
    src = np.clip(np.arange(N)[:, None] + np.arange(-H, 1)[None, :], 0, N - 1).astype(np.int32)
    lazy = LazyWindows(frames, src)
    args = (rng.normal(size=(N, 3)).astype(np.float32) * 3, (rng.random(N) > 0.2).astype(np.float32),
            (rng.random(N) > 0.5).astype(np.float32), (rng.random((N, 4)) > 0.5).astype(np.float32))
    whole = {k: float(v) for k, v in heads_loss(m, HeadData(np.asarray(lazy), *args))[1].items()}
    for chunk in (5, 23, 64):
        got = val_metrics(m, HeadData(lazy, *args), chunk=chunk)
        assert got.keys() == whole.keys()
        for k in whole:
            assert got[k] == pytest.approx(whole[k], rel=1e-5), (chunk, k)


def _with_prior(model, prior):
    import dataclasses

    return dataclasses.replace(model, force_prior=prior)


def test_force_prior_is_what_the_head_corrects_and_travels_with_the_model(dyn, smoke, tmp_path):
    """f = sigmoid(gate) (f_raw + f_prior) with the soft gate: with the force head zeroed and the gate
    logit 0 the learned estimate is exactly half the classical one, frame by frame and causally (and
    exactly 0 with the default gate, which calls a probability of 0.5 free); the prior survives
    save / load, enters the head loss, and a malformed entry is a one-line error."""
    import equinox as eqx

    from actuatorlab.errors import ModelError
    from actuatorlab.sim.force import ForcePrior
    from actuatorlab.learned.arm import load_arm_model, save_arm_model
    from actuatorlab.learned.head_data import HeadData
    from actuatorlab.learned.heads import heads_loss

    robot = dyn.robot
    prior = ForcePrior("id_linear", _cal(dyn, 2.0, 0.01))
    m = _tiny_learned(robot)
    zero = lambda t: jax.tree.map(lambda a: a * 0 if eqx.is_inexact_array(a) else a, t)  # noqa: E731
    m = eqx.tree_at(lambda x: (x.net.heads.force, x.net.heads.gate), m,
                    replace=(zero(m.net.heads.force), zero(m.net.heads.gate)))
    m = _with_prior(m, prior)
    rng = np.random.default_rng(3)
    T = 30
    lg = _log(dyn, Q0 + 0.01 * np.cumsum(rng.normal(size=(T, 4)), 0), rng.normal(size=(T, 4)) * 0.2,
              rng.normal(size=(T, 4)) * 0.3)
    classical = estimate_log(make_estimator("id_linear", robot, dyn=dyn, calibration=prior.calibration), lg)["force"]
    learned = estimate_log(make_estimator("learned", robot, model=m, soft_gate=True), lg)
    assert np.abs(classical).max() > 0.1
    np.testing.assert_allclose(learned["force"], 0.5 * classical, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(learned["contact"], 0.5)
    assert not np.any(estimate_log(make_estimator("learned", robot, model=m), lg)["force"])
    # causal: a perturbed future changes nothing before it
    fr2 = ForceFrame(*[a.copy() for a in lg.frames])
    fr2.current[20:] += 1.0
    lg2 = ForceLog(lg.name, fr2, lg.time, lg.force, True, lg.contact, "train", "sim", lg.conditions)
    l2 = estimate_log(make_estimator("learned", robot, model=m, soft_gate=True), lg2)["force"]
    assert np.array_equal(l2[:20], learned["force"][:20]) and not np.allclose(l2[20:], learned["force"][20:])
    # the head loss sees the prior: f_hat = 0.5 prior
    x = np.zeros((T, m.layout.history + 1, m.layout.n_features), np.float32)
    f = rng.normal(size=(T, 3)).astype(np.float32)
    d = HeadData(x, f, np.ones(T, np.float32), np.zeros(T, np.float32), np.ones((T, 4), np.float32),
                 classical.astype(np.float32))
    assert float(heads_loss(m, d)[1]["force_mae"]) == pytest.approx(np.abs(0.5 * classical - f).mean(), rel=1e-5)
    # save / load keeps the prior and the estimate
    save_arm_model(tmp_path / "run", robot.name, m, None)
    saved = json.loads((tmp_path / "run" / "arm_model.json").read_text())
    assert saved["force_prior"]["method"] == "id_linear"
    m2 = load_arm_model(tmp_path / "run" / "arm_model.json")[1]
    assert m2.force_prior.method == "id_linear"
    np.testing.assert_array_equal(m2.force_prior.calibration.gain, prior.calibration.gain)
    np.testing.assert_allclose(estimate_log(make_estimator("learned", robot, model=m2, soft_gate=True), lg)["force"],
                               learned["force"], rtol=1e-6, atol=1e-7)
    del saved["force_prior"]["calibration"]["gain"]
    (tmp_path / "run" / "arm_model.json").write_text(json.dumps(saved))
    with pytest.raises(ModelError, match=r"arm_model.json: force calibration: malformed entry .*gain"):
        load_arm_model(tmp_path / "run" / "arm_model.json")
    with pytest.raises(ModelError, match="needs a calibration with friction"):
        ForcePrior("momentum_observer", prior.calibration)


def test_learned_force_is_zero_on_frames_the_gate_calls_free(dyn):
    """The reported learned force is sigmoid(gate) f_raw where the contact probability is above 0.5
    and exactly 0 at or below it (the contact rule), online and through the estimator; the soft
    gate (``soft_gate=True``) gives sigmoid(gate) f_raw everywhere; f_raw is the same either way."""
    import equinox as eqx

    from actuatorlab.sim.force import LearnedTelemetry
    from actuatorlab.sim.arm_learned import CONTACT_GATE, OnlineEstimator, gate_weight

    assert CONTACT_GATE == 0.5 and gate_weight(0.5) == 0.0 and gate_weight(0.51) == 0.51
    assert gate_weight(0.2, soft_gate=True) == 0.2 and gate_weight(0.2) == 0.0
    robot = dyn.robot
    rng = np.random.default_rng(5)
    T = 12
    lg = _log(dyn, Q0 + 0.01 * np.cumsum(rng.normal(size=(T, 4)), 0), rng.normal(size=(T, 4)) * 0.2,
              rng.normal(size=(T, 4)) * 0.3)
    base = _tiny_learned(robot)
    zero = lambda t: jax.tree.map(lambda a: a * 0 if eqx.is_inexact_array(a) else a, t)  # noqa: E731
    for logit in (-1.0, 1.0):
        gate = zero(base.net.heads.gate)
        gate = eqx.tree_at(lambda g: g.layers[-1].bias, gate, gate.layers[-1].bias + logit)
        m = eqx.tree_at(lambda x: x.net.heads.gate, base, gate)
        s = 1.0 / (1.0 + np.exp(-logit))
        cut = estimate_log(make_estimator("learned", robot, model=m), lg)
        soft = estimate_log(make_estimator("learned", robot, model=m, soft_gate=True), lg)
        np.testing.assert_allclose(cut["contact"], s, rtol=1e-6)
        assert np.abs(soft["force"]).max() > 1e-3
        if logit < 0:
            assert not np.any(cut["force"])
        else:
            np.testing.assert_array_equal(cut["force"], soft["force"])
        est, est_soft = OnlineEstimator(m), OnlineEstimator(m, soft_gate=True)
        tel = LearnedTelemetry(robot, m)
        for k in range(3):
            fr = lg.frame(k)
            args = (fr.q_target, fr.q, fr.dq, fr.v_supply, fr.enable, tel(fr))
            o, o2 = est.step(*args), est_soft.step(*args)
            np.testing.assert_array_equal(o["force_raw"], o2["force_raw"])
            np.testing.assert_allclose(o2["force"], s * o2["force_raw"], rtol=1e-5, atol=1e-7)
            np.testing.assert_array_equal(o["force"], o2["force"] if logit > 0 else 0 * o2["force"])


def _recipes():
    """bench/force_recipes.py (the options measured and not adopted)."""
    import sys
    from pathlib import Path

    bench = str(Path(__file__).resolve().parents[1] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import force_recipes

    return force_recipes


def test_force_prior_recipe_calibrates_it_on_free_motion(smoke, tmp_path):
    """bench/force_recipes.py force_prior (not adopted): the prior travels with the model."""
    from actuatorlab.learned.arm import load_arm_model
    from actuatorlab.learned.heads import HeadsConfig
    from actuatorlab.logs import load_logs

    tr = load_logs([smoke / "train"]) + load_logs([smoke / "heldout"])
    cfg = HeadsConfig(arch="mlp", sizes=dict(width=16, depth=1, d=16, head_width=16), steps=2, batch=32, eval_every=2,
                      augment_yaw=True, augment_mirror=True)
    d = _recipes().train_heads_recipe("open_manipulator_x", tr, load_logs([smoke / "heldout"]), cfg,
                                      out=tmp_path / "run", force_prior="id_linear")
    fp = d["force_prior"]
    # the yaw and mirror augmentations run with a prior too (they turn and reflect both)
    assert d["training"]["augment_yaw"] is True and d["training"]["augment_mirror"] is True
    assert d["training"]["trunk_trained"] is True
    assert fp["method"] == "id_linear" and not fp["calibration"]["friction"]
    assert fp["calibration"]["n_samples"] > 0 and all(g > 0 for g in fp["calibration"]["gain"])
    m = load_arm_model(tmp_path / "run" / "arm_model.json")[1]
    assert m.force_prior.method == "id_linear"


def test_labelled_calibration_recovers_the_gain_with_external_forces(dyn):
    """fit_calibration(labelled=True): with the label's torque J_p^T f subtracted, a log with an
    external force gives back the motor's gain and offset; such a log is refused by the
    free-motion calibration, and a restricted joint (torque no label carries) by both."""
    from actuatorlab.errors import DataError
    from actuatorlab.sim.force_data import _filtered

    q, dq = _free_motion(dyn)
    T = len(q)
    f = np.zeros((T, 3))
    f[T // 3:] = [1.5, -0.5, -2.0]  # [N] a push that starts a third of the way in
    gain, offset = np.array([2.4, 1.9, 2.1, 0.8]), np.array([0.02, -0.05, 0.1, 0.0])
    base = _log(dyn, q, dq, np.zeros_like(q))
    qq, dq_f, ddq, _ = _filtered(base, np.arange(4), DEFAULT_TAU_S, DT)
    tau = np.array([dyn.inverse_dynamics(qq[k], dq_f[k], ddq[k]) - dyn.jacobian(qq[k]).T @ f[k] for k in range(T)])
    a = DT / (DEFAULT_TAU_S + DT)
    target = (tau - offset) / gain
    cur = np.empty_like(target)
    cur[0] = target[0]
    cur[1:] = target[:-1] + (target[1:] - target[:-1]) / a
    lg0 = _log(dyn, q, dq, cur)
    pushed = ForceLog("push", lg0.frames, lg0.time, f, True, np.linalg.norm(f, axis=1) > 0.01, "train", "push_hold",
                      {"load": "none", "contact": "push", "restricted": "none"})
    cal = fit_calibration(dyn, [pushed], friction=False, labelled=True)
    assert cal.labelled
    np.testing.assert_allclose(cal.gain, gain, rtol=1e-6)
    np.testing.assert_allclose(cal.offset, offset, atol=1e-6)
    # id_linear with it reads the push back
    out = estimate_log(make_estimator("id_linear", dyn.robot, dyn=dyn, calibration=cal), pushed)
    np.testing.assert_allclose(out["force"][T // 3 + 5:], f[T // 3 + 5:], atol=1e-5)
    # ignoring the label biases the gains; the free-motion calibration refuses the log
    with pytest.raises(DataError, match="free-motion"):
        fit_calibration(dyn, [pushed], friction=False)
    restricted = ForceLog("r", lg0.frames, lg0.time, f, True, pushed.contact, "train", "push_hold",
                          {"load": "none", "contact": "push", "restricted": "joint3"})
    with pytest.raises(DataError, match="no restricted joint"):
        fit_calibration(dyn, [restricted], friction=False, labelled=True)


def test_infer_adds_the_force_prior_like_estimate_force(dyn, smoke, tmp_path):
    """`infer` writes for a model with a force prior the same force as the learned estimator."""
    import csv

    from actuatorlab.sim.force import ForcePrior, read_force_log
    from actuatorlab.learned.arm import load_arm_model, save_arm_model
    from actuatorlab.logs import load_logs
    from actuatorlab.app.jobs import run_infer

    import equinox as eqx

    robot = dyn.robot
    trajs = load_logs([smoke / "heldout"])
    m0 = _with_prior(_tiny_learned(robot), ForcePrior("id_linear", _cal(dyn, 2.0, 0.01)))
    # shift the gate so that about half the frames are called in contact: both sides of the cut
    s0 = estimate_log(make_estimator("learned", robot, model=m0), read_force_log(robot, trajs[0]))["contact"]
    shift = -float(np.median(np.log(s0 / (1 - s0))))
    m0 = eqx.tree_at(lambda x: x.net.heads.gate.layers[-1].bias, m0, m0.net.heads.gate.layers[-1].bias + shift)
    save_arm_model(tmp_path / "run", robot.name, m0, None)
    run_infer(tmp_path / "run" / "arm_model.json", [smoke / "heldout"], tmp_path / "infer.csv")
    rows = [r for r in csv.DictReader((tmp_path / "infer.csv").open()) if r["log"] == trajs[0].name]
    got = np.array([[float(r[f"force_{a}"]) for a in "xyz"] for r in rows])
    m = load_arm_model(tmp_path / "run" / "arm_model.json")[1]
    est = estimate_log(make_estimator("learned", robot, model=m), read_force_log(robot, trajs[0]))
    want, free = est["force"], est["contact"] <= 0.5
    assert got.shape == want.shape and np.abs(want).max() > 0.05 and 0.2 < free.mean() < 0.8
    assert not np.any(want[free]) and np.all(np.abs(want[~free]).max(axis=1) > 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_zero_estimate_reference_is_the_mean_label_magnitude_and_a_shut_gate_scores_it():
    # two labelled logs (a push along -y of 0.4 N for half the frames, and a free one) and one
    # unlabelled log; a method that always answers zero must score exactly the reference, and a
    # method that reads the push must score below it
    from actuatorlab.estimate.force_eval import score_force, zero_estimate_mae

    T = 100
    f = np.zeros((T, 3))
    f[50:, 1] = -0.4
    push = ForceLog("push", None, np.arange(T) * DT, f, True, np.linalg.norm(f, axis=1) > 0.01, "heldout/push_-y",
                    "push_hold", {})
    free = ForceLog("free", None, np.arange(T) * DT, np.zeros((T, 3)), True, np.zeros(T, bool), "heldout/push_-y",
                    "no_contact", {})
    unlab = ForceLog("u", None, np.arange(T) * DT, np.full((T, 3), 9.0), False, np.zeros(T, bool), "test", "chirp", {})
    logs = [push, free, unlab]
    z = zero_estimate_mae(logs)
    assert z["force_mae"] == pytest.approx(0.4 * 50 / (3 * 200))           # unlabelled log left out
    assert z["force_mae_in_contact"] == pytest.approx(0.4 / 3)
    assert z["force_mae_by_split"] == {"heldout/push_-y": pytest.approx(0.4 * 50 / 600)}
    assert set(z["force_mae_by_task"]) == {"push_hold", "no_contact"}
    out = lambda g: {"force": g, "contact": (np.linalg.norm(g, axis=1) > 0).astype(float)}  # noqa: E731
    res = score_force(logs, {"learned": [out(np.zeros((T, 3))) for _ in logs],
                             "id_linear": [out(lg.force * 0.9) for lg in logs]})
    assert res["zero_estimate"] == z
    assert res["force_mae"]["learned"] == pytest.approx(z["force_mae"])
    assert res["force_mae"]["id_linear"] < 0.2 * z["force_mae"]


def test_yaw_augmentation_is_an_exact_symmetry_of_the_arm(dyn):
    # the OM-X's joint 1 is a vertical hinge: turning it by d turns the end effector's Jacobian by
    # R_z(d) and leaves gravity unchanged, so a force R_z(d) f at q + d e1 needs the same joint
    # torques as f at q; yaw_augment shifts joint 1's angle features and rotates the label so
    from actuatorlab.learned.head_data import HeadData, yaw_augment, yaw_joint

    name, axis, (lo, hi) = yaw_joint(load_robot("open_manipulator_x"))
    assert name == "joint1" and np.allclose(np.abs(axis), [0, 0, 1]) and (lo, hi) == pytest.approx((-np.pi, np.pi))
    assert yaw_joint(load_robot("anymal_c")) is None  # a floating base: no fixed vertical first joint
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = rng.uniform(-1.0, 1.0, dyn.n)
        f = rng.normal(size=3)
        d = rng.uniform(-2.0, 2.0)
        q2 = q.copy()
        q2[0] += d
        c, s = np.cos(d), np.sin(d)
        R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]]) if axis[2] > 0 else np.array([[c, s, 0], [-s, c, 0], [0, 0, 1.0]])
        np.testing.assert_allclose(dyn.jacobian(q2).T @ (R @ f), dyn.jacobian(q).T @ f, atol=1e-9)
        np.testing.assert_allclose(dyn.gravity(q2), dyn.gravity(q), atol=1e-9)
    # the augmentation: columns 0 (q_target) and 1 (q) of channel 0 shift by one angle per sample,
    # the other columns stay, the force and prior turn by that angle (norms kept, z unchanged)
    B, H, Fd = 6, 4, 5
    x = rng.normal(size=(B, H, Fd)).astype(np.float32)
    force = rng.normal(size=(B, 3)).astype(np.float32)
    b = HeadData(x, force, np.ones(B, np.float32), np.zeros(B, np.float32), np.ones((B, 2), np.float32), force.copy())
    a = yaw_augment(b, [0, 1], axis, (lo, hi), 1, np.random.default_rng(1))
    shift = a.x[:, :, 0] - x[:, :, 0]
    assert np.allclose(shift, shift[:, :1], atol=1e-5) and np.allclose(a.x[:, :, 1] - x[:, :, 1], shift, atol=1e-5)
    assert np.all(np.abs(shift[:, 0]) > 1e-3)
    np.testing.assert_array_equal(a.x[:, :, 2:], x[:, :, 2:])
    assert np.all(a.x[:, -1, 1] >= lo - 1e-5) and np.all(a.x[:, -1, 1] <= hi + 1e-5)
    np.testing.assert_allclose(np.linalg.norm(a.force, axis=1), np.linalg.norm(force, axis=1), rtol=1e-5)
    np.testing.assert_allclose(a.force[:, 2], force[:, 2], atol=1e-6)
    ang = shift[:, 0] * (1 if axis[2] > 0 else -1)
    expect = np.stack([np.cos(ang) * force[:, 0] - np.sin(ang) * force[:, 1],
                       np.sin(ang) * force[:, 0] + np.cos(ang) * force[:, 1]], 1)
    np.testing.assert_allclose(a.force[:, :2], expect, atol=1e-5)
    np.testing.assert_allclose(a.prior, a.force, atol=1e-6)


def test_mirror_augmentation_is_a_symmetry_of_the_arm(dyn):
    # the OM-X is symmetric about the vertical plane of its arm: with joint 1 negated (q' = S q,
    # S = diag(-1, 1, 1, 1)) and the force reflected (f' = P f, P = diag(1, -1, 1)), the joint
    # torques are mirrored, J_p(q')^T f' = S J_p(q)^T f, and so is gravity; mirror_augment negates
    # joint 1's odd features and reflects the label of about half of the samples
    from actuatorlab.learned.head_data import HeadData, mirror_augment, mirror_symmetry

    s, P, worst = mirror_symmetry(load_robot("open_manipulator_x"))
    np.testing.assert_array_equal(s, [-1, 1, 1, 1])
    np.testing.assert_allclose(P, np.diag([1.0, -1.0, 1.0]), atol=1e-12)
    assert worst["g"] < 1e-9 and worst["J"] < 1e-9 and worst["M"] < 1e-2
    assert mirror_symmetry(load_robot("anymal_c")) is None  # no fixed vertical first joint
    rng = np.random.default_rng(0)
    for _ in range(5):
        q, f = rng.uniform(-1.0, 1.0, dyn.n), rng.normal(size=3)
        np.testing.assert_allclose(dyn.jacobian(s * q).T @ (P @ f), s * (dyn.jacobian(q).T @ f), atol=1e-9)
        np.testing.assert_allclose(dyn.gravity(s * q), s * dyn.gravity(q), atol=1e-9)
        # a different sign pattern is not a symmetry (the check can fail): joint 2 negated too
        s2 = s * np.array([1, -1, 1, 1])
        assert np.abs(dyn.gravity(s2 * q) - s2 * dyn.gravity(q)).max() > 1e-3
    B, H, Fd = 200, 3, 4
    x = rng.normal(size=(B, H, Fd)).astype(np.float32)
    force = rng.normal(size=(B, 3)).astype(np.float32)
    b = HeadData(x, force, np.ones(B, np.float32), np.zeros(B, np.float32), np.ones((B, 2), np.float32), force.copy())
    a = mirror_augment(b, [0, 2], P, np.random.default_rng(1))
    flip = np.all(a.x[:, :, 0] == -x[:, :, 0], axis=1)
    assert 0.35 < flip.mean() < 0.65
    np.testing.assert_array_equal(a.x[flip][:, :, [0, 2]], -x[flip][:, :, [0, 2]])
    np.testing.assert_array_equal(a.x[:, :, [1, 3]], x[:, :, [1, 3]])  # even columns never change
    np.testing.assert_array_equal(a.x[~flip], x[~flip])
    np.testing.assert_allclose(a.force[flip], force[flip] * np.array([1, -1, 1], np.float32))
    np.testing.assert_array_equal(a.force[~flip], force[~flip])
    np.testing.assert_allclose(a.prior, a.force)
    np.testing.assert_array_equal(a.contact, b.contact)


def test_yaw_force_frame_turns_the_head_output_with_joint_1(dyn, tmp_path):
    """force_yaw: f_raw = R_z(q1) f_net, with q1 the newest frame's measured joint-1 angle; at
    q1 = 0 the two frames agree, at q1 = pi/2 the network's x becomes y; the causal estimator uses
    the same rotation; the frame survives save / load, and a malformed entry is a one-line error."""
    import dataclasses

    from actuatorlab.errors import ModelError
    from actuatorlab.learned.arm import load_arm_model, save_arm_model
    from actuatorlab.learned.head_data import yaw_joint

    robot = dyn.robot
    m = _tiny_learned(robot)
    name, axis, _ = yaw_joint(robot)
    F = len(m.layout.per_channel)
    col = m.layout.channels.index(name) * F + m.layout.per_channel.index("q")
    my = dataclasses.replace(m, force_yaw=(col, *map(float, axis)))
    rng = np.random.default_rng(4)
    w = rng.normal(size=(m.layout.history + 1, m.layout.n_features)).astype(np.float32)
    for q1 in (0.0, np.pi / 2, -2.0):
        w[-1, col] = q1
        f0, f1 = np.asarray(m.heads(w).force_raw), np.asarray(my.heads(w).force_raw)
        c, s = np.cos(q1), np.sin(q1)
        np.testing.assert_allclose(f1, [c * f0[0] - s * f0[1], s * f0[0] + c * f0[1], f0[2]], rtol=1e-5, atol=1e-6)
    w[-1, col] = np.pi / 2
    f0, f1 = np.asarray(m.heads(w).force_raw), np.asarray(my.heads(w).force_raw)
    assert abs(f0[0]) > 1e-3 and f1[1] == pytest.approx(f0[0], rel=1e-4)
    # the per-frame estimator rotates by each frame's joint-1 angle
    T = 25
    q = Q0 + 0.3 * np.cumsum(rng.normal(size=(T, 4)), 0) * DT * 20
    lg = _log(dyn, q, rng.normal(size=(T, 4)) * 0.2, rng.normal(size=(T, 4)) * 0.3)
    a = estimate_log(make_estimator("learned", robot, model=m), lg)
    b = estimate_log(make_estimator("learned", robot, model=my), lg)
    q1 = lg.frames.q[:, robot.index(name)]
    fa, fb = a["force"], b["force"]
    np.testing.assert_allclose(fb[:, 0], np.cos(q1) * fa[:, 0] - np.sin(q1) * fa[:, 1], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(fb[:, 2], fa[:, 2], rtol=1e-5, atol=1e-7)
    save_arm_model(tmp_path / "run", robot.name, my, None)
    saved = json.loads((tmp_path / "run" / "arm_model.json").read_text())
    assert saved["force_frame"] == {"kind": "yaw", "joint": name, "feature": "q", "axis": [float(v) for v in axis]}
    m2 = load_arm_model(tmp_path / "run" / "arm_model.json")[1]
    assert m2.force_yaw == my.force_yaw
    np.testing.assert_allclose(estimate_log(make_estimator("learned", robot, model=m2), lg)["force"], fb,
                               rtol=1e-6, atol=1e-7)
    saved["force_frame"]["joint"] = "gripper"
    (tmp_path / "run" / "arm_model.json").write_text(json.dumps(saved))
    with pytest.raises(ModelError, match=r"arm_model.json: force_frame needs a channel joint"):
        load_arm_model(tmp_path / "run" / "arm_model.json")


def test_joint_force_frame_maps_joint_torques_through_the_jacobian(dyn, tmp_path):
    """force_frame "joint": the JAX chain's Jacobian equals MuJoCo's mj_jac; the damped least
    squares recovers a force from J^T f within its stated bias; yawing the arm turns the force and
    leaves the joint torques alone; the head's output is mapped by the model, in the causal
    estimator too; the frame survives save / load; and it refuses what it cannot map."""
    import dataclasses

    import jax.numpy as jnp

    from actuatorlab.errors import ModelError
    from actuatorlab.learned.arm import load_arm_model, make_learned_arm, save_arm_model
    from actuatorlab.models.features import FeatureLayout, Normalizer
    from actuatorlab.learned.force_frame import DAMPING, joint_force_map

    robot = dyn.robot
    lay = FeatureLayout(robot.joint_names[:4], ("q_target", "q", "dq", "err", "current"), (), 3)
    fm = joint_force_map(robot, lay)
    assert fm.joints == dyn.joints and fm.head_index == (0, 1, 2, 3) and hash(fm) == hash(joint_force_map(robot, lay))
    rng = np.random.default_rng(5)
    for _ in range(5):
        q = rng.uniform(-1.0, 1.0, 4)
        J, p = fm.jacobian(jnp.asarray(q, jnp.float32))
        np.testing.assert_allclose(np.asarray(J), dyn.jacobian(q), atol=2e-6)
        np.testing.assert_allclose(np.asarray(p), dyn.ee_position(q), atol=2e-6)
        f = rng.normal(size=3)
        frame = np.zeros(lay.n_features, np.float32)
        frame[list(fm.q_cols)] = q
        got = np.asarray(fm.force(jnp.asarray(frame), jnp.asarray(dyn.jacobian(q).T @ f, jnp.float32)))
        smin = np.linalg.svd(dyn.jacobian(q), compute_uv=False)[-1]
        # damped least squares: the error of each singular direction is lambda^2 / (sigma^2 + lambda^2)
        assert np.linalg.norm(got - f) <= (DAMPING ** 2 / (smin ** 2 + DAMPING ** 2) + 1e-4) * np.linalg.norm(f)
        # a yaw of the whole arm turns the force for the same joint torques
        d1 = 0.7
        frame2 = frame.copy()
        frame2[fm.q_cols[0]] += d1
        tau = jnp.asarray(rng.normal(size=4), jnp.float32)
        f1, f2 = np.asarray(fm.force(jnp.asarray(frame), tau)), np.asarray(fm.force(jnp.asarray(frame2), tau))
        c, s_ = np.cos(d1), np.sin(d1)
        np.testing.assert_allclose(f2, [c * f1[0] - s_ * f1[1], s_ * f1[0] + c * f1[1], f1[2]], rtol=1e-4, atol=1e-5)
    # a model whose force head has one output per channel, mapped by the model
    F = lay.n_features
    m = make_learned_arm(robot, "mlp", channels=lay.channels, per_channel=lay.per_channel,
                         normalizer=Normalizer(np.zeros(F), np.ones(F)), effort_scale=0.5, history=3,
                         key=jax.random.PRNGKey(1), width=8, depth=1, d=8, head_width=8, force_out=4)
    mj = dataclasses.replace(m, force_joint=fm)
    w = rng.normal(size=(lay.history + 1, F)).astype(np.float32)
    tau_net = np.asarray(m.heads(w).force_raw)
    assert tau_net.shape == (4,)
    np.testing.assert_allclose(np.asarray(mj.heads(w).force_raw), np.asarray(fm.force(w[-1], tau_net)), rtol=1e-5)
    with pytest.raises(ModelError, match="exclude each other"):
        dataclasses.replace(mj, force_yaw=(1, 0.0, 0.0, 1.0))
    T = 25
    q = Q0 + 0.3 * np.cumsum(rng.normal(size=(T, 4)), 0) * DT * 20
    lg = _log(dyn, q, rng.normal(size=(T, 4)) * 0.2, rng.normal(size=(T, 4)) * 0.3)
    est = estimate_log(make_estimator("learned", robot, model=mj), lg)
    save_arm_model(tmp_path / "run", robot.name, mj, None)
    saved = json.loads((tmp_path / "run" / "arm_model.json").read_text())
    assert saved["force_frame"] == {"kind": "joint", "ee_body": dyn.ee_body, "joints": list(dyn.joints),
                                    "damping": DAMPING}
    m2 = load_arm_model(tmp_path / "run" / "arm_model.json")[1]
    assert m2.force_joint == fm and not m2.force_yaw
    np.testing.assert_allclose(estimate_log(make_estimator("learned", robot, model=m2), lg)["force"], est["force"],
                               rtol=1e-6, atol=1e-7)
    saved["force_frame"]["joints"] = ["joint1", "joint2"]
    (tmp_path / "run" / "arm_model.json").write_text(json.dumps(saved))
    with pytest.raises(ModelError, match=r"arm_model.json: force_frame chain \['joint1', 'joint2'\] does not match"):
        load_arm_model(tmp_path / "run" / "arm_model.json")
    # every chain joint must be a channel with a measured angle
    with pytest.raises(ModelError, match=r"chain joints \['joint4'\] of open_manipulator_x are not channels"):
        joint_force_map(robot, FeatureLayout(robot.joint_names[:3], ("q", "dq"), (), 3))
    with pytest.raises(ModelError, match="needs the per-channel feature 'q'"):
        joint_force_map(robot, FeatureLayout(robot.joint_names[:4], ("dq", "current"), (), 3))


def test_train_heads_cli_passes_the_augmentations_and_the_schedule(smoke, tmp_path):
    from actuatorlab.app.cli import main

    run = tmp_path / "run"
    assert main(["train-heads", str(smoke / "train"), str(smoke / "heldout"), "--robot", "open_manipulator_x",
                 "--out", str(run), "--steps", "3", "--config", job_config(tmp_path / "heads.json", {"heads": {
                     "arch": "mlp", "sizes": {"width": 16, "depth": 1, "d": 16, "head_width": 16}, "eval_every": 1,
                     "augment_yaw": True, "augment_mirror": True}})]) == 0
    saved = json.loads((run / "arm_model.json").read_text())
    t = saved["training"]
    assert t["augment_yaw"] and t["augment_mirror"] and t["force_frame"] == "base"
    rows = [json.loads(s) for s in (run / "metrics.jsonl").read_text().splitlines()]
    assert {r["step"] for r in rows if "val" in r} == {1, 2, 3}  # validated every step (default: every 250)
    # the options measured and not adopted are bench recipes now, not flags
    for flag in ("--force-frame", "--balance-tasks", "--force-prior", "--contact-weight", "--residual-features"):
        assert main(["train-heads", str(smoke / "train"), "--robot", "open_manipulator_x", flag, "x"]) != 0


def test_force_frame_recipes_yaw_and_joint(smoke, tmp_path):
    """bench/force_recipes.py force_frame (not adopted): the yaw frame and the joint-space frame (a
    force head of one output per channel) are stored with the model and reloaded."""
    from actuatorlab.errors import UnknownNameError
    from actuatorlab.learned.arm import load_arm_model
    from actuatorlab.learned.heads import HeadsConfig
    from actuatorlab.logs import load_logs

    tr, va = load_logs([smoke / "train"]), load_logs([smoke / "heldout"])
    cfg = HeadsConfig(arch="mlp", sizes=dict(width=16, depth=1, d=16, head_width=16), steps=2, eval_every=1,
                      augment_yaw=True, augment_mirror=True)
    rec = _recipes()
    saved = rec.train_heads_recipe("open_manipulator_x", tr, va, cfg, out=tmp_path / "yaw", force_frame="yaw")
    assert saved["training"]["force_frame"] == "yaw"
    assert saved["force_frame"]["kind"] == "yaw" and saved["force_frame"]["joint"] == "joint1"
    saved = rec.train_heads_recipe("open_manipulator_x", tr, va,
                                   HeadsConfig(**{**cfg.__dict__, "residual_input": "id_friction"}),
                                   out=tmp_path / "joint", force_frame="joint")
    assert saved["training"]["force_frame"] == "joint" and saved["force_frame"]["kind"] == "joint"
    assert saved["residual_input"]["method"] == "id_friction" and saved["layout"]["per_channel"][-1] == "tau_ext"
    assert saved["sizes"]["force_out"] == 4
    m = load_arm_model(tmp_path / "joint" / "arm_model.json")[1]
    assert m.force_joint is not None and m.net.heads.force.out_size == 4
    with pytest.raises(UnknownNameError, match="unknown force frame 'body'; available: base, joint, yaw"):
        rec.recipe_model(None, tr, cfg, force_frame="body")


def test_push_signature_opposes_the_external_torque(smoke):
    """bench/force_pushes.py on the smoke suite's -y push: J^T f loads joint 1 most; the servo's
    current change against the no-contact twin opposes that torque (the motor holds the pose),
    stands far above the twin's spread, and carries part, not all, of the torque (gear losses)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "force_pushes.py"
    spec = importlib.util.spec_from_file_location("force_pushes", path)
    fp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fp)
    (row,) = fp.push_rows(smoke, ["heldout"])
    tau, dI = np.array(row["tau_ext"]), np.array(row["dI"])
    assert row["log"].endswith("push_-y_000") and row["force_n"] > 1.0
    assert int(np.argmax(np.abs(tau))) == 0 and tau[0] < -0.2  # -y at the end effector twists joint 1
    assert dI[0] > 0 and row["snr"] > 5
    assert 0.2 < row["reach_share"] < 1.0


def _online_matches_teacher_and_infer(robot, m, push, folder, tmp_path):
    """For a model reading residual inputs (its RUN under tmp_path / "run"): the causal estimator
    feeds the network exactly its teacher-forced training windows on ``push`` (the log carries no
    such channel: it is computed online), and `infer` over ``folder`` agrees with estimate-force.
    Returns the push's ForceLog."""
    import csv

    from actuatorlab.sim.force import read_force_log
    from actuatorlab.learned.arm import with_residual_inputs
    from actuatorlab.learned.head_data import head_data
    from actuatorlab.app.jobs import run_infer

    hd = head_data(robot, m, with_residual_inputs(robot, m, [push]))
    h = jax.vmap(m.heads)(hd.x)
    teacher = np.asarray(jax.nn.sigmoid(h.gate_logit)[:, None] * h.force_raw)
    lg = read_force_log(robot, push)
    online = estimate_log(make_estimator("learned", robot, model=m, soft_gate=True), lg)["force"]
    assert np.abs(teacher).max() > 1e-3
    np.testing.assert_allclose(online, teacher, rtol=1e-4, atol=1e-6)
    run_infer(tmp_path / "run" / "arm_model.json", [folder], tmp_path / "infer.csv")
    rows = [r for r in csv.DictReader((tmp_path / "infer.csv").open()) if r["log"] == push.name]
    est = estimate_log(make_estimator("learned", robot, model=m), lg)
    np.testing.assert_allclose([[float(r[f"force_{a}"]) for a in "xyz"] for r in rows], est["force"],
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose([float(r["contact"]) for r in rows], est["contact"], rtol=1e-4, atol=1e-6)
    return lg


def test_residual_input_is_what_the_online_estimator_feeds_and_mirrors_with_joint_1(smoke, tmp_path):
    """HeadsConfig(residual_input=...): the id_friction residual tau_ext, calibrated on the free-motion
    training logs, becomes one more per-channel input and travels with the model; the causal
    estimator computes it frame by frame and feeds the network exactly the teacher-forced windows
    it was trained on (the user's logs are never given the channel); under the arm's mirror
    (joint 1 negated) joint 1's tau_ext changes sign and the others do not, as ODD_FEATURES says;
    a model trained without it cannot be fine-tuned with it."""
    from actuatorlab.errors import ModelError
    from actuatorlab.sim.force import ForceLog
    from actuatorlab.learned.arm import load_arm_model
    from actuatorlab.learned.head_data import ODD_FEATURES
    from actuatorlab.learned.heads import HeadsConfig, train_heads
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision

    tr = load_logs([smoke / "train"]) + load_logs([smoke / "heldout"])
    va = load_logs([smoke / "heldout"])
    d = train_heads("open_manipulator_x", tr, va, HeadsConfig(arch="mlp", sizes=dict(width=16, depth=1, d=16,
                                                                                    head_width=16),
                                                             steps=2, batch=32, eval_every=2, augment_yaw=True,
                                                             augment_mirror=True, residual_input="id_friction"),
                    out=tmp_path / "run", progress=False)
    assert d["residual_input"]["method"] == "id_friction" and d["training"]["residual_input"] == "id_friction"
    assert d["layout"]["per_channel"][-1] == "tau_ext" and "tau_ext" in ODD_FEATURES
    assert not d["residual_input"]["calibration"]["labelled"]
    assert not any(t.has("tau_ext/joint1") for t in tr + va)  # copies were given the channel, not these
    with physics_precision():
        robot = load_robot("open_manipulator_x")
        m = load_arm_model(tmp_path / "run" / "arm_model.json", "open_manipulator_x")[1]
        push = next(t for t in va if t.name.startswith("push"))
        lg = _online_matches_teacher_and_infer(robot, m, push, smoke / "heldout", tmp_path)
        # and the rollout evaluation of such a model computes it too (the log has no channel)
        from actuatorlab.learned.arm import evaluate_learned_arm

        assert np.isfinite(evaluate_learned_arm(robot, m, [push], horizons=(20,))["position_mae"])
        # the mirror: joint 1's angles, rates, current and PWM negated, the force reflected in y
        tau = estimate_log(m.residual_input.estimator(robot), lg)["tau_ext"]
        fr = lg.frames
        s = np.ones(fr.q.shape[1])
        s[0] = -1.0  # joint 1 (robot joint order; the gripper's column stays)
        fr2 = type(fr)(*(getattr(fr, k) * s if k in ("q_target", "q", "dq", "current", "pwm") else getattr(fr, k)
                         for k in fr._fields))
        lg2 = ForceLog(lg.name, fr2, lg.time, lg.force * np.array([1.0, -1.0, 1.0]), lg.force_known, lg.contact,
                       lg.split, lg.task, lg.conditions)
        tau2 = estimate_log(m.residual_input.estimator(robot), lg2)["tau_ext"]
        assert np.abs(tau[:, 0]).max() > 0.02
        # exact but for joint 1's calibration offset b_1 [N.m], which does not change sign (2 |b_1|)
        assert np.abs(tau2[:, 0] + tau[:, 0]).max() < 2 * abs(m.residual_input.calibration.offset[0]) + 1e-4
        np.testing.assert_allclose(tau2[:, 1:4], tau[:, 1:4], atol=1e-3)
        # a residual input is chosen with the network's inputs: not added when fine-tuning
        bare = train_heads("open_manipulator_x", tr, va, HeadsConfig(arch="mlp", sizes=dict(width=8, depth=1, d=8,
                                                                                         head_width=8),
                                                                  steps=1, batch=8, eval_every=1),
                           out=tmp_path / "bare", progress=False)
        m0 = load_arm_model(tmp_path / "bare" / "arm_model.json", "open_manipulator_x")[1]
        assert bare.get("residual_input") is None
        with pytest.raises(ModelError, match="reads no residual, not 'id_friction'"):
            train_heads("open_manipulator_x", tr, va, HeadsConfig(steps=1, residual_input="id_friction"),
                        out=tmp_path / "ft", init=m0, progress=False)


def test_lever_arm_input_by_finite_differences_and_online(smoke, tmp_path):
    """f_lever = tau_ext / |J_p[:, j]|: each lever arm equals the end-effector point's speed per unit
    joint rate by central differences (for the vertical yaw joint, the point's horizontal distance
    from the axis); a lateral force f (along joint 1's end-effector motion) gives joint 1 exactly
    f_lever = |f| and the pitch joints of the planar arm no torque; a model trained with
    ``residual_features=("tau_ext", "f_lever")`` (bench/force_recipes.py, not adopted) gets the same inputs online (estimate-force,
    infer) as in its teacher-forced training windows; unknown features are refused."""
    from actuatorlab.errors import ModelError, UnknownNameError
    from actuatorlab.sim.force import LEVER_MIN, lever_arms, read_force_log
    from actuatorlab.learned.arm import load_arm_model, with_residual_inputs
    from actuatorlab.learned.head_data import ODD_FEATURES
    from actuatorlab.learned.heads import HeadsConfig
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision

    rec = _recipes()
    with physics_precision():
        robot = load_robot("open_manipulator_x")
        dyn = ArmDynamics(robot)
        rng = np.random.default_rng(3)
        for _ in range(5):
            q = rng.uniform(-0.8, 0.8, dyn.n)
            r = lever_arms(dyn, q)
            h = 1e-6
            fd = np.array([np.linalg.norm(dyn.ee_position(q + h * e) - dyn.ee_position(q - h * e)) / (2 * h)
                           for e in np.eye(dyn.n)])
            np.testing.assert_allclose(r, np.maximum(fd, LEVER_MIN), rtol=1e-5)
            p = dyn.ee_position(q)                                    # sets the kinematics at q
            jid = dyn.model.joint(dyn.joints[0]).id
            a, u = dyn.data.xanchor[jid], dyn.data.xaxis[jid] / np.linalg.norm(dyn.data.xaxis[jid])
            assert abs(abs(u[2]) - 1) < 1e-9                          # the yaw axis is vertical
            assert r[0] == pytest.approx(np.linalg.norm((p - a) - ((p - a) @ u) * u), rel=1e-6)
            J = dyn.jacobian(q)
            f = 1.7 * J[:, 0] / np.linalg.norm(J[:, 0])            # 1.7 N sideways
            tau = J.T @ f
            assert tau[0] / r[0] == pytest.approx(1.7, rel=1e-9)
            np.testing.assert_allclose(tau[1:], 0.0, atol=1e-9)

        tr = load_logs([smoke / "train"]) + load_logs([smoke / "heldout"])
        va = load_logs([smoke / "heldout"])
        cfg = HeadsConfig(arch="mlp", sizes=dict(width=16, depth=1, d=16, head_width=16), steps=2, batch=32,
                          eval_every=2, augment_yaw=True, augment_mirror=True, residual_input="id_friction")
        d = rec.train_heads_recipe("open_manipulator_x", tr, va, cfg, out=tmp_path / "run", force_frame="yaw",
                                   residual_features=("tau_ext", "f_lever"))
        assert d["layout"]["per_channel"][-2:] == ["tau_ext", "f_lever"] and "f_lever" in ODD_FEATURES
        assert d["training"]["residual_features"] == ["tau_ext", "f_lever"]
        m = load_arm_model(tmp_path / "run" / "arm_model.json", "open_manipulator_x")[1]
        push = next(t for t in va if t.name.startswith("push"))
        (withres,) = with_residual_inputs(robot, m, [push])
        tau_log = np.asarray(withres["tau_ext/joint1"], float)
        lg = read_force_log(robot, push)
        pdyn = m.residual_input.estimator(robot).dyn
        qi = [robot.index(j) for j in pdyn.joints]
        lev = np.array([lever_arms(pdyn, q[qi])[0] for q in lg.frames.q[:50]])
        np.testing.assert_allclose(np.asarray(withres["f_lever/joint1"], float)[:50], tau_log[:50] / lev, rtol=1e-6)
        _online_matches_teacher_and_infer(robot, m, push, smoke / "heldout", tmp_path)
        with pytest.raises(UnknownNameError, match="f_lever"):
            rec.recipe_model(robot, tr, cfg, residual_features=("lever",))
        with pytest.raises(ModelError, match="need a residual_input"):
            rec.recipe_model(robot, tr, HeadsConfig(), residual_features=("f_lever",))

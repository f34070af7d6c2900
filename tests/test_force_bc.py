"""Force-aware behaviour cloning experiment (bench/force_bc_lib.py): the payload sags the
arm, the privileged expert compensates it, the force estimate inside the loop is causal and
reads the payload, the policy input layout carries the force dims."""

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from actuatorlab.robots import load_robot

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import force_bc_lib as fb  # noqa: E402  (an experiment of the benchmarks, not library API)

CFG = replace(fb.BCConfig(), episode_steps=120, hold_steps=30)


@pytest.fixture(scope="module")
def setup():
    dyn, cal, make = fb.calibrate_estimator(CFG, n_envs=2, steps=300)
    return dyn, cal, make, fb.servo_stiffness(load_robot(fb.ROBOT))


def test_expert_succeeds_where_the_uncompensated_servo_sags(setup):
    dyn, _, make, K = setup
    m = 0.3
    # c = 0.8: the gain the training payloads choose on the default grid (c = 1 over-compensates:
    # the servo friction carries part of the load at rest; docs/force.md)
    ex = fb.run_episodes(fb.expert_policy(dyn, K, m, 0.8), m, 3, 7, CFG, make, dyn)
    nc = fb.run_episodes(lambda o, f, g: np.zeros((len(g), 4)), m, 3, 7, CFG, make, dyn)
    assert ex["success"].all() and (ex["final_err"] < 0.006).all()
    # 0.3 kg on a 13 N.m/rad P servo: several cm of sag, far outside the 1 cm tolerance
    assert not nc["success"].any() and (nc["final_err"] > 0.03).all()
    # the estimator reads the payload's weight while holding (m g = 2.94 N down), light: the friction
    # held at rest is invisible to it (about 0.45 m g here)
    fz = ex["f_hat"][:, -CFG.hold_steps:, 2].mean()
    assert -1.0 * m * fb.G0 < fz < -0.3 * m * fb.G0


def test_estimate_in_the_loop_is_causal(setup):
    """Changing the actions from step k0 on leaves every estimate the policy saw up to step k0
    bit-identical (the estimate of step k0 + 1 is the first to see the new command)."""
    dyn, _, make, K = setup
    k0, cfg = 40, replace(CFG, episode_steps=60, hold_steps=10)
    step = {"t": 0}

    def policy(bump):
        def act(o, f, g):
            step["t"] += 1
            d = np.stack([fb.expert_delta(dyn, K, gi, 0.2) for gi in g])
            return d + (0.1 if bump and step["t"] > k0 else 0.0)
        return act

    step["t"] = 0
    a = fb.run_episodes(policy(False), 0.2, 2, 3, cfg, make, dyn)
    step["t"] = 0
    b = fb.run_episodes(policy(True), 0.2, 2, 3, cfg, make, dyn)
    np.testing.assert_array_equal(a["f_hat"][:, :k0 + 1], b["f_hat"][:, :k0 + 1])
    np.testing.assert_array_equal(a["task_obs"][:, :k0 + 1], b["task_obs"][:, :k0 + 1])
    assert not np.allclose(a["f_hat"][:, k0 + 1:], b["f_hat"][:, k0 + 1:])


def test_policy_input_layout_and_bc_fit():
    o, f = np.arange(24.0).reshape(2, 12), np.array([[1.0, 2.0, -30.0], [0.0, 0.0, 0.0]])
    with_f, without = fb.policy_obs(o, f, CFG), fb.policy_obs(o, None, CFG)
    assert with_f.shape == (2, 15) and without.shape == (2, 12)
    np.testing.assert_array_equal(with_f[:, :12], o)
    np.testing.assert_allclose(with_f[:, 12:], CFG.force_scale * f)
    # a delta that depends on the force only is learned with the force input, not without it
    rng = np.random.default_rng(0)
    X = rng.normal(size=(512, 15))
    Y = 0.05 * np.tanh(X[:, 12:13]) * np.ones((1, 4))
    cfg = replace(CFG, steps=300)
    pol_f, loss_f = fb.train_policy(X, Y, cfg, 0)
    _, loss_n = fb.train_policy(X[:, :12], Y, cfg, 0)
    assert loss_f < 0.2 * loss_n
    assert pol_f(X[:4]).shape == (4, 4)


def test_wilson_interval():
    lo, hi = fb.wilson(20, 40)
    assert lo < 0.5 < hi and abs((lo + hi) / 2 - 0.5) < 1e-12 and 0.3 < lo < 0.36
    assert fb.wilson(0, 40)[0] == 0.0 and fb.wilson(40, 40)[1] == 1.0


def test_payload_updates_reach_the_native_model_and_builtin_refuses_them():
    from actuatorlab.envs.gym_env import NativeBatch
    from actuatorlab.errors import ModelError

    robot = load_robot(fb.ROBOT)
    upd = fb.payload_updates(robot, 0.4)
    core = NativeBatch(robot, None, num_envs=1, model_updates=upd)
    b = robot.model().body("end_effector_link").id
    assert core._model.body_mass[b] == pytest.approx(0.4) and robot.model().body_mass[b] == 0.0
    with pytest.raises(ModelError, match="model_updates"):
        NativeBatch(robot, "builtin", num_envs=1, model_updates=upd)



def _static_bias(model, q):
    """qfrc_bias (nv,) [N.m] at rest at arm posture q (the torque gravity demands)."""
    import mujoco

    d = mujoco.MjData(model)
    d.qpos[:4] = q
    mujoco.mj_forward(model, d)
    return d.qfrc_bias.copy()


def test_the_payload_adds_its_weight_at_the_end_effector_point_and_nothing_at_zero():
    """The payload's static joint torque is m g0 J_z(q)^T with J the translational Jacobian of the
    end-effector point (body origin, the expert's and the estimators' point), to 1e-9; at payload 0
    the arm's mass, inertia and static torque are unchanged."""
    import copy

    from actuatorlab.sim.dynamics import ArmDynamics

    def native_model(upd=None):  # the robot's model with the updates written in (as native_model does)
        m = copy.copy(m0)
        for k, v in (upd or {}).items():
            getattr(m, k)[...] = v
        return m

    robot = load_robot(fb.ROBOT)
    m0 = robot.model()
    b = m0.body("end_effector_link").id
    dyn = ArmDynamics(robot)
    rng = np.random.default_rng(3)
    zero = fb.payload_updates(robot, 0.0)
    np.testing.assert_array_equal(zero["body_mass"], m0.body_mass)
    np.testing.assert_array_equal(zero["body_inertia"], m0.body_inertia)
    base, empty = native_model(), native_model(zero)
    for mass in (0.1, 0.5):
        loaded = native_model(fb.payload_updates(robot, mass))
        assert loaded.body_mass.sum() == pytest.approx(m0.body_mass.sum() + mass, abs=1e-12)
        for _ in range(4):
            q = np.array(fb.GOAL_CENTER) + np.array(fb.GOAL_SPAN) * rng.uniform(-1.5, 1.5, 4)
            tau = (_static_bias(loaded, q) - _static_bias(base, q))[:4]
            np.testing.assert_allclose(tau, mass * fb.G0 * dyn.jacobian(q)[2], rtol=0, atol=1e-9)
            np.testing.assert_allclose(_static_bias(empty, q), _static_bias(base, q), rtol=0, atol=1e-12)
    assert loaded.body_ipos[b] == pytest.approx(np.zeros(3))


def test_combine_inertial_equals_a_welded_child_body():
    """combine_inertial (parallel-axis theorem, rotated principal frame) on link5, which has its own
    mass, an off-centre centre of mass and a rotated principal frame: the same mass matrix and bias
    forces as a sphere welded to link5 as a child body at the end-effector point (the synth suite's
    attachment), at random states."""
    import mujoco

    from actuatorlab.sim.dynamics import _full_m

    robot = load_robot(fb.ROBOT)
    spec = mujoco.MjSpec.from_file(robot.mjcf_path)
    m, r, pos = 0.4, fb.PAYLOAD_RADIUS, (0.126, 0.0, 0.0)
    child = spec.body("link5").add_body(name="payload", pos=list(pos), mass=m, inertia=[0.4 * m * r * r] * 3, ipos=[0, 0, 0])
    child.explicitinertial = True
    welded = spec.compile()
    one = mujoco.MjSpec.from_file(robot.mjcf_path).compile()
    i = one.body("link5").id
    assert one.body_mass[i] > 0 and np.linalg.norm(one.body_ipos[i]) > 0.01 and abs(one.body_iquat[i][0]) < 0.99
    M, c, qt, w = fb.combine_inertial(one.body_mass[i], one.body_ipos[i], one.body_iquat[i], one.body_inertia[i],
                                      m, np.array(pos), 0.4 * m * r * r * np.eye(3))
    one.body_mass[i], one.body_ipos[i], one.body_iquat[i], one.body_inertia[i] = M, c, qt, w
    assert M == pytest.approx(welded.body_mass[i] + m)
    rng = np.random.default_rng(0)
    for _ in range(3):
        out = []
        for model in (welded, one):
            d = mujoco.MjData(model)
            d.qpos[:] = rng.uniform(-1, 1, model.nq) if not out else out[0][2]
            d.qvel[:] = rng.uniform(-2, 2, model.nv) if not out else out[0][3]
            mujoco.mj_forward(model, d)
            H = np.zeros((model.nv, model.nv))
            _full_m(model, d, H)
            out.append((H, d.qfrc_bias.copy(), d.qpos.copy(), d.qvel.copy()))
        np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-9, atol=1e-12)
    zero = fb.combine_inertial(1.0, [0.1, 0, 0], [1, 0, 0, 0], [1e-3, 2e-3, 3e-3], 0.0, np.zeros(3), np.zeros((3, 3)))
    np.testing.assert_array_equal(zero[1], [0.1, 0, 0])
    np.testing.assert_array_equal(zero[3], [1e-3, 2e-3, 3e-3])

# -- the learned force head in the loop ----------------------------------------------------------
def _tiny_learned_model(seed=0):
    """An untrained tiny learned whole-robot model with the head-training layout (arm joints, state +
    telemetry features): enough to check that it runs causally in the loop, not to estimate."""
    import jax

    from actuatorlab.learned.arm import DEFAULT_FEATURES, make_learned_arm
    from actuatorlab.models.features import Normalizer

    robot = load_robot(fb.ROBOT)
    ch = robot.joint_names[:4]
    n = len(ch) * len(DEFAULT_FEATURES)
    return make_learned_arm(robot, "mlp", channels=ch, per_channel=DEFAULT_FEATURES,
                            normalizer=Normalizer(np.zeros(n), np.full(n, 10.0)), effort_scale=1.0,
                            key=jax.random.PRNGKey(seed), width=16, depth=1, d=8, head_width=8)


def test_learned_estimator_in_the_loop_is_causal(setup):
    """The learned head x gate runs through make_estimator("learned") one frame per command tick:
    changing the actions from step k0 on never changes an estimate, an observation or an action
    of the steps up to k0; the force-reading policy's later actions do change."""
    dyn, _, _, K = setup
    cfg = replace(CFG, estimator="learned", episode_steps=40, hold_steps=10)
    _, cal, make = fb.calibrate_estimator(cfg, model=_tiny_learned_model())
    assert cal is None
    k0, step, acts = 20, {"t": 0}, []

    def policy(bump):
        def act(o, f, g):
            step["t"] += 1
            d = np.stack([fb.expert_delta(dyn, K, gi, 0.2) for gi in g]) + 0.01 * np.tanh(f[:, :1])
            d = d + (0.1 if bump and step["t"] > k0 else 0.0)
            acts[-1].append(d)
            return d
        return act

    runs = []
    for bump in (False, True):
        step["t"], _ = 0, acts.append([])
        runs.append(fb.run_episodes(policy(bump), 0.2, 2, 3, cfg, make, dyn))
    a, b = runs
    assert np.all(np.isfinite(a["f_hat"])) and np.abs(a["f_hat"][:, 1:]).max() > 0  # the head answers
    np.testing.assert_array_equal(a["f_hat"][:, :k0 + 1], b["f_hat"][:, :k0 + 1])
    np.testing.assert_array_equal(a["task_obs"][:, :k0 + 1], b["task_obs"][:, :k0 + 1])
    np.testing.assert_array_equal(np.stack(acts[0][:k0]), np.stack(acts[1][:k0]))
    assert not np.allclose(a["f_hat"][:, k0 + 1:], b["f_hat"][:, k0 + 1:])


def test_bc_run_with_the_learned_estimator_completes():
    cfg = replace(CFG, estimator="learned", episode_steps=20, hold_steps=5, steps=10, batch=32)
    r = fb.run_experiment(cfg, demos_per_mass=1, trials_per_mass=1, seeds=(0,), model=_tiny_learned_model(1),
                          model_info={"test": True}, log=lambda s: None)
    assert r["estimator"] == "learned" and r["calibration"] is None and r["learned_model"] == {"test": True}
    for k in ("bc_force", "bc_no_force"):
        assert r[k]["heldout"]["trials"] == len(fb.HELDOUT_MASSES) and 0 <= r[k]["heldout"]["success"] <= 1
    assert set(r["expert_heldout_force_z_bias_n"]) == {str(m) for m in fb.HELDOUT_MASSES}
    with pytest.raises(Exception, match="learned model"):
        fb.calibrate_estimator(cfg)


def test_a_push_on_the_payload_point_loads_the_joints_like_the_payload_weight(setup):
    """body_force: a push of -m g0 e_z on the end-effector body's centre of mass puts the same
    external joint torque on the arm as a payload of m at rest (the actuator's friction sees it),
    sags the servos, and the momentum observer reads it; the runs' force label is the same."""
    dyn, _, make, _ = setup
    m = 0.3
    f = np.array([0.0, 0.0, -m * fb.G0])
    taus = []
    for mass, push in ((m, None), (0.0, f)):
        env = fb.make_env(mass, 2, CFG)
        env.reset(seed=5)
        core = env.core
        core.body_force = None if push is None else (load_robot(fb.ROBOT).model().body("end_effector_link").id,
                                                     np.tile(push, (2, 1)))
        target = np.asarray(core.home, float)[core.qadr][None].repeat(2, 0)
        env.step(target)
        taus.append(core.last_outputs.tau_ext[:, 0, :4])
    np.testing.assert_allclose(taus[1], taus[0], rtol=1e-9, atol=1e-9)  # same state at rest: same load
    # held: the push ramped in after settling holds the arm near where the payload does (the servos'
    # friction band leaves a few mrad), well away from free motion, and the momentum observer reads it
    T = 300
    ramp = lambda t: np.tile(f * np.clip((t - 100) / 100, 0.0, 1.0), (2, 1))  # noqa: E731
    push = fb.record_runs(0.0, 2, T, 11, CFG, push=ramp, hold=T)
    pay = fb.record_runs(m, 2, T, 11, CFG, hold=T)
    free = fb.record_runs(0.0, 2, T, 11, CFG, hold=T)
    np.testing.assert_allclose(push["force"][:, -1], pay["force"][:, -1])
    q_push, q_pay, q_free = (r["frames"].q[:, -1, :4] for r in (push, pay, free))
    assert np.abs(q_pay - q_free).max() > 0.05 and np.abs(q_push - q_pay).max() < 0.02
    est = make()
    est.reset()
    fz = [est.step(fb.ForceFrame(*(a[0, k] for a in push["frames"]))).force[2] for k in range(T)]
    assert -1.0 * m * fb.G0 < np.mean(fz[-50:]) < -0.3 * m * fb.G0  # light, as for the payload (friction at rest)
    logs = fb.runs_to_logs(push, 0.0, "push", True)
    assert not logs[0]["contact"][:100].any() and logs[0]["contact"][-100:].all()  # contact once pushed
    assert logs[0]["force_z"][-1] == pytest.approx(-m * fb.G0)

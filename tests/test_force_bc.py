"""Force-aware behaviour cloning example (actuatorlab.examples.force_bc): the payload sags the
arm, the privileged expert compensates it, the force estimate inside the loop is causal and
reads the payload, the policy input layout carries the force dims."""

from dataclasses import replace

import numpy as np
import pytest

from actuatorlab.examples import force_bc as fb
from actuatorlab.robots import load_robot

CFG = replace(fb.BCConfig(), episode_steps=120, hold_steps=30)


@pytest.fixture(scope="module")
def setup():
    dyn, cal, make = fb.calibrate_estimator(CFG, n_envs=2, steps=300)
    return dyn, cal, make, fb.servo_stiffness(load_robot(fb.ROBOT))


def test_expert_succeeds_where_the_uncompensated_servo_sags(setup):
    dyn, _, make, K = setup
    m = 0.3
    ex = fb.run_episodes(fb.expert_policy(dyn, K, m, 1.0), m, 3, 7, CFG, make, dyn)
    nc = fb.run_episodes(lambda o, f, g: np.zeros((len(g), 4)), m, 3, 7, CFG, make, dyn)
    assert ex["success"].all() and (ex["final_err"] < 0.006).all()
    # 0.3 kg on a 13 N.m/rad P servo: several cm of sag, far outside the 1 cm tolerance
    assert not nc["success"].any() and (nc["final_err"] > 0.03).all()
    # the estimator reads the payload's weight while holding (m g = 2.94 N down), within 30 %
    fz = ex["f_hat"][:, -CFG.hold_steps:, 2].mean()
    assert -1.3 * m * fb.G0 < fz < -0.7 * m * fb.G0


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

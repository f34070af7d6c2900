"""Drift inside the environments' episodes: every policy step's physics runs with the episode's
parameters drifted to the episode time (Randomizer.drift), the episode parameters stay fixed."""

from __future__ import annotations

import jax
import numpy as np

from actuatorlab.envs import TimingContract
from actuatorlab.envs.gym_env import NativeBatch
from actuatorlab.sim.randomization import Randomizer, posture_layout

ROBOT = "open_manipulator_x"
RATE = 5.0  # [1/s]: R(t) = R (1 + RATE t), linear, relative, no spread


def _spec(rate):
    return {"format": "actuatorlab-randomization", "format_version": "1", "entries": [
        {"name": "heating", "kind": "drift", "parameter": "R", "shape": "linear", "mode": "relative",
         "mean": rate, "std": 0.0}]}


def _run(randomization, steps=8):
    env = NativeBatch(ROBOT, None, num_envs=2, contract=TimingContract(decimation=4, action_scale=1.0),
                      randomization=randomization)
    env.reset(np.asarray(jax.random.split(jax.random.PRNGKey(0), 2)))
    R0 = env.params["R"].copy()
    used, q = [], []
    for _ in range(steps):
        env.step(np.tile([0.6, 0.0, 0.0, 0.0, 0.0], (2, 1)))
        used.append(None if env.last_params is None else np.array(env.last_params["R"]))
        q.append(env.arm.qpos[:, env.qadr[0]].copy())
    return env, R0, used, np.array(q)


def test_native_env_runs_each_step_with_the_drifted_parameters():
    env, R0, used, q_drift = _run(Randomizer(_spec(RATE), posture_layout(5)))
    assert env._drift is not None
    dt = env.policy_dt
    for k, R in enumerate(used):  # step k runs at episode time k x policy_dt
        np.testing.assert_allclose(R, R0 * (1.0 + RATE * k * dt), rtol=1e-12)
    np.testing.assert_array_equal(env.params["R"], R0)  # the episode's parameters are not changed
    zero, R0z, used0, q_zero = _run(Randomizer(_spec(0.0), posture_layout(5)))
    plain, _, _, q_plain = _run(None)
    assert plain._drift is None
    np.testing.assert_allclose(R0z, R0)
    np.testing.assert_allclose(q_zero, q_plain, atol=1e-12)  # zero drift == no randomization
    # a hotter winding (higher R) draws less current from the same PWM voltage: joint1 accelerates
    # more slowly towards its step target (0.6 rad) and, with less back-EMF damping, overshoots more
    assert np.array_equal(q_drift[0], q_plain[0])  # step 0 runs at t = 0: undrifted
    assert np.all(q_drift[1:3] < q_plain[1:3] - 3e-3)
    assert np.all(q_drift.max(axis=0) > q_plain.max(axis=0) + 0.02)


def test_drift_restarts_at_reset():
    env, R0, used, _ = _run(Randomizer(_spec(RATE), posture_layout(5)), steps=3)
    env.reset_index(0, np.asarray(jax.random.PRNGKey(7)))
    env.step(np.zeros((2, 5)))
    np.testing.assert_allclose(env.last_params["R"][0], env.params["R"][0], rtol=1e-12)  # t = 0 again
    np.testing.assert_allclose(env.last_params["R"][1], R0[1] * (1 + RATE * 3 * env.policy_dt), rtol=1e-12)

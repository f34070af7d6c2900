"""Environments with the actuator in the loop (actuatorlab.envs): the timing contract option by
option, the run-time envelope counter, the Gymnasium API, and (one subprocess, default JAX
settings = float32) the MJX environment under jit + vmap agreeing with the native one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import jax
import numpy as np
import pytest

from actuatorlab.envs import TimingContract
from actuatorlab.envs.envelope import envelope_bounds, outside
from actuatorlab.envs.gym_env import ActuatorEnv, ActuatorVectorEnv, NativeBatch
from actuatorlab.errors import ModelError

ROBOT = "open_manipulator_x"


class Recording(NativeBatch):
    """NativeBatch that records the commands sent to the actuator and the per-tick joint states."""

    def _physics(self, params, arm, sent, net_hist, model_updates=None):
        self.sent = np.array(sent)
        res = super()._physics(params, arm, sent, net_hist, model_updates)
        self.q_ticks = np.array(res.q)
        return res


def make(contract, model=None, **kw):
    env = Recording(ROBOT, model, num_envs=1, contract=contract, **kw)
    env.reset(np.asarray(jax.random.PRNGKey(0))[None])
    return env


# ---------------------------------------------------------------------------------------------
# timing contract: one test per option
def test_hold_sends_the_target_on_every_command_tick():
    env = make(TimingContract(decimation=3, action_scale=0.2))
    a = np.array([[0.5, -0.5, 0.25, 0.0, 0.0]])
    env.step(a)
    np.testing.assert_allclose(env.sent[0], np.tile(env.offset + 0.2 * a[0], (3, 1)), atol=0)


def test_interpolate_reaches_the_new_target_exactly_at_the_last_tick():
    env = make(TimingContract(decimation=4, target="interpolate", action_scale=0.4))
    prev = env.prev_target[0].copy()
    a = np.array([[1.0, -1.0, 0.5, 0.5, 0.0]])
    env.step(a)
    tgt = env.offset + 0.4 * a[0]
    np.testing.assert_array_equal(env.sent[0, -1], tgt)  # exactly at the next policy step
    np.testing.assert_allclose(env.sent[0, 1], prev + (tgt - prev) * 0.5, atol=1e-15)
    env.step(a)  # same target again: every tick holds it
    np.testing.assert_array_equal(env.sent[0], np.tile(tgt, (4, 1)))


def test_filter_is_a_first_order_lag_with_the_stated_time_constant():
    dt = 0.01  # OM-X command period
    env = make(TimingContract(decimation=4, target="filter", target_tau=4 * dt, action_scale=0.3))
    prev = env.prev_target[0].copy()
    a = np.array([[1.0, 1.0, 1.0, 1.0, 0.0]])
    env.step(a)
    tgt = env.offset + 0.3 * a[0]
    # after one time constant (4 ticks) the command has covered 1 - 1/e of the step
    np.testing.assert_allclose((env.sent[0, -1] - prev)[:4], (1 - np.exp(-1)) * (tgt - prev)[:4], rtol=1e-12)
    for _ in range(30):
        env.step(a)
    np.testing.assert_allclose(env.sent[0, -1], tgt, atol=1e-6)


def test_command_latency_first_k_ticks_see_the_old_target_in_the_physics():
    c = dict(decimation=4, action_scale=0.5)
    late = make(TimingContract(command_latency=1, **c))
    hold = make(TimingContract(**c))
    a = np.array([[0.8, 0.6, -0.6, 0.4, 0.0]])
    late.step(a)
    hold.step(np.zeros((1, 5)))  # the old target (home) for the whole step
    np.testing.assert_array_equal(late.sent[0, 0], hold.sent[0, 0])
    # identical motion for the first command tick, different afterwards
    np.testing.assert_array_equal(late.q_ticks[0, :2], hold.q_ticks[0, :2])
    assert np.abs(late.q_ticks[0, 2] - hold.q_ticks[0, 2]).max() > 1e-4
    late.step(np.zeros((1, 5)))  # the previous action's last command arrives one tick late
    np.testing.assert_array_equal(late.sent[0, 0], late.offset + 0.5 * a[0])


def test_observation_latency_returns_the_state_k_ticks_ago():
    k = 2
    fresh = make(TimingContract(action_scale=0.5))
    late = make(TimingContract(action_scale=0.5, obs_latency=k))
    rng = np.random.default_rng(0)
    obs_f, obs_l = [], []
    for _ in range(8):
        a = rng.uniform(-1, 1, (1, 5))
        obs_f.append(fresh.step(a)[0][0])
        obs_l.append(late.step(a)[0][0])
    n = 5
    for t in range(k, 8):  # q - home and dq parts (the last action part is not delayed)
        np.testing.assert_array_equal(obs_l[t][:2 * n], obs_f[t - k][:2 * n])


def test_action_clipping_saturates_at_the_stated_bound():
    env = make(TimingContract(action_clip=1.0, action_scale=0.25))
    env.step(np.array([[7.0, -7.0, 1.0, 0.5, 0.0]]))
    np.testing.assert_array_equal(env.sent[0, 0, :4], env.offset[:4] + 0.25 * np.array([1.0, -1.0, 1.0, 0.5]))
    env.step(np.array([[0.0, 0.0, 0.0, 0.0, 1.0]]))  # gripper: 0.25 m, beyond its range
    assert env.sent[0, 0, 4] == env.hi[4]


def test_history_initialisation_at_reset():
    for init, expect_home in (("state", True), ("zeros", False)):
        env = make(TimingContract(command_latency=1, obs_latency=1, history_init=init), reset_noise=0.3)
        start = env.arm.qpos[0].copy()
        assert np.abs(start[:4]).min() > 0  # a reset posture that is not zero
        env.step(np.zeros((1, 5)))
        np.testing.assert_array_equal(env.sent[0, 0], start[env.qadr] if expect_home else np.zeros(5))
        np.testing.assert_array_equal(env.obs_qpos[0, 0], start if expect_home else np.zeros_like(start))


def test_servo_target_linear_ramps_within_the_command_tick():
    a = np.array([[1.0, 0.0, 0.0, 0.0, 0.0]])
    hold = make(TimingContract(action_scale=0.5))
    lin = make(TimingContract(action_scale=0.5, servo_target="linear"))
    assert lin.cfg.target == "linear" and hold.cfg.target == "hold"
    hold.step(a)
    lin.step(a)
    q0 = hold.q_ticks[0, 0, 0]
    np.testing.assert_array_equal(lin.sent, hold.sent)  # same commands, different firmware target
    moved_hold, moved_lin = hold.arm.qpos[0, 0] - q0, lin.arm.qpos[0, 0] - q0
    assert 0 < moved_lin < 0.9 * moved_hold  # the firmware's target ramps up over the tick


def test_contract_is_validated():
    with pytest.raises(ModelError, match="target must be one of"):
        TimingContract(target="spline")
    with pytest.raises(ModelError, match="latencies"):
        TimingContract(command_latency=-1)


# ---------------------------------------------------------------------------------------------
# run-time envelope
def _envelope(lo, hi, saturated=0.1):
    return {"version": "1", "dt": 0.01, "settings": {"saturation_level": 0.95}, "planes": {}, "conditions": {},
            "dimensions": {"position": {"lower": lo, "upper": hi}, "velocity": {"lower": -2.0, "upper": 2.0},
                           "effort": {"lower": -1.0, "upper": 1.0}},
            "regimes": {"saturated": saturated}}


def test_envelope_counts_a_hand_made_excursion_exactly():
    class R:  # a one-joint stand-in robot
        n_joints, joint_names = 1, ("j",)

        def index(self, j):
            return 0

    b = envelope_bounds(R(), _envelope(-0.1, 0.1, saturated=0.0))
    q = np.array([0.0, 0.05, 0.2, 0.3, 0.05, -0.2])[:, None]
    dq = np.array([0.0, 3.0, 0.0, 0.0, -2.5, 0.0])[:, None]
    eff = np.array([0.0, 0.5, 0.97, -0.2, 0.0, 0.0])[:, None]
    out = outside(np, b, q, dq, eff).sum(axis=0)[:, 0]
    assert out.tolist() == [3, 2, 0, 1, 5]  # position, velocity, effort, saturation, any


def test_envelope_counter_in_the_environment_and_clip_mode():
    env = make(TimingContract(decimation=2, action_scale=1.0), envelope={"joint1": _envelope(-0.1, 0.1)})
    qs = []
    for a in [0.5] * 6 + [0.0] * 6:
        _, _, _, _, info = env.step(np.array([[a, 0, 0, 0, 0]]))
        qs.append(env.q_ticks[0, :, 0])
    qs = np.concatenate(qs)
    expect = np.count_nonzero(np.abs(qs) > 0.1)
    assert expect > 3
    np.testing.assert_allclose(info["envelope_outside_s"]["position"][0], [expect * 0.01, 0, 0, 0, 0])
    clip = make(TimingContract(decimation=2, action_scale=1.0), envelope={"joint1": _envelope(-0.1, 0.1)},
                envelope_mode="clip")
    for _ in range(12):
        clip.step(np.array([[0.5, 0, 0, 0, 0]]))
    assert clip.sent[0, :, 0].max() == 0.1
    with pytest.warns(RuntimeWarning, match="joint1 left the fitted model's envelope"):
        w = make(TimingContract(action_scale=1.0), envelope={"joint1": _envelope(-0.1, 0.1)}, envelope_mode="warn")
        for _ in range(10):
            w.step(np.array([[0.5, 0, 0, 0, 0]]))
    with pytest.raises(KeyError, match="unknown joint 'elbow'"):
        make(TimingContract(), envelope={"elbow": _envelope(-0.1, 0.1)})


# ---------------------------------------------------------------------------------------------
# Gymnasium API, other actuators, other robots
def test_gymnasium_env_and_vector_env():
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(ActuatorEnv(ROBOT, episode_length=5), skip_render_check=True)
    v = ActuatorVectorEnv(ROBOT, num_envs=3, episode_length=2)
    obs, _ = v.reset(seed=3)
    assert obs.shape == (3, 20)
    v.step(np.zeros((3, 5)))
    obs2, r, term, trunc, info = v.step(np.full((3, 5), 0.2))
    assert trunc.all() and info["_final_obs"].all()
    np.testing.assert_array_equal(obs2[:, 15:], 0.0)  # new episodes: last action reset to 0
    assert not np.array_equal(info["final_obs"][:, 15:], obs2[:, 15:])


def test_builtin_actuators_move_differently_from_the_identified_ones():
    c = TimingContract(decimation=5, action_scale=0.5)
    ident, builtin = make(c), make(c, model="builtin")
    for _ in range(4):
        ident.step(np.array([[1.0, 1.0, -1.0, 1.0, 0.0]]))
        builtin.step(np.array([[1.0, 1.0, -1.0, 1.0, 0.0]]))
    assert np.abs(ident.arm.qpos[0, :4] - builtin.arm.qpos[0, :4]).max() > 0.01
    assert np.isfinite(builtin.arm.qpos).all()


def test_anymal_c_steps_with_its_compliant_model_in_the_loop():
    from actuatorlab.sim.arm_data import robot_with_model
    from actuatorlab.robots import load_robot

    r = robot_with_model(load_robot("anymal_c"), "m1+compliance")
    assert r.compliant.all()
    env = NativeBatch(r, num_envs=2, contract=TimingContract(action_scale=0.3))
    env.reset(np.asarray(jax.random.split(jax.random.PRNGKey(1), 2)))
    z0 = env.arm.qpos[:, 2].copy()
    for _ in range(5):
        obs, rew, term, trunc, info = env.step(np.zeros((2, 12)))
    assert np.isfinite(obs).all() and not term.any()
    assert np.all(np.abs(env.arm.qpos[:, 2] - z0) < 0.1)  # the base stays up (standing posture held)
    assert np.abs(env.arm.qm - env.arm.qpos[:, env.qadr]).max() > 0  # the rotor is a body of its own


def test_learned_model_in_the_native_env_carries_its_history():
    import jax.numpy as jnp

    from actuatorlab.learned.arm import make_learned_arm
    from actuatorlab.models.features import Normalizer
    from actuatorlab.robots import load_robot

    r = load_robot(ROBOT)
    feats = ("q_target", "q", "dq", "err")
    lm = make_learned_arm(r, "mlp", channels=r.joint_names[:4], per_channel=feats,
                          normalizer=Normalizer(np.zeros(16), np.full(16, 0.3)), effort_scale=0.2, residual=True,
                          history=2, key=jax.random.PRNGKey(1), width=8, depth=1, d=8, head_width=8)
    env = make(TimingContract(decimation=2, action_scale=0.3), model=lm)
    h0 = env.net_hist.copy()
    env.step(np.array([[1.0, 0, 0, 0, 0]]))
    assert env.net_hist.shape == (1, 2, 16) and not np.array_equal(env.net_hist, h0)
    # the newest frame is the last command tick's (q_target, q, dq, err) of joint1
    np.testing.assert_allclose(env.net_hist[0, -1, 0], env.sent[0, -1, 0], rtol=1e-6)
    assert jnp.asarray(lm.base["kt"]).dtype == jnp.float64


# ---------------------------------------------------------------------------------------------
# MJX: jit + vmap, float32 program (default JAX settings), agreement with the native env
_RAND = r"""
class Rand:  # randomization hooks: kt x U(0.8, 1.25) per episode, 1 mrad observation noise, R drifts
    has_drift = True

    def drift(self, key, params, t):  # R (1 + 0.5 t + c t), c ~ U(0, 0.5) per episode (drawn from the key)
        c = jax.random.uniform(jax.random.fold_in(key, 5), (), jax.numpy.float32, 0.0, 0.5)
        return dict(params, R=params["R"] * (1.0 + (0.5 + c) * t))

    def sample_episode(self, key, params):
        return dict(params, kt=params["kt"] * jax.random.uniform(key, (), jax.numpy.float32, 0.8, 1.25))

    def step_noise(self, key, obs):
        return obs + 1e-3 * jax.random.normal(key, obs.shape, jax.numpy.float32)
"""
_ns = {"jax": jax}
exec(_RAND, _ns)  # the same source runs in the MJX subprocess below
Rand = _ns["Rand"]

_MJX_SCRIPT = r"""
import json, sys, warnings
import jax, jax.numpy as jnp, numpy as np
warnings.simplefilter("error", UserWarning)  # a float64 constant truncated to float32 would warn
import actuatorlab
from actuatorlab.envs import MjxEnv, TimingContract
assert not jax.config.jax_enable_x64
""" + _RAND + r"""
env = MjxEnv("open_manipulator_x", contract=TimingContract(**json.loads(sys.argv[1])),
             envelope=json.loads(sys.argv[2]), randomization=Rand())
keys = jax.random.split(jax.random.PRNGKey(0), 3)
acts = np.asarray(json.loads(sys.argv[3]), np.float32)
reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
s = reset(keys)
obs, qpos, env_s = [np.asarray(s.obs).tolist()], [], None
for a in acts:
    s_prev, s = s, step(s, jnp.asarray(a))
    obs.append(np.asarray(s.obs).tolist()); qpos.append(np.asarray(s.arm.qpos).tolist())
# the same last step in chunks of 2 environments (3 = one chunk of 2 + one padded chunk)
from actuatorlab.envs import vmap_chunked
s_c = jax.jit(vmap_chunked(env.step, 2))(s_prev, jnp.asarray(acts[-1]))
chunk_diff = max(float(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)).max(initial=0.0))
                 for x, y in zip(jax.tree.leaves(s_c), jax.tree.leaves(s)))
assert not jax.config.jax_enable_x64
print(json.dumps({"dtype": str(s.obs.dtype), "qdtype": str(s.arm.qpos.dtype), "obs": obs, "qpos": qpos,
                  "keys": np.asarray(keys).tolist(), "env_s": np.asarray(s.info["envelope_outside_s"]).tolist(),
                  "reward": np.asarray(s.reward).tolist(), "kt": np.asarray(s.params["kt"]).tolist(),
                  "R_next": np.asarray(jax.vmap(env.step_params)(s)["R"]).tolist(),
                  "R": np.asarray(s.params["R"]).tolist(), "chunk_diff": chunk_diff}))
"""


def test_mjx_env_jit_vmap_float32_program_agrees_with_native(tmp_path):
    contract = {"decimation": 2, "command_latency": 1, "target": "interpolate", "action_scale": 0.5}
    env_d = {"joint2": _envelope(-0.03, 0.03)}
    rng = np.random.default_rng(0)  # a held posture per env plus noise
    acts = (rng.uniform(-1, 1, (1, 3, 5)) + 0.3 * rng.uniform(-1, 1, (10, 3, 5))).round(3)
    envv = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    envv["PYTHONPATH"] = os.pathsep.join([str(__import__("pathlib").Path(__file__).resolve().parents[1] / "src"),
                                          envv.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-c", _MJX_SCRIPT, json.dumps(contract), json.dumps(env_d),
                        json.dumps(acts.tolist())], capture_output=True, text=True, env=envv, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["dtype"] == "float32" and res["qdtype"] == "float32"
    assert res["chunk_diff"] <= 1e-6  # vmap_chunked(env.step, 2) == vmap(env.step) on every state leaf
    nat = NativeBatch(ROBOT, num_envs=3, contract=TimingContract(**contract), envelope=env_d, randomization=Rand())
    obs0 = nat.reset(np.asarray(res["keys"], np.uint32))
    np.testing.assert_allclose(obs0, res["obs"][0], atol=1e-5)  # same goals and noise from the same keys
    kt = np.asarray(res["kt"])  # per-episode parameters: one draw per environment, kept in the state
    np.testing.assert_allclose(kt, nat.params["kt"], rtol=1e-6)
    assert len(np.unique(kt.round(6))) == 3 and np.all((kt > 0.8 * 2.478) & (kt < 1.25 * 2.478))
    for t, a in enumerate(acts):
        obs, rew, *_ , info = nat.step(a)
        np.testing.assert_allclose(nat.arm.qpos, res["qpos"][t], atol=3e-3)  # float32 vs float64 physics
        # observations carry joint velocities: float32 MJX vs float64 native differ by up to 8e-3 rad/s
        # (seen in 1 of 4 runs; XLA's CPU reductions are not bit-reproducible across runs)
        np.testing.assert_allclose(obs, res["obs"][t + 1], atol=1.5e-2)
    np.testing.assert_allclose(nat.params["kt"], kt, rtol=1e-6)  # fixed within the episode
    # drift: both run step k's physics with R drifted to k x policy_dt; the episode's R is kept
    np.testing.assert_allclose(res["R"], nat.params["R"], rtol=1e-6)
    c = np.array([float(jax.random.uniform(jax.random.fold_in(k, 5), (), jax.numpy.float32, 0.0, 0.5))
                  for k in np.asarray(nat.rand_keys)])
    t_last = (len(acts) - 1) * nat.policy_dt
    np.testing.assert_allclose(nat.last_params["R"][:, 0], nat.params["R"][:, 0] * (1 + (0.5 + c) * t_last), rtol=1e-9)
    t_next = len(acts) * nat.policy_dt
    np.testing.assert_allclose(np.asarray(res["R_next"])[:, 0], nat.params["R"][:, 0] * (1 + (0.5 + c) * t_next),
                               rtol=1e-5)
    assert np.abs(nat.arm.qpos - np.asarray(res["qpos"][-1])).max() > 0
    np.testing.assert_allclose(rew, res["reward"], atol=2e-3)
    mjx_pos = np.asarray(res["env_s"])[:, 0, 1]  # (B,) seconds joint2 spent outside its position range
    assert mjx_pos.max() > 0
    np.testing.assert_allclose(mjx_pos, info["envelope_outside_s"]["position"][:, 1], atol=0.02)  # +-2 ticks


def test_vmap_chunked_equals_vmap_with_padding_and_empty_leaves():
    import jax.numpy as jnp

    from actuatorlab.envs import vmap_chunked

    def f(state, a):  # a pytree with a zero-size leaf, as MJX states have
        return {"x": jnp.sin(state["x"]) * a, "empty": state["empty"] + 1.0, "n": state["n"] + 1}

    B = 10
    st = {"x": jnp.arange(B * 3, dtype=jnp.float32).reshape(B, 3), "empty": jnp.zeros((B, 0)),
          "n": jnp.arange(B)}
    a = jnp.linspace(-1, 1, B, dtype=jnp.float32)[:, None]
    ref = jax.vmap(f)(st, a)
    for chunk in (1, 3, 4, 10, 64):  # padded (3, 4), exact (1), one chunk (10, 64)
        out = jax.jit(vmap_chunked(f, chunk))(st, a)
        for k in ref:
            assert out[k].shape == ref[k].shape
            np.testing.assert_array_equal(np.asarray(out[k]), np.asarray(ref[k]))
    with pytest.raises(ValueError, match="same leading batch size"):
        vmap_chunked(f, 4)(st, a[:5])
    with pytest.raises(ValueError, match="at least 1"):
        vmap_chunked(f, 0)

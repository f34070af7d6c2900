"""Figure identity of the environments: fixed seeds and actions through the MJX env, the Gymnasium
envs and the ANYmal trot policy env; writes every observation, reward, done and envelope counter to
one .npz, to compare two revisions exactly (``np.array_equal``).

    python bench/envs_identity.py OUT.npz                 # write
    python bench/envs_identity.py --compare A.npz B.npz   # exact comparison, one line per array

Cases: (a) ``MjxEnv`` on the OpenManipulator-X, nominal actuator, batch 4, 50 steps; (a2) the same
with an envelope, command latency, interpolation and randomization hooks (per-episode draw,
observation noise, drift); (b) ``ActuatorEnv`` (Gymnasium) 50 steps; (b2) ``ActuatorVectorEnv``
(3 envs, 50 steps, autoreset, the hooks of a2); (c) the ANYmal C trot env, series-elastic drive,
batch 2, 20 steps at alpha 0.5.
"""

from __future__ import annotations

import sys

import numpy as np

ROBOT = "open_manipulator_x"


def _envelope(lo, hi, saturated=0.0):
    return {"version": "1", "dt": 0.01, "settings": {"saturation_level": 0.95}, "planes": {}, "conditions": {},
            "dimensions": {"position": {"lower": lo, "upper": hi}, "velocity": {"lower": -0.5, "upper": 0.5},
                           "effort": {"lower": -0.3, "upper": 0.3}},
            "regimes": {"saturated": saturated}}


class Rand:
    """Randomization hooks: kt per episode, observation noise, R drifting with time."""

    has_drift = True

    def drift(self, key, params, t):
        import jax
        c = jax.random.uniform(jax.random.fold_in(key, 5), (), jax.numpy.float32, 0.0, 0.5)
        return dict(params, R=params["R"] * (1.0 + (0.5 + c) * t))

    def sample_episode(self, key, params):
        import jax
        return dict(params, kt=params["kt"] * jax.random.uniform(key, (), jax.numpy.float32, 0.8, 1.25))

    def step_noise(self, key, obs):
        import jax
        return obs + 1e-3 * jax.random.normal(key, obs.shape, jax.numpy.float32)


def _mjx(out, tag, steps=50, batch=4, **kw):
    import jax
    import jax.numpy as jnp

    from actuatorlab.envs import MjxEnv

    env = MjxEnv(ROBOT, **kw)
    acts = np.random.default_rng(1).uniform(-1, 1, (steps, batch, env.n_joints)).astype(np.float32)
    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    s = reset(jax.random.split(jax.random.PRNGKey(7), batch))
    rec = {"obs": [np.asarray(s.obs)], "reward": [], "done": [], "env_s": [], "trunc": [], "qpos": []}
    for a in acts:
        s = step(s, jnp.asarray(a))
        rec["obs"].append(np.asarray(s.obs))
        rec["reward"].append(np.asarray(s.reward))
        rec["done"].append(np.asarray(s.done))
        rec["trunc"].append(np.asarray(s.info["truncation"]))
        rec["env_s"].append(np.asarray(s.info["envelope_outside_s"]))
        rec["qpos"].append(np.asarray(s.arm.qpos))
    rec["ticks"] = [np.asarray(s.ctl.outside_ticks)]
    rec["frac"] = [np.asarray(s.metrics["envelope_outside_frac"])]
    for k, v in rec.items():
        out[f"{tag}/{k}"] = np.stack(v)


def _gym(out, tag, steps=50):
    from actuatorlab.envs.gym_env import ActuatorEnv

    env = ActuatorEnv(ROBOT, envelope=_envelope(-0.2, 0.2), reset_noise=0.05, episode_length=30)
    acts = np.random.default_rng(2).uniform(-1, 1, (steps, 5))
    o, _ = env.reset(seed=3)
    rec = {"obs": [o], "reward": [], "term": [], "trunc": [], "env_s": [], "frac": []}
    for a in acts:
        o, r, te, tr, info = env.step(a)
        rec["obs"].append(o)
        rec["reward"].append(r)
        rec["term"].append(te)
        rec["trunc"].append(tr)
        rec["env_s"].append(np.stack([info["envelope_outside_s"][d] for d in sorted(info["envelope_outside_s"])]))
        rec["frac"].append(info["envelope_outside_frac"])
        if te or tr:
            o, _ = env.reset()
            rec["obs"].append(o)
    for k, v in rec.items():
        out[f"{tag}/{k}"] = np.stack([np.asarray(x) for x in v])


def _vector(out, tag, steps=50):
    from actuatorlab.envs import TimingContract
    from actuatorlab.envs.gym_env import ActuatorVectorEnv

    env = ActuatorVectorEnv(ROBOT, num_envs=3, episode_length=20, envelope={"joint2": _envelope(-0.05, 0.05)},
                            contract=TimingContract(decimation=2, command_latency=1, target="interpolate",
                                                    action_scale=0.5), randomization=Rand())
    acts = np.random.default_rng(3).uniform(-1, 1, (steps, 3, 5))
    o, _ = env.reset(seed=5)
    rec = {"obs": [o], "reward": [], "term": [], "trunc": [], "env_s": [], "frac": [], "qpos": [], "R": []}
    for a in acts:
        o, r, te, tr, info = env.step(a)
        rec["obs"].append(o)
        rec["reward"].append(r)
        rec["term"].append(te)
        rec["trunc"].append(tr)
        rec["env_s"].append(np.stack([info["envelope_outside_s"][d] for d in sorted(info["envelope_outside_s"])]))
        rec["frac"].append(info["envelope_outside_frac"])
        rec["qpos"].append(env.core.arm.qpos.copy())
        rec["R"].append(np.asarray(env.core.last_params["R"]))
    for k, v in rec.items():
        out[f"{tag}/{k}"] = np.stack([np.asarray(x) for x in v])


def _trot(out, tag, steps=20, batch=2):
    import jax
    import jax.numpy as jnp

    from actuatorlab.envs import make_policy_env

    with jax.enable_x64(False):
        env = make_policy_env("anymal_c", "trot", actuator="sea", physics_dt=0.004)
        p = {**env.default_env_params(), "alpha": jnp.asarray(0.5, jnp.float32)}
        acts = np.random.default_rng(4).uniform(-0.5, 0.5, (steps, batch, env.action_size)).astype(np.float32)
        reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))
        step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, None)))
        s = reset(jax.random.split(jax.random.PRNGKey(11), batch), p)
        rec = {"obs": [np.asarray(s.obs)], "reward": [], "done": [], "env_s": [], "trunc": [], "qpos": []}
        metrics = {k: [] for k in s.metrics}
        for a in acts:
            s = step(s, jnp.asarray(a), p)
            rec["obs"].append(np.asarray(s.obs))
            rec["reward"].append(np.asarray(s.reward))
            rec["done"].append(np.asarray(s.done))
            rec["trunc"].append(np.asarray(s.info["truncation"]))
            rec["env_s"].append(np.asarray(s.info["envelope_outside_s"]))
            rec["qpos"].append(np.asarray(s.core.arm.qpos))
            for k in metrics:
                metrics[k].append(np.asarray(s.metrics[k]))
    for k, v in rec.items():
        out[f"{tag}/{k}"] = np.stack(v)
    for k, v in metrics.items():
        out[f"{tag}/metric/{k}"] = np.stack(v)


def main(argv):
    if argv[0] == "--compare":
        a, b = np.load(argv[1]), np.load(argv[2])
        keys = sorted(set(a.files) | set(b.files))
        bad = [k for k in keys if k not in a.files or k not in b.files or not np.array_equal(a[k], b[k])]
        for k in keys:
            print(f"{'SAME' if k not in bad else 'DIFF'} {k} {a[k].shape if k in a.files else '-'}")
        print(f"{len(keys) - len(bad)} of {len(keys)} arrays bit-equal")
        return 1 if bad else 0
    out: dict = {}
    only = argv[1:] or ["a", "a2", "b", "b2", "c"]
    from actuatorlab.envs import TimingContract
    if "a" in only:
        _mjx(out, "a_mjx_nominal")
    if "a2" in only:
        _mjx(out, "a2_mjx_hooks", envelope={"joint2": _envelope(-0.05, 0.05)}, randomization=Rand(),
             contract=TimingContract(decimation=2, command_latency=1, obs_latency=1, target="interpolate",
                                     action_scale=0.5), reset_noise=0.05, episode_length=30)
    if "b" in only:
        _gym(out, "b_gym")
    if "b2" in only:
        _vector(out, "b2_vector_hooks")
    if "c" in only:
        _trot(out, "c_trot_sea")
    np.savez(argv[0], **out)
    print(f"wrote {len(out)} arrays to {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""PPO, alpha schedules and training runs (actuatorlab.policy) on the toy policy environments.

One compiled PPO (point mass, 32 envs x 16 steps per update) serves every training test; the
whole module takes about 15 s."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from actuatorlab.errors import ActuatorlabError, ModelError, UnknownNameError
from actuatorlab.policy.ppo import PPO, PPOConfig, gae
from actuatorlab.policy.schedule import make_schedule
from actuatorlab.envs import make_env, make_policy_env
from actuatorlab.policy.train import (FIXED_COMMANDS, default_ppo_config, evaluate_policy, load_policy, plan_run,
                                      read_curve, train_policy)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from homotopy_recipes import restat_hook, restat_stats  # noqa: E402


def job_config(path, fields: dict) -> str:
    """A ``--config`` file holding ``fields`` (a job's options without a flag)."""
    path.write_text(json.dumps(fields))
    return str(path)

STEPS = 100_000          # 20 chunks of 10 updates of 512 steps (about 1.5 s of training on 2 cores)
POINTS = 20


def test_gae_by_hand():
    """gamma = lambda = 0.5, three steps, two environments: truncated at t=1 (bootstraps from
    V(s'_1) = 8) and terminated at t=1 (no bootstrap); the recursion stops at done in both."""
    r = jnp.ones((3, 2), jnp.float32)
    v = jnp.array([[1, 1], [2, 2], [4, 4]], jnp.float32)
    v_next = jnp.array([[2, 2], [8, 8], [2, 2]], jnp.float32)
    done = jnp.array([[0, 0], [1, 1], [0, 0]], jnp.float32)
    term = jnp.array([[0, 0], [0, 1], [0, 0]], jnp.float32)
    adv, target = gae(r, v, v_next, term, done, 0.5, 0.5)
    # truncated: delta = [1 + 1 - 1, 1 + 4 - 2, 1 + 1 - 4] = [1, 3, -2]; A2 = -2, A1 = 3, A0 = 1 + .25 * 3
    # terminated: delta1 = 1 + 0 - 2 = -1; A2 = -2, A1 = -1, A0 = 1 + .25 * (-1)
    np.testing.assert_allclose(np.asarray(adv), [[1.75, 0.75], [3.0, -1.0], [-2.0, -2.0]], rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(target), [[2.75, 1.75], [5.0, 1.0], [2.0, 2.0]], rtol=0, atol=1e-6)


@pytest.fixture(scope="module")
def toy():
    """One point-mass environment and one compiled PPO for the budget of every run below."""
    env = make_env("toy", "point_mass")
    cfg = default_ppo_config("toy")
    return env, cfg, PPO(env, cfg, plan_run(STEPS, cfg, POINTS).updates)


def _zero_action_return(env, n=256):
    p = env.default_env_params()
    s = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(jax.random.PRNGKey(1), n), p)
    total = jnp.zeros((n,), jnp.float32)
    for _ in range(env.horizon):
        s = jax.vmap(env.step, in_axes=(0, 0, None))(s, jnp.zeros((n, 2), jnp.float32), p)
        total = total + s.reward
    return float(total.mean())


@pytest.fixture(scope="module")
def scratch_run(toy, tmp_path_factory):
    env, cfg, algo = toy
    out = tmp_path_factory.mktemp("runs") / "scratch"
    summary = train_policy("toy", "point_mass", "scratch", steps=STEPS, seed=0, out=out, points=POINTS,
                           ppo=cfg, env=env, ppo_obj=algo, report=True)
    return out, summary


def test_ppo_learns_point_mass(toy, scratch_run):
    env, cfg, algo = toy
    out, summary = scratch_run
    assert summary["finished"] and summary["env_steps"] == 102_400
    idle = _zero_action_return(env)                     # about -33 (the mass stays where it starts)
    first = read_curve(out)["return"][0]                 # the initial (random) policy: about -45
    ev = evaluate_policy(out, env=env, n_envs=64)
    assert idle < -28 and first < -28
    assert summary["final_return"] > -20 and ev["return"] > -20, (idle, first, summary, ev)
    assert ev["distance"] < 0.6 and ev["episode_length"] == 50.0
    # float32 networks and statistics whatever JAX's x64 mode (the test session runs with x64 on)
    pol = load_policy(out)
    assert {str(a.dtype) for a in jax.tree_util.tree_leaves(eqx.filter(pol.model, eqx.is_array))} == {"float32"}
    assert pol.act(jnp.zeros(4, jnp.float32)).dtype == jnp.float32
    for name in ("config.json", "metrics.jsonl", "curve.json", "stages.json", "policy.npz", "report.html"):
        assert (out / name).is_file(), name
    cfgj = json.loads((out / "config.json").read_text())
    assert cfgj["schedule"] == "scratch" and "revision" in cfgj
    assert "plotly" in (out / "report.html").read_text()[:20_000].lower()


class _CommandEcho:
    """A policy env with a velocity command (the point mass's sizes): the observation is the
    command; the metric ``seen_err_sq`` is how far the observation a policy acted on was from the
    episode's command."""

    observation_size, action_size, horizon = 4, 2, 3

    class State(NamedTuple):
        command: jax.Array
        t: jax.Array
        obs: jax.Array
        reward: jax.Array
        done: jax.Array
        metrics: dict
        info: dict

    def default_env_params(self):
        return {"alpha": jnp.float32(1.0)}

    def reset(self, rng, env_params, command=None):
        c = jax.random.uniform(rng, (3,), jnp.float32, 5.0, 6.0) if command is None else jnp.asarray(command)
        z = jnp.zeros((), jnp.float32)
        return self.State(c, z, jnp.append(c, 0.0), z, z, {"seen_err_sq": z}, {"truncation": z})

    def step(self, s, action, env_params):
        err = jnp.sum((s.obs[:3] - s.command) ** 2)
        t = s.t + 1
        done = (t >= self.horizon).astype(jnp.float32)
        return self.State(s.command, t, s.obs, -err, done, {"seen_err_sq": err}, {"truncation": done})


def test_fixed_command_evaluation_shows_the_command_from_the_first_step(scratch_run):
    """evaluate_policy starts every episode on its fixed command (passed to the reset), so the
    policy never acts on the sampled one; writing it into the state after the reset failed this."""
    out, _ = scratch_run
    ev = evaluate_policy(out, env=_CommandEcho())
    assert ev["n_envs"] == len(FIXED_COMMANDS) and ev["episode_length"] == 3.0
    assert ev["seen_rmse"] == 0.0 and ev["return"] == 0.0, ev
    pc = ev["per_command"]
    assert [c["command"] for c in pc] == [list(map(float, c)) for c in np.asarray(FIXED_COMMANDS, np.float32)]
    assert all(c["seen_rmse"] == 0.0 and c["fell"] == 0.0 and c["episode_length"] == 3.0 for c in pc)


def test_homotopy_resume_exact_and_no_recompile(toy, scratch_run, tmp_path):
    """The fixed homotopy advances alpha 0 -> 1 in four stages with one compiled update; a run
    interrupted after 8 chunks and resumed from its last checkpoint (chunk 6, a stage end) gives
    the uninterrupted curve bit for bit."""
    env, cfg, algo = toy
    kw = dict(steps=STEPS, seed=3, points=POINTS, ppo=cfg, env=env, ppo_obj=algo, report=False, checkpoint_every=5)
    full = train_policy("toy", "point_mass", "homotopy", out=tmp_path / "full", **kw)
    assert full["finished"] and full["stages"] == 5
    part = train_policy("toy", "point_mass", "homotopy", out=tmp_path / "cut", stop_after=8, **kw)
    assert not part["finished"] and part["chunks_done"] == 8
    with pytest.raises(ModelError, match="pass resume"):
        train_policy("toy", "point_mass", "homotopy", out=tmp_path / "cut", **kw)
    rest = train_policy("toy", "point_mass", "homotopy", out=tmp_path / "cut", resume=True, **kw)
    assert rest["finished"] and rest["chunks_done"] == POINTS
    a, b = read_curve(tmp_path / "full"), read_curve(tmp_path / "cut")
    for k in ("env_steps", "alpha", "return", "reward", "distance", "value_loss", "approx_kl"):
        assert a[k] == b[k], k
    pa, pb = np.load(tmp_path / "full" / "policy.npz"), np.load(tmp_path / "cut" / "policy.npz")
    assert all(np.array_equal(pa[k], pb[k]) for k in pa.files)
    stages = json.loads((tmp_path / "full" / "stages.json").read_text())
    assert [s["alpha"] for s in stages] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert sorted(set(a["alpha"])) == [0.0, 0.25, 0.5, 0.75, 1.0] and np.all(np.diff(a["alpha"]) >= 0)
    assert all((tmp_path / "full" / "ckpt" / f"stage_{k}.npz").is_file() for k in range(5))
    assert algo.traces == 1                                # alpha is a traced argument: never recompiled
    # a resume with other settings is refused
    with pytest.raises(ModelError, match="other settings"):
        train_policy("toy", "point_mass", "homotopy", out=tmp_path / "cut", resume=True,
                     **{**kw, "seed": 4})


def test_adaptive_learning_rate(toy, tmp_path):
    """The adaptive step size: the closed-form Gaussian KL matches a Monte Carlo estimate, the rule
    divides / multiplies by 1.5 outside [desired / 2, 2 desired] within the bounds, and a run with
    it still learns the point mass while its learning rate moves off the initial value."""
    env, _, _ = toy
    cfg = type(default_ppo_config("toy")).from_dict({**default_ppo_config("toy").to_dict(), "lr_schedule": "adaptive",
                                                     "learning_rate": 1e-3, "desired_kl": 0.01})
    algo = PPO(env, cfg, plan_run(STEPS, cfg, POINTS).updates)
    ts = algo.init(jax.random.PRNGKey(0), env.default_env_params())
    model = algo.model(ts.params)
    obs = jax.random.normal(jax.random.PRNGKey(1), (4000, env.observation_size), jnp.float32)
    mean1 = jax.vmap(model.actor)(obs)
    batch = {"obs": obs, "mean": mean1 + 0.3, "log_std": jnp.broadcast_to(model.log_std - 0.2, mean1.shape)}
    kl = float(algo._kl(ts.params, ts.stats, batch))
    x = batch["mean"] + jnp.exp(batch["log_std"]) * jax.random.normal(jax.random.PRNGKey(2), mean1.shape)

    def logp(x, m, ls):
        return jnp.sum(-0.5 * ((x - m) / jnp.exp(ls)) ** 2 - ls, -1)
    mc = float(jnp.mean(logp(x, batch["mean"], batch["log_std"]) - logp(x, mean1, model.log_std)))
    assert kl > 0.1 and abs(mc - kl) < 0.05 * kl, (kl, mc)
    lr0 = float(algo.learning_rate(ts.opt_state))
    assert lr0 == pytest.approx(1e-3)
    for k, factor in ((0.05, 1 / 1.5), (0.001, 1.5), (0.01, 1.0)):
        assert float(algo.learning_rate(algo._adapt_lr(ts.opt_state, jnp.float32(k)))) == pytest.approx(lr0 * factor)
    st = ts.opt_state
    for _ in range(40):
        st = algo._adapt_lr(st, jnp.float32(1.0))
    assert float(algo.learning_rate(st)) == pytest.approx(cfg.lr_bounds[0])
    summary = train_policy("toy", "point_mass", "scratch", steps=STEPS, seed=0, out=tmp_path / "ad", points=POINTS,
                           ppo=cfg, env=env, ppo_obj=algo, report=False)
    curve = read_curve(tmp_path / "ad")
    lrs = np.asarray(curve["learning_rate"])
    assert summary["final_return"] > -20, summary
    assert np.all((lrs >= cfg.lr_bounds[0]) & (lrs <= cfg.lr_bounds[1])) and np.ptp(lrs) > 1e-4, lrs
    # the step size is optimizer state: an interrupted run resumes onto the same curve
    kw = dict(steps=STEPS, seed=0, points=POINTS, ppo=cfg, env=env, ppo_obj=algo, report=False, checkpoint_every=5)
    train_policy("toy", "point_mass", "scratch", out=tmp_path / "cut", stop_after=7, **kw)
    train_policy("toy", "point_mass", "scratch", out=tmp_path / "cut", resume=True, **kw)
    cut = read_curve(tmp_path / "cut")
    assert cut["learning_rate"] == curve["learning_rate"] and cut["return"] == curve["return"]
    with pytest.raises(ModelError, match="lr_bounds"):
        PPOConfig(lr_bounds=(1e-3, 1e-4))


def test_restat_at_a_stage_change(toy, tmp_path):
    """The ``restat`` recipe (bench/homotopy_recipes.py, not adopted): at each change of alpha the observation statistics keep at most that many
    observations' weight (same mean and variance, so the inputs do not jump); after the switch the
    new observations dominate. Final count = restat + the updates after the last change x their
    observations (without it: every observation of the run); the stage-end checkpoint holds the
    statistics before the cut, and an interrupted run resumes onto the same curve."""
    env, cfg, algo = toy
    n_obs = cfg.steps_per_update
    kw = dict(steps=STEPS, seed=5, points=POINTS, ppo=cfg, env=env, ppo_obj=algo, report=False, checkpoint_every=3)
    opts = {"pretrain": 0.5}
    hook = restat_hook(n_obs)
    plain = train_policy("toy", "point_mass", "direct", out=tmp_path / "plain", schedule_options={"pretrain": 0.5}, **kw)
    cut = train_policy("toy", "point_mass", "direct", out=tmp_path / "cut", schedule_options=opts, stage_hook=hook,
                       **kw)
    plan = plan_run(STEPS, cfg, POINTS)
    after = plan.updates - round(0.5 * plan.chunks) * plan.chunk        # updates at alpha = 1
    assert float(load_policy(tmp_path / "plain").stats.n_seen) == plan.updates * n_obs
    assert float(load_policy(tmp_path / "cut").stats.n_seen) == n_obs + after * n_obs
    a, b = read_curve(tmp_path / "plain"), read_curve(tmp_path / "cut")
    k = round(0.5 * plan.chunks)                  # identical up to the switch, different after it
    assert a["return"][:k] == b["return"][:k] and a["return"][k + 1:] != b["return"][k + 1:]
    assert plain["stages"] == cut["stages"] == 2
    st = jax.tree.map(jnp.asarray, load_policy(tmp_path / "plain").stats)
    r = restat_stats(st, 100)
    assert float(r.n_seen) == 100 and np.array_equal(r.mean, st.mean) and np.array_equal(r.var, st.var)
    assert float(restat_stats(r, 10 ** 9).n_seen) == 100                  # never raises the count
    # resume across the cut gives the same run
    train_policy("toy", "point_mass", "direct", out=tmp_path / "res", schedule_options=opts, stop_after=12,
                 stage_hook=hook, **kw)
    train_policy("toy", "point_mass", "direct", out=tmp_path / "res", schedule_options=opts, resume=True,
                 stage_hook=hook, **kw)
    assert read_curve(tmp_path / "res")["return"] == b["return"]
    for bad in (-1, 0, 0.5, True):
        with pytest.raises(ValueError, match="restat"):
            restat_hook(bad)
    with pytest.raises(ModelError, match="unknown option"):
        make_schedule("homotopy-adaptive", restat=10)                  # not a library option any more


def test_adaptive_homotopy_rule():
    s = make_schedule("homotopy-adaptive", pretrain=0.2, deadline=0.8, tol=0.1, settle=2, window=2)
    n = 50
    st, alphas = s.initial(n), []
    for c in range(1, n + 1):
        alphas.append(st["alpha"])
        ret = -1.0 if st["alpha"] < 0.7 else -2.0          # the return collapses beyond alpha = 0.7
        st = s.advance(st, c, n, ret)
    a = np.array(alphas)
    assert np.all(a[:10] == 0) and a[10] == 0.25           # pretraining, then the first step delta0
    assert a[12] == 0.75                                   # accepted at the first check: delta doubles
    assert np.all(a[12:40] == 0.75) and np.all(a[40:] == 1.0)   # held (return fell), forced at the deadline
    direct = make_schedule("direct", pretrain=0.3)
    st = direct.initial(10)
    seq = [st["alpha"]] + [(st := direct.advance(st, c, 10, 0.0))["alpha"] for c in range(1, 10)]
    assert seq == [0.0] * 3 + [1.0] * 7


def test_bad_names_are_clear():
    with pytest.raises(UnknownNameError, match="available: .*direct.*homotopy.*scratch"):
        make_schedule("curriculum")
    with pytest.raises(UnknownNameError, match="point_mass"):
        make_env("toy", "backflip")
    with pytest.raises(ActuatorlabError, match="toy"):
        make_policy_env("no_such_robot", "trot")
    with pytest.raises(ModelError, match="unknown option"):
        make_schedule("homotopy", stage=3)
    with pytest.raises(ModelError, match="divisible"):
        PPOConfig(num_envs=3, unroll_length=3, num_minibatches=4)
    with pytest.raises(ModelError, match="unknown PPO option"):
        train_policy("toy", "point_mass", "scratch", steps=1000, out="/nonexistent/x", ppo={"lr": 1.0})


def test_cli_train_and_eval_policy(scratch_run, tmp_path, capsys):
    from actuatorlab.app.cli import main

    out, _ = scratch_run
    capsys.readouterr()
    assert main(["eval-policy", str(out), "--json", "--envs", "8"]) == 0
    ev = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert ev["return"] > -20 and ev["n_envs"] == 8
    assert main(["train-policy", "--robot", "no_such_robot", "--task", "trot", "--out", str(tmp_path / "x")]) == 2
    assert "unknown robot 'no_such_robot'; available: anymal_c, toy" in capsys.readouterr().err.replace("\n", "")
    assert main(["train-policy", "--robot", "toy", "--task", "point_mass", "--schedule", "curriculum",
                 "--out", str(tmp_path / "y")]) == 2
    assert "unknown schedule 'curriculum'" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
    # a tiny run through the command line (2 chunks of 1 update), then --resume of the finished run
    args = ["train-policy", "--robot", "toy", "--task", "pendulum", "--schedule", "direct", "--steps", "1000",
            "--envs", "32", "--out", str(tmp_path / "run"), "--json",
            "--config", job_config(tmp_path / "points.json", {"points": 2})]
    assert main(args) == 0
    d = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert d["finished"] and d["env_steps"] == 1024 and d["stages"] == 2
    assert main(args) == 2 and "pass resume" in capsys.readouterr().err
    assert main(args + ["--resume"]) == 0
    # --ppo overrides reach the run's config; an unknown PPO option names the known ones
    assert main(args[:-3] + ["--out", str(tmp_path / "ad"), "--config", job_config(
        tmp_path / "ad.json", {"ppo": {"lr_schedule": "adaptive", "desired_kl": 0.02}}), "--json"]) == 0
    capsys.readouterr()
    ppo = json.loads((tmp_path / "ad" / "config.json").read_text())["ppo"]
    assert ppo["lr_schedule"] == "adaptive" and ppo["desired_kl"] == 0.02
    assert main(args[:-3] + ["--out", str(tmp_path / "bad"), "--config", job_config(tmp_path / "bad.json", {"ppo": {"lr": 1}})]) == 2
    assert "unknown PPO option" in capsys.readouterr().err
    # --schedule-opt reaches the schedule (direct without pretraining: one stage at alpha = 1); an
    # unknown option is refused before anything is written, naming the schedule's options
    assert main(args[:-3] + ["--out", str(tmp_path / "so"), "--config",
                             job_config(tmp_path / "so.json", {"schedule_options": {"pretrain": 0}}), "--json"]) == 0
    d = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert d["stages"] == 1 and d["final_alpha"] == 1.0
    assert json.loads((tmp_path / "so" / "config.json").read_text())["schedule_options"] == {"pretrain": 0.0}
    assert main(args[:-3] + ["--out", str(tmp_path / "bad2"), "--config",
                             job_config(tmp_path / "bad2.json", {"schedule_options": {"stages": 3}})]) == 2
    err = capsys.readouterr().err.replace("\n", "")
    assert "schedule direct: unknown option(s) stages" in err and "available: pretrain" in err
    assert not (tmp_path / "bad2").exists()


class _PositionOnly:
    """The point mass whose actor sees only the position (2,); the velocity (2,) is privileged:
    the critic's extra input (asymmetric actor-critic), as a legged robot's trunk velocity is."""

    observation_size, action_size, privileged_size, horizon = 2, 2, 2, 50

    class State(NamedTuple):
        inner: object
        obs: jax.Array
        privileged: jax.Array
        reward: jax.Array
        done: jax.Array
        metrics: dict
        info: dict

    def __init__(self):
        self.inner = make_env("toy", "point_mass")

    def default_env_params(self):
        return self.inner.default_env_params()

    def _wrap(self, s):
        return self.State(s, s.x[:2], s.x[2:], s.reward, s.done, s.metrics, s.info)

    def reset(self, rng, env_params):
        return self._wrap(self.inner.reset(rng, env_params))

    def step(self, s, action, env_params):
        return self._wrap(self.inner.step(s.inner, action, env_params))


def test_asymmetric_critic_sees_the_privileged_state_and_the_actor_does_not(tmp_path):
    """An environment with privileged_size: the critic takes [obs, privileged] (4 inputs), the actor
    obs (2); the value depends on the privileged velocity; the policy learns from position alone
    (measured -13 against the idle -34) and loads and acts on the 2-dimensional observation."""
    env = _PositionOnly()
    cfg = default_ppo_config("toy")
    summary = train_policy("toy", "point_mass", "scratch", steps=STEPS, seed=0, out=tmp_path / "run", points=POINTS,
                           ppo=cfg, env=env)
    pol = load_policy(tmp_path / "run")
    assert pol.model.actor.in_size == 2 and pol.model.critic.in_size == 4
    assert pol.stats.mean.shape == (4,) and pol.config["privileged_size"] == 2
    ev = evaluate_policy(tmp_path / "run", env=env, n_envs=64)
    idle = _zero_action_return(make_env("toy", "point_mass"))
    assert idle < -28 and summary["final_return"] > -20 and ev["return"] > -20, (idle, summary, ev)
    assert pol.act(jnp.array([0.5, -0.5], jnp.float32)).shape == (2,)
    from actuatorlab.policy.ppo import normalize
    x = jnp.array([0.5, 0.0, 0.0, 0.0], jnp.float32)
    v = [float(pol.model.critic(normalize(pol.stats, x.at[2].set(u)))) for u in (-1.0, 1.0)]
    assert abs(v[0] - v[1]) > 1e-3, v


def test_env_option_files_are_pinned_for_another_working_directory(tmp_path, monkeypatch):
    """A run trained with a relative spec path must rebuild its env from anywhere (eval, deploy)."""
    from actuatorlab.policy.train import pinned_env_options

    (tmp_path / "spec.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    got = pinned_env_options({"actuator": "nominal", "randomization": "spec.json", "config": {"history": 2},
                              "mjcf": "scene_mjx_elliptic.xml"})
    assert got["randomization"] == str((tmp_path / "spec.json").resolve())
    assert got["actuator"] == "nominal" and got["config"] == {"history": 2}
    assert got["mjcf"] == "scene_mjx_elliptic.xml"   # looked up beside the robot's MJCF first: kept as a name
    assert pinned_env_options({"randomization": "absent.json"})["randomization"] == "absent.json"

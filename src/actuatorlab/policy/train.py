"""Training runs of a policy on a policy environment under an alpha schedule (docs/policy.md).

:func:`train_policy` trains PPO (:mod:`actuatorlab.policy.ppo`) on ``make_policy_env(robot, task)`` with
alpha from a schedule (:mod:`actuatorlab.policy.schedule`) and writes a run folder::

    RUN/config.json      resolved configuration, actuatorlab version and git revision
    RUN/metrics.jsonl    one JSON line per chunk (curve point + PPO losses)
    RUN/curve.json       learning curve: env_steps, alpha, return, reward, *_rmse per chunk
    RUN/stages.json      one entry per stage (alpha, first/last env step, return at its end)
    RUN/ckpt/latest.npz  the complete training state (every ``checkpoint_every`` chunks)
    RUN/ckpt/stage_K.npz the training state at the end of stage K (alpha changes after it)
    RUN/policy.npz       the final policy (actor, critic, observation statistics) + policy.json
    RUN/report.html      self-contained plotly report: learning curves, tracking errors, alpha

Resume (``resume=True``) restores ``ckpt/latest.npz`` (networks, optimizer, observation
statistics, every environment's state, PRNG key, schedule state) and cuts ``metrics.jsonl`` back to
it, so the resumed run's curve equals the uninterrupted one bit for bit (on the same machine).
"""

from __future__ import annotations

import json
import math
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..files import atomic_write, atomic_write_with, read_json
from ..files import git_revision
from .ppo import PPO, ActorCritic, PPOConfig, RunningStats, TrainState, policy_action
from .schedule import make_schedule
from .. import __version__
from ..envs import make_policy_env

__all__ = ["TrainConfig", "train_policy", "load_policy", "LoadedPolicy", "evaluate_policy", "read_curve",
           "default_ppo_config", "plan_run", "RunPlan",
           "FIXED_COMMANDS", "write_policy_report"]

TOY_ROBOT = "toy"


def default_ppo_config(robot: str, envs: int | None = None) -> PPOConfig:
    """PPO settings per robot: small ones for the toy tasks; for legged robots the CPU configuration
    of bench/homotopy.py (Playground-like hyper-parameters, smaller networks) with 256 environments:
    ``--long``'s, whose trot policies walk (3 seeds, 4 M env steps: vel RMSE 0.10-0.11 m/s, 1 of 36
    evaluation episodes falls; with 64 environments 0.20-0.21 m/s and 8-28 % falls; bench/README.md,
    "Fifth run"). ``--reduced`` keeps 64 environments to finish in under an hour."""
    cfg: dict[str, Any]
    if robot == TOY_ROBOT:
        cfg = dict(num_envs=32, unroll_length=16, num_minibatches=4, num_epochs=4, learning_rate=1e-3,
                   policy_hidden=(32, 32), value_hidden=(32, 32))
    else:  # the reduced configuration of bench/homotopy.py (Playground's joystick PPO uses 512-256-128
        # networks, 8192 envs, lr 3e-4: see FULL there)
        cfg = dict(num_envs=256, unroll_length=20, num_minibatches=4, num_epochs=4, learning_rate=1e-3,
                   discount=0.97, entropy_cost=1e-2, reward_scaling=1.0, policy_hidden=(64, 64),
                   value_hidden=(64, 64), activation="swish", lr_schedule="constant", init_log_std=-1.0)
    if envs is not None:
        cfg["num_envs"] = int(envs)
    return PPOConfig(**cfg)


# ---------------------------------------------------------------- checkpoints (one .npz, atomic)
def _save_leaves(path: Path, tree: Any, meta: Mapping[str, Any] | None = None) -> None:
    """One .npz (atomic) of a pytree's leaves ``leaf_00000`` ... in flattening order (and ``meta``
    as JSON bytes)."""
    leaves = jax.tree_util.tree_leaves(jax.device_get(tree))
    arrays = {f"leaf_{i:05d}": np.asarray(a) for i, a in enumerate(leaves)}
    if meta is not None:
        arrays["meta"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stub matches **kwds against allow_pickle

    atomic_write_with(path, write)


def _save_state(path: Path, ts: TrainState, meta: Mapping[str, Any]) -> None:
    _save_leaves(path, ts, meta)


#: what numpy raises for a damaged .npz: a truncated zip (BadZipFile), a cut member (EOFError,
#: ValueError, zlib.error), a missing array (KeyError)
_NPZ_ERRORS = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error)


def _npz_problem(e: BaseException) -> str:
    """One line about a damaged .npz (the exception's name when its text is empty or long)."""
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text and len(text) < 120 else type(e).__name__


def _load_state(path: Path, like: TrainState) -> tuple[TrainState, dict[str, Any]]:
    try:
        with np.load(path) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            leaves = [z[f"leaf_{i:05d}"] for i in range(len([k for k in z.files if k.startswith("leaf_")]))]
    except _NPZ_ERRORS as e:
        raise ModelError(f"{path}: corrupt or truncated training checkpoint, not readable ({_npz_problem(e)})") from None
    like_leaves, tree = jax.tree_util.tree_flatten(like)
    if len(leaves) != len(like_leaves) or any(
            a.shape != np.shape(b) or a.dtype != np.asarray(b).dtype for a, b in zip(leaves, like_leaves)):
        raise ModelError(f"{path}: checkpoint does not match this run's networks and environments")
    return jax.tree_util.tree_unflatten(tree, [jnp.asarray(a) for a in leaves]), meta


# ---------------------------------------------------------------- curve points
def _point(m: Mapping[str, np.ndarray], chunk: int, env_steps: int, alpha: float, wall: float) -> dict[str, Any]:
    """One curve point from the stacked per-update metrics of a chunk."""
    eps = float(np.sum(m["episodes"]))
    p: dict[str, Any] = {"chunk": chunk, "env_steps": env_steps, "alpha": alpha, "episodes": int(eps),
                         "return": float(np.sum(m["episode_return_sum"]) / eps) if eps > 0 else None,
                         "episode_length": float(np.sum(m["episode_length_sum"]) / eps) if eps > 0 else None,
                         "reward": float(np.mean(m["reward"])), "terminations": int(np.sum(m["terminations"]))}
    for k, v in m.items():
        if k.startswith("env/"):
            name = k[4:]
            p[name] = float(np.mean(v))
            if name.endswith("_err_sq"):
                p[name[:-len("_err_sq")] + "_rmse"] = float(math.sqrt(max(float(np.mean(v)), 0.0)))
    for k in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm", "learning_rate"):
        if k in m:
            p[k] = float(np.mean(m[k]))
    p["wall_s"] = wall
    return p


def read_curve(run: str | Path) -> dict[str, Any]:
    """``RUN/curve.json`` as a dict of lists."""
    return read_json(Path(run) / "curve.json", ModelError, "no curve.json (not a train-policy run?)")


def _curve(points: list[dict[str, Any]]) -> dict[str, Any]:
    keys: list[str] = []
    for p in points:
        keys += [k for k in p if k not in keys]
    return {k: [p.get(k) for p in points] for k in keys}


# ---------------------------------------------------------------- the run
@dataclass(frozen=True)
class RunPlan:
    updates: int      # total PPO updates
    chunk: int        # updates per chunk (one curve point)
    chunks: int       # number of chunks


def plan_run(steps: int, cfg: PPOConfig, points: int) -> RunPlan:
    """Whole chunks of updates covering ``steps`` environment steps in about ``points`` chunks."""
    updates = max(1, math.ceil(int(steps) / cfg.steps_per_update))
    chunk = max(1, round(updates / max(int(points), 1)))
    chunks = max(1, math.ceil(updates / chunk))
    return RunPlan(chunks * chunk, chunk, chunks)


@dataclass(frozen=True)
class TrainConfig:
    """One training run (what ``RUN/config.json`` records). robot, task: the policy environment
    (:func:`~actuatorlab.envs.make_policy_env`); schedule: alpha schedule name
    (:mod:`actuatorlab.policy.schedule`); steps: environment steps (rounded up to whole chunks);
    envs: parallel environments (None: :func:`default_ppo_config`'s); seed; out: run folder;
    resume: continue ``RUN/ckpt/latest.npz``; ppo: a :class:`PPOConfig` or overrides of
    :func:`default_ppo_config`; schedule_options, env_options: options of the schedule and of the
    environment; points: curve points (chunks); checkpoint_every: chunks between
    ``ckpt/latest.npz`` writes; report: write ``RUN/report.html``."""

    robot: str
    task: str
    schedule: str = "homotopy"
    steps: int = 100_000
    envs: int | None = None
    seed: int = 0
    out: str | Path = "runs/policy"
    resume: bool = False
    ppo: PPOConfig | Mapping[str, Any] | None = None
    schedule_options: Mapping[str, Any] | None = None
    env_options: Mapping[str, Any] | None = None
    points: int = 50
    checkpoint_every: int = 5
    report: bool = True


def train_policy(*args: Any, progress: Callable[[float, dict[str, Any]], None] | None = None,
                 stop_after: int | None = None, env: Any = None, ppo_obj: PPO | None = None,
                 stage_hook: Callable[[TrainState, float], TrainState] | None = None, **fields: Any) -> dict[str, Any]:
    """Train a policy under an alpha schedule and write the run folder (module docstring).

    The run: a :class:`TrainConfig`, or its fields (``train_policy(robot, task, schedule, steps=...,
    out=...)``). ``progress(fraction, point)`` after each chunk; ``stop_after``: stop after that many
    chunks of this call (an interruption, for tests); ``env`` / ``ppo_obj``: reuse an environment /
    a compiled :class:`PPO` built for the same settings; ``stage_hook(state, alpha) -> state`` at
    every change of alpha, after the stage's checkpoint (bench recipes). Runs in float32 (JAX's x64
    mode off in this thread for the call, whatever the caller's; docs/policy.md). Returns the run
    summary (also ``RUN/summary.json``)."""
    cfg = args[0] if len(args) == 1 and isinstance(args[0], TrainConfig) and not fields else TrainConfig(*args, **fields)
    with jax.enable_x64(False):
        return _train(cfg, progress, stop_after, env, ppo_obj, stage_hook)


def _resolve(cfg: TrainConfig, env: Any, ppo_obj: PPO | None):
    """(schedule, PPOConfig, env, plan, config dict) of a run; refuses a resume with other settings."""
    sched = make_schedule(cfg.schedule, **dict(cfg.schedule_options or {}))
    if isinstance(cfg.ppo, PPOConfig):
        pc = cfg.ppo if cfg.envs is None else PPOConfig.from_dict({**cfg.ppo.to_dict(), "num_envs": int(cfg.envs)})
    else:
        base = default_ppo_config(cfg.robot, cfg.envs).to_dict()
        bad = sorted(set(cfg.ppo or {}) - set(base))
        if bad:
            raise ModelError(f"unknown PPO option(s) {', '.join(bad)}; available: {', '.join(base)}")
        pc = PPOConfig.from_dict({**base, **dict(cfg.ppo or {})})
    env_options = pinned_env_options(cfg.env_options)
    env = env if env is not None else make_policy_env(cfg.robot, cfg.task, **env_options)
    plan = plan_run(cfg.steps, pc, cfg.points)
    config = {"robot": cfg.robot, "task": cfg.task, "schedule": cfg.schedule, "schedule_options": sched.options(),
              "steps": int(cfg.steps), "env_steps": plan.updates * pc.steps_per_update, "envs": pc.num_envs,
              "seed": int(cfg.seed), "updates": plan.updates, "updates_per_chunk": plan.chunk, "chunks": plan.chunks,
              "checkpoint_every": int(cfg.checkpoint_every), "ppo": pc.to_dict(),
              "env_options": env_options, "observation_size": int(env.observation_size),
              "action_size": int(env.action_size)}
    if getattr(env, "privileged_size", 0):   # the critic's extra inputs (asymmetric actor-critic)
        config["privileged_size"] = int(env.privileged_size)
    if ppo_obj is not None and (ppo_obj.cfg != pc or ppo_obj.total_updates != plan.updates):
        raise ModelError(f"ppo_obj was built for other PPO settings or another budget ({plan.updates} updates)")
    out = Path(cfg.out)
    if (out / "config.json").exists():
        if not cfg.resume:
            raise ModelError(f"{out}: a run exists there; pass resume=True (--resume) or another output folder")
        old = read_json(out / "config.json", ModelError, "missing")
        old["env_options"] = pinned_env_options(old.get("env_options"))   # a run started before paths were pinned
        diff = sorted(k for k in config if old.get(k) != json.loads(json.dumps(config[k])))
        if diff:
            raise ModelError(f"{out}: cannot resume, the run was started with other settings ({', '.join(diff)})")
    else:
        atomic_write(out / "config.json", json.dumps({**config, "actuatorlab": __version__,
                                                      "revision": git_revision()}, indent=1))
    return sched, pc, env, plan, config


def _train(cfg: TrainConfig, progress, stop_after, env, ppo_obj, stage_hook) -> dict[str, Any]:
    out = Path(cfg.out)
    sched, pc, env, plan, config = _resolve(cfg, env, ppo_obj)
    ckpt = out / "ckpt" / "latest.npz"
    algo = ppo_obj if ppo_obj is not None else PPO(env, pc, plan.updates)
    env_params = env.default_env_params()

    def params_at(alpha: float):
        return {**env_params, "alpha": jnp.asarray(alpha, jnp.float32)}

    ts = algo.init(jax.random.PRNGKey(int(cfg.seed)), params_at(sched.initial(plan.chunks)["alpha"]))
    done_chunks, sstate, stages, points_list = 0, sched.initial(plan.chunks), [], []
    if cfg.resume and ckpt.exists():
        ts, meta = _load_state(ckpt, ts)
        done_chunks, sstate, stages = int(meta["chunk"]), meta["schedule_state"], meta["stages"]
        points_list = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines() if l.strip()][:done_chunks]
        if len(points_list) != done_chunks:
            raise ModelError(f"{out / 'metrics.jsonl'}: has {len(points_list)} points, the checkpoint {done_chunks}")
    atomic_write(out / "metrics.jsonl", "".join(json.dumps(p) + "\n" for p in points_list))
    if not stages:
        stages = [{"stage": 0, "alpha": sstate["alpha"], "start_chunk": 0, "start_env_steps": 0}]

    def save(path: Path) -> None:
        _save_state(path, ts, {"chunk": done_chunks, "schedule_state": sstate, "stages": stages})

    t0, ran = time.perf_counter(), 0
    with open(out / "metrics.jsonl", "a") as log:
        while done_chunks < plan.chunks and (stop_after is None or ran < stop_after):
            alpha = float(sstate["alpha"])
            ts, m = algo.train_chunk(ts, params_at(alpha), plan.chunk)
            m = jax.device_get(m)
            done_chunks += 1
            ran += 1
            pt = _point(m, done_chunks - 1, done_chunks * plan.chunk * pc.steps_per_update, alpha,
                        time.perf_counter() - t0)
            points_list.append(pt)
            log.write(json.dumps(pt) + "\n")
            log.flush()
            sstate = sched.advance(sstate, done_chunks, plan.chunks, pt["return"])
            if float(sstate["alpha"]) != alpha or done_chunks == plan.chunks:
                st = stages[-1]
                st.update(end_chunk=done_chunks - 1, end_env_steps=pt["env_steps"], end_return=pt["return"])
                save(out / "ckpt" / f"stage_{st['stage']}.npz")
                if done_chunks < plan.chunks:
                    stages.append({"stage": st["stage"] + 1, "alpha": float(sstate["alpha"]),
                                   "start_chunk": done_chunks, "start_env_steps": pt["env_steps"]})
                    if stage_hook is not None:
                        ts = stage_hook(ts, float(sstate["alpha"]))
                save(ckpt)
            elif done_chunks % max(int(cfg.checkpoint_every), 1) == 0:
                save(ckpt)
            if progress is not None:
                progress(done_chunks / plan.chunks, pt)
    return _finish(out, cfg, algo, ts, config, points_list, stages, sstate, done_chunks, plan, pc, ran,
                   time.perf_counter() - t0)


def _finish(out, cfg, algo, ts, config, points_list, stages, sstate, done_chunks, plan, pc, ran, wall):
    """Write curve.json, stages.json, summary.json (and the final policy and report when finished)."""
    curve = _curve(points_list)
    atomic_write(out / "curve.json", json.dumps(curve))
    atomic_write(out / "stages.json", json.dumps(stages, indent=1))
    finished = done_chunks >= plan.chunks
    summary = {"run": str(out), "finished": finished, "chunks_done": done_chunks, "chunks": plan.chunks,
               "env_steps": done_chunks * plan.chunk * pc.steps_per_update, "stages": len(stages),
               "final_alpha": float(sstate["alpha"]), "final_return": _tail_mean(curve.get("return", [])),
               "wall_s_this_call": wall, "steps_per_s_this_call": ran * plan.chunk * pc.steps_per_update / max(wall, 1e-9),
               "steps_per_s_after_first_chunk": _rate(points_list[-ran:]) if ran > 1 else None,
               "traces": algo.traces}
    if finished:
        _save_policy(out, algo, ts, config)
        if cfg.report:
            write_policy_report(out / "report.html", curve, stages, config)
    atomic_write(out / "summary.json", json.dumps(summary, indent=1))
    return summary


def _rate(points: list[dict[str, Any]]) -> float | None:
    """Env steps per second between the first and the last of ``points`` (excludes the compile)."""
    dt = points[-1]["wall_s"] - points[0]["wall_s"]
    return (points[-1]["env_steps"] - points[0]["env_steps"]) / dt if dt > 0 else None


def _tail_mean(xs: list, frac: float = 0.1) -> float | None:
    v = [x for x in xs if x is not None]
    if not v:
        return None
    k = max(1, int(round(len(v) * frac)))
    return float(np.mean(v[-k:]))


# ---------------------------------------------------------------- the final policy
def _save_policy(out: Path, algo: PPO, ts: TrainState, config: Mapping[str, Any]) -> None:
    _save_leaves(out / "policy.npz", (ts.params, ts.stats))
    atomic_write(out / "policy.json", json.dumps({"format": "actuatorlab-policy", "version": 1, **config}, indent=1))


@dataclass(frozen=True)
class LoadedPolicy:
    """A trained policy: ``act(obs)`` is the deterministic action (clipped mean) of one observation."""

    model: ActorCritic
    stats: RunningStats
    config: dict
    normalize_obs: bool = True

    def act(self, obs: jax.Array) -> jax.Array:
        return policy_action(self.model, self.stats, obs, self.normalize_obs)


def load_policy(run: str | Path) -> LoadedPolicy:
    """The final policy of a train-policy run folder (``RUN/policy.npz`` + ``RUN/policy.json``)."""
    run = Path(run)
    config = read_json(run / "policy.json", ModelError, "no policy.json (run not finished?)")
    if config.get("format") != "actuatorlab-policy":
        raise ModelError(f"{run / 'policy.json'}: not an actuatorlab policy file")
    cfg = PPOConfig.from_dict(config["ppo"])
    like = ActorCritic(int(config["observation_size"]), int(config["action_size"]), cfg, jax.random.PRNGKey(0),
                       int(config.get("privileged_size", 0)))
    import equinox as eqx

    params, static = eqx.partition(like, eqx.is_array)
    stats = RunningStats(jnp.zeros(like.critic.in_size, jnp.float32), jnp.zeros(like.critic.in_size, jnp.float32),
                         jnp.zeros((), jnp.float32))
    flat, tree = jax.tree_util.tree_flatten((params, stats))
    try:
        with np.load(run / "policy.npz") as z:
            leaves = [z[f"leaf_{i:05d}"] for i in range(len(flat))]
    except _NPZ_ERRORS as e:
        raise ModelError(f"{run / 'policy.npz'}: corrupt or truncated policy file, not readable ({_npz_problem(e)})") from None
    if any(a.shape != np.shape(b) for a, b in zip(leaves, flat)):
        raise ModelError(f"{run / 'policy.npz'}: weights do not match policy.json")
    params, stats = jax.tree_util.tree_unflatten(tree, [jnp.asarray(a, jnp.float32) for a in leaves])
    return LoadedPolicy(eqx.combine(params, static), stats, config, bool(cfg.normalize_obs))


def evaluate_policy(run: str | Path, **kwargs: Any) -> dict[str, Any]:
    """Tracking errors and return of a run's final policy (:func:`_evaluate_policy`), in float32."""
    with jax.enable_x64(False):
        return _evaluate_policy(run, **kwargs)


#: fixed evaluation commands (vx [m/s], vy [m/s], yaw rate [rad/s]) for tasks with a velocity command
FIXED_COMMANDS = ((0.5, 0.0, 0.0), (1.0, 0.0, 0.0), (-0.5, 0.0, 0.0), (0.0, 0.3, 0.0), (0.0, -0.3, 0.0),
                  (0.0, 0.0, 0.5), (0.0, 0.0, -0.5), (0.5, 0.0, 0.5), (0.5, 0.2, 0.0), (1.0, 0.0, -0.5),
                  (0.0, 0.0, 0.0), (0.75, -0.2, 0.3))


_EVAL_FNS: dict = {}


def _eval_fn(env: Any, n_envs: int, steps: int, cmd: np.ndarray | None):
    """The jitted evaluation rollout for one environment, batch, length and command set, cached so
    that every policy of the same structure reuses one compiled function (the policy, its
    statistics and ``env_params`` are arguments)."""
    import equinox as eqx

    key = (id(env), n_envs, steps, None if cmd is None else cmd.tobytes())
    if key in _EVAL_FNS and _EVAL_FNS[key][0] is env:
        return _EVAL_FNS[key][1]

    @eqx.filter_jit
    def run_eval(model, stats, rng, p, normalize_obs):
        act = lambda o: policy_action(model, stats, o, normalize_obs)  # noqa: E731
        keys = jax.random.split(rng, n_envs)
        if cmd is None:
            s = jax.vmap(env.reset, in_axes=(0, None))(keys, p)
        else:   # the env starts every episode on its fixed command (the first observation shows it)
            s = jax.vmap(lambda k, c: env.reset(k, p, command=c))(keys, jnp.asarray(cmd))

        def body(carry, _):
            s, alive = carry
            s = jax.vmap(env.step, in_axes=(0, 0, None))(s, jax.vmap(act)(s.obs), p)
            # a metric counts at the steps an environment is alive and the value finite (a diverged
            # simulation ends the episode and reports non-finite velocities at that step)
            m = {k: (jnp.where(jnp.isfinite(v), v, 0.0) * alive, jnp.isfinite(v) * alive) for k, v in s.metrics.items()}
            out = (jnp.where(jnp.isfinite(s.reward), s.reward, 0.0) * alive, m, alive)
            ended = s.done.astype(jnp.float32) * (1.0 - s.info["truncation"].astype(jnp.float32))
            return (s, alive * (1.0 - s.done.astype(jnp.float32))), (out, alive * ended)

        _, ((r, m, alive), fell) = jax.lax.scan(body, (s, jnp.ones((n_envs,), jnp.float32)), None, length=steps)
        # per environment: sums and counts of every metric (aggregated by the caller)
        return r.sum(0), {k: (v.sum(0), c.sum(0)) for k, (v, c) in m.items()}, alive.sum(0), fell.sum(0)

    _EVAL_FNS[key] = (env, run_eval)
    return run_eval


#: env options that name a file the run must find again from any working directory
PATH_OPTIONS = ("actuator", "randomization")


def pinned_env_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """``options`` with every relative path of :data:`PATH_OPTIONS` that names an existing file made
    absolute, so that RUN/config.json rebuilds the same environment from another working directory
    (evaluation, deployment); names (``"nominal"``, ``"builtin"``) and absolute paths are kept."""
    out = dict(options or {})
    for k in PATH_OPTIONS:
        v = out.get(k)
        if isinstance(v, str) and not Path(v).is_absolute() and Path(v).is_file():
            out[k] = str(Path(v).resolve())
    return out


def _evaluate_policy(run: str | Path, *, env: Any = None, env_options: Mapping[str, Any] | None = None,
                     alpha: float = 1.0, n_envs: int | None = None, steps: int | None = None, seed: int = 0,
                     commands: Any = "fixed") -> dict[str, Any]:
    """Run the deterministic policy of ``run`` for ``steps`` steps (default: the env's
    ``horizon``, else 500) in ``n_envs`` environments at ``alpha`` without resets (a finished
    environment stops counting); returns the mean return per environment, the per-step means of
    every metric over the steps before each environment's end, ``<name>_rmse`` for every
    ``<name>_err_sq`` metric and ``fell`` (share of environments terminated before the end).

    Tasks whose state has a ``command`` field run the fixed command set (:data:`FIXED_COMMANDS`,
    ``commands="fixed"``; or an (N, 3) array; ``None``: the env's own random commands), each
    command in ``n_envs / N`` environments (default one), passed to ``env.reset(rng, env_params,
    command=c)``, so the policy sees it from the first observation on.
    ``env_options`` are passed to ``make_policy_env`` on top of the run's (e.g. ``{"actuator": "builtin"}``)."""
    pol = load_policy(run)
    cfg = pol.config
    if env is None:
        env = make_policy_env(cfg["robot"], cfg["task"], **{**cfg.get("env_options", {}), **dict(env_options or {})})
    horizon: int = getattr(env, "horizon", 500)
    steps = int(steps or horizon)
    p = {**env.default_env_params(), "alpha": jnp.asarray(alpha, jnp.float32)}
    probe = jax.eval_shape(lambda k: env.reset(k, p), jax.random.PRNGKey(0))
    cmd = None
    if commands is not None and hasattr(probe, "command"):
        cmd = np.asarray(FIXED_COMMANDS if isinstance(commands, str) and commands == "fixed" else commands, np.float32)
        if cmd.ndim != 2 or cmd.shape[1:] != tuple(probe.command.shape):
            raise ModelError(f"evaluation commands must be (N, {probe.command.shape[0]}), got {cmd.shape}")
        reps = max(1, -(-int(n_envs or len(cmd)) // len(cmd)))
        cmd = np.tile(cmd, (reps, 1))
        n_envs = len(cmd)
    n_envs = int(n_envs or 16)

    run_eval = _eval_fn(env, n_envs, steps, cmd)
    t0 = time.perf_counter()
    ret, metrics, length, fell = jax.device_get(run_eval(pol.model, pol.stats, jax.random.PRNGKey(int(seed)), p,
                                                         pol.normalize_obs))
    res: dict[str, Any] = {"return": float(np.mean(ret)), "episode_length": float(np.mean(length)),
                           "fell": float(np.mean(fell)), "alpha": float(alpha), "n_envs": int(n_envs), "steps": steps,
                           "commands": None if cmd is None else cmd.tolist(), "wall_s": time.perf_counter() - t0}

    def _means(idx) -> dict[str, float]:
        out: dict[str, float] = {}
        for k, (v, c) in metrics.items():
            out[k] = float(np.sum(v[idx]) / max(float(np.sum(c[idx])), 1.0))
            if k.endswith("_err_sq"):
                out[k[:-len("_err_sq")] + "_rmse"] = float(math.sqrt(max(out[k], 0.0)))
        return out

    res.update(_means(np.arange(n_envs)))
    if cmd is not None:   # one entry per distinct command (its environments pooled)
        n_cmd = len(cmd) // max(1, reps)
        res["per_command"] = []
        for i in range(n_cmd):
            idx = np.arange(i, n_envs, n_cmd)
            res["per_command"].append({"command": cmd[i].tolist(), "return": float(np.mean(ret[idx])),
                                       "episode_length": float(np.mean(length[idx])),
                                       "fell": float(np.mean(fell[idx])), **_means(idx)})
    return res


# ---------------------------------------------------------------- report
def write_policy_report(path: Path, curve: Mapping[str, list], stages: list, config: Mapping[str, Any]) -> Path:
    """A self-contained HTML page (plotly.js inlined): return and alpha vs environment steps, the
    tracking errors, the stage table and the configuration."""
    import html

    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    x = curve.get("env_steps", [])
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=x, y=curve.get("return", []), name="episode return", mode="lines+markers"))
    fig.add_trace(go.Scatter(x=x, y=curve.get("alpha", []), name="alpha", line={"dash": "dot"}), secondary_y=True)
    fig.update_layout(title="Learning curve", xaxis_title="environment steps", height=420)
    fig.update_yaxes(title_text="mean episode return", secondary_y=False)
    fig.update_yaxes(title_text="alpha", range=[-0.05, 1.05], secondary_y=True)
    figs = [fig]
    err = [k for k in curve if k.endswith("_rmse")]
    if err:
        f2 = go.Figure([go.Scatter(x=x, y=curve[k], name=k, mode="lines") for k in err])
        f2.update_layout(title="Tracking errors (RMSE over training steps)", xaxis_title="environment steps", height=380)
        figs.append(f2)
    f3 = go.Figure([go.Scatter(x=x, y=curve.get("reward", []), name="reward per step", mode="lines")])
    f3.update_layout(title="Reward per step", xaxis_title="environment steps", height=320)
    figs.append(f3)
    divs = [f.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, f in enumerate(figs)]
    rows = "".join(f"<tr><td>{s['stage']}</td><td>{s['alpha']:.3g}</td><td>{s.get('start_env_steps')}</td>"
                   f"<td>{s.get('end_env_steps')}</td><td>{s.get('end_return')}</td></tr>" for s in stages)
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>train-policy {html.escape(str(config.get('task')))}"
            f"</title></head><body style='font-family:sans-serif;max-width:1100px;margin:auto'>"
            f"<h1>{html.escape(str(config.get('robot')))} / {html.escape(str(config.get('task')))}: "
            f"schedule {html.escape(str(config.get('schedule')))}</h1>" + "".join(divs) +
            "<h2>Stages</h2><table border=1 cellpadding=4><tr><th>stage</th><th>alpha</th><th>start step</th>"
            f"<th>end step</th><th>return at end</th></tr>{rows}</table><h2>Configuration</h2><pre>"
            f"{html.escape(json.dumps(config, indent=1))}</pre></body></html>")
    return atomic_write(path, page)

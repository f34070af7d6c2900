"""Deployment of a trained policy on virtual hardware: the legged suite's drive truths on the ground.

:func:`deploy_policy` runs a ``train-policy`` run's final policy (``RUN/policy.npz``) on the robot of
:mod:`actuatorlab.synth.legged_ground`: the policy at its control rate, fed only by what the robot
measures (IMU rate and attitude, output encoders, drive velocity estimates; no base linear velocity), its
targets through the drives' command delay to the truth drives (SEA, gear friction with load dependence,
backlash, FOC voltage and current limits, winding temperature) at their own rates, full MuJoCo contacts.
Per command of the fixed evaluation set (:data:`~actuatorlab.policy.train.FIXED_COMMANDS`), one episode of
``steps`` policy steps from the standing pose; then the same commands in the policy's own training
environment (:func:`~actuatorlab.policy.train.evaluate_policy`), so that the gap is measured on equal terms::

    vel_rmse  = sqrt(mean_t |c_xy - v_b,xy(t)|^2)   yaw_rmse = sqrt(mean_t (c_yaw - w_b,z(t))^2)
    (over the ticks before a fall; v_b, w_b the true trunk velocity in the trunk frame)
    fell      = share of episodes ending on a fall (trunk below min_base_height or tilted beyond max_tilt)
    torque_rms = sqrt(mean_t,j tau_j^2) [N.m]; mech_power = mean_t sum_j |tau_j dq_j| [W];
    elec_power = mean_t sum_j (R i^2 + kt w i) [W]
    gap       = hardware / training environment, per figure

The hardware (``--hardware SPEC``, :func:`load_hardware`): a legged dataset folder (``synth --robot
anymal_c --suite legged``: the drives its logs were taken on, its ``dataset.json``) or a hardware file
(JSON, ``{"format": "actuatorlab-hardware", "robot": "anymal_c", "seed": S}``: the twelve drives
``synth`` draws for seed S; optional ``dataset`` instead of ``seed``, ``gain`` [kp, kd], ``imu``
{field: value} of :class:`~actuatorlab.synth.legged_ground.Imu`, ``command_delay_add`` [s]).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import ModelError
from ..files import atomic_write, read_json
from ..robots.loader import Robot, load_robot
from ..synth.legged import HELDOUT_GAIN, draw_units
from ..logs.checks import MIN_SAMPLES
from ..logs.io import save_trajectory
from ..synth.legged_ground import GroundConfig, GroundRecord, Imu, Readings, ground_trajectory, simulate_ground
from ..synth.zoo import ZooActuator, actuator_from_dict
from ..envs import make_policy_env
from ..envs.timing import scale_action
from .ppo import policy_action
from .train import FIXED_COMMANDS, evaluate_policy, load_policy, LoadedPolicy

__all__ = ["HARDWARE_FORMAT", "Hardware", "DeployConfig", "load_hardware", "deploy_policy", "ObservationBuilder"]

HARDWARE_FORMAT = "actuatorlab-hardware"
#: the signals the virtual robot measures (the policy's observation may use only these)
MEASURED = ("gyro", "gravity", "position", "velocity")


@dataclass(frozen=True)
class Hardware:
    """The virtual robot a policy is deployed on: robot name, units (one drawn drive per joint, config
    order), gain (kp [N.m/rad], kd [N.m.s/rad]) of the drives' PD, imu, command_delay_add [s] added to
    every drive's delay, source (where it came from, for the record), drives: "truth" or "ideal_pd" (the
    diagnostic of :class:`~actuatorlab.synth.legged_ground.GroundConfig`: the gap without the actuator),
    scene: "full" or "training" (the diagnostic with the training scene's contacts)."""

    robot: str
    units: tuple[ZooActuator, ...]
    gain: tuple[float, float] = HELDOUT_GAIN
    imu: Imu = Imu()
    command_delay_add: float = 0.0
    source: str = ""
    drives: str = "truth"
    scene: str = "full"


def _units_of_dataset(path: Path) -> tuple[str, tuple[ZooActuator, ...]]:
    card = path / "dataset.json" if path.is_dir() else path
    doc = read_json(card, ModelError, "not a legged dataset (no dataset.json)")
    if doc.get("suite") != "legged" or "units" not in doc:
        raise ModelError(f"{card}: not a legged dataset (suite {doc.get('suite')!r}); make one with "
                         "`actuatorlab synth --robot anymal_c --suite legged`")
    return str(doc["robot"]), tuple(actuator_from_dict(u) for u in doc["units"].values())


def load_hardware(spec: str | Path) -> Hardware:
    """The hardware of a legged dataset folder (or its dataset.json) or of a hardware file (module docstring)."""
    p = Path(spec)
    if p.is_dir() or p.name == "dataset.json":
        robot, units = _units_of_dataset(p)
        return Hardware(robot, units, source=f"dataset {p}")
    doc = read_json(p, ModelError, "no hardware file there")
    if doc.get("format") != HARDWARE_FORMAT:
        if doc.get("suite") == "legged":
            robot, units = _units_of_dataset(p)
            return Hardware(robot, units, source=f"dataset {p}")
        raise ModelError(f"{p}: not a hardware file (format {doc.get('format')!r}, expected {HARDWARE_FORMAT!r}) "
                         "nor a legged dataset")
    known = {"format", "robot", "seed", "dataset", "gain", "imu", "command_delay_add", "drives", "scene",
             "description"}
    bad = sorted(set(doc) - known)
    if bad:
        raise ModelError(f"{p}: unknown hardware field(s) {', '.join(bad)}; known: {', '.join(sorted(known))}")
    robot = str(doc.get("robot", ""))
    if ("seed" in doc) == ("dataset" in doc):
        raise ModelError(f"{p}: give exactly one of 'seed' (drives drawn as synth draws them) and 'dataset'")
    if "dataset" in doc:
        robot_d, units = _units_of_dataset((p.parent / str(doc["dataset"])).resolve())
        if robot and robot != robot_d:
            raise ModelError(f"{p}: robot {robot!r} but its dataset is {robot_d!r}'s")
        robot = robot_d
    else:
        units = draw_units(np.random.default_rng([int(doc["seed"]), 0]), load_robot(robot or "anymal_c").n_joints)
        robot = robot or "anymal_c"
    try:
        imu = Imu(**dict(doc.get("imu") or {}))
    except TypeError as e:
        raise ModelError(f"{p}: imu: {e}; fields: {', '.join(f.name for f in dataclasses.fields(Imu))}") from None
    gain = tuple(float(x) for x in doc.get("gain", HELDOUT_GAIN))
    if len(gain) != 2 or min(gain) < 0:
        raise ModelError(f"{p}: gain must be [kp, kd] >= 0, got {doc.get('gain')}")
    return Hardware(robot, units, (gain[0], gain[1]), imu, float(doc.get("command_delay_add", 0.0)), f"file {p}",
                    str(doc.get("drives", "truth")), str(doc.get("scene", "full")))


@dataclass(frozen=True)
class DeployConfig:
    """commands: (N, 3) (vx [m/s], vy [m/s], yaw rate [rad/s]), one episode each (default the fixed
    evaluation set); steps: policy steps per episode (default the env's horizon, 500); seed: the
    hardware's random stream (IMU noise and biases, reset noise); settle [s] standing before the policy
    starts; reset_noise [rad]; compare: also run the commands in the policy's training environment."""

    commands: Any = FIXED_COMMANDS
    steps: int = 500
    seed: int = 0
    settle: float = 0.5
    reset_noise: float = 0.05
    compare: bool = True


class ObservationBuilder:
    """The actor's observation of the trot task (:mod:`actuatorlab.envs.locomotion`, ``proprioceptive``)
    built from the robot's readings: f_t = [s_gyro gyro, gravity, s_pos (q - q_home), s_vel dq, last
    action], obs = [f_t, s_cmd c, f_{t-1}, ..., f_{t-H}] (after a reset the history repeats f_0)."""

    def __init__(self, env: Any, command: np.ndarray):
        cfg = env.config
        self.scales = dict(cfg.obs_scales)
        self.H = int(cfg.history)
        self.home_q = np.asarray(env.home_q, np.float64)
        self.cmd = np.asarray(self.scales["command"], np.float64) * np.asarray(command, np.float64)
        self.last_action = np.zeros(env.action_size)
        self.frames: list[np.ndarray] = []

    def __call__(self, r: Readings) -> np.ndarray:
        s = self.scales
        f = np.concatenate([s["gyro"] * r.gyro, r.gravity, s["position"] * (r.position - self.home_q),
                            s["velocity"] * r.velocity, self.last_action])
        if not self.frames:
            self.frames = [f] * self.H
        hist = self.frames[:self.H]
        self.frames = [f] + self.frames[:max(self.H - 1, 0)] if self.H else []
        return np.concatenate([f, self.cmd, *hist]).astype(np.float32)


def _check(pol: LoadedPolicy, env: Any, hw: Hardware, run: Path, spec: str) -> None:
    cfg = pol.config
    if cfg.get("robot") != hw.robot:
        raise ModelError(f"policy {run} was trained on robot {cfg.get('robot')!r}; hardware {spec} is {hw.robot!r}")
    if cfg.get("task") != "trot" or not hasattr(env, "config"):
        raise ModelError(f"policy {run} is for task {cfg.get('task')!r}; deployment on {spec} runs the trot task")
    obs = env.config.observation
    if obs != "proprioceptive":
        raise ModelError(f"policy {run} observes {obs!r} ({env.observation_size} inputs, the base's linear "
                         f"velocity among them); hardware {spec} measures {', '.join(MEASURED)} only: train with "
                         "env_options config observation 'proprioceptive'")
    c = env.core.contract
    if int(c.decimation) != 1 or c.command_latency or c.obs_latency or c.target != "hold":
        raise ModelError(f"policy {run}: deployment supports the default timing contract (decimation 1, hold, "
                         f"no added latencies), got {c}")
    if len(hw.units) != env.action_size:
        raise ModelError(f"hardware {spec} has {len(hw.units)} drives, policy {run} commands {env.action_size} joints")


def _episode(act: Callable, env: Any, robot: Robot, hw: Hardware, command: np.ndarray, dc: DeployConfig,
             seed: int) -> GroundRecord:
    core = env.core
    build = ObservationBuilder(env, command)

    def controller(r: Readings) -> np.ndarray:
        a = np.asarray(act(jnp.asarray(build(r))), np.float64)
        build.last_action = a
        return np.asarray(scale_action(core.contract, np, a, core.offset, core.lo, core.hi), np.float64)

    gc = GroundConfig(ticks=int(dc.steps), gain=hw.gain, settle=dc.settle, reset_noise=dc.reset_noise, imu=hw.imu,
                      command_delay_add=hw.command_delay_add, min_base_height=env.config.min_base_height,
                      max_tilt=env.config.max_tilt, drives=hw.drives, scene=hw.scene)
    return simulate_ground(robot, hw.units, controller, gc, np.random.default_rng([seed, 7]), home=core.home)


def _figures(rec: GroundRecord, command: np.ndarray) -> dict[str, Any]:
    e_xy = np.sum((command[:2] - rec.linvel[:, :2]) ** 2, axis=1)
    e_yaw = (command[2] - rec.angvel[:, 2]) ** 2
    k = len(rec.time)

    def stat(f: Callable[[np.ndarray], Any], x: np.ndarray) -> float:
        return float(f(x)) if k else 0.0

    return {"command": [float(x) for x in command], "steps_run": int(k), "fell": float(rec.fell),
            "vel_rmse": float(math.sqrt(np.sum(e_xy) / max(k, 1))), "yaw_rmse": float(math.sqrt(np.sum(e_yaw) / max(k, 1))),
            "torque_rms": stat(lambda x: np.sqrt(np.mean(x ** 2)), rec.tau), "torque_max": stat(np.max, np.abs(rec.tau)),
            "mech_power": stat(np.mean, rec.mech_power), "elec_power": stat(np.mean, rec.elec_power),
            "temperature_max": stat(np.max, rec.temperature),
            "lin_err_sq_sum": float(np.sum(e_xy)), "yaw_err_sq_sum": float(np.sum(e_yaw))}


def deploy_policy(run: str | Path, hardware: str | Path | Hardware, out: str | Path | None = None,
                  config: DeployConfig | None = None, progress: Callable[[int, int], None] | None = None
                  ) -> dict[str, Any]:
    """Deploy ``run``'s policy on ``hardware`` (module docstring); writes ``OUT/deploy.json``,
    ``OUT/episodes.npz`` (every episode's truth at the ticks) and ``OUT/logs/cmdNN.parquet`` (the deployment
    logs as the robot records them: encoders, drive velocity estimates, currents, spring torque, temperatures,
    IMU; no base state) when ``out`` is given. Deterministic by
    ``config.seed``. Returns the summary: per command and pooled figures on the hardware, the same in the
    training environment and their ratios (``gap``)."""
    dc = config or DeployConfig()
    run = Path(run)
    spec = str(hardware.source if isinstance(hardware, Hardware) else hardware)
    hw = hardware if isinstance(hardware, Hardware) else load_hardware(hardware)
    with jax.enable_x64(False):
        pol = load_policy(run)
        env = make_policy_env(pol.config["robot"], pol.config["task"], **dict(pol.config.get("env_options") or {}))
        _check(pol, env, hw, run, spec)
        act = jax.jit(lambda o: policy_action(pol.model, pol.stats, o, pol.normalize_obs))
        cmds = np.asarray(dc.commands, np.float64).reshape(-1, 3)
        episodes, recs, logs = [], {}, []
        robot = load_robot(hw.robot)
        for i, c in enumerate(cmds):
            rec = _episode(act, env, robot, hw, c, dc, int(dc.seed) * 1000 + i)
            episodes.append(_figures(rec, c))
            for f in dataclasses.fields(rec):
                if f.name != "sensors":
                    recs[f"{i}/{f.name}"] = np.asarray(getattr(rec, f.name))
            cond = {"split": "deployment", "excitation": "policy", "command": "_".join(f"{x:+.2f}" for x in c),
                    "gain": f"kp{hw.gain[0]:g}_kd{hw.gain[1]:g}", "load": "none", "session": f"seed{dc.seed}"}
            logs.append(ground_trajectory(robot, rec, f"cmd{i:02d}", hw.gain, cond))
            if progress is not None:
                progress(i + 1, len(cmds))
        sim = (evaluate_policy(run, env=env, steps=int(dc.steps), commands=cmds, seed=int(dc.seed))
               if dc.compare else None)
    n_ticks = sum(e["steps_run"] for e in episodes)
    pooled = {"vel_rmse": math.sqrt(sum(e["lin_err_sq_sum"] for e in episodes) / max(n_ticks, 1)),
              "yaw_rmse": math.sqrt(sum(e["yaw_err_sq_sum"] for e in episodes) / max(n_ticks, 1)),
              "fell": float(np.mean([e["fell"] for e in episodes]))}
    for k in ("torque_rms", "mech_power", "elec_power"):
        pooled[k] = float(np.mean([e[k] for e in episodes]))
    doc: dict[str, Any] = {"run": str(run), "hardware": spec, "robot": hw.robot, "gain": list(hw.gain),
                           "imu": dataclasses.asdict(hw.imu), "command_delay_add": hw.command_delay_add,
                           "drives": hw.drives, "scene": hw.scene,
                           "config": {**dataclasses.asdict(dc), "commands": cmds.tolist()},
                           "hardware_figures": pooled, "episodes": episodes}
    if sim is not None:
        tr = {"vel_rmse": sim["lin_vel_rmse"], "yaw_rmse": sim["yaw_rate_rmse"], "fell": sim["fell"]}
        doc["training_env"] = tr
        doc["gap"] = {k: (pooled[k] / tr[k] if tr[k] > 0 else None) for k in ("vel_rmse", "yaw_rmse")}
    if out is not None:
        o = Path(out)
        o.mkdir(parents=True, exist_ok=True)
        tmp = o / ".episodes.partial.npz"
        np.savez_compressed(tmp, **recs)  # type: ignore[arg-type]  # numpy's stub matches **kwds against allow_pickle
        tmp.replace(o / "episodes.npz")
        (o / "logs").mkdir(exist_ok=True)
        for t in logs:   # the deployment logs: what the robot itself records (a log needs MIN_SAMPLES)
            if t.n >= MIN_SAMPLES:
                save_trajectory(t, o / "logs" / t.name)
        doc["logs"] = [f"logs/{t.name}.parquet" for t in logs if t.n >= MIN_SAMPLES]
        atomic_write(o / "deploy.json", json.dumps(doc, indent=1))
    return doc

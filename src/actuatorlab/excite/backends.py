"""The two simulators an excitation design runs on, behind one small adapter
(:class:`ExciteBackend`): how to simulate a candidate, which parameters it is informative about
(the Jacobian of the simulated positions), how its command files, logs and fits look.

* :class:`JointBackend`: a one-joint bench, the fast one-joint scan
  (:func:`actuatorlab.sim.rollout.rollout_batch`, the rollout ``fit`` uses). Parameters: the
  model's positive free parameters, log scale; the Jacobian d q / d log theta by central
  differences through the compiled rollout (:func:`actuatorlab.identify.identifiability._jacobian`,
  as for the identifiability report).
* :class:`RobotBackend`: a whole robot, native MuJoCo (:func:`actuatorlab.sim.arm_native.rollout_native`,
  the path ``fit --robot`` uses), one parameter set per joint (:func:`design_robot_setup`).
  Parameters: name@joint for the named parameters of the design joints, log scale; the Jacobian
  of every joint's position (holders included) by central differences with a relative step
  ``rel_step``, all 2 P perturbations of a chunk of candidates in one batched native rollout
  (one parameter set per environment).

Both give the encoder noise per recorded joint, ``sigma_j = noise |output_to_joint_j|`` (one
joint: ``noise``), from which :func:`actuatorlab.excite.design.information` makes the Fisher
information.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import jax.numpy as jnp
import numpy as np

from ..errors import ActuatorlabError, ModelError
from ..logs.format import Channel, Trajectory
from ..models.actuator_model import check_robot, load
from ..models.params import neutral_params
from ..models.registry import get_model
from ..precision import physics_precision
from ..robots.loader import Robot, load_robot
from ..sim.arm import ArmInputs, initial_state, make_inputs
from ..sim.arm_data import _param_sets, evaluate_arm, per_joint_robot, robot_with_model
from ..sim.arm_native import native_model, rollout_native
from ..sim.rollout import make_batches, rollout_batch
from ..synth.model_truth import rollout_trajectory
from ..identify.arm_fit import fit_arm
from ..identify.fit import ParamSpace, fit_model, profile_for, substeps_for
from ..identify.identifiability import _jacobian
from ..identify.select import BUDGETS
from ..evaluate import summarize
from ..evaluate.replay import replay_batches
from .candidates import Limits, RobotLimits, Segment, _setup_tag

__all__ = ["ENCODER_NOISE", "ExciteBackend", "JointBackend", "RobotBackend", "design_robot_setup",
           "segment_trajectory", "load_arm_model"]

#: [rad] position noise of a 4096 counts/rev encoder: quantisation step / sqrt(12).
ENCODER_NOISE = 2 * math.pi / 4096 / math.sqrt(12.0)
#: [rad] encoder step of the synthetic logs (4096 counts/rev)
ENCODER_STEP = 2 * math.pi / 4096


class ExciteBackend(Protocol):
    """What the design needs from a simulator (module doc). ``simulate``: per segment q, dq,
    tau_motor ((T,) or (T, n)); ``screen``: (peak effort, None) or (peak, the rejection row) of a
    simulated candidate; ``command_files``: manifest key -> (file name, text) of a segment (key
    "file": the command CSV); ``jacobian``: (labels (P,), per segment d q / d log theta (T, n, P));
    ``sigma``: (n,) [rad | m] position noise per recorded joint."""

    def simulate(self, segments: list[Segment], params: dict) -> list[dict[str, np.ndarray]]: ...
    def screen(self, seg: Segment, sim: dict[str, np.ndarray]) -> tuple[Any, dict | None]: ...
    def jacobian(self, segments: list[Segment], params: dict) -> tuple[list[str], list[np.ndarray]]: ...
    @property
    def sigma(self) -> np.ndarray: ...
    @property
    def ratios(self) -> np.ndarray: ...
    @property
    def no_candidate(self) -> str: ...
    def head(self, labels: list[str]) -> dict[str, Any]: ...
    def trajectory(self, name: str, seg: Segment, q: np.ndarray, dq: np.ndarray) -> Trajectory: ...
    def fit_and_score(self, logs: list[Trajectory], held: list[Trajectory], truth: dict, seed: int,
                      dt: float) -> dict: ...
    def command_files(self, seg: Segment, lerobot: bool) -> dict[str, tuple[str, str]]: ...
    def file_entry(self, seg: Segment) -> dict[str, Any]: ...
    def manifest(self, segments: list[Segment]) -> dict[str, Any]: ...


def segment_trajectory(seg: Segment, *, position: np.ndarray | None = None,
                       velocity: np.ndarray | None = None, name: str | None = None) -> Trajectory:
    """A one-joint segment as a :class:`Trajectory` (position defaults to the target: a
    placeholder for simulation, or the measured response when given)."""
    T = seg.q.size
    if seg.setup is None:
        raise ActuatorlabError(f"excitation segment {seg.name}: a one-joint segment needs its setup")
    data = {"position_target": seg.q.copy(), "position": seg.q.copy() if position is None else np.asarray(position, float),
            "velocity": np.zeros(T) if velocity is None else np.asarray(velocity, float), "torque_enable": np.ones(T)}
    ch = {"position_target": Channel("rad", "commanded", source="excitation design"),
          "position": Channel("rad", "measured"), "velocity": Channel("rad/s", "estimated"),
          "torque_enable": Channel("bool", "commanded", "none")}
    return Trajectory(name or seg.name, np.arange(T) * seg.dt, data, ch, seg.setup,
                      conditions={"excitation": seg.tags.get("kind", "unknown"), "gain": _setup_tag(seg.setup),
                                  "load": f"{seg.setup.bench.get('mass', 0):g}kg", "session": "design"},
                      source_file=f"excitation:{seg.name}")


def _full(params: dict[str, float]) -> dict[str, Any]:
    p = neutral_params()
    p.update({k: float(v) for k, v in params.items()})
    return {k: jnp.asarray(v, dtype=jnp.float64) for k, v in p.items()}


@dataclass(frozen=True)
class JointBackend:
    """A one-joint bench on the fast one-joint scan (module doc).

    Attributes:
        model: registered model name (e.g. "m1").
        limits: the joint's safety limits (``effort_max`` [N.m] drops candidates; None: not checked).
        names: parameters to design for (default: the model's free parameters with positive values).
        noise: [rad] position noise of the encoder.
        budget: fit budget of :func:`~actuatorlab.excite.design.compare_to_naive` (``BUDGETS`` key).
    """

    model: str
    limits: Limits = Limits()
    names: tuple[str, ...] | None = None
    noise: float = ENCODER_NOISE
    budget: str = "quick"

    @property
    def sigma(self) -> np.ndarray:
        return np.array([self.noise])

    @property
    def ratios(self) -> np.ndarray:
        return np.ones(1)

    @property
    def no_candidate(self) -> str:
        return f"excitation: every candidate exceeds the effort limit {self.limits.effort_max:g} N.m"

    def _batches(self, segments: list[Segment]) -> tuple[list[Trajectory], list]:
        trajs = [segment_trajectory(s, name=f"{i:04d}_{s.name}") for i, s in enumerate(segments)]
        return trajs, make_batches(trajs, segments[0].dt)

    def simulate(self, segments: list[Segment], params: dict) -> list[dict[str, np.ndarray]]:
        """Closed-loop rollouts (from rest at the first target): q, dq, u, tau_motor (T,)."""
        spec = get_model(self.model)
        trajs, batches = self._batches(segments)
        out: dict[str, dict[str, np.ndarray]] = {}  # by trajectory name; every batch row is one of them
        for b in batches:
            o = rollout_batch(b.step_config(spec.compliant, substeps_for(spec), spec.thermal), _full(params), b.arrays())
            for i, name in enumerate(b.names):
                m = b.mask[i]
                out[name] = {k: np.asarray(getattr(o, k))[i][m] for k in ("q", "dq", "u", "tau_motor")}
        return [out[t.name] for t in trajs]

    def screen(self, seg: Segment, sim: dict[str, np.ndarray]) -> tuple[Any, dict | None]:
        peak = float(np.max(np.abs(sim["tau_motor"])))
        lim = self.limits.effort_max
        return peak, ({"name": seg.name, "peak_effort": peak, "limit": lim} if lim is not None and peak > lim else None)

    def jacobian(self, segments: list[Segment], params: dict) -> tuple[list[str], list[np.ndarray]]:
        spec = get_model(self.model)
        trajs, batches = self._batches(segments)
        names = list(self.names) if self.names is not None else None
        if names is None:
            space = ParamSpace.build(spec, batches, profile_for(batches))
            names = [n for n in space.names if float(params.get(n, 0.0)) > 0.0]
        if not names:
            raise ActuatorlabError(f"model {self.model}: no positive free parameter to design an excitation for")
        bad = [n for n in names if not float(params.get(n, 0.0)) > 0.0]
        if bad:
            raise ActuatorlabError(f"excitation: parameters {bad} need positive values (their information is "
                                   "computed on a log scale)")
        log0 = np.log(np.array([float(params[n]) for n in names]))
        cfgs = [(b, b.step_config(spec.compliant, substeps_for(spec), spec.thermal), b.arrays()) for b in batches]

        def residuals(log_theta):
            # concrete values only: central differences through the compiled rollout (2p replays)
            lt = np.asarray(log_theta, dtype=np.float64)
            p = _full({**params, **{n: float(np.exp(v)) for n, v in zip(names, lt)}})
            return jnp.concatenate([jnp.ravel(rollout_batch(cfg, p, arr).q) for _, cfg, arr in cfgs])

        _, J, _ = _jacobian(residuals, log0)
        rows: dict[str, np.ndarray] = {}
        off = 0
        for b, _, _ in cfgs:
            T = b.mask.shape[1]
            for i, name in enumerate(b.names):
                rows[name] = J[off + i * T: off + (i + 1) * T][b.mask[i]][:, None, :]
            off += b.size * T
        return list(names), [rows[t.name] for t in trajs]

    def head(self, labels: list[str]) -> dict[str, Any]:
        return {"model": self.model, "parameters": labels, "noise_rad": self.noise}

    def trajectory(self, name: str, seg: Segment, q: np.ndarray, dq: np.ndarray) -> Trajectory:
        return segment_trajectory(seg, position=np.round(q / ENCODER_STEP) * ENCODER_STEP, velocity=dq, name=name)

    def fit_and_score(self, logs: list[Trajectory], held: list[Trajectory], truth: dict, seed: int,
                      dt: float) -> dict:
        """Fit ``model`` (``budget``, ``seed``, control period ``dt`` [s]) and score it against ``truth``
        and on ``held``."""
        evals, starts, grad = BUDGETS[self.budget]
        fit = fit_model(logs, self.model, seed=seed, max_evals=evals, n_starts=starts, grad_steps=grad, dt=dt)
        keys = list(self.names or fit.space.names)
        err = {k: abs(fit.params[k] / truth[k] - 1.0) for k in keys if truth.get(k)}
        s = summarize(replay_batches(fit.model, fit.params, make_batches(held, dt)))
        return {"train_mae": fit.train_mae, "heldout_mae": s["position_mae"], "param_rel_error": err,
                "mean_param_rel_error": float(np.mean(list(err.values()))), "params": {k: fit.params[k] for k in keys}}

    def command_files(self, seg: Segment, lerobot: bool) -> dict[str, tuple[str, str]]:
        t = np.arange(seg.q.size) * seg.dt
        lines = ["time_s,target_rad,target_deg,torque_enable"] + [
            f"{ti:.6f},{qi:.9f},{math.degrees(qi):.6f},1" for ti, qi in zip(t, seg.q)]
        return {"file": (f"{seg.name}.csv", "\n".join(lines) + "\n")}

    def file_entry(self, seg: Segment) -> dict[str, Any]:
        return {"setup": seg.setup.to_dict() if seg.setup is not None else None}

    def manifest(self, segments: list[Segment]) -> dict[str, Any]:
        return {"limits": dataclasses.asdict(self.limits)}


def design_robot_setup(robot: Robot | str, model: str | None = None, params: dict | None = None) -> tuple[Robot, dict]:
    """(robot with ``model`` and one parameter set per joint, parameter sets name -> (n_joints,))
    from the robot config's nominal values, updated by ``params`` (name -> value for every joint,
    name -> (n_joints,) or name -> {joint: value}, as ``fit --robot`` writes)."""

    robot = load_robot(robot) if isinstance(robot, str) else robot
    if model is not None:
        robot = robot_with_model(robot, model)
    r, p = _param_sets(robot, params)
    if len(r.groups) != r.n_joints or any(len(g.joints) != 1 for g in r.groups):
        gidx = np.array([j.group for j in r.joints])
        p = {k: np.asarray(v, float)[gidx] for k, v in p.items()}
        r = per_joint_robot(r)
    return r, {k: np.asarray(v, float).copy() for k, v in p.items()}


def load_arm_model(path: str | Path, robot: str) -> tuple[str | None, dict]:
    """(model, params) of an analytic RUN/arm_model.json fitted for ``robot``."""

    m = load(path)
    if m.one_joint or m.kind != "analytic":
        raise ModelError(f"{path}: not an analytic actuatorlab arm model (fit it with `actuatorlab fit --robot`)")
    check_robot(m, robot)
    return m.model, dict(m.parameters)


def _stack_inputs(robot: Robot, segments: list[Segment]):
    T = {s.q.shape[0] for s in segments}
    if len(T) != 1:
        raise ModelError("excitation: every segment must have the same length")
    xs = [make_inputs(robot, s.q) for s in segments]
    s0 = [initial_state(robot, q=s.q[0]) for s in segments]
    return ArmInputs(*[np.stack(v) for v in zip(*xs)]), type(s0[0])(*[np.stack(v) for v in zip(*s0)])


@dataclass(frozen=True)
class RobotBackend:
    """A whole robot on native MuJoCo (module doc).

    Attributes:
        robot: the robot with one parameter set per joint (:func:`design_robot_setup`).
        names: parameters to design for, on every design joint.
        joints: the design joints (recorded, checked against their ranges).
        limits: per-joint safety limits (effort share, ranges).
        rel_step: relative step of the central differences on each parameter.
        max_envs: most environments of one batched native rollout.
        base: the robot as configured, whose model ``compare_to_naive`` fits per joint (default ``robot``).
        max_evals, horizon: CMA-ES evaluations and window length [steps] of those fits.
    """

    robot: Robot
    names: tuple[str, ...]
    joints: tuple[str, ...]
    limits: RobotLimits = RobotLimits()
    rel_step: float = 1e-2
    max_envs: int = 1024
    base: Robot | None = None
    max_evals: int = 200
    horizon: int = 50

    @property
    def sigma(self) -> np.ndarray:
        return ENCODER_NOISE * self.ratios

    @property
    def ratios(self) -> np.ndarray:
        return np.abs([j.output_to_joint for j in self.robot.joints])

    @property
    def no_candidate(self) -> str:
        return "excitation: every candidate exceeds an effort limit or leaves a joint range"

    def simulate(self, segments: list[Segment], params: dict) -> list[dict[str, np.ndarray]]:
        """Closed-loop native rollouts from rest at the first target: q, dq, tau_motor (T, n_joints)
        [rad | m, rad/s | m/s, N.m | N]."""
        with physics_precision():
            x, s0 = _stack_inputs(self.robot, segments)
            _, o = rollout_native(self.robot, params, x, s0)
            q, dq, tau = np.asarray(o.q), np.asarray(o.dq), np.asarray(o.tau_motor)
        return [{"q": q[i], "dq": dq[i], "tau_motor": tau[i]} for i in range(len(segments))]

    @functools.cached_property
    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """([N.m | N] (n,) largest peak motor effort, [rad | m] (n, 2) range; free for joints not designed)."""
        r, lim = self.robot, self.limits
        eff = np.array([lim.effort_share * j.effort_limit for j in r.joints])
        mech = np.array([lim.mechanical(r, j) if j in self.joints else (-np.inf, np.inf) for j in r.joint_names])
        return eff, mech

    def screen(self, seg: Segment, sim: dict[str, np.ndarray]) -> tuple[Any, dict | None]:
        r = self.robot
        eff, mech = self._bounds
        peak = np.max(np.abs(sim["tau_motor"]), axis=0)
        qmin, qmax = sim["q"].min(axis=0), sim["q"].max(axis=0)
        over = [j for j, pk, e in zip(r.joint_names, peak, eff) if pk > e]
        out = [j for j, a, b, (lo, hi) in zip(r.joint_names, qmin, qmax, mech) if a < lo or b > hi]
        peaks = dict(zip(r.joint_names, peak.tolist()))
        if over or out or not np.all(np.isfinite(sim["q"])):
            return peaks, {"name": seg.name, "over_effort": over, "out_of_range": out, "peak_effort": peaks}
        return peaks, None

    def jacobian(self, segments: list[Segment], params: dict) -> tuple[list[str], list[np.ndarray]]:
        robot = self.robot
        labels, cols = [], []
        for k in self.names:
            for j in self.joints:
                g = robot.index(j)
                if not float(params[k][g]) > 0:
                    raise ModelError(f"excitation: parameter {k!r} of joint {j!r} needs a positive value (its "
                                     f"information is computed on a log scale); got {float(params[k][g])!r}")
                labels.append(f"{k}@{j}")
                cols.append((k, g))
        P = len(cols)
        if P == 0:
            raise ModelError("excitation: no parameter to design for")
        pert = []  # 2 P parameter sets: +h and -h on log theta_p
        for k, g in cols:
            for sgn in (1.0, -1.0):
                p = {n: np.asarray(v, float).copy() for n, v in params.items()}
                p[k][g] *= math.exp(sgn * self.rel_step)
                pert.append(p)
        batch_p = {n: np.stack([p[n] for p in pert]) for n in params}
        J: list[np.ndarray] = []
        with physics_precision():
            x, s0 = _stack_inputs(robot, segments)
            model = native_model(robot, params)
            per = max(1, int(self.max_envs) // (2 * P))
            for c0 in range(0, len(segments), per):
                c1 = min(c0 + per, len(segments))
                C = c1 - c0
                rep = lambda v: np.repeat(v[c0:c1], 2 * P, axis=0)  # noqa: E731 - env e = c (2P) + perturbation
                bp = {n: np.tile(v, (C, 1)) for n, v in batch_p.items()}
                _, o = rollout_native(robot, bp, ArmInputs(*[rep(v) for v in x]), type(s0)(*[rep(v) for v in s0]),
                                      model=model)
                q = np.asarray(o.q).reshape((C, P, 2) + o.q.shape[1:])  # (C, P, +-, T, n)
                J.extend(np.moveaxis((q[:, :, 0] - q[:, :, 1]) / (2 * self.rel_step), 1, -1))  # (T, n, P) each
        return labels, J

    def head(self, labels: list[str]) -> dict[str, Any]:
        return {"robot": self.robot.name, "model": self.robot.groups[0].model, "parameters": labels,
                "joints": list(self.joints)}

    def trajectory(self, name: str, seg: Segment, q: np.ndarray, dq: np.ndarray) -> Trajectory:
        return rollout_trajectory(self.robot, name, seg.q, q, dq, list(self.joints), quantize=True,
                                  conditions={"excitation": seg.tags.get("family", "design")})

    def fit_and_score(self, logs: list[Trajectory], held: list[Trajectory], truth: dict, seed: int,
                      dt: float) -> dict:
        """Fit ``names`` per joint (:func:`~actuatorlab.identify.arm_fit.fit_arm`, CMA-ES through the
        native rollout) and score it against ``truth`` (name -> (n_joints,)) and by window replays
        (``horizon`` steps) of ``held`` (logs on the robot's control grid: ``dt`` unused)."""
        base = self.base or self.robot
        model = self.robot.groups[0].model
        names, joints = list(self.names), list(self.joints)
        fit = fit_arm(base, logs, model=model, params=names, per_joint=True, max_evals=self.max_evals,
                      horizon=self.horizon, seed=seed)
        err = {f"{k}@{j}": abs(fit["params"][k][j] / float(truth[k][self.robot.index(j)]) - 1.0)
               for k in names for j in joints}
        ev = evaluate_arm(base, fit["params"], held, horizons=(self.horizon,), model=model)
        return {"train_mae": fit["train_mae"], "heldout_mae": ev["position_mae"], "param_rel_error": err,
                "mean_param_rel_error": float(np.mean(list(err.values()))),
                "evaluations": fit["evaluations"], "fit_s": fit["wall_s"]}

    def command_files(self, seg: Segment, lerobot: bool) -> dict[str, tuple[str, str]]:
        """``NAME.csv`` (time_s, target_<joint> [rad | m] per robot joint, torque_enable), with
        ``lerobot`` also ``NAME.lerobot.csv`` (timestamp, frame_index, <joint>.pos [deg; m for a slide joint])."""
        r = self.robot
        t = np.arange(seg.q.shape[0]) * seg.dt
        head = ["time_s"] + [f"target_{j}" for j in r.joint_names] + ["torque_enable"]
        lines = [",".join(head)] + [f"{ti:.6f}," + ",".join(f"{v:.9f}" for v in row) + ",1" for ti, row in zip(t, seg.q)]
        files = {"file": (f"{seg.name}.csv", "\n".join(lines) + "\n")}
        if lerobot:
            slide = [j.joint_type == "prismatic" for j in r.joints]
            deg = np.where(slide, seg.q, np.degrees(seg.q))
            head = ["timestamp", "frame_index"] + [f"{j}.pos" for j in r.joint_names]
            lines = [",".join(head)] + [f"{ti:.6f},{k}," + ",".join(f"{v:.6f}" for v in row)
                                        for k, (ti, row) in enumerate(zip(t, deg))]
            files["lerobot"] = (f"{seg.name}.lerobot.csv", "\n".join(lines) + "\n")
        return files

    def file_entry(self, seg: Segment) -> dict[str, Any]:
        return {}

    def manifest(self, segments: list[Segment]) -> dict[str, Any]:
        r, limits, joints = self.robot, self.limits, list(self.joints)
        units = {j.name: ("m" if j.joint_type == "prismatic" else "rad") for j in r.joints}
        lims = {}
        for j in joints:
            lim = limits.joint_limits(r, j)
            lims[j] = {"range": list(limits.mechanical(r, j)), "safe_range": [lim.lo, lim.hi], "v_max": lim.v_max,
                       "effort_max": lim.effort_max, "duty": lim.duty}
        home = segments[0].q[0].tolist() if segments else None
        return {"robot": r.name, "joints": joints, "units": units, "control_dt": r.control_dt,
                "home": dict(zip(r.joint_names, home or [])),
                "limits": {**dataclasses.asdict(limits), "per_joint": lims}}

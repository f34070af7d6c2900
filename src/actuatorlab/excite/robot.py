"""Excitation design for a whole robot: safe multi-joint candidate commands, ranked by the Fisher
information they carry for the per-joint actuator parameters, and a greedy D-optimal set under a
time budget. The whole-robot counterpart of :mod:`actuatorlab.excite.joint` (same criterion,
same helpers: :func:`~actuatorlab.excite.joint.primitives`, ``_finish``,
:func:`~actuatorlab.excite.joint.logdet`, :func:`~actuatorlab.excite.joint.crlb`,
:func:`~actuatorlab.excite.joint.greedy_design`).

Candidates (each ``segment_s`` long on the robot's control grid; every one starts and ends at the
home pose, the model's ``qpos0`` clipped into the safe range; joints not moving hold home):

* ``single``: one joint moving, the others holding: sines at two amplitude / frequency pairs, a
  chirp, steps with rests (static friction, both directions of effort), reversals at 20 % and
  100 % of the speed limit (viscous vs Coulomb friction), a creep ramp (stick-slip);
* ``loaded``: one joint runs steps with rests while the other design joints hold a pose half-way
  to their range ends (alternating signs): gravity and the coupling load the moving joint;
* ``poses``: all design joints visit three random poses (inner 70 % of the ranges) and rest at
  each: static friction under different gravity loads (load-dependent friction);
* ``together``: all design joints move at once: random-phase multi-sines with disjoint harmonic
  sets per joint (uncorrelated joint motions; Swevers et al. 1997) at two amplitudes, and
  constant-speed sweeps with reversals at 30 % and 80 % of the speed limit.

**Safety limits** (:class:`RobotLimits`) per joint, by construction: targets inside
``[min + margin, max - margin]`` of the joint's MJCF range (ranges wider than +-pi around their
centre are narrowed to it; ``ranges`` overrides them), target speed at most ``v_max`` (and at most
the joint's configured velocity limit), at most ``duty`` of each segment in motion. Checked on the
nominal model: a candidate is dropped (and listed) when the predicted peak motor effort of any
joint exceeds ``effort_share`` of its configured effort limit, or a simulated joint leaves its
mechanical range. ``margin`` and ``v_max`` are servo-side [rad, rad/s]: behind a linkage
(``output_to_joint`` r) they become ``r`` times that in joint units (metres for a slide joint).

**Information.** The per-joint parameters theta (names x design joints; positive values, log
scale) of a model on the robot with one parameter set per joint
(:func:`~actuatorlab.identify.arm_fit.per_joint_robot`) enter the whole-robot closed-loop rollout
:func:`~actuatorlab.sim.arm_native.rollout_native` (the path ``fit --robot`` uses). The Jacobian
J_c = d q_c / d log theta ((T n) x P, every joint's position, holders included) comes from
central differences with a relative step ``rel_step``, all 2 P perturbations of a chunk of
candidates in one batched native rollout (one parameter set per environment). With encoder noise
sigma_j = 2 pi / 4096 / sqrt(12) |r_j| per joint::

    F_c = sum_{t, j} J_c[t, j, :]^T J_c[t, j, :] / sigma_j^2,     rse_i >= sqrt((F^-1)_ii)

and the design adds, greedily, the candidate that most increases log det of the summed
information until the budget is spent (repeats allowed).

Command files (:func:`write_robot_excitation`): ``NAME.csv`` per trajectory with ``time_s``, one
``target_<joint>`` column per robot joint [rad | m] and ``torque_enable``; optionally
``NAME.lerobot.csv`` (``timestamp``, ``frame_index`` and ``<joint>.pos`` in degrees, the action
names LeRobot's arms use); plus ``excitation.json`` (limits per joint, home pose, units, the design).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import mujoco
import numpy as np

from ..errors import ModelError
from ..logs.format import Trajectory
from ..models.registry import get_model
from ..precision import physics
from ..robots.loader import Robot, load_robot
from .joint import ENCODER_NOISE, EXCITATION_FORMAT, Limits, _finish, crlb, greedy_design, logdet, primitives, ranked_candidates
from ..sim.arm_data import _param_sets, evaluate_arm, model_params, per_joint_robot, robot_with_model
from ..sim.arm import ArmInputs, initial_state, make_inputs
from ..sim.arm_native import native_model, rollout_native
from ..synth.model_truth import rollout_trajectory
from ..identify.arm_fit import fit_arm
from ..files import atomic_write
from ..models.actuator_model import check_robot, load
from ..errors import UnknownNameError

__all__ = ["RobotLimits", "RobotSegment", "FAMILIES", "SINGLE_PRIMITIVES", "design_robot_setup", "robot_candidates",
           "simulate_robot", "robot_information", "design_robot", "segment_logs", "compare_robot_to_naive",
           "write_robot_excitation", "excite_robot"]

#: candidate families (module doc)
FAMILIES: tuple[str, ...] = ("single", "loaded", "poses", "together")
#: the single-joint motions of :func:`~actuatorlab.excite.joint.primitives` used per joint
SINGLE_PRIMITIVES: tuple[str, ...] = ("sine_a0.6_f0.5", "sine_a0.25_f1.5", "chirp_a0.8", "steps_a0.5",
                                      "reversals_v0.2", "reversals_v1", "creep")
#: [rad] largest half-range used around a joint's range centre (multi-turn joints: one turn)
MAX_HALF = math.pi


@dataclass(frozen=True)
class RobotLimits:
    """Safety limits of every joint (module doc).

    Attributes:
        margin: [rad, servo side] kept free at both ends of each joint's range.
        v_max: [rad/s, servo side] largest target speed (capped by each joint's velocity_limit).
        effort_share: largest predicted peak motor effort as a share of each joint's effort_limit.
        duty: largest share of a segment in motion, in (0, 1].
        ranges: (joint, min, max) [rad | m] replacing the MJCF range of these joints.
    """

    margin: float = 0.1
    v_max: float = 3.0
    effort_share: float = 0.8
    duty: float = 0.8
    ranges: tuple[tuple[str, float, float], ...] = ()

    def mechanical(self, robot: Robot, joint: str) -> tuple[float, float]:
        """[rad | m] (min, max): the override or the MJCF range of ``joint``."""
        for n, lo, hi in self.ranges:
            if n == joint:
                return float(lo), float(hi)
        m = robot.model()
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, joint)
        if not m.jnt_limited[jid]:
            raise ModelError(f"{robot.name}: joint {joint!r} has no range in its MJCF; give one "
                             f"(--joint-range {joint}=MIN,MAX)")
        return float(m.jnt_range[jid][0]), float(m.jnt_range[jid][1])

    def joint_limits(self, robot: Robot, joint: str) -> Limits:
        """The single-joint :class:`~actuatorlab.excite.joint.Limits` of ``joint`` (joint units)."""
        if not (self.effort_share > 0 and math.isfinite(self.effort_share)):
            raise ModelError("excitation limits: effort_share must be > 0")
        j = robot.joint(joint)
        r = abs(j.output_to_joint)
        lo, hi = self.mechanical(robot, joint)
        c, half = 0.5 * (lo + hi), min(0.5 * (hi - lo), MAX_HALF * r)
        return Limits(q_min=c - half, q_max=c + half, margin=self.margin * r, v_max=min(self.v_max * r, j.velocity_limit),
                      duty=self.duty, effort_max=self.effort_share * j.effort_limit)


@dataclass(frozen=True, eq=False)
class RobotSegment:
    """One candidate command: ``q`` (T, n_joints) [rad | m] targets in robot joint order on the
    grid k dt, torque enabled throughout; ``tags`` describe it (family, kind, moving joints...)."""

    name: str
    q: np.ndarray
    dt: float
    tags: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return self.q.shape[0] * self.dt


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


def _home(robot: Robot, lims: dict[str, Limits]) -> np.ndarray:
    home = np.asarray(robot.model().qpos0, float)[robot.qpos_adr].copy()
    for j, lim in lims.items():
        home[robot.index(j)] = float(np.clip(home[robot.index(j)], lim.lo, lim.hi))
    return home


def _gravity(robot: Robot, q: np.ndarray) -> np.ndarray:
    """[N.m | N] (n,) static gravity (and equality) load of every joint at pose q (bias force)."""

    m = robot.model()
    d = mujoco.MjData(m)
    s = initial_state(robot, q=q)
    d.qpos[:], d.qvel[:] = s.qpos, 0.0
    mujoco.mj_forward(m, d)
    return np.asarray(d.qfrc_bias, float)[robot.dof_adr].copy()


def robot_candidates(robot: Robot, joints: Iterable[str] | None = None, limits: RobotLimits = RobotLimits(), *,
                     segment_s: float = 3.0, families: Iterable[str] = FAMILIES, seed: int = 0,
                     single: Iterable[str] = SINGLE_PRIMITIVES) -> list[RobotSegment]:
    """The candidate commands of the module doc for the design ``joints`` (default all)."""
    joints = list(joints or robot.joint_names)
    for j in joints:
        robot.joint(j)  # unknown names list what exists
    families = tuple(families)
    bad = [f for f in families if f not in FAMILIES]
    if bad:
        raise UnknownNameError("excitation family", bad[0], FAMILIES)
    dt = robot.control_dt
    T = int(round(segment_s / dt))
    if T < 20:
        raise ModelError("excitation: segment_s must be at least 20 control periods")
    lims = {j: limits.joint_limits(robot, j) for j in joints}
    n_move = int(math.floor(limits.duty * T))
    home = _home(robot, lims)
    idx = {j: robot.index(j) for j in joints}
    out: list[RobotSegment] = []

    def add(name: str, moves: dict[str, np.ndarray], tags: dict) -> None:
        q = np.tile(home, (T, 1))
        for j, qm in moves.items():
            q[:, idx[j]] = _finish(qm, T, dt, lims[j], rest=home[idx[j]])
        if any(np.allclose(q, o.q) for o in out):
            return  # the speed cap can make two commands the same: keep one
        out.append(RobotSegment(name, q, dt, {**tags, "moving": list(moves)}))

    single = tuple(single)
    if "single" in families:
        for j in joints:
            for name, qm, tags in primitives(lims[j], n_move, dt):
                if name in single:
                    add(f"{name}@{j}", {j: qm}, {**tags, "family": "single"})
    t = np.arange(n_move) * dt
    if "loaded" in families and len(joints) > 1:
        for i, j in enumerate(joints):
            steps = next(q for n, q, _ in primitives(lims[j], n_move, dt) if n == "steps_a0.5")
            moves = {j: steps}
            pose = home.copy()
            for k, o in enumerate(x for x in joints if x != j):
                lim = lims[o]
                pose[idx[o]] = lim.centre + (1 if (i + k) % 2 == 0 else -1) * 0.5 * lim.half
                moves[o] = np.full(n_move, pose[idx[o]])
            add(f"loaded@{j}", moves, {"family": "loaded", "kind": "steps",
                                       "gravity": dict(zip(robot.joint_names, _gravity(robot, pose).tolist()))})
    if "poses" in families:
        for k in range(3):
            rng = np.random.default_rng([int(seed), 1000 + k])
            poses = [{j: lims[j].centre + 0.7 * lims[j].half * rng.uniform(-1, 1) for j in joints} for _ in range(3)]
            hold = int(math.ceil(n_move / 3))
            moves = {j: np.repeat([p[j] for p in poses], hold)[:n_move] for j in joints}
            grav = []
            for p in poses:
                q = home.copy()
                for j in joints:
                    q[idx[j]] = p[j]
                grav.append(_gravity(robot, q).tolist())
            add(f"poses{k}", moves, {"family": "poses", "kind": "poses", "poses": poses, "hold_s": hold * dt,
                                     "gravity": grav})
    if "together" in families:
        f0 = 1.0 / max(n_move * dt, dt)
        n_d = len(joints)
        for a in (0.4, 0.8):
            for k in range(2):
                rng = np.random.default_rng([int(seed), 2000 + k])
                moves, freqs = {}, {}
                for i, j in enumerate(joints):
                    lim = lims[j]
                    f = f0 * np.array([i + 1 + m * n_d for m in range(3)], float)
                    w = 1.0 / (1.0 + np.arange(3))  # amplitude falls with the harmonic
                    # sum of amplitudes <= a h and sum of speed amplitudes <= v_max
                    s = min(a * lim.half / w.sum(), lim.v_max / float(np.sum(2 * np.pi * f * w)))
                    ph = rng.uniform(0, 2 * np.pi, 3)
                    moves[j] = lim.centre + np.sum(s * w[:, None] * np.sin(2 * np.pi * f[:, None] * t + ph[:, None]), axis=0)
                    freqs[j] = f.tolist()
                add(f"multisine_a{a:g}_s{k}", moves, {"family": "together", "kind": "multisine", "amplitude": a,
                                                      "frequencies_hz": freqs})
        for sp in (0.3, 0.8):
            moves = {}
            for i, j in enumerate(joints):
                lim = lims[j]
                v = sp * lim.v_max
                period = 4 * 0.8 * lim.half / v
                moves[j] = lim.centre + 0.8 * lim.half * (2 / math.pi) * np.arcsin(
                    np.sin(2 * math.pi * t / period + 2 * math.pi * i / max(n_d, 1)))
            add(f"reversals_v{sp:g}@all", moves, {"family": "together", "kind": "reversals", "speed_share": sp})
    return out


def _stack_inputs(robot: Robot, segments: list[RobotSegment]):
    T = {s.q.shape[0] for s in segments}
    if len(T) != 1:
        raise ModelError("excitation: every segment must have the same length")
    xs = [make_inputs(robot, s.q) for s in segments]
    s0 = [initial_state(robot, q=s.q[0]) for s in segments]
    return ArmInputs(*[np.stack(v) for v in zip(*xs)]), type(s0[0])(*[np.stack(v) for v in zip(*s0)])


@physics
def simulate_robot(robot: Robot, segments: list[RobotSegment], params: dict) -> dict[str, np.ndarray]:
    """Closed-loop native rollouts of the segments from rest at their first target: q, dq,
    tau_motor (B, T, n_joints) [rad | m, rad/s | m/s, N.m | N]."""

    x, s0 = _stack_inputs(robot, segments)
    _, o = rollout_native(robot, params, x, s0)
    return {"q": np.asarray(o.q), "dq": np.asarray(o.dq), "tau_motor": np.asarray(o.tau_motor)}


@physics
def robot_information(robot: Robot, segments: list[RobotSegment], params: dict, names: Iterable[str],
                      joints: Iterable[str], *, rel_step: float = 1e-2, max_envs: int = 1024) -> tuple[list[str], np.ndarray]:
    """(labels "name@joint" (P,), F (n_segments, P, P)): Fisher information of each segment for the
    log of each named parameter of each design joint (module doc). ``robot`` has one parameter set
    per joint (:func:`design_robot_setup`); ``params`` name -> (n_joints,) positive where designed."""

    names, joints = list(names), list(joints)
    labels, cols = [], []
    for k in names:
        for j in joints:
            g = robot.index(j)
            if not float(params[k][g]) > 0:
                raise ModelError(f"excitation: parameter {k!r} of joint {j!r} needs a positive value (its "
                                 f"information is computed on a log scale); got {float(params[k][g])!r}")
            labels.append(f"{k}@{j}")
            cols.append((k, g))
    P = len(cols)
    if P == 0:
        raise ModelError("excitation: no parameter to design for")
    sigma = ENCODER_NOISE * np.abs([j.output_to_joint for j in robot.joints])
    pert = []  # 2 P parameter sets: +h and -h on log theta_p
    for k, g in cols:
        for sgn in (1.0, -1.0):
            p = {n: np.asarray(v, float).copy() for n, v in params.items()}
            p[k][g] *= math.exp(sgn * rel_step)
            pert.append(p)
    batch_p = {n: np.stack([p[n] for p in pert]) for n in params}
    x, s0 = _stack_inputs(robot, segments)
    model = native_model(robot, params)
    per = max(1, int(max_envs) // (2 * P))
    F = np.zeros((len(segments), P, P))
    for c0 in range(0, len(segments), per):
        c1 = min(c0 + per, len(segments))
        C = c1 - c0
        rep = lambda v: np.repeat(v[c0:c1], 2 * P, axis=0)  # noqa: E731 - env e = c (2P) + perturbation
        bp = {n: np.tile(v, (C, 1)) for n, v in batch_p.items()}
        _, o = rollout_native(robot, bp, ArmInputs(*[rep(v) for v in x]), type(s0)(*[rep(v) for v in s0]),
                              model=model)
        q = np.asarray(o.q).reshape((C, P, 2) + o.q.shape[1:])  # (C, P, +-, T, n)
        J = (q[:, :, 0] - q[:, :, 1]) / (2 * rel_step) / sigma  # (C, P, T, n) in noise units
        F[c0:c1] = np.einsum("cptn,cqtn->cpq", J, J)
    return labels, F


@physics
def design_robot(robot: Robot, segments: list[RobotSegment], params: dict, budget_s: float, names: Iterable[str],
                 joints: Iterable[str], limits: RobotLimits = RobotLimits(), *, rel_step: float = 1e-2) -> dict[str, Any]:
    """Check the candidates on the nominal model, rank them by information and pick a D-optimal set
    within ``budget_s`` [s] (greedy, with repeats).

    Returns a JSON-serializable dict: ``parameters`` (labels name@joint); ``candidates`` (name,
    tags, log det F, CRLB relative stderr per label, peak effort per joint, rank; best first);
    ``rejected`` (over an effort limit or out of a range, with the reason); ``selected`` (names
    in pick order); ``design`` (log det, CRLB and duration of the set).
    """
    names, joints = list(names), list(joints)
    sims = simulate_robot(robot, segments, params)
    eff = np.array([limits.effort_share * j.effort_limit for j in robot.joints])
    mech = np.array([limits.mechanical(robot, j) if j in joints else (-np.inf, np.inf) for j in robot.joint_names])
    ok, rejected = [], []
    for i, s in enumerate(segments):
        peak = np.max(np.abs(sims["tau_motor"][i]), axis=0)
        qmin, qmax = sims["q"][i].min(axis=0), sims["q"][i].max(axis=0)
        over = [j for j, pk, e in zip(robot.joint_names, peak, eff) if pk > e]
        out = [j for j, a, b, (lo, hi) in zip(robot.joint_names, qmin, qmax, mech) if a < lo or b > hi]
        if over or out or not np.all(np.isfinite(sims["q"][i])):
            rejected.append({"name": s.name, "over_effort": over, "out_of_range": out,
                             "peak_effort": dict(zip(robot.joint_names, peak.tolist()))})
        else:
            ok.append((s, dict(zip(robot.joint_names, peak.tolist()))))
    if not ok:
        raise ModelError("excitation: every candidate exceeds an effort limit or leaves a joint range")
    labels, F = robot_information(robot, [s for s, _ in ok], params, names, joints, rel_step=rel_step)
    rows = ranked_candidates(ok, F, labels)
    picked, total = greedy_design(F, int(math.floor(budget_s / ok[0][0].duration + 1e-9)))
    return {"robot": robot.name, "model": robot.groups[0].model, "parameters": labels, "joints": joints,
            "budget_s": budget_s, "candidates": sorted(rows, key=lambda r: r["rank"]), "rejected": rejected,
            "selected": [ok[i][0].name for i in picked],
            "design": {"logdet": logdet(total), "crlb_relative_stderr": dict(zip(labels, crlb(total).tolist())),
                       "duration_s": sum(ok[i][0].duration for i in picked)}}


@physics
def segment_logs(robot: Robot, segments: list[RobotSegment], truth: dict, joints: Iterable[str], *,
                 quantize: bool = True, noise: float = 0.0, seed: int = 0, prefix: str = "") -> list[Trajectory]:
    """The segments run on a virtual robot whose per-joint parameters are ``truth`` (``robot``
    with one set per joint): multi-joint logs (docs/synth.md convention) recording ``joints``,
    positions with white Gaussian noise of ``noise`` [rad] (seeded; times |output_to_joint|
    behind a linkage), then quantised to the 4096 counts/rev encoder."""

    sims = simulate_robot(robot, segments, truth)
    rng = np.random.default_rng(seed)
    r = np.abs([j.output_to_joint for j in robot.joints])
    out = []
    for i, s in enumerate(segments):
        q = sims["q"][i] + (rng.normal(0.0, noise, sims["q"][i].shape) * r if noise > 0 else 0.0)
        out.append(rollout_trajectory(robot, f"{prefix}{i:02d}_{s.name}", s.q, q, sims["dq"][i], list(joints),
                                      quantize=quantize, conditions={"excitation": s.tags.get("family", "design")}))
    return out


def compare_robot_to_naive(robot: Robot, model: str, designed: list[RobotSegment],
                           naive: dict[str, list[RobotSegment]], heldout: list[RobotSegment], truth: dict,
                           names: Iterable[str], joints: Iterable[str], *, max_evals: int = 200, horizon: int = 50,
                           seed: int = 0, noise: float = 0.0) -> dict[str, Any]:
    """Fit ``names`` per joint (:func:`~actuatorlab.identify.arm_fit.fit_arm`, CMA-ES through the
    native rollout, same budget and seed for every set) to synthetic logs of the designed set and of
    each naive set (same truth), and score each fit: relative parameter error against the truth on
    the design joints, and the position MAE [rad] of window replays (``horizon`` steps) of held-out
    segments no set contains. ``robot``: the base robot (one set per joint is made here); ``truth``
    name -> (n_joints,) for :func:`design_robot_setup`'s robot; ``noise`` [rad]: white position
    noise of the fitted logs (seed ``seed``; the held-out logs are only quantised, so that their
    MAE measures the model's error). Returns label -> row."""

    names, joints = list(names), list(joints)
    r_pj, _ = design_robot_setup(robot, model)
    held = segment_logs(r_pj, heldout, truth, joints, prefix="held")
    rows = {}
    for label, segs in {"designed": designed, **naive}.items():
        logs = segment_logs(r_pj, segs, truth, joints, noise=noise, seed=seed)
        fit = fit_arm(robot, logs, model=model, params=names, per_joint=True, max_evals=max_evals, horizon=horizon,
                      seed=seed)
        err = {f"{k}@{j}": abs(fit["params"][k][j] / float(truth[k][r_pj.index(j)]) - 1.0) for k in names for j in joints}
        ev = evaluate_arm(robot, fit["params"], held, horizons=(horizon,), model=model)
        rows[label] = {"segments": [s.name for s in segs], "duration_s": sum(s.duration for s in segs),
                       "train_mae": fit["train_mae"], "heldout_mae": ev["position_mae"], "param_rel_error": err,
                       "mean_param_rel_error": float(np.mean(list(err.values()))),
                       "evaluations": fit["evaluations"], "fit_s": fit["wall_s"]}
    return rows


def write_robot_excitation(out: str | Path, robot: Robot, segments: list[RobotSegment], limits: RobotLimits,
                           joints: Iterable[str], report: dict[str, Any] | None = None, *,
                           lerobot: bool = False) -> list[Path]:
    """Write each segment as ``NAME.csv`` (time_s, target_<joint> [rad | m] per robot joint,
    torque_enable), with ``lerobot`` also ``NAME.lerobot.csv`` (timestamp, frame_index,
    <joint>.pos [deg; m for a slide joint]), and ``excitation.json``; atomic writes."""

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    joints = list(joints)
    slide = [j.joint_type == "prismatic" for j in robot.joints]
    units = {j.name: ("m" if s else "rad") for j, s in zip(robot.joints, slide)}
    paths = []
    for s in segments:
        t = np.arange(s.q.shape[0]) * s.dt
        head = ["time_s"] + [f"target_{j}" for j in robot.joint_names] + ["torque_enable"]
        lines = [",".join(head)] + [f"{ti:.6f}," + ",".join(f"{v:.9f}" for v in row) + ",1" for ti, row in zip(t, s.q)]
        paths.append(atomic_write(out / f"{s.name}.csv", "\n".join(lines) + "\n"))
        if lerobot:
            deg = np.where(slide, s.q, np.degrees(s.q))
            head = ["timestamp", "frame_index"] + [f"{j}.pos" for j in robot.joint_names]
            lines = [",".join(head)] + [f"{ti:.6f},{k}," + ",".join(f"{v:.6f}" for v in row)
                                        for k, (ti, row) in enumerate(zip(t, deg))]
            paths.append(atomic_write(out / f"{s.name}.lerobot.csv", "\n".join(lines) + "\n"))
    lims = {}
    for j in joints:
        lim = limits.joint_limits(robot, j)
        lims[j] = {"range": list(limits.mechanical(robot, j)), "safe_range": [lim.lo, lim.hi], "v_max": lim.v_max,
                   "effort_max": lim.effort_max, "duty": lim.duty}
    home = segments[0].q[0].tolist() if segments else None
    manifest = {"format": EXCITATION_FORMAT, "format_version": "1", "robot": robot.name, "joints": joints,
                "units": units, "control_dt": robot.control_dt, "home": dict(zip(robot.joint_names, home or [])),
                "limits": {**dataclasses.asdict(limits), "per_joint": lims},
                "files": [{"file": f"{s.name}.csv", **({"lerobot": f"{s.name}.lerobot.csv"} if lerobot else {}),
                           "duration_s": s.duration, "dt": s.dt, "tags": s.tags} for s in segments],
                "design": report}
    paths.append(atomic_write(out / "excitation.json", json.dumps(manifest, indent=2, default=float) + "\n"))
    return paths


def _load_arm_model(path: str | Path, robot: str) -> tuple[str | None, dict]:
    """(model, params) of an analytic RUN/arm_model.json fitted for ``robot``."""

    m = load(path)
    if m.one_joint or m.kind != "analytic":
        raise ModelError(f"{path}: not an analytic actuatorlab arm model (fit it with `actuatorlab fit --robot`)")
    check_robot(m, robot)
    return m.model, dict(m.parameters)


@physics
def excite_robot(out: str | Path, robot: str, *, model_file: str | Path | None = None, model: str | None = None,
                 params: dict[str, float] | None = None, names: Iterable[str] | None = None,
                 joints: Iterable[str] | None = None, limits: RobotLimits = RobotLimits(), segment_s: float = 3.0,
                 budget_s: float = 12.0, families: Iterable[str] = FAMILIES, write_all: bool = False,
                 lerobot: bool = False, seed: int = 0) -> dict[str, Any]:
    """Design a whole-robot excitation and write it to ``out`` (``actuatorlab excite --robot``).

    The model and its per-joint parameters come from ``model_file`` (an analytic arm_model.json of
    ``fit --robot``), else from the robot config (``model`` replaces its model), updated by
    ``params`` (name -> value on every joint). ``names``: parameters to design for (default: the
    model's free parameters minus R, as ``fit --robot`` fits them, that have positive values).
    Returns the design report (plus ``wall_s``)."""
    import time


    t0 = time.perf_counter()
    base = load_robot(robot)
    fitted: dict = {}
    if model_file is not None:
        m_file, fitted = _load_arm_model(model_file, base.name)
        model = model or m_file
    r, p = design_robot_setup(base, model, fitted)
    for k, v in (params or {}).items():
        if k not in p:
            raise UnknownNameError("parameter", k, tuple(p))
        p[k][:] = float(v)
    joints = list(joints or base.joint_names)
    spec_model = r.groups[0].model
    if names is None:
        names = [k for k in model_params(r, spec_model, fixed=("R",))
                 if all(float(p[k][r.index(j)]) > 0 for j in joints)]
    names = list(names)
    segs = robot_candidates(r, joints, limits, segment_s=segment_s, families=families, seed=seed)
    rep = design_robot(r, segs, p, budget_s, names, joints, limits)
    skipped = [k for k in model_params(r, spec_model, fixed=("R",)) if k not in names]
    rep.update({"model": get_model(spec_model).name, "skipped_parameters": skipped,
                "model_file": None if model_file is None else str(model_file)})
    by = {s.name: s for s in segs}
    chosen = segs if write_all else [by[n] for n in dict.fromkeys(rep["selected"])]
    rep["wall_s"] = time.perf_counter() - t0
    write_robot_excitation(out, r, chosen, limits, joints, rep, lerobot=lerobot)
    return rep

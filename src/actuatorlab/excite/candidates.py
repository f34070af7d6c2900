"""Excitation candidates: safe commands for one joint or a whole robot (the first step of the
design; :mod:`actuatorlab.excite.information` ranks them, :mod:`actuatorlab.excite.design` picks).

One joint (:func:`candidates`, each ``segment_s`` long on the control grid ``dt``; every one
starts and ends at rest in the middle of the range):

* ``sine``: amplitude x frequency grid (what a first identification usually runs);
* ``chirp``: frequency rising 0.2 Hz -> f1 at two amplitudes (inertia and the firmware's bandwidth);
* ``steps``: steps of several sizes, each followed by a rest (static friction, breakaway, both
  directions of effort);
* ``reversals``: constant-speed sweeps with velocity reversals at several speeds (viscous vs
  Coulomb friction, direction of effort);
* ``creep``: very slow ramps (stick-slip, static friction).

Each runs under every given setup (firmware gain, bench load): gain and load are dimensions of the
design too.

A whole robot (:func:`robot_candidates`, each ``segment_s`` long on the robot's control grid;
every one starts and ends at the home pose, the model's ``qpos0`` clipped into the safe range;
joints not moving hold home):

* ``single``: one joint moving, the others holding: the one-joint motions of
  :data:`SINGLE_PRIMITIVES` (sines at two amplitude / frequency pairs, a chirp, steps with rests,
  reversals at 20 % and 100 % of the speed limit, a creep ramp);
* ``loaded``: one joint runs steps with rests while the other design joints hold a pose half-way
  to their range ends (alternating signs): gravity and the coupling load the moving joint;
* ``poses``: all design joints visit three random poses (inner 70 % of the ranges) and rest at
  each: static friction under different gravity loads (load-dependent friction);
* ``together``: all design joints move at once: random-phase multi-sines with disjoint harmonic
  sets per joint (uncorrelated joint motions; Swevers et al. 1997) at two amplitudes, and
  constant-speed sweeps with reversals at 30 % and 80 % of the speed limit.

**Safety limits** hold by construction: :class:`Limits` for one joint (targets in
``[q_min + margin, q_max - margin]``, target speed at most ``v_max``, a rest share of at least
``1 - duty`` of each segment); :class:`RobotLimits` is their per-joint form (the joint's MJCF range,
narrowed to +-pi around its centre when wider, or ``ranges``; ``v_max`` also capped by the joint's
velocity limit; ``margin`` and ``v_max`` servo-side: behind a linkage ``output_to_joint`` r they
become r times that in joint units). The effort limit is checked on the nominal model by the design.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

import mujoco
import numpy as np

from ..errors import ActuatorlabError, ModelError, UnknownNameError
from ..logs.format import Setup
from ..robots.loader import Robot
from ..sim.arm import initial_state

__all__ = ["Limits", "RobotLimits", "Segment", "FAMILIES", "SINGLE_PRIMITIVES", "primitives", "candidates",
           "robot_candidates"]

#: candidate families of a whole robot (module doc)
FAMILIES: tuple[str, ...] = ("single", "loaded", "poses", "together")
#: the one-joint motions of :func:`primitives` a whole robot runs per joint
SINGLE_PRIMITIVES: tuple[str, ...] = ("sine_a0.6_f0.5", "sine_a0.25_f1.5", "chirp_a0.8", "steps_a0.5",
                                      "reversals_v0.2", "reversals_v1", "creep")
#: [rad] largest half-range used around a joint's range centre (multi-turn joints: one turn)
MAX_HALF = math.pi


@dataclass(frozen=True)
class Limits:
    """Safety limits every command respects.

    Attributes:
        q_min, q_max: [rad] mechanical range of the joint (output side).
        margin: [rad] kept free at both ends of the range.
        v_max: [rad/s] largest speed of the target.
        duty: largest share of a segment in motion (the rest is spent at rest), in (0, 1].
        effort_max: [N.m] largest motor effort the nominal model may predict (None: not checked).
    """

    q_min: float = -1.5
    q_max: float = 1.5
    margin: float = 0.1
    v_max: float = 3.0
    duty: float = 0.8
    effort_max: float | None = None

    def __post_init__(self) -> None:
        lo, hi = self.q_min + self.margin, self.q_max - self.margin
        if not all(math.isfinite(x) for x in (self.q_min, self.q_max, self.margin, self.v_max)):
            raise ActuatorlabError("excitation limits must be finite numbers")
        if hi <= lo:
            raise ActuatorlabError(f"excitation limits: range [{self.q_min:g}, {self.q_max:g}] rad with margin "
                                   f"{self.margin:g} rad leaves no room to move")
        if self.v_max <= 0 or not 0 < self.duty <= 1:
            raise ActuatorlabError("excitation limits: v_max must be > 0 [rad/s] and duty in (0, 1]")

    @property
    def lo(self) -> float:
        return self.q_min + self.margin

    @property
    def hi(self) -> float:
        return self.q_max - self.margin

    @property
    def centre(self) -> float:
        return 0.5 * (self.lo + self.hi)

    @property
    def half(self) -> float:
        return 0.5 * (self.hi - self.lo)



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
        """The one-joint :class:`Limits` of ``joint`` (joint units)."""
        if not (self.effort_share > 0 and math.isfinite(self.effort_share)):
            raise ModelError("excitation limits: effort_share must be > 0")
        j = robot.joint(joint)
        r = abs(j.output_to_joint)
        lo, hi = self.mechanical(robot, joint)
        c, half = 0.5 * (lo + hi), min(0.5 * (hi - lo), MAX_HALF * r)
        return Limits(q_min=c - half, q_max=c + half, margin=self.margin * r, v_max=min(self.v_max * r, j.velocity_limit),
                      duty=self.duty, effort_max=self.effort_share * j.effort_limit)



@dataclass(frozen=True, eq=False)
class Segment:
    """One candidate command, torque enabled throughout, on the grid k dt: ``q`` [rad | m] targets,
    (T,) for one joint (run under ``setup``, its bench) or (T, n_joints) in robot joint order
    (``setup`` None); ``tags`` describe it (kind, family, amplitude, frequency, moving joints...)."""

    name: str
    q: np.ndarray
    dt: float
    setup: Setup | None = None
    tags: dict[str, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return self.q.shape[0] * self.dt


def _rate_limit(q: np.ndarray, q0: float, dt: float, v_max: float, end: float | None = None) -> np.ndarray:
    """Follow ``q`` with a speed of at most v_max [rad/s] from q0 (a causal slew limiter); with
    ``end``, also inside the band |x_k - end| <= (T - 1 - k) v_max dt, so that it is back at
    ``end`` on the last sample (clipping into the shrinking band never moves more than one step)."""
    out = np.empty_like(q)
    x, step, T = q0, v_max * dt, q.size
    for k, target in enumerate(q):
        x += float(np.clip(target - x, -step, step))
        if end is not None:
            r = (T - 1 - k) * step
            x = min(max(x, end - r), end + r)
        out[k] = x
    return out


def _finish(q_move: np.ndarray, T: int, dt: float, lim: Limits, rest: float | None = None) -> np.ndarray:
    """Limits applied: clip to the range, slew-limit, rests at both ends so that motion <= duty.

    The segment starts and ends at ``rest`` [rad] (default: the middle of the range), every step
    within v_max dt (:func:`_rate_limit` with ``end``)."""
    rest = lim.centre if rest is None else float(np.clip(rest, lim.lo, lim.hi))
    n_move = min(q_move.size, int(math.floor(lim.duty * T)))
    rest0 = (T - n_move) // 2
    q = np.full(T, rest)
    q[rest0:rest0 + n_move] = np.clip(q_move[:n_move], lim.lo, lim.hi)
    q = _rate_limit(q, rest, dt, lim.v_max, end=rest)  # the rest after the motion brings it back
    return np.clip(q, lim.lo, lim.hi)


def primitives(lim: Limits, n_move: int, dt: float, centre: float | None = None) -> list[tuple[str, np.ndarray, dict]]:
    """The single-joint motions of the module doc, (name, q (n_move,) [rad], tags), around
    ``centre`` (default the middle of the range) before the limits are applied (:func:`_finish`)."""
    t = np.arange(n_move) * dt
    c, h = (lim.centre if centre is None else centre), lim.half
    prims: list[tuple[str, np.ndarray, dict]] = []
    for a in (0.25, 0.6, 0.95):
        for f in (0.5, 1.5, 3.0):
            amp = min(a * h, lim.v_max / (2 * math.pi * f))  # speed cap of the sine
            prims.append((f"sine_a{a:g}_f{f:g}", c + amp * np.sin(2 * math.pi * f * t),
                          {"kind": "sine", "amplitude_rad": amp, "frequency_hz": f}))
    dur = max(t[-1], dt)
    for a in (0.3, 0.8):
        f1 = 4.0
        phase = 2 * math.pi * (0.2 * t + 0.5 * (f1 - 0.2) / dur * t**2)
        prims.append((f"chirp_a{a:g}", c + a * h * np.sin(phase) * np.minimum(1.0, t / 0.2),
                      {"kind": "chirp", "amplitude_rad": a * h, "f0_hz": 0.2, "f1_hz": f1}))
    for a in (0.2, 0.5, 0.9):
        hold = max(1, int(0.4 / dt))
        levels = c + a * h * np.array([1, 0, -1, 0, 1, -1, 0])
        q = np.repeat(levels, hold)[:n_move]
        prims.append((f"steps_a{a:g}", np.pad(q, (0, max(0, n_move - q.size)), mode="edge"),
                      {"kind": "steps", "amplitude_rad": a * h, "hold_s": hold * dt}))
    for s in (0.2, 0.5, 1.0):
        v = s * lim.v_max
        period = 4 * 0.8 * h / v  # triangle between +-0.8 h at constant speed v
        tri = 0.8 * h * (2 / math.pi) * np.arcsin(np.sin(2 * math.pi * t / period))
        prims.append((f"reversals_v{s:g}", c + tri, {"kind": "reversals", "speed_rad_s": v}))
    creep = c + np.minimum(0.05 * lim.v_max * t, 0.5 * h)
    prims.append(("creep", creep, {"kind": "creep", "speed_rad_s": 0.05 * lim.v_max}))
    return prims


def candidates(setups: list[Setup], lim: Limits, *, dt: float = 0.01, segment_s: float = 2.0,
               seed: int = 0) -> list[Segment]:
    """The candidate commands (see the module doc) under every setup of ``setups``."""
    if dt <= 0 or segment_s < 20 * dt:
        raise ActuatorlabError("excitation: segment_s must be at least 20 control periods")
    T = int(round(segment_s / dt))
    prims = primitives(lim, int(math.floor(lim.duty * T)), dt)
    del seed  # the primitives are deterministic; seed kept for future randomised families

    shapes: list[tuple[str, np.ndarray, dict]] = []
    for name, q, tags in prims:  # the speed cap can make two sines the same command: keep one
        q = _finish(q, T, dt, lim)
        if not any(np.allclose(q, other) for _, other, _ in shapes):
            shapes.append((name, q, tags))
    out = []
    for s in setups:
        tag = _setup_tag(s)
        for name, q, tags in shapes:
            out.append(Segment(f"{name}_{tag}" if len(setups) > 1 else name, q.copy(), dt, s,
                               {**tags, "setup": tag, "kp": s.gains.get("kp"), "mass_kg": s.bench.get("mass")}))
    return out


def _setup_tag(s: Setup) -> str:
    parts = [f"kp{s.gains['kp']:g}"] if "kp" in s.gains else []
    if "mass" in s.bench:
        parts.append(f"m{s.bench['mass']:g}")
    return "_".join(parts) or s.actuator



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
                     single: Iterable[str] = SINGLE_PRIMITIVES, home: np.ndarray | None = None) -> list[Segment]:
    """The candidate commands of the module doc for the design ``joints`` (default all); ``home`` (n,): the
    rest pose (default the MJCF's qpos0 clipped into the limits)."""
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
    home = _home(robot, lims) if home is None else np.asarray(home, float)
    idx = {j: robot.index(j) for j in joints}
    out: list[Segment] = []

    def add(name: str, moves: dict[str, np.ndarray], tags: dict) -> None:
        q = np.tile(home, (T, 1))
        for j, qm in moves.items():
            q[:, idx[j]] = _finish(qm, T, dt, lims[j], rest=home[idx[j]])
        if any(np.allclose(q, o.q) for o in out):
            return  # the speed cap can make two commands the same: keep one
        out.append(Segment(name, q, dt, tags={**tags, "moving": list(moves)}))

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

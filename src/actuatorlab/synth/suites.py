"""Suites: which trajectories a synthetic dataset holds, as a list of :class:`TrajectorySpec`.

A suite is a name -> :class:`Suite` entry of :data:`SUITES`; ``Suite.build(scale, rng)`` returns the
specs (no simulation happens here, so listing a suite is cheap). ``scale`` in (0, 1] multiplies
the number of repeats of every (family, condition) combination (at least one of each is kept, so
every condition and every held-out condition survives any scale) and the durations (by
sqrt(scale), at least :data:`MIN_DURATION`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..errors import ActuatorlabError, UnknownNameError

__all__ = ["TrajectorySpec", "Suite", "SUITES", "get_suite", "FAMILIES", "PUSH_DIRECTIONS", "PAYLOADS",
           "MIN_DURATION", "check_scale", "SynthError", "RESTRICTED_PAIR_FAMILIES", "restricted_pair_specs",
           "push_pair_specs", "no_contact_twin"]

#: [s] shortest trajectory a scaled suite makes.
MIN_DURATION = 4.0
#: push condition -> unit direction of the external force on the robot (base frame).
PUSH_DIRECTIONS: dict[str, tuple[float, float, float]] = {
    "push_+x": (1.0, 0.0, 0.0), "push_-x": (-1.0, 0.0, 0.0), "push_+y": (0.0, 1.0, 0.0),
    "push_-y": (0.0, -1.0, 0.0), "push_+z": (0.0, 0.0, 1.0), "push_-z": (0.0, 0.0, -1.0),
}
#: [kg] known payloads of the neural_actuator suite.
PAYLOADS = (0.1, 0.2, 0.3, 0.4, 0.5)

#: family -> one-line description (dataset card).
FAMILIES: dict[str, str] = {
    "teleop": "leader-arm teleoperation: band-limited random joint motion (0.15-0.8 Hz) with random pauses",
    "chirp": "one joint, linear chirp 0.1 Hz -> 1.5-3 Hz, speed-capped amplitude, others still",
    "steps": "random position steps held 0.5-2 s (one joint or all joints)",
    "joint_sweep": "one joint swept over 90 % of its range and back (raised cosine), others still",
    "circle": "end-effector circle (horizontal xy or vertical xz plane, cw or ccw) through IK",
    "lean_extend": "whole arm between tucked, leaning and extended key poses (minimum jerk)",
    "pick_place": "pick at A, place at B (IK waypoints, minimum jerk); with a payload from grip to release",
    "lift_hold": "lift a grasped payload from a low pose to an extended pose, hold, lower",
    "push_hold": "hold a pose while an external force is applied in smooth pulses (force gauge)",
    "no_contact": "the same commands as a push_hold trajectory, without the force (its pair)",
}


@dataclass(frozen=True)
class TrajectorySpec:
    """One trajectory to generate.

    Attributes:
        name: file stem, unique in the dataset.
        family: generator family (a key of :data:`FAMILIES`); the ``excitation`` condition.
        duration: [s] logged duration.
        kp: Position P Gain register of every joint.
        command_key: seed key of the command generator (a push trajectory and its no-contact pair
            share it, so their commands are identical).
        payload: [kg] payload mass (0 = none).
        push: push condition ("push_+x", ...) or "none".
        restricted: joint 3 restricted by an extra elastic resistance.
        pair: id shared by a push trajectory and its no-contact twin ("none" otherwise).
        variant: family option as text ("xy_cw", "joint3", "all", ...; "default" if none).
        options: generator keyword options, as sorted (key, value) pairs.
    """

    name: str
    family: str
    duration: float
    kp: float
    command_key: int
    payload: float = 0.0
    push: str = "none"
    restricted: bool = False
    pair: str = "none"
    variant: str = "default"
    options: tuple[tuple[str, Any], ...] = ()

    def conditions(self, session: str) -> dict[str, str]:
        """The condition tags of the trajectory (all strings)."""
        return {
            "load": "none" if self.payload <= 0 else f"payload_{int(round(self.payload * 1000))}g",
            "gain": f"kp{int(round(self.kp))}",
            "excitation": self.family,
            "variant": self.variant,
            "session": session,
            "contact": self.push,
            "restricted": "restricted_joint3" if self.restricted else "none",
            "pair": self.pair,
        }


@dataclass(frozen=True)
class Suite:
    """A named recipe of trajectories.

    Attributes:
        name: registry name.
        description: one line.
        build: (scale, rng) -> list of specs (deterministic given rng).
        heldout: (condition key, value) pairs whose trajectories go only to heldout/<value>.
        session_size: trajectories per recording session (temperature carries over within one).
        cameras: number of cameras that record robot masks beside the logs (0: none;
            :mod:`actuatorlab.synth.cameras`).
        gripper: the gripper servo is simulated and commanded (a fifth logged joint driving the
            jaws through the robot's crank-slider, :mod:`actuatorlab.synth.gripper`); False: the
            gripper is rigid and absent from the logs.
    """

    name: str
    description: str
    build: Callable[[float, np.random.Generator], list[TrajectorySpec]]
    heldout: tuple[tuple[str, str], ...] = ()
    session_size: int = 15
    notes: tuple[str, ...] = field(default=())
    cameras: int = 0
    gripper: bool = False


class SynthError(ActuatorlabError, ValueError):
    """A generator argument is out of range (the CLI prints it as one line)."""


def check_scale(scale: float) -> float:
    """``scale`` as a float in (0, 1]; anything else raises :class:`SynthError` naming the accepted range."""
    if isinstance(scale, bool):
        raise SynthError(f"scale must be a number in (0, 1], got {scale!r}")
    try:
        s = float(scale)
    except (TypeError, ValueError):
        raise SynthError(f"scale must be a number in (0, 1], got {scale!r}") from None
    if math.isnan(s) or not (0.0 < s <= 1.0):
        raise SynthError(f"scale must be in (0, 1] (1 = the full suite, 0.1 = about a tenth), got {scale!r}")
    return s


def _gain(rng: np.random.Generator) -> float:
    """Position P Gain of a trajectory: 800 (OpenManipulator-X default) half the time, else 640 or 1000."""
    return float(rng.choice([640.0, 800.0, 800.0, 1000.0]))


class _Builder:
    """Accumulates specs with unique names and command keys."""

    def __init__(self, scale: float, rng: np.random.Generator):
        self.scale, self.rng = scale, rng
        self.specs: list[TrajectorySpec] = []
        self.counter: dict[str, int] = {}

    def repeats(self, n: int) -> int:
        return max(1, int(round(n * self.scale)))

    def duration(self, d: float) -> float:
        return round(max(MIN_DURATION, d * math.sqrt(self.scale)) if self.scale < 1.0 else d, 2)

    def add(self, stem: str, family: str, duration: float, **kw: Any) -> TrajectorySpec:
        i = self.counter.get(stem, 0)
        self.counter[stem] = i + 1
        if "kp" not in kw:
            kw["kp"] = _gain(self.rng)
        opts = kw.pop("options", {})
        spec = TrajectorySpec(name=f"{stem}_{i:03d}", family=family, duration=self.duration(duration),
                              command_key=len(self.specs), options=tuple(sorted(opts.items())), **kw)
        self.specs.append(spec)
        return spec

    def add_pair(self, direction: str, duration: float) -> None:
        push = self.add(f"{direction}", "push_hold", duration, push=direction, variant=direction[5:],
                        options={"direction": direction})
        self.specs[-1] = dataclasses.replace(push, pair=push.name)
        self.specs.append(no_contact_twin(self.specs[-1]))


def no_contact_twin(push: TrajectorySpec) -> TrajectorySpec:
    """The no-contact twin of a push spec ``push_<dir>_<k>`` (its ``pair`` already its own name):
    ``no_contact_<dir>_<k>``, same commands (command key), gain, duration and options, no force."""
    return dataclasses.replace(push, name="no_contact_" + push.name[len("push_"):], family="no_contact", push="none")


def _neural_actuator(scale: float, rng: np.random.Generator) -> list[TrajectorySpec]:
    """OpenManipulator-X dataset mirroring NeuralActuator's Neural Actuation Dataset (Dou et al., RSS 2026):
    free motion, known payloads, pushes/pulls with force labels and no-contact pairs, a restricted joint 3."""
    b = _Builder(scale, rng)
    # --- free motion ---
    for plane in ("xy", "xz"):
        for direction in ("cw", "ccw"):
            for _ in range(b.repeats(3)):
                b.add(f"circle_{plane}_{direction}", "circle", 20.0, variant=f"{plane}_{direction}",
                      options={"plane": plane, "direction": direction})
    for j in range(4):
        for _ in range(b.repeats(2)):
            b.add(f"sweep_joint{j + 1}", "joint_sweep", 20.0, variant=f"joint{j + 1}", options={"joint": j})
    for _ in range(b.repeats(6)):
        b.add("lean_extend", "lean_extend", 20.0)
    for _ in range(b.repeats(8)):
        b.add("pick_place", "pick_place", 20.0)
    for _ in range(b.repeats(24)):
        b.add("teleop", "teleop", 30.0)
    for j in range(4):
        for _ in range(b.repeats(2)):
            b.add(f"chirp_joint{j + 1}", "chirp", 20.0, variant=f"joint{j + 1}", options={"joint": j})
    for _ in range(b.repeats(4)):
        b.add("steps_all", "steps", 15.0, variant="all")
    for j in range(4):
        b.add(f"steps_joint{j + 1}", "steps", 15.0, variant=f"joint{j + 1}", options={"joint": j})
    # --- known payloads ---
    for m in PAYLOADS:
        g = int(round(m * 1000))
        for _ in range(b.repeats(3)):
            b.add(f"lift_hold_{g}g", "lift_hold", 20.0, payload=m)
        for _ in range(b.repeats(3)):
            b.add(f"pick_place_{g}g", "pick_place", 20.0, payload=m)
    # --- pushes and pulls, each with its no-contact pair ---
    for direction in PUSH_DIRECTIONS:
        for _ in range(b.repeats(3)):
            b.add_pair(direction, 15.0)
    # --- mechanically restricted joint 3 ---
    for _ in range(b.repeats(4)):
        b.add("restricted_teleop", "teleop", 30.0, restricted=True)
    for _ in range(b.repeats(2)):
        b.add("restricted_chirp_joint3", "chirp", 20.0, restricted=True, variant="joint3", options={"joint": 2})
    for _ in range(b.repeats(2)):
        b.add("restricted_steps_joint3", "steps", 15.0, restricted=True, variant="joint3", options={"joint": 2})
    for _ in range(b.repeats(2)):
        b.add("restricted_sweep_joint3", "joint_sweep", 20.0, restricted=True, variant="joint3", options={"joint": 2})
    return b.specs


#: families of the extra restricted/normal pairs, cycled: (stem, family, duration at scale 1 [s], variant, options)
RESTRICTED_PAIR_FAMILIES: tuple[tuple[str, str, float, str, dict], ...] = (
    ("teleop", "teleop", 30.0, "default", {}),
    ("chirp_joint3", "chirp", 20.0, "joint3", {"joint": 2}),
    ("steps_joint3", "steps", 15.0, "joint3", {"joint": 2}),
    ("sweep_joint3", "joint_sweep", 20.0, "joint3", {"joint": 2}),
    ("steps_all", "steps", 15.0, "all", {}),
)


def restricted_pair_specs(n: int, scale: float, rng: np.random.Generator, first_key: int) -> list[TrajectorySpec]:
    """``n`` extra pairs for condition detection: a trajectory with a restricted joint 3
    (``cond_restricted_<stem>_<i>``) and its normal twin (``cond_normal_<stem>_<i>``) with the same
    commands (shared command key ``first_key + i``) and gain, families cycled through
    :data:`RESTRICTED_PAIR_FAMILIES`, durations scaled like the suite's. Both carry
    ``pair = <the restricted trajectory's name>``, so a pair is one group (same split, same session)."""
    b = _Builder(scale, rng)
    out: list[TrajectorySpec] = []
    for i in range(int(n)):
        stem, fam, dur, variant, opts = RESTRICTED_PAIR_FAMILIES[i % len(RESTRICTED_PAIR_FAMILIES)]
        name = f"cond_restricted_{stem}_{i:03d}"
        r = TrajectorySpec(name=name, family=fam, duration=b.duration(dur), kp=_gain(rng), command_key=first_key + i,
                           restricted=True, pair=name, variant=variant, options=tuple(sorted(opts.items())))
        out += [r, dataclasses.replace(r, name=f"cond_normal_{stem}_{i:03d}", restricted=False)]
    return out


def push_pair_specs(n: int, scale: float, rng: np.random.Generator, first_key: int,
                    exclude: tuple[str, ...] = ()) -> list[TrajectorySpec]:
    """``n`` extra push trajectories, each with its no-contact twin (same commands: shared command
    key ``first_key + i``, same gain), directions cycled through :data:`PUSH_DIRECTIONS` without
    ``exclude`` (the suite's held-out push conditions, so the held-out split stays the suite's own),
    15 s scaled like the suite's pushes. Each push holds a new random pose
    (:func:`~actuatorlab.synth.commands.push_hold`): more poses per direction for force estimation.
    Names ``push_<dir>_x<i>`` / ``no_contact_<dir>_x<i>``; both carry ``pair`` = the push's name."""
    dirs = [d for d in PUSH_DIRECTIONS if d not in set(exclude)]
    if not dirs:
        raise SynthError(f"push pairs: every push direction is excluded ({list(exclude)})")
    b = _Builder(scale, rng)
    out: list[TrajectorySpec] = []
    for i in range(int(n)):
        d = dirs[i % len(dirs)]
        name = f"{d}_x{i:03d}"
        push = TrajectorySpec(name=name, family="push_hold", duration=b.duration(15.0), kp=_gain(rng),
                              command_key=first_key + i, push=d, pair=name, variant=d[5:],
                              options=(("direction", d),))
        out += [push, no_contact_twin(push)]
    return out


def _smoke(scale: float, rng: np.random.Generator) -> list[TrajectorySpec]:
    """Four 3-4 s trajectories: teleop, a 400 g lift-and-hold, a push along -y and its no-contact pair."""
    b = _Builder(1.0, rng)
    b.add("teleop", "teleop", 3.0, kp=800.0)
    b.add("lift_hold_400g", "lift_hold", 4.0, payload=0.4, kp=800.0)
    b.add_pair("push_-y", 3.0)
    return b.specs


def _cameras(scale: float, rng: np.random.Generator) -> list[TrajectorySpec]:
    """Five 4 s free-motion trajectories (teleop, whole-arm key poses, all-joint steps) under cameras."""
    b = _Builder(1.0, rng)
    for _ in range(2):
        b.add("teleop", "teleop", 4.0, kp=800.0)
    b.add("lean_extend", "lean_extend", 4.0, kp=800.0)
    b.add("steps_all", "steps", 4.0, variant="all", kp=800.0)
    b.add("teleop", "teleop", 4.0, kp=800.0)
    return b.specs


SUITES: dict[str, Suite] = {
    "neural_actuator": Suite(
        "neural_actuator",
        "OpenManipulator-X: free motion, payloads 100-500 g, pushes/pulls along +-x/y/z with no-contact pairs, "
        "restricted joint 3 (after NeuralActuator's Neural Actuation Dataset)",
        _neural_actuator, heldout=(("load", "payload_400g"), ("contact", "push_-y")), session_size=15),
    "smoke": Suite("smoke", "four 3-4 s trajectories for tests (teleop, 400 g lift-and-hold, push -y + pair)",
                   _smoke, heldout=(("load", "payload_400g"), ("contact", "push_-y")), session_size=4),
    "cameras": Suite("cameras", "five 4 s free-motion trajectories with robot masks from two cameras (hand-eye "
                     "calibration, docs/visual.md)", _cameras, session_size=5, cameras=2),
    "cameras_gripper": Suite("cameras_gripper", "the cameras suite with the gripper servo simulated and logged: its "
                             "crank-slider moves the jaws in the masks (open/close moves, then a chirp; docs/visual.md)",
                             _cameras, session_size=5, cameras=2, gripper=True),
}


def get_suite(name: str) -> Suite:
    """The :class:`Suite` called ``name``; an unknown name lists what exists."""
    try:
        return SUITES[name]
    except KeyError:
        raise UnknownNameError("suite", name, list(SUITES)) from None

"""``run_synth``: generate a synthetic multi-joint dataset with known ground truth, split and documented.

Layout of the output folder ``DIR``::

    DIR/train/NAME.parquet + NAME.json     8/10 of the trajectory groups (native format, docs/format.md)
    DIR/val/...                            1/10
    DIR/test/...                           1/10
    DIR/heldout/<condition>/...            every trajectory of a held-out condition (and its pair)
    DIR/DATASET.md                         the dataset card (human)
    DIR/dataset.json                       the same, machine-readable (ground truth per joint, split)

The same (robot, suite, seed, scale) gives the same bytes in every file. Channel conventions and
equations: docs/synth.md.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import DataError
from ..logs.format import Channel, Setup, Trajectory
from ..logs.io import save_trajectory
from . import commands as cmd
from .gripper import gripper_masks, gripper_scene, gripper_truth, with_gripper
from .robot import Kinematics, Scene, build_scene, get_robot
from .simulate import Rates, Restriction, RunConditions, SimResult, simulate
from .suites import (FAMILIES, PUSH_DIRECTIONS, Suite, SynthError, TrajectorySpec, check_scale, get_suite,
                     restricted_pair_specs, push_pair_specs)
from .truth import (ALPHA_CU, BEARING_EPS, CURRENT_UNIT, ENCODER_STEP, ERROR_GAIN, PWM_LIMIT, TRUTH_UNITS,
                    VELOCITY_UNIT, VOLTAGE_UNIT, G, JointTruth, SupplyTruth, draw_joint_truths, draw_supply)

__all__ = ["GENERATOR", "GENERATOR_VERSION", "RESTRICTION", "FORCE_GAUGE_NOISE", "run_synth", "split_groups",
           "make_plan"]

GENERATOR = "actuatorlab.synth"
#: Bumped whenever the same seed would give different bytes.
GENERATOR_VERSION = "2"
#: Restricted joint 3: an elastic band, tau = -1.5 N.m/rad (q - q_start) - 0.05 N.m.s/rad dq.
RESTRICTION = Restriction(joint="joint3", stiffness=1.5, damping=0.05)
#: [N] standard deviation of the force gauge noise (push trajectories and their pairs).
FORCE_GAUGE_NOISE = 0.05
#: [N] external force above which ``contact`` is 1.
CONTACT_THRESHOLD = 0.05
#: Split fractions (train, val, test) over trajectory groups.
SPLIT = (0.8, 0.1, 0.1)
_PRE_ROLL = 0.5


def _rng(seed: int, *key: int) -> np.random.Generator:
    """An independent, reproducible stream for (seed, key...)."""
    return np.random.default_rng([int(seed), *[int(k) for k in key]])


def make_plan(spec: TrajectorySpec, kin: Kinematics, rng: np.random.Generator, dt: float) -> cmd.Plan:
    """The :class:`~actuatorlab.synth.commands.Plan` of a spec (commands, payload, push) on the grid dt [s]."""
    T = int(round(spec.duration / dt))
    opts = dict(spec.options)
    fam = spec.family
    if fam == "teleop":
        return cmd.plan_of(cmd.teleop(rng, T, dt))
    if fam == "chirp":
        return cmd.plan_of(cmd.chirp(rng, T, dt, int(opts["joint"])))
    if fam == "steps":
        return cmd.plan_of(cmd.steps(rng, T, dt, joint=opts.get("joint")))
    if fam == "joint_sweep":
        return cmd.plan_of(cmd.joint_sweep(rng, T, dt, int(opts["joint"]), kin.scene.joint_range))
    if fam == "circle":
        return cmd.plan_of(cmd.circle(rng, T, dt, kin, direction=opts["direction"], plane=opts["plane"]))
    if fam == "lean_extend":
        return cmd.plan_of(cmd.lean_extend(rng, T, dt))
    if fam == "pick_place":
        return cmd.pick_place(rng, T, dt, kin, mass=spec.payload)
    if fam == "lift_hold":
        return cmd.lift_hold(rng, T, dt, kin, mass=spec.payload)
    if fam in ("push_hold", "no_contact"):
        plan = cmd.push_hold(rng, T, dt, kin, np.array(PUSH_DIRECTIONS[opts["direction"]]))
        if fam == "no_contact":
            plan = dataclasses.replace(plan, pulses=(), push_dir=np.zeros(3))
        return plan
    raise ValueError(f"no generator for family {fam!r}; known: {', '.join(FAMILIES)}")


# ----------------------------------------------------------------------------------------------
# Channels
# ----------------------------------------------------------------------------------------------

def _joint_channels(j: str, p: JointTruth) -> dict[str, Channel]:
    step = "2*pi/4096 rad"
    return {
        f"position_target/{j}": Channel("rad", "commanded", "output",
            f"Goal Position register written by the host: round(q_target / step) * step, step = {step}", 0.0,
            "reaches the firmware after the (unknown) command delay"),
        f"position/{j}": Channel("rad", "measured", "output",
            f"Present Position register: encoder counts * step ({step}, 4096 counts/rev)", 0.0,
            "absolute encoder on the output shaft; counts = floor((q + encoder offset) / step)"),
        f"velocity/{j}": Channel("rad/s", "estimated", "output",
            f"Present Velocity register (0.229 rev/min units): firmware finite difference of encoder counts "
            f"over {p.velocity_window * 1e3:.0f} ms, first-order low-pass tau {p.velocity_filter_tau * 1e3:.0f} ms",
            round(0.5 * p.velocity_window + p.velocity_filter_tau, 6),
            "latency = half the difference window + the filter time constant (low-frequency group delay)"),
        f"current/{j}": Channel("A", "measured", "none",
            "Present Current register (2.69 mA units): motor current, first-order low-pass "
            f"tau {p.current_filter_tau * 1e3:.0f} ms, sensor offset and noise", round(p.current_filter_tau, 6),
            "signed like the motor torque; latency = filter time constant"),
        f"pwm_duty/{j}": Channel("1", "measured", "none", "Present PWM register / 885", 0.0,
                                 "duty applied by the firmware's position loop at the sample instant"),
        f"temperature/{j}": Channel("degC", "measured", "none", "Present Temperature register (1 degC units)", 0.0,
                                    "winding temperature, rounded"),
        f"torque_enable/{j}": Channel("bool", "commanded", "none", "Torque Enable register", 0.0),
    }


def _force_channels(kind: str) -> dict[str, Channel]:
    if kind == "gauge":
        c = lambda ax: Channel("N", "measured", "none",  # noqa: E731
            f"force gauge at the end effector, {ax} component, base frame, environment-on-robot sign, "
            f"noise {FORCE_GAUGE_NOISE} N (std)", 0.0)
    elif kind == "payload":
        c = lambda ax: Channel("N", "estimated", "none",  # noqa: E731
            f"payload gravity m*g in the base frame ({ax} component), environment-on-robot sign, while carried; "
            "static label (inertial forces of the payload not included)", 0.0)
    else:
        c = lambda ax: Channel("N", "estimated", "none",  # noqa: E731
            f"no external load in this trajectory: known zero ({ax} component)", 0.0)
    out = {f"force_{ax}": c(ax) for ax in ("x", "y", "z")}
    out["contact"] = Channel("bool", "estimated", "none",
        f"protocol ground truth: 1 while a payload is carried or an external force above {CONTACT_THRESHOLD} N "
        "acts on the end effector", 0.0)
    return out


def _sim_to_trajectory(spec: TrajectorySpec, session: str, sim: SimResult, robot: str, joints: tuple[str, ...],
                       truths: dict[str, JointTruth], supply_nominal: float, label_rng: np.random.Generator,
                       suite: str, events: dict[str, float], model_robot: str | None = None) -> Trajectory:
    """The native :class:`Trajectory` of one simulated spec (channels "<canonical>/<joint>");
    ``model_robot``: the robot config the setup names (default ``robot``)."""
    data: dict[str, np.ndarray] = {}
    channels: dict[str, Channel] = {}
    T = sim.time.shape[0]
    for i, j in enumerate(joints):
        ch = _joint_channels(j, truths[j])
        values = {f"position_target/{j}": sim.goal[:, i], f"position/{j}": sim.position[:, i],
                  f"velocity/{j}": sim.velocity[:, i], f"current/{j}": sim.current[:, i],
                  f"pwm_duty/{j}": sim.pwm[:, i], f"temperature/{j}": sim.temperature[:, i],
                  f"torque_enable/{j}": np.ones(T)}
        for k, c in ch.items():
            data[k], channels[k] = np.asarray(values[k], dtype=np.float64), c
    data["supply_voltage"] = sim.supply
    channels["supply_voltage"] = Channel("V", "measured", "none", "Present Input Voltage register (0.1 V units)",
                                         0.0, "shared supply bus, read on joint1's servo")
    noise = label_rng.standard_normal((T, 3))
    if spec.family in ("push_hold", "no_contact"):
        kind = "gauge"
        force = sim.force + FORCE_GAUGE_NOISE * noise
    elif spec.payload > 0:
        kind = "payload"
        force = np.zeros((T, 3))
        force[:, 2] = -sim.payload * G
    else:
        kind = "none"
        force = np.zeros((T, 3))
    contact = ((np.linalg.norm(sim.force, axis=1) > CONTACT_THRESHOLD) | (sim.payload > 0)).astype(np.float64)
    fch = _force_channels(kind)
    for a, ax in enumerate(("x", "y", "z")):
        data[f"force_{ax}"], channels[f"force_{ax}"] = force[:, a].copy(), fch[f"force_{ax}"]
    data["contact"], channels["contact"] = contact, fch["contact"]
    setup = Setup(
        actuator=get_robot(robot).actuator, joint_type="revolute", controller="dynamixel_pwm",
        gains={"kp": float(spec.kp)}, supply_voltage=float(supply_nominal), bench={},
        extra={"robot": model_robot or robot, "joints": list(joints),
               "per_joint_gains": {j: {"kp": float(spec.kp)} for j in joints},
               "generator": f"{GENERATOR} {GENERATOR_VERSION}", "suite": suite, "family": spec.family,
               "events": {k: float(v) for k, v in events.items()}, "pwm_limit": 1.0,
               "force_point": "end_effector_link origin", "force_frame": "base (world)"},
    )
    return Trajectory(name=spec.name, time=sim.time.copy(), data=data, channels=channels, setup=setup,
                      conditions=spec.conditions(session), source_file=f"synthetic:{robot}/{suite}/{spec.name}")


# ----------------------------------------------------------------------------------------------
# Sessions and splits
# ----------------------------------------------------------------------------------------------

def _groups(specs: list[TrajectorySpec]) -> list[list[TrajectorySpec]]:
    """Specs grouped so that a push trajectory and its no-contact pair stay together (input order)."""
    groups: dict[str, list[TrajectorySpec]] = {}
    for s in specs:
        groups.setdefault(s.pair if s.pair != "none" else s.name, []).append(s)
    return list(groups.values())


def split_groups(specs: list[TrajectorySpec], heldout: tuple[tuple[str, str], ...], rng: np.random.Generator,
                 session_of: dict[str, str] | None = None, *, stratify: bool = False) -> dict[str, str]:
    """Trajectory name -> split folder ("train", "val", "test" or "heldout/<value>").

    A group (a trajectory, or a push trajectory with its no-contact pair) goes to
    ``heldout/<value>`` when any member has condition ``key == value`` for a (key, value) of
    ``heldout`` (the first that matches). The other groups are permuted with ``rng`` and cut
    8:1:1 (test and val get round(N/10) groups each, at least one when N >= 3).

    ``stratify``: the strata are the groups' (family, variant) of their first member. Test, then
    val, first take one group of every stratum that has at least 3 groups (strata in a random
    order, so a quota smaller than the number of strata takes random ones; train keeps at least
    one group of each), then fill the rest of their quota from the remaining groups in the
    permuted order. Used for the restricted/normal pairs: a validation split without a motion
    family cannot calibrate a detector for it (bench/README.md, "Motor-condition detection").
    """
    split: dict[str, str] = {}
    rest = []
    for g in _groups(specs):
        target = None
        for key, value in heldout:
            if any(s.conditions(session_of.get(s.name, "") if session_of else "").get(key) == value for s in g):
                target = f"heldout/{value}"
                break
        if target is None:
            rest.append(g)
        else:
            for s in g:
                split[s.name] = target
    n = len(rest)
    n_small = max(1, int(round(SPLIT[2] * n))) if n >= 3 else 0
    order = [int(i) for i in rng.permutation(n)]
    if stratify and n_small:
        strata: dict[tuple[str, str], list[int]] = {}
        for gi in order:  # each stratum's groups in the permuted order
            strata.setdefault((rest[gi][0].family, rest[gi][0].variant), []).append(gi)
        keys = list(strata)
        pool = list(order)
        ranked: list[int] = []
        for _ in ("test", "val"):
            taken: list[int] = []
            for k in (keys[int(i)] for i in rng.permutation(len(keys))):
                if len(taken) < n_small and len(strata[k]) >= 3:
                    taken.append(next(gi for gi in strata[k] if gi in pool))
                    pool.remove(taken[-1])
            while len(taken) < n_small:
                taken.append(pool.pop(0))
            ranked += taken
        order = ranked + pool
    for rank, gi in enumerate(order):
        where = "test" if rank < n_small else ("val" if rank < 2 * n_small else "train")
        for s in rest[gi]:
            split[s.name] = where
    return split


def _sessions(specs: list[TrajectorySpec], size: int, rng: np.random.Generator
              ) -> list[tuple[str, list[TrajectorySpec]]]:
    """Recording sessions: groups in a random order, cut into sessions of about ``size`` trajectories."""
    groups = _groups(specs)
    order = rng.permutation(len(groups))
    sessions: list[tuple[str, list[TrajectorySpec]]] = []
    current: list[TrajectorySpec] = []
    for gi in order:
        current.extend(groups[gi])
        if len(current) >= size:
            sessions.append((f"s{len(sessions) + 1:02d}", current))
            current = []
    if current:
        sessions.append((f"s{len(sessions) + 1:02d}", current))
    return sessions


# ----------------------------------------------------------------------------------------------
# Entry point
# ----------------------------------------------------------------------------------------------

def _prepare_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise DataError(out, "exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        card = out / "dataset.json"
        ours = False
        if card.is_file():
            try:
                ours = json.loads(card.read_text(encoding="utf-8")).get("generator") == GENERATOR
            except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
                ours = False
        if not overwrite:
            raise DataError(out, "folder is not empty (choose a new folder, or overwrite=True to replace a "
                                 "dataset made by actuatorlab synth)")
        if not ours:
            raise DataError(out, "folder is not empty and holds no dataset.json made by actuatorlab synth; "
                                 "refusing to overwrite it")
        for sub in ("train", "val", "test", "heldout", "masks"):
            if (out / sub).is_dir():
                shutil.rmtree(out / sub)
        for f in ("DATASET.md", "dataset.json"):
            (out / f).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)


def _specs_and_sessions(suite_obj: Suite, scale: float, seed: int, restricted_pairs: int, push_pairs: int,
                        ) -> tuple[list[TrajectorySpec], list[tuple[str, list[TrajectorySpec]]], dict[str, str],
                                   np.random.Generator]:
    """(trajectory specs, sessions, split of each spec, the session stream for ambient draws): the suite's
    specs (streams 1, 2, 3) then the restricted pairs (4, 5, 6) and the push pairs (7, 8, 9)."""
    specs = suite_obj.build(scale, _rng(seed, 1))
    session_rng = _rng(seed, 2)
    sessions = _sessions(specs, suite_obj.session_size, session_rng)
    session_of = {s.name: name for name, members in sessions for s in members}
    split = split_groups(specs, suite_obj.heldout, _rng(seed, 3), session_of)
    def append(extra: list[TrajectorySpec], stream: int, heldout) -> list[TrajectorySpec]:
        """Extra specs in sessions after the suite's (random stream ``stream + 1``) with their own
        stratified split (``stream + 2``): the suite's streams, sessions and splits are untouched."""
        for _, members in _sessions(extra, suite_obj.session_size, _rng(seed, stream + 1)):
            sessions.append((f"s{len(sessions) + 1:02d}", members))
            session_of.update({s.name: sessions[-1][0] for s in members})
        split.update(split_groups(extra, heldout, _rng(seed, stream + 2), stratify=True))
        return specs + extra

    if restricted_pairs:  # streams 4 (specs), 5 (their sessions), 6 (their split)
        specs = append(restricted_pair_specs(int(restricted_pairs), scale, _rng(seed, 4), len(specs)), 4, ())
    if push_pairs:  # streams 7, 8, 9; directions held out by the suite are left out
        held = tuple(v for k, v in suite_obj.heldout if k == "contact")
        specs = append(push_pair_specs(int(push_pairs), scale, _rng(seed, 7), len(specs), exclude=held), 7,
                       suite_obj.heldout)

    return specs, sessions, split, session_rng


def _record(spec: TrajectorySpec, split: str, traj: Trajectory, plan: Any, sim: SimResult, rest: float,
            ) -> dict[str, Any]:
    """The dataset card's entry of one trajectory."""
    return {
        "name": spec.name, "split": split, "family": spec.family, "variant": spec.variant,
        "conditions": traj.conditions, "duration_s": round(traj.duration, 6), "n_samples": traj.n,
        "kp": spec.kp, "payload_kg": spec.payload, "push": spec.push, "pair": spec.pair,
        "restricted": spec.restricted, "events": {k: round(float(v), 6) for k, v in plan.events.items()},
        "push_pulses": ([[round(float(x), 6) for x in p] for p in plan.pulses]
                        if spec.family == "push_hold" else []),
        "temperature_start_degC": [round(float(x), 4) for x in sim.temp_true[0]],
        "temperature_end_degC": [round(float(x), 4) for x in sim.final_temperature],
        "rest_after_s": round(rest, 4),
    }


def _check_counts(**counts: Any) -> None:
    """Each count an integer >= 0, else a :class:`SynthError` naming it."""
    for name, n in counts.items():
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise SynthError(f"{name} must be an integer >= 0, got {n!r}")


def run_synth(robot: str, suite: str, out: str | Path, seed: int, scale: float = 1.0,
              progress: Callable[[int, int, str], None] | None = None, *, overwrite: bool = False,
              restricted_pairs: int = 0, push_pairs: int = 0) -> dict[str, Any]:
    """Generate the synthetic dataset ``suite`` of ``robot`` into ``out``; returns a summary dict.

    Args:
        robot: a name of :data:`actuatorlab.synth.robot.ROBOTS` ("open_manipulator_x").
        suite: a name of :data:`actuatorlab.synth.suites.SUITES` ("neural_actuator", "smoke").
        out: output folder; must be new or empty (or a previous synth dataset with ``overwrite``).
        seed: integer seed: the same (robot, suite, seed, scale) gives the same bytes.
        scale: in (0, 1]: shrinks the number of repeats and the durations (at least one trajectory
            of every family/condition combination is kept).
        progress: called as ``progress(done, total, name)`` after each trajectory.
        overwrite: replace a dataset previously written by this generator in ``out``.
        restricted_pairs: append this many restricted-joint-3 / normal pairs with identical
            commands (:func:`~actuatorlab.synth.suites.restricted_pair_specs`; condition
            detection) in their own streams, sessions (after the suite's) and 8:1:1 split stratified
            by family (:func:`split_groups` ``stratify``, since generator version 2), so the suite's
            own trajectories keep their splits; 0 (default) adds none.
        push_pairs: append this many push / no-contact pairs at new random poses, directions
            cycled through the suite's push directions that are not held out
            (:func:`~actuatorlab.synth.suites.push_pair_specs`; force estimation) in their own
            streams (7, 8, 9), sessions and 8:1:1 split stratified by direction, so the suite's
            trajectories, the restricted pairs and the held-out split are unchanged; 0 adds none.

    Returns:
        {"out", "robot", "suite", "seed", "scale", "n_trajectories", "n_samples", "duration_s",
         "splits": {split: n_trajectories}, "heldout": [...], "generator_version"}.
    """
    spec_r = get_robot(robot)
    suite_obj: Suite = get_suite(suite)
    scale, seed = check_scale(scale), int(seed)
    _check_counts(restricted_pairs=restricted_pairs, push_pairs=push_pairs)
    out = Path(out)
    _prepare_out(out, overwrite)

    rates = Rates()
    unit_rng = _rng(seed, 0)
    truths = draw_joint_truths(unit_rng, spec_r.joints)
    supply: SupplyTruth = draw_supply(unit_rng)
    scene: Scene = build_scene(robot, truths, rates.physics_dt)
    kin = Kinematics(scene)
    mech = None  # a suite with a gripper: its servo is a fifth joint with its own units (stream 16), commands (17)
    if suite_obj.gripper:
        mech, truths, scene = gripper_scene(robot, truths, rates.physics_dt, _rng(seed, 16))
    joints = scene.robot.joints
    specs, sessions, split, session_rng = _specs_and_sessions(suite_obj, scale, seed, restricted_pairs, push_pairs)
    index = {s.name: i for i, s in enumerate(specs)}
    total = len(specs)
    done = 0
    records: list[dict[str, Any]] = []
    session_info: dict[str, dict[str, Any]] = {}
    n_samples = 0
    true_q: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # (time, q): camera masks show the true angles
    for session, members in sessions:
        ambient = float(session_rng.uniform(21.0, 26.0))
        temp = ambient + session_rng.uniform(2.0, 12.0, size=len(joints))  # the arm was in use before
        session_info[session] = {"ambient_degC": round(ambient, 4),
                                 "start_temperature_degC": {j: round(float(t), 4) for j, t in zip(joints, temp)},
                                 "trajectories": [s.name for s in members]}
        for spec in members:
            plan = make_plan(spec, kin, _rng(seed, 10, spec.command_key), rates.log_dt)
            plan = plan if mech is None else with_gripper(plan, mech, _rng(seed, 17, spec.command_key), rates.log_dt)
            run = RunConditions([spec.kp] * len(joints), ambient=ambient, temperature0=temp,
                                restriction=RESTRICTION if spec.restricted else None, rates=rates, preroll=_PRE_ROLL)
            sim = simulate(scene, truths, supply, plan, run, _rng(seed, 11, index[spec.name]))
            traj = _sim_to_trajectory(spec, session, sim, robot, joints, truths, 12.0, _rng(seed, 12, index[spec.name]),
                                      suite, plan.events, None if mech is None else spec_r.gripper_config)
            save_trajectory(traj, out / split[spec.name] / spec.name)
            true_q[spec.name] = (sim.time, sim.q)
            rest = float(session_rng.uniform(3.0, 15.0))
            tau = np.array([truths[j].thermal_resistance * truths[j].thermal_capacitance for j in joints])
            temp = ambient + (sim.final_temperature - ambient) * np.exp(-rest / tau)
            records.append(_record(spec, split[spec.name], traj, plan, sim, rest))
            n_samples += traj.n
            done += 1
            if progress is not None:
                progress(done, total, spec.name)

    records.sort(key=lambda r: r["name"])
    split_counts: dict[str, int] = dict(Counter(r["split"] for r in records))
    card = _card(robot, suite_obj, seed, scale, rates, truths, supply, scene, session_info, records, split_counts)
    if restricted_pairs:
        card["restricted_pairs"] = int(restricted_pairs)
    if push_pairs:
        card["push_pairs"] = int(push_pairs)
    if mech is not None:
        card["ground_truth"]["gripper"] = gripper_truth(mech, str(spec_r.gripper_config))
    if suite_obj.cameras:
        card["ground_truth"]["cameras"] = gripper_masks(out, suite_obj.cameras, scene, mech, true_q, split, seed)
    (out / "dataset.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    (out / "DATASET.md").write_text(_card_markdown(card), encoding="utf-8")
    return {
        "out": str(out), "robot": robot, "suite": suite_obj.name, "seed": seed, "scale": scale,
        "n_trajectories": len(records), "n_samples": n_samples,
        "duration_s": round(sum(r["duration_s"] for r in records), 6),
        "splits": dict(sorted(split_counts.items())), "heldout": [v for _, v in suite_obj.heldout],
        "generator_version": GENERATOR_VERSION, "restricted_pairs": int(restricted_pairs),
        "push_pairs": int(push_pairs),
    }


# ----------------------------------------------------------------------------------------------
# Dataset card
# ----------------------------------------------------------------------------------------------

def _card(robot: str, suite: Suite, seed: int, scale: float, rates: Rates, truths: dict[str, JointTruth],
          supply: SupplyTruth, scene: Scene, sessions: dict[str, Any], records: list[dict[str, Any]],
          split_counts: dict[str, int]) -> dict[str, Any]:
    spec_r = get_robot(robot)
    fams: dict[str, int] = {}
    for r in records:
        fams[r["family"]] = fams.get(r["family"], 0) + 1
    return {
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "robot": robot,
        "mjcf": f"actuatorlab robot registry: robots/assets/{spec_r.model_folder}/{spec_r.model_file}",
        "suite": suite.name,
        "suite_description": suite.description,
        "seed": seed,
        "scale": scale,
        "rates_hz": {"physics": round(1.0 / rates.physics_dt, 6), "firmware": round(1.0 / rates.firmware_dt, 6),
                     "log": round(1.0 / rates.log_dt, 6)},
        "joints": list(truths),
        "channel_convention": "<canonical>/<joint> per joint (position, position_target, velocity, current, "
                              "pwm_duty, temperature, torque_enable); supply_voltage shared; force_x/y/z [N] "
                              "environment-on-robot in the base frame at the end effector; contact 0/1",
        "ground_truth": {
            "units": TRUTH_UNITS,
            "joints": {j: truths[j].to_dict() for j in truths},
            "supply": supply.to_dict(),
            "restriction": {**dataclasses.asdict(RESTRICTION), "anchor": "first command of the joint"},
            "firmware": {"law": "duty = clip(kp * error_gain * (goal - present), -1, 1), rounded to 1/885",
                         "error_gain": ERROR_GAIN, "pwm_limit_counts": PWM_LIMIT, "encoder_step_rad": ENCODER_STEP,
                         "velocity_unit_rad_s": VELOCITY_UNIT, "current_unit_A": CURRENT_UNIT,
                         "voltage_unit_V": VOLTAGE_UNIT},
            "resistance_law": f"R(T) = R20 (1 + {ALPHA_CU} (T - 20))",
            "torque_constant_law": "kt(T) = kt20 (1 - kt_temp_coeff (T - 20))",
            "output_bearing": f"tau = -bearing_friction tanh(dq / {BEARING_EPS})",
            "payload": {"body": "payload welded to link5 at the end-effector point", "radius_m": scene.payload_radius},
            "force_gauge_noise_N": FORCE_GAUGE_NOISE,
            "gravity_m_s2": G,
        },
        "families": {k: {"description": v, "n_trajectories": fams[k]} for k, v in FAMILIES.items() if k in fams},
        "heldout": [{"key": k, "value": v, "folder": f"heldout/{v}"} for k, v in suite.heldout],
        "splits": dict(sorted(split_counts.items())),
        "sessions": sessions,
        "trajectories": records,
    }


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def _card_markdown(card: dict[str, Any]) -> str:
    gt = card["ground_truth"]
    joints = card["joints"]
    lines = [
        f"# Synthetic dataset: {card['robot']} / {card['suite']}",
        "",
        f"Generated by `{card['generator']}` version {card['generator_version']} with seed {card['seed']} "
        f"and scale {card['scale']}. The same generator version, robot, suite, seed and scale give the same "
        "bytes. Everything here is simulated: the ground truth below is exact.",
        "",
        f"- Robot: {card['robot']}, MJCF `{card['mjcf']}` (edited in memory only: servo model instead of its "
        "actuators, payload body, no contacts).",
        f"- Suite: {card['suite_description']}.",
        f"- Rates: physics {card['rates_hz']['physics']:g} Hz, firmware {card['rates_hz']['firmware']:g} Hz, "
        f"log {card['rates_hz']['log']:g} Hz.",
        f"- Trajectories: {len(card['trajectories'])}; samples: {sum(r['n_samples'] for r in card['trajectories'])}; "
        f"duration: {sum(r['duration_s'] for r in card['trajectories']):.1f} s.",
        f"- Channels: {card['channel_convention']}. See docs/synth.md.",
        "",
        "## Splits",
        "",
        "| split | trajectories |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in card["splits"].items()],
        "",
        "Held out (never in train/val/test; a push trajectory's no-contact pair goes with it): "
        + ", ".join(f"`{h['key']} = {h['value']}` -> `{h['folder']}/`" for h in card["heldout"]) + ".",
        "The other trajectory groups are split 8:1:1 at random (seeded); a push trajectory and its "
        "no-contact pair are one group.",
        *([f"Extra restricted/normal pairs (`--restricted-pairs {card['restricted_pairs']}`): `cond_restricted_*` "
           "and their `cond_normal_*` twins (same commands), one group per pair, split 8:1:1 among themselves "
           "stratified by family (test and val each get a pair of every family with at least 3 pairs first), "
           "in their own sessions."] if card.get("restricted_pairs") else []),
        *([f"Extra push / no-contact pairs (`--push-pairs {card['push_pairs']}`): `push_<dir>_x<i>` with "
           "`no_contact_<dir>_x<i>`, new random poses, directions cycled through the pushes that are not held "
           "out, split 8:1:1 by direction in their own sessions."] if card.get("push_pairs") else []),
        "",
        "## Trajectory families",
        "",
        "| family | trajectories | what it is |",
        "|---|---|---|",
        *[f"| {k} | {v['n_trajectories']} | {v['description']} |" for k, v in card["families"].items()],
        "",
        "Conditions of every trajectory: `load` (payload_<g>g or none), `gain` (kp<P gain>), `excitation` "
        "(the family), `variant`, `session`, `contact` (push_<+-axis> or none), `restricted` "
        "(restricted_joint3 or none), `pair` (the push trajectory a no-contact twin belongs to, or none).",
        "",
        "## Ground truth per joint (Dynamixel XM430-W350 units drawn around nominal)",
        "",
        "| parameter | unit | " + " | ".join(joints) + " |",
        "|---|---|" + "---|" * len(joints),
    ]
    for name, unit in gt["units"].items():
        lines.append(f"| {name} | {unit} | " + " | ".join(_fmt(gt["joints"][j][name]) for j in joints) + " |")
    sup = gt["supply"]
    lines += [
        "",
        f"Supply: V_bus = {sup['v_source']:.4g} V - {sup['r_source']:.4g} ohm x I_supply "
        f"(I_supply = sum duty_j i_j + {sup['quiescent_current']:g} A per servo); reading noise {sup['noise']:g} V.",
        f"Firmware: {gt['firmware']['law']}, error_gain = (4096/2pi)/(256*885) = {gt['firmware']['error_gain']:.6g}.",
        f"Resistance {gt['resistance_law']}; torque constant {gt['torque_constant_law']}; output bearing "
        f"{gt['output_bearing']}.",
        f"Restricted joint 3: tau = -{gt['restriction']['stiffness']:g} (q - q_start) - "
        f"{gt['restriction']['damping']:g} dq [N.m].",
        "",
        "## Sessions",
        "",
        "| session | ambient [degC] | trajectories |",
        "|---|---|---|",
        *[f"| {k} | {v['ambient_degC']:.2f} | {len(v['trajectories'])} |" for k, v in card["sessions"].items()],
        "",
        "Within a session the winding temperature carries over from one trajectory to the next "
        "(cooling towards ambient during the rest between them, `rest_after_s` in dataset.json).",
        "",
    ]
    return "\n".join(lines)

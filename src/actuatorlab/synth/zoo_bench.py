"""The ``bench`` suite: one-joint pendulum logs of a zoo actuator, split by condition, with its truth.

Layout of the output folder ``DIR`` (written into a hidden sibling folder, then renamed into place)::

    DIR/train/NAME.parquet + NAME.json     the four shared excitation families (BAM's) at the training
                                           mass and gains, two amplitudes
    DIR/heldout/excitation/...             held-out families (chirp, steps, slow_ramp), training mass and gains
    DIR/heldout/load/...                   the four shared families at held-out masses
    DIR/heldout/gain/...                   the four shared families at held-out gains
    DIR/README.md                          the dataset card: truth, equations' home, splits, conditions
    DIR/dataset.json                       the same, machine-readable (the documented truth, the sensor
                                           floor per log, per split and pooled)

Every log carries the conditions ``load`` ("0.49kg@0.1m", as the BAM importer writes it), ``gain``
("kp400"), ``excitation`` (the family), ``variant`` (amplitude), ``session`` and ``split``, so
``actuatorlab fit DIR/train`` groups its folds by excitation like on the BAM logs.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import DataError
from ..logs.format import Channel, Setup, Trajectory
from ..logs.io import save_trajectory
from .suites import check_scale
from .zoo import ZooActuator, get_actuator, units_of
from .zoo_sim import ZooResult, ZooRun, sensor_floor, simulate_zoo

__all__ = ["BENCH_SUITE", "SHARED_FAMILIES", "HELDOUT_FAMILIES", "BenchLog", "bench_logs", "bench_command",
           "bench_trajectory", "run_bench", "pooled_floor"]

#: the suite name on the command line
BENCH_SUITE = "bench"
GENERATOR = "actuatorlab.synth.zoo"
GENERATOR_VERSION = "1"
#: the four excitation families of the shared BAM logs (docs of the shared data)
SHARED_FAMILIES = ("sin_time_square", "sin_sin", "up_and_down", "lift_and_drop")
#: families only in heldout/excitation
HELDOUT_FAMILIES = ("chirp", "steps", "slow_ramp")
#: [s] log length at scale 1 (BAM's 6 s trajectories)
DURATION = 6.0
_MIN_DURATION = 2.0
_PHYSICS_DT = {"voltage": 0.0005, "foc": 0.0002}


def _cubic(t: np.ndarray, t0: float, t1: float, a: float, b: float) -> np.ndarray:
    """Cubic (smoothstep) move from a to b between t0 and t1, held outside."""
    x = np.clip((t - t0) / (t1 - t0), 0.0, 1.0)
    return a + (b - a) * x * x * (3.0 - 2.0 * x)


def bench_command(family: str, t: np.ndarray, amplitude: float, rng: np.random.Generator
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(target [rad] (T,), torque enable (T,)) of an excitation family on times ``t`` [s]; s = amplitude / (pi/2).

    sin_time_square: s sin(t^2 6/D); sin_sin: s (pi/2 sin(t 6/D) + 0.5 sin(5 t') sin(2 t'));
    up_and_down: cubic 0 -> s pi/2 -> 0 -> 0.8 s pi/2 over thirds; lift_and_drop: cubic 0 -> s pi/2 over the
    first third, torque off after half (free fall); chirp: 0.5 s sin(2 pi (0.2 t + (2 - 0.2) t^2 / (2 D)));
    steps: random levels in +-0.6 s held 0.4-1.0 s; slow_ramp: triangle +-0.5 s at 0.15 s rad/s (stick-slip).
    """
    s = amplitude / (math.pi / 2)
    D = float(t[-1] - t[0]) if t.size > 1 else 1.0
    tt = t * (DURATION / D)  # the BAM families in their 6 s time frame
    en = np.ones_like(t)
    if family == "sin_time_square":
        q = s * np.sin(tt ** 2)
    elif family == "sin_sin":
        q = s * (np.sin(tt) * math.pi / 2 + 0.5 * np.sin(5 * tt) * np.sin(2 * tt))
    elif family == "up_and_down":
        q = (_cubic(t, 0, D / 3, 0.0, s * math.pi / 2) + _cubic(t, D / 3, 2 * D / 3, 0.0, -s * math.pi / 2)
             + _cubic(t, 2 * D / 3, D, 0.0, 0.8 * s * math.pi / 2))
    elif family == "lift_and_drop":
        q = _cubic(t, 0, D / 3, 0.0, s * math.pi / 2)
        en[t >= D / 2] = 0.0
    elif family == "chirp":
        q = 0.5 * s * np.sin(2 * np.pi * (0.2 * t + 1.8 * t ** 2 / (2 * D)))
    elif family == "steps":
        q = np.zeros_like(t)
        t0 = 0.0
        while t0 < D:
            q[t >= t0] = rng.uniform(-0.6, 0.6) * s
            t0 += rng.uniform(0.4, 1.0)
    elif family == "slow_ramp":
        a, v = 0.5 * s, 0.15 * s
        period = 4 * a / v
        x = np.mod(t / period + 0.25, 1.0)
        q = a * (4 * np.abs(x - 0.5) - 1.0) * -1.0
    else:
        raise ValueError(f"unknown bench family {family!r}; known: {', '.join(SHARED_FAMILIES + HELDOUT_FAMILIES)}")
    return q, en


@dataclass(frozen=True)
class BenchLog:
    """One log of the suite: name, split folder, family, mass [kg], kp, amplitude scale [1]."""

    name: str
    split: str
    family: str
    mass: float
    kp: float
    amplitude: float = 1.0


def bench_logs(a: ZooActuator, scale: float) -> list[BenchLog]:
    """The logs of the suite for ``a`` (deterministic); scale < 0.5 keeps one amplitude per family and gain."""
    b = a.bench
    amps = (1.0, 0.6) if scale >= 0.5 else (1.0,)
    mid = b.gains[len(b.gains) // 2]
    out: list[BenchLog] = []

    def add(split: str, fam: str, mass: float, kp: float, amp: float = 1.0) -> None:
        tag = f"{fam}_kp{kp:g}_m{mass:g}" + ("" if amp == 1.0 else f"_a{int(round(amp * 100))}")
        out.append(BenchLog(tag.replace(".", "p"), split, fam, mass, kp, amp))

    for kp in b.gains:
        for fam in SHARED_FAMILIES:
            for amp in amps:
                add("train", fam, b.mass, kp, amp)
        for fam in HELDOUT_FAMILIES:
            add("heldout/excitation", fam, b.mass, kp)
    for m in b.heldout_masses:
        for fam in SHARED_FAMILIES:
            add("heldout/load", fam, m, mid)
    for kp in b.heldout_gains:
        for fam in SHARED_FAMILIES:
            add("heldout/gain", fam, b.mass, kp)
    return out


def _channels(a: ZooActuator, r: ZooResult) -> dict[str, tuple[np.ndarray, Channel]]:
    sen, law = a.sensors, a.interface.law
    side = "output" if sen.encoder_side == "output" else "motor"
    enc = (f"encoder {sen.encoder_counts:g} counts/rev on the output shaft" if side == "output" else
           f"motor-side encoder {sen.encoder_counts:g} counts/rev divided by the ratio {a.gear.ratio:g}")
    ch = {
        "position": (r.position, Channel("rad", "measured", "output", enc, 0.0,
                                         "the reading is older than its timestamp by the (unknown) receive delay")),
        "velocity": (r.velocity, Channel("rad/s", "estimated", "output",
                                         f"device finite difference over {sen.velocity_window * 1e3:g} ms, register "
                                         f"unit {sen.velocity_unit:.4g} rad/s", round(0.5 * sen.velocity_window, 6))),
        "temperature": (r.temperature, Channel("degC", "measured", "none", "winding temperature register", 0.0)),
        "supply_voltage": (r.supply, Channel("V", "measured", "none", f"supply register ({sen.voltage_unit:g} V)")),
    }
    if sen.pwm_register != "none":
        how = ("int16(Present PWM)/885" if sen.pwm_register == "dynamixel_uint16"
               else "sign-magnitude Present Load (bit 10 = direction) / 1000")
        ch["pwm_duty"] = (r.pwm_duty, Channel("1", "measured", "none", how, 0.0, "duty of the firmware's law"))
        ch["pwm_register"] = (r.pwm_register, Channel("1", "measured", "none", f"raw register as read ({sen.pwm_register})",
                                                      0.0, "wrapped / encoded: decode before use (pwm_duty)"))
    if sen.current_unit > 0:
        ch["current"] = (r.current, Channel("A", "measured", "none", f"current register ({sen.current_unit:g} A)", 0.0,
                                            "winding (q-axis) current, signed like the motor torque"))
    if law in ("pd", "pd_float", "torque"):
        kt = a.motor.kt * a.gear.ratio
        est = r.current if sen.current_unit > 0 else r.i
        ch["effort"] = (kt * est, Channel("N.m", "estimated", "output", f"drive estimate N kt20 i = {kt:.4g} * current",
                                          0.0, "before gear losses; kt drifts with temperature"))
    return ch


def bench_trajectory(a: ZooActuator, log: BenchLog, seed: int, index: int, duration: float = DURATION
                     ) -> tuple[Trajectory, ZooResult]:
    """Simulate one :class:`BenchLog` of ``duration`` [s] (its own stream (seed, index): command, jitter,
    noise, start temperature) and make its native :class:`Trajectory` (channels, Setup, conditions)."""
    rng = np.random.default_rng([int(seed), int(index)])
    b, sen = a.bench, a.sensors
    T = int(round(duration / sen.log_dt)) + 1
    t_nom = np.arange(T) * sen.log_dt
    cmd, en = bench_command(log.family, t_nom, b.amplitude * log.amplitude, rng)
    kd = b.kd_per_kp * log.kp
    temp0 = a.thermal.ambient + a.thermal.start_rise + float(rng.uniform(0.0, 5.0))
    h = a.physics_dt or _PHYSICS_DT[a.motor.drive]
    r = simulate_zoo(a, ZooRun(cmd, en, log.kp, kd, log.mass, h, temp0), rng)
    data = {"position_target": cmd, "torque_enable": en}
    chans = {"position_target": Channel("rad", "commanded", "output", "host command, sent at the timestamp", 0.0,
                                        "reaches the device after the (unknown) command delay"),
             "torque_enable": Channel("bool", "commanded", "none", "torque enable register", 0.0)}
    for k, (v, c) in _channels(a, r).items():
        data[k], chans[k] = np.asarray(v, dtype=np.float64), c
    gains = {"kp": float(log.kp)}
    if a.interface.law in ("pd", "pd_float"):
        gains.update(kd=float(kd), effort_limit=float(a.interface.effort_limit))
    setup = Setup(actuator=a.actuator, joint_type="revolute", controller=a.controller, gains=gains,
                  supply_voltage=float(a.motor.supply),
                  bench={"mass": float(log.mass), "length": float(b.length), "arm_mass": float(b.arm_mass)},
                  extra={"generator": f"{GENERATOR} {GENERATOR_VERSION}", "zoo_actuator": a.name,
                         "family": log.family, "truth": "dataset.json of the dataset folder"})
    cond = {"load": f"{log.mass:g}kg@{b.length:g}m", "gain": f"kp{log.kp:g}", "excitation": log.family,
            "variant": f"a{int(round(log.amplitude * 100))}", "session": "s01", "split": log.split}
    traj = Trajectory(name=log.name, time=r.time, data=data, channels=chans, setup=setup, conditions=cond,
                      source_file=f"synthetic:{a.name}/{BENCH_SUITE}/{log.name}")
    return traj, r


#: what ``sensor_floor`` in dataset.json measures
FLOOR_DEFINITION = ("mean |logged position - true link angle at the log's timestamps| [rad]: the truth replayed "
                    "against its own measurements (quantisation, encoder side, reading age, device tick)")


def pooled_floor(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The sensor floor [rad] pooled over all logs and per split (sample-weighted means of the logs'
    ``sensor_floor_rad``), as dataset.json stores it."""
    def pool(rs: list[dict[str, Any]], key: str = "sensor_floor_rad") -> float:
        n = sum(r["n_samples"] for r in rs)
        return float(sum(r[key] * r["n_samples"] for r in rs) / n)

    splits = sorted({r["split"] for r in records})
    return {"definition": FLOOR_DEFINITION, "unit": "rad", "pooled": pool(records),
            "splits": {k: pool([r for r in records if r["split"] == k]) for k in splits},
            "at_reading": {"definition": "the same against the true angle at the instant each reading describes "
                                         "(t_k - receive delay): without the reading's age",
                           "pooled": pool(records, "sensor_floor_at_reading_rad"),
                           "splits": {k: pool([r for r in records if r["split"] == k], "sensor_floor_at_reading_rad")
                                      for k in splits}}}


def _card(a: ZooActuator, seed: int, scale: float, records: list[dict[str, Any]]) -> dict[str, Any]:
    splits: dict[str, int] = {}
    for r in records:
        splits[r["split"]] = splits.get(r["split"], 0) + 1
    return {"generator": GENERATOR, "generator_version": GENERATOR_VERSION, "suite": BENCH_SUITE,
            "actuator": a.name, "title": a.title, "seed": seed, "scale": scale,
            "truth": a.to_dict(), "units": {g: units_of(g) for g in
                                            ("motor", "gear", "thermal", "interface", "sensors", "bench")},
            "families": {"train": list(SHARED_FAMILIES), "heldout/excitation": list(HELDOUT_FAMILIES)},
            "splits": dict(sorted(splits.items())), "sensor_floor": pooled_floor(records), "logs": records}


def _readme(card: dict[str, Any]) -> str:
    t = card["truth"]
    lines = [f"# Zoo bench dataset: {card['actuator']}", "", f"{card['title']}.", "",
             f"Generated by `{card['generator']}` version {card['generator_version']}, suite `{card['suite']}`, seed "
             f"{card['seed']}, scale {card['scale']}. Everything is simulated: the truth below is exact and is "
             "no member of the fitted family unless stated. Equations: docs/synth.md, \"The actuator zoo\".", "",
             f"Which fitted model can represent it: {t['family']}", "", "## Splits", "",
             "| split | logs | what |", "|---|---|---|"]
    what = {"train": "the four shared families (" + ", ".join(SHARED_FAMILIES) + ") at the training mass and gains",
            "heldout/excitation": "held-out families (" + ", ".join(HELDOUT_FAMILIES) + "), training mass and gains",
            "heldout/load": "shared families at held-out masses", "heldout/gain": "shared families at held-out gains"}
    floor = card["sensor_floor"]
    lines += [f"| {k} | {v} | {what.get(k, '')} (sensor floor {1e3 * floor['splits'][k]:.3f} mrad) |"
              for k, v in card["splits"].items()]
    lines += ["", f"Sensor floor (the truth replayed against its own measurements, {1e3 * floor['pooled']:.3f} mrad "
              "pooled): " + floor["definition"] + "."]
    lines += ["", "Conditions of every log: load (mass@length), gain (kp), excitation (family), variant "
              "(amplitude in %), session, split.", "", "## Truth", ""]
    for group, units in card["units"].items():
        lines += [f"### {group}", "", "| parameter | value | unit |", "|---|---|---|"]
        for k, v in t[group].items():
            lines.append(f"| {k} | {v} | {units.get(k, '')} |")
        lines.append("")
    lines += ["Sources: " + "; ".join(t["sources"]) + ".", ""]
    return "\n".join(lines)


def _prepare(out: Path, overwrite: bool) -> Path:
    """The hidden sibling folder to build in; refuses a non-empty ``out`` unless it is ours and ``overwrite``."""
    if out.exists() and not out.is_dir():
        raise DataError(out, "exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        card = out / "dataset.json"
        ours = card.is_file() and GENERATOR in card.read_text(encoding="utf-8", errors="replace")[:200]
        if not (overwrite and ours):
            raise DataError(out, "folder is not empty (choose a new folder, or overwrite a dataset made by "
                                 "actuatorlab synth --suite bench)")
    tmp = out.parent / f".{out.name}.partial"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def run_bench(actuator: str, out: str | Path, seed: int, scale: float = 1.0,
              progress: Callable[[int, int, str], None] | None = None, *, overwrite: bool = False) -> dict[str, Any]:
    """Write the ``bench`` suite of zoo actuator ``actuator`` into ``out``; returns a summary dict.

    ``scale`` in (0, 1] shrinks the durations (6 s x sqrt(scale), at least 2 s) and, below 0.5, keeps one
    amplitude; the same (actuator, seed, scale) gives the same bytes. The folder is built beside ``out``
    and renamed into place, so a crash leaves no half dataset under ``out``.
    """
    a = get_actuator(actuator)
    scale = check_scale(scale)
    seed = int(seed)
    out = Path(out)
    tmp = _prepare(out, overwrite)
    duration = round(max(_MIN_DURATION, DURATION * math.sqrt(scale)), 2)
    logs = bench_logs(a, scale)
    records: list[dict[str, Any]] = []
    n_samples = 0
    for i, log in enumerate(logs):
        traj, r = bench_trajectory(a, log, seed, i, duration)
        save_trajectory(traj, tmp / log.split / log.name)
        records.append({"name": log.name, "split": log.split, "family": log.family, "mass_kg": log.mass,
                        "kp": log.kp, "amplitude": log.amplitude, "conditions": traj.conditions, "n_samples": traj.n,
                        "sensor_floor_rad": sensor_floor(r), "sensor_floor_at_reading_rad": sensor_floor(r, "reading")})
        n_samples += traj.n
        if progress is not None:
            progress(i + 1, len(logs), log.name)
    card = _card(a, seed, scale, records)
    (tmp / "dataset.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    (tmp / "README.md").write_text(_readme(card), encoding="utf-8")
    if out.exists():
        old = out.parent / f".{out.name}.old"
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old)
    else:
        tmp.rename(out)
    return {"out": str(out), "suite": BENCH_SUITE, "actuator": a.name, "seed": seed, "scale": scale,
            "n_trajectories": len(records), "n_samples": n_samples, "splits": card["splits"],
            "generator_version": GENERATOR_VERSION, "sensor_floor": card["sensor_floor"]}

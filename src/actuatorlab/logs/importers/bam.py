"""Importer for BAM pendulum-bench servo logs (JSON with a top-level ``entries`` list).

Format facts from the BAM logs' README (Rhoban/bam, Duclusaud et al., "Extended Friction Models
for the Physics Simulation of Servo Actuators", ICRA 2025):

* raw files: ``timestamp`` [s] is the midpoint of each bus read, so sampling is non-uniform
  (xl330 about 190 Hz, 3.5 ms during free fall; sts3250 about 49 Hz);
* processed files carry ``dt`` and were linearly interpolated onto a uniform grid;
* xl330 ``load`` is the "Present PWM" register stored as uint16: the duty cycle is
  ``d = int16(load) / 885`` (885 is the XL330 PWM limit, so d is in [-1, 1]; 65535 means -1/885);
* sts3250 ``load`` is not recorded (always 0);
* in processed files ``load`` was interpolated from the *wrapped* values, hence wrong wherever the
  sign changes: it is recomputed from the sibling ``../raw/NAME`` by zero-order hold, or omitted.

Channel mapping (unit, kind, side): goal_position -> position_target (rad, commanded, output);
position -> position (rad, measured, output); speed -> velocity (rad/s, estimated by the
firmware); torque_enable (bool, commanded); input_volts -> supply_voltage (V, measured, none);
temp -> temperature (degC, measured, none); load -> pwm_duty (1, measured, none) for Dynamixel
servos. Unknown per-sample keys are kept as extra channels with unit "unknown".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from actuatorlab.errors import DataError
from actuatorlab.logs.format import Channel, Setup, Trajectory
from actuatorlab.logs.checks import read_json, zoh_indices

__all__ = ["is_bam_doc", "load_bam", "decode_dynamixel_pwm", "DYNAMIXEL_PWM_LIMIT"]

#: XL330 "PWM Limit" register default / full-scale Present PWM value (duty 1.0 = 885 counts).
DYNAMIXEL_PWM_LIMIT = 885

_REQUIRED_SAMPLE_KEYS = ("timestamp", "position", "goal_position")

#: motor name -> controller law name and whether ``load`` is a Dynamixel Present PWM register.
_MOTORS: dict[str, dict[str, Any]] = {
    "xl330": {"controller": "dynamixel_pwm", "pwm_register": True,
              "velocity_source": "Present Velocity register (0.229 rpm/count) converted to rad/s by the BAM logger"},
    "sts3250": {"controller": "feetech_pwm", "pwm_register": False,
                "velocity_source": "servo speed reading converted from deg/s by the BAM logger"},
}


def is_bam_doc(doc: Any) -> bool:
    """Whether a parsed JSON document looks like a BAM log (a dict with an ``entries`` key)."""
    return isinstance(doc, dict) and "entries" in doc


def decode_dynamixel_pwm(load: np.ndarray) -> np.ndarray:
    """Duty cycle from the logged Present PWM register: ``int16(load) / 885``.

    (T,) register values stored as uint16 (65535 means -1) or already signed -> (T,) [1].

    >>> decode_dynamixel_pwm(np.array([0, 885, 65535, 64651])).tolist() == [0.0, 1.0, -1/885, -1.0]
    True
    """
    raw = np.asarray(load, dtype=np.float64)
    ints = np.round(raw).astype(np.int64)
    signed = (ints + 32768) % 65536 - 32768
    return signed.astype(np.float64) / DYNAMIXEL_PWM_LIMIT


def _motor_info(motor: str) -> dict[str, Any] | None:
    m = motor.lower()
    for key, info in _MOTORS.items():
        if m.startswith(key):
            return info
    return None


def _column(entries: list[dict[str, Any]], key: str) -> np.ndarray:
    """(T,) float64 of ``key`` over the samples (missing or null -> NaN, bool -> 0/1)."""
    out = np.empty(len(entries), dtype=np.float64)
    for i, e in enumerate(entries):
        v = e.get(key)
        out[i] = np.nan if v is None else float(v)
    return out


def _entries(path: Path, doc: dict[str, Any]) -> list[dict[str, Any]]:
    entries = doc["entries"]
    if not isinstance(entries, list):
        raise DataError(path, f"'entries' must be a list of samples, got {type(entries).__name__}")
    if not entries:
        raise DataError(path, "'entries' is empty (no samples)")
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise DataError(path, f"sample {i} of 'entries' is a {type(e).__name__}, not an object")
        for k in _REQUIRED_SAMPLE_KEYS:
            if k not in e:
                raise DataError(path, f"sample {i} of 'entries' lacks required key '{k}'")
        for k, v in e.items():
            if v is not None and not isinstance(v, (int, float, bool)):
                raise DataError(path, f"sample {i} key '{k}' is not a number ({v!r:.40})")
    return entries


def _num(doc: dict[str, Any], key: str, path: Path, default: float | None = None) -> float | None:
    v = doc.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DataError(path, f"top-level key '{key}' must be a number, got {v!r:.40}")
    return float(v)


def _session(stem: str) -> str:
    m = re.search(r"\d{4}-\d{2}-\d{2}", stem)
    return m.group(0) if m else stem


def _raw_pwm_for_processed(
    path: Path, doc: dict[str, Any], time: np.ndarray, warnings: list[str]
) -> tuple[np.ndarray, Channel] | None:
    """pwm_duty recomputed from ``../raw/NAME`` by zero-order hold onto ``time``; None (+ warning) if impossible."""
    raw_path = path.parent.parent / "raw" / path.name
    why = "processed 'load' was interpolated from wrapped uint16 register values (wrong wherever the sign changes)"
    if not raw_path.is_file():
        warnings.append(f"pwm_duty omitted: {why} and the raw sibling ../raw/{path.name} was not found")
        return None
    try:
        raw_doc = read_json(raw_path)
        raw_entries = _entries(raw_path, raw_doc)
    except DataError as e:
        warnings.append(f"pwm_duty omitted: {why} and the raw sibling is unusable ({e})")
        return None
    for key in ("motor", "trajectory", "kp"):
        if raw_doc.get(key) != doc.get(key):
            warnings.append(
                f"pwm_duty omitted: {why} and the raw sibling ../raw/{path.name} disagrees on '{key}' "
                f"({raw_doc.get(key)!r} vs {doc.get(key)!r})"
            )
            return None
    t_raw = _column(raw_entries, "timestamp")
    if not np.all(np.diff(t_raw) > 0):
        warnings.append(f"pwm_duty omitted: {why} and the raw sibling's timestamps are not increasing")
        return None
    duty_raw = decode_dynamixel_pwm(_column(raw_entries, "load"))
    idx = zoh_indices(t_raw, time)
    before = idx < 0
    idx = np.clip(idx, 0, None)
    duty = duty_raw[idx]
    age = np.where(before, 0.0, time - t_raw[idx])
    channel = Channel(
        unit="1",
        kind="measured",
        side="none",
        source=(
            f"int16(load)/{DYNAMIXEL_PWM_LIMIT} of raw/{path.name} (Present PWM register), zero-order hold "
            f"onto the processed grid (last raw sample at or before each time; the first raw value is held "
            f"for {int(before.sum())} grid time(s) before the first raw sample)"
        ),
        latency_s=float(np.mean(age)),
        description="duty cycle in [-1, 1]; latency_s is the mean age of the held raw sample",
    )
    return duty, channel


def _load_channels(path: Path, doc: dict[str, Any], entries: list[dict[str, Any]], info: dict[str, Any] | None,
                   motor: str, time: np.ndarray, data: dict[str, np.ndarray], channels: dict[str, Channel],
                   warnings: list[str]) -> None:
    """Add the 'load' field: ``pwm_duty`` where it is a Dynamixel PWM register, else ``load_raw``."""
    processed = "dt" in doc
    if not any("load" in e for e in entries):
        return
    load = _column(entries, "load")
    if info is not None and info["pwm_register"] and not processed:
        if np.all(np.isnan(load) | (load == np.round(load))):
            data["pwm_duty"] = decode_dynamixel_pwm(load)
            channels["pwm_duty"] = Channel(
                "1", "measured", "none",
                source=f"int16(load)/{DYNAMIXEL_PWM_LIMIT} (Present PWM register stored as uint16)",
                description="duty cycle in [-1, 1]",
            )
        else:
            warnings.append("pwm_duty omitted: raw 'load' holds non-integer values, not a PWM register")
            data["load_raw"], channels["load_raw"] = load, Channel(
                "unknown", "measured", "none", source="load", description="raw 'load' field, meaning unknown")
    elif info is not None and info["pwm_register"] and processed:
        data["load_raw"] = load
        channels["load_raw"] = Channel(
            "unknown", "measured", "none", source="load (processed file)",
            description=("uint16 Present PWM register values linearly interpolated across the wrap-around: "
                         "wrong wherever the sign changes; do not use (see pwm_duty)"),
        )
        rec = _raw_pwm_for_processed(path, doc, time, warnings)
        if rec is not None:
            data["pwm_duty"], channels["pwm_duty"] = rec
    else:
        data["load_raw"] = load
        channels["load_raw"] = Channel(
            "unknown", "measured", "none", source="load",
            description=(f"not recorded by the {motor} logger (always 0); not a PWM or load measurement"
                         if info is not None and np.all(np.nan_to_num(load) == 0)
                         else "raw 'load' field, meaning unknown for this motor"),
        )


def load_bam(path: str | Path, doc: dict[str, Any] | None = None) -> Trajectory:
    """Read one BAM JSON log (raw or processed) as a :class:`Trajectory` (no validation here).

    Args:
        path: the JSON file.
        doc: its already-parsed content (read from ``path`` if None).
    """
    path = Path(path)
    if doc is None:
        doc = read_json(path)
    if not is_bam_doc(doc):
        raise DataError(path, "not a BAM log: missing required top-level key 'entries'")
    entries = _entries(path, doc)
    processed = "dt" in doc
    motor = str(doc.get("motor", "unknown"))
    info = _motor_info(motor)
    warnings: list[str] = []
    if info is None:
        warnings.append(f"unknown motor {motor!r}: controller unknown, 'load' kept raw (known: {', '.join(_MOTORS)})")
    mass, length = _num(doc, "mass", path), _num(doc, "length", path)
    arm_mass = _num(doc, "arm_mass", path, 0.0)
    kp, vin = _num(doc, "kp", path), _num(doc, "vin", path)
    for key, v in (("mass", mass), ("length", length), ("kp", kp), ("vin", vin)):
        if v is None:
            warnings.append(f"top-level key '{key}' is absent")

    interp = "linearly interpolated onto the uniform grid by BAM's processing" if processed else "raw"
    time = _column(entries, "timestamp")
    data: dict[str, np.ndarray] = {}
    channels: dict[str, Channel] = {}

    def add(name: str, key: str, channel: Channel) -> None:
        if any(key in e for e in entries):
            data[name] = _column(entries, key)
            channels[name] = channel

    add("position_target", "goal_position", Channel(
        "rad", "commanded", "output",
        source=f"goal_position; {interp}" if processed else "goal_position (sent before the bus read)",
    ))
    add("position", "position", Channel(
        "rad", "measured", "output",
        source=f"encoder 4096 counts/rev; {interp}" if processed else "encoder 4096 counts/rev",
    ))
    vsrc = info["velocity_source"] if info else "servo speed reading (rad/s per the BAM logger)"
    add("velocity", "speed", Channel(
        "rad/s", "estimated", "output", source=f"{vsrc}; {interp}" if processed else vsrc,
        description="velocity estimated by the servo firmware",
    ))
    add("torque_enable", "torque_enable", Channel(
        "bool", "commanded", "none", source=f"torque_enable; {interp}" if processed else "torque_enable",
        description="1 = torque on, 0 = free (e.g. the drop of lift_and_drop)",
    ))
    add("supply_voltage", "input_volts", Channel(
        "V", "measured", "none", source=f"input_volts; {interp}" if processed else "input_volts",
    ))
    add("temperature", "temp", Channel(
        "degC", "measured", "none", source=f"temp; {interp}" if processed else "temp",
    ))
    if processed and "position_target" in channels:
        warnings.append(
            "position_target was linearly interpolated between raw commands by BAM's processing: at each "
            "grid time it mixes in the next command (not causal; up to one raw step ahead)"
        )

    _load_channels(path, doc, entries, info, motor, time, data, channels, warnings)

    known = {"timestamp", "goal_position", "position", "speed", "torque_enable", "input_volts", "temp", "load"}
    for key in sorted({k for e in entries for k in e} - known):
        name = key if key not in data else f"raw_{key}"
        data[name] = _column(entries, key)
        channels[name] = Channel("unknown", "measured", "none", source=key,
                                 description="per-sample field not interpreted by the BAM importer")

    extra: dict[str, Any] = {"source_format": "bam", "motor": motor, "processed": processed}
    if processed:
        extra["dt"] = _num(doc, "dt", path)
    known_top = {"entries", "mass", "length", "arm_mass", "kp", "vin", "motor", "trajectory", "dt"}
    for k in sorted(set(doc) - known_top):
        extra[k] = doc[k]
    if warnings:
        extra["warnings"] = warnings
    bench = {"mass": mass, "length": length, "arm_mass": arm_mass}
    setup = Setup(
        actuator=motor,
        joint_type="revolute",
        controller=info["controller"] if info else "unknown",
        gains={} if kp is None else {"kp": kp},
        supply_voltage=vin,
        bench={k: v for k, v in bench.items() if v is not None},
        extra=extra,
    )
    conditions = {
        "load": f"{mass:g}kg@{length:g}m" if mass is not None and length is not None else "unknown",
        "gain": f"kp{kp:g}" if kp is not None else "unknown",
        "excitation": str(doc.get("trajectory", "unknown")),
        "session": _session(path.stem),
    }
    return Trajectory(name=path.stem, time=time, data=data, channels=channels, setup=setup,
                      conditions=conditions, source_file=str(path))

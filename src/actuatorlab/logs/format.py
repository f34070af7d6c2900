"""The native trajectory format: one Parquet time series + one JSON metadata sidecar.

A :class:`Trajectory` is a single log of one joint (or, later, several joints). Every channel
says what it is: its unit, whether it was commanded, measured or estimated, on which side of the
transmission it lives, what transformation produced it and with what latency. The setup (actuator,
supply, controller and gains, bench geometry) and condition tags (load, gain, excitation, session)
travel with it so that splits and models can use them.

On disk (FORMAT_VERSION "1"): ``NAME.parquet`` (column ``time`` [s] plus one column per channel)
and ``NAME.json`` (``{"format": "actuatorlab-trajectory", "format_version": "1", ...}``).
See docs/format.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "Channel",
    "Setup",
    "Trajectory",
    "CANONICAL_CHANNELS",
    "CANONICAL_UNITS",
    "canonical_unit",
]

FORMAT_NAME = "actuatorlab-trajectory"
FORMAT_VERSION = "1"

Kind = Literal["commanded", "measured", "estimated"]
Side = Literal["output", "motor", "none"]

#: Channel names the models understand. Importers map their sources onto these; any other channel
#: is kept as it is (importers never drop data they do not use).
CANONICAL_CHANNELS: dict[str, str] = {
    "position_target": "commanded joint position [rad | m], output side",
    "position": "measured joint position [rad | m]",
    "velocity": "joint velocity [rad/s | m/s] (measured or estimated by the firmware)",
    "torque_enable": "commanded motor enable [1 = on, 0 = off (free)]",
    "supply_voltage": "measured supply voltage [V]",
    "temperature": "measured motor/driver temperature [degC]",
    "pwm_duty": "measured PWM duty cycle [1] in [-1, 1]",
    "current": "measured motor current [A]",
    "controller_output": "controller output sent to the drive [V] (commanded, e.g. EMPS vir)",
    "effort": "measured or estimated joint effort [N.m | N]",
}

#: SI unit of every canonical channel, per joint type ("revolute", "prismatic"). Importers convert
#: to these units; a value given in a unit that does not fit is an input error.
CANONICAL_UNITS: dict[str, dict[str, str]] = {
    "position_target": {"revolute": "rad", "prismatic": "m"},
    "position": {"revolute": "rad", "prismatic": "m"},
    "velocity": {"revolute": "rad/s", "prismatic": "m/s"},
    "torque_enable": {"revolute": "bool", "prismatic": "bool"},
    "supply_voltage": {"revolute": "V", "prismatic": "V"},
    "temperature": {"revolute": "degC", "prismatic": "degC"},
    "pwm_duty": {"revolute": "1", "prismatic": "1"},
    "current": {"revolute": "A", "prismatic": "A"},
    "controller_output": {"revolute": "V", "prismatic": "V"},
    "effort": {"revolute": "N.m", "prismatic": "N"},
}


def canonical_unit(name: str, joint_type: str) -> str | None:
    """SI unit of canonical channel ``name`` on a ``joint_type`` joint; None if not canonical.

    >>> canonical_unit("position", "prismatic"), canonical_unit("my_signal", "revolute")
    ('m', None)
    """
    units = CANONICAL_UNITS.get(name)
    return None if units is None else units.get(joint_type)


@dataclass(frozen=True)
class Channel:
    """Meaning of one logged signal.

    Attributes:
        unit: SI-style unit string: "rad", "rad/s", "m", "m/s", "V", "A", "N", "N.m", "degC",
            "1" (dimensionless), "bool"; "unknown" for a kept field whose meaning is not known.
        kind: "commanded" (sent to the device), "measured" (read from a sensor) or "estimated"
            (computed from other signals, e.g. velocity differentiated by the firmware).
        side: "output" (after the transmission), "motor" (before it) or "none" (not a joint
            quantity, e.g. supply voltage).
        source: the transformation that produced the stored values from the raw record, e.g.
            "int16(Present PWM register)/885".
        latency_s: [s] known delay of the value relative to its timestamp (0.0 if none known;
            positive means the value describes the past).
        description: free text.
    """

    unit: str
    kind: Kind
    side: Side = "output"
    source: str = "raw"
    latency_s: float = 0.0
    description: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Channel":
        return Channel(**{f.name: d[f.name] for f in dataclasses.fields(Channel) if f.name in d})


@dataclass(frozen=True)
class Setup:
    """The hardware a trajectory was recorded on.

    Attributes:
        actuator: actuator identifier, e.g. "xl330", "sts3250", "emps".
        joint_type: "revolute" (positions in rad) or "prismatic" (positions in m).
        controller: control law at the device interface, a name of
            ``actuatorlab.models.control.CONTROL_LAWS`` (e.g. "dynamixel_pwm", "feetech_pwm",
            "pd", "emps_cascade").
        gains: controller gains in the controller's own units, e.g. {"kp": 400} (Dynamixel
            register units) or {"kp": 160.18, "kv": 243.45} (EMPS, SI).
        supply_voltage: [V] nominal supply voltage, None if unknown.
        bench: test-bench geometry in SI, e.g. pendulum {"mass": kg, "length": m, "arm_mass": kg}
            or EMPS {"gtau": N/V}.
        extra: anything else the source carried (kept, not interpreted).
    """

    actuator: str
    joint_type: Literal["revolute", "prismatic"] = "revolute"
    controller: str = "pd"
    gains: dict[str, float] = field(default_factory=dict)
    supply_voltage: float | None = None
    bench: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Setup":
        return Setup(**{f.name: d[f.name] for f in dataclasses.fields(Setup) if f.name in d})


@dataclass(frozen=True, eq=False)
class Trajectory:
    """One log: a time base, channels with their meaning, the setup and condition tags.

    Attributes:
        name: short identifier (file stem).
        time: (T,) [s] strictly increasing sample times.
        data: channel name -> (T,) float64 array.
        channels: channel name -> :class:`Channel` (same keys as ``data``).
        setup: :class:`Setup`.
        conditions: tags used by splits: "load", "gain", "excitation", "session" (strings).
        source_file: path of the raw file it came from ("" if made in memory).
        path: the native file it was read from ("" otherwise; not stored, so errors can name the
            file a user gave rather than the recorded origin, e.g. ``synthetic:robot/suite/name``).
    """

    name: str
    time: np.ndarray
    data: dict[str, np.ndarray]
    channels: dict[str, Channel]
    setup: Setup
    conditions: dict[str, str] = field(default_factory=dict)
    source_file: str = ""
    path: str = ""

    def __post_init__(self) -> None:
        if set(self.data) != set(self.channels):
            missing = set(self.data) ^ set(self.channels)
            raise ValueError(f"{self.name}: data and channel metadata disagree on {sorted(missing)}")

    @property
    def n(self) -> int:
        return int(self.time.shape[0])

    @property
    def location(self) -> str:
        """What an error about this log names: the file it was read from, else its source, else its name."""
        return self.path or self.source_file or self.name

    @property
    def duration(self) -> float:
        return float(self.time[-1] - self.time[0]) if self.n else 0.0

    def has(self, name: str) -> bool:
        return name in self.data

    def __getitem__(self, name: str) -> np.ndarray:
        return self.data[name]

    def replace(self, **changes: Any) -> "Trajectory":
        """A copy with some fields replaced (``dataclasses.replace``); the original is untouched."""
        return dataclasses.replace(self, **changes)

    def with_channel(self, name: str, values: np.ndarray, channel: Channel) -> "Trajectory":
        """A copy with channel ``name`` added or replaced; ``values`` (T,) in ``channel.unit``."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != self.time.shape:
            raise ValueError(f"{self.name}: channel {name!r} has shape {values.shape}, time has {self.time.shape}")
        return self.replace(data={**self.data, name: values}, channels={**self.channels, name: channel})

    def without_channels(self, *names: str) -> "Trajectory":
        """A copy without the named channels (names that are absent are ignored)."""
        return self.replace(
            data={k: v for k, v in self.data.items() if k not in names},
            channels={k: v for k, v in self.channels.items() if k not in names},
        )

    def slice(self, start: int | None = None, stop: int | None = None) -> "Trajectory":
        """Samples ``start:stop`` (index range, Python slice semantics) as a new trajectory."""
        sl = slice(start, stop)
        return self.replace(time=self.time[sl].copy(), data={k: v[sl].copy() for k, v in self.data.items()})

    def meta_dict(self) -> dict[str, Any]:
        """Everything but the arrays, JSON-serializable (used by the on-disk sidecar)."""
        return {
            "name": self.name,
            "channels": {k: c.to_dict() for k, c in self.channels.items()},
            "setup": self.setup.to_dict(),
            "conditions": dict(self.conditions),
            "source_file": self.source_file,
            "n_samples": self.n,
        }

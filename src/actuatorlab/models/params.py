"""Parameter table of the actuator models: names, units, bounds, scale, meaning.

Parameters are plain values in a ``dict[str, jax.Array]`` (a frozen pytree by convention: build a
new dict, never mutate). Every model uses the same full set of names; a mechanism that a model does
not include keeps its *neutral* value (which switches it off), so a richer model contains its
parent exactly and can start its fit from the parent's optimum.

Units are written for a revolute joint (output side). For a prismatic joint read N for N.m,
m for rad and kg for kg.m^2 (see :func:`unit_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["ParamSpec", "PARAMS", "BOUND_PROFILES", "neutral_params", "unit_for", "bounds_for"]


@dataclass(frozen=True)
class ParamSpec:
    """One identifiable parameter.

    Attributes:
        name: key in the parameter dict.
        unit: unit for a revolute joint.
        neutral: value that switches the mechanism off (or a sane default for always-on ones).
        scale: "log" (searched log-uniformly, must stay > 0) or "linear".
        description: one line.
    """

    name: str
    unit: str
    neutral: float
    scale: Literal["log", "linear"]
    description: str


_P = ParamSpec
PARAMS: dict[str, ParamSpec] = {
    p.name: p
    for p in [
        # --- DC motor, seen from the output (gear ratio folded in) ---
        _P("kt", "N.m/A", 0.5, "log", "torque constant x gear ratio (= back-EMF constant, V.s/rad)"),
        _P("R", "ohm", 5.0, "log", "winding + driver resistance"),
        _P("current_limit", "A", 1e3, "log", "current clip of the driver (1e3 = no limit)"),
        _P("source_resistance", "ohm", 0.0, "linear",
           "supply source resistance: the bus sags by R_s x supply current (+sag, 0 = stiff supply)"),
        # --- transmission ---
        _P("armature", "kg.m^2", 1e-3, "log", "reflected rotor inertia (prismatic: moving mass, kg)"),
        _P("backlash", "rad", 0.0, "linear", "full width of the dead band between motor and output"),
        _P("stiffness", "N.m/rad", 1e9, "log", "series compliance of the transmission (1e9 = rigid)"),
        # --- friction (BAM-style friction budget, Duclusaud et al. ICRA 2025) ---
        _P("friction_base", "N.m", 0.0, "linear", "Coulomb friction"),
        _P("friction_viscous", "N.m.s/rad", 0.0, "linear", "viscous friction"),
        _P("friction_stribeck", "N.m", 0.0, "linear", "extra static friction at rest (Stribeck)"),
        _P("stribeck_velocity", "rad/s", 0.2, "log", "Stribeck velocity"),
        _P("stribeck_alpha", "1", 2.0, "linear", "Stribeck shape exponent"),
        _P("load_friction", "1", 0.0, "linear", "Coulomb growth per N.m transmitted through the gearbox"),
        _P("load_friction_motor", "1", 0.0, "linear", "directional: coefficient on motor torque (driving)"),
        _P("load_friction_external", "1", 0.0, "linear", "directional: coefficient on load torque (backdriving)"),
        _P("load_friction_stribeck", "1", 0.0, "linear", "load-dependent friction added at rest"),
        _P("load_friction_motor_stribeck", "1", 0.0, "linear",
           "directional load friction added at rest: coefficient on motor torque (BAM M5/M6)"),
        _P("load_friction_external_stribeck", "1", 0.0, "linear",
           "directional load friction added at rest: coefficient on load torque (BAM M5/M6)"),
        _P("mesh_friction_drive", "1", 0.0, "linear", "loss per N.m of gear-mesh torque when the motor drives"),
        _P("mesh_friction_back", "1", 0.0, "linear", "loss per N.m of gear-mesh torque when the load backdrives"),
        _P("mesh_friction_static", "1", 0.0, "linear",
           "extra gear-mesh loss per N.m at rest (breakaway, fades with the Stribeck coefficient)"),
        _P("load_friction_motor_quad", "1/(N.m)", 0.0, "linear", "quadratic backdriven-by-motor term at rest"),
        _P("load_friction_external_quad", "1/(N.m)", 0.0, "linear", "quadratic backdriven-by-load term at rest"),
        # --- timing and rig ---
        _P("delay", "s", 0.0, "linear", "command delay (fractional samples allowed)"),
        _P("q_offset", "rad", 0.0, "linear", "offset between encoder zero and gravity vertical"),
        _P("force_offset", "N.m", 0.0, "linear", "constant bias effort (asymmetric friction / cable)"),
        _P("gain_scale", "1", 1.0, "log", "multiplier on the firmware error gain (unknown firmware units)"),
        # --- winding temperature (``+thermal``). Used by +thermal models
        # alone (a static per-joint mask), so these are start values, not off switches: the
        # nominal XM430-W350 of the virtual hardware (synth/truth.py, docs/synth.md) ---
        _P("thermal_resistance", "K/W", 5.0, "log", "winding-to-ambient thermal resistance"),
        _P("thermal_capacitance", "J/K", 30.0, "log", "heat capacity of winding + case"),
        _P("ambient_temperature", "degC", 25.0, "linear", "ambient temperature the winding cools to"),
        _P("resistance_tempco", "1/K", 0.00393, "linear",
           "temperature coefficient of R about 25 degC (copper 0.00393/K)"),
    ]
}

#: Search bounds per actuator scale. "servo": hobby servos on a pendulum (revolute, N.m);
#: "drive": industrial linear drive like EMPS (prismatic, N, kg).
BOUND_PROFILES: dict[str, dict[str, tuple[float, float]]] = {
    "servo": {
        "kt": (0.05, 5.0),
        "R": (0.5, 50.0),
        "current_limit": (0.1, 20.0),
        "source_resistance": (0.0, 5.0),
        "armature": (1e-5, 0.05),
        "backlash": (0.0, 0.1),
        "stiffness": (2.0, 200.0),
        "friction_base": (0.0, 0.5),
        "friction_viscous": (0.0, 0.5),
        "friction_stribeck": (0.0, 0.5),
        "stribeck_velocity": (0.01, 2.0),
        "stribeck_alpha": (1.0, 5.0),
        "load_friction": (0.0, 1.0),
        "load_friction_motor": (0.0, 1.0),
        "load_friction_external": (0.0, 1.0),
        "load_friction_stribeck": (0.0, 1.0),
        "load_friction_motor_stribeck": (0.0, 1.0),
        "load_friction_external_stribeck": (0.0, 1.0),
        "mesh_friction_drive": (0.0, 1.0),
        "mesh_friction_back": (0.0, 1.0),
        "mesh_friction_static": (0.0, 1.0),
        "load_friction_motor_quad": (0.0, 1.0),
        "load_friction_external_quad": (0.0, 1.0),
        "delay": (0.0, 0.05),
        "q_offset": (-0.1, 0.1),
        "force_offset": (-0.2, 0.2),
        "gain_scale": (0.1, 10.0),
        "thermal_resistance": (0.5, 50.0),
        "thermal_capacitance": (1.0, 1000.0),
        "ambient_temperature": (0.0, 60.0),
        "resistance_tempco": (0.0, 0.01),
    },
    "drive": {
        "kt": (0.05, 500.0),
        "R": (0.1, 100.0),
        "current_limit": (0.1, 100.0),
        "source_resistance": (0.0, 10.0),
        "armature": (1.0, 1000.0),
        "backlash": (0.0, 0.005),
        "stiffness": (1e4, 1e8),
        "friction_base": (0.0, 100.0),
        "friction_viscous": (0.0, 1000.0),
        "friction_stribeck": (0.0, 100.0),
        "stribeck_velocity": (1e-4, 1.0),
        "stribeck_alpha": (1.0, 5.0),
        "load_friction": (0.0, 0.5),
        "load_friction_motor": (0.0, 0.5),
        "load_friction_external": (0.0, 0.5),
        "load_friction_stribeck": (0.0, 0.5),
        "load_friction_motor_stribeck": (0.0, 0.5),
        "load_friction_external_stribeck": (0.0, 0.5),
        "mesh_friction_drive": (0.0, 0.5),
        "mesh_friction_back": (0.0, 0.5),
        "mesh_friction_static": (0.0, 0.5),
        "load_friction_motor_quad": (0.0, 0.01),
        "load_friction_external_quad": (0.0, 0.01),
        "delay": (0.0, 0.01),
        "q_offset": (-0.01, 0.01),
        "force_offset": (-50.0, 50.0),
        "gain_scale": (0.1, 10.0),
        "thermal_resistance": (0.01, 10.0),
        "thermal_capacitance": (10.0, 1e5),
        "ambient_temperature": (0.0, 60.0),
        "resistance_tempco": (0.0, 0.01),
    },
}

_PRISMATIC_UNITS = {"N.m/A": "N/A", "N.m/V": "N/V", "kg.m^2": "kg", "rad": "m", "N.m/rad": "N/m",
                    "N.m": "N", "N.m.s/rad": "N.s/m", "rad/s": "m/s", "1/(N.m)": "1/N"}


def unit_for(name: str, joint_type: str = "revolute") -> str:
    """Unit of parameter ``name`` for a joint of type ``joint_type``."""
    unit = PARAMS[name].unit
    return _PRISMATIC_UNITS.get(unit, unit) if joint_type == "prismatic" else unit


def bounds_for(name: str, profile: str) -> tuple[float, float]:
    return BOUND_PROFILES[profile][name]


def neutral_params() -> dict[str, float]:
    """Every parameter at its neutral value (all optional mechanisms off)."""
    return {k: float(p.neutral) for k, p in PARAMS.items()}


def _check() -> None:
    for prof, b in BOUND_PROFILES.items():
        assert set(b) == set(PARAMS), (prof, set(PARAMS) ^ set(b))
        for k, (lo, hi) in b.items():
            assert lo < hi, k
            if PARAMS[k].scale == "log":
                assert lo > 0, k
    assert np.all([isinstance(p.neutral, float) for p in PARAMS.values()])


_check()

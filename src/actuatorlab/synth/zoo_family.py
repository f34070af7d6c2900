"""What a zoo truth shares with the fitted family: its parameters under the models' names, and its mechanisms.

:func:`zoo_params` maps a :class:`~actuatorlab.synth.zoo.ZooActuator`'s physical parameters to the fitted
models' parameter names (output side, :mod:`actuatorlab.models.params`), so a fit on its logs can be scored
parameter by parameter; :func:`zoo_mechanisms` lists its mechanisms and the model parameters that represent
each, so one can say whether a fitted model has them (bench/zoo.py).
"""

from __future__ import annotations

from .zoo import ZooActuator

__all__ = ["zoo_params", "zoo_mechanisms"]


def zoo_params(a: ZooActuator) -> dict[str, tuple[float, str]]:
    """The truth's physical parameters under the fitted models' names, output side: {name: (value, unit)}.

    kt = N kt_m (at 20 degC), R (20 degC), armature = N^2 J_m + J_g, friction_base = F_c, friction_stribeck = F_s,
    stribeck_velocity, stribeck_alpha, friction_viscous = F_v, mesh_friction_drive / _back = eta_d / eta_b (the
    g-models' driving / backdriving loss), delay = command delay + receive delay (a reading's age shifts the
    logged response like a command delay), source_resistance (voltage drives), current_limit (when it can act),
    backlash and stiffness (two-mass gears). A model shares a parameter when it is free in it.
    """
    g, m, i, s = a.gear, a.motor, a.interface, a.sensors
    out: dict[str, tuple[float, str]] = {
        "armature": (g.reflected_inertia, "kg.m^2"), "friction_base": (g.coulomb, "N.m"),
        "friction_stribeck": (g.stribeck, "N.m"), "stribeck_velocity": (g.stribeck_velocity, "rad/s"),
        "stribeck_alpha": (g.stribeck_alpha, "1"), "friction_viscous": (g.viscous, "N.m.s/rad"),
        "delay": (i.command_delay + s.receive_delay, "s")}
    if not g.rigid:
        out.update(mesh_friction_drive=(g.load_drive, "1"), mesh_friction_back=(g.load_back, "1"),
                   backlash=(g.backlash, "rad"), stiffness=(g.stiffness, "N.m/rad"))
    if m.drive == "voltage":
        out.update(kt=(m.kt * g.ratio, "N.m/A"), R=(m.R, "ohm"))
        if m.source_resistance > 0.0:
            out["source_resistance"] = (m.source_resistance, "ohm")
        if m.supply / m.R >= m.current_limit:  # the clip can act (stall current above it)
            out["current_limit"] = (m.current_limit, "A")
    return out


def zoo_mechanisms(a: ZooActuator) -> dict[str, tuple[str, ...]]:
    """The truth's mechanisms beyond a rigid Coulomb + viscous joint: {mechanism: model parameters any of which
    represents it} (an empty tuple: no fitted model has it)."""
    g, m, i, s = a.gear, a.motor, a.interface, a.sensors
    out: dict[str, tuple[str, ...]] = {}
    if i.command_delay + s.receive_delay > 0.0:
        out["delay"] = ("delay",)
    if g.stribeck > 0.0:
        out["Stribeck"] = ("friction_stribeck",)
    if g.load_drive or g.load_back:
        out["load-dependent friction"] = ("load_friction", "load_friction_motor", "mesh_friction_drive")
    if not g.rigid:
        out["series compliance"] = ("stiffness",)
    if g.backlash > 0.0:
        out["backlash"] = ("backlash",)
    if g.stiffness_cubic > 0.0 or g.hysteresis > 0.0 or g.ripple > 0.0:
        out["hardening / hysteresis / ripple"] = ()
    if m.drive == "voltage" and m.resistance_tempco > 0.0:
        out["R(T)"] = ("thermal_resistance",)
    if m.drive == "foc" and m.kt_temp_coeff > 0.0:
        out["kt(T)"] = ()
    if m.drive == "voltage" and m.source_resistance > 0.0:
        out["bus sag"] = ("source_resistance",)
    if i.law == "dynamixel":
        out["integer P law on counts"] = ()
    if i.law == "feetech":
        out["D term and dead band"] = ()
    if m.drive == "foc" and 1.0 / m.current_bandwidth > 0.01 * i.control_dt:  # a lag the log can see
        out["current-loop lag"] = ("delay",)
    return out

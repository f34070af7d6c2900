"""The actuator zoo: virtual one-joint actuators with a documented truth, on the pendulum bench.

Each zoo member is a :class:`ZooActuator`: frozen dataclasses of physical parameters with units
(:class:`Motor`, :class:`Gear`, :class:`Thermal`, :class:`Interface`, :class:`Sensors`,
:class:`BenchPlan`), validated when built (a non-physical value raises :class:`ZooError` naming the
parameter), and simulated by :func:`actuatorlab.synth.zoo_sim.simulate_zoo` at a physics rate
well above the control rate. The registry :data:`ZOO` maps names to members; :func:`get_actuator`
lists the names when a lookup fails; :func:`actuator_from_dict` builds a member from a spec dict
(the same validation). The truths, their equations and which fitted model can represent each one:
docs/synth.md, "The actuator zoo".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import UnknownNameError
from .suites import SynthError
from .truth import ALPHA_CU

__all__ = ["ZooError", "Motor", "Gear", "Thermal", "Interface", "Sensors", "BenchPlan", "ZooActuator", "ZOO",
           "get_actuator", "actuator_from_dict", "units_of"]


class ZooError(SynthError):
    """A zoo spec is not physical (the message names the parameter) or malformed."""


_POS, _NONNEG, _FRAC, _ANY = "> 0", ">= 0", "in [0, 1)", "finite"


def _p(unit: str, bound: str = _POS, default: Any = dataclasses.MISSING) -> Any:
    """A parameter field: its unit and the bound a physical value satisfies (checked by :func:`_validate`)."""
    return field(default=default, metadata={"unit": unit, "bound": bound})


def _ok(v: float, bound: str) -> bool:
    if not math.isfinite(v):
        return False
    return {_POS: v > 0.0, _NONNEG: v >= 0.0, _FRAC: 0.0 <= v < 1.0}.get(bound, True)


def _validate(obj: Any) -> None:
    """Refuse a non-physical value: :class:`ZooError` naming ``<group>.<parameter>``, its value, unit and bound."""
    group = type(obj).__name__.lower()
    for f in dataclasses.fields(obj):
        bound = f.metadata.get("bound")
        if bound is None:
            continue
        v = getattr(obj, f.name)
        for x in (v if isinstance(v, tuple) else (v,)):
            if isinstance(x, bool) or not isinstance(x, (int, float)):
                raise ZooError(f"{group}.{f.name} must be a number [{f.metadata['unit']}], got {x!r}")
            if not _ok(float(x), bound):
                raise ZooError(f"non-physical parameter {group}.{f.name} = {x!r} [{f.metadata['unit']}]: "
                               f"must be {bound}")


def _choice(obj: Any, name: str, allowed: tuple[str, ...]) -> None:
    v = getattr(obj, name)
    if v not in allowed:
        raise ZooError(f"{type(obj).__name__.lower()}.{name} = {v!r}; allowed: {', '.join(allowed)}")


@dataclass(frozen=True)
class Motor:
    """Motor and drive. Motor-side constants; the gear ratio N turns them into output-side ones.

    voltage drive (H-bridge, PWM duty d, inductance neglected: L/R << the physics step)::

        i = clip((d V_bus - N kt(T) w) / R(T), +-I_max)

    foc drive (field-oriented control: a PI on i_q with Kp = L w_c, Ki = R w_c cancels the
    electrical pole, so the closed loop is a first-order lag of bandwidth w_c; integrated exactly,
    and when the voltage the PI asks for exceeds V_bus / sqrt(3) the RL circuit is integrated
    exactly with the clipped voltage)::

        L di/dt = v - R(T) i - N kt(T) w,   i -> i_ref with time constant 1 / w_c

    R(T) = R (1 + resistance_tempco (T - 20)), kt(T) = kt (1 - kt_temp_coeff (T - 20)); torque on the rotor
    (output side) N kt(T) i.

    Attributes:
        drive: "voltage" (PWM servo) or "foc" (BLDC with a current loop).
        kt: [N.m/A] motor torque constant (= back-EMF constant, SI) at 20 degC, motor side.
        R: [ohm] winding (phase) resistance at 20 degC.
        L: [H] winding inductance (foc; unused by the voltage drive).
        current_limit: [A] driver current clip.
        kt_temp_coeff: [1/K] torque-constant loss per kelvin (magnet flux).
        current_bandwidth: [rad/s] closed-loop current bandwidth w_c (foc; 0 for the voltage drive).
        supply: [V] open-circuit supply voltage.
        source_resistance: [ohm] supply + cable resistance (bus sag).
        resistance_tempco: [1/K] winding resistance rise per kelvin (copper 0.00393; 0: constant R).
    """

    drive: str
    kt: float = _p("N.m/A")
    R: float = _p("ohm")
    L: float = _p("H", _NONNEG)
    current_limit: float = _p("A")
    kt_temp_coeff: float = _p("1/K", _NONNEG)
    current_bandwidth: float = _p("rad/s", _NONNEG)
    supply: float = _p("V")
    source_resistance: float = _p("ohm", _NONNEG)
    resistance_tempco: float = _p("1/K", _NONNEG, ALPHA_CU)

    def __post_init__(self) -> None:
        _choice(self, "drive", ("voltage", "foc"))
        _validate(self)
        if self.drive == "foc" and (self.L <= 0.0 or self.current_bandwidth <= 0.0):
            raise ZooError("non-physical parameter motor.L / motor.current_bandwidth: a foc drive needs both > 0")


@dataclass(frozen=True)
class Gear:
    """Transmission between the rotor (output-side coordinates theta, w) and the link (q, dq).

    Reflected inertia J = N^2 J_m + J_g. Mesh friction budget (BAM form, Duclusaud et al., ICRA 2025)
    with load dependence and asymmetric driving / backdriving efficiency, applied as stick-slip
    (friction can at most stop the rotor in one step)::

        F = F_c + exp(-(|w|/v_s)^alpha) F_s + F_v |w| + |tau_c| (eta_d if driving else eta_b)

    Transmission torque on the link, with a dead band (backlash, Nordin & Gutman 2002), a hardening
    spring (harmonic drive: soft near zero torque, Tuttle & Seering 1996; Taghirad & Belanger 1998)
    and a Dahl hysteresis element z in [-1, 1] on the deflection::

        d = dead zone of (theta - q) of width backlash
        tau_c = k d + k3 d^3 + H z + c (w - dq)      (in contact; 0 inside the dead band)
        dz = (dd / d_h) (1 - z sign(dd))

    Position-dependent ripple on the rotor, a conservative potential (harmonic-drive torque ripple,
    two cycles per wave-generator turn): tau_r = -A sin(n N theta + phi).

    ``rigid``: one body (rotor and link locked, inertia J + I), the members of the fitted family: no
    dead band, spring, hysteresis, ripple, bearing or load-dependent loss (each must be 0), and the
    friction F_c + exp(-(|w|/v_s)^alpha) F_s + F_v |w| applied by the same stick-slip law.

    Attributes:
        ratio: [1] gear ratio N.
        rotor_inertia: [kg.m^2] motor rotor inertia J_m (motor side).
        gear_inertia: [kg.m^2] gear train inertia J_g, output side.
        coulomb: [N.m] Coulomb friction F_c (output side).
        stribeck: [N.m] extra breakaway friction F_s.
        stribeck_velocity: [rad/s] v_s.
        stribeck_alpha: [1] Stribeck exponent.
        viscous: [N.m.s/rad] F_v.
        load_drive: [1] load-dependent loss eta_d while the motor drives the load.
        load_back: [1] eta_b while the load backdrives the motor.
        backlash: [rad] total dead band.
        stiffness: [N.m/rad] series stiffness k at zero deflection.
        stiffness_cubic: [N.m/rad^3] hardening k3 (harmonic drive; 0 otherwise).
        damping: [N.m.s/rad] mesh damping c.
        hysteresis: [N.m] hysteresis torque H (Dahl element).
        hysteresis_deflection: [rad] deflection d_h over which the hysteresis torque builds up.
        ripple: [N.m] ripple amplitude A.
        ripple_cycles: [1] ripple cycles n per motor turn (2 for a harmonic drive).
        ripple_phase: [rad] phi.
        bearing: [N.m] output bearing Coulomb friction on the link (stick-slip).
        rigid: one body (see above); False: the two-mass transmission.
    """

    ratio: float = _p("1")
    rotor_inertia: float = _p("kg.m^2")
    gear_inertia: float = _p("kg.m^2", _NONNEG)
    coulomb: float = _p("N.m", _NONNEG)
    stribeck: float = _p("N.m", _NONNEG)
    stribeck_velocity: float = _p("rad/s")
    stribeck_alpha: float = _p("1")
    viscous: float = _p("N.m.s/rad", _NONNEG)
    load_drive: float = _p("1", _FRAC)
    load_back: float = _p("1", _FRAC)
    backlash: float = _p("rad", _NONNEG)
    stiffness: float = _p("N.m/rad")
    stiffness_cubic: float = _p("N.m/rad^3", _NONNEG, 0.0)
    damping: float = _p("N.m.s/rad", _NONNEG, 0.0)
    hysteresis: float = _p("N.m", _NONNEG, 0.0)
    hysteresis_deflection: float = _p("rad", _POS, 1e-4)
    ripple: float = _p("N.m", _NONNEG, 0.0)
    ripple_cycles: float = _p("1", _NONNEG, 0.0)
    ripple_phase: float = _p("rad", _ANY, 0.0)
    bearing: float = _p("N.m", _NONNEG, 0.0)
    rigid: bool = False

    def __post_init__(self) -> None:
        _validate(self)
        if self.rigid:
            extra = [n for n in ("backlash", "stiffness_cubic", "hysteresis", "ripple", "bearing", "load_drive",
                                 "load_back") if getattr(self, n) != 0.0]
            if extra:
                raise ZooError(f"gear.rigid: a rigid transmission has no {', '.join(extra)} (set them to 0)")

    @property
    def reflected_inertia(self) -> float:
        """[kg.m^2] N^2 J_m + J_g: the rotor and gears seen from the output."""
        return self.ratio ** 2 * self.rotor_inertia + self.gear_inertia


@dataclass(frozen=True)
class Thermal:
    """First-order winding temperature: C dT/dt = i^2 R(T) - (T - T_amb) / R_th (exact per log period).

    Attributes:
        thermal_resistance: [K/W] winding to ambient.
        thermal_capacitance: [J/K] winding.
        ambient: [degC] ambient temperature.
        start_rise: [K] winding temperature above ambient at the start of a session.
    """

    thermal_resistance: float = _p("K/W")
    thermal_capacitance: float = _p("J/K")
    ambient: float = _p("degC", _ANY, 24.0)
    start_rise: float = _p("K", _NONNEG, 5.0)

    def __post_init__(self) -> None:
        _validate(self)


#: interface laws: Dynamixel P law on counts, the same P law in floating point on the true angle (the
#: fitted family's law), Feetech P+D law with a dead band, drive-side PD, the family's PD on the true
#: state, torque command
LAWS = ("dynamixel", "dynamixel_float", "feetech", "pd", "pd_float", "torque")


@dataclass(frozen=True)
class Interface:
    """What the device does with a host command (the control law at the interface).

    * dynamixel: PWM = trunc(kp (goal - present) / 256) counts of 885 (Duclusaud et al., ICRA 2025;
      ROBOTIS X-series control table), duty = PWM / 885.
    * dynamixel_float: duty = clip(kp g_e (goal - q), +-1) with g_e = 4096 / (2 pi 256 885) on the true
      angle q, in floating point: the law of the fitted family (models/control.py ``dynamixel_pwm``); the
      PWM register logs trunc(885 duty).
    * feetech: PWM = trunc((kp e - kd (present - present_prev)) / 4) in 0.1 % of full duty, |PWM| <= 1000,
      0 while |e| <= dead band counts (Feetech STS: P, D and dead-band registers; the scaling 1/4 makes
      duty ~= 0.166 kp e[rad] like BAM's Feetech error gain; the firmware is closed: an assumption).
    * pd: tau = clip(kp (q_t - q_enc) - kd v_est, +-effort_limit), then i_ref = tau / (N kt(T)) (a BLDC
      drive in position-PD mode; kp [N.m/rad], kd [N.m.s/rad]).
    * pd_float: tau = clip(kp (q_t - q) - kd dq, +-effort_limit) on the true angle and velocity, then
      i_ref = tau / (N kt(T)): the family's ``pd`` law (models/control.py ``pd_effort``).
    * torque: i_ref = tau_cmd / (N kt(T)) (torque mode; the host command is the torque).

    Attributes:
        law: one of :data:`LAWS`.
        control_dt: [s] period of the device's control loop.
        command_delay: [s] host-to-device delay of a command (bus + firmware).
        deadband: [counts] feetech dead band.
        kd_register: feetech D gain register.
        effort_limit: [N.m] pd/torque command clip.
    """

    law: str
    control_dt: float = _p("s")
    command_delay: float = _p("s", _NONNEG)
    deadband: float = _p("counts", _NONNEG, 0.0)
    kd_register: float = _p("1", _NONNEG, 0.0)
    effort_limit: float = _p("N.m", _POS, 1e9)

    def __post_init__(self) -> None:
        _choice(self, "law", LAWS)
        _validate(self)


#: encodings of the device's PWM/load register as the host reads it
PWM_REGISTERS = ("none", "dynamixel_uint16", "feetech_sign_magnitude")


@dataclass(frozen=True)
class Sensors:
    """What the host logs, and how.

    Timestamps t_k = k log_dt + e_k, e_k ~ N(0, jitter) clipped to +-0.3 log_dt (e_0 = 0); a reading
    stamped t_k describes the device at t_k - receive_delay; the command of sample k is sent at t_k.

    Attributes:
        encoder_counts: [counts/rev] position encoder resolution.
        encoder_side: "output" (on the link shaft) or "motor" (rotor, divided by N: blind to backlash).
        log_dt: [s] nominal log period.
        jitter: [s] timestamp jitter (standard deviation).
        receive_delay: [s] age of a reading at its timestamp.
        velocity_unit: [rad/s] velocity register unit.
        velocity_window: [s] firmware finite-difference window of the velocity estimate.
        current_unit: [A] current register unit (0: the device reports no current).
        current_noise: [A] current sensor noise (standard deviation).
        pwm_register: how the device reports its duty (one of :data:`PWM_REGISTERS`).
        voltage_unit: [V] supply register unit.
        temperature_unit: [degC] temperature register unit.
    """

    encoder_counts: float = _p("counts/rev")
    encoder_side: str = "output"
    log_dt: float = _p("s", _POS, 0.005)
    jitter: float = _p("s", _NONNEG, 0.0)
    receive_delay: float = _p("s", _NONNEG, 0.0)
    velocity_unit: float = _p("rad/s", _POS, 1e-3)
    velocity_window: float = _p("s", _POS, 0.01)
    current_unit: float = _p("A", _NONNEG, 0.0)
    current_noise: float = _p("A", _NONNEG, 0.0)
    pwm_register: str = "none"
    voltage_unit: float = _p("V", _POS, 0.1)
    temperature_unit: float = _p("degC", _POS, 1.0)

    def __post_init__(self) -> None:
        _choice(self, "encoder_side", ("output", "motor"))
        _choice(self, "pwm_register", PWM_REGISTERS)
        _validate(self)


@dataclass(frozen=True)
class BenchPlan:
    """The pendulum bench and the conditions of the ``bench`` suite.

    The link: a point mass at ``length`` plus a uniform arm; q = 0 hangs down, positive counter-clockwise
    (the BAM bench convention). Inertia m l^2 + m_a l^2 / 3, gravity torque -(m l + m_a l / 2) g sin(q).

    Attributes:
        length: [m] pivot to mass.
        mass: [kg] training mass.
        heldout_masses: [kg] masses only in ``heldout/load``.
        gains: training kp values (the interface's units: register units, or N.m/rad for pd).
        heldout_gains: kp values only in ``heldout/gain``.
        arm_mass: [kg] mass of the arm.
        kd_per_kp: [s] pd only: kd = kd_per_kp * kp.
        amplitude: [rad] excitation amplitude (pi/2 on the XL330 bench).
    """

    length: float = _p("m")
    mass: float = _p("kg")
    heldout_masses: tuple[float, ...] = _p("kg")
    gains: tuple[float, ...] = _p("1")
    heldout_gains: tuple[float, ...] = _p("1")
    arm_mass: float = _p("kg", _NONNEG, 0.0)
    kd_per_kp: float = _p("s", _NONNEG, 0.0)
    amplitude: float = _p("rad", _POS, math.pi / 2)

    def __post_init__(self) -> None:
        _validate(self)
        if not self.gains:
            raise ZooError("bench.gains must hold at least one training gain")


_GROUPS: dict[str, type] = {"motor": Motor, "gear": Gear, "thermal": Thermal, "interface": Interface,
                            "sensors": Sensors, "bench": BenchPlan}


@dataclass(frozen=True)
class ZooActuator:
    """One virtual actuator: its parameter groups, the log Setup names and its documentation.

    Attributes:
        name: registry name.
        title: one line.
        actuator: ``Setup.actuator`` of its logs.
        controller: ``Setup.controller`` (a control law `fit` knows: dynamixel_pwm, feetech_pwm, pd).
        motor, gear, thermal, interface, sensors, bench: the parameter groups.
        family: which fitted model can represent it (or why none can).
        sources: where the numbers and laws come from.
        member: the fitted model the truth is a member of ("" when none: outside the family).
        physics_dt: [s] the truth's integration step (0: 0.5 ms for a voltage drive, 0.2 ms for foc); a
            member of the family steps at its control period, like the fitted model.
    """

    name: str
    title: str
    actuator: str
    controller: str
    motor: Motor
    gear: Gear
    thermal: Thermal
    interface: Interface
    sensors: Sensors
    bench: BenchPlan
    family: str = ""
    sources: tuple[str, ...] = ()
    member: str = ""
    physics_dt: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.physics_dt) and self.physics_dt >= 0.0):
            raise ZooError(f"non-physical parameter physics_dt = {self.physics_dt!r} [s]: must be >= 0")
        if self.interface.law in ("dynamixel", "dynamixel_float", "feetech") and self.motor.drive != "voltage":
            raise ZooError(f"{self.name}: a {self.interface.law} servo firmware drives a voltage (PWM) motor")
        if self.interface.law in ("pd", "pd_float", "torque") and self.motor.drive != "foc":
            raise ZooError(f"{self.name}: a {self.interface.law} interface needs a foc drive")

    def to_dict(self) -> dict[str, Any]:
        """The documented truth, JSON-ready: {group: {parameter: value}} plus names and text."""
        return dataclasses.asdict(self)


def units_of(group: str) -> dict[str, str]:
    """{parameter: unit} of a parameter group ("motor", "gear", ...)."""
    return {f.name: f.metadata["unit"] for f in dataclasses.fields(_GROUPS[group]) if "unit" in f.metadata}


def actuator_from_dict(d: dict[str, Any]) -> ZooActuator:
    """A :class:`ZooActuator` from a spec dict (the layout of :meth:`ZooActuator.to_dict`); unknown keys and
    non-physical values raise :class:`ZooError` naming the parameter."""
    if not isinstance(d, dict):
        raise ZooError("a zoo spec must be a mapping")
    kw: dict[str, Any] = {}
    for key, value in d.items():
        cls = _GROUPS.get(key)
        if cls is None:
            if key not in {f.name for f in dataclasses.fields(ZooActuator)}:
                raise ZooError(f"unknown zoo spec key {key!r}")
            kw[key] = tuple(value) if key == "sources" else value
            continue
        names = {f.name for f in dataclasses.fields(cls)}
        bad = set(value) - names
        if bad:
            raise ZooError(f"unknown {key} parameter(s) {', '.join(sorted(bad))}; known: {', '.join(sorted(names))}")
        kw[key] = cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in value.items()})
    return ZooActuator(**kw)


def get_actuator(name: str) -> ZooActuator:
    """The zoo member called ``name``; an unknown name raises :class:`UnknownNameError` listing the names."""
    try:
        return ZOO[name]
    except KeyError:
        raise UnknownNameError("actuator", name, list(ZOO)) from None


_BAM = "Duclusaud et al., Extended Friction Models for the Physics Simulation of Servo Actuators, ICRA 2025"

ZOO: dict[str, ZooActuator] = {
    "xl330_like": ZooActuator(
        "xl330_like", "Dynamixel XL330-M288-like servo, PWM position mode, on the BAM pendulum (0.49 kg at 0.10 m, "
        "7.4 V)", "xl330_like", "dynamixel_pwm",
        Motor("voltage", kt=0.354 / 288.35, R=3.4, L=0.0, current_limit=1.8, kt_temp_coeff=0.0011,
              current_bandwidth=0.0, supply=7.4, source_resistance=0.3),
        Gear(ratio=288.35, rotor_inertia=2.4e-8, gear_inertia=2e-4, coulomb=0.035, stribeck=0.03,
             stribeck_velocity=0.1, stribeck_alpha=1.5, viscous=0.012, load_drive=0.10, load_back=0.20,
             backlash=0.006, stiffness=30.0, damping=0.01, bearing=0.003),
        Thermal(thermal_resistance=8.0, thermal_capacitance=6.0),
        Interface("dynamixel", control_dt=0.001, command_delay=0.005),
        Sensors(encoder_counts=4096, log_dt=0.005, jitter=0.0005, receive_delay=0.003,
                velocity_unit=0.229 * 2 * math.pi / 60, velocity_window=0.01, current_unit=0.001,
                current_noise=0.004, pwm_register="dynamixel_uint16"),
        BenchPlan(length=0.10, mass=0.49, heldout_masses=(0.29, 0.69), gains=(200.0, 400.0, 800.0),
                  heldout_gains=(100.0, 1200.0), amplitude=math.pi / 2),
        family="m5/m6+delay (voltage drive, P law, Stribeck, directional load friction, delay) approaches it; "
               "backlash, series compliance, stick-slip and R(T) are not in m*: +backlash and +thermal add them",
        sources=(_BAM, "ROBOTIS e-Manual XL330-M288-T: 0.52 N.m stall at 1.47 A (5 V), ratio 288.35")),
    "xl330_family": ZooActuator(
        "xl330_family", "the XL330-like servo reduced to a member of the fitted family (m2+delay): float P law on "
        "the true angle, rigid gear, Coulomb + Stribeck + viscous friction, constant R and kt, no bus sag, "
        "10 ms command delay, quantised encoder", "xl330_family", "dynamixel_pwm",
        Motor("voltage", kt=0.354 / 288.35, R=3.4, L=0.0, current_limit=100.0, kt_temp_coeff=0.0,
              current_bandwidth=0.0, supply=7.4, source_resistance=0.0, resistance_tempco=0.0),
        Gear(ratio=288.35, rotor_inertia=2.4e-8, gear_inertia=2e-4, coulomb=0.035, stribeck=0.03,
             stribeck_velocity=0.1, stribeck_alpha=1.5, viscous=0.012, load_drive=0.0, load_back=0.0,
             backlash=0.0, stiffness=30.0, rigid=True),
        Thermal(thermal_resistance=8.0, thermal_capacitance=6.0),
        Interface("dynamixel_float", control_dt=0.005, command_delay=0.010),
        Sensors(encoder_counts=4096, log_dt=0.005, jitter=0.0, receive_delay=0.0,
                velocity_unit=0.229 * 2 * math.pi / 60, velocity_window=0.01, current_unit=0.001,
                current_noise=0.004, pwm_register="dynamixel_uint16"),
        BenchPlan(length=0.10, mass=0.49, heldout_masses=(0.29, 0.69), gains=(200.0, 400.0, 800.0),
                  heldout_gains=(100.0, 1200.0), amplitude=math.pi / 2),
        family="a member: m2+delay at kt = N kt_m, R, armature = N^2 J_m + J_g, friction_base = F_c, "
               "friction_stribeck = F_s, stribeck_velocity, stribeck_alpha, friction_viscous = F_v, delay = the "
               "command delay (the family's law, rigid one-body step at the control period; every richer "
               "model contains it)",
        sources=(_BAM, "the xl330_like truth with every mechanism outside m2+delay switched off"),
        member="m2+delay", physics_dt=0.005),
    "bldc_family": ZooActuator(
        "bldc_family", "the BLDC joint module reduced to a member of the fitted family (pd m2+delay): PD on the "
        "true state at the 2 ms log period, ideal current loop, rigid gear, Coulomb + Stribeck + viscous friction, "
        "4 ms command delay, quantised output encoder", "bldc_family", "pd",
        Motor("foc", kt=0.068, R=0.17, L=1e-6, current_limit=40.0, kt_temp_coeff=0.0, current_bandwidth=1e7,
              supply=48.0, source_resistance=0.0, resistance_tempco=0.0),
        Gear(ratio=6.0, rotor_inertia=5e-5, gear_inertia=2e-4, coulomb=0.08, stribeck=0.04, stribeck_velocity=0.2,
             stribeck_alpha=1.5, viscous=0.02, load_drive=0.0, load_back=0.0, backlash=0.0, stiffness=600.0,
             rigid=True),
        Thermal(thermal_resistance=3.0, thermal_capacitance=40.0),
        Interface("pd_float", control_dt=0.002, command_delay=0.004, effort_limit=16.0),
        Sensors(encoder_counts=16384, log_dt=0.002, jitter=0.0, receive_delay=0.0, velocity_unit=1e-3,
                velocity_window=0.002, current_unit=0.01, current_noise=0.1),
        BenchPlan(length=0.2, mass=1.0, heldout_masses=(0.5, 2.0), gains=(20.0, 40.0), heldout_gains=(10.0, 80.0),
                  kd_per_kp=0.025, amplitude=1.0),
        family="a member: pd m2+delay at armature = N^2 J_m + J_g, friction_base = F_c, friction_stribeck = F_s, "
               "stribeck_velocity, stribeck_alpha, friction_viscous = F_v, delay = the command delay (the effort "
               "drive: the motor constants drop out)",
        sources=("the bldc_module truth with every mechanism outside pd m2+delay switched off",),
        member="m2+delay", physics_dt=0.002),
    "sts3250_like": ZooActuator(
        "sts3250_like", "Feetech STS3250-like servo: P+D firmware with a dead band, 345:1 metal spur train, 12 V, "
        "on the BAM STS bench (1.13 kg at 0.12 m)", "sts3250_like", "feetech_pwm",
        Motor("voltage", kt=1.5 / 345.0, R=3.5, L=0.0, current_limit=3.5, kt_temp_coeff=0.0011,
              current_bandwidth=0.0, supply=12.0, source_resistance=0.2),
        Gear(ratio=345.0, rotor_inertia=1.7e-7, gear_inertia=5e-4, coulomb=0.12, stribeck=0.08,
             stribeck_velocity=0.08, stribeck_alpha=2.0, viscous=0.10, load_drive=0.15, load_back=0.25,
             backlash=0.0087, stiffness=150.0, damping=0.05, bearing=0.005),
        Thermal(thermal_resistance=5.0, thermal_capacitance=20.0),
        Interface("feetech", control_dt=0.001, command_delay=0.008, deadband=1.0, kd_register=32.0),
        Sensors(encoder_counts=4096, log_dt=0.02, jitter=0.002, receive_delay=0.01,
                velocity_unit=2 * math.pi / 4096, velocity_window=0.02,
                pwm_register="feetech_sign_magnitude"),
        BenchPlan(length=0.12, mass=1.13, heldout_masses=(0.8, 1.5), gains=(32.0,), heldout_gains=(16.0, 48.0),
                  amplitude=math.pi / 3),
        family="feetech_pwm m4/m5+gain+delay approaches it; the D term and the dead band are not in the law "
               "(the fit absorbs the D term into viscous friction), backlash needs +backlash",
        sources=(_BAM, "Feetech STS3250 data: 50 kg.cm at 12 V (magnitudes, not measurements)")),
    "bldc_module": ZooActuator(
        "bldc_module", "quadruped/humanoid BLDC joint module: 6:1 planetary, FOC current loop (1 kHz bandwidth), "
        "position PD on the drive, motor-side encoder", "bldc_module", "pd",
        Motor("foc", kt=0.068, R=0.17, L=6e-5, current_limit=40.0, kt_temp_coeff=0.0012,
              current_bandwidth=2 * math.pi * 1000, supply=24.0, source_resistance=0.05),
        Gear(ratio=6.0, rotor_inertia=5e-5, gear_inertia=2e-4, coulomb=0.08, stribeck=0.04, stribeck_velocity=0.2,
             stribeck_alpha=1.5, viscous=0.02, load_drive=0.05, load_back=0.08, backlash=0.004, stiffness=600.0,
             damping=0.3, bearing=0.01),
        Thermal(thermal_resistance=3.0, thermal_capacitance=40.0),
        Interface("pd", control_dt=0.0005, command_delay=0.001, effort_limit=16.0),
        Sensors(encoder_counts=16384, encoder_side="motor", log_dt=0.002, jitter=0.0002, receive_delay=0.0005,
                velocity_unit=1e-3, velocity_window=0.002, current_unit=0.01, current_noise=0.1),
        BenchPlan(length=0.2, mass=1.0, heldout_masses=(0.5, 2.0), gains=(20.0, 40.0), heldout_gains=(10.0, 80.0),
                  kd_per_kp=0.025, amplitude=1.0),
        family="pd m2/m4 (effort drive; motor constants drop out) fits the rigid part; the current-loop lag "
               "is close to +delay; backlash hidden by the motor-side encoder needs +backlash",
        sources=("Katz, Mini Cheetah actuator (MIT, 2018): 6:1 planetary, motor-side encoder, drive-side PD",
                 "FOC current PI with pole-zero cancellation: closed loop = first order of bandwidth w_c")),
    "high_gear": ZooActuator(
        "high_gear", "legged-robot high-gear actuator: 50:1 gearbox with load-dependent friction, backlash, "
        "series spring (SEA), reflected inertia N^2 J_m, winding temperature; FOC + position PD",
        "high_gear", "pd",
        Motor("foc", kt=0.05, R=0.4, L=2e-4, current_limit=20.0, kt_temp_coeff=0.0012,
              current_bandwidth=2 * math.pi * 500, supply=48.0, source_resistance=0.1),
        Gear(ratio=50.0, rotor_inertia=1.2e-5, gear_inertia=1e-3, coulomb=0.5, stribeck=0.3, stribeck_velocity=0.1,
             stribeck_alpha=1.5, viscous=0.5, load_drive=0.15, load_back=0.25, backlash=0.003, stiffness=300.0,
             damping=0.5, bearing=0.02),
        Thermal(thermal_resistance=2.0, thermal_capacitance=15.0, start_rise=10.0),
        Interface("pd", control_dt=0.001, command_delay=0.002, effort_limit=45.0),
        Sensors(encoder_counts=65536, log_dt=0.0025, jitter=0.0003, receive_delay=0.001, velocity_unit=1e-3,
                velocity_window=0.005, current_unit=0.01, current_noise=0.05),
        BenchPlan(length=0.3, mass=2.0, arm_mass=0.5, heldout_masses=(1.0, 3.0), gains=(100.0, 200.0),
                  heldout_gains=(50.0, 400.0), kd_per_kp=0.02, amplitude=1.0),
        family="pd g1+delay+backlash comes closest (gear-mesh loss on the carried torque, dead band + series "
               "stiffness), then m5+delay+backlash (directional load friction); "
               "the motor-side R(T)/kt(T) need +thermal, which the effort drive does not expose: none is exact",
        sources=("Hwangbo et al., Learning agile and dynamic motor skills for legged robots, Sci. Robotics 2019",
                 "Pratt & Williamson, Series elastic actuators, IROS 1995", _BAM)),
    "harmonic_drive": ZooActuator(
        "harmonic_drive", "harmonic-drive joint (eRob80:100-like): hardening flexspline compliance soft near zero "
        "torque, Dahl hysteresis, torque ripple at 2 cycles per wave-generator turn; FOC + position PD",
        "harmonic_drive", "pd",
        Motor("foc", kt=0.04, R=0.6, L=4e-4, current_limit=10.0, kt_temp_coeff=0.0012,
              current_bandwidth=2 * math.pi * 800, supply=48.0, source_resistance=0.1),
        Gear(ratio=100.0, rotor_inertia=1.5e-5, gear_inertia=0.0, coulomb=1.0, stribeck=0.5, stribeck_velocity=0.05,
             stribeck_alpha=1.5, viscous=1.0, load_drive=0.10, load_back=0.20, backlash=0.0, stiffness=2500.0,
             stiffness_cubic=1.5e9, damping=2.0, hysteresis=0.8, hysteresis_deflection=2e-4, ripple=0.3,
             ripple_cycles=2.0, bearing=0.05),
        Thermal(thermal_resistance=1.5, thermal_capacitance=60.0),
        Interface("pd", control_dt=0.001, command_delay=0.002, effort_limit=38.0),
        Sensors(encoder_counts=524288, log_dt=0.0025, jitter=0.0003, receive_delay=0.001, velocity_unit=1e-4,
                velocity_window=0.005, current_unit=0.01, current_noise=0.03),
        BenchPlan(length=0.3, mass=3.0, arm_mass=0.5, heldout_masses=(1.5, 5.0), gains=(150.0, 300.0),
                  heldout_gains=(75.0, 600.0), kd_per_kp=0.02, amplitude=1.0),
        family="pd m4+compliance captures the linear part of the flexspline; the hardening, the hysteresis "
               "and the ripple are outside the family (none represents them)",
        sources=("Tuttle & Seering, A nonlinear model of a harmonic drive gear transmission, IEEE T-RA 1996",
                 "Taghirad & Belanger, Modeling and parameter identification of harmonic drive systems, "
                 "ASME JDSMC 1998", _BAM)),
}


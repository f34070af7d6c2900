"""Ground truth of the virtual hardware: one Dynamixel XM430-W350 per joint, in NumPy.

Every model function here is pure and works on one joint with plain Python floats (the simulator
calls them at 2 kHz for each joint, where NumPy's per-call overhead on 4-element arrays would cost
more than the physics). Parameters come from :class:`JointTruth`. The chain for one joint,
evaluated at the physics rate by :mod:`actuatorlab.synth.simulate`, is::

    host command --delay--> Goal Position (counts) --firmware P law--> PWM duty --H-bridge-->
    DC motor (back-EMF, R(T), current limit) --tau_em--> rotor + gears (inertia J_m, friction with
    Stribeck/Coulomb/viscous/asymmetric mesh loss) --backlash + gear stiffness--> output link
    (MuJoCo multibody) --encoder (4096 counts/rev)--> firmware

The ground truth is deliberately richer than the models that actuatorlab fits (two-mass backlash
with a compliant mesh, temperature-dependent R and kt, supply sag, sensor filters and noise); the
equations and their sources are in docs/synth.md.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ENCODER_STEP", "ERROR_GAIN", "PWM_LIMIT", "VELOCITY_UNIT", "CURRENT_UNIT", "VOLTAGE_UNIT",
    "TEMPERATURE_UNIT", "ALPHA_CU", "G",
    "JointTruth", "SupplyTruth", "NOMINAL_XM430_W350", "VARIATION", "NOMINAL_SUPPLY",
    "TRUTH_UNITS", "draw_joint_truths", "draw_supply",
    "encoder_counts", "goal_counts", "firmware_duty", "resistance", "torque_constant", "motor_current",
    "coupling_torque", "friction_budget", "stick_slip", "thermal_step", "servo_constants", "servo_step",
    "BEARING_EPS", "bearing_torque",
]

#: [rad] one encoder count: 4096 counts per revolution (XM430 contactless absolute encoder).
ENCODER_STEP = 2.0 * math.pi / 4096.0
#: [duty/(rad . register unit)] Dynamixel X-series P term to duty: duty = kp * ERROR_GAIN * error.
#: Duclusaud et al., "Extended Friction Models for the Physics Simulation of Servo Actuators",
#: ICRA 2025 (measured on the X series); the same constant as ``models.control.DYNAMIXEL_ERROR_GAIN``.
ERROR_GAIN = (4096.0 / (2.0 * math.pi)) / (256.0 * 885.0)
#: PWM register full scale: duty 1.0 = 885 counts (Present PWM, 0.113 % per count).
PWM_LIMIT = 885
#: [rad/s] Present Velocity unit: 0.229 rev/min.
VELOCITY_UNIT = 0.229 * 2.0 * math.pi / 60.0
#: [A] Present Current unit of the XM430: 2.69 mA.
CURRENT_UNIT = 2.69e-3
#: [V] Present Input Voltage unit: 0.1 V.
VOLTAGE_UNIT = 0.1
#: [degC] Present Temperature unit: 1 degC.
TEMPERATURE_UNIT = 1.0
#: [1/K] temperature coefficient of copper resistance at 20 degC.
ALPHA_CU = 0.00393
#: [m/s^2] standard gravity (the MJCF uses MuJoCo's default 9.81).
G = 9.81


@dataclass(frozen=True)
class JointTruth:
    """Ground-truth parameters of one servo (output side: gear ratio folded in).

    Attributes:
        kt20: [N.m/A] torque constant at 20 degC, equal to the back-EMF constant [V.s/rad].
        kt_temp_coeff: [1/K] relative loss of kt per K above 20 degC (magnet).
        R20: [ohm] winding + driver resistance at 20 degC.
        current_limit: [A] driver over-current clip (binds at stall and when plugging).
        rotor_inertia: [kg.m^2] reflected rotor + gear inertia on the motor side of the backlash.
        output_inertia: [kg.m^2] output gear + horn inertia (MuJoCo joint armature, link side).
        backlash: [rad] full width of the dead band between gear train and output.
        gear_stiffness: [N.m/rad] mesh stiffness once the backlash is taken up.
        gear_damping: [N.m.s/rad] mesh damping while in contact.
        coulomb: [N.m] Coulomb friction of the gear train.
        stribeck: [N.m] extra static friction at rest.
        stribeck_velocity: [rad/s] Stribeck velocity.
        stribeck_alpha: [1] Stribeck shape exponent.
        viscous: [N.m.s/rad] viscous friction of the gear train.
        loss_drive: [1] fraction of the mesh torque lost as friction when the motor drives.
        loss_back: [1] fraction lost when the load backdrives the motor.
        bearing_friction: [N.m] output bearing friction (MuJoCo joint frictionloss, link side).
        delay: [s] command delay from the host write to the firmware's Goal Position.
        thermal_resistance: [K/W] winding to ambient.
        thermal_capacitance: [J/K] winding + case.
        encoder_offset: [rad] offset of the encoder zero from the MJCF joint zero.
        current_offset: [A] bias of the current sensor.
        current_noise: [A] standard deviation of the current-sensor noise.
        current_filter_tau: [s] time constant of the current-sensor low-pass filter.
        velocity_window: [s] window of the firmware's finite-difference velocity.
        velocity_filter_tau: [s] time constant of the firmware's velocity low-pass filter.
    """

    kt20: float
    kt_temp_coeff: float
    R20: float
    current_limit: float
    rotor_inertia: float
    output_inertia: float
    backlash: float
    gear_stiffness: float
    gear_damping: float
    coulomb: float
    stribeck: float
    stribeck_velocity: float
    stribeck_alpha: float
    viscous: float
    loss_drive: float
    loss_back: float
    bearing_friction: float
    delay: float
    thermal_resistance: float
    thermal_capacitance: float
    encoder_offset: float
    current_offset: float
    current_noise: float
    current_filter_tau: float
    velocity_window: float
    velocity_filter_tau: float

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in dataclasses.asdict(self).items()}


#: Units of the :class:`JointTruth` fields (for the dataset card).
TRUTH_UNITS: dict[str, str] = {
    "kt20": "N.m/A", "kt_temp_coeff": "1/K", "R20": "ohm", "current_limit": "A", "rotor_inertia": "kg.m^2",
    "output_inertia": "kg.m^2", "backlash": "rad", "gear_stiffness": "N.m/rad", "gear_damping": "N.m.s/rad",
    "coulomb": "N.m", "stribeck": "N.m", "stribeck_velocity": "rad/s", "stribeck_alpha": "1",
    "viscous": "N.m.s/rad", "loss_drive": "1", "loss_back": "1", "bearing_friction": "N.m", "delay": "s",
    "thermal_resistance": "K/W", "thermal_capacitance": "J/K", "encoder_offset": "rad", "current_offset": "A",
    "current_noise": "A", "current_filter_tau": "s", "velocity_window": "s", "velocity_filter_tau": "s",
}

#: Nominal XM430-W350 at 12 V. Data sheet (ROBOTIS e-Manual, XM430-W350): stall torque 4.1 N.m at
#: 2.3 A, no-load speed 46 rev/min, gear ratio 353.5, X-series backlash 0.25 deg. kt20 = 2.3 and
#: R20 = 5.1 give stall current 12/5.2 = 2.3 A at 25 degC, no-load speed ~4.9 rad/s (46 rev/min =
#: 4.8 rad/s) and, after the 20 % driving mesh loss and the Coulomb/Stribeck friction, a stall
#: torque at the output of (2.3 * 2.3 - 0.1) / 1.2 = 4.3 N.m. The friction, inertia and thermal
#: values are plausible magnitudes for a 350:1 metal spur train (BAM identified 0.05-0.1 N.m Coulomb
#: and 0.01-0.03 kg.m^2 armature on MX-64/MX-106), not measurements of an XM430.
NOMINAL_XM430_W350 = JointTruth(
    kt20=2.30, kt_temp_coeff=0.0011, R20=5.10, current_limit=2.8, rotor_inertia=0.010,
    output_inertia=2.0e-4, backlash=0.0044, gear_stiffness=60.0, gear_damping=0.02, coulomb=0.06,
    stribeck=0.04, stribeck_velocity=0.08, stribeck_alpha=1.5, viscous=0.05, loss_drive=0.20,
    loss_back=0.30, bearing_friction=0.004, delay=0.006, thermal_resistance=5.0,
    thermal_capacitance=30.0, encoder_offset=0.0, current_offset=0.0, current_noise=0.006,
    current_filter_tau=0.002, velocity_window=0.010, velocity_filter_tau=0.008,
)

#: Unit-to-unit variation: field -> ("lognormal", sigma) multiplies the nominal by exp(sigma N(0,1));
#: ("add_uniform", half_width) adds U(-w, w); ("add_normal", sigma) adds sigma N(0,1); absent = fixed.
VARIATION: dict[str, tuple[str, float]] = {
    "kt20": ("lognormal", 0.03), "R20": ("lognormal", 0.05), "current_limit": ("lognormal", 0.03),
    "rotor_inertia": ("lognormal", 0.08), "output_inertia": ("lognormal", 0.10),
    "backlash": ("lognormal", 0.30), "gear_stiffness": ("lognormal", 0.15), "gear_damping": ("lognormal", 0.20),
    "coulomb": ("lognormal", 0.20), "stribeck": ("lognormal", 0.25), "stribeck_velocity": ("lognormal", 0.15),
    "viscous": ("lognormal", 0.20), "loss_drive": ("lognormal", 0.10), "loss_back": ("lognormal", 0.10),
    "bearing_friction": ("lognormal", 0.20), "delay": ("add_uniform", 0.0015),
    "thermal_resistance": ("lognormal", 0.10), "thermal_capacitance": ("lognormal", 0.10),
    "encoder_offset": ("add_uniform", 3.0 * ENCODER_STEP), "current_offset": ("add_normal", 0.008),
}


@dataclass(frozen=True)
class SupplyTruth:
    """The shared 12 V supply: V_bus = v_source - r_source * I_supply.

    Attributes:
        v_source: [V] open-circuit voltage of the power supply.
        r_source: [ohm] source + cable resistance (supply sag under load).
        quiescent_current: [A] per-servo standby current.
        noise: [V] standard deviation of the voltage reading before its 0.1 V quantisation.
    """

    v_source: float
    r_source: float
    quiescent_current: float
    noise: float

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in dataclasses.asdict(self).items()}


NOMINAL_SUPPLY = SupplyTruth(v_source=12.0, r_source=0.25, quiescent_current=0.04, noise=0.03)


def draw_joint_truths(rng: np.random.Generator, names: tuple[str, ...] | list[str],
                      nominal: JointTruth = NOMINAL_XM430_W350) -> dict[str, JointTruth]:
    """One :class:`JointTruth` per joint name, drawn around ``nominal`` with :data:`VARIATION`.

    Draws happen in a fixed order (joint by joint, field by field) so that a seed gives the same units.
    """
    out: dict[str, JointTruth] = {}
    base = dataclasses.asdict(nominal)
    for name in names:
        values: dict[str, Any] = {}
        for f in dataclasses.fields(JointTruth):
            v = float(base[f.name])
            rule = VARIATION.get(f.name)
            if rule is not None:
                kind, w = rule
                if kind == "lognormal":
                    v = v * math.exp(w * rng.standard_normal())
                elif kind == "add_uniform":
                    v = v + rng.uniform(-w, w)
                else:
                    v = v + w * rng.standard_normal()
            values[f.name] = v
        out[name] = JointTruth(**values)
    return out


def draw_supply(rng: np.random.Generator, nominal: SupplyTruth = NOMINAL_SUPPLY) -> SupplyTruth:
    """The supply of one robot: v_source ~ nominal + U(-0.2, 0.2) V, r_source x exp(0.2 N(0,1))."""
    return dataclasses.replace(nominal, v_source=nominal.v_source + rng.uniform(-0.2, 0.2),
                               r_source=nominal.r_source * math.exp(0.2 * rng.standard_normal()))


# ----------------------------------------------------------------------------------------------
# Firmware, motor, transmission, friction, heat: pure functions of one joint (Python floats).
# ----------------------------------------------------------------------------------------------

def encoder_counts(q: float, offset: float) -> int:
    """Encoder reading [counts] of the output angle q [rad]: floor((q + offset) / step).

    The firmware and the log both see ``counts * ENCODER_STEP`` [rad].
    """
    return math.floor((q + offset) / ENCODER_STEP)


def goal_counts(q_target: float) -> int:
    """Goal Position register [counts] written by the host for a target q_target [rad] (rounded)."""
    return round(q_target / ENCODER_STEP)


def firmware_duty(kp: float, goal: int, present: int, enable: float) -> float:
    """Dynamixel X-series position loop in PWM mode, P term only (D = I = 0, no profile).

    duty = clip(kp * ERROR_GAIN * (goal - present) * step, -1, 1), step = 2 pi / 4096 rad, which in
    register units is PWM = kp (goal - present) / 256 counts out of 885 (ERROR_GAIN * step * 885 =
    1/256). The firmware works in integers: PWM = trunc(kp (goal - present) / 256) (C integer division,
    towards zero), clipped to +-885, duty = enable * PWM / 885. Sources: ROBOTIS e-Manual (X-series
    control table: Position P Gain, PWM Limit 885); Duclusaud et al., ICRA 2025 (the error gain).
    The truncation is this generator's assumption (the firmware is closed).
    """
    if enable == 0.0:
        return 0.0
    e = int(round(kp)) * (int(goal) - int(present))
    counts = min(abs(e) // 256, PWM_LIMIT)
    return enable * (counts if e >= 0 else -counts) / PWM_LIMIT


def resistance(R20: float, temperature: float) -> float:
    """Winding resistance [ohm]: R(T) = R20 (1 + 0.00393 (T - 20)), T in degC (copper)."""
    return R20 * (1.0 + ALPHA_CU * (temperature - 20.0))


def torque_constant(kt20: float, coeff: float, temperature: float) -> float:
    """Torque (= back-EMF) constant [N.m/A]: kt(T) = kt20 (1 - coeff (T - 20)) (magnet flux loss)."""
    return kt20 * (1.0 - coeff * (temperature - 20.0))


def motor_current(duty: float, v_bus: float, omega_m: float, kt: float, R: float,
                  current_limit: float, enable: float) -> float:
    """Armature current [A] of the H-bridge-driven DC motor (inductance neglected: L/R << 0.5 ms).

    i = enable * clip((duty V_bus - kt omega_m) / R, -I_max, I_max)
    with omega_m [rad/s] the output-side rotor velocity. Torque disabled opens the bridge: no current,
    no back-EMF braking. Four-quadrant envelope: stall torque kt V / R, no-load speed V / kt.
    """
    if enable == 0.0:
        return 0.0
    return enable * min(max((duty * v_bus - kt * omega_m) / R, -current_limit), current_limit)


def coupling_torque(theta_m: float, omega_m: float, q: float, dq: float, backlash: float,
                    stiffness: float, damping: float) -> float:
    """Torque [N.m] the gear train applies to the output link (minus it acts on the rotor side).

    delta = theta_m - q, b = backlash / 2
    d     = delta - b (delta > b), delta + b (delta < -b), 0 inside the dead band
    tau_c = k d + c (omega_m - dq)       only while in contact (|delta| > b), else 0
    The dead-zone model of backlash (Nordin & Gutman, "Controlling mechanical systems with
    backlash - a survey", Automatica 38, 2002).
    """
    half = 0.5 * backlash
    delta = theta_m - q
    if delta > half:
        return stiffness * (delta - half) + damping * (omega_m - dq)
    if delta < -half:
        return stiffness * (delta + half) + damping * (omega_m - dq)
    return 0.0


def friction_budget(omega_m: float, tau_em: float, tau_c: float, p: JointTruth) -> float:
    """Maximum friction torque [N.m] of the gear train (budget form of Duclusaud et al., ICRA 2025).

    s = exp(-(|omega_m| / v_s)^alpha)                          Stribeck coefficient, 1 at rest
    F = F_c + s F_s + F_v |omega_m|                              Coulomb + Stribeck + viscous
      + |tau_c| * (loss_drive if driving else loss_back)         asymmetric mesh efficiency
    driving: tau_c omega_m > 0 in motion, or tau_em tau_c >= 0 at rest (the motor pushes the load);
    backdriving otherwise (the load turns the motor). tau_c is the torque the mesh carries.
    """
    aw = abs(omega_m)
    s = math.exp(-((aw / p.stribeck_velocity) ** p.stribeck_alpha))
    if aw > 1e-9:
        driving = tau_c * omega_m > 0.0
    else:
        driving = tau_em * tau_c >= 0.0
    mesh = abs(tau_c) * (p.loss_drive if driving else p.loss_back)
    return p.coulomb + s * p.stribeck + p.viscous * aw + mesh


def stick_slip(inertia: float, omega: float, tau_net: float, budget: float, dt: float) -> float:
    """Friction torque [N.m] that can at most stop the rotor within one step (never reverses it).

    tau_stop = J omega / dt + tau_net ;  tau_f = -sign(tau_stop) min(|tau_stop|, F)
    so omega' = omega + (tau_net + tau_f) dt / J lies between 0 and the frictionless value: friction
    only dissipates, and a rotor at rest sticks while |tau_net| <= F.
    """
    tau_stop = inertia * omega / dt + tau_net
    if tau_stop > budget:
        return -budget
    if tau_stop < -budget:
        return budget
    return -tau_stop


def thermal_step(temperature: float, heat: float, ambient: float, r_th: float, c_th: float,
                 dt: float) -> float:
    """First-order thermal model, exact over dt for a constant heat input heat [W]; returns [degC].

    C dT/dt = P - (T - T_amb) / R_th  =>  T(t + dt) = T_ss + (T - T_ss) exp(-dt / (R_th C)),
    T_ss = T_amb + R_th P, with P = i^2 R(T) the Joule heat of the winding.
    """
    t_ss = ambient + r_th * heat
    return t_ss + (temperature - t_ss) * math.exp(-dt / (r_th * c_th))


#: [rad/s] velocity scale of the smoothed output bearing friction -F_b tanh(dq / eps).
BEARING_EPS = 0.02


def bearing_torque(dq: float, bearing_friction: float) -> float:
    """Output bearing friction [N.m] on the link: -F_b tanh(dq / eps), eps = 0.02 rad/s.

    Smoothed Coulomb friction: it always opposes dq (dissipative); with F_b ~ 4 mN.m the explicit
    step stays stable (F_b / eps * h / I_link ~ 0.2).
    """
    return -bearing_friction * math.tanh(dq / BEARING_EPS)


def servo_constants(p: JointTruth) -> tuple[float, ...]:
    """The per-joint constants :func:`servo_step` reads, in its order (a plain tuple: fast to unpack)."""
    return (0.5 * p.backlash, p.gear_stiffness, p.gear_damping, p.rotor_inertia, p.coulomb, p.stribeck,
            p.stribeck_velocity, p.stribeck_alpha, p.viscous, p.loss_drive, p.loss_back, p.current_limit,
            p.bearing_friction)


def servo_step(consts: list[tuple[float, ...]], state: tuple[list[float], list[float], list[float], list[float]],
               drive: tuple[list[float], float, list[float], list[float], list[float]], h: float
               ) -> tuple[list[float], list[float], list[float], list[float], list[float]]:
    """One physics step of every servo: (theta', omega', tau_link, tau_c, i), lists over joints.

    The fused (inlined) form of, per joint,
        tau_c  = coupling_torque(theta, omega, q, dq, backlash, k, c)
        i      = motor_current(duty, v_bus, omega, kt, R, I_max, enable);  tau_em = kt i
        tau_f  = stick_slip(J_m, omega, tau_em - tau_c, friction_budget(omega, tau_em, tau_c), h)
        omega' = omega + h (tau_em - tau_c + tau_f) / J_m ;  theta' = theta + h omega'
        tau_link = tau_c + bearing_torque(dq, F_b)              (the torque on the link)
    written without function calls because it runs 2000 times per simulated second per joint;
    tests/test_synth.py checks it against the functions above. ``consts`` from :func:`servo_constants`;
    state = (theta, omega, q, dq): theta, omega [rad, rad/s] rotor (output side), q, dq link;
    drive = (duty, v_bus, kt, R, enable): duty [1], v_bus [V], kt [N.m/A], R [ohm], enable [0/1]; h [s].
    """
    theta, omega, q, dq = state
    duty, v_bus, kt, R, enable = drive
    exp, tanh, inv_eps = math.exp, math.tanh, 1.0 / BEARING_EPS
    th_out, om_out, tl_out, tc_out, i_out = [], [], [], [], []
    for j in range(len(consts)):
        half, kg, cg, Jm, Fc, Fs, vs, alpha, Fv, ld, lb, ilim, Fb = consts[j]
        th, om = theta[j], omega[j]
        delta = th - q[j]
        if delta > half:
            tc = kg * (delta - half) + cg * (om - dq[j])
        elif delta < -half:
            tc = kg * (delta + half) + cg * (om - dq[j])
        else:
            tc = 0.0
        if enable[j] != 0.0:
            i = (duty[j] * v_bus - kt[j] * om) / R[j]
            i = ilim if i > ilim else (-ilim if i < -ilim else i)
            i *= enable[j]
        else:
            i = 0.0
        tem = kt[j] * i
        aw = om if om >= 0.0 else -om
        if aw > 1e-9:
            driving = tc * om > 0.0
        else:
            driving = tem * tc >= 0.0
        atc = tc if tc >= 0.0 else -tc
        budget = Fc + exp(-((aw / vs) ** alpha)) * Fs + Fv * aw + atc * (ld if driving else lb)
        net = tem - tc
        stop = Jm * om / h + net
        tf = -budget if stop > budget else (budget if stop < -budget else -stop)
        om = om + h * (net + tf) / Jm
        th_out.append(th + h * om)
        om_out.append(om)
        tl_out.append(tc - Fb * tanh(dq[j] * inv_eps))
        tc_out.append(tc)
        i_out.append(i)
    return th_out, om_out, tl_out, tc_out, i_out

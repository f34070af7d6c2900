"""Virtual quadruped hardware, in-air protocol: ANYmal C hung in the air, twelve ANYdrive-like truths.

The truth of every drive is a zoo actuator (:class:`~actuatorlab.synth.zoo.ZooActuator`, the
parameter groups, units and validation of the zoo) simulated by the zoo's rotor step
(:func:`~actuatorlab.synth.zoo_sim.rotor_step`) against MuJoCo's multi-body legs
(:mod:`actuatorlab.synth.legged_sim`). Per joint (output side, theta the rotor, q the link)::

    tau_c = k d + c (w - dq)        d = dead zone of (theta - q) of width b   (SEA spring + backlash)
    F     = F_c + exp(-(|w|/v_s)^a) F_s + F_v |w| + |tau_c| (eta_d | eta_b)  (load-dependent, directional)
    tau_f = stick_slip(J, w, N kt(T) i - tau_c, F);  w += h (N kt(T) i - tau_c + tau_f)/J
    L di/dt = v - R(T) i - N kt(T) w, i -> i_ref (FOC, bandwidth w_c; |v| <= V_bus/sqrt 3: torque-speed limit)
    i_ref = clip(clip(kp (q_t - q_enc) - kd v_est, +-tau_max) / (N kt(T)), +-I_max)   (drive PD, 1 kHz)
    C dT/dt = i^2 R(T) - (T - T_amb)/R_th;  R(T) = R (1 + 0.00393 (T - 20)), kt(T) = kt (1 - c_kt (T - 20))

with the host command (50 Hz, position target, velocity target 0, feed-forward 0) arriving
``command_delay`` after it is sent. Nominal values: :data:`ANYDRIVE`; unit-to-unit variation:
:func:`draw_units`. The protocol (:func:`legged_logs`, :func:`leg_command`): one joint per leg
excited at a time (the base is welded, so the four legs are four independent experiments), inside a
safety box around the standing pose (:data:`SAFETY`). Docs: docs/synth.md, "The legged suite".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .zoo import BenchPlan, Gear, Interface, Motor, Sensors, Thermal, ZooActuator

__all__ = ["LEGGED_SUITE", "ANYDRIVE", "JOINT_TYPES", "SAFETY", "TRAIN_GAIN", "HELDOUT_GAIN", "UNIT_SPREAD",
           "DRIVE_FAMILIES", "DRIVE_LOG_DT", "LeggedLog", "draw_units", "legged_logs", "leg_command"]

#: the suite name on the command line (``synth --robot anymal_c --suite legged``)
LEGGED_SUITE = "legged"
#: joint types, by the suffix of the joint name (hip abduction, hip flexion, knee flexion)
JOINT_TYPES = ("HAA", "HFE", "KFE")
#: (kp [N.m/rad], kd [N.m.s/rad]) of the drive PD: training logs, held-out logs (the policy's gains)
TRAIN_GAIN = (80.0, 2.0)
HELDOUT_GAIN = (40.0, 5.0)


@dataclass(frozen=True)
class Safety:
    """Limits the protocol must never leave (checked on the truth, tests/test_legged_synth.py).

    half_range: joint type -> [rad] half-width of the box around the standing pose;
    command_share: [1] share of the box the commands use (the rest is the margin for overshoot);
    command_speed: [rad/s] cap on the commanded speed; speed: [rad/s] cap on the true joint speed;
    torque: [N.m] cap on the true transmission torque (below the drive's 80 N.m)."""

    half_range: tuple[tuple[str, float], ...] = (("HAA", 0.25), ("HFE", 0.6), ("KFE", 0.6))
    command_share: float = 0.8
    command_speed: float = 2.5
    speed: float = 6.0
    torque: float = 60.0

    def box(self, joint_type: str) -> float:
        return dict(self.half_range)[joint_type]

    def violations(self, extremes: dict[str, float]) -> list[str]:
        """The limits a log's truth extremes (``<type>_max_offset_rad``, ``_speed_rad_s``, ``_torque_nm``) break."""
        out = []
        for jt, half in self.half_range:
            for key, cap in (("offset_rad", half), ("speed_rad_s", self.speed), ("torque_nm", self.torque)):
                if extremes[f"{jt}_max_{key}"] > cap:
                    out.append(f"{jt} {key} {extremes[f'{jt}_max_{key}']:.3g} > {cap:g}")
        return out


SAFETY = Safety()

#: [N.m/rad] the spring constant the drive firmware uses to turn deflection into torque (its calibration)
SPRING_NOMINAL = 250.0

ANYDRIVE = ZooActuator(
    "anydrive_like", "ANYdrive-like series-elastic joint: BLDC + FOC, 50:1 gearbox with load-dependent friction, "
    "backlash, torsional spring (SEA), winding temperature; joint PD in the drive",
    "anydrive", "pd",
    Motor("foc", kt=0.08, R=0.4, L=2e-4, current_limit=20.0, kt_temp_coeff=0.0012,
          current_bandwidth=2 * math.pi * 500, supply=48.0, source_resistance=0.05),
    Gear(ratio=50.0, rotor_inertia=1.2e-5, gear_inertia=1e-3, coulomb=0.4, stribeck=0.3, stribeck_velocity=0.1,
         stribeck_alpha=1.5, viscous=0.4, load_drive=0.10, load_back=0.15, backlash=0.002, stiffness=SPRING_NOMINAL,
         damping=0.5, bearing=0.05),
    Thermal(thermal_resistance=2.0, thermal_capacitance=15.0, start_rise=5.0),
    Interface("pd", control_dt=0.001, command_delay=0.004, effort_limit=80.0),
    Sensors(encoder_counts=2 ** 17, log_dt=0.02, receive_delay=0.001, velocity_unit=1e-3, velocity_window=0.004,
            current_unit=0.01, current_noise=0.05),
    BenchPlan(length=0.3, mass=1.0, heldout_masses=(2.0,), gains=(TRAIN_GAIN[0],), heldout_gains=(HELDOUT_GAIN[0],),
              kd_per_kp=TRAIN_GAIN[1] / TRAIN_GAIN[0], amplitude=0.5),
    family="pd m1+compliance..m3+backlash come closest (spring, dead band, directional load friction); kt(T) behind "
           "the torque loop, the FOC voltage limit and the motor-side dynamics are outside the family: none is exact",
    sources=("Hutter et al., ANYmal - toward legged robots for harsh environments, Advanced Robotics 31(17), 2017",
             "Hwangbo et al., Learning agile and dynamic motor skills for legged robots, Sci. Robotics 2019",
             "Pratt & Williamson, Series elastic actuators, IROS 1995",
             "Duclusaud et al., Extended Friction Models for the Physics Simulation of Servo Actuators, ICRA 2025"),
    physics_dt=0.0005)

#: [1] log-normal spread (sigma of ln) of each unit's parameters around :data:`ANYDRIVE`, and the
#: command delay's uniform spread [s]
UNIT_SPREAD: tuple[tuple[str, str, float], ...] = (
    ("gear", "coulomb", 0.15), ("gear", "stribeck", 0.15), ("gear", "viscous", 0.15), ("gear", "load_drive", 0.15),
    ("gear", "load_back", 0.15), ("gear", "backlash", 0.3), ("gear", "stiffness", 0.08), ("gear", "rotor_inertia", 0.05),
    ("gear", "damping", 0.2), ("motor", "kt", 0.03), ("motor", "R", 0.05), ("thermal", "thermal_resistance", 0.1))
DELAY_SPREAD = 0.001


def draw_units(rng: np.random.Generator, n: int, nominal: ZooActuator = ANYDRIVE) -> tuple[ZooActuator, ...]:
    """``n`` drives drawn around ``nominal`` (:data:`UNIT_SPREAD`; command delay +- :data:`DELAY_SPREAD`),
    validated like every zoo actuator."""
    out = []
    for _ in range(n):
        groups: dict[str, dict[str, Any]] = {"motor": {}, "gear": {}, "thermal": {}}
        for g, k, s in UNIT_SPREAD:
            groups[g][k] = float(getattr(getattr(nominal, g), k) * math.exp(s * rng.standard_normal()))
        delay = float(nominal.interface.command_delay + rng.uniform(-DELAY_SPREAD, DELAY_SPREAD))
        out.append(dataclasses.replace(
            nominal, motor=dataclasses.replace(nominal.motor, **groups["motor"]),
            gear=dataclasses.replace(nominal.gear, **groups["gear"]),
            thermal=dataclasses.replace(nominal.thermal, **groups["thermal"]),
            interface=dataclasses.replace(nominal.interface, command_delay=delay)))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
#: families of the training logs, and the held-out one
TRAIN_FAMILIES = ("chirp", "sweep_slow", "sweep_fast", "reversals")
HELDOUT_FAMILY = "steps"
#: [kg] the training load at each foot, the held-out one
TRAIN_LOAD, HELDOUT_LOAD = 1.0, 2.0
#: [s] log length at scale 1, the shortest scaled one
DURATION, MIN_DURATION = 20.0, 4.0
#: families of the drive-rate logs (split ``drive``: the drives' registers at the drive's own rate, for the
#: drive-side identification of inertia, friction and the spring), their period [s] and length at scale 1 [s]
DRIVE_FAMILIES = ("chirp", "sweep_fast", "reversals")
DRIVE_LOG_DT, DRIVE_DURATION, DRIVE_MIN_DURATION = 0.001, 8.0, 2.0


@dataclass(frozen=True)
class LeggedLog:
    """One log: name, split folder, family, foot load [kg], (kp, kd), rotation k (leg l excites
    joint type JOINT_TYPES[(l + k) % 3]), duration [s], log_dt [s] sample period (None: the host's 50 Hz)."""

    name: str
    split: str
    family: str
    load: float
    gain: tuple[float, float]
    rotation: int
    duration: float
    log_dt: float | None = None

    def excited(self, leg: int) -> str:
        """The joint type leg ``leg`` (0..3) excites."""
        return JOINT_TYPES[(leg + self.rotation) % 3]


def legged_logs(scale: float) -> list[LeggedLog]:
    """The logs of the suite: every family x load x rotation (max(1, round(3 scale)) rotations), durations
    20 s x sqrt(scale), at least 4 s. Train: the four families, no load and 1 kg, training gains;
    heldout/excitation: steps; heldout/load: chirp and sweep_fast at 2 kg; heldout/gain: chirp and
    sweep_slow at the held-out gains; drive (after the others, so their seed streams do not move): chirp,
    sweep_fast and reversals at the training gain, no load, each in all three rotations (every joint excited
    by every family), sampled at the drive's 1 kHz, 8 s x sqrt(scale), at least 2 s."""
    reps = max(1, int(round(3 * scale)))
    dur = round(max(MIN_DURATION, DURATION * math.sqrt(scale)), 2)
    out: list[LeggedLog] = []

    def add(split: str, fam: str, load: float, gain: tuple[float, float]) -> None:
        for k in range(reps):
            tag = f"{fam}_kp{gain[0]:g}_m{load:g}_r{k}".replace(".", "p")
            out.append(LeggedLog(tag, split, fam, load, gain, (k + len(out)) % 3, dur))

    for fam in TRAIN_FAMILIES:
        for load in (0.0, TRAIN_LOAD):
            add("train", fam, load, TRAIN_GAIN)
    add("heldout/excitation", HELDOUT_FAMILY, 0.0, TRAIN_GAIN)
    for fam in ("chirp", "sweep_fast"):
        add("heldout/load", fam, HELDOUT_LOAD, TRAIN_GAIN)
    for fam in ("chirp", "sweep_slow"):
        add("heldout/gain", fam, 0.0, HELDOUT_GAIN)
    d_dur = round(max(DRIVE_MIN_DURATION, DRIVE_DURATION * math.sqrt(scale)), 2)
    for fam in DRIVE_FAMILIES:
        for k in range(3):
            out.append(LeggedLog(f"{fam}_kp{TRAIN_GAIN[0]:g}_1khz_r{k}", "drive", fam, 0.0, TRAIN_GAIN, k, d_dur,
                                 DRIVE_LOG_DT))
    return out


def _smooth_triangle(t: np.ndarray, amp: float, speed: float, offset: float = 0.0) -> np.ndarray:
    """Triangle of amplitude ``amp`` [rad] at ``speed`` [rad/s], corners rounded over 10 % of a ramp."""
    period = 4.0 * amp / speed
    x = np.mod(t / period + 0.25, 1.0)
    tri = amp * (1.0 - 4.0 * np.abs(x - 0.5))
    k = max(1, int(0.1 * period / max(float(t[1] - t[0]), 1e-9)) if t.size > 1 else 1)
    return offset + np.convolve(np.pad(tri, k, mode="edge"), np.ones(2 * k + 1) / (2 * k + 1), mode="valid")


def leg_command(family: str, t: np.ndarray, joint_type: str, rng: np.random.Generator,
                safety: Safety = SAFETY) -> np.ndarray:
    """(T,) [rad] target offset from the standing pose for one excited joint on times ``t`` [s]; every
    value inside ``command_share`` of the safety box, every commanded speed below ``command_speed``.

    chirp: A sin(2 pi (0.2 t + (f1 - 0.2) t^2 / (2 D))), f1 = 3 Hz, A = min(box / 2, 0.9 v_cap / (2 pi f1));
    sweep_slow: triangle over the box at 0.3 rad/s; sweep_fast: sine over 70 % of the box at <= 0.9 v_cap;
    reversals: +-0.05 rad triangles at 0.15 rad/s around random offsets (backlash, stick-slip);
    steps: random levels in 70 % of the box, minimum-jerk moves of 0.4 s, held 0.5-1.5 s (held out).
    (box = ``command_share`` of the safety box; every amplitude times a draw in [0.8, 1].)"""
    box = safety.command_share * safety.box(joint_type)
    v = safety.command_speed
    D = float(t[-1] - t[0]) if t.size > 1 else 1.0
    s = float(rng.uniform(0.8, 1.0))
    if family == "chirp":
        f1 = 3.0
        a = min(0.5 * box, 0.9 * v / (2 * math.pi * f1)) * s
        q = a * np.sin(2 * np.pi * (0.2 * t + (f1 - 0.2) * t ** 2 / (2 * D)))
    elif family == "sweep_slow":
        q = _smooth_triangle(t, box * s, 0.3)
    elif family == "sweep_fast":
        a = 0.7 * box * s
        w = min(0.9 * v / a, 2 * math.pi * 0.8)
        q = a * np.sin(w * t) * np.clip(t / 0.5, 0.0, 1.0)
    elif family == "reversals":
        off = rng.uniform(-0.6 * box, 0.6 * box, size=int(D // 4) + 1)  # a new offset every 4 s, blended over 1 s
        q = off[np.minimum((t // 4.0).astype(int), off.size - 1)]
        q = _smooth_triangle(t, 0.05, 0.15) + np.convolve(np.pad(q, 25, mode="edge"), np.ones(51) / 51, mode="valid")
    elif family == "steps":
        q = np.zeros_like(t)
        t0, level = 0.5, 0.0
        while t0 < D:
            new = float(rng.uniform(-0.7 * box, 0.7 * box))
            x = np.clip((t - t0) / 0.4, 0.0, 1.0)
            q = np.where(t >= t0, level + (new - level) * x ** 3 * (10 - 15 * x + 6 * x ** 2), q)
            level, t0 = new, t0 + 0.4 + float(rng.uniform(0.5, 1.5))
    else:
        raise ValueError(f"unknown legged family {family!r}; known: {', '.join(TRAIN_FAMILIES + (HELDOUT_FAMILY,))}")
    q = np.clip(q, -box, box)
    # the speed cap, enforced on the commanded samples (a limiter the host applies)
    dt = float(t[1] - t[0]) if t.size > 1 else 1.0
    out = np.empty_like(q)
    prev = 0.0
    for k, x in enumerate(q):
        prev = prev + float(np.clip(x - prev, -v * dt, v * dt))
        out[k] = prev
    return out

"""NumPy truth simulator of the zoo actuators (:mod:`actuatorlab.synth.zoo`) on the pendulum bench.

Three time bases: physics (``physics_dt``, 2-5 kHz), the device's control loop (``control_dt``) and the
host log (``log_dt`` with jittered timestamps). One physics step of the two-mass system, rotor
(theta, w: output-side coordinates, inertia J = N^2 J_m + J_g) and link (q, dq, pendulum)::

    tau_c = transmission(theta - q, w - dq, z)              dead band, hardening spring, Dahl hysteresis
    i     = drive(duty | i_ref, w, T)                       H-bridge (voltage) or FOC current loop
    tau_r = -A sin(n N theta + phi)                         ripple (conservative)
    tau_f = stick_slip(J, w, N kt(T) i - tau_c + tau_r, F(w, tau_c))
    w    += h (N kt(T) i - tau_c + tau_r + tau_f) / J;  theta += h w       (semi-implicit Euler)
    dq   += h (tau_c + tau_g(q) + tau_b) / I;  q += h dq;  tau_b = stick_slip on the bearing

The firmware tick (every ``control_dt``) reads the encoder, updates the velocity estimate, the
winding temperature (exact first order over the tick), the bus voltage, and runs the interface law
on the latest host command that has arrived (sent at its timestamp, received ``command_delay`` later).
A log sample stamped t_k holds the registers as they were at t_k - ``receive_delay``.

A rigid gear (``Gear.rigid``: the members of the fitted family) is one body instead, stepped like
``models/actuator.py`` (rigid)::

    F     = F_c + exp(-(|dq|/v_s)^alpha) F_s + F_v |dq|
    tau_f = stick_slip(J + I, dq, tau_m + tau_g(q), F)
    dq   += h (tau_m + tau_g(q) + tau_f) / (J + I);  q += h dq                 (semi-implicit Euler)

The sensor floor of a log (:func:`sensor_floor`) is the truth replayed against its own
measurements: the mean |logged position - true link angle at the log's timestamp| [rad]
(quantisation, the encoder side, the reading's age, the device's tick).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..models.control import DEFAULT_ERROR_GAIN
from .truth import G, stick_slip, thermal_step
from .zoo import ZooActuator

__all__ = ["ZooRun", "ZooResult", "simulate_zoo", "rotor_step", "mechanical_energy", "log_times", "sensor_floor"]

_SQRT3 = math.sqrt(3.0)
#: [duty/(rad . register unit)] the fitted family's Dynamixel error gain (models/control.py)
_ERROR_GAIN = DEFAULT_ERROR_GAIN["dynamixel_pwm"]


@dataclass(frozen=True)
class ZooRun:
    """One log to simulate.

    Attributes:
        command: (T,) host command per log sample: position target [rad] (dynamixel, feetech, pd) or
            torque [N.m] (torque law).
        enable: (T,) torque enable per log sample [0/1].
        kp: gain (the interface's units: register units, N.m/rad for pd).
        kd: [N.m.s/rad] pd only.
        mass: [kg] pendulum mass at the bench length.
        physics_dt: [s] physics step (2-5 kHz; tests may use 1 kHz).
        temperature0: [degC] winding temperature at the start (None: ambient + start rise).
        preroll: [s] settling before the first sample (holding the first command; not logged).
    """

    command: np.ndarray
    enable: np.ndarray
    kp: float
    kd: float = 0.0
    mass: float = 0.0
    physics_dt: float = 0.0005
    temperature0: float | None = None
    preroll: float = 0.3


@dataclass(frozen=True, eq=False)
class ZooResult:
    """One simulated log (T samples).

    Registers as logged: time (T,) [s] (jittered), position (T,) [rad], velocity (T,) [rad/s],
    current (T,) [A] (NaN when not reported), pwm_register (T,) raw register value (NaN when none),
    pwm_duty (T,) [1] decoded (NaN when none), temperature (T,) [degC], supply (T,) [V].
    Truth at the reading instants: q, dq, theta, omega (T,), tau_c (T,) [N.m], i (T,) [A],
    tau_m (T,) [N.m] motor torque on the rotor (output side), temp (T,) [degC], z (T,) hysteresis state.
    q_stamp (T,) [rad] the true link angle at each timestamp t_k (the sensor floor's reference);
    q_read (T,) [rad] at the instant the reading describes, t_k - receive_delay (the delay-free floor's).
    """

    time: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    current: np.ndarray
    pwm_register: np.ndarray
    pwm_duty: np.ndarray
    temperature: np.ndarray
    supply: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    theta: np.ndarray
    omega: np.ndarray
    tau_c: np.ndarray
    i: np.ndarray
    tau_m: np.ndarray
    temp: np.ndarray
    z: np.ndarray
    q_stamp: np.ndarray
    q_read: np.ndarray


class _State(NamedTuple):
    theta: float  # [rad] rotor, output side
    omega: float  # [rad/s]
    q: float  # [rad] link
    dq: float  # [rad/s]
    i: float  # [A] winding current (i_q)
    z: float  # [1] Dahl hysteresis state


class _Plant(NamedTuple):
    """Per-run constants of the physics step."""

    half: float  # [rad] half backlash
    k: float
    k3: float
    c: float
    H: float
    dh: float
    A: float  # ripple amplitude [N.m]
    nN: float  # ripple cycles per output radian of theta
    phi: float
    J: float  # [kg.m^2] reflected inertia
    I: float  # [kg.m^2] link inertia
    mgl: float  # [N.m] gravity torque amplitude
    Fc: float
    Fs: float
    vs: float
    alpha: float
    Fv: float
    eta_d: float
    eta_b: float
    Fb: float
    N: float
    Imax: float
    L: float
    wc: float
    foc: bool
    rigid: bool


def _plant(a: ZooActuator, mass: float) -> _Plant:
    g, m, b = a.gear, a.motor, a.bench
    return _Plant(0.5 * g.backlash, g.stiffness, g.stiffness_cubic, g.damping, g.hysteresis, g.hysteresis_deflection,
                  g.ripple, g.ripple_cycles * g.ratio, g.ripple_phase, g.reflected_inertia,
                  mass * b.length ** 2 + b.arm_mass * b.length ** 2 / 3.0,
                  (mass * b.length + 0.5 * b.arm_mass * b.length) * G, g.coulomb, g.stribeck, g.stribeck_velocity,
                  g.stribeck_alpha, g.viscous, g.load_drive, g.load_back, g.bearing, g.ratio, m.current_limit,
                  m.L, m.current_bandwidth, m.drive == "foc", g.rigid)


def _transmission(p: _Plant, delta: float, rel: float, z: float) -> float:
    """Torque [N.m] the transmission applies to the link: dead band, k d + k3 d^3 + H z + c rel in contact."""
    if delta > p.half:
        d = delta - p.half
    elif delta < -p.half:
        d = delta + p.half
    else:
        return 0.0
    return p.k * d + p.k3 * d * d * d + p.H * z + p.c * rel


def _current(p: _Plant, s: _State, u: float, ke: float, R: float, v_bus: float, h: float, en: float) -> float:
    """Winding current [A] after one step: voltage drive (u = duty) or FOC (u = i_ref), see :class:`~.zoo.Motor`."""
    if en == 0.0:
        return 0.0
    if not p.foc:
        i = (u * v_bus - ke * s.omega) / R
        return p.Imax if i > p.Imax else (-p.Imax if i < -p.Imax else i)
    i = u + (s.i - u) * math.exp(-p.wc * h)
    v = R * i + p.L * (i - s.i) / h + ke * s.omega
    vmax = v_bus / _SQRT3
    if abs(v) > vmax:
        i_ss = (math.copysign(vmax, v) - ke * s.omega) / R
        i = i_ss + (s.i - i_ss) * math.exp(-R * h / p.L)
    return i


def rotor_step(p: _Plant, s: _State, u: float, drive: tuple[float, float, float, float], h: float
               ) -> tuple[float, float, float, float, float]:
    """The rotor half of one physics step (module docstring): transmission torque from the state before
    the step, drive current, ripple, the friction budget with load dependence, stick-slip; drive =
    (kt_out(T) [N.m/A], R(T) [ohm], V_bus [V], enable). Returns (theta [rad], omega [rad/s], i [A] after
    the step, tau_c [N.m] on the link, tau_m [N.m] motor torque). The link side is the caller's: the
    pendulum here, MuJoCo's multi-body dynamics in :mod:`actuatorlab.synth.legged_sim`."""
    kt, R, v_bus, en = drive
    tc = _transmission(p, s.theta - s.q, s.omega - s.dq, s.z)
    i = _current(p, s, u, kt, R, v_bus, h, en)
    tm = kt * i
    tr = -p.A * math.sin(p.nN * s.theta + p.phi) if p.A else 0.0
    aw = abs(s.omega)
    driving = tc * s.omega > 0.0 if aw > 1e-9 else tm * tc >= 0.0
    F = (p.Fc + p.Fs * math.exp(-((aw / p.vs) ** p.alpha)) + p.Fv * aw
         + abs(tc) * (p.eta_d if driving else p.eta_b))
    net = tm - tc + tr
    omega = s.omega + h * (net + stick_slip(p.J, s.omega, net, F, h)) / p.J
    return s.theta + h * omega, omega, i, tc, tm


def _physics_step(p: _Plant, s: _State, u: float, drive: tuple[float, float, float, float], h: float
                  ) -> tuple[_State, float, float]:
    """One step of the two-mass system (:func:`rotor_step`, then the pendulum link); returns (state, tau_c, tau_m)."""
    theta, omega, i, tc, tm = rotor_step(p, s, u, drive, h)
    tl = tc - p.mgl * math.sin(s.q)
    dq = s.dq + h * (tl + stick_slip(p.I, s.dq, tl, p.Fb, h)) / p.I
    q = s.q + h * dq
    z = s.z
    if p.H:
        dd = h * (omega - dq)
        z += dd / p.dh * (1.0 - (z if dd > 0 else -z))
        z = 1.0 if z > 1.0 else (-1.0 if z < -1.0 else z)
    return _State(theta, omega, q, dq, i, z), tc, tm


def _rigid_step(p: _Plant, s: _State, u: float, drive: tuple[float, float, float, float], h: float
                ) -> tuple[_State, float, float]:
    """One step of the one-body joint (``Gear.rigid``), the rigid step of ``models/actuator.py``;
    returns (state, tau_c = 0, tau_m)."""
    kt, R, v_bus, en = drive
    tm = kt * _current(p, s, u, kt, R, v_bus, h, en)
    i = tm / kt
    adq = abs(s.dq)
    F = p.Fc + p.Fs * math.exp(-((adq / p.vs) ** p.alpha)) + p.Fv * adq
    inertia = p.J + p.I
    net = tm - p.mgl * math.sin(s.q)
    dq = s.dq + h * (net + stick_slip(inertia, s.dq, net, F, h)) / inertia
    q = s.q + h * dq
    return _State(q, dq, q, dq, i, 0.0), 0.0, tm


def log_times(T: int, dt: float, jitter: float, rng: np.random.Generator) -> np.ndarray:
    """(T,) [s] host timestamps k dt + e_k, e_k ~ N(0, jitter) clipped to +-0.3 dt, e_0 = 0 (strictly increasing)."""
    e = np.clip(jitter * rng.standard_normal(T), -0.3 * dt, 0.3 * dt)
    e[0] = 0.0
    return np.arange(T) * dt + e


class _Firmware:
    """The device's control loop: encoder, velocity estimate, interface law (state kept between ticks)."""

    def __init__(self, a: ZooActuator, run: ZooRun, h: float):
        self.a, self.run = a, run
        self.step = 2.0 * math.pi / a.sensors.encoder_counts
        self.every = max(1, int(round(a.interface.control_dt / h)))
        self.window = max(1, int(round(a.sensors.velocity_window / a.interface.control_dt)))
        self.hist: list[int] = []
        self.present, self.prev, self.v_est, self.u, self.register = 0, 0, 0.0, 0.0, 0

    def tick(self, s: _State, cmd: float, en: float, kt_out: float) -> float:
        """Read the encoder, update the velocity estimate, run the law; returns the drive input
        (duty [1] or i_ref [A]) and keeps the register value (PWM counts) for the log."""
        a, law = self.a, self.a.interface.law
        angle = s.q if a.sensors.encoder_side == "output" else s.theta
        self.prev, self.present = self.present, math.floor(angle / self.step + 0.5)
        self.hist.append(self.present)
        if len(self.hist) > self.window + 1:
            del self.hist[0]
        self.v_est = (self.present - self.hist[0]) * self.step / (a.interface.control_dt * (len(self.hist) - 1 or 1))
        if law == "dynamixel":
            e = int(round(self.run.kp)) * (round(cmd / self.step) - self.present)
            pwm = min(abs(e) // 256, 885)
            self.register = (pwm if e >= 0 else -pwm) if en else 0
            self.u = self.register / 885.0
        elif law == "dynamixel_float":
            duty = max(-1.0, min(1.0, self.run.kp * _ERROR_GAIN * (cmd - s.q)))
            self.register = int(885.0 * duty) if en else 0
            self.u = duty
        elif law == "feetech":
            e = round(cmd / self.step) - self.present
            raw = 0 if abs(e) <= a.interface.deadband else int(
                (self.run.kp * e - a.interface.kd_register * (self.present - self.prev)) / 4.0)
            self.register = max(-1000, min(1000, raw)) if en else 0
            self.u = self.register / 1000.0
        else:
            if law == "torque":
                tau = cmd
            elif law == "pd_float":
                tau = self.run.kp * (cmd - s.q) - self.run.kd * s.dq
            else:
                tau = self.run.kp * (cmd - self.present * self.step) - self.run.kd * self.v_est
            lim = a.interface.effort_limit
            tau = (lim if tau > lim else (-lim if tau < -lim else tau)) * en
            imax = a.motor.current_limit
            self.u = max(-imax, min(imax, tau / kt_out))
        return self.u


def _decode(a: ZooActuator, reg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(raw register as the host reads it, duty [1]) from the signed PWM counts."""
    kind = a.sensors.pwm_register
    if kind == "dynamixel_uint16":  # Present PWM: int16 stored as uint16, 65535 = -1
        raw = np.mod(reg, 65536).astype(np.float64)
        return raw, np.where(raw >= 32768, raw - 65536, raw) / 885.0
    if kind == "feetech_sign_magnitude":  # Present Load: magnitude in 0.1 %, bit 10 = direction
        raw = (np.abs(reg) + np.where(reg < 0, 1024, 0)).astype(np.float64)
        return raw, np.where(raw >= 1024, -(raw - 1024), raw) / 1000.0
    nan = np.full(reg.shape, np.nan)
    return nan, nan


def simulate_zoo(a: ZooActuator, run: ZooRun, rng: np.random.Generator) -> ZooResult:
    """Simulate one log of actuator ``a`` on its bench; ``rng`` draws the jitter and the sensor noise."""
    h = float(run.physics_dt)
    sen, mot, th = a.sensors, a.motor, a.thermal
    T = int(np.asarray(run.command).shape[0])
    cmd = np.asarray(run.command, dtype=np.float64).tolist()
    enable = np.asarray(run.enable, dtype=np.float64).tolist()
    ts = log_times(T, sen.log_dt, sen.jitter, rng)
    noise = rng.standard_normal((T, 2))
    n_pre = int(round(run.preroll / h))
    arrive = (np.ceil((ts + a.interface.command_delay) / h - 1e-9).astype(np.int64) + n_pre).tolist()
    read = (np.floor((ts - sen.receive_delay) / h + 1e-9).astype(np.int64) + n_pre).clip(0).tolist()
    stamp = (np.floor(ts / h + 1e-9).astype(np.int64) + n_pre).tolist()
    n_steps = max(read[-1], stamp[-1]) + 1
    step = _rigid_step if a.gear.rigid else _physics_step
    p = _plant(a, run.mass)
    fw = _Firmware(a, run, h)
    temp = th.ambient + th.start_rise if run.temperature0 is None else float(run.temperature0)
    q0 = cmd[0] if a.interface.law != "torque" else 0.0
    s = _State(q0, 0.0, q0, 0.0, 0.0, 0.0)
    out = np.zeros((T, 16))
    k_cmd, k_read, k_stamp, heat, v_bus, u, tc, tm = 0, 0, 0, 0.0, mot.supply, 0.0, 0.0, 0.0
    c_now, en_now = cmd[0], enable[0]
    R = mot.R * (1.0 + mot.resistance_tempco * (temp - 20.0))
    kt = mot.kt * a.gear.ratio * (1.0 - mot.kt_temp_coeff * (temp - 20.0))
    for n in range(n_steps):
        if n % fw.every == 0:
            while k_cmd < T and arrive[k_cmd] <= n:
                c_now, en_now = cmd[k_cmd], enable[k_cmd]
                k_cmd += 1
            if n:
                temp = thermal_step(temp, heat / fw.every, th.ambient, th.thermal_resistance,
                                    th.thermal_capacitance, fw.every * h)
                heat = 0.0
            R = mot.R * (1.0 + mot.resistance_tempco * (temp - 20.0))
            kt = mot.kt * a.gear.ratio * (1.0 - mot.kt_temp_coeff * (temp - 20.0))
            i_sup = u * s.i if not p.foc else (R * s.i * s.i + kt * s.omega * s.i) / max(v_bus, 1e-6)
            v_bus = mot.supply - mot.source_resistance * i_sup
            u = fw.tick(s, c_now, en_now, kt)
        while k_stamp < T and stamp[k_stamp] == n:
            out[k_stamp, 14] = s.q  # the link at the timestamp, before this step
            k_stamp += 1
        if k_read < T and read[k_read] == n:
            out[k_read, 15] = s.q  # the link at the instant the reading describes
        s, tc, tm = step(p, s, u, (kt, R, v_bus, en_now), h)
        heat += s.i * s.i * R
        while k_read < T and read[k_read] == n:
            out[k_read, :14] = (fw.present * fw.step, fw.v_est, s.i, fw.register, temp, v_bus, s.q, s.dq, s.theta,
                                s.omega, tc, tm, s.z, kt)
            k_read += 1
    return _result(a, ts, out, noise)


def _result(a: ZooActuator, ts: np.ndarray, out: np.ndarray, noise: np.ndarray) -> ZooResult:
    """Register quantisation and sensor noise on the snapshots (vectorised)."""
    sen = a.sensors

    def quant(x: np.ndarray, unit: float) -> np.ndarray:
        return np.round(x / unit) * unit

    current = (quant(out[:, 2] + sen.current_noise * noise[:, 0], sen.current_unit) if sen.current_unit > 0
               else np.full(ts.shape, np.nan))
    raw, duty = _decode(a, out[:, 3].astype(np.int64))
    return ZooResult(time=ts, position=out[:, 0], velocity=quant(out[:, 1], sen.velocity_unit), current=current,
                     pwm_register=raw, pwm_duty=duty, temperature=quant(out[:, 4], sen.temperature_unit),
                     supply=quant(out[:, 5] + 0.02 * noise[:, 1], sen.voltage_unit), q=out[:, 6], dq=out[:, 7],
                     theta=out[:, 8], omega=out[:, 9], tau_c=out[:, 10], i=out[:, 2], tau_m=out[:, 11],
                     temp=out[:, 4], z=out[:, 12], q_stamp=out[:, 14], q_read=out[:, 15])


def mechanical_energy(a: ZooActuator, mass: float, r: ZooResult) -> np.ndarray:
    """(T,) [J] mechanical energy of the truth: rotor and link kinetic, gravity, transmission spring
    (k d^2/2 + k3 d^4/4 beyond the dead band), Dahl storage H d_h z^2 / 2 and the ripple potential."""
    p = _plant(a, mass)
    delta = r.theta - r.q
    d = np.where(delta > p.half, delta - p.half, np.where(delta < -p.half, delta + p.half, 0.0))
    e = 0.5 * p.J * r.omega ** 2 + 0.5 * p.I * r.dq ** 2 + p.mgl * (1.0 - np.cos(r.q))
    e += 0.5 * p.k * d ** 2 + 0.25 * p.k3 * d ** 4 + 0.5 * p.H * p.dh * r.z ** 2
    if p.A and p.nN:
        e -= p.A / p.nN * np.cos(p.nN * r.theta + p.phi)
    return e


def sensor_floor(r: ZooResult, at: str = "stamp") -> float:
    """[rad] the truth replayed against its own measurements: mean |logged position - true link angle| over
    the log, the angle at the log's timestamps (``at="stamp"``: quantisation, motor-side encoder, reading age,
    device tick) or at the instants the readings describe (``at="reading"``: without the reading age, which a
    model's command delay can absorb)."""
    ref = {"stamp": r.q_stamp, "reading": r.q_read}[at]
    return float(np.mean(np.abs(r.position - ref)))

"""Closed-loop simulation of the virtual hardware: firmware + servos (NumPy/Python) + arm (MuJoCo).

Three rates (:class:`Rates`): physics 2 kHz (MuJoCo ``mj_step`` and the servo model), firmware
1 kHz (encoder read, P law, velocity estimate, supply), log 100 Hz (host command and register reads).
One physics step for joint j, with the link state (q, dq) from MuJoCo and the rotor state
(theta_m, omega_m) integrated here, is::

    tau_c  = coupling_torque(theta_m, omega_m, q, dq)            backlash + mesh stiffness/damping
    i      = motor_current(duty, V_bus, omega_m, kt(T), R(T))    H-bridge + DC motor + current clip
    tau_em = kt(T) i
    tau_f  = stick_slip(J_m, omega_m, tau_em - tau_c, friction_budget(omega_m, tau_em, tau_c))
    omega_m += h (tau_em - tau_c + tau_f) / J_m ;  theta_m += h omega_m       (semi-implicit Euler)
    qfrc_applied[j] = tau_c - F_b tanh(dq / 0.02) [+ restriction on the restricted joint]
    mj_step (semi-implicit Euler, h = 0.5 ms), payload mass and external force in the scene

and once per log period the winding temperature follows :func:`~actuatorlab.synth.truth.thermal_step`
with the period's mean Joule heat (i^2 R sampled at the firmware rate, like the current sensor). All values are recorded at the log instants (after the firmware
tick of that instant), both as the servo registers would report them and as ground truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from .commands import Plan, push_profile
from .robot import Scene
from .truth import (CURRENT_UNIT, ENCODER_STEP, VELOCITY_UNIT, VOLTAGE_UNIT, JointTruth, SupplyTruth,
                    firmware_duty, resistance, servo_constants, servo_step, thermal_step, torque_constant)

__all__ = ["Rates", "Restriction", "SimResult", "simulate"]


@dataclass(frozen=True)
class Rates:
    """Time bases. physics_dt [s]; firmware and log periods as integer multiples of it."""

    physics_dt: float = 0.0005
    firmware_every: int = 2
    log_every: int = 20

    @property
    def firmware_dt(self) -> float:
        return self.physics_dt * self.firmware_every

    @property
    def log_dt(self) -> float:
        return self.physics_dt * self.log_every


@dataclass(frozen=True)
class Restriction:
    """Extra elastic resistance on one joint (a mechanically restricted joint, e.g. a rubber band).

    tau_r = -stiffness (q - anchor) - damping dq, anchor = the joint's first command.

    Attributes:
        joint: joint name.
        stiffness: [N.m/rad].
        damping: [N.m.s/rad].
    """

    joint: str
    stiffness: float
    damping: float


@dataclass(frozen=True, eq=False)
class SimResult:
    """One simulated trajectory on the log grid (T samples; n joints in log order).

    Register-level values (what the servos report):
        time (T,) [s]; goal (T, n) [rad] Goal Position written (rounded to counts);
        position (T, n) [rad] Present Position (encoder counts * step); velocity (T, n) [rad/s]
        Present Velocity (firmware estimate, 0.229 rev/min units); current (T, n) [A] Present Current
        (filtered, offset, noise, 2.69 mA units); pwm (T, n) [1] Present PWM / 885; temperature (T, n)
        [degC] Present Temperature (1 degC units); supply (T,) [V] Present Input Voltage (0.1 V units).
    Ground truth:
        q, dq (T, n) [rad, rad/s] link angle and velocity (MJCF zero); theta_m, omega_m (T, n) rotor
        angle and velocity (output side); tau_c (T, n) [N.m] mesh torque on the link; i_true (T, n) [A];
        temp_true (T, n) [degC] winding temperature; v_bus (T,) [V]; force (T, 3) [N] external force
        on the end effector (base frame); payload (T,) [kg]; energy (T,) [J] total mechanical energy
        (NaN unless recorded); final_temperature (n,) [degC].
    """

    time: np.ndarray
    goal: np.ndarray
    position: np.ndarray
    velocity: np.ndarray
    current: np.ndarray
    pwm: np.ndarray
    temperature: np.ndarray
    supply: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    theta_m: np.ndarray
    omega_m: np.ndarray
    tau_c: np.ndarray
    i_true: np.ndarray
    temp_true: np.ndarray
    v_bus: np.ndarray
    force: np.ndarray
    payload: np.ndarray
    energy: np.ndarray
    final_temperature: np.ndarray


def _total_energy(model: mujoco.MjModel, data: mujoco.MjData, P: list[JointTruth], theta: list[float],
                  omega: list[float], q: list[float], restriction: Restriction | None, r_j: int,
                  r_anchor: float) -> float:
    """Total mechanical energy [J]: links (gravity potential + kinetic, MuJoCo) + rotors (1/2 J_m omega^2)
    + mesh springs (1/2 k d^2 beyond the dead band) + the restriction spring."""
    mujoco.mj_forward(model, data)
    e = float(data.energy[0] + data.energy[1])
    for j, p in enumerate(P):
        e += 0.5 * p.rotor_inertia * omega[j] ** 2
        half = 0.5 * p.backlash
        d = theta[j] - q[j]
        d = d - half if d > half else (d + half if d < -half else 0.0)
        e += 0.5 * p.gear_stiffness * d * d
    if restriction is not None and r_j >= 0:
        e += 0.5 * restriction.stiffness * (q[r_j] - r_anchor) ** 2
    return e


@dataclass(frozen=True)
class RunConditions:
    """How one trajectory is run by :func:`simulate` (besides the scene, the units and the plan).

    Attributes:
        kp: (n,) Position P Gain register per joint.
        ambient: [degC] ambient temperature.
        temperature0: (n,) [degC] winding temperatures at the start (carried over within a session).
        restriction: extra elastic resistance on one joint, or None.
        rates: time bases.
        preroll: [s] settling time before t = 0 at the first command (not logged; the heat it makes is).
        record_energy: record the total mechanical energy at each log sample (tests; costs an
            ``mj_forward`` per sample).
    """

    kp: np.ndarray | list[float]
    ambient: float
    temperature0: np.ndarray | list[float]
    restriction: Restriction | None = None
    rates: Rates = Rates()
    preroll: float = 1.0
    record_energy: bool = False


def _push(plan: Plan, T: int, L: int, h: float) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """(magnitude at every physics step of the log grid (T, L) [N] or None, at the log samples (T,), direction (3,))."""
    pushing = bool(plan.pulses) and float(np.linalg.norm(plan.push_dir)) > 0
    if pushing:
        t_phys = np.arange(T * L) * h
        mag_phys = push_profile(t_phys, plan.pulses).reshape(T, L)
        mag_log = mag_phys[:, 0]
    else:
        mag_phys = None
        mag_log = np.zeros(T)
    return mag_phys, mag_log, np.asarray(plan.push_dir, dtype=np.float64)


def _sensors(out: dict[str, np.ndarray], vbus_log: np.ndarray, energy: np.ndarray, temp: list[float],
             P: list[JointTruth], supply: SupplyTruth, plan: Plan, noise: tuple[np.ndarray, np.ndarray],
             force: np.ndarray, dt_log: float) -> SimResult:
    """Register units to SI, then sensor offsets, noise and register quantisation (vectorised over the log)."""
    noise_i, noise_v = noise
    T = vbus_log.shape[0]
    out["goal"] *= ENCODER_STEP
    out["position"] *= ENCODER_STEP
    out["velocity"] *= VELOCITY_UNIT
    off = np.array([p.current_offset for p in P])
    sig = np.array([p.current_noise for p in P])
    current = np.round((out["cur_f"] + off + sig * noise_i) / CURRENT_UNIT) * CURRENT_UNIT
    supply_meas = np.round((vbus_log + supply.noise * noise_v) / VOLTAGE_UNIT) * VOLTAGE_UNIT
    temperature = np.round(out["temp_true"])
    return SimResult(
        time=np.arange(T) * dt_log, goal=out["goal"], position=out["position"], velocity=out["velocity"],
        current=current, pwm=out["pwm"], temperature=temperature, supply=supply_meas, q=out["q"], dq=out["dq"],
        theta_m=out["theta_m"], omega_m=out["omega_m"], tau_c=out["tau_c"], i_true=out["i_true"],
        temp_true=out["temp_true"], v_bus=vbus_log, force=force, payload=np.asarray(plan.payload, dtype=np.float64),
        energy=energy, final_temperature=np.array(temp),
    )


@dataclass(frozen=True)
class _Firmware:
    """Per-run constants of the servo firmware tick (lists over joints)."""

    enc_off: list[float]  # [rad] encoder offsets
    delay_log: list[float]  # command delay [log periods]
    kp: list[float]  # Position P Gain registers
    goal: list[list[int]]  # (T, n) Goal Position registers
    a_vel: list[float]  # velocity filter coefficients per firmware tick
    a_cur: list[float]  # current filter coefficients per firmware tick
    vel_scale: float  # [rad/s per count] velocity of one count over the window
    supply: SupplyTruth


def _firmware_tick(fw: _Firmware, kf: float, q: list[float], cur: list[float], R: list[float], en: list[float],
                   hist: list[list[int]], duty: list[float], cur_f: list[float], vel_f: list[float],
                   heat: list[float]) -> tuple[list[int], list[list[int]], float]:
    """One firmware tick at kf [log periods]: current sensor and Joule heat, P law, velocity estimate and
    supply. Updates duty, cur_f, vel_f, heat in place; returns (present position [counts], window, bus [V])."""
    n = len(q)
    T = len(fw.goal)
    floor = math.floor
    step_inv = 1.0 / ENCODER_STEP
    a_cur, a_vel, enc_off, delay_log, goal_l, kp_l = fw.a_cur, fw.a_vel, fw.enc_off, fw.delay_log, fw.goal, fw.kp
    vel_scale, supply = fw.vel_scale, fw.supply
    for j in range(n):  # current sensor and Joule heat, sampled at the firmware rate
        i = cur[j]
        cur_f[j] += a_cur[j] * (i - cur_f[j])
        heat[j] += i * i * R[j]
    present = [floor((q[j] + enc_off[j]) * step_inv) for j in range(n)]
    for j in range(n):
        idx = floor(kf - delay_log[j] + 1e-9)
        g = goal_l[0 if idx < 0 else (idx if idx < T else T - 1)][j]
        duty[j] = firmware_duty(kp_l[j], g, present[j], en[j])
    hist = hist[1:] + [present]
    old = hist[0]
    for j in range(n):
        vel_f[j] += a_vel[j] * ((present[j] - old[j]) * vel_scale - vel_f[j])
    i_supply = n * supply.quiescent_current + sum(duty[j] * cur[j] for j in range(n))
    return present, hist, supply.v_source - supply.r_source * i_supply


@dataclass(frozen=True, eq=False)
class _Plant:
    """The MuJoCo side of :func:`simulate`: model, data, the arm's addresses, push and restriction."""

    model: mujoco.MjModel
    data: mujoco.MjData
    qadr: list[int]  # qpos address of each arm joint
    dadr: list[int]  # dof address of each arm joint
    qfrc_full: list[float]  # (nv,) scratch for the applied joint forces
    payload_body: int
    push_dir: np.ndarray  # (3,) unit push direction
    restriction: Restriction | None
    r_j: int  # restricted joint index (-1: none)
    r_anchor: float  # [rad] its anchor
    q_whole: bool  # fast paths when the arm joints are the whole state (the ground-truth scene has no
    dq_whole: bool  # other joint)


def _physics_step(plant: _Plant, tau_link: list[float], q: list[float], dq: list[float],
                  push: float | None) -> tuple[list[float], list[float]]:
    """Apply the link torques [N.m] (plus restriction) and the push [N] (None: leave as is), step MuJoCo
    once; returns the new (q, dq) of the arm joints."""
    data, r_j, restriction = plant.data, plant.r_j, plant.restriction
    if restriction is not None and r_j >= 0:
        tau_link[r_j] -= restriction.stiffness * (q[r_j] - plant.r_anchor) + restriction.damping * dq[r_j]
    dq_whole = plant.dq_whole
    if dq_whole:
        data.qfrc_applied[:] = tau_link
    else:
        qfrc_full, dadr = plant.qfrc_full, plant.dadr
        for j in range(len(tau_link)):
            qfrc_full[dadr[j]] = tau_link[j]
        data.qfrc_applied[:] = qfrc_full
    if push is not None:  # pushing
        data.xfrc_applied[plant.payload_body, :3] = plant.push_dir * push
    mujoco.mj_step(plant.model, data)
    if plant.q_whole and dq_whole:
        return data.qpos.tolist(), data.qvel.tolist()
    qa, va = data.qpos.tolist(), data.qvel.tolist()
    return [qa[a] for a in plant.qadr], [va[a] for a in plant.dadr]


def _snapshot(out: dict[str, np.ndarray], k: int, goal: list[int], present: list[int], vel_f: list[float],
              state: tuple[list[float], ...]) -> None:
    """Log snapshot: the register reads and the true state at t_k (state = duty, q, dq, theta, omega,
    temp, cur_f)."""
    duty, q, dq, theta, omega, temp, cur_f = state
    out["goal"][k] = goal
    out["position"][k] = present
    out["velocity"][k] = [round(v / VELOCITY_UNIT) for v in vel_f]
    out["pwm"][k] = duty
    out["q"][k] = q
    out["dq"][k] = dq
    out["theta_m"][k] = theta
    out["omega_m"][k] = omega
    out["temp_true"][k] = temp
    out["cur_f"][k] = cur_f


def simulate(scene: Scene, truths: dict[str, JointTruth], supply: SupplyTruth, plan: Plan, run: RunConditions,
             rng: np.random.Generator) -> SimResult:
    """Run one trajectory; returns register-level values and ground truth on the log grid.

    Args:
        scene: compiled ground-truth scene (its payload mass is set here).
        truths: joint name -> servo ground truth, for every joint of the robot.
        supply: the shared supply.
        plan: commands, torque enable, payload schedule and external force (T samples).
        run: gains, temperatures, restriction, time bases, pre-roll (see :class:`RunConditions`).
        rng: sensor-noise generator (current, supply); drawn in one block, so a seed gives the same log.
    """
    restriction, rates, record_energy, ambient = run.restriction, run.rates, run.record_energy, run.ambient
    model = scene.model
    names = scene.robot.joints
    n = len(names)
    P = [truths[j] for j in names]
    h = rates.physics_dt
    L, F = rates.log_every, rates.firmware_every
    dt_fw, dt_log = rates.firmware_dt, rates.log_dt
    T = plan.n
    kp_l = [float(k) for k in run.kp]
    goal_counts = np.round(plan.q_cmd / ENCODER_STEP).astype(np.int64)  # (T, n) Goal Position register
    goal_l = goal_counts.tolist()
    enable_l = plan.enable.astype(np.float64).tolist()
    n_pre = int(round(run.preroll / dt_log))
    noise_i = rng.standard_normal((T, n))
    noise_v = rng.standard_normal(T)

    # external force, evaluated at every physics step of the log grid (plus pre-roll: zero)
    mag_phys, mag_log, push_dir = _push(plan, T, L, h)

    r_j, r_anchor = -1, 0.0
    if restriction is not None:
        r_j = names.index(restriction.joint)
        r_anchor = float(plan.q_cmd[0, r_j])

    # state
    data = mujoco.MjData(model)
    qadr, dadr = scene.qpos.tolist(), scene.dof.tolist()
    plant = _Plant(model, data, qadr, dadr, [0.0] * model.nv, scene.payload_body, push_dir, restriction, r_j, r_anchor,
                   qadr == list(range(model.nq)) and n == model.nq, dadr == list(range(model.nv)) and n == model.nv)
    q0 = (goal_counts[0] * ENCODER_STEP).tolist()
    for j in range(n):
        data.qpos[qadr[j]] = q0[j] - P[j].encoder_offset
    q = [float(data.qpos[a]) for a in qadr]
    theta = list(q)
    temp = [float(x) for x in run.temperature0]
    dq, omega, duty, cur, tc, cur_f, vel_f = ([0.0] * n for _ in range(7))
    enc_off = [p.encoder_offset for p in P]
    W = max(1, int(round(P[0].velocity_window / dt_fw)))
    hist = [[math.floor((q[j] + enc_off[j]) / ENCODER_STEP) for j in range(n)]] * (W + 1)
    fw = _Firmware(enc_off, [p.delay / dt_log for p in P], kp_l, goal_l,
                   [dt_fw / (p.velocity_filter_tau + dt_fw) for p in P],
                   [dt_fw / (p.current_filter_tau + dt_fw) for p in P], ENCODER_STEP / (W * dt_fw), supply)
    v_bus = supply.v_source - supply.r_source * n * supply.quiescent_current
    payload_now = -1.0

    out = {k: np.zeros((T, n)) for k in ("goal", "position", "velocity", "pwm", "q", "dq", "theta_m", "omega_m",
                                          "tau_c", "i_true", "temp_true", "cur_f")}
    vbus_log = np.zeros(T)
    energy = np.full(T, np.nan)
    consts = [servo_constants(p) for p in P]

    for k in range(-n_pre, T):
        kk = max(k, 0)
        m_pay = float(plan.payload[kk])
        if m_pay != payload_now:
            scene.set_payload(m_pay)
            payload_now = m_pay
        en = enable_l[kk]
        kt = [torque_constant(p.kt20, p.kt_temp_coeff, temp[j]) for j, p in enumerate(P)]
        R = [resistance(p.R20, temp[j]) for j, p in enumerate(P)]
        heat = [0.0] * n
        for s in range(L):
            if s % F == 0:  # ---- firmware tick: sensors, P law, velocity estimate, supply ----
                present, hist, v_bus = _firmware_tick(fw, k + s / L, q, cur, R, en, hist, duty, cur_f, vel_f, heat)
                if s == 0 and k >= 0:  # ---- log snapshot (register reads at t_k) ----
                    _snapshot(out, k, goal_l[k], present, vel_f, (duty, q, dq, theta, omega, temp, cur_f))
                    vbus_log[k] = v_bus
                    if record_energy:
                        energy[k] = _total_energy(model, data, P, theta, omega, q, restriction, r_j, r_anchor)
            # ---- servo physics, one step (fused form of the truth functions) ----
            theta, omega, tau_link, tc, cur = servo_step(consts, (theta, omega, q, dq), (duty, v_bus, kt, R, en), h)
            if s == 0 and k >= 0:
                out["tau_c"][k] = tc
                out["i_true"][k] = cur
            q, dq = _physics_step(plant, tau_link, q, dq, None if mag_phys is None or k < 0 else mag_phys[k, s])
        for j, p in enumerate(P):
            temp[j] = thermal_step(temp[j], heat[j] * F / L, ambient, p.thermal_resistance, p.thermal_capacitance,
                                   dt_log)

    force = mag_log[:, None] * push_dir[None, :]
    return _sensors(out, vbus_log, energy, temp, P, supply, plan, (noise_i, noise_v), force, dt_log)

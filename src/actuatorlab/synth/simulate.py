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


def simulate(scene: Scene, truths: dict[str, JointTruth], supply: SupplyTruth, plan: Plan,
             kp: np.ndarray | list[float], *, ambient: float, temperature0: np.ndarray | list[float],
             rng: np.random.Generator, restriction: Restriction | None = None, rates: Rates = Rates(),
             preroll: float = 1.0, record_energy: bool = False) -> SimResult:
    """Run one trajectory; returns register-level values and ground truth on the log grid.

    Args:
        scene: compiled ground-truth scene (its payload mass is set here).
        truths: joint name -> servo ground truth, for every joint of the robot.
        supply: the shared supply.
        plan: commands, torque enable, payload schedule and external force (T samples).
        kp: (n,) Position P Gain register per joint.
        ambient: [degC] ambient temperature.
        temperature0: (n,) [degC] winding temperatures at the start (carried over within a session).
        rng: sensor-noise generator (current, supply); drawn in one block, so a seed gives the same log.
        restriction: extra elastic resistance on one joint, or None.
        rates: time bases.
        preroll: [s] settling time before t = 0 at the first command (not logged; the heat it makes is).
        record_energy: record the total mechanical energy at each log sample (tests; costs an
            ``mj_forward`` per sample).
    """
    model = scene.model
    names = scene.robot.joints
    n = len(names)
    P = [truths[j] for j in names]
    h = rates.physics_dt
    L, F = rates.log_every, rates.firmware_every
    dt_fw, dt_log = rates.firmware_dt, rates.log_dt
    T = plan.n
    kp_l = [float(k) for k in kp]
    goal_counts = np.round(plan.q_cmd / ENCODER_STEP).astype(np.int64)  # (T, n) Goal Position register
    goal_l = goal_counts.tolist()
    enable_l = plan.enable.astype(np.float64).tolist()
    n_pre = int(round(preroll / dt_log))
    noise_i = rng.standard_normal((T, n))
    noise_v = rng.standard_normal(T)

    # external force, evaluated at every physics step of the log grid (plus pre-roll: zero)
    pushing = bool(plan.pulses) and float(np.linalg.norm(plan.push_dir)) > 0
    if pushing:
        t_phys = np.arange(T * L) * h
        mag_phys = push_profile(t_phys, plan.pulses).reshape(T, L)
        mag_log = mag_phys[:, 0]
    else:
        mag_phys = None
        mag_log = np.zeros(T)
    push_dir = np.asarray(plan.push_dir, dtype=np.float64)

    r_j = -1
    if restriction is not None:
        r_j = names.index(restriction.joint)
        r_anchor = float(plan.q_cmd[0, r_j])

    # state
    data = mujoco.MjData(model)
    qadr, dadr = scene.qpos.tolist(), scene.dof.tolist()
    # fast paths when the arm joints are the whole state (the ground-truth scene has no other joint)
    q_whole = qadr == list(range(model.nq)) and n == model.nq
    dq_whole = dadr == list(range(model.nv)) and n == model.nv
    q0 = (goal_counts[0] * ENCODER_STEP).tolist()
    for j in range(n):
        data.qpos[qadr[j]] = q0[j] - P[j].encoder_offset
    q = [float(data.qpos[a]) for a in qadr]
    dq = [0.0] * n
    theta = list(q)
    omega = [0.0] * n
    temp = [float(x) for x in temperature0]
    duty = [0.0] * n
    cur = [0.0] * n
    tc = [0.0] * n
    cur_f = [0.0] * n
    vel_f = [0.0] * n
    enc_off = [p.encoder_offset for p in P]
    W = max(1, int(round(P[0].velocity_window / dt_fw)))
    hist = [[math.floor((q[j] + enc_off[j]) / ENCODER_STEP) for j in range(n)]] * (W + 1)
    a_vel = [dt_fw / (p.velocity_filter_tau + dt_fw) for p in P]
    a_cur = [dt_fw / (p.current_filter_tau + dt_fw) for p in P]
    delay_log = [p.delay / dt_log for p in P]
    v_bus = supply.v_source - supply.r_source * n * supply.quiescent_current
    payload_now = -1.0

    out = {k: np.zeros((T, n)) for k in ("goal", "position", "velocity", "pwm", "q", "dq", "theta_m", "omega_m",
                                          "tau_c", "i_true", "temp_true", "cur_f")}
    vbus_log = np.zeros(T)
    energy = np.full(T, np.nan)
    pb = scene.payload_body
    qfrc_full = [0.0] * model.nv
    consts = [servo_constants(p) for p in P]
    floor = math.floor
    step_inv = 1.0 / ENCODER_STEP
    vel_scale = ENCODER_STEP / (W * dt_fw)

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
                for j in range(n):  # current sensor and Joule heat, sampled at the firmware rate
                    i = cur[j]
                    cur_f[j] += a_cur[j] * (i - cur_f[j])
                    heat[j] += i * i * R[j]
                kf = k + s / L  # time in log periods
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
                v_bus = supply.v_source - supply.r_source * i_supply
                if s == 0 and k >= 0:  # ---- log snapshot (register reads at t_k) ----
                    out["goal"][k] = goal_l[k]
                    out["position"][k] = present
                    out["velocity"][k] = [round(v / VELOCITY_UNIT) for v in vel_f]
                    out["pwm"][k] = duty
                    out["q"][k] = q
                    out["dq"][k] = dq
                    out["theta_m"][k] = theta
                    out["omega_m"][k] = omega
                    out["temp_true"][k] = temp
                    out["cur_f"][k] = cur_f
                    vbus_log[k] = v_bus
                    if record_energy:
                        energy[k] = _total_energy(model, data, P, theta, omega, q, restriction, r_j,
                                                  r_anchor if r_j >= 0 else 0.0)
            # ---- servo physics, one step (fused form of the truth functions) ----
            theta, omega, tau_link, tc, cur = servo_step(consts, theta, omega, q, dq, duty, v_bus, kt, R, en, h)
            if s == 0 and k >= 0:
                out["tau_c"][k] = tc
                out["i_true"][k] = cur
            if restriction is not None and r_j >= 0:
                tau_link[r_j] -= restriction.stiffness * (q[r_j] - r_anchor) + restriction.damping * dq[r_j]
            if dq_whole:
                data.qfrc_applied[:] = tau_link
            else:
                for j in range(n):
                    qfrc_full[dadr[j]] = tau_link[j]
                data.qfrc_applied[:] = qfrc_full
            if mag_phys is not None and k >= 0:  # pushing
                data.xfrc_applied[pb, :3] = push_dir * mag_phys[k, s]
            mujoco.mj_step(model, data)
            if q_whole and dq_whole:
                q, dq = data.qpos.tolist(), data.qvel.tolist()
            else:
                qa, va = data.qpos.tolist(), data.qvel.tolist()
                q, dq = [qa[a] for a in qadr], [va[a] for a in dadr]
        for j, p in enumerate(P):
            temp[j] = thermal_step(temp[j], heat[j] * F / L, ambient, p.thermal_resistance, p.thermal_capacitance,
                                   dt_log)

    out["goal"] *= ENCODER_STEP
    out["position"] *= ENCODER_STEP
    out["velocity"] *= VELOCITY_UNIT
    # ---- sensors: offsets, noise, register quantisation (vectorised over the log) ----
    off = np.array([p.current_offset for p in P])
    sig = np.array([p.current_noise for p in P])
    current = np.round((out["cur_f"] + off + sig * noise_i) / CURRENT_UNIT) * CURRENT_UNIT
    supply_meas = np.round((vbus_log + supply.noise * noise_v) / VOLTAGE_UNIT) * VOLTAGE_UNIT
    temperature = np.round(out["temp_true"])
    force = mag_log[:, None] * push_dir[None, :]
    return SimResult(
        time=np.arange(T) * dt_log, goal=out["goal"], position=out["position"], velocity=out["velocity"],
        current=current, pwm=out["pwm"], temperature=temperature, supply=supply_meas, q=out["q"], dq=out["dq"],
        theta_m=out["theta_m"], omega_m=out["omega_m"], tau_c=out["tau_c"], i_true=out["i_true"],
        temp_true=out["temp_true"], v_bus=vbus_log, force=force, payload=np.asarray(plan.payload, dtype=np.float64),
        energy=energy, final_temperature=np.array(temp),
    )

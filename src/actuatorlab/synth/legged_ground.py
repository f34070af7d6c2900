"""Virtual quadruped hardware on the ground: ANYmal C standing on a floor, the legged suite's drive truths.

The in-air protocol's hardware (:mod:`actuatorlab.synth.legged`, :mod:`actuatorlab.synth.legged_sim`) put
down: a floating base on a flat floor with MuJoCo's full collision model of the robot (menagerie's
``anymal_c.xml``: every link collides, elliptic friction cones, impratio 100; not the foot-only MJX model
the policies train on), the twelve drives of :class:`~actuatorlab.synth.legged_sim.DriveBank` (FOC current
loop with its voltage limit, 20 A, 50:1 gear with load-dependent friction and stick-slip, backlash, series
spring, winding temperature, command delay, the SEA torque loop around the joint PD) at their own rates,
and a host controller at the robot's control rate. Clocks (h = the truth's physics step, 0.5 ms)::

    physics            every h                 MuJoCo step; the drives' rotor step (qfrc_applied)
    drive loop         every control_dt of a drive (1 ms)   PD on the output encoder, SEA torque loop
    host tick k        t_k = settle + k P      sensors read at t_k - receive_delay; the controller's
                                               target arrives at drive j at t_k + command_delay_j
    (P = the robot's control_dt, 20 ms; before the first target arrives the drives hold the standing pose)

Sensors as the robot has them: output encoders (:data:`~actuatorlab.synth.legged.ANYDRIVE` 2^17
counts/rev), the drives' velocity estimates (finite difference over 4 ms), and an IMU (:class:`Imu`):
body angular rate with white noise and a per-run bias, the gravity direction of the attitude estimate
with a per-run tilt error and white noise. No base linear velocity and no contact sensor. The truth at
every tick (base pose and velocity, joints, transmission torque, currents, power) is recorded beside.

Sources of the IMU figures: Xsens MTi-100 series data sheet (gyroscope noise density 0.01 deg/s/sqrt(Hz),
roll/pitch accuracy 0.2 deg dynamic), the class of IMU ANYmal carries (Hutter et al., Advanced Robotics
31(17), 2017).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import mujoco
import numpy as np

from ..logs.format import Channel, Setup, Trajectory
from ..robots.loader import Robot, home_qpos
from .legged import ANYDRIVE, LEGGED_SUITE
from .legged_sim import GENERATOR, GENERATOR_VERSION, MOTOR_COUNTS, SPRING_NOMINAL, DriveBank, _scene
from .suites import SynthError
from .zoo import ZooActuator

__all__ = ["Imu", "GroundConfig", "GroundRecord", "Readings", "ground_robot", "simulate_ground", "ground_trajectory"]

#: the full-collision scene of ANYmal C (floor + anymal_c.xml), beside the MJX variant the robot config uses
FULL_MJCF = "scene.xml"


@dataclass(frozen=True)
class Imu:
    """IMU model. gyro_noise [rad/s] white noise per sample; gyro_bias [rad/s] std of a per-run constant
    bias per axis; tilt_noise [rad] white attitude error per sample (roll and pitch); tilt_bias [rad] std
    of a per-run attitude error (roll and pitch). Defaults: an MTi-100-class IMU (module docstring):
    0.01 deg/s/sqrt(Hz) over a 400 Hz band = 0.0035 rad/s, rounded up to 0.005; 0.2 deg = 0.0035 rad."""

    gyro_noise: float = 0.005
    gyro_bias: float = 0.002
    tilt_noise: float = 0.0035
    tilt_bias: float = 0.0035


@dataclass(frozen=True)
class GroundConfig:
    """One run on the ground. ticks: host ticks [1] after the settle; gain: (kp [N.m/rad], kd [N.m.s/rad])
    of the drive PD; settle [s]: the robot stands at home under the drive PD before the first tick;
    reset_noise [rad]: uniform +- on the joints' start (on top of the home pose); imu: :class:`Imu`;
    command_delay_add [s]: added to every drive's command delay (a slower bus); min_base_height [m],
    max_tilt [rad]: the run stops as fallen when the trunk goes below / tilts beyond; temperature0 [degC]:
    winding start temperature above each drive's ambient; drives: "truth" (the drive truths) or
    "ideal_pd" (a diagnostic: every joint an ideal torque source tau = clip(kp (q_t - q) - kd dq, +-effort
    limit) on the true state, no delay, the truths' sensors and power figures kept but not driving the
    links: the gap left is the floor, the contacts and the sensors, not the actuator); scene: "full" (every
    link collides, :data:`FULL_MJCF`) or "training" (a diagnostic: the robot config's MJCF, the policies'
    training scene: feet-only contacts, pyramidal cones, here at the truth's step with MuJoCo's default
    solver iterations)."""

    ticks: int = 500
    gain: tuple[float, float] = (40.0, 5.0)
    settle: float = 0.5
    reset_noise: float = 0.0
    imu: Imu = Imu()
    command_delay_add: float = 0.0
    min_base_height: float = 0.25
    max_tilt: float = 1.0472
    temperature0: float = 5.0
    drives: str = "truth"
    scene: str = "full"

    def __post_init__(self):
        if self.scene not in ("full", "training"):
            raise SynthError(f"GroundConfig: scene must be 'full' or 'training', got {self.scene!r}")
        if self.drives not in ("truth", "ideal_pd"):
            raise SynthError(f"GroundConfig: drives must be 'truth' or 'ideal_pd', got {self.drives!r}")
        if int(self.ticks) < 1 or self.settle < 0 or self.reset_noise < 0 or self.command_delay_add < 0:
            raise SynthError(f"GroundConfig: ticks >= 1, settle, reset_noise and command_delay_add >= 0; got {self}")


@dataclass(frozen=True)
class Readings:
    """What the host reads at one tick: time [s] since the first tick; gyro (3,) [rad/s] body rate;
    gravity (3,) [1] unit gravity in the body frame (attitude estimate); position (n,) [rad] output
    encoders (absolute, the MJCF's joint zero); velocity (n,) [rad/s] drive velocity estimates."""

    time: float
    gyro: np.ndarray
    gravity: np.ndarray
    position: np.ndarray
    velocity: np.ndarray


@dataclass(frozen=True, eq=False)
class GroundRecord:
    """Truth at the host ticks (K ticks run; K < ticks when the robot fell). time (K,) [s]; target (K, n)
    [rad] the host's targets; base_height (K,) [m]; linvel (K, 3) [m/s] and angvel (K, 3) [rad/s] trunk
    velocity in the trunk frame; gravity (K, 3) [1] true gravity in the trunk frame; q, dq (K, n) [rad,
    rad/s]; tau (K, n) [N.m] transmission torque; current (K, n) [A]; temperature (K, n) [degC]; averages
    over each tick's physics steps: mech_power (K,) [W] sum_j |tau_j dq_j|, elec_power (K,) [W] sum_j
    (R i^2 + kt w i); fell: the run stopped on a fall; sensors: what the host read at each tick (the
    controller's inputs; :func:`ground_trajectory` writes them as a log): position, velocity,
    motor_position, current (K, n) [rad, rad/s, rad, A], gyro (K, 3) [rad/s], gravity (K, 3) [1],
    temperature (K, n) [degC, 1 degC], supply (K,) [V]."""

    time: np.ndarray
    target: np.ndarray
    base_height: np.ndarray
    linvel: np.ndarray
    angvel: np.ndarray
    gravity: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau: np.ndarray
    current: np.ndarray
    temperature: np.ndarray
    mech_power: np.ndarray
    elec_power: np.ndarray
    fell: bool
    sensors: dict


def ground_robot(robot: Robot) -> Robot:
    """The robot config with the full-collision MJCF (:data:`FULL_MJCF`) beside its own; anymal_c only."""
    if robot.name != "anymal_c" or robot.fixed_base:
        raise SynthError(f"the ground hardware is ANYmal C's (floating base), not {robot.name!r}")
    full = Path(robot.mjcf_path).parent / FULL_MJCF
    if not full.is_file():
        raise SynthError(f"{full}: the full-collision MJCF of {robot.name} is missing")
    return dataclasses.replace(robot, mjcf_path=str(full))


def _tilt(g: np.ndarray, ex: float, ey: float) -> np.ndarray:
    """g (3,) rotated by small angles ex, ey [rad] about x and y, renormalised."""
    cx, sx, cy, sy = math.cos(ex), math.sin(ex), math.cos(ey), math.sin(ey)
    Rx = np.array([[1.0, 0.0, 0.0], [0.0, cx, -sx], [0.0, sx, cx]])
    Ry = np.array([[cy, 0.0, sy], [0.0, 1.0, 0.0], [-sy, 0.0, cy]])
    v = Ry @ Rx @ g
    return v / np.linalg.norm(v)


def _read(d: mujoco.MjData, base: int, bank: DriveBank, home_q: np.ndarray, imu: Imu,
          biases: tuple[np.ndarray, np.ndarray], rng: np.random.Generator, t: float, sensed: dict) -> Readings:
    """What the host reads now (the IMU with its biases and noise, the drives' encoders and velocity
    estimates); appends every logged sensor (also motor encoder, current register, temperature, bus
    voltage) to ``sensed``."""
    a0 = bank.units[0]
    Rt = d.xmat[base].reshape(3, 3).T
    g_bias, t_bias = biases
    reading = Readings(time=t, gyro=d.qvel[3:6] + g_bias + imu.gyro_noise * rng.standard_normal(3),
                       gravity=_tilt(Rt @ np.array([0.0, 0.0, -1.0]), *(t_bias + imu.tilt_noise * rng.standard_normal(2))),
                       position=bank.encoder() + home_q, velocity=bank.velocity())
    m_enc = np.floor((bank.theta - home_q) / bank.m_step + 0.5) * bank.m_step + home_q
    cur = np.round((bank.cur + a0.sensors.current_noise * rng.standard_normal(len(home_q))) / a0.sensors.current_unit)
    for key, v in (("position", reading.position), ("velocity", reading.velocity), ("gyro", reading.gyro),
                   ("gravity", reading.gravity), ("motor_position", m_enc), ("current", cur * a0.sensors.current_unit),
                   ("temperature", np.round(bank.temp)), ("supply", round(bank.v_bus, 1))):
        sensed.setdefault(key, []).append(v)
    return reading


def simulate_ground(robot: Robot, units: tuple[ZooActuator, ...], controller: Callable[[Readings], np.ndarray],
                    cfg: GroundConfig, rng: np.random.Generator, home: np.ndarray | None = None) -> GroundRecord:
    """Run the robot on the ground (module docstring): ``controller(readings) -> (n,)`` absolute joint
    targets [rad] at every host tick; ``rng`` draws the reset noise, the IMU's biases and noise;
    ``home`` (nq,): the standing pose (default the robot config's MJCF keyframe; the full MJCF has none)."""
    if len(units) != robot.n_joints:
        raise SynthError(f"{len(units)} drives for the {robot.n_joints} joints of {robot.name}")
    a0 = units[0]
    h, n = float(a0.physics_dt), robot.n_joints
    home = home_qpos(robot.model()) if home is None else np.asarray(home, float)
    full = ground_robot(robot) if cfg.scene == "full" else robot
    m = _scene(full, 0.0, h)
    d = mujoco.MjData(m)
    qadr, dadr = full.qpos_adr, full.dof_adr
    base = int(m.jnt_bodyid[0])   # the trunk: the free joint's body
    if m.nq != home.size:
        raise SynthError(f"{full.mjcf_path}: {m.nq} qpos entries, the standing pose has {home.size}")
    d.qpos[:] = home
    d.qpos[qadr] += rng.uniform(-cfg.reset_noise, cfg.reset_noise, n)
    mujoco.mj_forward(m, d)
    home_q = home[qadr]
    units = tuple(dataclasses.replace(a, interface=dataclasses.replace(
        a.interface, command_delay=a.interface.command_delay + cfg.command_delay_add)) for a in units)
    temp0 = np.array([a.thermal.ambient for a in units]) + cfg.temperature0
    bank = DriveBank(units, cfg.gain, h, home_q, d.qpos[qadr].copy(), temp0)
    P = int(round(robot.control_dt / h))
    if abs(P * h - robot.control_dt) > 1e-9:
        raise SynthError(f"control_dt {robot.control_dt} s is not a multiple of the truth's step {h} s")
    settle = int(round(cfg.settle / h))
    recv = int(math.floor(a0.sensors.receive_delay / h + 1e-9))
    imu = cfg.imu
    g_bias = imu.gyro_bias * rng.standard_normal(3)
    t_bias = imu.tilt_bias * rng.standard_normal(2)
    K = int(cfg.ticks)
    targets = np.zeros((K, n))   # offsets from home
    rec = {k: np.zeros((K, 3)) for k in ("linvel", "angvel", "gravity")}
    recn = {k: np.zeros((K, n)) for k in ("target", "q", "dq", "tau", "current", "temperature")}
    height, mech, elec, t_rec = np.zeros(K), np.zeros(K), np.zeros(K), np.zeros(K)
    acc_m = acc_e = 0.0
    cmd = np.zeros(n)
    sensed: dict[str, list] = {}
    sent = -1         # last tick whose target exists
    k_rec = 0
    fell = False
    step = 0
    end = settle + K * P
    lim = np.array([a.interface.effort_limit for a in units])
    while step < end:
        q, dq = d.qpos[qadr].copy(), d.qvel[dadr].copy()
        if step % bank.every == 0:
            for j in range(n):
                k_cmd = int(math.floor((step - settle - bank.delays[j]) / P + 1e-9))
                cmd[j] = targets[min(k_cmd, sent), j] if k_cmd >= 0 and sent >= 0 else 0.0
            bank.control(step, q, dq, cmd)
        tau = bank.step(q, dq)
        if cfg.drives == "ideal_pd":
            k_now = int(math.floor((step - settle) / P + 1e-9))
            goal = targets[min(k_now, sent)] if k_now >= 0 and sent >= 0 else np.zeros(n)
            tau = np.clip(cfg.gain[0] * (home_q + goal - q) - cfg.gain[1] * dq, -lim, lim)
            bank.tau = tau   # the record's torque is the one applied
        d.qfrc_applied[dadr] = tau
        mujoco.mj_step(m, d)
        step += 1
        acc_m += float(np.sum(np.abs(bank.tau * d.qvel[dadr])))
        acc_e += float(np.sum(bank.R * bank.cur ** 2 + bank.kt * bank.omega * bank.cur))
        k_next = sent + 1
        if k_next < K and step == settle + k_next * P - recv:   # the host reads, then sends tick k_next
            reading = _read(d, base, bank, home_q, imu, (g_bias, t_bias), rng, k_next * robot.control_dt, sensed)
            tgt = np.asarray(controller(reading), float)
            if tgt.shape != (n,) or not np.all(np.isfinite(tgt)):
                raise SynthError(f"controller returned {tgt.shape} targets (finite: {np.all(np.isfinite(tgt))}); "
                                 f"expected ({n},) finite joint targets [rad]")
            targets[k_next] = tgt - home_q
            sent = k_next
            if sent == 0:   # the records' power averages start with the first tick
                acc_m = acc_e = 0.0
        if sent >= 0 and step == settle + (k_rec + 1) * P - recv and k_rec <= sent:   # truth at the tick's end
            Rt = d.xmat[base].reshape(3, 3).T
            rec["linvel"][k_rec] = Rt @ d.qvel[0:3]
            rec["angvel"][k_rec] = d.qvel[3:6]
            rec["gravity"][k_rec] = Rt @ np.array([0.0, 0.0, -1.0])
            for key, v in (("target", targets[k_rec] + home_q), ("q", d.qpos[qadr]), ("dq", d.qvel[dadr]),
                           ("tau", bank.tau), ("current", bank.cur), ("temperature", bank.temp)):
                recn[key][k_rec] = v
            height[k_rec] = d.qpos[2]
            mech[k_rec], elec[k_rec] = acc_m / P, acc_e / P
            t_rec[k_rec] = (k_rec + 1) * robot.control_dt
            acc_m = acc_e = 0.0
            k_rec += 1
            tilted = rec["gravity"][k_rec - 1][2] > -math.cos(cfg.max_tilt)
            if d.qpos[2] < cfg.min_base_height or tilted or not np.all(np.isfinite(d.qpos)):
                fell = True
                break
    s = slice(0, k_rec)
    return GroundRecord(time=t_rec[s], target=recn["target"][s], base_height=height[s], linvel=rec["linvel"][s],
                        angvel=rec["angvel"][s], gravity=rec["gravity"][s], q=recn["q"][s], dq=recn["dq"][s],
                        tau=recn["tau"][s], current=recn["current"][s], temperature=recn["temperature"][s],
                        mech_power=mech[s], elec_power=elec[s], fell=fell,
                        sensors={k: np.asarray(v)[:k_rec] for k, v in sensed.items()})


def ground_trajectory(robot: Robot, rec: GroundRecord, name: str, gain: tuple[float, float],
                      conditions: dict[str, str]) -> Trajectory:
    """A deployment log (the legged suite's kind (b)): what the robot logs at its host ticks, as the in-air
    logs' channels (docs/synth.md) plus the IMU (``imu_gyro/{x,y,z}``, ``imu_gravity/{x,y,z}``); no base
    position or velocity (the robot does not measure them). ``conditions`` go into the log as they are."""
    sen, n = rec.sensors, robot.n_joints
    K = len(rec.time)
    enc = f"output encoder {ANYDRIVE.sensors.encoder_counts} counts/rev"
    per = {"position_target": (rec.target, Channel("rad", "commanded", "output", "host position target (policy)", 0.0)),
           "position": (sen["position"], Channel("rad", "measured", "output", enc, 0.0)),
           "motor_position": (sen["motor_position"], Channel("rad", "measured", "motor", f"motor encoder {MOTOR_COUNTS} "
                                                             "counts/rev divided by the ratio", 0.0)),
           "velocity": (sen["velocity"], Channel("rad/s", "estimated", "output", "drive finite difference of the output "
                                                 "encoder over 4 ms", 0.002)),
           "current": (sen["current"], Channel("A", "measured", "none", "q-axis current register (10 mA)", 0.0)),
           "effort": (SPRING_NOMINAL * (sen["motor_position"] - sen["position"]),
                      Channel("N.m", "estimated", "output", f"spring deflection x {SPRING_NOMINAL:g} N.m/rad", 0.0)),
           "temperature": (sen["temperature"], Channel("degC", "measured", "none", "winding temperature (1 degC)", 0.0))}
    data: dict[str, np.ndarray] = {}
    chans: dict[str, Channel] = {}
    for k, (v, c) in per.items():
        for j, jn in enumerate(robot.joint_names[:n]):
            data[f"{k}/{jn}"], chans[f"{k}/{jn}"] = np.asarray(v[:K, j], np.float64), c
    for sig, unit, src in (("gyro", "rad/s", "IMU body rate (noise, per-run bias)"),
                           ("gravity", "1", "IMU attitude estimate: unit gravity in the trunk frame")):
        for i, ax in enumerate("xyz"):
            data[f"imu_{sig}/{ax}"] = np.asarray(sen[sig][:K, i], np.float64)
            chans[f"imu_{sig}/{ax}"] = Channel(unit, "measured" if sig == "gyro" else "estimated", "none", src, 0.0)
    data["supply_voltage"] = np.asarray(sen["supply"][:K], np.float64)
    chans["supply_voltage"] = Channel("V", "measured", "none", "bus voltage (0.1 V)", 0.0)
    setup = Setup(actuator="anydrive", joint_type="revolute", controller="pd",
                  gains={"kp": gain[0], "kd": gain[1], "effort_limit": ANYDRIVE.interface.effort_limit},
                  supply_voltage=ANYDRIVE.motor.supply,
                  extra={"robot": robot.name, "joints": list(robot.joint_names), "base": "floating",
                         "fell": bool(rec.fell), "generator": f"{GENERATOR} {GENERATOR_VERSION} (ground)",
                         "suite": LEGGED_SUITE, "truth": "episodes.npz beside the logs"})
    return Trajectory(name=name, time=np.asarray(rec.time, np.float64) - float(rec.time[0]) if K else np.zeros(0),
                      data=data, channels=chans, setup=setup, conditions=dict(conditions),
                      source_file=f"synthetic:anymal_c/{LEGGED_SUITE}/deployment/{name}")

"""The legged suite's simulator and dataset writer: ANYmal C welded in the air, a zoo truth per drive.

Link side: native MuJoCo on the robot's MJCF with the base welded (:func:`~actuatorlab.robots.fixed_base.
on_fixed_base`), the MJCF's actuators removed, joint armature / damping / frictionloss 0 (the rotor is a
body of the truth), optional point masses at the four feet (the load). Drive side: per joint the zoo's
rotor step (:func:`~actuatorlab.synth.zoo_sim.rotor_step`) and device loop (the zoo's firmware, pd law on
the output encoder), coupled through ``qfrc_applied`` = tau_c + tau_bearing, tau_bearing = -F_b tanh(dq/0.02).
Physics at ``ANYDRIVE.physics_dt``, the drive loop at ``interface.control_dt``, host commands and the
log at 50 Hz (the robot's control_dt). Layout of ``DIR``: train/, heldout/{excitation,load,gain}/,
dataset.json (the drawn truth of every drive, the safety limits and each log's extremes), README.md.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path
from typing import Any, Callable

import mujoco
import numpy as np

from ..errors import DataError
from ..logs.format import Channel, Setup, Trajectory
from ..logs.io import save_trajectory
from ..robots.fixed_base import links_spec, on_fixed_base
from ..robots.loader import Robot, home_qpos, load_robot, model_spec
from .legged import (ANYDRIVE, JOINT_TYPES, LEGGED_SUITE, SAFETY, SPRING_NOMINAL, LeggedLog, draw_units,
                     leg_command, legged_logs)
from .suites import SynthError, check_scale
from .truth import thermal_step
from .zoo import ZooActuator
from .zoo_sim import ZooRun, _Firmware, _plant, _State, rotor_step

__all__ = ["DriveBank", "LeggedRun", "LeggedTruth", "truth_extremes", "backed_off", "legged_robot", "simulate_legged", "run_legged", "foot_masses",
           "log_target", "protocol_log", "GENERATOR"]

GENERATOR = "actuatorlab.synth.legged"
GENERATOR_VERSION = "4"
LEGS = ("LF", "RF", "LH", "RH")
#: [counts/rev] motor-side encoder (divided by the ratio on the output side)
MOTOR_COUNTS = 2 ** 14
#: the drive's torque loop (Hutter et al. 2017: joint PD cascaded with an SEA torque controller):
#: (K_tau [1] gain on the torque error, D_tau [s] damping of the deflection rate, times the spring constant)
TORQUE_LOOP = (1.0, 0.02)
#: what a drive's datasheet gives (the drive-rate logs' ``Setup.extra["drive"]``): torque_constant [N.m/A] output
#: side (gear ratio x motor kt at 20 degC, nominal), gear_ratio [1], spring_nominal [N.m/rad] (the firmware's)
DRIVE_DATASHEET = {"torque_constant": ANYDRIVE.motor.kt * ANYDRIVE.gear.ratio, "gear_ratio": ANYDRIVE.gear.ratio,
                   "spring_nominal": SPRING_NOMINAL}


def legged_robot(name: str = "anymal_c") -> Robot:
    """The robot config with its base welded in the air (the protocol's robot); another robot is refused."""
    if name != "anymal_c":
        raise SynthError(f"--suite {LEGGED_SUITE} is the ANYmal C in-air protocol: --robot anymal_c, not {name!r}")
    return on_fixed_base(load_robot(name))


@dataclasses.dataclass(frozen=True)
class LeggedRun:
    """One log to simulate: target (T, 12) [rad] host commands at the host period (the sensors' ``log_dt``,
    50 Hz), gain (kp [N.m/rad], kd [N.m.s/rad]), load [kg] at each foot, temperature0 (12,) [degC] winding
    start temperatures, log_dt [s] the readings' period (None: the host period; the drive-rate logs: 1 ms)."""

    target: np.ndarray
    gain: tuple[float, float]
    load: float
    temperature0: np.ndarray
    log_dt: float | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class LeggedTruth:
    """Truth at the reading instants (T, 12): q, dq [rad, rad/s] link, theta [rad] rotor, tau_c [N.m]
    transmission torque, i [A], temp [degC]; logged: position, motor_position, velocity, current, effort,
    temperature (T, 12), supply (T,) [V], time (T,) [s]."""

    time: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    theta: np.ndarray
    tau_c: np.ndarray
    i: np.ndarray
    temp: np.ndarray
    position: np.ndarray
    motor_position: np.ndarray
    velocity: np.ndarray
    current: np.ndarray
    effort: np.ndarray
    temperature: np.ndarray
    supply: np.ndarray


def foot_masses(robot: Robot, load: float) -> tuple[tuple[str, float, tuple[float, float, float]], ...]:
    """The load as :attr:`~actuatorlab.robots.loader.Robot.point_masses`: ``load`` [kg] at the centre of each
    foot sphere (in its shank's frame); () without a load. The logs carry the same in ``Setup.extra``."""
    if load <= 0:
        return ()
    spec = model_spec(robot)
    out = []
    for leg in LEGS:
        foot = [g for g in spec.body(f"{leg}_SHANK").geoms if g.type == mujoco.mjtGeom.mjGEOM_SPHERE][0]
        out.append((f"{leg}_SHANK", float(load), (float(foot.pos[0]), float(foot.pos[1]), float(foot.pos[2]))))
    return tuple(out)


def _scene(robot: Robot, load: float, h: float) -> mujoco.MjModel:
    """The in-air MuJoCo model of the truth at the truth's step ``h`` [s]: actuators removed, joint
    armature/damping/friction 0, the load at the feet (:func:`foot_masses`, the loader's point masses: the
    same edit the fit's robot gets)."""
    spec = links_spec(dataclasses.replace(robot, point_masses=foot_masses(robot, load)))
    spec.option.timestep = h
    return spec.compile()


class DriveBank:
    """The twelve drives' side of the truth (module docstring of :mod:`actuatorlab.synth.legged`): per joint
    the zoo's device loop (pd law on the output encoder, relative to ``home``), the SEA torque loop around
    the PD's torque, the rotor step, winding temperature and the bus voltage sag; shared by the in-air
    protocol (:func:`simulate_legged`) and the robot on the ground (:mod:`actuatorlab.synth.legged_ground`).

    units: (n,) drawn drives; gain: (kp [N.m/rad], kd [N.m.s/rad]) of the drive PD; h [s] physics step;
    home (n,) [rad]; theta0 (n,) [rad] rotor start (the link's); temperature0 (n,) [degC].
    :meth:`control` every ``every`` physics steps (the drives' 1 kHz loop), :meth:`step` every physics
    step (returns the torque on each link, ``qfrc_applied``)."""

    def __init__(self, units: tuple[ZooActuator, ...], gain: tuple[float, float], h: float, home: np.ndarray,
                 theta0: np.ndarray, temperature0: np.ndarray):
        n = len(units)
        self.units, self.h, self.home = units, float(h), np.asarray(home, float)
        self.plants = [_plant(a, 0.0) for a in units]
        self.fws = [_Firmware(a, ZooRun(np.zeros(1), np.ones(1), gain[0], gain[1]), h) for a in units]
        self.every = self.fws[0].every
        #: [physics steps] each drive's command delay
        self.delays = np.array([int(math.ceil(a.interface.command_delay / h - 1e-9)) for a in units])
        self.theta = np.asarray(theta0, float).copy()
        self.omega, self.cur, self.u = np.zeros(n), np.zeros(n), np.zeros(n)
        self.temp = np.asarray(temperature0, float).copy()
        self.heat = np.zeros(n)
        self.v_bus = units[0].motor.supply
        self.fric_b = np.array([a.gear.bearing for a in units])
        self.kt20 = np.array([a.motor.kt * a.gear.ratio for a in units])
        self.c_kt = np.array([a.motor.kt_temp_coeff for a in units])
        self.R20 = np.array([a.motor.R for a in units])
        self.a_R = np.array([a.motor.resistance_tempco for a in units])
        self.kt, self.R = self.kt20.copy(), self.R20.copy()
        self.m_step = 2 * math.pi / (MOTOR_COUNTS * np.array([a.gear.ratio for a in units]))
        self.i_max = np.array([a.motor.current_limit for a in units])
        self.tau = np.zeros(n)

    def control(self, step: int, q: np.ndarray, dq: np.ndarray, target: np.ndarray) -> None:
        """One tick of the drives' loop at physics step ``step`` (a multiple of ``every``): thermal update
        (after the first), kt(T), R(T), bus voltage, then per drive the PD on the encoder towards
        ``target`` (n,) [rad, offsets from home] and the SEA torque loop; sets the current references."""
        units, n = self.units, len(self.units)
        if step:
            self.temp = np.array([thermal_step(self.temp[j], self.heat[j] / self.every, a.thermal.ambient,
                                               a.thermal.thermal_resistance, a.thermal.thermal_capacitance,
                                               self.every * self.h) for j, a in enumerate(units)])
            self.heat[:] = 0.0
        self.kt = self.kt20 * (1.0 - self.c_kt * (self.temp - 20.0))  # [N.m/A] output side
        self.R = self.R20 * (1.0 + self.a_R * (self.temp - 20.0))
        i_sup = float(np.sum((self.R * self.cur * self.cur + self.kt * self.omega * self.cur))) / max(self.v_bus, 1e-6)
        self.v_bus = units[0].motor.supply - units[0].motor.source_resistance * i_sup
        u = self.u
        for j in range(n):
            s = _State(self.theta[j], self.omega[j], q[j] - self.home[j], dq[j], self.cur[j], 0.0)
            u[j] = self.fws[j].tick(s, target[j], 1.0, self.kt[j])
        # the SEA torque loop around the PD's torque: tau_s from the two encoders, damping of the deflection rate
        m_enc = np.floor((self.theta - self.home) / self.m_step + 0.5) * self.m_step
        tau_d = u * self.kt
        tau_s = SPRING_NOMINAL * (m_enc - self.encoder())
        i_ref = (tau_d + TORQUE_LOOP[0] * (tau_d - tau_s) - TORQUE_LOOP[1] * SPRING_NOMINAL * (self.omega - dq)) / self.kt
        self.u = np.clip(i_ref, -self.i_max, self.i_max)

    def step(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """The rotors over one physics step; returns (n,) [N.m] the torque on the links (transmission
        torque tau_c, kept in ``tau``, minus the output bearing's friction)."""
        n = len(self.units)
        tau = np.empty(n)
        for j in range(n):
            s = _State(self.theta[j], self.omega[j], q[j], dq[j], self.cur[j], 0.0)
            self.theta[j], self.omega[j], self.cur[j], tau[j], _ = rotor_step(
                self.plants[j], s, self.u[j], (self.kt[j], self.R[j], self.v_bus, 1.0), self.h)
        self.heat += self.cur * self.cur * self.R
        self.tau = tau
        return tau - self.fric_b * np.tanh(dq / 0.02)

    def encoder(self) -> np.ndarray:
        """(n,) [rad] the output encoders' last readings, offsets from home."""
        return np.array([fw.present * fw.step for fw in self.fws])

    def velocity(self) -> np.ndarray:
        """(n,) [rad/s] the drives' velocity estimates (finite difference of the encoder)."""
        return np.array([fw.v_est for fw in self.fws])


def simulate_legged(robot: Robot, units: tuple[ZooActuator, ...], run: LeggedRun, rng: np.random.Generator
                    ) -> LeggedTruth:
    """Simulate one in-air log (module docstring); ``rng`` draws the sensor noise."""
    a0 = units[0]
    h, n = float(a0.physics_dt), robot.n_joints
    m = _scene(robot, run.load, h)
    d = mujoco.MjData(m)
    T_cmd, cmd_dt = int(run.target.shape[0]), float(a0.sensors.log_dt)
    log_dt = float(run.log_dt or cmd_dt)
    T = int(round((T_cmd - 1) * cmd_dt / log_dt)) + 1
    qadr, dadr = robot.qpos_adr, robot.dof_adr
    d.qpos[:] = home_qpos(m)
    d.qpos[qadr] += run.target[0]
    mujoco.mj_forward(m, d)
    home = home_qpos(m)[qadr]
    bank = DriveBank(units, run.gain, h, home, d.qpos[qadr].copy(), run.temperature0)
    every, delays = bank.every, bank.delays
    pre = int(round(0.5 / h))  # settling at the first target, not logged
    read = [int(math.floor((k * log_dt - a0.sensors.receive_delay) / h + 1e-9)) + pre for k in range(T)]
    out = np.zeros((T, 9, n))
    supply = np.zeros(T)
    k_read = 0
    target = home + run.target
    n_steps = read[-1] + 1
    cmd = np.zeros(n)
    for step in range(n_steps):
        q, dq = d.qpos[qadr].copy(), d.qvel[dadr].copy()
        if step % every == 0:
            for j in range(n):
                k_cmd = min(T_cmd - 1, max(0, int(math.floor(((step - pre - delays[j]) * h) / cmd_dt + 1e-9))))
                cmd[j] = target[k_cmd, j] - home[j]
            bank.control(step, q, dq, cmd)
        d.qfrc_applied[dadr] = bank.step(q, dq)
        mujoco.mj_step(m, d)
        while k_read < T and read[k_read] == step:
            out[k_read] = (d.qpos[qadr], d.qvel[dadr], bank.theta, bank.tau, bank.cur, bank.temp,
                           bank.encoder() + home, bank.velocity(), np.zeros(n))
            supply[k_read] = bank.v_bus
            k_read += 1
    return _readings(out, supply, home, units, rng, log_dt)


def _readings(out: np.ndarray, supply: np.ndarray, home: np.ndarray, units: tuple[ZooActuator, ...],
              rng: np.random.Generator, log_dt: float) -> LeggedTruth:
    """Sensor models on the snapshots: motor encoder (MOTOR_COUNTS per motor turn), the drive's torque
    estimate SPRING_NOMINAL x (motor-side - output-side angle), current register with noise, 1 degC temperature."""
    T, n = out.shape[0], out.shape[2]
    q, dq, theta, tau, cur, temp, enc, vest = (out[:, i] for i in range(8))
    ratio = np.array([a.gear.ratio for a in units])
    m_step = 2 * math.pi / (MOTOR_COUNTS * ratio)
    mpos = home + np.floor((theta - home) / m_step + 0.5) * m_step
    noise = rng.standard_normal((T, n))
    c_unit = units[0].sensors.current_unit
    current = np.round((cur + units[0].sensors.current_noise * noise) / c_unit) * c_unit
    return LeggedTruth(time=np.arange(T) * log_dt, q=q, dq=dq, theta=theta, tau_c=tau, i=cur, temp=temp,
                       position=enc, motor_position=mpos, velocity=np.round(vest / 1e-3) * 1e-3, current=current,
                       effort=SPRING_NOMINAL * (mpos - enc), temperature=np.round(temp), supply=np.round(supply, 1))


def _trajectory(robot: Robot, log: LeggedLog, target: np.ndarray, r: LeggedTruth) -> Trajectory:
    """The native multi-joint Trajectory of one simulated log (docs/synth.md channel convention); ``target``
    (host period) is held to the readings' period of a drive-rate log. A drive-rate log's ``Setup.extra["drive"]``
    carries the datasheet constants the drive-side identification needs (nominal, not the unit's truth)."""
    data: dict[str, np.ndarray] = {}
    cmd_dt = ANYDRIVE.sensors.log_dt
    if r.time.size != target.shape[0]:  # the host's command as sent, at each reading
        target = target[np.minimum(np.floor(r.time / cmd_dt + 1e-9).astype(int), target.shape[0] - 1)]
    chans: dict[str, Channel] = {}
    enc = f"output encoder {ANYDRIVE.sensors.encoder_counts} counts/rev"
    per = {"position_target": (target, Channel("rad", "commanded", "output", "host position target (velocity "
                                                                          "target 0, feed-forward 0)", 0.0)),
           "position": (r.position, Channel("rad", "measured", "output", enc, 0.0)),
           "motor_position": (r.motor_position, Channel("rad", "measured", "motor", f"motor encoder {MOTOR_COUNTS} "
                                                        "counts/rev divided by the ratio", 0.0)),
           "velocity": (r.velocity, Channel("rad/s", "estimated", "output", "drive finite difference of the output "
                                            "encoder over 4 ms", 0.002)),
           "current": (r.current, Channel("A", "measured", "none", "q-axis current register (10 mA)", 0.0)),
           "effort": (r.effort, Channel("N.m", "estimated", "output", f"spring deflection x {SPRING_NOMINAL:g} "
                                        "N.m/rad (the drive's calibration; backlash included)", 0.0)),
           "temperature": (r.temperature, Channel("degC", "measured", "none", "winding temperature (1 degC)", 0.0)),
           "torque_enable": (np.ones_like(target), Channel("bool", "commanded", "none", "drive enabled", 0.0))}
    for k, (v, c) in per.items():
        for j, name in enumerate(robot.joint_names):
            data[f"{k}/{name}"], chans[f"{k}/{name}"] = np.asarray(v[:, j], np.float64), c
    data["supply_voltage"] = r.supply
    chans["supply_voltage"] = Channel("V", "measured", "none", "bus voltage (0.1 V)", 0.0)
    kp, kd = log.gain
    excited = {leg: f"{leg}_{log.excited(i)}" for i, leg in enumerate(LEGS)}
    setup = Setup(actuator="anydrive", joint_type="revolute", controller="pd",
                  gains={"kp": kp, "kd": kd, "effort_limit": ANYDRIVE.interface.effort_limit},
                  supply_voltage=ANYDRIVE.motor.supply,
                  extra={"robot": robot.name, "joints": list(robot.joint_names), "base": "fixed",
                         "point_masses": [[b, m, list(p)] for b, m, p in foot_masses(robot, log.load)],
                         "per_joint_gains": {j: {"kp": kp, "kd": kd} for j in robot.joint_names},
                         "excited": excited, "generator": f"{GENERATOR} {GENERATOR_VERSION}", "suite": LEGGED_SUITE,
                         "family": log.family, "truth": "dataset.json of the dataset folder",
                         **({"drive": DRIVE_DATASHEET} if log.log_dt is not None else {})})
    cond = {"load": "none" if log.load <= 0 else f"foot_{log.load:g}kg", "gain": f"kp{kp:g}_kd{kd:g}",
            "excitation": log.family, "variant": f"r{log.rotation}", "session": "s01", "split": log.split}
    return Trajectory(name=log.name, time=r.time, data=data, channels=chans, setup=setup, conditions=cond,
                      source_file=f"synthetic:anymal_c/{LEGGED_SUITE}/{log.name}")


def log_target(robot: Robot, log: LeggedLog, rng: np.random.Generator) -> np.ndarray:
    """(T, 12) [rad] target offsets from the standing pose: each leg excites its joint type, the others hold."""
    t = np.arange(int(round(log.duration / ANYDRIVE.sensors.log_dt)) + 1) * ANYDRIVE.sensors.log_dt
    target = np.zeros((t.size, robot.n_joints))
    for i, leg in enumerate(LEGS):
        jt = log.excited(i)
        target[:, robot.index(f"{leg}_{jt}")] = leg_command(log.family, t, jt, rng)
    return target


def truth_extremes(robot: Robot, r: LeggedTruth, home: np.ndarray) -> dict[str, float]:
    """The log's extremes on the truth, per joint type: max |q - standing| [rad], |dq| [rad/s], |tau_c| [N.m]."""
    out: dict[str, float] = {}
    for jt in JOINT_TYPES:
        idx = [robot.index(j) for j in robot.joint_names if j.endswith(jt)]
        out[f"{jt}_max_offset_rad"] = float(np.max(np.abs(r.q[:, idx] - home[idx])))
        out[f"{jt}_max_speed_rad_s"] = float(np.max(np.abs(r.dq[:, idx])))
        out[f"{jt}_max_torque_nm"] = float(np.max(np.abs(r.tau_c[:, idx])))
    return out


#: the operator's rule: an excitation whose truth leaves a safety limit is run again at this share of its amplitude
AMPLITUDE_BACKOFF, MAX_TRIES = 0.7, 5


def protocol_log(robot: Robot, units: tuple[ZooActuator, ...], log: LeggedLog, seed: int, k: int, home: np.ndarray
                 ) -> tuple[np.ndarray, float, LeggedTruth, list[dict[str, Any]]]:
    """Log ``k`` as the protocol runs it: the excitation (stream (seed, 1, k): commands, start temperatures)
    simulated (stream (seed, 2, k): sensor noise) and, while the truth leaves a :data:`SAFETY` limit, run
    again at :data:`AMPLITUDE_BACKOFF` times the amplitude (as an operator backs off). Returns (target
    offsets (T, 12) [rad] at amplitude 1, the amplitude kept, its truth, the rejected tries: amplitude and
    the limits broken). A log still outside after :data:`MAX_TRIES` raises :class:`SynthError`."""
    rng = np.random.default_rng([seed, 1, k])
    target = log_target(robot, log, rng)
    temp0 = np.array([a.thermal.ambient + a.thermal.start_rise for a in units]) + rng.uniform(0, 5, len(units))
    amp, res, tries, _ = backed_off(robot, units, LeggedRun(target, log.gain, log.load, temp0, log.log_dt),
                                    [seed, 2, k], home)
    if amp is None:
        raise SynthError(f"legged protocol: log {log.name} leaves its safety limits at every amplitude tried ({tries})")
    return target, amp, res, tries


def backed_off(robot: Robot, units: tuple[ZooActuator, ...], run: LeggedRun, noise: list[int], home: np.ndarray
               ) -> tuple[float | None, LeggedTruth, list[dict[str, Any]], dict[str, float]]:
    """The operator's rule: ``run`` simulated (sensor noise from the stream ``noise``) and, while the truth
    leaves a :data:`SAFETY` limit, again at :data:`AMPLITUDE_BACKOFF` times the amplitude, up to
    :data:`MAX_TRIES` tries. Returns (the amplitude kept, None when every try broke a limit; the last try's
    truth; the rejected tries: amplitude and the limits broken; the first try's extremes)."""
    amp = 1.0
    tries: list[dict[str, Any]] = []
    first: dict[str, float] | None = None
    for _ in range(MAX_TRIES):
        res = simulate_legged(robot, units, dataclasses.replace(run, target=amp * run.target),
                              np.random.default_rng(noise))
        ex = truth_extremes(robot, res, home)
        first = first or ex
        broken = SAFETY.violations(ex)
        if not broken:
            return amp, res, tries, first
        tries.append({"amplitude": amp, "broken": broken})
        amp = round(amp * AMPLITUDE_BACKOFF, 6)
    assert first is not None   # MAX_TRIES >= 1
    return None, res, tries, first


def run_legged(robot: str, out: str | Path, seed: int, scale: float = 1.0,
               progress: Callable[[int, int, str], None] | None = None, *, overwrite: bool = False) -> dict[str, Any]:
    """Write the legged in-air suite into ``out`` (module docstring); the same (seed, scale) gives the same
    logs. Built beside ``out`` and renamed into place; a non-empty ``out`` is refused unless it holds a
    legged dataset and ``overwrite``."""
    r_ = legged_robot(robot)
    scale, seed, out = check_scale(scale), int(seed), Path(out)
    if out.is_dir() and any(out.iterdir()):
        card = out / "dataset.json"
        if not (overwrite and card.is_file() and GENERATOR in card.read_text(errors="replace")[:300]):
            raise DataError(out, "folder is not empty (choose a new folder, or overwrite a legged dataset)")
    tmp = out.parent / f".{out.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    units = draw_units(np.random.default_rng([seed, 0]), r_.n_joints)
    home = home_qpos(r_.model())[r_.qpos_adr]
    logs = legged_logs(scale)
    records = []
    for k, log in enumerate(logs):
        target, amp, res, tries = protocol_log(r_, units, log, seed, k, home)
        traj = _trajectory(r_, log, home + amp * target, res)
        save_trajectory(traj, tmp / log.split / log.name)
        records.append({"name": log.name, "split": log.split, "family": log.family, "load_kg": log.load,
                        "gain": list(log.gain), "excited": traj.setup.extra["excited"], "n_samples": traj.n,
                        "conditions": traj.conditions, "amplitude": amp, "rejected_amplitudes": tries,
                        "truth_extremes": truth_extremes(r_, res, home)})
        if progress is not None:
            progress(k + 1, len(logs), log.name)
    splits: dict[str, int] = {}
    for rec in records:
        splits[rec["split"]] = splits.get(rec["split"], 0) + 1
    doc = {"generator": GENERATOR, "generator_version": GENERATOR_VERSION, "suite": LEGGED_SUITE, "robot": robot,
            "base": "fixed (welded at the MJCF's base pose, 0.62 m)", "seed": seed, "scale": scale,
            "nominal": ANYDRIVE.to_dict(), "spring_nominal_nm_rad": SPRING_NOMINAL, "motor_counts": MOTOR_COUNTS,
            "units": {j: dataclasses.asdict(a) for j, a in zip(r_.joint_names, units)},
            "safety": dataclasses.asdict(SAFETY), "splits": dict(sorted(splits.items())), "logs": records}
    (tmp / "dataset.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    (tmp / "README.md").write_text(f"# Legged in-air dataset (ANYmal C)\n\nGenerated by `{GENERATOR}` "
                                   f"{GENERATOR_VERSION}, seed {seed}, scale {scale}. Splits: {splits}. "
                                   "Truth and protocol: dataset.json and docs/synth.md, \"The legged suite\".\n",
                                   encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return {"out": str(out), "suite": LEGGED_SUITE, "robot": robot, "seed": seed, "scale": scale,
            "n_trajectories": len(records), "n_samples": int(sum(r["n_samples"] for r in records)),
            "splits": doc["splits"], "generator_version": GENERATOR_VERSION}

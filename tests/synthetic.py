"""Synthetic joint logs with known ground truth, made with actuatorlab's own closed-loop replay.

A log is built on a uniform grid (so the replay grid coincides with the samples): a command
(:func:`command`), the torque-enable pattern, the supply voltage and the bench go into a
:class:`~actuatorlab.logs.format.Trajectory` with a placeholder position, that trajectory is replayed
with the ground-truth parameters (:func:`simulate`) from rest at q = 0, and the replayed position
(quantised to the encoder step, 2 pi / 4096 for an XL330) and velocity become the measured channels.

The default bench is the XL330 pendulum of the bundled example (0.49 kg at 0.10 m, 7.4 V, firmware
``dynamixel_pwm`` with Position P Gain 400 or 800).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from actuatorlab.identify.fit import ParamSpace, substeps_for
from actuatorlab.logs.format import Channel, Setup, Trajectory
from actuatorlab.models.modelfile import MODEL_FORMAT, MODEL_FORMAT_VERSION
from actuatorlab.models.params import neutral_params
from actuatorlab.models.registry import get_model
from actuatorlab.sim.rollout import make_batches, rollout_batch

__all__ = ["TRUTH_M1", "TRUTH_M2_DELAY", "M2_DELAY_SPECS", "m2_delay_problem", "ENCODER_STEP", "DT", "xl330_setup", "command", "make_trajectory", "simulate",
           "synthetic_log", "synthetic_set", "full_params"]

#: Ground truth of the m1 logs: kt [N.m/A], R [ohm], armature [kg.m^2], Coulomb [N.m], viscous [N.m.s/rad].
TRUTH_M1: dict[str, float] = dict(kt=0.4, R=3.5, armature=0.002, friction_base=0.03, friction_viscous=0.01)
#: an m2 truth (Stribeck friction) with an 8 ms command delay, and four logs of it at two gains
TRUTH_M2_DELAY: dict[str, float] = {**TRUTH_M1, "friction_stribeck": 0.025, "stribeck_velocity": 0.1, "delay": 0.008}
M2_DELAY_SPECS = [("chirp400", "chirp", 400), ("sine800", "sine", 800), ("steps400", "steps", 400),
                  ("chirp800", "chirp", 800)]
#: [rad] XL330 encoder resolution (4096 counts per turn).
ENCODER_STEP = 2.0 * math.pi / 4096.0
#: [s] sample period of the synthetic logs.
DT = 0.005


def xl330_setup(kp: float = 400.0, *, mass: float = 0.49, length: float = 0.1, v_supply: float = 7.4,
                controller: str = "dynamixel_pwm", **gains: float) -> Setup:
    """XL330-like servo on the pendulum bench: point mass [kg] at length [m], supply [V], firmware
    Position P Gain ``kp`` [register units] (other gains as keywords)."""
    return Setup(actuator="xl330", joint_type="revolute", controller=controller, gains={"kp": float(kp), **gains},
                 supply_voltage=v_supply, bench={"mass": mass, "length": length, "arm_mass": 0.0})


def command(kind: str, t: np.ndarray, *, amplitude: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(q_target [rad] (T,), torque_enable [0/1] (T,)) for an excitation ``kind``.

    chirp: amplitude sin(2 pi (0.5 t + 0.75 t^2)) (0.5 Hz rising at 1.5 Hz/s);
    sine: amplitude sin(2 pi 1.2 t);
    drop: a ramp to ``amplitude`` over 0.4 s, held, torque disabled from 40 % to 75 % of the log
    (free swing: gravity and friction only), then re-enabled;
    steps: square wave of +-amplitude/2 at 1 Hz.
    """
    T = t[-1] - t[0]
    tt = t - t[0]
    enable = np.ones_like(tt)
    if kind == "chirp":
        q = amplitude * np.sin(2 * np.pi * (0.5 * tt + 0.75 * tt**2))
    elif kind == "sine":
        q = amplitude * np.sin(2 * np.pi * 1.2 * tt)
    elif kind == "drop":
        q = amplitude * np.minimum(tt / 0.4, 1.0)
        enable[(tt >= 0.4 * T) & (tt < 0.75 * T)] = 0.0
    elif kind == "steps":
        q = 0.5 * amplitude * np.sign(np.sin(2 * np.pi * 1.0 * tt + 1e-9))
    else:
        raise ValueError(f"unknown command kind {kind!r}")
    return q, enable


def make_trajectory(name: str, time: np.ndarray, q_target: np.ndarray, *, setup: Setup,
                    position: np.ndarray | None = None, velocity: np.ndarray | None = None,
                    enable: np.ndarray | None = None, conditions: dict | None = None,
                    source_file: str = "") -> Trajectory:
    """A Trajectory with the canonical channels (position/velocity default to 0)."""
    rev = setup.joint_type == "revolute"
    u = "rad" if rev else "m"
    n = time.shape[0]
    data = {"position_target": np.asarray(q_target, float),
            "position": np.zeros(n) if position is None else np.asarray(position, float),
            "velocity": np.zeros(n) if velocity is None else np.asarray(velocity, float),
            "torque_enable": np.ones(n) if enable is None else np.asarray(enable, float)}
    channels = {"position_target": Channel(u, "commanded"), "position": Channel(u, "measured"),
                "velocity": Channel(u + "/s", "estimated"), "torque_enable": Channel("bool", "commanded")}
    return Trajectory(name=name, time=np.asarray(time, float), data=data, channels=channels, setup=setup,
                      conditions=dict(conditions or {}), source_file=source_file)


def full_params(values: dict[str, float]) -> dict[str, jnp.ndarray]:
    """Every parameter (neutral where not given) as float64 JAX scalars."""
    p = neutral_params()
    unknown = set(values) - set(p)
    if unknown:
        raise KeyError(f"unknown parameters {sorted(unknown)}")
    p.update(values)
    return {k: jnp.asarray(v, dtype=jnp.float64) for k, v in p.items()}


def simulate(trajs: list[Trajectory], params: dict[str, float], model: str = "m1",
             dt: float = DT) -> list[tuple[np.ndarray, np.ndarray]]:
    """Closed-loop replay of ``trajs`` (one batch: same law and plant) from their first measured
    state: [(q (T_i,), dq (T_i,))] per log on the replay grid."""
    spec = get_model(model)
    (b,) = make_batches(trajs, dt)
    out = rollout_batch(b.step_config(spec.compliant, substeps_for(spec), spec.thermal), full_params(params),
                        b.arrays())
    q, dq = np.asarray(out.q), np.asarray(out.dq)
    return [(q[i][b.mask[i]], dq[i][b.mask[i]]) for i in range(b.size)]


def synthetic_log(name: str, params: dict[str, float], *, kind: str = "chirp", kp: float = 400.0,
                  duration: float = 1.5, dt: float = DT, model: str = "m1", quantise: bool = True,
                  amplitude: float = 1.0, setup: Setup | None = None, source_file: str = "") -> Trajectory:
    """One synthetic log of ``duration`` [s] at ``dt`` [s] replayed with ground truth ``params``."""
    return synthetic_set([(name, kind, kp)], params, duration=duration, dt=dt, model=model,
                         quantise=quantise, amplitude=amplitude, setup=setup, source_file=source_file)[0]


def synthetic_set(specs: list[tuple[str, str, float]], params: dict[str, float], *, duration: float = 1.5,
                  dt: float = DT, model: str = "m1", quantise: bool = True, amplitude: float = 1.0,
                  setup: Setup | None = None, source_file: str = "") -> list[Trajectory]:
    """Several synthetic logs ``[(name, kind, kp)]`` replayed in one batch (one compilation)."""
    n = int(round(duration / dt)) + 1
    time = dt * np.arange(n)
    drafts = []
    for name, kind, kp in specs:
        q_t, en = command(kind, time, amplitude=amplitude)
        s = setup if setup is not None else xl330_setup(kp)
        drafts.append(make_trajectory(name, time, q_t, setup=s, enable=en,
                                      conditions={"excitation": kind, "gain": str(int(kp))},
                                      source_file=source_file or f"{name}.synthetic"))
    sims = simulate(drafts, params, model, dt)
    out = []
    for tr, (q, dq) in zip(drafts, sims):
        if quantise:
            q = np.round(q / ENCODER_STEP) * ENCODER_STEP
        out.append(tr.replace(data={**tr.data, "position": q, "velocity": dq}))
    return out


def analytic_model(params: dict[str, float], model: str = "m1") -> dict:
    """A fitted one-joint model.json dict (XL330 bench, free parameters ``params``, dt :data:`DT`):
    the base or teacher of the learned-actuator tests."""
    return {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "model": model,
            "joint_type": "revolute", "controller": "dynamixel_pwm", "setup": {"joint_type": "revolute"},
            "parameters": {k: {"value": float(v), "free": True} for k, v in params.items()}, "fit": {"dt": DT}}


def m2_delay_problem():
    """(logs, batches, spec, space): 1.5 s logs of :data:`TRUTH_M2_DELAY` (:data:`M2_DELAY_SPECS`), their
    batches, the m2+delay model and its servo box. Call in physics precision."""
    logs = synthetic_set(M2_DELAY_SPECS, TRUTH_M2_DELAY, duration=1.5, model="m2+delay")
    batches = make_batches(logs, None)
    spec = get_model("m2+delay")
    return logs, batches, spec, ParamSpace.build(spec, batches, "servo")

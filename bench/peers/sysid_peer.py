"""MuJoCo sysid peer: the XL330 pendulum as a ``dcmotor`` MJCF, fitted with ``mujoco.sysid``.

Runs inside the bench's sysid virtual environment (``bench/.venv-sysid``,
Python 3.11, ``mujoco[sysid]`` 4.x; create it with
``python bench/peers/setup_venvs.py sysid``).  It calls the installed
``mujoco.sysid`` module; nothing of it is copied here.

The plant (MJCF built in :func:`pendulum_xml`):

* a hinge ``servo`` (axis y) carrying a point mass ``m`` [kg] at ``l`` [m]
  below the pivot (0.49 kg at 0.10 m, read from the logs), so that gravity
  gives ``-m g l sin q`` with ``q = 0`` hanging down, as on BAM's pendulum;
  ``g = 9.80665`` m/s^2;
* the joint's ``armature`` [kg m^2], ``damping`` [N m s/rad] and
  ``frictionloss`` [N m] (MuJoCo's soft Coulomb friction constraint);
* a ``dcmotor`` actuator (input ``voltage``, no inductance):
  ``tau = K (V - K qdot) / R`` with ``K = Kt = Ke`` [N m/A] and ``R`` [Ohm]
  (MuJoCo XML reference, actuator/dcmotor);
* a zero-gain ``general`` actuator ``torque_enable`` that only carries the
  log's torque-enable flag into the rollout (it produces no force).

The firmware (Dynamixel XL330 in PWM position mode, as BAM models it;
Duclusaud et al., ICRA 2025, and ``bam/dynamixel/actuator.py``)::

    duty = clip(kp * error_gain * (q_target - q), -1, 1)
    error_gain = (4096 / 2 pi) / (256 * 885)      # duty per rad per kp unit
    V = duty * vin                                 # vin: the log's nominal 7.4 V

depends on the *simulated* ``q``, so it cannot be an open-loop control
sequence for ``mujoco.rollout``; and with ``torque_enable`` false the motor
must give no torque at all (not even back-EMF braking).  Both are done in a
``sysid`` ``custom_rollout`` (:func:`closed_loop_rollout`): a Python loop over
``mj_step`` that writes ``V`` into the motor's ``ctrl`` before every step and
sets ``opt.disableactuator`` for the motor's group while the flag is false.

The fit (:func:`fit`): ``sysid.optimize`` (the default ``mujoco`` box-bounded
Levenberg-Marquardt with finite differences) on ``sysid``'s default residual:
measured minus simulated joint position, per log divided by
``||q_measured|| / sqrt(2)`` (``sysid.normalize_residual``), the first sample
dropped (``resample_true=False``; the logs are already on the 5 ms grid that
the model uses as its timestep).  Free parameters: ``armature``, ``damping``,
``frictionloss``, ``K`` and ``R``, with BAM's XL330 bounds where BAM has one.

The score: every log rolled out on its own from its first logged state
(position and speed), ``mean |q_sim - q_log|`` over all samples (the first,
error 0, included, as in BAM's rollout); ``train_mae`` / ``heldout_mae`` are
the means over logs [rad].

Output: one JSON line per model on stdout (``model`` is ``faithful``)::

    {"peer": "sysid", "model": "faithful", "trials": <LM iterations>, ...,
     "fit_wall_s": ..., "train_mae": ..., "heldout_mae": ..., "params": {...}}

Usage::

    bench/.venv-sysid/bin/python bench/peers/sysid_peer.py --train a.json b.json --test c.json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
from mujoco import sysid

XL330_ERROR_GAIN = (4096 / (2 * np.pi)) / (256 * 885)  # [duty / (rad * kp unit)]
GRAVITY = 9.80665  # [m/s^2], the value BAM's pendulum uses
MOTOR_GROUP = 1  # actuator group of the dcmotor, switched off by opt.disableactuator

# name: (nominal, min, max, unit).  Bounds of K, R, armature from BAM's XL330Actuator,
# damping from BAM's viscous friction bound, frictionloss from BAM's friction_base bound.
PARAMETERS = {
    "armature": (0.005, 0.0001, 0.05, "kg.m^2"),
    "damping": (0.1, 0.0, 1.0, "N.m.s/rad"),
    "frictionloss": (0.05, 0.0, 0.2, "N.m"),
    "motorconst": (1.6, 0.1, 3.0, "N.m/A"),
    "resistance": (2.6, 2.0, 5.0, "Ohm"),
}


@dataclass(frozen=True)
class Log:
    """One processed XL330 log, on its uniform grid (T samples)."""

    name: str
    dt: float  # [s]
    kp: float  # firmware P gain [register units]
    vin: float  # nominal supply [V]
    mass: float  # [kg]
    length: float  # [m]
    t: np.ndarray  # (T,) [s]
    q: np.ndarray  # (T,) [rad] measured position
    dq0: float  # [rad/s] the servo's first speed reading
    q_target: np.ndarray  # (T,) [rad]
    enable: np.ndarray  # (T,) 1.0 torque on, 0.0 off


def load_log(path: Path) -> Log:
    """Read a processed BAM log (``dt`` key, uniform grid)."""
    path = Path(path)
    with open(path) as f:
        d = json.load(f)
    for key in ("dt", "kp", "vin", "mass", "length", "entries"):
        if key not in d:
            raise ValueError(f"{path}: missing top-level key {key!r} (need a processed log)")
    e = d["entries"]
    col = lambda k: np.array([x[k] for x in e], dtype=float)  # noqa: E731
    return Log(name=path.name, dt=float(d["dt"]), kp=float(d["kp"]), vin=float(d["vin"]),
               mass=float(d["mass"]), length=float(d["length"]), t=col("timestamp"),
               q=col("position"), dq0=float(e[0].get("speed", 0.0)),
               q_target=col("goal_position"), enable=col("torque_enable"))


def pendulum_xml(mass: float, length: float, dt: float) -> str:
    """MJCF of the pendulum test bench with the nominal parameter values."""
    p = {k: v[0] for k, v in PARAMETERS.items()}
    return f"""
<mujoco model="xl330_pendulum">
  <compiler angle="radian"/>
  <option timestep="{dt}" integrator="Euler" gravity="0 0 {-GRAVITY}">
    <flag contact="disable"/>
  </option>
  <worldbody>
    <body name="arm">
      <joint name="servo" type="hinge" axis="0 1 0" armature="{p['armature']}"
             damping="{p['damping']}" frictionloss="{p['frictionloss']}"/>
      <inertial pos="0 0 {-length}" mass="{mass}" diaginertia="1e-9 1e-9 1e-9"/>
    </body>
  </worldbody>
  <actuator>
    <dcmotor name="motor" joint="servo" group="{MOTOR_GROUP}" input="voltage"
             motorconst="{p['motorconst']} {p['motorconst']}" resistance="{p['resistance']}"/>
    <general name="torque_enable" joint="servo" gainprm="0" biasprm="0 0 0"/>
  </actuator>
  <sensor>
    <jointpos name="q" joint="servo"/>
  </sensor>
</mujoco>"""


def build_model(params: sysid.ParameterDict, spec: mujoco.MjSpec) -> mujoco.MjModel:
    """Compile ``spec`` with the parameter values (K read directly, so order does not matter)."""
    spec.joint("servo").armature = float(params["armature"].value[0])
    spec.joint("servo").damping = [float(params["damping"].value[0]), 0.0, 0.0]  # linear term
    spec.joint("servo").frictionloss = float(params["frictionloss"].value[0])
    k = float(params["motorconst"].value[0])
    spec.actuator("motor").set_to_dcmotor(motorconst=[k, k],
                                          resistance=float(params["resistance"].value[0]))
    return spec.compile()


def rollout_one(model: mujoco.MjModel, data: mujoco.MjData, initial_state: np.ndarray,
                q_target: np.ndarray, enable: np.ndarray, kp: float, vin: float,
                ) -> tuple[np.ndarray, np.ndarray]:
    """Step the firmware law + plant for ``len(q_target)`` steps.

    Returns ``(state (S, nstate) mjSTATE_FULLPHYSICS after each step, q (S,) [rad])``.
    """
    spec_full = mujoco.mjtState.mjSTATE_FULLPHYSICS.value
    mujoco.mj_setState(model, data, initial_state, spec_full)
    mujoco.mj_forward(model, data)
    n = len(q_target)
    nstate = mujoco.mj_stateSize(model, spec_full)
    states = np.empty((n, nstate))
    q = np.empty(n)
    gain = kp * XL330_ERROR_GAIN
    off_mask = 1 << MOTOR_GROUP
    saved = model.opt.disableactuator
    try:
        for k in range(n):
            duty = min(1.0, max(-1.0, gain * (q_target[k] - data.qpos[0])))
            data.ctrl[0] = vin * duty
            model.opt.disableactuator = saved if enable[k] > 0.5 else (saved | off_mask)
            mujoco.mj_step(model, data)
            mujoco.mj_getState(model, data, states[k], spec_full)
            q[k] = data.qpos[0]
    finally:
        model.opt.disableactuator = saved
    return states, q


def make_custom_rollout(logs_by_id: dict[int, Log], counter: list[int] | None = None):
    """A ``sysid.CustomRolloutFn`` that runs :func:`rollout_one` for every requested log.

    The control TimeSeries columns are ``[q_target, torque_enable]``; ``kp`` and
    ``vin`` come from the log whose control data is passed (looked up by ``id``).
    ``counter[0]`` (if given) is increased by the number of single-log rollouts.
    """

    def custom_rollout(*, models, datas, control_signal, initial_states, param_dicts,
                       rollout_signal_mapping, rollout_state_mapping, ctrl_mapping):
        del param_dicts
        if counter is not None:
            counter[0] += len(models)
        out = []
        for i, (model, ctrl, x0) in enumerate(zip(models, control_signal, initial_states)):
            log = logs_by_id[id(ctrl.data)]
            u = ctrl.data[:-1]  # N controls, N-1 steps: the last has no measured successor
            states, q = rollout_one(model, datas[i % len(datas)], x0, u[:, 0], u[:, 1],
                                    log.kp, log.vin)
            times = states[:, 0]
            out.append(sysid.SystemTrajectory(
                model=model,
                control=sysid.TimeSeries(ctrl.times[:-1], u, signal_mapping=ctrl_mapping),
                sensordata=sysid.TimeSeries(times, q[:, None], signal_mapping=rollout_signal_mapping),
                initial_state=x0,
                state=sysid.TimeSeries(times, states, signal_mapping=rollout_state_mapping),
            ))
        return out

    return custom_rollout


def sequences(logs: list[Log], spec: mujoco.MjSpec) -> tuple[sysid.ModelSequences, dict[int, Log]]:
    """One ``ModelSequences`` holding every log, and the control-data-id -> log map."""
    model = spec.compile()
    by_id, names, x0s, ctrls, sens = {}, [], [], [], []
    for log in logs:
        ctrl = sysid.TimeSeries(log.t, np.column_stack([log.q_target, log.enable]))
        by_id[id(ctrl.data)] = log
        names.append(log.name)
        x0s.append(sysid.create_initial_state(model, np.array([log.q[0]]), np.array([log.dq0])))
        ctrls.append(ctrl)
        sens.append(sysid.TimeSeries.from_names(log.t, log.q[:, None], model))
    return sysid.ModelSequences("xl330_pendulum", spec, names, x0s, ctrls, sens), by_id


def log_mae(model: mujoco.MjModel, log: Log) -> float:
    """Mean |q_sim - q_log| [rad] over all T samples of one open-loop rollout."""
    x0 = sysid.create_initial_state(model, np.array([log.q[0]]), np.array([log.dq0]))
    _, q = rollout_one(model, mujoco.MjData(model), x0, log.q_target[:-1], log.enable[:-1],
                       log.kp, log.vin)
    q_sim = np.concatenate([[log.q[0]], q])
    return float(np.mean(np.abs(q_sim - log.q)))


def score(model: mujoco.MjModel, logs: list[Log]) -> tuple[float, dict[str, float]]:
    per_log = {log.name: log_mae(model, log) for log in logs}
    return float(np.mean(list(per_log.values()))), per_log


def check_same_bench(logs: list[Log]) -> Log:
    """All logs must share mass, length and dt (one MJCF); return the first."""
    ref = logs[0]
    for log in logs[1:]:
        if (log.mass, log.length, log.dt) != (ref.mass, ref.length, ref.dt):
            raise ValueError(f"{log.name}: mass/length/dt differ from {ref.name}; one MJCF needs one bench")
    return ref


def fit(train: list[Log], max_iters: int) -> dict:
    """Fit the five parameters.

    Returns ``{"params": {name: value}, "fit_wall_s", "fit_cpu_s", "iterations",
    "rollouts"}`` (rollouts: single-log rollouts done, finite differences included).
    """
    ref = check_same_bench(train)
    spec = mujoco.MjSpec.from_string(pendulum_xml(ref.mass, ref.length, ref.dt))
    ms, by_id = sequences(train, spec)
    params = sysid.ParameterDict()
    for name, (nom, lo, hi, _) in PARAMETERS.items():
        params.add(sysid.Parameter(name, nom, lo, hi))
    counter = [0]
    residual_fn = sysid.build_residual_fn(
        models_sequences=[ms], build_model=build_model,
        custom_rollout=make_custom_rollout(by_id, counter), resample_true=False, n_threads=1)
    t0, c0 = time.perf_counter(), time.process_time()
    # the backend's per-iteration table goes to stderr; stdout carries only JSON lines
    opt_params, result = sysid.optimize(params, residual_fn, optimizer="mujoco",
                                        verbose=False, max_iters=max_iters, output=sys.stderr)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n_iter = len(result.extras.get("objective", [])) - 1 if "extras" in result else -1
    values = {k: float(opt_params[k].value[0]) for k in PARAMETERS}
    return {"params": values, "fit_wall_s": round(wall, 3), "fit_cpu_s": round(cpu, 3),
            "iterations": n_iter, "rollouts": counter[0]}


def run(args: argparse.Namespace) -> int:
    logging.getLogger("absl").setLevel(logging.ERROR)
    train = [load_log(p) for p in args.train]
    test = [load_log(p) for p in args.test]
    ref = check_same_bench(train + test)
    fitted = fit(train, args.max_iters)
    values = fitted["params"]
    params = sysid.ParameterDict()
    for name, (nom, lo, hi, _) in PARAMETERS.items():
        params.add(sysid.Parameter(name, values[name], lo, hi))
    model = build_model(params, mujoco.MjSpec.from_string(pendulum_xml(ref.mass, ref.length, ref.dt)))
    t0 = time.perf_counter()
    train_mae, train_per = score(model, train)
    heldout_mae, held_per = score(model, test)
    row = {"peer": "sysid", "package": f"mujoco {mujoco.__version__} (mujoco.sysid)",
           "n_train": len(train), "n_heldout": len(test), "model": "faithful",
           "trials": fitted["iterations"], "max_iters": args.max_iters,
           "rollouts": fitted["rollouts"], "seed": args.seed,
           "fit_wall_s": fitted["fit_wall_s"], "fit_cpu_s": fitted["fit_cpu_s"],
           "eval_wall_s": round(time.perf_counter() - t0, 3),
           "train_mae": train_mae, "heldout_mae": heldout_mae,
           "per_log": {"train": train_per, "heldout": held_per},
           "params": values, "units": {k: v[3] for k, v in PARAMETERS.items()}}
    print(json.dumps(row), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fit the dcmotor pendulum with mujoco.sysid.")
    parser.add_argument("--train", nargs="+", type=Path, required=True, help="processed training logs")
    parser.add_argument("--test", nargs="+", type=Path, required=True, help="processed held-out logs")
    parser.add_argument("--models", nargs="+", default=["faithful"], choices=["faithful"],
                        help="model variants (only 'faithful')")
    parser.add_argument("--max-iters", type=int, default=200, help="LM iterations (sysid default 200)")
    parser.add_argument("--seed", type=int, default=0,
                        help="recorded only: the LM fit from the nominal start is deterministic")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())

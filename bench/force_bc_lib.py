"""Force-aware behaviour cloning on the OpenManipulator-X: does the ESTIMATED end-effector force
help a small policy hold a payload of unknown mass? (docs/force.md, "Force-aware behaviour cloning").

Task (native Gymnasium environment :class:`~actuatorlab.envs.gym_env.ActuatorVectorEnv`, the
robot config's m3 actuator with the Dynamixel PWM position law on every joint, 100 Hz commands):
the arm holds a payload of mass m on the end-effector body (a 3 cm solid sphere on the body
``end_effector_link``, centred on its origin, the end-effector point: :func:`payload_updates`) and starts
in a low pose (:data:`START` plus U(-0.05, 0.05) rad per joint); it must bring the end effector to
the position of a goal posture drawn per episode (:data:`GOAL_CENTER` +- :data:`GOAL_SPAN`) and
hold it. Success: the end-effector point within ``tol`` (1 cm) of the goal's end-effector point at
every one of the last ``hold_steps`` (50 = 0.5 s) of the ``episode_steps`` (200 = 2 s) steps.

A P-only position servo sags under load: the joint settles where ``K_j (target - q) = g_j(q)``,
``K_j = kp * DYNAMIXEL_ERROR_GAIN * effort_limit`` (13.1 N.m/rad), so a 0.5 kg payload costs
about 0.1 rad on joints 2 and 3 (several cm at the end effector). The action is an offset
``delta`` (4,) [rad] added to the goal posture (target = goal + delta, gripper held).

Expert (privileged, knows m): ``delta = c * K^-1 (g(goal) + m g0 J_z(goal)^T)``: the gravity
torque of the arm and the payload at the goal, through the servo stiffness; c (one scalar) is
chosen on the TRAINING payloads only (:func:`fit_expert_gain`).

Policy observation (never the true mass): ``[q - goal, 0.1 dq, goal - START]`` on the 4 arm
joints (12), plus, for the force-aware policy, ``0.1 f_hat`` (3, f_hat [N] in the base frame) from
a causal estimator of :mod:`actuatorlab.sim.force` built by ``make_estimator`` (default the
momentum observer, calibrated on free-motion runs of the same environment: payload 0, random
posture steps; ``learned``: the learned model's force head x contact gate through its
``OnlineEstimator``, trained by :func:`train_bc_heads` on force-labelled runs of this environment
at the TRAINING payloads plus random pushes, or any arm_model.json with force heads), updated once
per command tick from that tick's q, dq, current, PWM duty, temperature and command; the policy of
step k sees the estimate of the frames up to step k - 1 only. Both policies: the same MLP (2 x 64,
tanh; equinox), the same data, seeds, standardization (training data) and Adam budget (optax).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import mujoco
import numpy as np

from actuatorlab.sim.dynamics import ArmDynamics
from actuatorlab.errors import ModelError
from actuatorlab.sim.force import ForceFrame, ForceLog, fit_calibration, make_estimator
from actuatorlab.models.control import DYNAMIXEL_ERROR_GAIN
from actuatorlab.robots import load_robot
from actuatorlab.envs import TimingContract
from actuatorlab.envs.gym_env import ActuatorVectorEnv
from actuatorlab.logs.format import Channel, Setup, Trajectory
from actuatorlab.learned.heads import HeadsConfig

from force_recipes import train_heads_recipe

__all__ = ["ROBOT", "START", "GOAL_CENTER", "GOAL_SPAN", "TRAIN_MASSES", "HELDOUT_MASSES", "BCConfig", "LiftTask",
           "combine_inertial", "payload_updates", "servo_stiffness", "expert_delta", "policy_obs", "make_env", "calibrate_estimator",
           "run_episodes", "EXPERT_GAINS", "fit_expert_gain", "train_policy", "wilson", "G0", "record_runs", "push_schedule",
           "runs_to_logs", "head_training_logs", "train_bc_heads", "BC_HEAD_SIZES", "PUSH_RANGE"]

ROBOT = "open_manipulator_x"
#: start posture of the 4 arm joints [rad] (end effector low and close, z ~ 0.10 m)
START = (0.0, 0.6, 0.3, 0.5)
#: goal postures: GOAL_CENTER + U(-1, 1) GOAL_SPAN per arm joint [rad] (end effector at z 0.17-0.25 m)
GOAL_CENTER = (0.0, -0.1, -0.1, 0.3)
GOAL_SPAN = (0.6, 0.25, 0.25, 0.25)
TRAIN_MASSES = (0.0, 0.1, 0.2, 0.3)  # [kg]
HELDOUT_MASSES = (0.4, 0.5)  # [kg], outside the training range (extrapolation)
PAYLOAD_RADIUS = 0.03  # [m] solid sphere, as the virtual hardware's payload
G0 = 9.81  # [m/s^2]
N_ARM = 4


@dataclass(frozen=True)
class BCConfig:
    """episode_steps / hold_steps [policy steps of 10 ms]; tol [m] end-effector success radius;
    reset_noise [rad] start perturbation; estimator: a method of
    :data:`~actuatorlab.sim.force.METHODS` (``learned`` needs a model); force_scale [1/N] input scaling; delta_scale [rad]
    action scaling; hidden: MLP widths; steps / batch / lr: Adam budget."""

    episode_steps: int = 200
    hold_steps: int = 50
    tol: float = 0.01
    reset_noise: float = 0.05
    estimator: str = "momentum_observer"
    force_scale: float = 0.1
    delta_scale: float = 0.1
    hidden: tuple[int, ...] = (64, 64)
    steps: int = 3000
    batch: int = 256
    lr: float = 1e-3


@dataclass(frozen=True)
class LiftTask:
    """Environment task (docs/envs.md task interface): goal posture per episode; observation
    ``[q - goal, 0.1 dq, goal - START]`` of the arm joints (12); reward -mean((q - goal)^2) (not used
    by behaviour cloning); done when the state is not finite."""

    def obs_size(self, env) -> int:
        return 3 * N_ARM

    def reset(self, env, key, xp):
        u = np.asarray(jax.random.uniform(key, (N_ARM,), jax.numpy.float32, -1.0, 1.0), float)
        goal = np.asarray(env.home, float)[env.qadr].copy()
        goal[:N_ARM] = np.asarray(GOAL_CENTER) + np.asarray(GOAL_SPAN) * u
        return {"goal": xp.asarray(np.clip(goal, env.lo, env.hi))}

    def observe(self, env, qpos, qvel, data, last_action, xp):
        q, dq, goal = qpos[..., env.qadr][..., :N_ARM], qvel[..., env.dadr][..., :N_ARM], data["goal"][..., :N_ARM]
        return xp.concatenate([q - goal, 0.1 * dq, goal - np.asarray(START)], axis=-1)

    def reward(self, env, qpos, qvel, data, action, last_action, xp):
        err = xp.mean((qpos[..., env.qadr] - data["goal"]) ** 2, axis=-1)
        return -err, {"posture_error": err}

    def done(self, env, qpos, qvel, data, xp):
        return ~(xp.all(xp.isfinite(qpos), axis=-1) & xp.all(xp.isfinite(qvel), axis=-1))


# -- payload, expert ----------------------------------------------------------------------------
def combine_inertial(mass0: float, ipos0, iquat0, inertia0, mass1: float, pos1, inertia1) -> tuple:
    """The rigid union of a body's inertial (``mass0`` [kg], centre of mass ``ipos0`` (3,) [m] and
    principal frame ``iquat0`` (4,) in the body frame, principal moments ``inertia0`` (3,) [kg m^2])
    and a second mass ``mass1`` at ``pos1`` (3,) [m] (body frame) with the inertia tensor
    ``inertia1`` (3, 3) [kg m^2] about its own centre of mass, in the body frame.

    Masses add, the centre of mass is their mass-weighted mean, and each part's inertia tensor is
    moved to the common centre of mass by the parallel-axis (Huygens-Steiner) theorem,
    I_c = I_k + m_k (|d_k|^2 E - d_k d_k^T), d_k = c_k - c; the sum is diagonalised into MuJoCo's
    principal moments and frame (eigenvectors, a right-handed rotation). Returns (mass, ipos (3,),
    iquat (4,), inertia (3,)). ``mass1`` 0 returns the body's own inertial unchanged."""
    if mass1 == 0.0:
        return float(mass0), np.asarray(ipos0, float).copy(), np.asarray(iquat0, float).copy(), np.asarray(inertia0, float).copy()
    if mass1 < 0.0:
        raise ValueError(f"combine_inertial: the added mass must be >= 0, got {mass1} kg")
    c0, c1 = np.asarray(ipos0, float), np.asarray(pos1, float)
    R0 = np.zeros(9)
    mujoco.mju_quat2Mat(R0, np.asarray(iquat0, float))
    R0 = R0.reshape(3, 3)
    parts = ((float(mass0), c0, R0 @ np.diag(np.asarray(inertia0, float)) @ R0.T), (float(mass1), c1, np.asarray(inertia1, float)))
    M = parts[0][0] + parts[1][0]
    c = (parts[0][0] * c0 + parts[1][0] * c1) / M
    I = np.zeros((3, 3))
    for m_k, c_k, I_k in parts:
        d = c_k - c
        I += I_k + m_k * (d @ d * np.eye(3) - np.outer(d, d))
    w, V = np.linalg.eigh(0.5 * (I + I.T))
    if np.linalg.det(V) < 0:
        V[:, 2] = -V[:, 2]
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, V.flatten())  # x_body = V x_principal
    return M, c, quat, w


def payload_updates(robot, mass: float) -> dict:
    """``model_updates`` (MjModel field -> full array) that ADD a solid sphere of ``mass`` [kg]
    (radius 3 cm, inertia 2/5 m r^2) with its centre at the end-effector point: the origin of the
    body ``end_effector_link`` (the point of the success check, the expert's and the estimators'
    Jacobian), where the synth suite welds its payload (link5 + (0.126, 0, 0)). The sphere is
    combined with the body's own inertial (:func:`combine_inertial`: masses add, parallel-axis
    theorem), so ``body_mass``, ``body_ipos``, ``body_iquat`` and ``body_inertia`` of that body
    change; ``mass`` 0 leaves the body's mass and inertia unchanged. In this MJCF the body is
    massless with ``ipos`` (0.126, 0, 0); a massless body's ``ipos`` is set to the origin at every
    mass (no dynamic effect), so a push on the body's centre of mass (``NativeBatch.body_force``,
    MuJoCo ``xfrc_applied``) acts at the end-effector point too, payload or not. (Before 2026-12-01
    the mass was written over the body's and its centre of mass left at ``ipos``, 12.6 cm beyond
    the point.)"""
    if not mass >= 0.0:
        raise ValueError(f"payload_updates: the payload mass must be >= 0 kg, got {mass}")
    m = robot.model()
    b = m.body("end_effector_link").id
    upd = {k: getattr(m, k).copy() for k in ("body_mass", "body_ipos", "body_iquat", "body_inertia")}
    I1 = 0.4 * float(mass) * PAYLOAD_RADIUS ** 2 * np.eye(3)
    M, c, q, w = combine_inertial(m.body_mass[b], m.body_ipos[b], m.body_iquat[b], m.body_inertia[b], float(mass), np.zeros(3), I1)
    upd["body_mass"][b], upd["body_ipos"][b], upd["body_iquat"][b], upd["body_inertia"][b] = M, c, q, w
    if m.body_mass[b] == 0.0:
        upd["body_ipos"][b] = 0.0  # massless body: its "centre of mass", where a push acts, is the point
    return upd


def servo_stiffness(robot) -> np.ndarray:
    """(4,) [N.m/rad] static stiffness of the arm servos' P law: kp * DYNAMIXEL_ERROR_GAIN * effort_limit
    (duty per rad of error times the stall torque kt V / R)."""
    return np.array([dict(j.gains)["kp"] * float(DYNAMIXEL_ERROR_GAIN) * j.effort_limit for j in robot.joints[:N_ARM]])


def expert_delta(dyn: ArmDynamics, stiffness: np.ndarray, goal: np.ndarray, mass: float, gain: float = 1.0) -> np.ndarray:
    """(4,) [rad] privileged expert offset: gain * K^-1 (g(goal) + mass g0 J_z(goal)^T) (the motor
    torque that holds arm and payload at the goal, through the servo stiffness)."""
    q = np.asarray(goal, float)[:N_ARM]
    tau = dyn.gravity(q) + mass * G0 * dyn.jacobian(q)[2]
    return gain * tau / stiffness


def policy_obs(task_obs: np.ndarray, f_hat: np.ndarray | None, cfg: BCConfig) -> np.ndarray:
    """(B, 12) task observation, plus (B, 3) force_scale * f_hat when ``f_hat`` is given: (B, 15)."""
    return task_obs if f_hat is None else np.concatenate([task_obs, cfg.force_scale * f_hat], axis=-1)


# -- environment and estimator ---------------------------------------------------------------------
def make_env(mass: float, num_envs: int, cfg: BCConfig, task: Any = None):
    """The native Gymnasium vector environment with ``mass`` [kg] at the end effector; actions are
    absolute joint targets (offset zero, scale 1, no clip; clipped to the joint ranges)."""

    robot = load_robot(ROBOT)
    home = np.zeros(robot.n_joints)
    home[:N_ARM] = START
    contract = TimingContract(decimation=1, action_offset="zero", action_scale=1.0, action_clip=None)
    return ActuatorVectorEnv(robot, None, num_envs=num_envs, contract=contract, task=task or LiftTask(),
                             episode_length=cfg.episode_steps + 1, reset_noise=cfg.reset_noise, home=home,
                             model_updates=payload_updates(robot, mass))


def _frame(out, b: int, sent: np.ndarray, v_supply: np.ndarray, u_lim: np.ndarray) -> ForceFrame:
    """The estimator's frame of environment b from one step's ArmOutputs (B, D=1, n): the state at
    the start of the command tick, the motor current [A] and the PWM duty ``u / u_lim`` in [-1, 1]
    (the firmware output over its saturation, as a log's ``pwm_duty``) during it, the command
    ``sent`` (n,) [rad] and the supply voltage (n,) [V]."""
    return ForceFrame(np.asarray(sent, float), out.q[b, 0], out.dq[b, 0], v_supply, np.ones(out.q.shape[-1]),
                      out.current[b, 0], out.u[b, 0] / u_lim, out.temperature[b, 0])


@dataclass
class _Estimators:
    """One causal estimator per environment; ``step(out, sent)`` feeds this step's frames.
    ``make`` None: no estimator (the policy does not read f_hat; the estimate stays zero)."""

    make: Callable[[], Any] | None
    B: int
    v_supply: np.ndarray
    u_lim: np.ndarray
    ests: list = field(default_factory=list)

    def reset(self):
        self.ests = [] if self.make is None else [self.make() for _ in range(self.B)]
        for e in self.ests:
            e.reset()
        return np.zeros((self.B, 3))

    def step(self, out, sent: np.ndarray) -> np.ndarray:
        F = np.zeros((self.B, 3))
        for b, e in enumerate(self.ests):
            F[b] = e.step(_frame(out, b, sent[b], self.v_supply, self.u_lim)).force
        return F


def record_runs(mass: float, n_envs: int, steps: int, seed: int, cfg: BCConfig, push: Callable[[int], np.ndarray] | None = None,
                hold: int = 60) -> dict:
    """Runs of the same environment with payload ``mass`` [kg], random goal postures
    (:data:`GOAL_CENTER` +- 1.5 :data:`GOAL_SPAN`) held ``hold`` steps each, and an optional push:
    ``push(t) -> (n_envs, 3)`` [N, world frame] on the end-effector point during step t (the
    end-effector body's centre of mass, which :func:`payload_updates` puts there, as the payload's). Returns frames (ForceFrame of
    (B, T, n) arrays) and force (B, T, 3) [N], the environment-on-robot force at that point
    (payload weight ``-mass g0 e_z`` plus the push), the synth suite's label convention."""
    robot = load_robot(ROBOT)
    env = make_env(mass, n_envs, BCConfig(**{**cfg.__dict__, "episode_steps": steps}))
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    core = env.core
    body = robot.model().body("end_effector_link").id
    cols = {k: [] for k in ForceFrame._fields}
    force = np.zeros((n_envs, steps, 3))
    target = np.asarray(core.home, float)[core.qadr][None].repeat(n_envs, 0)
    for t in range(steps):
        if t % hold == 0:
            target[:, :N_ARM] = np.asarray(GOAL_CENTER) + np.asarray(GOAL_SPAN) * 1.5 * rng.uniform(-1, 1, (n_envs, N_ARM))
        f = np.zeros((n_envs, 3)) if push is None else np.asarray(push(t), float)
        core.body_force = None if push is None else (body, f)
        env.step(target)
        force[:, t] = f
        force[:, t, 2] -= mass * G0
        out = core.last_outputs
        fr = [_frame(out, b, np.clip(target[b], core.lo, core.hi), core.v_supply, core.u_lim) for b in range(n_envs)]
        for k in cols:
            cols[k].append(np.stack([getattr(fb, k) for fb in fr]))
    core.body_force = None
    return {"frames": ForceFrame(*(np.stack(cols[k], axis=1) for k in ForceFrame._fields)), "force": force}


def calibrate_estimator(cfg: BCConfig, n_envs: int = 4, steps: int = 600, seed: int = 100, model: Any = None):
    """Calibrate ``cfg.estimator`` on FREE motion (payload 0) of the same environment: random goal
    postures held 0.6 s each (:func:`record_runs`). Returns (dyn, calibration, make) with make() a
    fresh estimator. ``learned``: no calibration (None); ``model`` is the learned whole-robot model
    whose force head and gate run through ``make_estimator("learned", ...)``."""
    robot = load_robot(ROBOT)
    dyn = ArmDynamics(robot)
    if cfg.estimator == "learned":
        if model is None:
            raise ModelError("force_bc: the 'learned' estimator needs a learned model (model=LearnedArm; "
                             "train one with train_bc_heads or train-heads)")
        make_estimator("learned", robot, model=model)  # one clear error now, not inside a rollout
        return dyn, None, (lambda: make_estimator("learned", robot, model=model))
    r = record_runs(0.0, n_envs, steps, seed, cfg)
    arr = r["frames"]
    time = np.arange(steps) * robot.control_dt
    logs = [ForceLog(f"free_{b}", ForceFrame(*(a[b] for a in arr)), time, np.zeros((steps, 3)),
                     True, np.zeros(steps, bool), "train", "free_motion", {}) for b in range(n_envs)]
    cal = fit_calibration(dyn, logs, friction=cfg.estimator != "id_linear")
    return dyn, cal, (lambda: make_estimator(cfg.estimator, robot, dyn=dyn, calibration=cal))


# -- learned force head trained on runs of this environment ------------------------------------
#: pushes of the head-training runs: magnitude U(PUSH_RANGE) [N], direction uniform on the sphere
PUSH_RANGE = (0.5, 6.0)
HEAD_DATA_SEED = 20000  # seeds of the head-training runs (the calibration uses 100, the expert's gain 200-203,
#                         the demonstrations 1 + 1000 i, the evaluation 5000 + ...: all disjoint)


def push_schedule(n_envs: int, steps: int, seed: int, block: int = 100, ramp: int = 10, p_on: float = 0.6):
    """``push(t) -> (n_envs, 3)`` [N]: per environment and block of ``block`` steps, with probability
    ``p_on`` a constant push of magnitude U(:data:`PUSH_RANGE`) along a direction uniform on the
    sphere, ramped linearly over ``ramp`` steps at both ends of the block; else none."""
    rng = np.random.default_rng(seed)
    nb = -(-steps // block)
    d = rng.normal(size=(n_envs, nb, 3))
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    F = d * rng.uniform(*PUSH_RANGE, (n_envs, nb, 1)) * (rng.uniform(size=(n_envs, nb, 1)) < p_on)
    k = np.arange(block)
    env_ = np.minimum(1.0, np.minimum(k + 1, block - k) / ramp)  # ramp up, hold, ramp down

    def push(t: int) -> np.ndarray:
        return F[:, t // block] * env_[t % block]

    return push


def runs_to_logs(runs: dict, mass: float, name: str, pushed: bool) -> list:
    """Multi-joint logs (docs/synth.md channel convention: position/<joint>, velocity/<joint>,
    position_target/<joint>, current/<joint>, pwm_duty/<joint>, temperature/<joint>, force_x|y|z,
    contact) of :func:`record_runs`' runs, arm joints only. contact: a payload carried or a push
    above 0.05 N (the synth suite's rule)."""

    robot = load_robot(ROBOT)
    fr, force = runs["frames"], runs["force"]
    B, T = force.shape[:2]
    joints = list(robot.joint_names[:N_ARM])
    push = force.copy()
    push[..., 2] += mass * G0
    contact = (np.linalg.norm(push, axis=-1) > 0.05) | (mass > 0)
    units = {"position": "rad", "velocity": "rad/s", "position_target": "rad", "current": "A", "pwm_duty": "1",
             "temperature": "degC", "torque_enable": "bool"}
    src = {"position": fr.q, "velocity": fr.dq, "position_target": fr.q_target, "current": fr.current,
           "pwm_duty": fr.pwm, "temperature": fr.temperature, "torque_enable": fr.enable}
    logs = []
    for b in range(B):
        data, ch = {}, {}
        for k, arr in src.items():
            for j in joints:
                data[f"{k}/{j}"], ch[f"{k}/{j}"] = np.asarray(arr[b, :, robot.index(j)], float), Channel(units[k], "measured")
        data["supply_voltage"], ch["supply_voltage"] = np.full(T, float(fr.v_supply[b, 0, 0])), Channel("V", "measured")
        for a, ax in enumerate("xyz"):
            data[f"force_{ax}"], ch[f"force_{ax}"] = force[b, :, a].copy(), Channel("N", "estimated")
        data["contact"], ch["contact"] = contact[b].astype(float), Channel("bool", "estimated")
        j0 = robot.joints[0]
        setup = Setup(j0.actuator, controller=j0.law, gains=dict(j0.gains), supply_voltage=j0.supply_voltage,
                      extra={"robot": ROBOT, "joints": joints, "generator": "bench/force_bc_lib.py"})
        cond = {"load": "none" if mass == 0 else f"payload_{round(1000 * mass)}g", "excitation": "push_hold" if pushed
                else ("lift_hold" if mass > 0 else "no_contact"), "contact": "push" if pushed else "none"}
        logs.append(Trajectory(f"{name}_{b}", np.arange(T) * robot.control_dt, data, ch, setup, cond,
                               f"synthetic:{ROBOT}/force_bc/{name}_{b}"))
    return logs


def head_training_logs(cfg: BCConfig, n_envs: int = 8, steps: int = 800, seed: int = HEAD_DATA_SEED,
                       pushes: bool = True) -> list:
    """Force-labelled runs of the BC environment for the learned force head: every TRAINING payload
    (:data:`TRAIN_MASSES`; never a held-out one), ``n_envs`` runs of ``steps`` each, random goal
    postures; with ``pushes`` the second half of the runs of every payload also get
    :func:`push_schedule`'s pushes. Seeds ``seed + 10 i (+ 1)``, disjoint from every evaluation seed."""
    logs = []
    for i, m in enumerate(TRAIN_MASSES):
        s = seed + 10 * i
        half = n_envs // 2 if pushes else n_envs
        logs += runs_to_logs(record_runs(m, half, steps, s, cfg), m, f"m{round(1000 * m)}_free", False)
        if pushes:
            logs += runs_to_logs(record_runs(m, n_envs - half, steps, s + 1, cfg,
                                             push=push_schedule(n_envs - half, steps, s + 1)), m,
                                 f"m{round(1000 * m)}_push", True)
    return logs


#: heads network of :func:`train_bc_heads` (a small Transformer: docs/force.md, bench/README.md)
BC_HEAD_SIZES = {"d": 64, "n_layers": 2, "ff": 128, "head_width": 64}


def train_bc_heads(out, cfg: BCConfig = BCConfig(), *, n_envs: int = 8, steps: int = 800, val_envs: int = 2,
                   pushes: bool = True, train_steps: int = 1000, sizes: dict | None = None, seed: int = 0,
                   progress: bool = False, force_prior: str | None = None,
                   prior_labels: bool = False) -> dict:
    """Train the learned force / gate heads (:func:`~actuatorlab.learned.heads.train_heads`, from
    scratch, teacher forcing) on :func:`head_training_logs` (training payloads, pushes), validated
    on runs with other seeds (``val_envs`` per payload; the best checkpoint by validation force
    MAE). No held-out payload and no evaluation episode is used. ``force_prior``: a classical method
    the heads correct (calibrated on the payload-0 runs without pushes; docs/force.md, "Force
    prior"; ``prior_labels``: calibrated on every labelled run, pushes and training payloads
    included). Writes OUT/arm_model.json; returns its dict."""

    tr = head_training_logs(cfg, n_envs, steps, HEAD_DATA_SEED, pushes)
    va = head_training_logs(cfg, val_envs, steps, HEAD_DATA_SEED + 5000, pushes)
    cfg = HeadsConfig(arch="transformer", sizes=sizes or BC_HEAD_SIZES, steps=train_steps, batch=128, lr=1e-3,
                      eval_every=max(50, train_steps // 8), noise=0.1, weight_decay=1e-4, seed=seed)
    return train_heads_recipe(ROBOT, tr, va, cfg, out=out, progress=progress, force_prior=force_prior,
                              prior_labels=prior_labels)


# -- rollouts ---------------------------------------------------------------------------------------
def run_episodes(act: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray], mass: float, num_envs: int,
                 seed: int, cfg: BCConfig, make_est: Callable[[], Any] | None, dyn: ArmDynamics) -> dict:
    """Run ``num_envs`` episodes with payload ``mass`` [kg]; ``act(task_obs (B, 12), f_hat (B, 3), goal
    (B, 4)) -> delta (B, 4)`` [rad]. Returns task_obs (B, T, 12), f_hat (B, T, 3) (the estimate the
    policy saw at each step), goal (B, 4), ee_err (B, T) [m] (true state after each step), success
    (B,) bool, final_err (B,) [m] mean ee error over the hold window."""
    env = make_env(mass, num_envs, cfg)
    core = env.core
    obs, _ = env.reset(seed=seed)
    goal_full = core.task_data["goal"].copy()
    goal = goal_full[:, :N_ARM]
    ee_goal = np.stack([dyn.ee_position(g) for g in goal])
    ests = _Estimators(make_est, num_envs, core.v_supply, core.u_lim)
    f_hat = ests.reset()
    T = cfg.episode_steps
    O, F, E = np.zeros((num_envs, T, obs.shape[-1])), np.zeros((num_envs, T, 3)), np.zeros((num_envs, T))
    for t in range(T):
        O[:, t], F[:, t] = obs, f_hat
        target = goal_full.copy()
        target[:, :N_ARM] += act(obs, f_hat, goal)
        obs, _, term, _, _ = env.step(target)
        if term.any():
            break
        f_hat = ests.step(core.last_outputs, np.clip(target, core.lo, core.hi))
        q = core.arm.qpos[:, core.qadr][:, :N_ARM]
        E[:, t] = np.linalg.norm(np.stack([dyn.ee_position(qb) for qb in q]) - ee_goal, axis=-1)
    hold = E[:, T - cfg.hold_steps:]
    return {"task_obs": O, "f_hat": F, "goal": goal, "ee_err": E, "success": np.all(hold < cfg.tol, axis=1),
            "final_err": hold.mean(axis=1)}


def expert_policy(dyn, stiffness, mass: float, gain: float):
    """The privileged expert as an ``act`` function (it knows ``mass``)."""
    return lambda obs, f, goal: np.stack([expert_delta(dyn, stiffness, g, mass, gain) for g in goal])


EXPERT_GAINS = (0.8, 0.9, 1.0, 1.1, 1.2, 1.3)  # the default grid of the expert's gain c


def fit_expert_gain(dyn, stiffness, cfg: BCConfig, make_est, gains=EXPERT_GAINS, num_envs: int = 8,
                    seed: int = 200) -> tuple[float, dict]:
    """The expert's scalar gain c with the lowest mean hold error over the TRAINING payloads."""
    scores = {}
    for c in gains:
        errs = [run_episodes(expert_policy(dyn, stiffness, m, c), m, num_envs, seed + i, cfg, make_est, dyn)["final_err"]
                for i, m in enumerate(TRAIN_MASSES)]
        scores[float(c)] = float(np.mean(np.concatenate(errs)))
    return min(scores, key=scores.get), scores


# -- behaviour cloning --------------------------------------------------------------------------------
def train_policy(X: np.ndarray, Y: np.ndarray, cfg: BCConfig, seed: int):
    """Behaviour cloning: an MLP (equinox) fitted by Adam (optax) to Y / delta_scale from X
    standardized with the training statistics. Returns (act(X) -> Y (numpy), final train loss)."""
    import equinox as eqx
    import jax.numpy as jnp
    import optax

    mu, sd = X.mean(0), X.std(0) + 1e-6
    Xn = jnp.asarray((X - mu) / sd, jnp.float32)
    Yn = jnp.asarray(Y / cfg.delta_scale, jnp.float32)
    k_init, k_data = jax.random.split(jax.random.PRNGKey(seed))
    width = cfg.hidden[0]
    model = eqx.nn.MLP(X.shape[1], Y.shape[1], width, len(cfg.hidden), activation=jnp.tanh, key=k_init)
    opt = optax.adam(cfg.lr)
    state = opt.init(eqx.filter(model, eqx.is_array))

    def loss(m, x, y):
        return jnp.mean((jax.vmap(m)(x) - y) ** 2)

    @eqx.filter_jit
    def update(m, s, idx):
        val, g = eqx.filter_value_and_grad(loss)(m, Xn[idx], Yn[idx])
        u, s = opt.update(g, s, m)
        return eqx.apply_updates(m, u), s, val

    idx = jax.random.randint(k_data, (cfg.steps, cfg.batch), 0, X.shape[0])
    val = jnp.nan
    for i in range(cfg.steps):
        model, state, val = update(model, state, idx[i])
    fwd = eqx.filter_jit(lambda m, x: jax.vmap(m)(x))

    def act(x: np.ndarray) -> np.ndarray:
        return np.asarray(fwd(model, jnp.asarray((x - mu) / sd, jnp.float32)), float) * cfg.delta_scale

    return act, float(val)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score 95 % interval of a binomial proportion k / n."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def collect_demos(dyn, stiffness, gain: float, cfg: BCConfig, make_est, per_mass: int, seed: int):
    """Expert demonstrations on every TRAINING payload: (task_obs (N, 12), f_hat (N, 3), delta (N, 4),
    expert success rate)."""
    O, F, Y, ok = [], [], [], []
    for i, m in enumerate(TRAIN_MASSES):
        r = run_episodes(expert_policy(dyn, stiffness, m, gain), m, per_mass, seed + 1000 * i, cfg, make_est, dyn)
        d = np.stack([expert_delta(dyn, stiffness, g, m, gain) for g in r["goal"]])
        T = r["task_obs"].shape[1]
        O.append(r["task_obs"].reshape(-1, r["task_obs"].shape[-1]))
        F.append(r["f_hat"].reshape(-1, 3))
        Y.append(np.repeat(d, T, axis=0))
        ok.append(r["success"])
    return np.concatenate(O), np.concatenate(F), np.concatenate(Y), float(np.mean(np.concatenate(ok)))


def _summary(r_list: list[dict]) -> dict:
    s = np.concatenate([r["success"] for r in r_list])
    e = np.concatenate([r["final_err"] for r in r_list])
    k, n = int(s.sum()), int(s.size)
    lo, hi = wilson(k, n)
    return {"success": k / n, "successes": k, "trials": n, "ci95": [lo, hi], "hold_error_mm": 1000 * float(np.mean(e)),
            "hold_error_mm_median": 1000 * float(np.median(e))}


def run_experiment(cfg: BCConfig = BCConfig(), *, demos_per_mass: int = 32, trials_per_mass: int = 24,
                   seeds: tuple[int, ...] = (0,), eval_seed: int = 5000, log: Callable[[str], None] = print,
                   model: Any = None, model_info: dict | None = None, gains: tuple[float, ...] = EXPERT_GAINS) -> dict:
    """The whole example: calibrate the estimator on free motion, choose the expert's gain on the
    training payloads, collect demonstrations, train the two policies per seed and evaluate
    everything on the held-out payloads (``trials_per_mass`` episodes per held-out mass, start
    perturbations and goals from ``eval_seed`` (+ 10 per training seed: fresh episodes per seed,
    the same episodes for both policies), never used in training; the demonstrations use seeds
    1 + 1000 i, the expert's gain 200 + i). ``model``: the learned model for ``cfg.estimator ==
    "learned"`` (``model_info``: what it was trained on, copied into the result); ``gains``: the
    grid of the expert's gain c (:func:`fit_expert_gain`, training payloads only). The estimator
    runs only where its estimate is read (demonstrations, the force-aware policy, and the expert's
    held-out episodes for the estimate's own error); the other rollouts do not depend on it.
    Returns the JSON dict."""
    import time as _time

    t0 = _time.time()
    robot = load_robot(ROBOT)
    K = servo_stiffness(robot)
    dyn, cal, make_est = calibrate_estimator(cfg, model=model)
    gain, gain_scores = fit_expert_gain(dyn, K, cfg, None, gains=tuple(gains))
    if gain in (min(gains), max(gains)) and len(gains) > 1:
        log(f"note: the expert's gain c = {gain} is at the edge of its grid {tuple(gains)} (--gains)")
    log(f"estimator {cfg.estimator} ready; expert gain c = {gain} (train-payload hold error "
        f"{ {k: round(1000 * v, 1) for k, v in gain_scores.items()} } mm)")
    O, F, Y, demo_ok = collect_demos(dyn, K, gain, cfg, make_est, demos_per_mass, seed=1)
    log(f"{len(Y)} demonstration steps ({demos_per_mass} episodes x {len(TRAIN_MASSES)} payloads), expert success {demo_ok:.2f}")

    def evaluate(act, masses, seed0, make=None):
        return [run_episodes(act, m, trials_per_mass, seed0 + 1000 * i, cfg, make, dyn) for i, m in enumerate(masses)]

    res: dict[str, Any] = {"expert": {}, "no_compensation": {}, "bc_force": {}, "bc_no_force": {}}
    for split, masses, s0 in (("heldout", HELDOUT_MASSES, eval_seed), ("train_payloads", TRAIN_MASSES, eval_seed + 500)):
        ex = [run_episodes(expert_policy(dyn, K, m, gain), m, trials_per_mass, s0 + 1000 * i, cfg,
                           make_est if split == "heldout" else None, dyn) for i, m in enumerate(masses)]
        res["expert"][split] = _summary(ex)
        if split == "heldout":  # the estimate's own error over the expert's hold windows (f_z = -m g0)
            expert_fz = {str(m): float(np.mean(r["f_hat"][:, -cfg.hold_steps:, 2].mean(1) + m * G0))
                         for r, m in zip(ex, masses)}
        nc = evaluate(lambda o, f, g: np.zeros((len(g), N_ARM)), masses, s0)
        res["no_compensation"][split] = _summary(nc)
    per_seed: dict[str, list] = {"bc_force": [], "bc_no_force": []}
    losses: dict[str, list] = {"bc_force": [], "bc_no_force": []}
    for j, seed in enumerate(seeds):
        e0 = eval_seed + 10 * j  # fresh evaluation episodes per training seed, the same for both policies
        for name, use_f in (("bc_force", True), ("bc_no_force", False)):
            X = policy_obs(O, F if use_f else None, cfg)
            pol, loss = train_policy(X, Y, cfg, seed)
            losses[name].append(loss)
            act = (lambda o, f, g, pol=pol, use_f=use_f: pol(policy_obs(o, f if use_f else None, cfg)))
            mk = make_est if use_f else None
            per_seed[name].append({"heldout": evaluate(act, HELDOUT_MASSES, e0, mk),
                                   "train_payloads": evaluate(act, TRAIN_MASSES, e0 + 500, mk)})
    for name in per_seed:
        for split in ("heldout", "train_payloads"):
            res[name][split] = _summary([r for s in per_seed[name] for r in s[split]])
            res[name][split]["per_seed_success"] = [_summary(s[split])["success"] for s in per_seed[name]]
        res[name]["train_loss"] = losses[name]
    by_mass = {}
    for name in ("bc_force", "bc_no_force"):
        by_mass[name] = {str(m): _summary([s["heldout"][i] for s in per_seed[name]])["success"]
                         for i, m in enumerate(HELDOUT_MASSES)}
    f_err = [np.abs(r["f_hat"][:, -cfg.hold_steps:, 2].mean(1) + m * G0).mean()
             for s in per_seed["bc_force"] for r, m in zip(s["heldout"], HELDOUT_MASSES)]
    return {
        "robot": ROBOT, "estimator": cfg.estimator, "train_masses_kg": list(TRAIN_MASSES),
        "heldout_masses_kg": list(HELDOUT_MASSES), "heldout_kind": "outside the training range",
        "tol_m": cfg.tol, "hold_steps": cfg.hold_steps, "episode_steps": cfg.episode_steps, "control_dt_s": robot.control_dt,
        "expert_gain": gain, "expert_gain_scores_mm": {str(k): 1000 * v for k, v in gain_scores.items()},
        "demo_steps": int(len(Y)), "demo_expert_success": demo_ok, "seeds": list(seeds),
        "trials_per_mass": trials_per_mass, "calibration": None if cal is None else cal.to_dict(),
        "learned_model": model_info,
        "heldout_force_z_abs_error_n": float(np.mean(f_err)) if f_err else None,
        "expert_heldout_force_z_bias_n": expert_fz,
        "success_by_heldout_mass": by_mass, **{k: v for k, v in res.items()},
        "force_helps": bool(res["bc_force"]["heldout"]["ci95"][0] > res["bc_no_force"]["heldout"]["ci95"][1]),
        "wall_s": _time.time() - t0,
    }

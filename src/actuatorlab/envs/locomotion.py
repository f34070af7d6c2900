"""Legged velocity tracking (trot) on flat ground, in the style of MuJoCo Playground's joystick
tasks, with actuatorlab actuators in the loop and the model homotopy's alpha traced.

:class:`LocomotionEnv` is a *policy environment* (docs/policy.md, docs/locomotion.md)::

    observation_size, action_size                      actions in [-1, 1]
    default_env_params() -> {"alpha": f32 ()}          alpha in [0, 1] (sim.homotopy)
    reset(rng, env_params, command=None) -> LocoState   command: optional fixed (3,) for the episode
    step(state, action, env_params) -> LocoState       pure JAX: jit / vmap / scan; alpha traced

The physics is :class:`~actuatorlab.envs.mjx_env.MjxEnv` (timing contract, actuator model on every
joint through ``sim.arm.make_mjx_rollout``, or MuJoCo's built-in actuators, randomization hooks,
envelope counters): every step passes the homotopy's model fields for alpha
(:meth:`~actuatorlab.sim.homotopy.Homotopy.model_updates`) to it, so changing alpha never
recompiles. This module adds the command, the observation, the reward terms and the termination.

Command (per episode): c = (vx [m/s], vy [m/s], yaw rate [rad/s]) ~ U(ranges), zero with
probability ``p_still``. Observation (48 for ANYmal C), from the state ``obs_latency`` command ticks
old (the contract's FIFO), each signal optionally noised by the randomization spec's ``noise``
entries (signals ``linvel``, ``gyro``, ``gravity``, ``position``, ``velocity``)::

    [2 v_b (3), 0.25 w_b (3), g_b (3), q - q_home (n), 0.05 dq (n), last action (n),
     (2 cx, 2 cy, 0.25 cyaw) (3)]

v_b, w_b: trunk linear and angular velocity in the trunk frame [m/s, rad/s]; g_b: unit gravity in
the trunk frame. That is ``TrotConfig.observation = "privileged"``: a robot does not measure v_b
(an IMU integrates it with drift). ``"proprioceptive"`` observes what the robot measures, the
frame ``f_t = [0.25 w_b (3), g_b (3), q - q_home (n), 0.05 dq (n), last action (n)]`` (6 + 3n)::

    [f_t, (2 cx, 2 cy, 0.25 cyaw) (3), f_{t-1}, ..., f_{t-H}]        H = TrotConfig.history

(the previous frames repeat f_0 after a reset) and hands the critic ``privileged`` (7,) =
[2 v_b (3) true, not delayed, not noised; the feet's contacts (4)]: the asymmetric actor-critic
of policy.ppo (``privileged_size``), as MuJoCo Playground's joystick tasks train a deployable
policy. Reward (true state at the end of the step; weights ``TrotConfig``, the sum times
the policy period dt, clipped at 0 like Playground's joystick tasks when ``clip_reward``)::

    tracking_lin_vel   exp(-|c_xy - v_b,xy|^2 / sigma)
    tracking_ang_vel   exp(-(c_yaw - w_b,z)^2 / sigma)
    lin_vel_z          v_b,z^2
    ang_vel_xy         |w_b,xy|^2
    orientation        |g_b,xy|^2
    torques            sum tau^2  [N^2.m^2]  (tau: the actuator effort at the command ticks)
    action_rate        sum (a - a_prev)^2
    feet_air_time      sum_feet (t_air - t_target) [first touchdown]   when |c_xy| > 0.1
    trot               [c_LF != c_RH] + [c_RF != c_LH]   (diagonal pairs out of phase) when moving
    termination        1 on a fall (not on the time limit)
    pose               exp(-sum_j w_j (q_j - q_home,j)^2), w = 1 on hip joints, 0.1 on knees (*_KFE)

Contacts: a foot is in contact when its collision sphere's lowest point is below
``contact_height`` [m] (kinematics of the foot geoms; MJX's foot-only contact model has no trunk
geoms, so "trunk contact" is the trunk height). Termination: non-finite state, trunk height below
``min_base_height`` or trunk tilt above ``max_tilt`` [rad]. ``info["truncation"]`` is 1 when the
episode ends on the time limit alone.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..errors import ModelError
from .mjx_env import EnvState, MjxEnv
from .timing import TimingContract
from ..robots.loader import load_robot, Robot
from ..sim.homotopy import make_homotopy
from ..sim.randomization import Randomizer
from ..sim.arm import WARP_WORLDS, mujoco_armature
from ..errors import UnknownNameError
from ..sim import mjx_module

#: default action scale [rad per unit action] around the standing posture (docs/locomotion.md)
DEFAULT_ACTION_SCALE = 1.0

__all__ = ["DEFAULT_ACTION_SCALE", "TrotConfig", "OBSERVATIONS", "LocoState", "LocomotionEnv", "ACTUATOR_OPTIONS",
           "actuator_option"]

#: named actuator options of the locomotion env: name -> what load_actuator receives
ACTUATOR_OPTIONS = {
    "nominal": "the robot config's actuator (anymal_c: m1, rigid ANYdrive with Isaac Lab's DC-motor envelope, PD 40/5)",
    "sea": "series-elastic ANYdrive (m1+compliance, robots/actuators/<robot>_sea.json)",
    "builtin": "MuJoCo's own actuators of the MJCF (position servos), for the wrong-actuator comparison",
}
_ACT_DIR = Path(__file__).resolve().parent.parent / "robots" / "actuators"


def actuator_option(robot_name: str, actuator: Any) -> Any:
    """What :func:`~actuatorlab.envs.actuators.load_actuator` gets for a named option (or the value
    itself: a path, dict, Actuator or LearnedArm)."""
    if isinstance(actuator, str) and not actuator.endswith(".json"):
        if actuator not in ACTUATOR_OPTIONS:
            raise UnknownNameError("actuator option", actuator, tuple(ACTUATOR_OPTIONS))
        if actuator == "sea":
            p = _ACT_DIR / f"{robot_name}_sea.json"
            if not p.is_file():
                raise ModelError(f"{p}: no series-elastic actuator file for robot {robot_name!r}")
            return str(p)
        return actuator
    return actuator


def scene_path(robot: Robot, mjcf: str | Path) -> Path:
    """The MJCF ``mjcf`` names for ``robot`` (:class:`LocomotionEnv`'s ``mjcf``): absolute, beside the robot
    config's MJCF, or from the working directory; a missing file raises naming both places."""
    p = Path(mjcf)
    for c in ([p] if p.is_absolute() else [Path(robot.mjcf_path).parent / p, p]):
        if c.is_file():
            return c.resolve()
    raise ModelError(f"mjcf {str(mjcf)!r}: no such file (looked beside {robot.mjcf_path} and in the working directory)")


@dataclass(frozen=True)
class TrotConfig:
    """Task constants. ranges: command bounds ((vx lo, hi) [m/s], (vy lo, hi) [m/s], (yaw lo, hi)
    [rad/s]); p_still [1] probability of a zero command; weights: reward term -> weight (module
    docstring); sigma [(m/s)^2 | (rad/s)^2] tracking kernel width; air_time_target [s];
    contact_height [m]; min_base_height [m]; max_tilt [rad]; clip_reward: clip the step reward at 0;
    obs scales as in the module docstring."""

    ranges: tuple = ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0))
    p_still: float = 0.1
    weights: tuple = (("tracking_lin_vel", 1.0), ("tracking_ang_vel", 0.5), ("lin_vel_z", -0.5),
                      ("ang_vel_xy", -0.05), ("orientation", -5.0), ("torques", -1e-5), ("action_rate", -0.01),
                      ("feet_air_time", 1.0), ("trot", -0.2), ("termination", -1.0), ("pose", 0.5))
    sigma: float = 0.25
    air_time_target: float = 0.25
    contact_height: float = 0.01
    min_base_height: float = 0.25
    max_tilt: float = 1.0472
    clip_reward: bool = True
    obs_scales: tuple = (("linvel", 2.0), ("gyro", 0.25), ("position", 1.0), ("velocity", 0.05),
                         ("command", (2.0, 2.0, 0.25)))
    observation: str = "privileged"   #: "privileged" (v_b observed) | "proprioceptive" (module docstring)
    history: int = 0                  #: previous proprioceptive frames in the observation ("proprioceptive")


#: the actor's observations of the trot task (TrotConfig.observation)
OBSERVATIONS = ("privileged", "proprioceptive")


class LocoState(NamedTuple):
    """core: :class:`~actuatorlab.envs.mjx_env.EnvState` (MuJoCo + actuator + timing state);
    command (3,) [m/s, m/s, rad/s]; air_time (4,) [s] per foot since lift-off; contact (4,) 0/1 last
    step's foot contacts; obs (observation_size,); reward, done (); metrics {name: ()}; info
    {"truncation": (), "envelope_outside_s": (5, n) [s]}; privileged (privileged_size,) the
    critic's extra inputs (empty with the privileged observation); all float32."""

    core: EnvState
    command: Any
    air_time: Any
    contact: Any
    obs: Any
    reward: Any
    done: Any
    metrics: dict
    info: dict
    privileged: Any


class _CoreTask:
    """The MjxEnv task of the locomotion env: observes the raw (latency-delayed) qpos, qvel; no
    reward; terminates on a non-finite state only (the locomotion env decides the rest)."""

    def obs_size(self, env) -> int:
        m = env.mj_model
        return int(m.nq + m.nv)

    def reset(self, env, key, xp):
        return {}

    def observe(self, env, qpos, qvel, data, last_action, xp):
        return xp.concatenate([qpos, qvel], axis=-1)

    def reward(self, env, qpos, qvel, data, action, last_action, xp):
        return xp.zeros(()), {}

    def done(self, env, qpos, qvel, data, xp):
        return ~(xp.all(xp.isfinite(qpos), axis=-1) & xp.all(xp.isfinite(qvel), axis=-1))


class _Hooks:
    """Passes a randomization object's per-episode and drift hooks to MjxEnv; observation noise is
    applied by the locomotion env on its named signals instead."""

    def __init__(self, rnd):
        self.rnd = rnd
        self.has_drift = bool(getattr(rnd, "has_drift", False))

    def sample_episode(self, key, params):
        return self.rnd.sample_episode(key, params)

    def drift(self, key, params, t):
        return self.rnd.drift(key, params, t)

    def step_noise(self, key, obs):
        return obs


def _rot_t(quat):
    """R^T of a unit quaternion (w, x, y, z) (world -> body)."""
    w, x, y, z = quat[0], quat[1], quat[2], quat[3]
    R = jnp.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                   [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                   [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
    return R.T


class LocomotionEnv:
    """Velocity tracking (trot) for a quadruped (module docstring).

    robot: name or :class:`~actuatorlab.robots.Robot` (a floating base with four feet named LF,
    RF, LH, RH); actuator: "nominal" | "sea" | "builtin" (:data:`ACTUATOR_OPTIONS`) or anything
    :func:`~actuatorlab.envs.actuators.load_actuator` takes; contract:
    :class:`~actuatorlab.envs.timing.TimingContract` (default: decimation 1, hold, action_scale
    ``action_scale`` [rad per unit action] around the standing posture, default
    :data:`DEFAULT_ACTION_SCALE` = 1.0; give one of contract and action_scale); randomization: a :class:`~actuatorlab.sim.randomization.
    Randomizer`, a spec (dict or path) or None; config: :class:`TrotConfig`; episode_length [policy
    steps]; physics_dt [s]: override the robot's physics step (and firmware tick) for a cheaper
    configuration (must divide the command period); mjcf: an MJCF (scene) simulated instead of the robot
    config's, with the same joints and feet: another contact model, e.g. ANYmal C's
    ``scene_mjx_elliptic.xml`` (the feet's contact of the full model, elliptic cones and torsional and
    rolling friction, on the MJX variant's feet-only geometry); a relative path is looked up beside the
    config's MJCF first, then from the working directory; reset_noise [rad] on the joints' start; impl:
    MJX's implementation of the physics, "jax" or "warp" (MuJoCo Warp: the same environment on
    another simulator, for evaluation and speed), worlds: the largest batch Warp's contact buffer is
    sized for (:class:`~actuatorlab.envs.core.EnvSpec`). The
    homotopy is :func:`~actuatorlab.sim.homotopy.make_homotopy`'s default floor (legs keep 1 % of
    their mass and 0.01 kg.m^2 of armature); the floors measured and not adopted are recipes of
    bench/homotopy_recipes.py.
    """

    def __init__(self, robot: Any = "anymal_c", actuator: Any = "nominal", *, contract: TimingContract | None = None,
                 randomization: Any = None, config: TrotConfig | None = None, episode_length: int = 1000,
                 physics_dt: float | None = None, reset_noise: float = 0.05, action_scale: float | None = None,
                 mjcf: str | None = None, impl: str = "jax", worlds: int = WARP_WORLDS):
        r = robot if isinstance(robot, Robot) else load_robot(robot)
        if mjcf is not None:
            r = dataclasses.replace(r, mjcf_path=str(scene_path(r, mjcf)))
        if physics_dt is not None:
            k = r.control_dt / float(physics_dt)
            if physics_dt <= 0 or abs(k - round(k)) > 1e-9:
                raise ModelError(f"physics_dt {physics_dt} s must divide the command period {r.control_dt} s")
            r = dataclasses.replace(r, physics_dt=float(physics_dt), firmware_dt=float(physics_dt))
        self.robot = r
        if isinstance(config, dict):   # a job file's env_options
            config = TrotConfig(**config)
        self.config = cfg = config or TrotConfig()
        if cfg.observation not in OBSERVATIONS:
            raise UnknownNameError("observation", cfg.observation, OBSERVATIONS)
        if int(cfg.history) != cfg.history or cfg.history < 0 or (cfg.history and cfg.observation != "proprioceptive"):
            raise ModelError(f"history {cfg.history}: a whole number of frames >= 0, with observation='proprioceptive'")
        if randomization is not None and not hasattr(randomization, "sample_episode"):
            randomization = Randomizer(randomization)
        self.randomization = randomization
        if contract is not None and action_scale is not None:
            raise ModelError("pass action_scale inside the contract or alone, not both")
        contract = contract or TimingContract(decimation=1, target="hold",
                                              action_scale=DEFAULT_ACTION_SCALE if action_scale is None else float(action_scale))
        self.core = MjxEnv(r, actuator_option(r.name, actuator), contract=contract, task=_CoreTask(),
                           randomization=None if randomization is None else _Hooks(randomization),
                           episode_length=episode_length, reset_noise=reset_noise, precision="float32", impl=impl,
                           worlds=worlds)
        if not self.core.free_base:
            raise ModelError(f"{r.name}: the locomotion env needs a floating base (free joint)")
        self.episode_length = int(episode_length)
        self.dt = float(self.core.policy_dt)
        m = self.core.mj_model
        self.nq, self.nv, self.n = m.nq, m.nv, self.core.n_joints
        self.hom = make_homotopy(m, self.core.home)
        # feet: the collision geom of each leg's last body, ordered LF, RF, LH, RH
        feet = {}
        for g in range(m.ngeom):
            b = int(m.geom_bodyid[g])
            if (m.geom_contype[g] or m.geom_conaffinity[g]) and b in set(self.hom.legs.tolist()):
                name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or ""
                feet[name[:2].upper()] = g
        if set(feet) != {"LF", "RF", "LH", "RH"}:
            raise ModelError(f"{r.name}: the trot task needs four foot collision geoms on bodies named LF*, RF*, "
                             f"LH*, RH*; found {sorted(feet)}")
        self.foot_geoms = np.array([feet[k] for k in ("LF", "RF", "LH", "RH")])
        self.foot_radius = np.asarray(m.geom_size[self.foot_geoms, 0], np.float32)
        self.weights = dict(cfg.weights)
        unknown = set(self.weights) - {k for k, _ in TrotConfig().weights}
        if unknown:
            raise ModelError(f"unknown reward terms {sorted(unknown)}; known: {[k for k, _ in TrotConfig().weights]}")
        self.frame_size = 6 + 3 * self.n   # one proprioceptive frame
        if cfg.observation == "privileged":
            self.observation_size, self.privileged_size = 9 + 3 * self.n + 3, 0
        else:
            self.observation_size, self.privileged_size = (1 + int(cfg.history)) * self.frame_size + 3, 7
        self.action_size = self.n
        self.home_q = np.asarray(self.core.home[self.core.qadr], np.float32)
        # pose term's per-joint weights: 1 on hip joints, 0.1 on knees (*_KFE) as Playground's Go1 joystick
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, int(m.dof_jntid[a])) or "" for a in self.core.dadr]
        self.pose_w = np.array([0.1 if n.upper().endswith("KFE") else 1.0 for n in names], np.float32)
        # the JAX implementation's model: feet heights and the homotopy's constants (also under Warp)
        self.kin_mx = self.core.jax_mx
        self._kin = mjx_module.mjx().make_data(self.kin_mx)   # kinematics template (feet heights)
        # the actuator's MuJoCo armature for the nominal parameters (the invweights use it)
        self._arm0 = self._base_armature(self.core.params0)

    # -------------------------------------------------------------------------------------------
    def default_env_params(self) -> dict:
        return {"alpha": jnp.asarray(1.0, jnp.float32)}

    def _base_armature(self, params):
        """dof_armature (nv,) without the homotopy floor: the actuator model's rotor inertia on
        modelled rigid joints (0 on compliant ones), the MJCF's elsewhere; built-in: the MJCF's."""
        mx = self.core.mx
        if self.core.actuator.kind == "builtin":
            return mx.dof_armature

        p = self.robot.joint_params(params, xp=jnp)
        arm = mujoco_armature(self.core.robot.compliant, p["armature"], jnp)
        return mx.dof_armature.at[jnp.asarray(self.core.dadr)].set(jnp.asarray(arm, mx.dof_armature.dtype))

    def model_updates(self, env_params, params=None) -> dict:
        """MJX model fields for ``env_params["alpha"]`` (and this episode's actuator ``params``)."""
        upd = self.hom.model_updates(env_params["alpha"], self._arm0, self.kin_mx)
        if params is not None and self.core.actuator.kind != "builtin":
            upd["dof_armature"] = upd["dof_armature"] - self._arm0 + self._base_armature(params)
        return upd

    # -------------------------------------------------------------------------------------------
    def _signals(self, qpos, qvel):
        Rt = _rot_t(qpos[3:7])
        return {"linvel": Rt @ qvel[0:3], "gyro": qvel[3:6], "gravity": Rt @ jnp.array([0.0, 0.0, -1.0], qpos.dtype),
                "position": qpos[self.core.qadr] - self.home_q, "velocity": qvel[self.core.dadr]}

    def _observe(self, core: EnvState, command, key, previous=None):
        """The actor's observation; ``previous``: the last one (its frames become the history; None
        after a reset: the history repeats this frame)."""
        seen = core.obs  # [qpos, qvel] from the contract's observation FIFO
        sig = self._signals(seen[:self.nq], seen[self.nq:])
        if self.randomization is not None:
            sig = self.randomization.step_noise(key, sig)
        s = dict(self.config.obs_scales)
        frame = [s["gyro"] * sig["gyro"], sig["gravity"], s["position"] * sig["position"],
                 s["velocity"] * sig["velocity"], core.ctl.last_action]
        cmd = jnp.asarray(s["command"], jnp.float32) * command
        if self.config.observation == "privileged":
            return jnp.concatenate([s["linvel"] * sig["linvel"], *frame, cmd]).astype(jnp.float32)
        f = jnp.concatenate(frame).astype(jnp.float32)
        H, F = int(self.config.history), self.frame_size
        if previous is None:
            hist = jnp.tile(f, H)
        else:   # [f_{t-1}, ..., f_{t-H}] from the last observation [f_{t-1}, c, f_{t-2}, ...]
            hist = jnp.concatenate([previous[:F], previous[F + 3:F + 3 + (H - 1) * F]])[:H * F]
        return jnp.concatenate([f, cmd.astype(jnp.float32), hist]).astype(jnp.float32)

    def _privileged(self, qpos, qvel, contact):
        """The critic's extra inputs (privileged_size,): 2 v_b (true) and the feet's contacts."""
        if not self.privileged_size:
            return jnp.zeros((0,), jnp.float32)
        v = self._signals(qpos, qvel)["linvel"] * dict(self.config.obs_scales)["linvel"]
        return jnp.concatenate([v, contact]).astype(jnp.float32)

    def _feet_height(self, qpos):
        d = mjx_module.mjx().kinematics(self.kin_mx, self._kin.replace(qpos=qpos))
        return d.geom_xpos[self.foot_geoms, 2] - self.foot_radius

    def _sample_command(self, key):
        k1, k2 = jax.random.split(key)
        lo = jnp.array([r[0] for r in self.config.ranges], jnp.float32)
        hi = jnp.array([r[1] for r in self.config.ranges], jnp.float32)
        c = jax.random.uniform(k1, (3,), jnp.float32, lo, hi)
        return jnp.where(jax.random.uniform(k2) < self.config.p_still, jnp.zeros(3, jnp.float32), c)

    @staticmethod
    def _check_float32():
        if jnp.result_type(float) == jnp.float64:
            raise ModelError("the locomotion env is float32: trace reset/step with JAX's 64-bit mode off (the "
                             "default; e.g. inside jax.enable_x64(False)), docs/locomotion.md")

    def reset(self, rng, env_params=None, command=None) -> LocoState:
        """A new episode. ``command``: optional fixed (vx [m/s], vy [m/s], yaw rate [rad/s]) for
        this episode instead of a sampled one (the fixed-command evaluation), so that the first
        observation already shows it; the random stream is the same either way."""
        self._check_float32()
        k_core, k_cmd, k_obs = jax.random.split(rng, 3)
        core = self.core.reset(k_core)
        sampled = self._sample_command(k_cmd)
        command = sampled if command is None else jnp.broadcast_to(jnp.asarray(command, jnp.float32), sampled.shape)
        obs = self._observe(core, command, k_obs)
        zero = jnp.zeros((), jnp.float32)
        metrics = {k: zero for k in self.metric_names()}
        info = {"truncation": zero, "envelope_outside_s": core.info["envelope_outside_s"].astype(jnp.float32)}
        ones = jnp.ones(4, jnp.float32)
        return LocoState(core, command, jnp.zeros(4, jnp.float32), ones, obs, zero, zero, metrics, info,
                         self._privileged(core.arm.qpos, core.arm.qvel, ones))

    def metric_names(self) -> list[str]:
        return ["lin_vel_err_sq", "yaw_rate_err_sq", *[k for k, _ in self.config.weights], "base_height",
                "envelope_outside_frac"]

    def step(self, state: LocoState, action, env_params) -> LocoState:
        self._check_float32()
        cfg, w = self.config, self.weights
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        upd = self.model_updates(env_params, self.core.step_params(state.core))
        core, eff = self.core.step_with_effort(state.core, action, upd)
        qpos, qvel = core.arm.qpos, core.arm.qvel
        sig = self._signals(qpos, qvel)
        v, om, g = sig["linvel"], sig["gyro"], sig["gravity"]
        cmd = state.command
        lin_err = jnp.sum((cmd[:2] - v[:2]) ** 2)
        yaw_err = (cmd[2] - om[2]) ** 2
        tau = eff * jnp.asarray(self.core.effort_lim, jnp.float32)
        # feet
        contact = (self._feet_height(qpos) < cfg.contact_height).astype(jnp.float32)
        filt = jnp.maximum(contact, state.contact)
        first = (state.air_time > 0) * filt
        air = state.air_time + self.dt
        moving = (jnp.linalg.norm(cmd[:2]) > 0.1).astype(jnp.float32)
        # terminations
        finite = jnp.all(jnp.isfinite(qpos)) & jnp.all(jnp.isfinite(qvel))
        fell = (qpos[2] < cfg.min_base_height) | (g[2] > -math.cos(cfg.max_tilt)) | ~finite
        steps = core.ctl.step
        trunc = (steps >= self.episode_length) & ~fell
        terms = {
            "tracking_lin_vel": jnp.exp(-lin_err / cfg.sigma),
            "tracking_ang_vel": jnp.exp(-yaw_err / cfg.sigma),
            "lin_vel_z": v[2] ** 2,
            "ang_vel_xy": jnp.sum(om[:2] ** 2),
            "orientation": jnp.sum(g[:2] ** 2),
            "torques": jnp.mean(jnp.sum(tau ** 2, axis=-1)),
            "action_rate": jnp.sum((action - state.core.ctl.last_action) ** 2),
            "feet_air_time": jnp.sum((air - cfg.air_time_target) * first) * moving,
            "trot": (jnp.abs(contact[0] - contact[3]) + jnp.abs(contact[1] - contact[2])) * moving,
            "termination": fell.astype(jnp.float32),
            "pose": jnp.exp(-jnp.sum(jnp.asarray(self.pose_w) * sig["position"] ** 2)),
        }
        contrib = {k: jnp.where(finite, w[k] * terms[k] * self.dt, 0.0).astype(jnp.float32) for k in w}
        total = sum(contrib.values(), jnp.zeros((), jnp.float32))  # an array even with no weights
        reward = jnp.maximum(total, 0.0) if cfg.clip_reward else total
        air = air * (1.0 - filt)
        k_obs = jax.random.fold_in(core.ctl.rng, 1)
        obs = self._observe(core, cmd, k_obs, state.obs)
        obs = jnp.where(jnp.isfinite(obs), obs, 0.0)
        metrics = {"lin_vel_err_sq": lin_err.astype(jnp.float32), "yaw_rate_err_sq": yaw_err.astype(jnp.float32),
                   **contrib, "base_height": qpos[2].astype(jnp.float32),
                   "envelope_outside_frac": core.metrics["envelope_outside_frac"].astype(jnp.float32)}
        info = {"truncation": trunc.astype(jnp.float32),
                "envelope_outside_s": core.info["envelope_outside_s"].astype(jnp.float32)}
        done = (fell | (steps >= self.episode_length)).astype(jnp.float32)
        priv = self._privileged(qpos, qvel, contact)
        return LocoState(core, cmd, air, contact, obs, reward.astype(jnp.float32), done, metrics, info,
                         jnp.where(jnp.isfinite(priv), priv, 0.0))

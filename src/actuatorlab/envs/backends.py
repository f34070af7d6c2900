"""The physics backends of the environment core (:mod:`actuatorlab.envs.core`): what differs between
MJX and native MuJoCo, and nothing else.

A backend gives the core its array namespace (``xp``), dtypes, random-number plumbing (keys, the
randomization hooks under the right precision) and ``physics(params, arm, sent, net_hist,
model_updates) -> Physics``: ``D`` command ticks of the actuator model (or MuJoCo's built-in
actuators, or a mixed robot) from the commands ``sent`` (..., D, n).

* :class:`MjxBackend`: one environment, pure JAX (jit / vmap / scan), float32 or float64 (the
  precision of the caller's trace: the backend never switches JAX's precision);
  :func:`actuatorlab.sim.arm.make_mjx_rollout` or ``mjx.step`` on ``ctrl`` for ``"builtin"``.
* :class:`NativeBackend`: B environments on NumPy arrays with a leading batch axis, float64;
  :func:`actuatorlab.sim.arm_native.rollout_native` (the NumPy twin of the MJX rollout's
  functions) or ``mj_step`` per environment for ``"builtin"``. The randomization hooks run under
  :func:`~actuatorlab.precision.physics_precision`, one environment at a time.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from typing import Any, Callable, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np

from ..errors import ModelError
from ..precision import physics_precision
from ..sim.arm import WARP_WORLDS, ArmInputs, make_mjx_data, make_mjx_rollout, mjx_impl, put_mjx_model
from ..sim.arm_learned import LearnedInputs, frame
from ..sim import mjx_module
from ..sim.arm_native import native_model, rollout_native
from .actuators import builtin_model


__all__ = ["Physics", "MjxBackend", "NativeBackend", "make_backend"]


class Physics(NamedTuple):
    """One policy step's physics: arm (the state after it); q, dq (..., D, n) at the start of every
    command tick; effort (..., D, n) [1] the firmware output over its limit at those ticks (MuJoCo's
    actuator force / the effort limit for built-in joints; 0 for a mixed robot's built-in ones);
    qpos_end (..., D, nq), qvel_end (..., D, nv) at the end of every tick; net_hist a learned
    model's frames after it; outputs: the native rollout's ``ArmOutputs`` (None otherwise);
    params: the actuator parameters the physics ran with."""

    arm: Any
    q: Any
    dq: Any
    effort: Any
    qpos_end: Any
    qvel_end: Any
    net_hist: Any
    outputs: Any = None
    params: Any = None


def make_backend(env, spec):
    """The backend the spec names (``spec.backend``), built for ``env`` (an EnvCore)."""
    if spec.backend == "mjx":
        return MjxBackend(env, spec.precision, spec.impl, spec.worlds)
    return NativeBackend(env, spec.model_updates)


def _ends(xp, out, final, axis):
    """(qpos, qvel) at the end of every tick (..., D, nq | nv) from a rollout's start-of-tick outputs
    and its final state (``axis``: the tick axis)."""
    later = (slice(None),) * axis + (slice(1, None),)
    return (xp.concatenate([out.qpos[later], xp.expand_dims(final.qpos, axis)], axis=axis),
            xp.concatenate([out.qvel[later], xp.expand_dims(final.qvel, axis)], axis=axis))


class MjxBackend:
    """One environment in pure JAX (module docstring)."""

    xp = jnp
    int_dtype = jnp.int32
    net_dtype = jnp.float32

    def __init__(self, env, precision: str = "float32", impl: str = "jax", worlds: int = WARP_WORLDS):
        self.env, self.precision = env, precision
        with jax.enable_x64(precision == "float64"):
            r, act = env.model_robot, env.actuator
            self.dtype = jnp.float64 if precision == "float64" else jnp.float32
            m = builtin_model(r, for_mjx=True) if act.kind == "builtin" else r.model(for_mjx=True)
            self._source, self.mx = m, put_mjx_model(m, impl)
            self.params0 = {k: jnp.asarray(v, self.dtype) for k, v in act.params.items()}
            if act.kind != "builtin":
                # the raw maker: the environment's precision is the caller's (never switched here)
                self._rollout = inspect.unwrap(make_mjx_rollout)(r, env.cfg, self.mx, worlds)
            else:
                self._template = make_mjx_data(m, self.mx, worlds)

    @functools.cached_property
    def jax_mx(self):
        """The same MjModel put with MJX's JAX implementation (``self.mx`` when that is the one): the
        kinematics and constants (``mjx.kinematics``, ``full_m``) Warp's implementation does not expose."""
        return self.mx if mjx_impl(self.mx) == "jax" else put_mjx_model(self._source)

    def precision_context(self):
        """Context to trace ``reset``/``step`` in (float64: x64 on; float32: a no-op)."""
        return physics_precision() if self.precision == "float64" else contextlib.nullcontext()

    # array plumbing ------------------------------------------------------------------------------
    def asarray(self, x):
        return jnp.asarray(x, self.dtype)

    def set(self, a, idx, v):
        return a.at[idx].set(v)

    def key(self, k):
        return k

    def obs(self, x):
        return x

    def net(self, x):
        return x

    def asbool(self, x):
        return x

    def own(self, x):
        return x

    def contiguous(self, x):
        return x

    def split(self, rng):
        rng, k_obs = jax.random.split(rng)
        return rng, k_obs

    # randomization hooks -------------------------------------------------------------------------
    def episode_params(self, k_rand) -> dict:
        params = dict(self.params0)
        rnd = self.env.randomization
        return params if rnd is None else rnd.sample_episode(k_rand, params)

    def noise(self, key, obs):
        return self.env.randomization.step_noise(key, obs)

    noise_one = noise

    def drift(self, state) -> dict:
        t = state.ctl.step.astype(self.dtype) * jnp.asarray(self.env.policy_dt, self.dtype)
        p = self.env.randomization.drift(state.ctl.rand_key, state.params, t)
        return {k: jnp.asarray(v, jnp.asarray(state.params[k]).dtype) for k, v in p.items()}

    # physics ---------------------------------------------------------------------------------------
    def physics(self, params, arm, sent, net_hist, model_updates=None) -> Physics:
        e = self.env
        D, n, dt = sent.shape[0], e.model_robot.n_joints, self.dtype
        if e.actuator.kind == "builtin":
            return self._builtin(arm, sent, model_updates)
        en = jnp.ones((D, n), dt)
        vs = jnp.broadcast_to(jnp.asarray(e.v_supply[e.mod_idx], dt), (D, n))
        if e.mixed:
            ctrl = jnp.zeros((D, e.mj_model.nu), dt).at[:, jnp.asarray(e.ctrl_idx)].set(sent[:, e.bi_idx])
            final, out = self._rollout(params, ArmInputs(sent[:, e.mod_idx], en, vs), arm, model_updates, ctrl=ctrl)
            qpos_end, qvel_end = _ends(jnp, out, final, 0)
            # effort fraction of the modelled joints; the built-in joints' is not recorded (0)
            eff = jnp.zeros((D, e.n_joints), dt).at[:, e.mod_idx].set(out.u / e.u_lim[e.mod_idx])
            return Physics(final, out.qpos[:, e.qadr], out.qvel[:, e.dadr], eff, qpos_end, qvel_end, net_hist)
        if e.actuator.learned is not None:
            lm = eqx.tree_at(lambda m: m.base, e.actuator.learned, params)
            final, out = self._rollout(lm, LearnedInputs(sent, en, vs, None, net_hist), arm, model_updates)
            frames = frame(lm, sent, out.q, out.dq, vs, en, jnp.zeros((D, 0)))
            H = net_hist.shape[0]
            net_hist = jnp.concatenate([net_hist, frames], axis=0)[D:] if H else net_hist
        else:
            final, out = self._rollout(params, ArmInputs(sent, en, vs), arm, model_updates)
        qpos_end, qvel_end = _ends(jnp, out, final, 0)
        return Physics(final, out.q, out.dq, out.u / e.u_lim, qpos_end, qvel_end, net_hist)

    def _builtin(self, arm, sent, model_updates=None) -> Physics:
        e = self.env
        mx, idx = self.mx, jnp.asarray(e.ctrl_idx)
        if model_updates:
            mx = mx.replace(**model_updates)
        d0 = self._template.replace(qpos=arm.qpos, qvel=arm.qvel)

        def tick(d, cmd):
            q, dq = d.qpos[e.qadr], d.qvel[e.dadr]
            d = d.replace(ctrl=jnp.zeros_like(d.ctrl).at[idx].set(cmd))
            d = jax.lax.fori_loop(0, e.cfg.substeps, lambda _, dd: mjx_module.mjx().step(mx, dd), d)
            eff = d.qfrc_actuator[e.dadr] / e.effort_lim
            return d, (q, dq, eff, d.qpos, d.qvel)

        d, (q, dq, eff, qpos_end, qvel_end) = jax.lax.scan(tick, d0, sent)
        return Physics(arm._replace(qpos=d.qpos, qvel=d.qvel), q, dq, eff, qpos_end, qvel_end,
                       jnp.zeros((0, 0), jnp.float32))


class NativeBackend:
    """B environments on native MuJoCo, NumPy arrays with a leading batch axis (module docstring)."""

    xp = np
    dtype = np.float64
    int_dtype = np.int64
    net_dtype = np.float64

    def __init__(self, env, model_updates: dict | None = None):
        self.env, self.model_updates = env, model_updates
        act, rnd = env.actuator, env.randomization
        self.datas: list[mujoco.MjData] | None = None
        if act.kind == "builtin":
            if model_updates:
                raise ModelError("model_updates apply to the actuatorlab actuator's native model, not to 'builtin'")
        else:
            self.model = native_model(env.model_robot, act.params, model_updates)
        self._drift: Callable[..., dict[str, Any]] | None = None
        if rnd is not None and getattr(rnd, "has_drift", False):
            # one compiled call for the batch: (keys (B, 2), params {name: (B, ...)}, t (B,)) -> params
            self._drift = jax.jit(jax.vmap(rnd.drift))

    # array plumbing ------------------------------------------------------------------------------
    def asarray(self, x):
        return np.asarray(x, float)

    def set(self, a, idx, v):
        a[idx] = v
        return a

    def key(self, k):
        return np.asarray(k)

    obs = asarray
    net = asarray

    def asbool(self, x):
        return np.asarray(x, bool)

    def own(self, x):
        return np.array(x)

    def contiguous(self, x):
        return np.ascontiguousarray(x)

    def split(self, rng):
        """(rng', k_obs): every environment's key split (only where observation noise draws from it)."""
        if self.env.randomization is None:
            return rng, None
        rng, keys = rng.copy(), []
        with physics_precision():
            for b in range(rng.shape[0]):
                k_next, k_obs = jax.random.split(rng[b])
                rng[b] = np.asarray(k_next)
                keys.append(k_obs)
        return rng, keys

    # randomization hooks -------------------------------------------------------------------------
    def episode_params(self, k_rand) -> dict:
        p0 = {k: np.asarray(v, float) for k, v in self.env.actuator.params.items()}
        if self.env.randomization is not None:
            with physics_precision():  # the native path is float64 throughout
                p0 = {k: np.asarray(v, float) for k, v in self.env.randomization.sample_episode(k_rand, p0).items()}
        return p0

    def noise_one(self, key, obs):
        with physics_precision():
            return np.asarray(self.env.randomization.step_noise(key, obs))

    def noise(self, keys, obs):
        with physics_precision():
            return np.stack([np.asarray(self.env.randomization.step_noise(k, o)) for k, o in zip(keys, obs)])

    def drift(self, state) -> dict:
        if self._drift is None:
            raise ModelError("drift: the environment's randomization has no drift")
        with physics_precision():
            t = state.ctl.step.astype(float) * self.env.policy_dt
            return {k: np.asarray(v, float) for k, v in self._drift(state.ctl.rand_key, state.params, t).items()}

    # physics ---------------------------------------------------------------------------------------
    def physics(self, params, arm, sent, net_hist, model_updates=None, body_force=None) -> Physics:
        """``params`` {name: (B, ...)}; ``body_force`` (body id, (B, 3) [N]) or None: an external
        force on a body's centre of mass (native analytic actuator only)."""
        e = self.env
        if model_updates:
            raise ModelError("the native backend takes model_updates in its EnvSpec (written into its MjModel)")
        if body_force is not None and (e.actuator.kind == "builtin" or e.actuator.learned is not None):
            raise ModelError("body_force (an external push) is applied by the native analytic actuator's rollout only")
        if e.actuator.kind == "builtin":
            return self._builtin(arm, sent, net_hist)
        B, D, n = sent.shape[0], sent.shape[1], e.model_robot.n_joints
        en = np.ones((B, D, n))
        vs = np.broadcast_to(e.v_supply[e.mod_idx], (B, D, n)).copy()
        ctrl = None
        if e.mixed:  # the built-in joints' commands to their own actuators; the model gets the others
            ctrl = np.zeros((B, D, e.mj_model.nu))
            ctrl[..., e.ctrl_idx] = sent[..., e.bi_idx]
            sent = np.ascontiguousarray(sent[..., e.mod_idx])
        shared = e.randomization is None
        if shared:
            params = {k: v[0] for k, v in params.items()}
        model = self.model if shared else None
        if e.actuator.learned is not None:
            if not shared:
                raise ModelError("per-episode randomization of a learned model's base runs in MjxEnv only")
            lm = eqx.tree_at(lambda m: m.base, e.actuator.learned, {k: np.asarray(v) for k, v in params.items()})
            final, out = rollout_native(e.model_robot, lm, LearnedInputs(sent, en, vs, None, net_hist),
                                        arm, e.cfg, model=model)
            frames = np.asarray(frame(lm, sent, out.q, out.dq, vs, en, np.zeros((B, D, 0))))
            if net_hist.shape[1]:
                net_hist = np.concatenate([net_hist, frames], axis=1)[:, D:]
        else:
            final, out = rollout_native(e.model_robot, params, ArmInputs(sent, en, vs), arm, e.cfg,
                                        model_updates=self.model_updates, model=model, ctrl=ctrl, body_force=body_force)
        qpos_end, qvel_end = _ends(np, out, final, 1)
        if e.mixed:  # effort fraction of the modelled joints; the built-in joints' is not recorded (0)
            eff = np.zeros(out.qpos.shape[:2] + (e.n_joints,))
            eff[..., e.mod_idx] = out.u / e.u_lim[e.mod_idx]
            return Physics(final, out.qpos[..., e.qadr], out.qvel[..., e.dadr], eff, qpos_end, qvel_end, net_hist,
                           out, params)
        return Physics(final, out.q, out.dq, out.u / e.u_lim, qpos_end, qvel_end, net_hist, out, params)

    def _builtin(self, arm, sent, net_hist) -> Physics:
        e = self.env
        m, B, D = e.mj_model, sent.shape[0], sent.shape[1]
        if self.datas is None or len(self.datas) != B:
            self.datas = [mujoco.MjData(m) for _ in range(B)]
        q = np.empty(sent.shape)
        dq, eff = np.empty_like(q), np.empty_like(q)
        qpos_end, qvel_end = np.empty((B, D, m.nq)), np.empty((B, D, m.nv))
        qpos, qvel = arm.qpos.copy(), arm.qvel.copy()
        for b, d in enumerate(self.datas):
            d.qpos[:], d.qvel[:] = qpos[b], qvel[b]
            for j in range(D):
                q[b, j], dq[b, j] = d.qpos[e.qadr], d.qvel[e.dadr]
                d.ctrl[e.ctrl_idx] = sent[b, j]
                for _ in range(e.cfg.substeps):
                    mujoco.mj_step(m, d)
                eff[b, j] = d.qfrc_actuator[e.dadr] / e.effort_lim
                qpos_end[b, j], qvel_end[b, j] = d.qpos, d.qvel
            qpos[b], qvel[b] = d.qpos, d.qvel
        return Physics(arm._replace(qpos=qpos, qvel=qvel), q, dq, eff, qpos_end, qvel_end, net_hist)

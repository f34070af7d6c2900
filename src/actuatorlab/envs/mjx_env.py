"""MJX environment with the actuator in the loop, in the functional style of MuJoCo Playground: a
thin wrapper over the environment core (:class:`~actuatorlab.envs.core.EnvCore` with the ``"mjx"``
backend).

``env.reset(rng) -> EnvState`` and ``env.step(state, action) -> EnvState`` are pure JAX functions
(jit-, vmap- and scan-able; batch with ``jax.vmap(env.reset)(keys)``, thousands of environments
on one device). One ``step`` is one policy step of the :class:`~actuatorlab.envs.timing.
TimingContract`: the action becomes ``decimation`` command ticks (hold / interpolate / filter,
command latency), which drive the robot's actuator model for ``decimation x substeps`` physics
steps through the whole-robot rollout of :func:`actuatorlab.sim.arm.make_mjx_rollout` (the same
firmware, motor, transmission and friction functions as the fits; nothing is re-written here).
With ``model="builtin"`` the MJCF's own actuators (``mjx.step`` on ``ctrl``) run instead, for
comparison. A mixed robot (``builtin_joints=[...]``) keeps the MJCF's actuators on those joints
and runs the model on the others in the same rollout (:func:`~actuatorlab.envs.actuators.mixed_robot`).

Precision: the environment never switches JAX's precision. ``precision="float32"`` (default)
builds the MJX model and constants in float32, for a training program with default JAX settings;
``"float64"`` builds them in float64: then trace ``reset``/``step`` inside
:func:`actuatorlab.precision.physics_precision` (``env.precision_context()``).

Randomization hooks (``sample_episode``, ``step_noise``, ``drift``): :mod:`actuatorlab.envs.core`.
"""

from __future__ import annotations

from typing import Any

from .core import ControlState, EnvCore, EnvSpec, EnvState

__all__ = ["EnvState", "ControlState", "MjxEnv"]


class MjxEnv:
    """MJX environment (module docstring): ``MjxEnv(robot, model, **options)`` with ``options`` the
    fields of :class:`~actuatorlab.envs.core.EnvSpec` (contract, task, randomization, envelope,
    envelope_mode, episode_length, reset_noise, home, precision, builtin_joints), or
    ``MjxEnv.from_spec(spec)``. The static description (``n_joints``, ``qadr``, ``home``,
    ``policy_dt``, ...) is the core's."""

    def __init__(self, robot: Any = None, model: Any = None, **options: Any):
        self.core = EnvCore(EnvSpec(robot, model, **options, backend="mjx"))

    @classmethod
    def from_spec(cls, spec: EnvSpec) -> "MjxEnv":
        env = cls.__new__(cls)
        env.core = EnvCore(spec)
        return env

    def __getattr__(self, name: str):
        if name == "core":
            raise AttributeError(name)
        return getattr(self.core, name)

    @property
    def dtype(self):
        return self.core.backend.dtype

    @property
    def mx(self):
        """The MJX model."""
        return self.core.backend.mx

    @property
    def jax_mx(self):
        """The MJX model in MJX's JAX implementation (``mx`` itself unless the env runs on Warp)."""
        return self.core.backend.jax_mx

    @property
    def params0(self) -> dict:
        """The actuator's nominal parameter sets in the env's precision."""
        return self.core.backend.params0

    @property
    def precision(self) -> str:
        return self.core.backend.precision

    def precision_context(self):
        """Context to trace ``reset``/``step`` in (float64: x64 on; float32: a no-op)."""
        return self.core.backend.precision_context()

    def reset(self, rng) -> EnvState:
        return self.core.reset(rng)

    def step_params(self, state: EnvState) -> dict:
        """The actuator parameters the next ``step`` runs its physics with (:meth:`EnvCore.step_params`)."""
        return self.core.step_params(state)

    def step(self, state: EnvState, action, model_updates=None) -> EnvState:
        """One policy step. ``model_updates``: MJX ``Model`` fields (name -> full array, traced) the
        physics of this step runs with (e.g. :meth:`actuatorlab.sim.homotopy.Homotopy.model_updates`;
        with an actuatorlab actuator they replace the rollout's own, ``dof_armature`` included)."""
        return self.core.step(state, action, model_updates)[0]

    def step_with_effort(self, state: EnvState, action, model_updates=None):
        """:meth:`step`, also returning the effort (decimation, n) at the start of every command tick
        as a fraction of each joint's limit (firmware output / its limit; ``"builtin"``: MuJoCo's
        actuator force / the effort limit)."""
        new, *_, info = self.core.step(state, action, model_updates)
        return new, info["effort"]

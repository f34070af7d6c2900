"""Simulation: logs -> padded arrays -> closed-loop rollouts, one joint or a whole robot.

One simulator interface with three backends (docs/robots.md, "The simulator interface"):

* the fast one-joint scan, :mod:`.rollout` (:func:`rollout_batch`): a joint on its bench, a batch
  of logs, ``jax.lax.scan`` of the one-joint step :func:`actuatorlab.models.actuator.make_step`;
  jit / vmap / grad; fitting and replaying single-actuator logs;
* MJX, :mod:`.arm` (:func:`~.arm.make_mjx_rollout`): a whole robot on MuJoCo MJX, differentiable
  (gradient fits, learned whole-robot models, MJX environments);
* native MuJoCo, :mod:`.arm_native` (:func:`~.arm_native.rollout_native`): a whole robot, the
  fastest, NumPy, a leading batch axis (CMA-ES fits, evaluation, gym environments).

The two whole-robot backends run the same physics step, :func:`.arm_step.actuator_step` (firmware
tick, drive, motor current, winding temperature, transmission and friction; every model function
with the array namespace ``xp`` = ``numpy`` or ``jax.numpy``), on a backend's own reading of the
multibody state (:class:`.arm_step.Sensed`) and its own integration. :func:`.backends.rollout`
``(robot, params, inputs, state0, *, backend="native" | "mjx" | "scan", cfg=None)`` is the one entry
point of all three (the scan for one-joint bench robots, :mod:`.scan`), and
:func:`.model_rollout.rollout_model` the same for a model file.
"""

from .rollout import Batch, make_batches, one_step, rollout, rollout_batch

__all__ = ["Batch", "make_batches", "rollout", "rollout_batch", "one_step"]

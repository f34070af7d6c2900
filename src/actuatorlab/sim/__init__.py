"""Simulation: logs -> padded arrays -> closed-loop rollouts of a joint model (JAX)."""

from .rollout import Batch, make_batches, one_step, rollout, rollout_batch

__all__ = ["Batch", "make_batches", "rollout", "rollout_batch", "one_step"]

"""Truncated horizons for fitting robot rollouts to logs, with a length curriculum.

Long closed-loop rollouts have chaotic, badly conditioned gradients; a fitter instead cuts each log
into windows that restart from the *measured* state, and lengthens the windows as the fit
converges (e.g. 128 -> 256 -> 320 control steps, :data:`CURRICULUM`). A window restarted at step
k gets the measured joint positions/velocities at k (joints that follow another through a joint
equality are set from their leader, everything else from ``qpos_ref``), the firmware memory
reconstructed from the velocity, and the delay line filled with the logged inputs before k, so no
command is lost at the cut. The motor side of a compliant transmission (``+backlash``,
``+compliance``) is not measured: it restarts at the measured joint state (q_m = q, dq_m = dq, the
middle of the dead band, spring relaxed; see :func:`~actuatorlab.sim.arm.initial_state`), so a
window loses up to ``backlash / 2`` of motion while the rotor crosses to the loaded edge, and
short windows bias a fitted backlash low (docs/robots.md, "Not done / limits"). The winding
temperature (``+thermal``) restarts from the logged temperature at k when the log has one, else
from the ambient temperature.

Typical use::

    roll = jax.vmap(make_mjx_rollout(robot), in_axes=(None, 0, 0, None))
    for length in CURRICULUM:
        w = make_windows(robot, q_meas, dq_meas, inputs, length)
        loss = lambda p: window_loss(roll, p, w)          # jax.grad / optax over p
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax.numpy as jnp
import numpy as np

from ..precision import physics
from ..errors import DataError
from ..robots.loader import Robot
from .arm import ArmConfig, ArmInputs, ArmState, initial_state, position_loss

__all__ = ["CURRICULUM", "Windows", "make_windows", "window_starts", "curriculum", "window_loss"]

#: window lengths [control steps] of the default curriculum
CURRICULUM: tuple[int, ...] = (128, 256, 320)


class Windows(NamedTuple):
    """W windows of L control steps: start (W,) index of each window in the log; inputs
    (:class:`ArmInputs`, leaves (W, L, n)); state0 (:class:`ArmState`, leaves (W, ...)); q_meas,
    dq_meas (W, L, n) targets; mask (W, L) False on padding past the end of the log."""

    start: np.ndarray
    inputs: ArmInputs
    state0: ArmState
    q_meas: np.ndarray
    dq_meas: np.ndarray
    mask: np.ndarray


def window_starts(T: int, length: int, stride: int | None = None) -> np.ndarray:
    """Start indices of the windows of ``length`` steps every ``stride`` (default ``length``) of a
    log of ``T`` samples: one window at 0 when the log is not longer than ``length``."""
    stride = int(length) if stride is None else int(stride)
    return np.arange(0, max(T - 1, 1), stride) if T > length else np.array([0])


def make_windows(robot: Robot, q_meas, dq_meas, inputs: ArmInputs, length: int, stride: int | None = None,
                 cfg: ArmConfig | None = None, qpos_ref=None, temperature=None) -> Windows:
    """Cut one log (arrays (T, n) on the control grid, robot joint order) into windows of
    ``length`` control steps every ``stride`` (default ``length``: no overlap). The last window
    is padded with the last input and masked. ``temperature`` (T, n) [degC]: measured winding
    temperature; each window starts from its value at the window start (default: the nominal
    ambient temperature, see :func:`~actuatorlab.sim.arm.initial_state`)."""
    cfg = cfg or ArmConfig.from_robot(robot)
    q_meas, dq_meas = np.asarray(q_meas, float), np.asarray(dq_meas, float)
    x = ArmInputs(*[np.asarray(v, float) for v in inputs])
    T, n = q_meas.shape if q_meas.ndim == 2 else (0, 0)
    if n != robot.n_joints or dq_meas.shape != q_meas.shape or any(v.shape != q_meas.shape for v in x):
        raise DataError(None, f"{robot.name}: q_meas, dq_meas and inputs must all be (T, {robot.n_joints}); "
                              f"got {q_meas.shape}, {dq_meas.shape}, {[v.shape for v in x]}")
    if temperature is not None:
        temperature = np.asarray(temperature, float)
        if temperature.shape != q_meas.shape:
            raise DataError(None, f"{robot.name}: temperature must be (T, {robot.n_joints}) like q_meas; "
                                  f"got {temperature.shape}")
    if length < 1 or T < 1:
        raise DataError(None, f"window length ({length}) and log length ({T}) must be >= 1")
    starts = window_starts(T, length, stride)
    D = cfg.delay_steps
    win: dict[str, list[np.ndarray]] = {k: [] for k in ("qt", "en", "vs", "q", "dq", "mask")}
    states = []
    for s in starts:
        idx = np.minimum(np.arange(s, s + length), T - 1)
        win["qt"].append(x.q_target[idx])
        win["en"].append(x.enable[idx])
        win["vs"].append(x.v_supply[idx])
        win["q"].append(q_meas[idx])
        win["dq"].append(dq_meas[idx])
        win["mask"].append(np.arange(s, s + length) < T)
        past = np.clip(np.arange(s - 1, s - 1 - D, -1), 0, T - 1)  # newest first
        hist_t = np.where((np.arange(s - 1, s - 1 - D, -1) >= 0)[:, None], x.q_target[past], q_meas[s])
        hist_e = np.where((np.arange(s - 1, s - 1 - D, -1) >= 0)[:, None], x.enable[past], 1.0)
        states.append(initial_state(robot, cfg, q=q_meas[s], dq=dq_meas[s], qpos=qpos_ref,
                                    hist_target=hist_t, hist_enable=hist_e,
                                    temperature=None if temperature is None else temperature[s]))
    state0 = ArmState(*[np.stack(v) for v in zip(*states)])
    return Windows(starts, ArmInputs(np.stack(win["qt"]), np.stack(win["en"]), np.stack(win["vs"])),
                   state0, np.stack(win["q"]), np.stack(win["dq"]), np.stack(win["mask"]))


def curriculum(robot: Robot, q_meas, dq_meas, inputs: ArmInputs, lengths=CURRICULUM,
               cfg: ArmConfig | None = None, qpos_ref=None) -> list[Windows]:
    """One :class:`Windows` per stage of the curriculum (non-overlapping windows of each length;
    a stage longer than the log becomes one padded window)."""
    return [make_windows(robot, q_meas, dq_meas, inputs, int(L), cfg=cfg, qpos_ref=qpos_ref)
            for L in lengths]


@physics
def window_loss(rollout_batch: Callable, params, windows: Windows, model_updates=None):
    """Mean squared joint-position error [rad^2 | m^2] over all windows (padding excluded).

    ``rollout_batch(params, inputs, state, model_updates) -> (state, outputs)`` must take a leading
    window axis: ``jax.vmap(make_mjx_rollout(robot), in_axes=(None, 0, 0, None))`` (differentiable)
    or ``lambda p, x, s, u: rollout_native(robot, p, x, s, model_updates=u)`` (evaluation only).
    """
    _, out = rollout_batch(params, windows.inputs, windows.state0, model_updates)
    return position_loss(out, jnp.asarray(windows.q_meas), jnp.asarray(windows.mask))

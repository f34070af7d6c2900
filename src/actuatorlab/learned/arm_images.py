"""Camera silhouettes supervising a learned whole-robot actuator (issue 45, item 4).

:func:`actuatorlab.learned.arm_train.train_arm` with ``images`` (an
:class:`~actuatorlab.identify.images.ImageSupervision`): the image term of
:mod:`actuatorlab.identify.images` joins the loss of every training window through the simulator
(:func:`~actuatorlab.learned.arm.arm_loss`), its gradient flowing through the soft-silhouette
renderer, the forward kinematics and the MJX rollout (BPTT) into the network's parameters. The
network then has a channel for every *commanded* joint (:func:`channel_mask`), so a joint logged
without an encoder (``Setup.extra["unmeasured"]``, :func:`~actuatorlab.identify.images.
withhold_encoders`) is learned from the cameras alone: it is commanded, not scored, in the
position term.

Stand-in states. Where a window restarts, an unmeasured joint has no measured state; it restarts
from a *stand-in*: a continuous native rollout over the whole log of the analytic teacher (the
warm start's, e.g. the image-supervised ``fit`` result given with ``--init``;
:func:`~actuatorlab.identify.arm_grad.standin_states`), computed once before training
(:func:`with_standins`). The gradient fit refreshes its stand-ins from the parameters it reaches;
the network's own continuous rollout would cost one native rollout of every training log through
the network per refresh (the learned model's native path evaluates it once per control step), and
the stand-in's error decays within ``ImageOptions.settle_s`` anyway (frames closer to a window's
start are not used). The command, the stand-in of a log read without a teacher, biased the
analytic fit (:func:`~actuatorlab.identify.arm_grad.standin_states`). The same stand-in is the
teacher-forced input of that joint in the warm start (its effort targets are then the teacher's at
the stand-in states) and the history before each window.

Validation (the checkpoint choice) uses only what training may use (:func:`validator`): with
images, the criterion is the analytic fit's objective on the validation windows,
``J_val = MSE(scored joints) + J_img`` [rad^2] (native path; J_img on the validation logs' masks
where the supervision has them, else 0).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..identify.arm_grad import standin_states
from ..identify.images import ImageSupervision, image_term
from ..logs.format import Trajectory
from ..robots.loader import Robot
from ..sim.arm import ArmConfig
from ..sim.arm_data import log_arrays
from .arm import ArmLog, LearnedWindows, native_mae

__all__ = ["channel_mask", "with_standins", "validator", "unmeasured_joints"]


def channel_mask(robot: Robot, traj: Trajectory, images: ImageSupervision | None) -> np.ndarray:
    """(n,) bool: the joints that become the network's channels: those ``traj`` scores (records a
    position of), and with ``images`` every commanded joint (an unmeasured one included)."""
    lg = log_arrays(robot, traj)
    return lg.scored if images is None or lg.commanded is None else lg.commanded


def unmeasured_joints(robot: Robot, logs: list[ArmLog]) -> list[str]:
    """The joints some log commands but does not measure (robot joint order)."""
    un = np.zeros(robot.n_joints, bool)
    for lg in logs:
        b = lg.base
        if b.commanded is not None:
            un |= b.commanded & ~b.scored
    return [j for j, u in zip(robot.joint_names, un) if u]


def with_standins(logs: list[ArmLog], teacher: tuple[Robot, dict]) -> list[ArmLog]:
    """``logs`` whose unmeasured joints' q_meas / dq_meas [rad, rad/s | m, m/s] are the continuous
    native rollout of the analytic ``teacher`` (robot, parameter sets) from each log's first sample
    (module docstring); logs without such a joint are returned as they are."""
    r, p = teacher
    bases = standin_states(r, [lg.base for lg in logs], p, ArmConfig.from_robot(r))
    return [lg if b is lg.base else dataclasses.replace(lg, base=b) for lg, b in zip(logs, bases)]


def validator(robot: Robot, vw: LearnedWindows, cfg: ArmConfig,
              images: ImageSupervision | None) -> Callable[[Any], dict[str, Any]]:
    """``val(model) -> {"val", "mae", "mae/<joint>", ...}`` on the validation windows ``vw`` (native
    path): "val" is the position MAE [rad | m] over the scored joints without ``images``, and
    MSE + J_img [rad^2] with them (module docstring; then also "mse" and "image")."""
    score = None if images is None else jax.jit(image_term(images))
    wgt = np.asarray(vw.wgt)
    den = max(float(wgt.sum()), 1.0)

    def val(model) -> dict[str, Any]:
        r = native_mae(robot, model, vw, cfg, keep_q=score is not None)
        mae = r["position_mae"]
        per = {f"mae/{j}": v for j, v in r["per_joint"].items()}
        if score is None or not np.isfinite(mae):
            return {"val": mae, "mae": mae, **per}
        e = r["q"] - np.asarray(vw.q_meas)
        mse = float(np.sum(e * e * wgt) / den)
        j_img = float(score(jnp.asarray(r["q"]), vw.img))
        return {"val": mse + j_img, "mae": mae, "mse": mse, "image": j_img, **per}

    return val

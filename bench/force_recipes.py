"""Options of bench/force.py and bench/force_bc.py that were measured and not adopted as defaults
(bench/journal/force.md); the library trains the adopted recipe only (actuatorlab.learned.heads).

* ``force_prior`` (with ``prior_labels``): the force head corrects a classical estimate, f_hat =
  sigmoid(gate) (f_raw + f_prior) ("Force prior", not chosen on D/val at scale 0.1 nor at scale 1);
* ``force_frame`` "yaw" (the head predicts in the frame turning with the vertical joint 1) or
  "joint" (the head predicts the external joint torques, mapped to a force through the Jacobian;
  "A joint-space force head"): both worse on D/val than the base frame;
* ``residual_features`` with ``f_lever`` (tau_ext over each joint's lever arm; R32, not adopted).

Each is a change of the fresh model (:func:`actuatorlab.learned.heads.new_heads_model`) that
:func:`actuatorlab.learned.heads.train_heads` then trains as its ``init`` (trunk included), keeping
the prior and the frame. Dropped, not kept as recipes: family-balanced batches (``--balance-tasks``)
and a contact weight other than 4 (``--contact-weight``), both measured and not adopted.
"""

from __future__ import annotations

import dataclasses

from actuatorlab.errors import ModelError, UnknownNameError
from actuatorlab.learned.force_frame import joint_force_map
from actuatorlab.learned.head_data import yaw_channel
from actuatorlab.learned.heads import HeadsConfig, heads_layout, new_heads_model, train_heads
from actuatorlab.precision import physics
from actuatorlab.robots import load_robot
from actuatorlab.sim.arm_learned import RESIDUAL_FEATURE, RESIDUAL_FEATURES
from actuatorlab.sim.force import ForcePrior

FORCE_FRAMES = ("base", "yaw", "joint")


@physics
def recipe_model(robot, train_trajs, cfg: HeadsConfig, *, force_prior: str | None = None, prior_labels: bool = False,
                 force_frame: str = "base", residual_features: tuple[str, ...] = (RESIDUAL_FEATURE,)):
    """A fresh heads model with the not-adopted options of the module docstring; None when every
    option has its adopted value (then train_heads builds its own fresh model)."""
    if force_frame not in FORCE_FRAMES:
        raise UnknownNameError("force frame", str(force_frame), FORCE_FRAMES)
    res = tuple(residual_features)
    bad = [f for f in res if f not in RESIDUAL_FEATURES]
    if bad or not res or len(set(res)) != len(res):
        raise UnknownNameError("residual feature", ",".join(bad) or str(res), list(RESIDUAL_FEATURES))
    if force_prior is None and force_frame == "base" and res == (RESIDUAL_FEATURE,):
        return None
    channels, feats = heads_layout(robot, train_trajs, cfg.residual_input)
    per_channel = None
    if res != (RESIDUAL_FEATURE,):
        if cfg.residual_input is None:
            raise ModelError("residual_features need a residual_input (the classical method they come from)")
        per_channel = tuple(f for f in feats if f not in RESIDUAL_FEATURES) + res
    if force_frame == "joint":  # one force output per channel: the external joint torques
        cfg = dataclasses.replace(cfg, sizes={**dict(cfg.sizes or {}), "force_out": len(channels)})
    model, train_trajs = new_heads_model(robot, train_trajs, cfg, per_channel)
    if force_prior is not None:
        model = dataclasses.replace(model, force_prior=ForcePrior.fit(robot, force_prior, train_trajs,
                                                                      labelled=prior_labels))
    if force_frame == "yaw":
        found, c, F = yaw_channel(robot, model.layout, "force_frame 'yaw'")
        model = dataclasses.replace(model, force_yaw=(c * F + model.layout.per_channel.index("q"),
                                                      *(float(v) for v in found[1])))
    elif force_frame == "joint":
        model = dataclasses.replace(model, force_joint=joint_force_map(robot, model.layout))
    return model


def train_heads_recipe(robot_name: str, train_trajs, val_trajs, cfg: HeadsConfig, *, out, resume: bool = False,
                       progress: bool = False, **recipe) -> dict:
    """:func:`actuatorlab.learned.heads.train_heads` from scratch with the options of
    :func:`recipe_model` (``recipe``); without any, exactly the library's training."""
    robot = load_robot(robot_name)
    init = recipe_model(robot, train_trajs, cfg, **recipe)
    if init is not None:
        cfg = dataclasses.replace(cfg, trunk=True if cfg.trunk is None else cfg.trunk)
    return train_heads(robot_name, train_trajs, val_trajs, cfg, out=out, init=init, resume=resume, progress=progress)

"""Whole-robot learned actuators: data, loss through the simulator, model files.

The network of a :class:`~actuatorlab.sim.arm_learned.LearnedArm` is trained through the MJX
rollout (:func:`actuatorlab.sim.arm.make_mjx_rollout`), never on effort labels: the logs carry no
torque. Per minibatch of B windows of L control steps restarted from measured states
(:func:`actuatorlab.sim.arm_windows.make_windows`; frames before a window are the log's measured
frames, so the network's history is causal and complete), the loss is::

    J = mean_{w,k,j} wgt huber((q_sim - q_meas)[w,k,j] / u_j)                   positions
      + a_f mean_{w,k} c_f (1 + 4 contact) sum_xyz huber(f_hat - f)              end-effector force [N]
      + a_g mean_{w,k} c_f BCE(gate_logit, contact)                            contact gate
      + a_c mean_{w,c} BCE(condition_logit_c, label_c)                         condition per channel

u_j = 1 deg for revolute joints, 1 mm for prismatic ones (the gripper in mm), huber with delta 1
(optax.huber_loss); wgt excludes padding and joints a log does not record; c_f = 1 where the log
carries a force label (``force_x/y/z``); contact = the log's ``contact`` channel where it has one
(the synth suite's, |f| > 0.05 N or a payload held), else [|f| > 0.01 N]; label_c = 0 on the
channel named by the log's ``restricted`` condition (e.g. ``restricted_joint3``), 1 elsewhere: the
condition score sigmoid(condition_logit) is 1 = normal, 0 = restricted. f_hat = sigmoid(gate) f_raw.
The gradient flows through the simulator and through the network's history (BPTT) to the network
only (:func:`~actuatorlab.sim.arm_learned.trainable`); the normalizer and the analytic base are
data. Windows lengthen along the curriculum 128 -> 256 -> 320 control steps (``curriculum``; the
steps are split between the stages by ``stage_fraction``). The training itself (warm start from an
analytic teacher, then through the simulator) is :func:`actuatorlab.learned.arm_train.train_arm`'s.

Numerics: network and frames float32; the rollout's physics float64 (x64 context).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Iterable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..errors import DataError, ModelError
from ..logs.format import Trajectory
from ..precision import physics
from ..robots.loader import Robot, load_robot
from ..sim.arm import ArmConfig, ArmInputs, ArmState
from ..sim.arm_learned import RESIDUAL_FEATURES, TELEMETRY, LearnedArm, LearnedInputs, frames_of_log
from ..sim.arm_native import rollout_native
from ..sim.arm_windows import make_windows
from ..models.features import FeatureLayout, Normalizer
from ..models.nets import arch_sizes, make_net, zero_torque_head
from ..models.actuator_model import FORMAT, FORMAT_VERSION, from_document, load, save
from ..sim.arm_data import _param_sets, fit_windows, log_arrays, robot_with_model
from ..sim.dynamics import ArmDynamics
from ..sim.force import estimate_log, ForcePrior, lever_arms, read_force_log
from ..logs.format import Channel
from ..files import git_revision
from ..identify.images import ImageSupervision, window_targets
from .checkpoint import load_learned, save_learned
from ..models.nets import param_count
from .force_frame import force_frame_dict, force_joint_of, force_yaw_of
from .. import __version__

__all__ = ["DEFAULT_FEATURES", "ArmLog", "arm_log", "LearnedWindows",
           "learned_windows", "make_learned_arm", "arm_loss", "save_arm_model", "load_arm_model",
           "WEIGHTS_NAME", "evaluate_learned_arm", "with_residual_inputs",
           "add_residual_channels"]

WEIGHTS_NAME = "arm_model.eqx"
#: per-channel features used when the logs carry them (commands, state, tracking error, telemetry)
DEFAULT_FEATURES: tuple[str, ...] = ("q_target", "q", "dq", "err", "current", "pwm", "temperature", "voltage")
FORCE_THRESHOLD = 0.01  # [N] contact iff |f| above this
#: [1/rad^2] the image term's factor in :func:`arm_loss`: 1 / (2 u^2), u = 1 deg
IMAGE_SCALE = 0.5 / (math.pi / 180.0) ** 2


@dataclasses.dataclass(frozen=True)
class ArmLog:
    """One multi-joint log for learned models: :class:`~actuatorlab.identify.arm_fit.LogArrays`
    (``base``) plus telemetry (T, C, K) in ``features`` order, force (T, 3) [N] and force_known
    (bool: the log carries a force label), condition (C,) labels (1 = normal, 0 on the restricted channel),
    contact (T,) in {0, 1}: the log's own ``contact`` channel when it has one (the synth force gauge
    carries 0.05 N of noise, so |f| > 0.01 N would mark almost every no-contact frame), else
    |f| > FORCE_THRESHOLD."""

    base: Any
    telemetry: np.ndarray
    force: np.ndarray
    force_known: bool
    condition: np.ndarray
    contact: np.ndarray | None = None


def _telemetry_features(per_channel: Iterable[str]) -> tuple[str, ...]:
    return tuple(f for f in per_channel if f in TELEMETRY)


def arm_log(robot: Robot, traj: Trajectory, channels: tuple[str, ...], per_channel: tuple[str, ...]) -> ArmLog:
    """Read one log for a learned model; a missing telemetry channel is a one-line DataError."""

    base = log_arrays(robot, traj)
    where = traj.location
    T = base.q_meas.shape[0]
    tel_f = _telemetry_features(per_channel)
    tel = np.zeros((T, len(channels), len(tel_f)))
    for c, j in enumerate(channels):
        for k, f in enumerate(tel_f):
            ch = f"{TELEMETRY[f]}/{j}"
            if not traj.has(ch):
                if f in RESIDUAL_FEATURES:
                    raise DataError(where, f"no {ch!r} channel: the model reads the estimated external torque "
                                           f"feature {f} of every channel; add it with with_residual_inputs(robot, "
                                           "model, logs)")
                raise DataError(where, f"no {ch!r} channel: the learned model reads {f} of every channel")
            tel[:, c, k] = np.nan_to_num(np.asarray(traj[ch], float))
    known = all(traj.has(f"force_{a}") for a in "xyz")
    force = np.stack([np.nan_to_num(np.asarray(traj[f"force_{a}"], float)) for a in "xyz"], -1) if known \
        else np.zeros((T, 3))
    cond = np.ones(len(channels))  # 1 = normal, 0 = restricted
    r = str(traj.conditions.get("restricted", "none"))
    if r.startswith("restricted_") and r[len("restricted_"):] in channels:
        cond[channels.index(r[len("restricted_"):])] = 0.0
    if traj.has("contact"):
        contact = (np.nan_to_num(np.asarray(traj["contact"], float)) > 0.5).astype(float)
    else:
        contact = (np.linalg.norm(force, axis=-1) > FORCE_THRESHOLD).astype(float)
    return ArmLog(base, tel, force, known, cond, contact)


def with_residual_inputs(robot: Robot, model: LearnedArm, trajs: Iterable[Trajectory]) -> list[Trajectory]:
    """The logs with the ``tau_ext/<joint>`` (and ``f_lever/<joint>``) channels a model reading those
    features (``RESIDUAL_FEATURES``) needs: its ``residual_input`` run over each log by
    :func:`add_residual_channels`. A model that reads neither gets the logs back unchanged, and so
    does a log that already carries every channel it reads (its values are kept: they are the
    user's). A model without a ``residual_input`` and a log without the channels is a one-line
    :class:`DataError` naming the log."""
    trajs = list(trajs)
    used = tuple(f for f in RESIDUAL_FEATURES if f in model.layout.per_channel)
    if not used:
        return trajs
    return add_residual_channels(robot, model.residual_input, trajs, model.layout.channels, used)


def add_residual_channels(robot: Robot, prior, trajs: Iterable[Trajectory],
                          channels: Iterable[str] | None = None,
                          features: Iterable[str] = RESIDUAL_FEATURES) -> list[Trajectory]:
    """Copies of the logs with ``tau_ext/<joint>`` [N.m]: the external joint torque estimate of
    ``prior`` (a :class:`~actuatorlab.sim.force.ForcePrior`, e.g. ``id_friction`` calibrated on
    free-motion training logs) run causally over each log, one frame at a time (frame k sees frames
    0..k only), and ``f_lever/<joint>`` [N], the same over the joint's lever arm at the frame's
    measured angles (:func:`~actuatorlab.sim.force.lever_arms`). The given trajectories are
    never modified; a log that already carries the channels of ``features`` for ``channels``
    (default: the prior's joints) is returned as it is. ``prior`` None and a log without them, or a
    channel the prior does not estimate, is a one-line :class:`DataError`."""
    trajs = list(trajs)
    joints = tuple(prior.calibration.joints) if prior is not None else ()
    channels = tuple(channels) if channels is not None else joints
    need = [f"{TELEMETRY[f]}/{j}" for f in features for j in channels]

    est, dyn, out = None, None, []
    for t in trajs:
        if all(t.has(ch) for ch in need):
            out.append(t)
            continue
        if prior is None:
            raise DataError(t.source_file or t.name, f"no {need[0]!r} channel and the model has no residual_input "
                                                     "to compute it from (its file lacks the entry)")
        missing = [j for j in channels if j not in joints]
        if missing:
            raise DataError(t.source_file or t.name, f"the residual_input estimates joints {list(joints)}, "
                                                     f"not the model's channels {missing}")
        flog = read_force_log(robot, t)
        if all(t.has(f"{TELEMETRY['tau_ext']}/{j}") for j in joints):  # the log's own estimate is kept and used
            tau = np.stack([np.asarray(t[f"{TELEMETRY['tau_ext']}/{j}"], float) for j in joints], -1)
        else:
            est = est or prior.estimator(robot)
            tau = estimate_log(est, flog)["tau_ext"]
        src = (f"{prior.method} external joint torque estimate (actuatorlab.sim.force), causal, calibration "
               f"of the model's residual_input ({prior.calibration.n_samples} training samples)")
        dyn = dyn or ArmDynamics(robot, joints=joints, ee_body=prior.ee_body)
        qi = [robot.index(j) for j in joints]
        lever = np.stack([lever_arms(dyn, q[qi]) for q in np.asarray(flog.frames.q, float)])
        for i, j in enumerate(joints):
            if t.has(f"{TELEMETRY['tau_ext']}/{j}"):
                continue
            t = t.with_channel(f"{TELEMETRY['tau_ext']}/{j}", tau[:, i],
                               Channel("N.m", "estimated", "output", src, 0.0,
                                       "inverse-dynamics residual M qdd + C qd + g - tau_m + tau_f (model input)"))
        for i, j in enumerate(joints):
            if t.has(f"{TELEMETRY['f_lever']}/{j}"):
                continue
            t = t.with_channel(f"{TELEMETRY['f_lever']}/{j}", tau[:, i] / lever[:, i],
                               Channel("N", "estimated", "output", src, 0.0,
                                       "tau_ext / max(|J_p[:, j]|, LEVER_MIN) at the measured angles (model input)"))
        out.append(t)
    return out


class LearnedWindows(eqx.Module):
    """W windows of L steps: inputs (LearnedInputs, (W, L, ...), past (W, H, F)), state0 (ArmState,
    (W, ...)), q_meas (W, L, n), wgt (W, L, n) position weights, force (W, L, 3) [N], force_w
    (W, L), condition (W, C), contact (W, L) gate labels in {0, 1} (None: |force| > FORCE_THRESHOLD),
    img: the windows' camera-mask targets (:func:`~actuatorlab.identify.images.window_targets`, per
    camera (k (W, K), c (W, K), obs (W, K, P_c)); None: no image supervision)."""

    inputs: Any
    state0: Any
    q_meas: Any
    wgt: Any
    force: Any
    force_w: Any
    condition: Any
    contact: Any = None
    img: Any = None

    def take(self, idx) -> "LearnedWindows":
        return jax.tree.map(lambda a: a[idx], self)

    @property
    def n(self) -> int:
        return int(self.q_meas.shape[0])


def learned_windows(robot: Robot, logs: list[ArmLog], length: int, model: LearnedArm,
                    cfg: ArmConfig | None = None, pad_to: int | None = None,
                    images: ImageSupervision | None = None) -> LearnedWindows:
    """Windows of ``length`` control steps of every log (a shorter log: one padded window), with
    the measured frames before each window as its history (copies of frame 0 before a log).

    ``pad_to`` (>= length): windows start every ``length`` steps but hold ``pad_to`` steps, the
    steps past ``length`` at weight 0, so every curriculum stage has one array shape and the
    training step compiles once (XLA compiles the MJX gradient in minutes on a CPU).

    ``images``: the windows carry their mask frames (``img``; frames of the first ``length`` steps
    only, :func:`~actuatorlab.identify.images.window_targets`)."""
    cfg = cfg or ArmConfig.from_robot(robot)
    H = model.layout.history
    parts = []
    P = int(length if pad_to is None else max(pad_to, length))
    for lg in logs:
        b = lg.base
        w = make_windows(robot, b.q_meas, b.dq_meas, b.inputs, P, stride=int(length), cfg=cfg,
                         temperature=b.temperature)
        w = w._replace(mask=w.mask & (np.arange(P) < int(length))[None, :])
        length_ = P
        T = b.q_meas.shape[0]
        frames = frames_of_log(model, b.inputs.q_target, b.q_meas, b.dq_meas, b.inputs.v_supply, b.inputs.enable,
                               lg.telemetry)
        idx = np.minimum(w.start[:, None] + np.arange(length_)[None], T - 1)  # (W, L)
        past = frames[np.clip(w.start[:, None] + np.arange(-H, 0)[None], 0, T - 1)]  # (W, H, F)
        fw = (w.mask * float(lg.force_known)).astype(float)
        parts.append(dict(inputs=LearnedInputs(*w.inputs, lg.telemetry[idx], past), state0=w.state0,
                          q_meas=w.q_meas, wgt=w.mask[..., None] * lg.base.scored[None, None, :].astype(float),
                          force=lg.force[idx], force_w=fw, condition=np.tile(lg.condition, (len(w.start), 1)),
                          contact=(lg.contact if lg.contact is not None
                                   else (np.linalg.norm(lg.force, axis=-1) > FORCE_THRESHOLD).astype(float))[idx]))
    cat = lambda *a: np.concatenate(a)  # noqa: E731
    d = {k: jax.tree.map(cat, *[p[k] for p in parts]) for k in parts[0]}
    if images is not None:
        d["img"] = window_targets(images, [lg.base.name for lg in logs], [lg.base.q_meas.shape[0] for lg in logs], P,
                                  robot.control_dt, stride=int(length), used=int(length))
    return LearnedWindows(**d)


@physics
def make_learned_arm(robot: Robot, arch: str, *, channels: tuple[str, ...], per_channel: tuple[str, ...],
                     normalizer: Normalizer, effort_scale, base: dict | None = None, residual: bool = False,
                     key=None, **sizes) -> LearnedArm:
    """A fresh learned (or residual, correcting ``base``) whole-robot model; ``sizes``: net sizes, ``history``."""
    history = int(sizes.pop("history", 8))
    for j in channels:
        if j not in robot.joint_names:
            raise ModelError(f"channel {j!r} is not a joint of {robot.name} ({', '.join(robot.joint_names)})")
    layout = FeatureLayout(tuple(channels), tuple(per_channel), (), history)
    full = arch_sizes(arch, **sizes)
    key = jax.random.PRNGKey(0) if key is None else key
    net = make_net(arch, n_features=layout.n_features, n_channels=layout.n_channels, history=history, key=key, **full)
    if residual:  # start from the analytic model exactly: zero torque head output
        net = zero_torque_head(net)
    base = robot.nominal_params() if base is None else base
    idx = tuple(robot.index(j) for j in channels)
    return LearnedArm(net=net, normalizer=normalizer, base={k: jnp.asarray(v, jnp.float64) for k, v in base.items()},
                      layout=layout, channel_index=idx, n_joints=robot.n_joints,
                      effort_scale=tuple(float(s) for s in np.broadcast_to(effort_scale, (len(channels),))),
                      effort_limit=tuple(float(robot.joints[i].effort_limit) for i in idx), residual=bool(residual),
                      arch=arch, sizes=tuple(sorted(full.items())))


def _units(robot: Robot) -> np.ndarray:
    """Position-loss units u_j: 1 deg for revolute joints, 1 mm for prismatic ones."""
    m = robot.model()
    import mujoco

    jt = np.asarray(m.jnt_type)[[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j) for j in robot.joint_names]]
    return np.where(jt == mujoco.mjtJoint.mjJNT_SLIDE, 1e-3, math.pi / 180.0)


def arm_loss(model: LearnedArm, w: LearnedWindows, roll_heads, units, weights=(0.1, 0.1, 0.1), img_term=None):
    """Loss J of the module docstring and its terms (aux dict). ``roll_heads``: a batched
    ``make_mjx_rollout(...).with_heads`` (``jax.vmap(..., in_axes=(None, 0, 0, None))``).
    ``img_term``: :func:`~actuatorlab.identify.images.image_term` of the windows' ``img``: J gains
    J_img / (2 u^2) (u = 1 deg; aux "image": J_img [rad^2]), the image term in the position term's
    units (huber(e / u) = e^2 / (2 u^2) for small e), so that its weight lambda keeps the meaning it
    has in the analytic fit (:mod:`actuatorlab.identify.images`: lambda [rad^2] against the squared
    position error)."""
    _, out, hd = roll_heads(model, w.inputs, w.state0, None)
    e = (out.q - w.q_meas) / jnp.asarray(units)
    pos = jnp.sum(optax.huber_loss(e, delta=1.0) * w.wgt) / jnp.maximum(jnp.sum(w.wgt), 1.0)
    f_hat = jax.nn.sigmoid(hd.gate_logit)[..., None] * hd.force_raw
    contact = ((jnp.linalg.norm(w.force, axis=-1) > FORCE_THRESHOLD) if w.contact is None
               else jnp.asarray(w.contact) > 0.5).astype(jnp.float32)
    fw = jnp.asarray(w.force_w, jnp.float32)
    den_f = jnp.maximum(jnp.sum(fw), 1.0)
    force = jnp.sum(fw * (1.0 + 4.0 * contact) * optax.huber_loss(f_hat, w.force.astype(jnp.float32), delta=1.0).sum(-1)) / den_f
    gate = jnp.sum(fw * optax.sigmoid_binary_cross_entropy(hd.gate_logit, contact)) / den_f
    cond = jnp.mean(optax.sigmoid_binary_cross_entropy(hd.condition_logit,
                                                       jnp.asarray(w.condition, jnp.float32)[:, None, :]))
    a_f, a_g, a_c = weights
    total = pos + a_f * force + a_g * gate + a_c * cond
    aux = {"position": pos, "force": force, "gate": gate, "condition": cond}
    if img_term is not None and w.img is not None:
        aux["image"] = img_term(out.q, w.img)
        total = total + IMAGE_SCALE * aux["image"]
    return total, aux


def native_mae(robot: Robot, model, w: LearnedWindows, cfg: ArmConfig | None = None,
               keep_q: bool = False) -> dict[str, Any]:
    """Per-joint and pooled position MAE [rad | m] of a native rollout of ``model`` (learned or
    analytic parameter sets) on the windows; ``keep_q``: also the simulated positions "q" (W, L, n)."""
    x = w.inputs if isinstance(model, LearnedArm) else ArmInputs(*w.inputs[:3])
    _, out = rollout_native(robot, model, x, w.state0, cfg)
    wgt = np.asarray(w.wgt)
    err = np.abs(np.asarray(out.q) - np.asarray(w.q_meas)) * wgt
    num, den = err.sum(axis=(0, 1)), wgt.sum(axis=(0, 1))
    per = {j: float(num[i] / den[i]) for i, j in enumerate(robot.joint_names) if den[i] > 0}
    pooled = float(num.sum() / max(den.sum(), 1.0))
    return {"per_joint": per, "position_mae": pooled if np.isfinite(pooled) else float("inf"),
            **({"q": np.asarray(out.q)} if keep_q else {})}


def _effort_scale(robot: Robot, base: dict, logs: list[ArmLog], channels, residual: bool) -> np.ndarray:
    """s_c: the std of the analytic model's joint effort on the training logs' windows (native
    rollout, 128 steps), x 0.25 for a residual; floored at 1 % of the effort limit."""

    cfg = ArmConfig.from_robot(robot)
    ws, _ = fit_windows(robot, [lg.base for lg in logs], 128, cfg)
    sel = np.unique(np.linspace(0, len(ws.start) - 1, min(len(ws.start), 16)).astype(int))
    _, out = rollout_native(robot, base, ArmInputs(*[v[sel] for v in ws.inputs]),
                            ArmState(*[v[sel] for v in ws.state0]), cfg)
    idx = [robot.index(j) for j in channels]
    tau = (out.tau_motor + out.tau_friction)[..., idx]
    s = np.nanstd(tau.reshape(-1, len(idx)), axis=0)
    E = np.array([robot.joints[i].effort_limit for i in idx])
    s = np.where(np.isfinite(s), s, 0.1 * E) * (0.25 if residual else 1.0)
    return np.maximum(s, 0.01 * E)


def _base_of(robot_name: str, residual) -> tuple[Robot, dict, dict | None]:
    """(robot with the base model, base parameter sets, description) from None (the robot's
    nominal model), an arm_model.json path or a dict ({"model", "params"} as fit --robot writes)."""

    robot = load_robot(robot_name)
    if residual is None:
        return robot, robot.nominal_params(), None
    where = "analytic parameters"
    if isinstance(residual, (str, Path)):
        path = Path(residual)
        am = load(path)
        d = am.document
        where = str(path)
        if am.one_joint or am.kind != "analytic":
            what = "a one-joint model" if am.one_joint else f"a {am.kind} model"
            raise ModelError(f"{path}: {what}, not an analytic whole-robot model (the teacher and the residual's "
                             "base come from `actuatorlab fit --robot`: RUN/arm_model.json)")
        if d.get("robot") != robot_name:
            raise ModelError(f"{path}: fitted for robot {d.get('robot')!r}, not {robot_name!r}")
    else:
        d = residual
    try:
        if d.get("model"):
            robot = robot_with_model(robot, d["model"])
        r, p = _param_sets(robot, d.get("params"))
    except ModelError as e:  # e.g. parameters of joints this robot does not have
        raise ModelError(f"{where}: {e}") from None
    return r, p, {"model": d.get("model"), "params": d.get("params")}


def save_arm_model(out: str | Path, robot_name: str, model: LearnedArm, base_desc: dict | None,
                   extra: dict | None = None) -> dict:
    """Write RUN/arm_model.json (kind "learned" | "residual") and its weights RUN/arm_model.eqx."""
    out = Path(out)
    save_learned(out / WEIGHTS_NAME, model.net, layout=model.layout, normalizer=model.normalizer, arch=model.arch,
                 sizes=dict(model.sizes), meta={"robot": robot_name, "residual": model.residual})
    d = {"format": FORMAT, "format_version": FORMAT_VERSION, "kind": "residual" if model.residual else "learned",
         "robot": robot_name, "weights": WEIGHTS_NAME, "arch": model.arch, "sizes": dict(model.sizes),
         "params_count": param_count(model.net), "layout": model.layout.to_dict(),
         "normalizer": model.normalizer.to_dict(), "effort_scale": list(model.effort_scale),
         "base": base_desc, **(extra or {}), "package_version": __version__, "git_revision": git_revision()}
    if model.force_prior is not None:
        d["force_prior"] = model.force_prior.to_dict()
    if model.force_yaw:
        d["force_frame"] = force_frame_dict(model)
    elif model.force_joint is not None:
        d["force_frame"] = model.force_joint.to_dict()
    if model.residual_input is not None:
        d["residual_input"] = model.residual_input.to_dict()
    save(from_document(d, validate=False), out / "arm_model.json")
    return d


def _force_prior_of(d, where):
    """The ForcePrior of an arm_model.json entry (None when absent); errors name the file."""
    if d is None:
        return None
    try:
        return ForcePrior.from_dict(d)
    except ModelError as e:
        raise ModelError(f"{where}: {e}") from None


@physics
def load_arm_model(path: str | Path, robot_name: str | None = None) -> tuple[Robot, LearnedArm, dict]:
    """(robot with the base model, LearnedArm, the JSON dict) of a learned/residual arm_model.json;
    problems are one-line ModelErrors naming the file."""

    p = Path(path)
    am = load(p)
    d = dict(am.document)
    if am.one_joint or am.kind not in ("learned", "residual"):
        raise ModelError(f"{p}: not a learned actuatorlab arm model")
    if robot_name is not None and d.get("robot") != robot_name:
        raise ModelError(f"{p}: trained for robot {d.get('robot')!r}, not {robot_name!r}")
    try:
        layout = FeatureLayout.from_dict(d["layout"])
        lm = load_learned(p.parent / d["weights"], layout)
        robot, base, _ = _base_of(d["robot"], d.get("base"))
        model = LearnedArm(net=lm.net, normalizer=lm.normalizer,
                           base={k: jnp.asarray(v, jnp.float64) for k, v in base.items()}, layout=lm.layout,
                           channel_index=tuple(robot.index(j) for j in layout.channels), n_joints=robot.n_joints,
                           effort_scale=tuple(float(s) for s in d["effort_scale"]),
                           effort_limit=tuple(float(robot.joints[robot.index(j)].effort_limit)
                                              for j in layout.channels),
                           residual=d["kind"] == "residual", arch=lm.arch, sizes=tuple(sorted(lm.sizes.items())),
                           force_prior=_force_prior_of(d.get("force_prior"), p),
                           force_yaw=force_yaw_of(d.get("force_frame"), layout, p),
                           residual_input=_force_prior_of(d.get("residual_input"), p),
                           force_joint=force_joint_of(d.get("force_frame"), robot, layout, p))
    except KeyError as e:
        raise ModelError(f"{p}: arm model lacks the entry {e}") from None
    return robot, model, d


@physics
def evaluate_learned_arm(robot: Robot, model: LearnedArm, trajs: Iterable[Trajectory],
                         horizons: Iterable[int] = (100, 300, 600)) -> dict[str, Any]:
    """:func:`~actuatorlab.identify.arm_fit.evaluate_arm`'s result for a learned model: per-joint
    window-rollout MAE at each horizon (native path, windows restarted from measured states). A
    model reading ``tau_ext`` gets it from its ``residual_input`` (:func:`with_residual_inputs`)."""
    logs = [arm_log(robot, t, model.layout.channels, model.layout.per_channel)
            for t in with_residual_inputs(robot, model, list(trajs))]
    if not logs:
        raise DataError(None, "no logs to evaluate")
    units: dict = {}
    for lg in logs:
        units.update(lg.base.units)
    per_joint: dict[str, dict[str, float]] = {j: {} for j, s in zip(robot.joint_names, np.any([lg.base.scored for lg in logs], axis=0)) if s}
    n_windows, pooled, longest = {}, None, None
    for h in sorted({int(h) for h in horizons}):
        fit = [lg for lg in logs if lg.base.q_meas.shape[0] >= h]
        if not fit:
            continue
        w = learned_windows(robot, fit, h, model)
        r = native_mae(robot, model, w)
        for j, v in r["per_joint"].items():
            if j in per_joint:
                per_joint[j][str(h)] = v
        n_windows[str(h)] = w.n
        pooled, longest = r["position_mae"], h
    return {"per_joint": per_joint, "position_mae": pooled, "horizon": longest, "unit": "rad", "units": units,
            "n_windows": n_windows}

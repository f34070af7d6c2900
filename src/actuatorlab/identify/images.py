"""Image supervision of actuator models: the silhouette loss through renderer, kinematics and simulation.

Calibrated cameras that see the robot (masks beside the logs, docs/format.md section 6; the
camera-from-base transforms from ``actuatorlab calibrate-camera``) supervise an actuator model
through its rollout. In a window restarted at control step s of a log, a mask frame f at log
time t_f sits at the fractional step k_f = i(t_f) - s (i: the log's sample index, interpolated);
the simulated joint positions there are interpolated linearly between control steps,

    q_f = (1 - a) q_sim[floor(k_f)] + a q_sim[floor(k_f) + 1],    a = k_f - floor(k_f),

drawn by the soft-silhouette renderer (:func:`actuatorlab.sim.silhouette.soft_silhouette`,
SoftRas-style soft edges, EasyHeC-style per-link saturation) at the camera's pixel centres and
compared with the observed mask M_f by the soft IoU. The image term of a minibatch is

    J_img = lambda * sum_f c_f l_f / max(sum_f c_f, 1),    l_f = 1 - softIoU(I(q_f; T_cb), M_f)

(c_f: 1 for a frame inside its window, 0 for padding; lambda [rad^2]: the weight against the
position term, :attr:`ImageOptions.weight`). With ``loss="edge"`` the per-frame loss is instead the
mean squared pixel residual against the mask's edge profile,

    l_f = mean_p (I_min(q_f; T_cb)[p] - M_sigma,f[p])^2

(I_min: the renderer's union by the minimum distance, :func:`~actuatorlab.sim.silhouette.soft_silhouette`;
M_sigma: :func:`~actuatorlab.sim.silhouette.mask_edge_profile`, the same sigmoid across the observed
contour), the residual of ``calibrate-camera``'s Levenberg-Marquardt: it vanishes where the shapes
agree whatever sigma, while the soft IoU of thin links prefers a smaller silhouette. Its values are
about 100x smaller than 1 - soft IoU (0.002-0.01 against 0.3 on the test scene), so lambda scales
accordingly. Its gradient flows through the renderer, the
forward kinematics (:func:`~actuatorlab.sim.silhouette.geom_poses`, MuJoCo's ``mj_kinematics`` in
JAX) and the MJX rollout into the actuator parameters (or network). This is the image loss of
NeuralActuator (Dou et al., RSS 2026: rendered silhouettes against observed masks, gradients
through the differentiable simulator) and of EasyHeC (Chen et al., RA-L 2023) with the actuator
instead of the camera as the unknown.

A joint whose log has a command but no encoder (``position_target/<joint>`` without
``position/<joint>``, listed in ``Setup.extra["unmeasured"]``: :func:`withhold_encoders`,
:func:`actuatorlab.sim.arm_data.log_arrays`) is not in the position term;
the images are then what constrains it. Where its windows restart, its state is a stand-in (the
command in the logs; in the gradient fit a continuous rollout of the parameters reached,
:func:`actuatorlab.identify.arm_grad.standin_states`; in a learned actuator's training the
teacher's, :mod:`actuatorlab.learned.arm_images`), and frames in the first
:attr:`ImageOptions.settle_s` of a window are not used, so that the stand-in's error has decayed
(the servo's closed loop forgets it: on the virtual OM-X the withheld shoulder's command as
stand-in raised 1 - softIoU by as much as the whole difference between nominal and fitted
parameters, and by nothing after 0.3 s).

**Joint camera refinement** (:attr:`ImageOptions.refine_camera`). A hand-eye calibration from a
few frames leaves the camera a few millimetres off along a flat valley of its loss, and a joint
seen only by the cameras inherits that offset (docs/visual.md). The fit may then move each camera
by a twist xi_c = (omega [rad], v [m]) of its calibrated pose about a pivot inside the robot
(the mean of its geoms' positions at rest, c in the calibrated camera's frame),

    T_c = P exp(xi_c^) P^-1 T_c0,    P = [[I, c], [0, 1]]

(:func:`~actuatorlab.sim.camera.se3_exp`). About the camera's own centre a small pan and a small
sideways move shift the image alike (a valley that first-order descent crosses slowly); about the
robot a rotation orbits the camera round what it sees and leaves the image where it is. Inside a box of ``camera_range`` prior standard
deviations s = (``camera_std`` [rad] x 3, [m] x 3), under the Gaussian prior

    J_cam = lambda * k * sum_c sum_i (xi_c,i / s_i)^2

(k = :attr:`ImageOptions.camera_prior`: what one standard deviation of camera error is worth in
units of the per-frame loss): the maximum a posteriori camera given the calibration's
uncertainty and the masks, as in EasyHeC's joint refinement (Chen et al., RA-L 2023), here with
the actuator's rollout instead of measured joint angles. Refine with ``loss="edge"``: on the test
scene (80 x 60 px, a camera displaced by 12.6 mm and 0.6 deg, true joint angles) Adam on the edge
loss brings it to 1.3 mm, 0.05 deg in 50 steps, while the soft IoU's own minimum lies 24 mm from the
truth (bench/journal/visual.md, 2026-12-05).

**Per-frame state corrections** (:attr:`ImageOptions.state_std` > 0). A frame can disagree with
the rollout for reasons of its own: its capture time jitters against the joint log (4 ms on the
virtual OM-X, a few mrad at the arm's speeds), a blob is missing or extra. Each frame instant f of
a log (shared by the cameras that see it) may then move the drawn joint positions by its own
correction dq_f [rad | m], in a box of ``state_range`` prior standard deviations s =
``state_std``, and each frame's loss becomes its maximum a posteriori form

    l_f = l(q_f + dq_f) + k_s sum_j (dq_f,j / s)^2

(k_s = :attr:`ImageOptions.state_prior`, in units of the per-frame loss): a frame's own error is
absorbed by its correction, while an error of the actuator, which every frame shares, costs the
prior in every frame and stays with the actuator. As in NeuralActuator's image loss (Dou et al.,
RSS 2026: regularised per-frame state corrections beside the camera refinement) and the per-frame
joint refinement of ``calibrate-camera`` (:mod:`actuatorlab.identify.handeye`).

The frames per window are capped (:attr:`ImageOptions.frames_per_window`, evenly spread
over the frames inside the window) so that every minibatch has one shape; the pixels are a
crop around everything the camera's masks ever show (plus ``margin``), every ``stride``-th row
and column.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import DataError
from ..logs.format import Trajectory
from ..robots.loader import Robot
from ..sim.camera import Camera, check_rigid, pixel_centres, read_cameras, se3_exp
from ..sim.silhouette import RobotMeshes, geom_poses, load_meshes, mask_edge_profile, soft_iou, soft_silhouette
from ..sim.arm_windows import window_starts
from .handeye import pose_error, read_mask_archive

__all__ = ["ImageSupervision", "ImageOptions", "load_image_supervision", "window_targets", "image_term", "read_calibration",
           "withhold_encoders", "CameraTwists", "camera_twists", "refined_cameras", "FrameCorrections",
           "frame_corrections"]


#: the per-frame image losses (:attr:`ImageOptions.loss`, module docstring)
LOSSES = ("soft_iou", "edge")


@dataclass(frozen=True)
class ImageOptions:
    """Settings of :func:`load_image_supervision` and of the image term.

    Attributes:
        weight: lambda [rad^2] of the image term against the position term.
        sigma: [px] the renderer's edge width.
        stride: every stride-th pixel row and column of the crop.
        margin: [px] of the crop around everything the camera's masks show.
        frames_per_window: most frames of one camera in one window.
        settle_s: [s] frames this close to a window's start are not used (module docstring).
        loss: the per-frame image loss, "soft_iou" (1 - soft IoU against the binary mask) or "edge"
            (mean squared pixel residual against the mask's edge profile, module docstring).
        refine_camera: also fit each camera's pose (joint camera refinement, module docstring).
        camera_std: ([rad], [m]) prior standard deviation of each rotation and translation
            component of a camera's twist (the calibration's error: 0.5 deg, 5 mm, issue 45's target).
        camera_prior: k, the per-frame image loss one prior standard deviation is worth (units of ``loss``).
        camera_range: [prior standard deviations] half-width of the twist's box.
        state_std: [rad | m] s, prior standard deviation of each per-frame state correction (0: no
            corrections; module docstring).
        state_prior: k_s, the per-frame loss one prior standard deviation of a correction is worth.
        state_range: [prior standard deviations] half-width of a correction's box.
    """

    weight: float = 1e-2
    sigma: float = 1.0
    stride: int = 2
    margin: int = 6
    frames_per_window: int = 4
    settle_s: float = 0.3
    loss: str = "soft_iou"
    refine_camera: bool = False
    camera_std: tuple[float, float] = (math.radians(0.5), 0.005)
    camera_prior: float = 1e-4
    camera_range: float = 4.0
    state_std: float = 0.0
    state_prior: float = 1e-2
    state_range: float = 4.0


@dataclass(frozen=True)
class FrameCorrections:
    """The per-frame state corrections as fitted coordinates (module docstring): ``zs`` (F n,) in
    [0, 1] (0.5: no correction) <-> dq (F, n) = (2 zs - 1) r s.

    Attributes:
        frames: F, the frame instants of every supervised log (:attr:`ImageSupervision.frame_ids`).
        joints: n, the robot's joints.
        scale: [rad | m] s, one prior standard deviation.
        half: r, the box's half-width [prior standard deviations].
        weight: k_s, the prior's weight per frame (units of the per-frame loss).
    """

    frames: int
    joints: int
    scale: float
    half: float
    weight: float

    @property
    def size(self) -> int:
        """Fitted coordinates, F n."""
        return self.frames * self.joints

    def corrections(self, zs):
        """(F, n) corrections of the coordinates ``zs`` (F n,)."""
        return ((2.0 * zs - 1.0) * self.half * self.scale).reshape(self.frames, self.joints)

    def penalty(self, dq):
        """k_s sum_j (dq_j / s)^2 over the last axis of ``dq`` (..., n) (numpy or JAX)."""
        return self.weight * ((dq / self.scale) ** 2).sum(axis=-1)


@dataclass(frozen=True)
class ImageSupervision:
    """Masks of calibrated cameras, ready for the image term (module docstring).

    Attributes:
        meshes: the robot's :class:`~actuatorlab.sim.silhouette.RobotMeshes` (its mechanisms included).
        cameras: the cameras, each with its calibrated ``camera_from_base``.
        pixels: per camera (P_c, 2) [px] pixel centres of the crop.
        frames: log name -> per camera ((F,) fractional sample index of each frame in the log,
            (F, P_c) observed mask at the pixels, float32 in {0, 1}).
        joint_qpos: per robot joint, its qpos address in ``meshes`` (robot joint order).
        qpos0: (nq,) [rad | m] the rest pose that fills the joints the robot does not actuate.
        options: the :class:`ImageOptions` it was read with (weight, sigma, frames per window,
            settling time of the image term).
        twists: the cameras' fitted twists when ``options`` refine the cameras (:func:`camera_twists`,
            made once by :func:`load_image_supervision`), else None.
        frame_ids: log name -> per camera (F_c,) index of each frame's instant among all the logs'
            frame instants (frames of one log at the same time share it, whatever the camera).
        corrections: the per-frame state corrections when ``options.state_std`` > 0, else None.
    """

    meshes: RobotMeshes = field(repr=False)
    cameras: tuple[Camera, ...]
    pixels: tuple[np.ndarray, ...] = field(repr=False)
    frames: dict[str, tuple[tuple[np.ndarray, np.ndarray], ...]] = field(repr=False)
    joint_qpos: tuple[int, ...]
    qpos0: np.ndarray = field(repr=False)
    options: ImageOptions = ImageOptions()
    twists: CameraTwists | None = None
    frame_ids: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict, repr=False)
    corrections: FrameCorrections | None = None

    def transforms(self) -> tuple[np.ndarray, ...]:
        """(4, 4) camera-from-base transform of every camera."""
        return tuple(np.asarray(c.camera_from_base, np.float64) for c in self.cameras)


def withhold_encoders(traj: Trajectory, joints: list[str] | tuple[str, ...]) -> Trajectory:
    """``traj`` without the ``position/<j>`` and ``velocity/<j>`` channels of ``joints``, which it
    then declares unmeasured (``Setup.extra["unmeasured"]``): the log of the same motion from a
    robot whose ``joints`` have no encoder (a new object; ``traj`` is not changed)."""
    extra = dict(traj.setup.extra or {})
    extra["unmeasured"] = sorted(set(extra.get("unmeasured") or ()) | set(joints))
    drop = [c for j in joints for c in (f"position/{j}", f"velocity/{j}") if traj.has(c)]
    return traj.without_channels(*drop).replace(setup=dataclasses.replace(traj.setup, extra=extra))


def read_calibration(path: str | Path) -> dict[str, np.ndarray]:
    """camera name -> (4, 4) ``camera_from_base`` of a ``camera_calibration.json``
    (``actuatorlab calibrate-camera``); errors name the file."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        rows = doc["cameras"]
        return {str(r["camera"]): check_rigid(r["camera_from_base"], path, f"camera {r['camera']!r} camera_from_base")
                for r in rows}
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise DataError(path, f"not a camera calibration file (needs cameras: [{{camera, camera_from_base}}]; {e})") from None


def _crop_pixels(cam: Camera, masks: list[np.ndarray], margin: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """(P, 2) pixel centres of the crop around every pixel any mask shows, and their flat indices."""
    union = np.any(np.concatenate(masks), axis=0)
    ii, jj = np.nonzero(union)
    if len(ii) == 0:
        i0, i1, j0, j1 = 0, cam.height, 0, cam.width
    else:
        i0, i1 = max(int(ii.min()) - margin, 0), min(int(ii.max()) + margin + 1, cam.height)
        j0, j1 = max(int(jj.min()) - margin, 0), min(int(jj.max()) + margin + 1, cam.width)
    rows, cols = np.arange(i0, i1, stride), np.arange(j0, j1, stride)
    flat = (rows[:, None] * cam.width + cols[None, :]).ravel()
    return pixel_centres(cam.width, cam.height)[flat], flat


def load_image_supervision(robot: Robot, logs: list[Trajectory], masks_dir: str | Path,
                           calibration: str | Path | None = None, options: ImageOptions = ImageOptions()
                           ) -> ImageSupervision:
    """Read ``masks_dir/cameras.json`` and the ``NAME.npz`` of every log ``NAME`` (logs without one
    are not image-supervised). Each camera's transform comes from ``calibration`` (a
    ``camera_calibration.json``) or else from its ``camera_from_base`` in the camera file; a camera
    with neither is an error naming the file."""
    o = options
    masks_dir = Path(masks_dir)
    cams = read_cameras(masks_dir / "cameras.json")
    cal = read_calibration(calibration) if calibration is not None else {}
    fixed = []
    for c in cams:
        T = cal.get(c.name, None if c.camera_from_base is None else np.asarray(c.camera_from_base))
        if T is None:
            raise DataError(calibration or masks_dir / "cameras.json",
                            f"camera {c.name!r} has no camera_from_base: calibrate it first "
                            f"(actuatorlab calibrate-camera) and pass the calibration file")
        fixed.append(Camera(c.name, c.width, c.height, c.fx, c.fy, c.cx, c.cy,
                            tuple(tuple(float(x) for x in r) for r in T), c.clicks))
    model = robot.model()
    rm = load_meshes(model)
    raw: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for traj in logs:
        path = masks_dir / f"{traj.name}.npz"
        if path.exists():
            per = []
            for c in fixed:
                t, m = read_mask_archive(path, c, traj)
                per.append((np.interp(t, traj.time, np.arange(traj.n, dtype=float)), m))
            raw[traj.name] = per
    if not raw:
        raise DataError(masks_dir, f"no NAME.npz mask file matches a log ({', '.join(t.name for t in logs[:5])})")
    pixels, flats = [], []
    for ci, c in enumerate(fixed):
        pix, flat = _crop_pixels(c, [per[ci][1] for per in raw.values()], o.margin, o.stride)
        pixels.append(pix)
        flats.append(flat)
    def target(m: np.ndarray) -> np.ndarray:  # (F, H, W) masks -> (F, H W): binary, or their edge profiles
        if o.loss == "edge":
            m = np.stack([mask_edge_profile(f, o.sigma) for f in m])
        return m.reshape(len(m), -1).astype(np.float32)

    frames = {name: tuple((k, target(m)[:, flats[ci]]) for ci, (k, m) in enumerate(per)) for name, per in raw.items()}
    missing = [j for j in robot.joint_names if j not in rm.joints]
    if missing:
        raise DataError(None, f"{robot.name}: joints {missing} have no qpos in the rendered model")
    ids, n_instants = {}, 0
    for name, per in raw.items():  # one instant per distinct frame time of a log, shared by its cameras
        instants = np.unique(np.concatenate([k for k, _ in per]))
        ids[name] = tuple(n_instants + np.searchsorted(instants, k).astype(np.int32) for k, _ in per)
        n_instants += len(instants)
    sup = ImageSupervision(rm, tuple(fixed), tuple(pixels), frames,
                           tuple(rm.joints.index(j) for j in robot.joint_names), np.asarray(model.qpos0, float), o,
                           frame_ids=ids)
    return dataclasses.replace(sup, twists=camera_twists(sup),  # the refinements' settings checked here
                               corrections=frame_corrections(sup, n_instants))


def window_targets(sup: ImageSupervision, names: list[str], lengths_T: list[int], length: int, dt: float,
                   stride: int | None = None, used: int | None = None
                   ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], ...]:
    """Per camera (k (W, K) fractional step inside the window, c (W, K) weight, obs (W, K, P_c), f (W, K)
    the frames' instants, :attr:`ImageSupervision.frame_ids`, 0 on padding) for
    the windows of ``length`` steps (``dt`` [s] each) of logs ``names`` of ``lengths_T`` samples, in
    the order of :func:`actuatorlab.sim.arm_data.fit_windows` (a log shorter than ``length``: one
    padded window); frames within ``settle_s`` of the window's start are left out. ``stride``
    (default ``length``): steps between window starts, as
    :func:`~actuatorlab.sim.arm_windows.make_windows`'s; ``used`` (default ``length``): only frames
    in a window's first ``used`` steps count (windows padded past their curriculum length)."""
    K = int(sup.options.frames_per_window)
    used = int(length if used is None else min(used, length))
    settle = min(sup.options.settle_s / dt, max(used - 2, 0))
    out = []
    for ci in range(len(sup.cameras)):
        P = sup.pixels[ci].shape[0]
        ks, cs, obs, fs = [], [], [], []
        for name, T in zip(names, lengths_T):
            per = sup.frames.get(name)
            for s in window_starts(T, length, stride):
                k_w, c_w, o_w, f_w = np.zeros(K), np.zeros(K), np.zeros((K, P), np.float32), np.zeros(K, np.int32)
                if per is not None:
                    k_abs, m = per[ci]
                    inside = np.flatnonzero((k_abs >= s + settle) & (k_abs <= min(s + used, T) - 1))
                    if inside.size:
                        pick = inside[np.unique(np.round(np.linspace(0, inside.size - 1, min(K, inside.size))).astype(int))]
                        k_w[:len(pick)], c_w[:len(pick)], o_w[:len(pick)] = k_abs[pick] - s, 1.0, m[pick]
                        if name in sup.frame_ids:
                            f_w[:len(pick)] = sup.frame_ids[name][ci][pick]
                ks.append(k_w)
                cs.append(c_w)
                obs.append(o_w)
                fs.append(f_w)
        out.append((np.stack(ks), np.stack(cs), np.stack(obs), np.stack(fs)))
    return tuple(out)


@dataclass(frozen=True)
class CameraTwists:
    """The cameras' twists as fitted coordinates (joint camera refinement, module docstring):
    ``zc`` (6 C,) in [0, 1] (0.5: the calibrated pose) <-> xi (C, 6) = (2 zc - 1) r s.

    Attributes:
        n: cameras C.
        scale: (6,) [rad, rad, rad, m, m, m] one prior standard deviation s.
        half: r, the box's half-width [prior standard deviations].
        weight: lambda k of the prior term.
    """

    n: int
    scale: tuple[float, ...]
    half: float
    weight: float
    pivots: tuple[tuple[float, ...], ...] = ()  #: per camera c (3,) [m], camera frame (module docstring)

    @property
    def size(self) -> int:
        """Fitted coordinates, 6 C."""
        return 6 * self.n

    def twists(self, zc, xp: Any = jnp):
        """(C, 6) twists of the coordinates ``zc`` (6 C,)."""
        return ((2.0 * zc - 1.0) * self.half).reshape(self.n, 6) * xp.asarray(self.scale)

    def prior(self, xi, xp: Any = jnp):
        """J_cam of twists ``xi`` (C, 6)."""
        return self.weight * xp.sum((xi / xp.asarray(self.scale)) ** 2)

    def pose(self, k: int, xi, T0):
        """Camera ``k``'s camera-from-base transform P exp(xi^) P^-1 T0 (JAX; ``xi`` (6,))."""
        c = jnp.asarray(self.pivots[k], xi.dtype)
        E = se3_exp(xi)
        moved = jnp.concatenate([E[:3, :3], (E[:3, 3] + c - E[:3, :3] @ c)[:, None]], axis=1)
        return jnp.concatenate([moved, E[3:]], axis=0) @ jnp.asarray(T0, xi.dtype)


def camera_twists(sup: ImageSupervision) -> CameraTwists | None:
    """The :class:`CameraTwists` of ``sup`` when its options refine the cameras, else None (the options
    checked; :func:`load_image_supervision` keeps it as ``sup.twists``)."""
    o = sup.options
    if o.loss not in LOSSES:
        raise DataError(None, f"image options: loss {o.loss!r} is not one of {', '.join(LOSSES)}")
    if not o.refine_camera:
        return None
    rot, trans = (float(v) for v in o.camera_std)
    if not (rot > 0 and trans > 0 and o.camera_range > 0 and o.camera_prior >= 0):
        raise DataError(None, f"image options: camera_std {o.camera_std} and camera_range {o.camera_range} must be "
                              f"positive and camera_prior {o.camera_prior} not negative")
    centre = np.mean(np.asarray(geom_poses(sup.meshes, jnp.asarray(sup.qpos0))[0], float), axis=0)
    pivots = tuple(tuple(float(v) for v in T[:3, :3] @ centre + T[:3, 3]) for T in sup.transforms())
    return CameraTwists(len(sup.cameras), (rot,) * 3 + (trans,) * 3, float(o.camera_range),
                        float(o.weight) * float(o.camera_prior), pivots)


def frame_corrections(sup: ImageSupervision, n_instants: int) -> FrameCorrections | None:
    """The :class:`FrameCorrections` of ``sup``'s ``n_instants`` frame instants when its options
    correct the frames' states, else None (the options checked)."""
    o = sup.options
    if not o.state_std:
        return None
    if not (o.state_std > 0 and o.state_range > 0 and o.state_prior >= 0):
        raise DataError(None, f"image options: state_std {o.state_std} and state_range {o.state_range} must be "
                              f"positive and state_prior {o.state_prior} not negative")
    return FrameCorrections(int(n_instants), len(sup.joint_qpos), float(o.state_std), float(o.state_range),
                            float(o.state_prior))


def refined_cameras(sup: ImageSupervision, xi: np.ndarray) -> list[dict[str, Any]]:
    """Per camera the refined pose (module docstring) and the move from the calibrated one."""
    out, ct = [], sup.twists
    if ct is None:
        raise DataError(None, "refined cameras: the image supervision does not refine its cameras")
    for k, (cam, T0, x) in enumerate(zip(sup.cameras, sup.transforms(), np.asarray(xi, float))):
        T = np.asarray(ct.pose(k, jnp.asarray(x), T0), float)
        moved_mm, rotation_deg = pose_error(T, T0)
        out.append({"camera": cam.name, "twist": [float(v) for v in x], "rotation_deg": rotation_deg,
                    "centre_moved_mm": moved_mm, "camera_from_base": T.tolist()})
    return out


def image_term(sup: ImageSupervision) -> Callable[..., Any]:
    """``term(q_sim (B, L, n), targets, xi=None, dq=None) -> J_img`` (module docstring; ``targets``: one
    minibatch of :func:`window_targets`, weights already multiplied by the minibatch's padding weights;
    ``xi`` (C, 6): the cameras' twists from their calibrated poses, joint camera refinement; ``dq``
    (F, n): the per-frame state corrections, each frame's loss then with its prior). The
    renderer runs in float32 (the gradient still reaches float64 parameters)."""
    rm, sigma, lam = sup.meshes, float(sup.options.sigma), float(sup.options.weight)
    cams, Ts = sup.cameras, tuple(jnp.asarray(T, jnp.float32) for T in sup.transforms())
    pix = tuple(jnp.asarray(p, jnp.float32) for p in sup.pixels)
    adr = jnp.asarray(sup.joint_qpos)
    q0 = jnp.asarray(sup.qpos0, jnp.float32)
    ct, fc = sup.twists, sup.corrections
    edge = sup.options.loss == "edge"

    def frame_loss(cam, T, px, qpos, obs):
        if edge:
            return jnp.mean((soft_silhouette(rm, cam, T, qpos, sigma, px, "min") - obs) ** 2)
        return 1.0 - soft_iou(soft_silhouette(rm, cam, T, qpos, sigma, px), obs)

    def term(q_sim, targets, xi=None, dq=None):
        L = q_sim.shape[1]
        num, den = 0.0, 0.0
        if dq is not None and fc is None:
            raise DataError(None, "image term: state corrections given but the options do not correct the frames")
        for ci, (cam, T, px, tg) in enumerate(zip(cams, Ts, pix, targets)):
            k, c, obs = tg[:3]
            if xi is not None:
                if ct is None:
                    raise DataError(None, "image term: camera twists given but the options do not refine the cameras")
                T = ct.pose(ci, jnp.asarray(xi[ci], jnp.float32), T)
            k0 = jnp.clip(jnp.floor(k), 0, L - 2).astype(jnp.int32)
            a = jnp.clip(k - k0, 0.0, 1.0)[..., None]
            q_a = jnp.take_along_axis(q_sim, k0[..., None], axis=1)
            q_b = jnp.take_along_axis(q_sim, (k0 + 1)[..., None], axis=1)
            q = ((1.0 - a) * q_a + a * q_b).astype(jnp.float32)  # (B, K, n)
            prior = 0.0
            if dq is not None:
                assert fc is not None
                d = jnp.asarray(dq, jnp.float32)[tg[3]]  # (B, K, n) each frame's correction
                q = q + d
                prior = fc.penalty(d).reshape(-1)
            qpos = jnp.broadcast_to(q0, q.shape[:2] + q0.shape).at[..., adr].set(q)
            flat = qpos.reshape(-1, q0.shape[0])
            losses = jax.lax.map(lambda args, cam=cam, T=T, px=px: frame_loss(cam, T, px, args[0], args[1]),
                                 (flat, obs.reshape(flat.shape[0], -1)))
            num = num + jnp.sum(c.reshape(-1) * (losses + prior))
            den = den + jnp.sum(c)
        return lam * num / jnp.maximum(den, 1.0)

    return term

"""Hand-eye calibration from robot silhouettes: the camera-from-base transform from masks and logs.

1. **Frames.** Every mask frame of a camera is matched to its log by name; the joint positions are
   the log's ``position/<joint>`` channels interpolated at the frame time
   (:func:`load_mask_frames`). ``n_frames`` frames spread evenly over all of them are used.
2. **Initial pose.** From the camera file's ``camera_from_base`` if given, else from three clicked
   robot points (known body points, pixel coordinates in one frame): a perspective-3-point problem,
   solved by Gauss-Newton on the reprojection error from camera positions all around the points;
   of the solutions that reproject within ``click_tolerance``, the one whose hard silhouette best
   overlaps the clicked frame's mask wins (a P3P problem has up to four solutions).
3. **Refinement** (``method="lm"``, the default). Levenberg-Marquardt (Marquardt, SIAM J. Appl.
   Math. 11(2), 1963: steps ``(J^T J + lambda diag(J^T J)) dx = -J^T r``, ``lambda`` divided by 3
   on a decrease of the cost, multiplied by 4 otherwise) on the pixel residuals

       r(p) = I_sigma(p) - M_sigma(p),

   ``I_sigma`` the rendered soft mask with the pieces combined by the minimum of their signed
   distances (:func:`actuatorlab.sim.silhouette.soft_silhouette`, ``union="min"``) and
   ``M_sigma`` the observed mask given the same edge profile
   (:func:`actuatorlab.sim.silhouette.mask_edge_profile`), coarse to fine in ``sigma`` (and pixel
   stride), over the left twist ``xi`` of the camera-from-base transform
   (:func:`actuatorlab.sim.camera.se3_exp`; each accepted step ``T <- exp(dx^) T``). Both profiles
   are one sigmoid across the contour, so the residuals vanish at the true pose whatever ``sigma``
   (the soft IoU favours smaller silhouettes of thin links, and the product of the pieces' soft
   masks fattens the silhouette where pieces meet: docs/visual.md). With ``refine_joints``, also
   per-frame joint corrections ``dq`` with the prior residuals ``s dq / joint_prior`` (a Gaussian
   prior of std ``joint_prior`` against pixel noise of variance ``s^2 = r^T r / N`` at the stage's
   start; EasyHeC, Chen et al., RA-L 2023, sec. III-C: the rendering loss over the camera pose, with
   joint refinement as in its follow-up use in NeuralActuator). ``method="soft_iou"``: L-BFGS
   (optax, zoom line search) on ``1 - mean soft IoU`` over the same parameters, with the penalty
   ``joint_weight * mean((dq / joint_prior)^2)`` (the former default).
4. **Uncertainty.** Gauss-Newton covariance of the twist at the optimum,
   ``cov = s^2 (J^T J)^-1`` with the pixel residuals at the finest ``sigma`` and
   ``s^2 = r^T r / (N - 6)`` (the twist's block of the inverse with joint corrections). Pixel
   residuals are correlated and the hull model is not the true mesh, so this is a lower bound of
   the error, not a confidence interval.
"""

from __future__ import annotations

import time as _time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..errors import DataError
from ..logs import Trajectory
from ..sim.camera import Camera, pixel_centres, project, se3_exp
from ..sim.silhouette import RobotMeshes, body_point, mask_edge_profile, soft_iou, soft_silhouette

__all__ = ["HandEyeConfig", "MaskFrames", "HandEyeResult", "read_mask_archive", "load_mask_frames", "initial_pose",
           "calibrate_camera", "pose_error"]


@dataclass(frozen=True)
class HandEyeConfig:
    """Settings of :func:`calibrate_camera`.

    Attributes:
        n_frames: frames used, spread evenly over all matched mask frames.
        sigmas: [px] renderer widths, coarse to fine (one stage each).
        strides: pixel stride of each stage (every ``stride``-th row and column of the crop).
        iterations: L-BFGS iterations of each stage.
        rotation_scale: [rad], translation_scale: [m]: one unit of the optimised twist.
        refine_joints: also optimise per-frame joint corrections.
        joint_prior: [rad] scale of the joint corrections in the penalty.
        joint_weight: weight of the joint penalty against ``1 - soft IoU``.
        margin: [px] crop margin around the observed mask's extent.
        click_tolerance: [px] largest RMS reprojection error of an accepted three-point solution.
        method: "lm" (Levenberg-Marquardt on edge-profile pixel residuals, stages ``lm_*``) or
            "soft_iou" (L-BFGS on ``1 - soft IoU``, stages ``sigmas``, ``strides``, ``iterations``).
        lm_sigmas: [px], lm_strides, lm_iterations: the stages of ``method="lm"``.
    """

    n_frames: int = 6
    sigmas: tuple[float, ...] = (8.0, 4.0, 2.0, 1.0, 0.5, 0.25)
    strides: tuple[int, ...] = (4, 2, 2, 1, 1, 1)
    iterations: tuple[int, ...] = (15, 12, 8, 8, 8, 8)
    rotation_scale: float = 0.01
    translation_scale: float = 0.01
    refine_joints: bool = False
    joint_prior: float = 0.02
    joint_weight: float = 0.01
    margin: int = 24
    click_tolerance: float = 8.0
    method: str = "lm"
    lm_sigmas: tuple[float, ...] = (8.0, 4.0, 2.0, 1.0, 0.5)
    lm_strides: tuple[int, ...] = (4, 2, 1, 1, 1)
    lm_iterations: tuple[int, ...] = (10, 10, 10, 10, 6)


@dataclass(frozen=True)
class MaskFrames:
    """The mask frames of one camera matched to joint positions.

    Attributes:
        camera: the :class:`~actuatorlab.sim.camera.Camera`.
        logs: (N,) log name of each frame; time: (N,) [s] frame times.
        masks: (N, H, W) bool observed masks.
        qpos: (N, nq) [rad or m] joint positions from the logs at the frame times.
        joints: qpos addresses of the joints that the logs measure (the others stay 0).
    """

    camera: Camera
    logs: tuple[str, ...]
    time: np.ndarray
    masks: np.ndarray = field(repr=False)
    qpos: np.ndarray = field(repr=False)
    joints: tuple[int, ...]


@dataclass(frozen=True)
class HandEyeResult:
    """Result of :func:`calibrate_camera` (arrays in numpy).

    Attributes:
        camera: camera name.
        camera_from_base: (4, 4) the calibrated transform; initial: (4, 4) the initial one.
        iou_before, iou_after: mean soft IoU (finest sigma, whole image) over the frames.
        twist_std: (6,) [rad, rad, rad, m, m, m] Gauss-Newton standard deviation of the twist.
        joint_corrections: (N, n_joints) [rad] per-frame corrections (zeros without refinement).
        frames: (log, time [s]) of the frames used.
        wall_s: [s] wall time of the calibration.
    """

    camera: str
    camera_from_base: np.ndarray
    initial: np.ndarray
    iou_before: float
    iou_after: float
    twist_std: np.ndarray
    joint_corrections: np.ndarray
    frames: tuple[tuple[str, float], ...]
    wall_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"camera": self.camera, "camera_from_base": np.round(self.camera_from_base, 9).tolist(),
                "initial": np.round(self.initial, 9).tolist(), "soft_iou_before": round(self.iou_before, 6),
                "soft_iou_after": round(self.iou_after, 6),
                "rotation_std_deg": round(float(np.degrees(np.linalg.norm(self.twist_std[:3]))), 6),
                "translation_std_mm": round(float(1e3 * np.linalg.norm(self.twist_std[3:])), 6),
                "joint_corrections_rms_deg": round(float(np.degrees(np.sqrt(np.mean(self.joint_corrections ** 2)))), 6),
                "frames": [[log, round(t, 6)] for log, t in self.frames], "wall_s": round(self.wall_s, 3)}


def pose_error(T_est: np.ndarray, T_true: np.ndarray) -> tuple[float, float]:
    """(camera position error [mm], rotation error [deg]) between two camera-from-base transforms."""
    c_est = -T_est[:3, :3].T @ T_est[:3, 3]
    c_true = -T_true[:3, :3].T @ T_true[:3, 3]
    dR = T_est[:3, :3] @ T_true[:3, :3].T
    ang = np.arccos(np.clip((np.trace(dR) - 1.0) / 2.0, -1.0, 1.0))
    return float(1e3 * np.linalg.norm(c_est - c_true)), float(np.degrees(ang))


def _log_qpos(traj: Trajectory, rm: RobotMeshes, nq: int, t: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    q = np.zeros((len(t), nq))
    adr = []
    for k, name in enumerate(rm.joints):
        ch = f"position/{name}"
        if ch in traj.data:
            q[:, k] = np.interp(t, traj.time, traj.data[ch])
            adr.append(k)
    if not adr:
        raise DataError(traj.path or traj.name, f"no position/<joint> channel of the robot's joints ({', '.join(rm.joints)})")
    return q, tuple(adr)


def read_mask_archive(path: Path, camera: Camera, traj: Trajectory) -> tuple[np.ndarray, np.ndarray]:
    """((F,) [s] frame times, (F, H, W) bool masks) of ``camera`` in the archive ``path`` of log
    ``traj``; errors name the file: arrays missing, masks of another size than the camera declares,
    frames outside the log's time."""
    with np.load(path) as z:
        if f"masks_{camera.name}" not in z or f"time_{camera.name}" not in z:
            raise DataError(path, f"no arrays time_{camera.name} and masks_{camera.name}")
        t = np.asarray(z[f"time_{camera.name}"], dtype=np.float64)
        m = np.asarray(z[f"masks_{camera.name}"]) > 0
    if m.ndim != 3 or m.shape[1:] != (camera.height, camera.width):
        raise DataError(path, f"masks_{camera.name} are {m.shape[-1]} x {m.shape[-2]} px (width x height) but "
                              f"the camera file declares {camera.width} x {camera.height}")
    if len(t) != len(m):
        raise DataError(path, f"time_{camera.name} has {len(t)} frames, masks_{camera.name} {len(m)}")
    bad = np.flatnonzero((t < traj.time[0]) | (t > traj.time[-1]) | ~np.isfinite(t))
    if bad.size:
        raise DataError(path, f"mask frame {int(bad[0])} at t = {t[bad[0]]:.4g} s has no matching log time "
                              f"(log {traj.name} covers {traj.time[0]:.4g}-{traj.time[-1]:.4g} s)")
    return t, m


def load_mask_frames(logs: list[Trajectory], masks_dir: str | Path, camera: Camera, rm: RobotMeshes) -> MaskFrames:
    """Match ``masks_dir/NAME.npz`` (``time_<cam>``, ``masks_<cam>``) to each log ``NAME``; errors
    name the file: masks of another size than the camera declares, frames outside the log's time."""
    masks_dir = Path(masks_dir)
    names, times, masks, qs = [], [], [], []
    adr: tuple[int, ...] = ()
    for traj in logs:
        path = masks_dir / f"{traj.name}.npz"
        if not path.exists():
            continue
        t, m = read_mask_archive(path, camera, traj)
        q, adr = _log_qpos(traj, rm, len(rm.joints), t)
        names += [traj.name] * len(t)
        times.append(t)
        masks.append(m)
        qs.append(q)
    if not names:
        raise DataError(masks_dir, f"no NAME.npz mask file matches a log ({', '.join(t.name for t in logs[:5])}...)")
    return MaskFrames(camera, tuple(names), np.concatenate(times), np.concatenate(masks), np.concatenate(qs), adr)


def _select(frames: MaskFrames, n: int) -> MaskFrames:
    idx = np.unique(np.round(np.linspace(0, len(frames.time) - 1, min(n, len(frames.time)))).astype(int))
    return MaskFrames(frames.camera, tuple(frames.logs[i] for i in idx), frames.time[idx], frames.masks[idx],
                      frames.qpos[idx], frames.joints)


def _crops(masks: np.ndarray, margin: int, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Per frame a common-size window of pixel centres around the mask's robust extent:
    ((N, P, 2) [px] pixel centres, (N, P) observed values)."""
    N, H, W = masks.shape
    boxes = []
    for m in masks:
        ii, jj = np.nonzero(m)
        if len(ii) == 0:
            boxes.append((0, H, 0, W))
            continue
        i0, i1 = np.percentile(ii, [1, 99]).astype(int)
        j0, j1 = np.percentile(jj, [1, 99]).astype(int)
        boxes.append((max(i0 - margin, 0), min(i1 + margin + 1, H), max(j0 - margin, 0), min(j1 + margin + 1, W)))
    h = max(b[1] - b[0] for b in boxes)
    w = max(b[3] - b[2] for b in boxes)
    pix, obs = [], []
    for m, (i0, _, j0, _) in zip(masks, boxes):
        i0, j0 = min(i0, H - h), min(j0, W - w)
        ii, jj = np.mgrid[i0:i0 + h:stride, j0:j0 + w:stride]
        pix.append(np.stack([jj.ravel() + 0.5, ii.ravel() + 0.5], 1))
        obs.append(m[ii.ravel(), jj.ravel()])
    return np.stack(pix).astype(np.float32), np.stack(obs).astype(np.float32)


def _pnp(cam: Camera, X: np.ndarray, uv: np.ndarray, tol: float) -> list[np.ndarray]:
    """Camera-from-base candidates that reproject the 3 points ``X`` (3, 3) [m] to ``uv`` (3, 2) [px]
    within ``tol`` (RMS), from starts on a sphere around them."""
    spread3 = float(np.linalg.norm(X - X.mean(0), axis=1).mean())
    spread2 = float(np.linalg.norm(uv - uv.mean(0), axis=1).mean())
    dist = max(cam.fx * spread3 / max(spread2, 1e-6), 0.05)
    Xj, uvj = jnp.asarray(X, jnp.float32), jnp.asarray(uv, jnp.float32)

    def res(xi, T0):
        p, Xc = project(cam, se3_exp(xi) @ T0, Xj)
        return jnp.concatenate([(p - uvj).ravel(), 10.0 * jax.nn.relu(0.01 - Xc[:, 2])])

    @jax.jit
    def solve(T0):
        def body(xi, _):
            r = res(xi, T0)
            J = jax.jacfwd(res)(xi, T0)
            return xi - jnp.linalg.solve(J.T @ J + 1e-3 * jnp.eye(6, dtype=J.dtype), J.T @ r), None
        xi, _ = jax.lax.scan(body, jnp.zeros(6, jnp.float32), None, length=40)
        r = res(xi, T0)
        return se3_exp(xi) @ T0, jnp.sqrt(jnp.mean(r[:6] ** 2)), jnp.min(project(cam, se3_exp(xi) @ T0, Xj)[1][:, 2])

    centre = X.mean(0)
    out = []
    for el in (-0.3, 0.3, 0.9, 1.4):
        for az in np.linspace(-np.pi, np.pi, 8, endpoint=False):
            eye = centre + dist * np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
            z = (centre - eye) / np.linalg.norm(centre - eye)
            x = np.cross(z, [0.0, 0.0, 1.0])
            x /= np.linalg.norm(x)
            R = np.stack([x, np.cross(z, x), z])
            T0 = np.eye(4, dtype=np.float32)
            T0[:3, :3], T0[:3, 3] = R, -R @ eye
            T, rms, zmin = solve(jnp.asarray(T0))
            if float(rms) < tol and float(zmin) > 0:
                out.append(np.asarray(T, dtype=np.float64))
    return out


def initial_pose(frames: MaskFrames, rm: RobotMeshes, tol: float = 8.0) -> np.ndarray:
    """The camera's initial camera-from-base transform: the camera file's, or from its three clicks."""
    cam = frames.camera
    if cam.camera_from_base is not None:
        return np.asarray(cam.camera_from_base, dtype=np.float64)
    if len(cam.clicks) < 3:
        raise DataError(None, f"camera {cam.name!r}: neither camera_from_base nor three clicks in the camera file")
    X, uv = [], []
    for c in cam.clicks[:3]:
        hit = [i for i, (lg, t) in enumerate(zip(frames.logs, frames.time)) if lg == c.log and abs(t - c.time) < 1e-6]
        if not hit:
            raise DataError(None, f"camera {cam.name!r}: the clicked frame ({c.log} at {c.time} s) is not among "
                                  f"the mask frames of the given logs")
        q = jnp.asarray(frames.qpos[hit[0]])
        X.append(np.asarray(body_point(rm, q, rm.body_id(c.body), jnp.asarray(c.point))))
        uv.append(c.pixel)
    cands = _pnp(cam, np.array(X), np.array(uv), tol)
    if not cands:
        raise DataError(None, f"camera {cam.name!r}: no camera pose reprojects the three clicks within {tol} px")
    i = hit[0]
    pix = pixel_centres(cam.width, cam.height)
    obs = frames.masks[i].ravel().astype(np.float32)
    q = jnp.asarray(frames.qpos[i], jnp.float32)
    iou = jax.jit(lambda T: soft_iou(soft_silhouette(rm, cam, T, q, 0.5, pix), obs))
    ious = [float(iou(jnp.asarray(T, jnp.float32))) for T in cands]
    return cands[int(np.argmax(ious))]


def _mean_iou(rm, cam, T, qpos, masks, sigma) -> float:
    pix = pixel_centres(cam.width, cam.height)
    f = jax.jit(lambda T, q, m: soft_iou(soft_silhouette(rm, cam, T, q, sigma, pix), m))
    return float(np.mean([float(f(jnp.asarray(T, jnp.float32), jnp.asarray(q, jnp.float32),
                                  jnp.asarray(m.ravel(), jnp.float32))) for q, m in zip(qpos, masks)]))


def _lbfgs(sel: MaskFrames, rm: RobotMeshes, T0, cfg: HandEyeConfig) -> tuple[Any, Any]:
    """Stages of L-BFGS on ``1 - mean soft IoU`` (+ joint penalty): (T (4, 4), dq (N, n_joints) [rad])."""
    cam = sel.camera
    scale = jnp.array([cfg.rotation_scale] * 3 + [cfg.translation_scale] * 3, jnp.float32)
    jidx = jnp.asarray(sel.joints)
    q_log = jnp.asarray(sel.qpos, jnp.float32)
    params = {"xi": jnp.zeros(6, jnp.float32), "dq": jnp.zeros((len(sel.time), len(sel.joints)), jnp.float32)}

    def qpos_of(p):
        return q_log.at[:, jidx].add((p["dq"] * cfg.joint_prior).astype(q_log.dtype))

    def loss(p, pix, obs, sigma):
        T = se3_exp(p["xi"] * scale) @ T0
        ious = jax.vmap(lambda q, px, m: soft_iou(soft_silhouette(rm, cam, T, q, sigma, px), m))(qpos_of(p), pix, obs)
        return 1.0 - jnp.mean(ious) + cfg.joint_weight * jnp.mean(p["dq"] ** 2)

    free = {"xi": jnp.ones(6, jnp.float32), "dq": jnp.full_like(params["dq"], float(cfg.refine_joints))}
    opt = optax.lbfgs(linesearch=optax.scale_by_zoom_linesearch(max_linesearch_steps=6))

    @jax.jit
    def step(p, s, pix, obs, sigma):  # one compilation per crop size, shared by the stages
        def f(p):
            return loss(jax.tree_util.tree_map(lambda a, b: a * b, p, free), pix, obs, sigma)
        v, g = optax.value_and_grad_from_state(f)(p, state=s)
        u, s = opt.update(g, s, p, value=v, grad=g, value_fn=f)
        return optax.apply_updates(p, u), s

    for sigma, stride, iters in zip(cfg.sigmas, cfg.strides, cfg.iterations):
        pix, obs = _crops(sel.masks, cfg.margin, stride)
        state = opt.init(params)
        for _ in range(iters):
            params, state = step(params, state, pix, obs, jnp.float32(sigma))
    return se3_exp(params["xi"] * scale) @ T0, params["dq"] * cfg.joint_prior


def _gn_covariance(rm: RobotMeshes, cam: Camera, T, q_fin, pix, obs, sig: float) -> np.ndarray:
    """(6, 6) Gauss-Newton covariance of the twist, soft IoU pixel residuals ``I - M`` (method soft_iou)."""
    def resid(xi):
        Tx = se3_exp(xi) @ T
        return jax.vmap(lambda q, px, m: soft_silhouette(rm, cam, Tx, q, sig, px) - m)(q_fin, pix, obs).ravel()

    r = resid(jnp.zeros(6, jnp.float32))
    J = jax.jacfwd(resid)(jnp.zeros(6, jnp.float32))
    s2 = float(r @ r) / max(r.size - 6, 1)
    return s2 * np.linalg.inv(np.asarray(J.T @ J, dtype=np.float64) + 1e-12 * np.eye(6))


def _lm_system(r: np.ndarray, J_xi: np.ndarray, J_dq: np.ndarray | None, dq: np.ndarray,
               w: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Normal equations (A, b) and cost of the stacked pixel residuals ``r`` (N, P) with Jacobians
    ``J_xi`` (N, P, 6), ``J_dq`` (N, P, nj) (per frame: block-diagonal in dq) and the prior
    residuals ``w dq``."""
    N = r.shape[0]
    Jx = J_xi.reshape(-1, 6)
    if J_dq is None:
        return Jx.T @ Jx, Jx.T @ r.ravel(), float(r.ravel() @ r.ravel())
    nj = J_dq.shape[2]
    n = 6 + N * nj
    A = np.zeros((n, n))
    b = np.zeros(n)
    A[:6, :6], b[:6] = Jx.T @ Jx, Jx.T @ r.ravel()
    for k in range(N):
        sl = slice(6 + k * nj, 6 + (k + 1) * nj)
        A[:6, sl] = J_xi[k].T @ J_dq[k]
        A[sl, :6] = A[:6, sl].T
        A[sl, sl] = J_dq[k].T @ J_dq[k] + w * w * np.eye(nj)
        b[sl] = J_dq[k].T @ r[k] + w * w * dq[k]
    return A, b, float(r.ravel() @ r.ravel() + w * w * np.sum(dq * dq))


def _lm(sel: MaskFrames, rm: RobotMeshes, T0, cfg: HandEyeConfig) -> tuple[Any, np.ndarray, np.ndarray]:
    """Levenberg-Marquardt stages on edge-profile pixel residuals (module docstring, step 3):
    (T (4, 4), dq (N, n_joints) [rad], twist covariance (6, 6) at the finest stage)."""
    cam = sel.camera
    jidx = jnp.asarray(sel.joints)

    def frame(xi, dq, T, q, px, tgt, sigma):
        return soft_silhouette(rm, cam, se3_exp(xi) @ T, q.at[jidx].add(dq), sigma, px, "min") - tgt

    axes = (None, 0, None, 0, 0, 0, None)
    res = jax.jit(jax.vmap(frame, in_axes=axes))
    jac = jax.jit(jax.vmap(jax.jacfwd(frame, argnums=(0, 1) if cfg.refine_joints else 0), in_axes=axes))
    z = jnp.zeros(6, jnp.float32)

    def system(T, dq, args, w):
        r = np.asarray(res(z, jnp.asarray(dq, jnp.float32), T, *args), np.float64)
        Js = jac(z, jnp.asarray(dq, jnp.float32), T, *args)
        J_xi, J_dq = Js if cfg.refine_joints else (Js, None)
        return r, _lm_system(r, np.asarray(J_xi, np.float64), None if J_dq is None else np.asarray(J_dq, np.float64),
                             dq, w)

    q = jnp.asarray(sel.qpos, jnp.float32)
    T = jnp.asarray(T0, jnp.float32)
    dq = np.zeros((len(sel.time), len(sel.joints)))
    w = 0.0
    args: tuple = ()
    for sigma, stride, iters in zip(cfg.lm_sigmas, cfg.lm_strides, cfg.lm_iterations):
        pix, _ = _crops(sel.masks, cfg.margin, stride)
        ij = (pix - 0.5).astype(int)
        tgt = np.stack([mask_edge_profile(m, sigma)[c[:, 1], c[:, 0]] for m, c in zip(sel.masks, ij)])
        args = (q, jnp.asarray(pix), jnp.asarray(tgt, jnp.float32), jnp.float32(sigma))
        lam = 1e-3
        r = np.asarray(res(z, jnp.asarray(dq, jnp.float32), T, *args), np.float64)
        w = float(np.sqrt(np.mean(r * r))) / cfg.joint_prior  # prior residuals w dq: module docstring
        for _ in range(iters):
            _, (A, b, c) = system(T, dq, args, w)
            for _try in range(8):
                d = -np.linalg.solve(A + lam * np.diag(np.diag(A)), b)
                Tn = se3_exp(jnp.asarray(d[:6], jnp.float32)) @ T
                dqn = dq + d[6:].reshape(dq.shape) if cfg.refine_joints else dq
                rn = np.asarray(res(z, jnp.asarray(dqn, jnp.float32), Tn, *args), np.float64)
                if float(rn.ravel() @ rn.ravel()) + w * w * float(np.sum(dqn * dqn)) < c:
                    T, dq, lam = Tn, dqn, max(lam / 3.0, 1e-7)
                    break
                lam *= 4.0
            else:
                break  # no decrease along the damped steps: converged at this sigma
    r, (A, _, _) = system(T, dq, args, w)
    cov = float(r.ravel() @ r.ravel()) / max(r.size - 6, 1) * np.linalg.inv(A + 1e-12 * np.eye(len(A)))[:6, :6]
    return T, dq, cov


def calibrate_camera(frames: MaskFrames, rm: RobotMeshes, config: HandEyeConfig = HandEyeConfig()) -> HandEyeResult:
    """Calibrate one camera from its mask frames (module docstring); never reads any ground truth."""
    t_start = _time.perf_counter()
    cfg = config
    if cfg.method not in ("lm", "soft_iou"):
        raise ValueError(f"HandEyeConfig.method must be 'lm' or 'soft_iou', got {cfg.method!r}")
    cam = frames.camera
    sel = _select(frames, cfg.n_frames)
    T0 = jnp.asarray(initial_pose(sel if cam.camera_from_base is not None else frames, rm, cfg.click_tolerance),
                     jnp.float32)
    sig = cfg.sigmas[-1]
    if cfg.method == "lm":
        T, dq, cov = _lm(sel, rm, T0, cfg)
    else:
        T, dq = _lbfgs(sel, rm, T0, cfg)
        pix, obs = _crops(sel.masks, cfg.margin, 1)
        cov = _gn_covariance(rm, cam, T, jnp.asarray(sel.qpos, jnp.float32).at[:, jnp.asarray(sel.joints)].add(dq),
                             pix, obs, sig)
    q_fin = np.array(sel.qpos)
    q_fin[:, list(sel.joints)] += np.asarray(dq, np.float64)
    return HandEyeResult(
        camera=cam.name, camera_from_base=np.asarray(T, np.float64), initial=np.asarray(T0, np.float64),
        iou_before=_mean_iou(rm, cam, T0, sel.qpos, sel.masks, sig),
        iou_after=_mean_iou(rm, cam, T, q_fin, sel.masks, sig),
        twist_std=np.sqrt(np.clip(np.diag(cov), 0.0, None)),
        joint_corrections=np.asarray(dq, np.float64),
        frames=tuple((lg, float(t)) for lg, t in zip(sel.logs, sel.time)), wall_s=_time.perf_counter() - t_start)

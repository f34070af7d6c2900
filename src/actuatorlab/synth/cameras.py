"""Cameras in the virtual hardware: binary robot masks beside the logs, with realistic defects.

The observed masks come from an exact polygon rasteriser of the *full* visual meshes (every
triangle projected with the pinhole model of :mod:`actuatorlab.sim.camera`; a pixel is set when its
centre lies in any projected triangle), not from the soft renderer that the calibration optimises
(:mod:`actuatorlab.sim.silhouette`, decimated convex hulls). MuJoCo's segmentation rendering would
be a third renderer but needs an OpenGL context, which a headless machine does not have.

Defects, drawn per frame from the dataset's seed (:class:`MaskDefects`): the frame is taken at its
recorded time plus a timing jitter (so the mask and the joint log disagree slightly), boundary
pixels are flipped at random (edge noise), a few discs of the robot are erased (missing blobs) and a
few ellipses are added anywhere (extra blobs: other objects segmented as the robot).

Files (docs/format.md, "Cameras and masks")::

    DIR/masks/cameras.json   camera file: intrinsics, resolution, three clicked points per camera
    DIR/masks/NAME.npz       per log: time_<cam> (F,) [s] and masks_<cam> (F, H, W) uint8 0/1

The hidden camera-from-base transforms are written only into the dataset card's ground truth
(``dataset.json``: ``ground_truth.cameras``), which the calibration never reads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from ..sim.camera import Camera, Click, write_cameras

__all__ = ["MaskDefects", "CameraRig", "look_at", "rasterize", "mesh_triangles", "draw_rig", "record_masks",
           "click_cameras", "record_cameras", "CLICK_POINTS"]

#: (body, point in the body frame [m]) of the three points a user clicks: base, elbow, gripper.
CLICK_POINTS: tuple[tuple[str, tuple[float, float, float]], ...] = (
    ("link1", (0.0, 0.0, 0.0)), ("link4", (0.0, 0.0, 0.0)), ("end_effector_link", (0.0, 0.0, 0.0)))


@dataclass(frozen=True)
class MaskDefects:
    """Defects of the observed masks.

    Attributes:
        time_jitter: [s] std of the frame time against the joint log (render at t + N(0, jitter)).
        edge_flip: probability that a boundary pixel is flipped.
        missing_blobs: mean number of erased discs per frame (Poisson); radius 2-5 px.
        extra_blobs: mean number of added ellipses per frame (Poisson); radii 2-6 px.
        click_noise: [px] std of the three clicked pixels.
    """

    time_jitter: float = 0.004
    edge_flip: float = 0.25
    missing_blobs: float = 0.5
    extra_blobs: float = 0.5
    click_noise: float = 2.0


@dataclass(frozen=True)
class CameraRig:
    """The cameras of a suite (nominal poses; the truth is drawn around them from the seed).

    Attributes:
        n_cameras: number of cameras (1 or 2 nominal viewpoints, cycled beyond).
        width, height: [px]; focal: [px] (fx = fy); principal point at the image centre.
        rate: [Hz] mask frame rate.
        distance: [m] nominal camera distance from the target point.
        pose_spread: [m] std of the drawn camera position and target around the nominal ones.
        defects: :class:`MaskDefects`.
    """

    n_cameras: int = 2
    width: int = 160
    height: int = 120
    focal: float = 200.0
    rate: float = 10.0
    distance: float = 0.65
    pose_spread: float = 0.03
    defects: MaskDefects = MaskDefects()


#: nominal viewing directions (azimuth, elevation) [rad] of the cameras, cycled.
_VIEWS = ((0.6, 0.45), (-1.2, 0.3))
#: [m] nominal target point of the cameras in the base frame.
_TARGET = np.array([0.15, 0.0, 0.18])


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(4, 4) camera-from-base transform of an OpenCV camera at ``eye`` looking at ``target`` (z up)."""
    z = (target - eye) / np.linalg.norm(target - eye)
    x = np.cross(z, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    R = np.stack([x, y, z])
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, -R @ eye
    return T


def draw_rig(rig: CameraRig, rng: np.random.Generator) -> list[tuple[Camera, np.ndarray]]:
    """The cameras (intrinsics, no pose) and their hidden (4, 4) camera-from-base transforms."""
    out = []
    for k in range(rig.n_cameras):
        az, el = _VIEWS[k % len(_VIEWS)]
        target = _TARGET + rng.normal(0.0, rig.pose_spread, 3)
        eye = _TARGET + rig.distance * np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        eye = eye + rng.normal(0.0, rig.pose_spread, 3)
        cam = Camera(f"cam{k}", rig.width, rig.height, rig.focal, rig.focal, rig.width / 2, rig.height / 2)
        out.append((cam, look_at(eye, target)))
    return out


def mesh_triangles(model: mujoco.MjModel, data: mujoco.MjData, group: int = 2) -> np.ndarray:
    """(N, 3, 3) [m] every triangle of the visual meshes of ``group`` in the base frame (after
    ``mj_kinematics`` on ``data``)."""
    tris = []
    for g in range(model.ngeom):
        if int(model.geom_type[g]) != int(mujoco.mjtGeom.mjGEOM_MESH) or model.geom_group[g] != group:
            continue
        mid = model.geom_dataid[g]
        v = model.mesh_vert[model.mesh_vertadr[mid]:model.mesh_vertadr[mid] + model.mesh_vertnum[mid]]
        f = model.mesh_face[model.mesh_faceadr[mid]:model.mesh_faceadr[mid] + model.mesh_facenum[mid]]
        w = v.astype(np.float64) @ data.geom_xmat[g].reshape(3, 3).T + data.geom_xpos[g]
        tris.append(w[f])
    return np.concatenate(tris)


def rasterize(uv: np.ndarray, width: int, height: int) -> np.ndarray:
    """Exact rasteriser: (N, 3, 2) [px] projected triangles -> (height, width) bool mask, True where a
    pixel centre lies in (or on the edge of) any triangle. Triangles are bucketed by the size of their
    pixel bounding box so every bucket is one vectorised test."""
    mask = np.zeros((height, width), dtype=bool)
    j0 = np.maximum(np.ceil(uv[..., 0].min(1) - 0.5), 0).astype(int)
    j1 = np.minimum(np.floor(uv[..., 0].max(1) - 0.5), width - 1).astype(int)
    i0 = np.maximum(np.ceil(uv[..., 1].min(1) - 0.5), 0).astype(int)
    i1 = np.minimum(np.floor(uv[..., 1].max(1) - 0.5), height - 1).astype(int)
    keep = (j1 >= j0) & (i1 >= i0)
    uv, j0, j1, i0, i1 = uv[keep], j0[keep], j1[keep], i0[keep], i1[keep]
    size = np.maximum(j1 - j0, i1 - i0) + 1
    lo = 0
    k = 1
    while lo < max(width, height):
        sel = (size > lo) & (size <= k)
        if sel.any():
            di, dj = np.mgrid[0:k, 0:k]
            jj = j0[sel, None] + dj.ravel()
            ii = i0[sel, None] + di.ravel()
            ok = (jj <= j1[sel, None]) & (ii <= i1[sel, None])
            px, py = jj + 0.5, ii + 0.5
            t = uv[sel]
            cr = []
            for a in range(3):
                s, e = t[:, a], t[:, (a + 1) % 3] - t[:, a]
                cr.append(e[:, 0, None] * (py - s[:, 1, None]) - e[:, 1, None] * (px - s[:, 0, None]))
            inside = ok & (((cr[0] >= 0) & (cr[1] >= 0) & (cr[2] >= 0)) | ((cr[0] <= 0) & (cr[1] <= 0) & (cr[2] <= 0)))
            mask[ii[inside], jj[inside]] = True
        lo, k = k, 2 * k
    return mask


def _project_np(cam: Camera, T: np.ndarray, X: np.ndarray) -> np.ndarray:
    Xc = X @ T[:3, :3].T + T[:3, 3]
    return Xc[..., :2] / Xc[..., 2:3] * [cam.fx, cam.fy] + [cam.cx, cam.cy]


def _disc(h: int, w: int, ci: float, cj: float, ri: float, rj: float) -> np.ndarray:
    i, j = np.mgrid[0:h, 0:w]
    return ((i + 0.5 - ci) / ri) ** 2 + ((j + 0.5 - cj) / rj) ** 2 <= 1.0


def _defects(mask: np.ndarray, d: MaskDefects, rng: np.random.Generator) -> np.ndarray:
    h, w = mask.shape
    m = mask.copy()
    pad = np.pad(mask, 1, mode="edge")
    edge = ((pad[1:-1, 1:-1] != pad[:-2, 1:-1]) | (pad[1:-1, 1:-1] != pad[2:, 1:-1])
            | (pad[1:-1, 1:-1] != pad[1:-1, :-2]) | (pad[1:-1, 1:-1] != pad[1:-1, 2:]))
    m ^= edge & (rng.random(mask.shape) < d.edge_flip)
    on = np.argwhere(mask)
    for _ in range(rng.poisson(d.missing_blobs)):
        if len(on):
            ci, cj = on[rng.integers(len(on))] + 0.5
            r = rng.uniform(2.0, 5.0)
            m &= ~_disc(h, w, ci, cj, r, r)
    for _ in range(rng.poisson(d.extra_blobs)):
        m |= _disc(h, w, rng.uniform(0, h), rng.uniform(0, w), rng.uniform(2.0, 6.0), rng.uniform(2.0, 6.0))
    return m


def record_masks(model: mujoco.MjModel, joints: tuple[str, ...], time: np.ndarray, q: np.ndarray,
                 rig: list[tuple[Camera, np.ndarray]], defects: MaskDefects, rate: float,
                 rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Masks of one log: ``time`` (T,) [s] and true joint positions ``q`` (T, n) of ``joints``; the
    frames are at ``(k + 0.5) / rate`` inside the log, rendered at the jittered time (``q``
    interpolated). Returns the npz arrays {"time_<cam>": (F,), "masks_<cam>": (F, H, W) uint8}."""
    data = mujoco.MjData(model)
    adr = [model.joint(j).qposadr[0] for j in joints]
    frames = np.arange(0.5 / rate, time[-1], 1.0 / rate)
    out: dict[str, np.ndarray] = {}
    per_frame = []
    for t in frames:
        tr = float(np.clip(t + rng.normal(0.0, defects.time_jitter), time[0], time[-1]))
        data.qpos[:] = 0.0
        data.qpos[adr] = [np.interp(tr, time, q[:, k]) for k in range(len(joints))]
        mujoco.mj_kinematics(model, data)
        per_frame.append(mesh_triangles(model, data))
    for cam, T in rig:
        masks = np.stack([_defects(rasterize(_project_np(cam, T, tri), cam.width, cam.height), defects, rng)
                          for tri in per_frame]).astype(np.uint8)
        out[f"time_{cam.name}"] = frames.copy()
        out[f"masks_{cam.name}"] = masks
    return out


def click_cameras(model: mujoco.MjModel, joints: tuple[str, ...], log: str, time: np.ndarray, q: np.ndarray,
                  rig: list[tuple[Camera, np.ndarray]], defects: MaskDefects, rate: float,
                  rng: np.random.Generator) -> list[Camera]:
    """The rig's cameras with three clicked points (:data:`CLICK_POINTS`, pixel noise
    ``defects.click_noise``) in the first mask frame of ``log``."""
    data = mujoco.MjData(model)
    t = 0.5 / rate
    data.qpos[[model.joint(j).qposadr[0] for j in joints]] = [np.interp(t, time, q[:, k]) for k in range(len(joints))]
    mujoco.mj_kinematics(model, data)
    cams = []
    for cam, T in rig:
        clicks = []
        for body, p in CLICK_POINTS:
            b = model.body(body).id
            X = data.xpos[b] + data.xmat[b].reshape(3, 3) @ np.asarray(p)
            uv = _project_np(cam, T, X) + rng.normal(0.0, defects.click_noise, 2)
            clicks.append(Click(log, float(t), body, p, (round(float(uv[0]), 3), round(float(uv[1]), 3))))
        cams.append(Camera(cam.name, cam.width, cam.height, cam.fx, cam.fy, cam.cx, cam.cy, None, tuple(clicks)))
    return cams


def record_cameras(out: Path, mjcf: Path, joints: tuple[str, ...], n_cameras: int,
                   logs: dict[str, tuple[np.ndarray, np.ndarray]], split: dict[str, str], seed: int) -> dict[str, Any]:
    """Record the masks of every log (``logs``: name -> (time (T,) [s], true q (T, n) [rad])) from
    ``n_cameras`` cameras of :class:`CameraRig` into ``out/masks/`` (module docstring), the clicks in
    the first frame of the first train log (``split``: name -> split); returns the ground truth for
    the dataset card."""
    spec = CameraRig(n_cameras=n_cameras)
    click_log = min(n for n, s in split.items() if s == "train")
    model = mujoco.MjModel.from_xml_path(str(mjcf))
    rig = draw_rig(spec, np.random.default_rng([int(seed), 13]))
    (out / "masks").mkdir(parents=True, exist_ok=True)
    for k, name in enumerate(sorted(logs)):
        t, q = logs[name]
        arrays = record_masks(model, joints, t, q, rig, spec.defects, spec.rate, np.random.default_rng([int(seed), 14, k]))
        np.savez_compressed(out / "masks" / f"{name}.npz", **arrays)  # type: ignore[arg-type]
    t, q = logs[click_log]
    cams = click_cameras(model, joints, click_log, t, q, rig, spec.defects, spec.rate, np.random.default_rng([int(seed), 15]))
    write_cameras(out / "masks" / "cameras.json", cams)
    return {"files": "masks/cameras.json + masks/NAME.npz (docs/format.md)", "rig": asdict(spec),
            "camera_from_base": {c.name: np.round(T, 12).tolist() for c, T in rig}}

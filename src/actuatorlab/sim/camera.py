"""Pinhole cameras, rigid camera-from-base transforms and their se(3) twists, and the camera file.

Conventions (OpenCV): the camera frame has x right, y down, z forward (the optical axis). A point
``X_b`` of the robot's base frame is seen at ``X_c = R X_b + t`` (``T_cb = [[R, t], [0, 1]]``, the
camera-from-base transform) and projected to pixel coordinates ``u = fx X_c/Z_c + cx``,
``v = fy Y_c/Z_c + cy``. Pixel (row i, column j) covers ``[j, j+1) x [i, i+1)``; its centre is
``(j + 0.5, i + 0.5)``. A mask is a ``(height, width)`` array indexed ``[i, j]``.

A camera pose is perturbed on the left by a twist ``xi = (omega, v)`` (rotation [rad], translation
[m], both in the camera frame): ``T_cb(xi) = exp(xi^) T0`` (Barfoot, *State Estimation for
Robotics*, 2017, sec. 7.1.9, the SE(3) exponential map with the left Jacobian ``J``).

The camera file (JSON, docs/format.md "Cameras and masks")::

    {"format": "actuatorlab-cameras", "version": 1,
     "cameras": [{"name": "cam0", "width": 160, "height": 120,
                  "fx": 150.0, "fy": 150.0, "cx": 80.0, "cy": 60.0,
                  "camera_from_base": [[...4 x 4...]],            # optional initial guess
                  "clicks": [{"log": "teleop_00", "time": 0.5,     # optional: three clicked points
                              "body": "link5", "point": [0, 0, 0], "pixel": [81.2, 40.7]}]}]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from ..errors import DataError

__all__ = ["Camera", "Click", "CAMERA_FORMAT", "se3_exp", "project", "pixel_centres", "check_rigid",
           "read_cameras", "write_cameras"]

#: ``format`` tag of the camera file.
CAMERA_FORMAT = "actuatorlab-cameras"


@dataclass(frozen=True)
class Click:
    """A robot point clicked in one image (for the three-point initialisation).

    Attributes:
        log: stem of the log whose frame was clicked.
        time: [s] the mask frame's time in that log.
        body: MJCF body the point is fixed to.
        point: (3,) [m] the point in the body frame.
        pixel: (2,) [px] the clicked pixel coordinates (u, v).
    """

    log: str
    time: float
    body: str
    point: tuple[float, float, float]
    pixel: tuple[float, float]


@dataclass(frozen=True)
class Camera:
    """A pinhole camera without distortion.

    Attributes:
        name: identifier; the mask arrays of this camera are ``time_<name>`` and ``masks_<name>``.
        width, height: [px] image size.
        fx, fy: [px] focal lengths; cx, cy: [px] principal point.
        camera_from_base: (4, 4) rigid initial guess of ``T_cb`` (None: not given).
        clicks: clicked robot points (three for the initialisation; may be empty).
    """

    name: str
    width: int
    height: int
    fx: float
    fy: float
    cx: float
    cy: float
    camera_from_base: tuple[tuple[float, ...], ...] | None = None
    clicks: tuple[Click, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "width": self.width, "height": self.height, "fx": self.fx,
                             "fy": self.fy, "cx": self.cx, "cy": self.cy}
        if self.camera_from_base is not None:
            d["camera_from_base"] = [list(r) for r in self.camera_from_base]
        if self.clicks:
            d["clicks"] = [{"log": c.log, "time": c.time, "body": c.body, "point": list(c.point),
                            "pixel": list(c.pixel)} for c in self.clicks]
        return d


def _hat(w):
    z = jnp.zeros_like(w[0])
    return jnp.stack([jnp.stack([z, -w[2], w[1]]), jnp.stack([w[2], z, -w[0]]), jnp.stack([-w[1], w[0], z])])


def se3_exp(xi):
    """(6,) twist ``(omega [rad], v [m])`` -> (4, 4) ``exp(xi^)`` (Rodrigues; series below 1e-4 rad
    so the gradient at ``xi = 0`` is exact)."""
    w, v = xi[:3], xi[3:]
    th2 = jnp.sum(w * w)
    small = th2 < 1e-8
    th2s = jnp.where(small, 1.0, th2)
    th = jnp.sqrt(th2s)
    a = jnp.where(small, 1.0 - th2 / 6.0, jnp.sin(th) / th)
    b = jnp.where(small, 0.5 - th2 / 24.0, (1.0 - jnp.cos(th)) / th2s)
    c = jnp.where(small, 1.0 / 6.0 - th2 / 120.0, (th - jnp.sin(th)) / (th2s * th))
    W = _hat(w)
    eye = jnp.eye(3, dtype=xi.dtype)
    R = eye + a * W + b * (W @ W)
    J = eye + b * W + c * (W @ W)
    top = jnp.concatenate([R, (J @ v)[:, None]], axis=1)
    bottom = jnp.array([[0.0, 0.0, 0.0, 1.0]], dtype=xi.dtype)
    return jnp.concatenate([top, bottom], axis=0)


def project(cam: Camera, T_cb, X_b):
    """(..., 3) [m] base-frame points -> ((..., 2) [px] pixel coordinates, (..., 3) [m] camera frame)."""
    X_c = X_b @ T_cb[:3, :3].T + T_cb[:3, 3]
    z = X_c[..., 2:3]
    uv = X_c[..., :2] / z * jnp.array([cam.fx, cam.fy], dtype=X_c.dtype) + jnp.array([cam.cx, cam.cy],
                                                                                       dtype=X_c.dtype)
    return uv, X_c


def pixel_centres(width: int, height: int) -> np.ndarray:
    """(height * width, 2) [px] pixel centres (u, v), row-major like a mask's ``reshape(-1)``."""
    v, u = np.mgrid[0:height, 0:width]
    return np.stack([u.ravel() + 0.5, v.ravel() + 0.5], axis=1)


def check_rigid(T: Any, where: str | Path, what: str, tol: float = 1e-4) -> np.ndarray:
    """``T`` as a (4, 4) float array if it is a rigid transform (R^T R = I and det R = +1 within
    ``tol``, last row 0 0 0 1), else :class:`DataError` naming ``where`` and ``what``."""
    try:
        A = np.asarray(T, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(where, f"{what} is not a 4 x 4 array of numbers") from None
    if A.shape != (4, 4) or not np.all(np.isfinite(A)):
        raise DataError(where, f"{what} must be a finite 4 x 4 matrix, got shape {A.shape}")
    R = A[:3, :3]
    ortho = float(np.abs(R.T @ R - np.eye(3)).max())
    if ortho > tol or abs(float(np.linalg.det(R)) - 1.0) > tol or np.abs(A[3] - [0, 0, 0, 1]).max() > tol:
        raise DataError(where, f"{what} is not a rigid transform (|R^T R - I| = {ortho:.3g}, "
                               f"det R = {float(np.linalg.det(R)):.4g}, last row {A[3].tolist()})")
    return A


def _camera_from_dict(d: Any, path: Path, k: int) -> Camera:
    if not isinstance(d, dict):
        raise DataError(path, f"cameras[{k}] is not an object")
    name = str(d.get("name", f"cam{k}"))
    try:
        w, h = int(d["width"]), int(d["height"])
        fx, fy, cx, cy = (float(d[key]) for key in ("fx", "fy", "cx", "cy"))
    except (KeyError, TypeError, ValueError) as e:
        raise DataError(path, f"camera {name!r}: width, height, fx, fy, cx, cy must be numbers ({e})") from None
    if w <= 0 or h <= 0 or not (fx > 0 and fy > 0):
        raise DataError(path, f"camera {name!r}: width, height, fx and fy must be positive")
    T = d.get("camera_from_base")
    T_t = None
    if T is not None:
        T_t = tuple(tuple(float(x) for x in r) for r in check_rigid(T, path, f"camera {name!r} camera_from_base"))
    clicks = []
    for c in d.get("clicks", []):
        try:
            clicks.append(Click(str(c["log"]), float(c["time"]), str(c["body"]),
                                tuple(float(x) for x in c["point"]), tuple(float(x) for x in c["pixel"])))  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(path, f"camera {name!r}: a click needs log, time, body, point, pixel ({e})") from None
    return Camera(name, w, h, fx, fy, cx, cy, T_t, tuple(clicks))


def read_cameras(path: str | Path) -> list[Camera]:
    """Read a camera file (see the module docstring); errors name the file and the problem."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(path, f"cannot read the camera file ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != CAMERA_FORMAT:
        raise DataError(path, f"not a camera file (format must be {CAMERA_FORMAT!r})")
    cams = doc.get("cameras")
    if not isinstance(cams, list) or not cams:
        raise DataError(path, "no cameras listed")
    return [_camera_from_dict(d, path, k) for k, d in enumerate(cams)]


def write_cameras(path: str | Path, cameras: list[Camera]) -> None:
    """Write ``cameras`` as a camera file."""
    doc = {"format": CAMERA_FORMAT, "version": 1, "cameras": [c.to_dict() for c in cameras]}
    Path(path).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")

"""Typed job of the camera command: calibrate-camera (see :mod:`.identify_jobs`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..identify.handeye import HandEyeConfig, calibrate_camera, load_mask_frames
from ..logs import load_logs
from ..robots import load_robot
from ..sim.camera import read_cameras
from ..sim.silhouette import load_meshes
from .identify_jobs import Result


@dataclasses.dataclass(frozen=True)
class CalibrateCameraJob:
    """Fields: logs (log files or folders; each NAME is matched to MASKS/NAME.npz), masks (folder
    with cameras.json and NAME.npz, docs/format.md "Cameras and masks"), robot (robot name or config
    file), out (folder for camera_calibration.json; none: print only), n_frames (frames used, 6),
    refine_joints (also refine per-frame joint angles, regularised; false)."""

    logs: tuple[Path, ...]
    masks: Path
    robot: str = "open_manipulator_x"
    out: Path | None = None
    n_frames: int = 6
    refine_joints: bool = False


def run_calibrate_camera_job(job: CalibrateCameraJob) -> Result:
    """Calibrate every camera of ``masks/cameras.json`` (:func:`actuatorlab.identify.handeye.calibrate_camera`);
    ``record``: {"cameras": [result dict per camera]}; written to ``out/camera_calibration.json``."""
    logs = load_logs(list(job.logs))
    rm = load_meshes(load_robot(job.robot).model())  # with the config's mechanisms (a gripper's crank)
    cfg = HandEyeConfig(n_frames=job.n_frames, refine_joints=job.refine_joints)
    doc = {"robot": job.robot, "cameras": [calibrate_camera(load_mask_frames(logs, job.masks, cam, rm), rm, cfg).to_dict()
                                           for cam in read_cameras(Path(job.masks) / "cameras.json")]}
    if job.out is not None:
        Path(job.out).mkdir(parents=True, exist_ok=True)
        (Path(job.out) / "camera_calibration.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return Result(doc)

"""Hand-eye calibration from silhouettes on the virtual OM-X with cameras (issue 45, items 1-3).

One command (from the repo root)::

    python bench/visual.py                          # synth suite "cameras" (seed 0), both cameras
    python bench/visual.py --seed 1 --cameras 1 --out visual.json

Writes the dataset (``actuatorlab synth --suite cameras``) into a temporary folder, then for every
camera runs :func:`actuatorlab.identify.handeye.calibrate_camera` on the train logs from the
three-click initialisation, twice: the camera twist alone, and jointly with regularised per-frame
joint corrections. Reported per camera and mode: soft IoU (finest sigma, whole image) before and
after, the camera position error [mm] and rotation error [deg] against the hidden truth (read from
the dataset card only here, never by the calibration), the Gauss-Newton standard deviation, wall
and CPU time. Targets (issue 45): <= 5 mm and <= 0.5 deg with 6 frames. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cameras", type=int, default=2, help="calibrate the first N cameras")
    ap.add_argument("--frames", type=int, default=6)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)

    from actuatorlab.identify.handeye import HandEyeConfig, calibrate_camera, initial_pose, load_mask_frames, pose_error
    from actuatorlab.logs import load_logs
    from actuatorlab.robots import load_robot
    from actuatorlab.sim.camera import read_cameras
    from actuatorlab.sim.silhouette import load_meshes
    from actuatorlab.synth import run_synth

    load0 = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "ds"
        t0, c0 = time.perf_counter(), time.process_time()
        run_synth("open_manipulator_x", "cameras", ds, seed=a.seed)
        synth_s, synth_cpu = time.perf_counter() - t0, time.process_time() - c0
        truth = json.loads((ds / "dataset.json").read_text())["ground_truth"]["cameras"]["camera_from_base"]
        rm = load_meshes(load_robot("open_manipulator_x").mjcf_path)
        logs = load_logs(ds / "train")
        for cam in read_cameras(ds / "masks" / "cameras.json")[:a.cameras]:
            frames = load_mask_frames(logs, ds / "masks", cam, rm)
            T_true = np.array(truth[cam.name])
            init_mm, init_deg = pose_error(initial_pose(frames, rm), T_true)
            for refine in (False, True):
                t0, c0 = time.perf_counter(), time.process_time()
                r = calibrate_camera(frames, rm, HandEyeConfig(n_frames=a.frames, refine_joints=refine))
                mm, deg = pose_error(r.camera_from_base, T_true)
                d = r.to_dict()
                row = {"camera": cam.name, "mode": "joint_refinement" if refine else "hand_eye",
                       "frames": len(r.frames), "soft_iou_before": d["soft_iou_before"],
                       "soft_iou_after": d["soft_iou_after"], "init_translation_err_mm": round(init_mm, 3),
                       "init_rotation_err_deg": round(init_deg, 4), "translation_err_mm": round(mm, 3),
                       "rotation_err_deg": round(deg, 4), "translation_std_mm": d["translation_std_mm"],
                       "rotation_std_deg": d["rotation_std_deg"],
                       "joint_corrections_rms_deg": d["joint_corrections_rms_deg"],
                       "meets_target": bool(mm <= 5.0 and deg <= 0.5),
                       "wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - c0, 2)}
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    summary = {"bench": "visual", "seed": a.seed, "target": "<= 5 mm and <= 0.5 deg with 6 frames",
               "synth_wall_s": round(synth_s, 2), "synth_cpu_s": round(synth_cpu, 2), "rows": rows,
               "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}
    emit(summary, a.out)
    return summary


if __name__ == "__main__":
    main()

"""Image-supervised actuators on the virtual OM-X with cameras (issue 45, item 4).

One command (from the repo root)::

    python bench/visual_actuator.py                       # seed 0, joint2 withheld, calibrated cameras
    python bench/visual_actuator.py --camera truth --joint joint3 --out va.json
    python bench/visual_actuator.py --gripper             # the gripper servo withheld (jaw from images)

Writes the dataset (``actuatorlab synth --suite cameras``: five 4 s logs, two 160 x 120 cameras
at 10 frames/s, masks with defects) into a temporary folder. The cameras are calibrated from the
train logs' masks (:func:`actuatorlab.identify.handeye.calibrate_camera`, the three-click start;
``--camera truth`` uses the hidden transforms instead, to separate the actuator from the camera
error). Then the same gradient fit through MJX (:func:`actuatorlab.identify.arm_grad.fit_arm_grad`,
the config's model, one parameter set per joint, same curriculum and steps) runs twice on the
train logs:

* **encoder**: every joint's encoder, no images;
* **images**: ``--joint``'s encoder withheld (its ``position/`` and ``velocity/`` channels
  removed), the masks of both cameras in the loss (:mod:`actuatorlab.identify.images`).

Both are judged on the test and validation logs, every encoder present (never used in either
fit): per-joint rollout MAE over windows of 100 and 300 control steps, next to the nominal
parameters. Target (issue 45): the withheld joint's MAE with images <= 1.5x its MAE with the
encoder. Ends with one JSON line.

``--learned ARCH`` (e.g. ``residual:mlp``, ``mlp``) also trains a learned whole-robot actuator
twice through MJX (:func:`actuatorlab.learned.arm_train.train_arm`), each warm-started from the
matching analytic fit above as its teacher (and, for ``residual:``, its base): **learned-encoder**
on the train logs, **learned-images** on the train logs with ``--joint``'s encoder withheld and
the masks in the loss (that joint restarting from the teacher's continuous rollout,
:mod:`actuatorlab.learned.arm_images`). The checkpoint is chosen on the last train log (held out
of the training windows; never a test or validation log), at a small budget for 2 CPU cores
(``--learned-steps``, ``--learned-curriculum``). Same table and ratio::

    python bench/visual_actuator.py --learned residual:mlp --out va_learned.json

``--gripper`` (issue 45, item 5) uses ``synth --suite cameras_gripper`` (the same arm commands, the
gripper servo simulated and commanded, its crank-slider moving the jaws in the masks;
:mod:`actuatorlab.synth.gripper`) and the model ``open_manipulator_x_crank`` (the jaw follows the
servo through MuJoCo's quartic joint equality), and withholds the gripper servo's encoder
(``--joint`` defaults to ``gripper_crank``): only the masks tell the fit where the jaw is. The
cameras are calibrated without that encoder too (the servo's command stands in for its angle
when the calibration renders the jaw). Besides the servo angle [mrad] the table scores the jaw
(``gripper_left_joint``) in mm: the closed form of the simulated against the measured servo
angle (:func:`actuatorlab.sim.arm_data.evaluate_arm` ``jaws``)::

    python bench/visual_actuator.py --gripper --out va_gripper.json
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

from actuatorlab.identify.arm_grad import fit_arm_grad  # noqa: E402
from actuatorlab.identify.handeye import HandEyeConfig, calibrate_camera, load_mask_frames, pose_error  # noqa: E402
from actuatorlab.identify.images import ImageOptions, load_image_supervision, withhold_encoders  # noqa: E402
from actuatorlab.app.train_work import compilation_cache  # noqa: E402
from actuatorlab.learned.arm import evaluate_learned_arm, load_arm_model  # noqa: E402
from actuatorlab.learned.arm_train import ArmTrainConfig, train_arm  # noqa: E402
from actuatorlab.precision import physics_precision  # noqa: E402
from actuatorlab.logs import load_logs  # noqa: E402
from actuatorlab.logs.format import Trajectory  # noqa: E402
from actuatorlab.robots import load_robot  # noqa: E402
from actuatorlab.sim.arm_data import evaluate_arm  # noqa: E402
from actuatorlab.sim.camera import read_cameras  # noqa: E402
from actuatorlab.sim.silhouette import load_meshes  # noqa: E402
from actuatorlab.synth import run_synth  # noqa: E402

ROBOT = "open_manipulator_x"
#: --gripper: the suite with the gripper servo, the model with its crank-slider, the servo withheld
GRIPPER = ("cameras_gripper", "open_manipulator_x_crank", "gripper_crank")


def _command_stands_in(traj: Trajectory, joint: str) -> Trajectory:
    """``traj`` whose ``position/<joint>`` is the joint's command (for the camera calibration: a
    joint without an encoder is drawn where it was commanded)."""
    return traj.with_channel(f"position/{joint}", traj.data[f"position_target/{joint}"].copy(),
                             traj.channels[f"position/{joint}"])


def _calibration(ds: Path, mode: str, out: Path, frames: int, robot: str = ROBOT,
                 hidden: str | None = None) -> tuple[Path, list[dict]]:
    """A camera_calibration.json of every camera (calibrated, or the hidden truth) and its errors;
    ``hidden``: a joint whose encoder the calibration does not use (its command stands in)."""
    truth = json.loads((ds / "dataset.json").read_text())["ground_truth"]["cameras"]["camera_from_base"]
    rows, cams = [], []
    rm = load_meshes(load_robot(robot).model())
    logs = load_logs(ds / "train")
    if hidden is not None:
        logs = [_command_stands_in(t, hidden) for t in logs]
    for cam in read_cameras(ds / "masks" / "cameras.json"):
        T_true = np.array(truth[cam.name])
        if mode == "truth":
            T, wall = T_true, 0.0
        else:
            t0 = time.perf_counter()
            T = calibrate_camera(load_mask_frames(logs, ds / "masks", cam, rm), rm,
                                 HandEyeConfig(n_frames=frames)).camera_from_base
            wall = time.perf_counter() - t0
        mm, deg = pose_error(T, T_true)
        rows.append({"camera": cam.name, "translation_err_mm": round(mm, 2), "rotation_err_deg": round(deg, 3),
                     "wall_s": round(wall, 1)})
        cams.append({"camera": cam.name, "camera_from_base": np.asarray(T).tolist()})
        print(rows[-1], file=sys.stderr, flush=True)
    path = out / "camera_calibration.json"
    path.write_text(json.dumps({"robot": robot, "cameras": cams}))
    return path, rows


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--joint", default=None, help="the joint whose encoder is withheld (default joint2; "
                    "with --gripper gripper_crank)")
    ap.add_argument("--gripper", action="store_true", help="the suite with the gripper servo, its encoder withheld")
    ap.add_argument("--camera", choices=("calibrated", "truth"), default="calibrated")
    ap.add_argument("--frames", type=int, default=24, help="frames of the hand-eye calibration (24: bench/journal/visual.md, 2026-12-05)")
    ap.add_argument("--curriculum", type=int, nargs="+", default=[64, 128, 128])
    ap.add_argument("--iters", type=int, nargs="+", default=[30, 15, 15])
    ap.add_argument("--weight", type=float, default=None,
                    help="lambda [rad^2] of the image term (default 1e-2; with --loss edge 1.0)")
    ap.add_argument("--loss", choices=("soft_iou", "edge"), default="soft_iou", help="the per-frame image loss")
    ap.add_argument("--refine-camera", action="store_true",
                    help="fit the cameras' poses with the actuator (joint camera refinement, identify.images)")
    ap.add_argument("--state-std", type=float, default=0.0, metavar="RAD",
                    help="per-frame state corrections with this prior std [rad] (identify.images; 0: none)")
    ap.add_argument("--state-prior", type=float, default=1e-2, help="k_s of the corrections' prior")
    ap.add_argument("--learned", default=None, metavar="ARCH",
                    help="also train a learned actuator (ARCH or residual:ARCH) from each analytic fit")
    ap.add_argument("--learned-steps", type=int, default=80)
    ap.add_argument("--learned-curriculum", type=int, nargs="+", default=[64, 96, 128])
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    if a.weight is None:
        a.weight = 1.0 if a.loss == "edge" else 1e-2
    suite, model_robot, default_joint = GRIPPER if a.gripper else ("cameras", ROBOT, "joint2")
    a.joint = a.joint or default_joint
    if a.learned and a.gripper:
        raise SystemExit("--learned runs on the arm without the gripper: drop --gripper")
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "ds"
        run_synth(ROBOT, suite, ds, seed=a.seed)
        cal, cam_rows = _calibration(ds, a.camera, Path(tmp), a.frames, model_robot, a.joint if a.gripper else None)
        train = load_logs(ds / "train")
        judge = load_logs(ds / "test") + load_logs(ds / "val")
        robot = load_robot(model_robot)
        withheld = [withhold_encoders(t, [a.joint]) for t in train]
        kw = dict(per_joint=True, curriculum=tuple(a.curriculum), iters=tuple(a.iters), batch=8, seed=a.seed)
        runs: dict[str, dict] = {}
        opts = ImageOptions(weight=a.weight, loss=a.loss, refine_camera=a.refine_camera, state_std=a.state_std,
                            state_prior=a.state_prior)
        sup = load_image_supervision(robot, withheld, ds / "masks", cal, opts)
        for name, logs, images in (("encoder", train, None), ("images", withheld, sup)):
            t0, c0 = time.perf_counter(), time.process_time()
            r = fit_arm_grad(model_robot, logs, images=images, **kw)
            runs[name] = {"params": r["params"], "train_mae": r["train_mae"], "wall_s": time.perf_counter() - t0,
                          "cpu_s": time.process_time() - c0, "compile_s": r["compile_s"],
                          "image_soft_iou": r.get("image_soft_iou"), "image_edge_rms": r.get("image_edge_rms"),
                          **({"state_corrections": r["state_corrections"]} if r.get("state_corrections") else {})}
            if r.get("camera_refinement"):  # the refined cameras against the hidden truth
                truth = json.loads((ds / "dataset.json").read_text())["ground_truth"]["cameras"]["camera_from_base"]
                runs[name]["cameras_refined"] = [
                    {"camera": c["camera"], "moved_mm": c["centre_moved_mm"], "rotation_deg": c["rotation_deg"],
                     **dict(zip(("error_mm", "error_deg"), pose_error(np.asarray(c["camera_from_base"]),
                                                                      np.array(truth[c["camera"]]))))}
                    for c in r["camera_refinement"]]
            print(name, {k: v for k, v in runs[name].items() if k != "params"}, file=sys.stderr, flush=True)
        learned, learned_runs = ({}, {}) if a.learned is None else _learned(a, train, withheld, sup, runs, judge,
                                                                             Path(tmp))
    table = {"nominal": evaluate_arm(model_robot, None, judge, horizons=(100, 300), jaws=a.gripper)["per_joint"]}
    for name, r in runs.items():
        table[name] = evaluate_arm(model_robot, r["params"], judge, horizons=(100, 300), jaws=a.gripper)["per_joint"]
    table.update(learned)
    joints = list(table["nominal"])
    print(f"held-out rollout MAE [mrad; a jaw in mm] (test + val logs, every encoder), {a.joint}'s encoder withheld "
          f"in 'images'; cameras: {a.camera}")
    print(f"{'fit':<16}" + "".join(f"{j + ' h100':>14}{'h300':>7}" for j in joints))
    for name, per in table.items():
        print(f"{name:<16}" + "".join(f"{1e3 * per[j]['100']:14.2f}{1e3 * per[j]['300']:7.2f}" for j in joints))
    ratio = {h: table["images"][a.joint][h] / table["encoder"][a.joint][h] for h in ("100", "300")}
    print(f"{a.joint}: images / encoder = {ratio['100']:.2f} (100 steps), {ratio['300']:.2f} (300 steps); "
          f"target <= 1.5")
    jaw = _jaw_lines(table, runs, robot) if a.gripper else {}
    lr_: dict[str, float] = {}
    if learned:
        lr_ = {h: table["learned-images"][a.joint][h] / table["learned-encoder"][a.joint][h] for h in ("100", "300")}
        print(f"{a.joint}, learned {a.learned}: images / encoder = {lr_['100']:.2f} (100 steps), "
              f"{lr_['300']:.2f} (300 steps); target <= 1.5")
    summary = {"bench": "visual_actuator", "seed": a.seed, "joint": a.joint, "camera": a.camera, "cameras": cam_rows,
               "suite": suite, "robot": model_robot, **({"gripper": jaw} if jaw else {}),
               "curriculum": a.curriculum, "iters": a.iters, "weight": a.weight, "loss": a.loss,
               "refine_camera": a.refine_camera, "state_std": a.state_std, "state_prior": a.state_prior,
               "heldout_mae_rad": table, "ratio_images_encoder": ratio,
               "meets_target": bool(max(ratio.values()) <= 1.5),
               **({} if not learned else {
                   "learned": {"arch": a.learned, "steps": a.learned_steps, "curriculum": a.learned_curriculum,
                               "ratio_images_encoder": lr_, "meets_target": bool(max(lr_.values()) <= 1.5),
                               "runs": learned_runs}}),
               "runs": {k: {kk: vv for kk, vv in v.items() if kk != "params"} for k, v in runs.items()},
               "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2)}
    emit(summary, a.out)
    return summary


def _jaw_lines(table: dict, runs: dict, robot) -> dict:
    """Print and return the gripper's figures: held-out jaw MAE [mm] and servo MAE [mrad] of each
    fit, the images / encoder ratios and the fits' wall times."""
    mech = robot.mechanisms[0]
    out: dict = {"jaw_mae_mm": {}, "servo_mae_mrad": {}}
    for name in ("nominal", "encoder", "images"):
        out["jaw_mae_mm"][name] = {h: 1e3 * table[name][mech.slider][h] for h in ("100", "300")}
        out["servo_mae_mrad"][name] = {h: 1e3 * table[name][mech.name][h] for h in ("100", "300")}
    for key, unit in (("jaw_mae_mm", "mm"), ("servo_mae_mrad", "mrad")):
        v = out[key]
        out[key.replace("mae", "ratio")] = {h: v["images"][h] / v["encoder"][h] for h in ("100", "300")}
        print(f"gripper {key.split('_')[0]} MAE [{unit}] (100 / 300 steps): nominal {v['nominal']['100']:.3f} / "
              f"{v['nominal']['300']:.3f}, encoder {v['encoder']['100']:.3f} / {v['encoder']['300']:.3f}, "
              f"images only {v['images']['100']:.3f} / {v['images']['300']:.3f}; images / encoder = "
              f"{out[key.replace('mae', 'ratio')]['100']:.2f} / {out[key.replace('mae', 'ratio')]['300']:.2f} "
              "(target <= 1.5)")
    out["wall_s"] = {k: round(runs[k]["wall_s"], 1) for k in ("encoder", "images")}
    print(f"fit wall time [s]: encoder {out['wall_s']['encoder']}, images {out['wall_s']['images']}")
    return out


def _learned(a, train, withheld, sup, runs: dict, judge, tmp: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    """(per-joint held-out MAE tables {"learned-encoder", "learned-images"}, their training records)
    of the learned actuator ``a.learned`` trained from each analytic fit in ``runs`` (module docstring)."""
    kind, sep, arch = a.learned.partition(":")
    residual = bool(sep)
    if residual and kind != "residual":
        raise SystemExit(f"--learned {a.learned!r}: give ARCH or residual:ARCH")
    arch = arch if residual else a.learned
    budget = dict(steps=a.learned_steps, batch=4, curriculum=tuple(a.learned_curriculum),
                  stage_fraction=(0.5, 0.3, 0.2)[:len(a.learned_curriculum)], lr=3e-4,
                  eval_every=max(1, a.learned_steps // 4), max_val_windows=8, one_shape=True)
    out: dict[str, dict] = {}
    records: dict[str, dict] = {}
    for name, logs, images in (("encoder", train, None), ("images", withheld, sup)):
        teacher = {"model": None, "params": runs[name]["params"]}
        opts = ArmTrainConfig(arch=arch, residual=teacher if residual else None, teacher=teacher, seed=a.seed,
                              budget=budget)
        run = tmp / f"learned_{name}"
        t0, c0 = time.perf_counter(), time.process_time()
        with physics_precision(), compilation_cache():
            d = train_arm(ROBOT, logs[:-1], logs[-1:], opts, out=run, progress=False, images=images)
            robot, model, _ = load_arm_model(run / "arm_model.json", ROBOT)
            out[f"learned-{name}"] = evaluate_learned_arm(robot, model, judge, horizons=(100, 300))["per_joint"]
        tr = d["training"]
        records[name] = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                               "compile_s": tr["compile_s"], "best_step": tr["best_step"],
                               "best_val": tr["best_val_mae"], "val_criterion": tr["val_criterion"]}
        print(f"learned-{name}", records[name], file=sys.stderr, flush=True)
    return out, records


if __name__ == "__main__":
    main()

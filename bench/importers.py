"""Every import format end to end: a file converted with ``actuatorlab import`` (run_import) and
fitted from the converted native logs; then the fuzzed cases per importer.

Rows (a table, then one JSON line):

* BAM JSON: 3 bundled real XL330 logs -> native -> ``m1`` quick fit (train MAE);
* MCAP / ROS 2: the same 3 logs written as bags (JointState + JointTrajectory, bench setup in the
  mapping) -> native -> the same fit: the figures must equal the BAM row's;
* CSV + mapping: the same 3 logs written as CSV in deg / ms / rpm with a mapping -> same fit;
* EMPS .mat: the shared EMPS file -> native -> ``m1`` quick fit (skipped without ../shared);
* LeRobot: SO-101 chirp logs made by the native MuJoCo rollout with a known ground truth (kt x1.3,
  friction_viscous x2 of the nominal STS3215), written as a LeRobot v3.0 dataset in degrees at
  50 fps -> native -> ``fit_arm`` of kt and friction_viscous (recovered vs true);
* native Parquet: every converted folder above is re-read (round trip);
* excitation design (:mod:`actuatorlab.identify.excite`): a 6 s D-optimal set designed from a rough
  guess of an XL330 pendulum's m1 parameters vs three naive 6 s sets (one sine or chirp repeated),
  each fitted (m1, quick budget) on synthetic logs of the truth: parameter error and held-out MAE.

Usage: ``python bench/importers.py [--no-fuzz] [--only import|excite|fuzz] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit  # noqa: E402

from actuatorlab.logs import load_log, load_logs  # noqa: E402
from actuatorlab.pipeline import run_fit, run_import  # noqa: E402

EXAMPLE = ROOT / "src" / "actuatorlab" / "examples" / "bam_xl330"
SHARED = ROOT.parent / "shared"


def fit_row(fmt: str, src: list[Path], work: Path, mapping=None) -> dict:
    out = work / f"{fmt}_native"
    t0 = time.perf_counter()
    written = run_import(src, out, mapping=mapping)
    t_conv = time.perf_counter() - t0
    back = load_logs(out)  # native round trip
    t0 = time.perf_counter()
    d = run_fit([out], work / f"{fmt}_run", model="m1", budget="quick", seed=0)
    s = d["_summary"]
    return {"format": fmt, "logs": len(written), "samples": int(sum(t.n for t in back)), "convert_s": t_conv,
            "fit": "m1 quick", "fit_s": time.perf_counter() - t0, "train_mae": s["position_mae"],
            "unit": s["unit"], "params": {k: v["value"] for k, v in d["parameters"].items() if v["free"]}}


def bam_as_mcap(paths: list[Path], work: Path) -> list[Path]:
    from actuatorlab.logs.importers.mcap_ros2 import write_joint_bag

    out = []
    for p in paths:
        bam = load_log(p)
        t = bam.time - bam.time[0]
        bag = work / "mcap" / f"{p.stem}.mcap"
        bag.parent.mkdir(exist_ok=True)
        # the command is stamped when BAM sent it: just before the bus read it is logged with
        write_joint_bag(bag, ["servo"], t, bam["position"][:, None], velocity=bam["velocity"][:, None],
                        commands=bam["position_target"][:, None], command_times=t - 1e-6,
                        enable=bam["torque_enable"], enable_times=t - 1e-6)
        setup = {k: v for k, v in bam.setup.to_dict().items() if k != "extra"}
        bag.with_name(f"{p.stem}.mapping.json").write_text(json.dumps(
            {"format": "actuatorlab-mcap-mapping", "setup": setup, "conditions": bam.conditions,
             "enable_topic": "/torque_enable"}))
        out.append(bag)
    return out


def bam_as_csv(paths: list[Path], work: Path) -> list[Path]:
    out = []
    for p in paths:
        bam = load_log(p)
        csv = work / "csv" / f"{p.stem}.csv"
        csv.parent.mkdir(exist_ok=True)
        rows = ["time_ms,goal_deg,pos_deg,vel_rpm,enable"]
        for i in range(bam.n):
            rows.append(f"{float(bam.time[i] * 1e3)!r},{float(np.degrees(bam['position_target'][i]))!r},"
                        f"{float(np.degrees(bam['position'][i]))!r},{float(bam['velocity'][i] * 60 / (2 * np.pi))!r},"
                        f"{int(bam['torque_enable'][i]) if bam.has('torque_enable') else 1}")
        csv.write_text("\n".join(rows) + "\n")
        setup = {k: v for k, v in bam.setup.to_dict().items() if k != "extra"}
        csv.with_name(f"{p.stem}.mapping.json").write_text(json.dumps({
            "format": "actuatorlab-csv-mapping", "time": {"column": "time_ms", "unit": "ms"},
            "channels": {"position_target": {"column": "goal_deg", "unit": "deg"},
                         "position": {"column": "pos_deg", "unit": "deg"},
                         "velocity": {"column": "vel_rpm", "unit": "rpm", "kind": "estimated"},
                         "torque_enable": {"column": "enable", "unit": "bool"}},
            "setup": setup, "conditions": bam.conditions}))
        out.append(csv)
    return out


def lerobot_row(work: Path) -> dict:
    from actuatorlab.identify.arm_fit import fit_arm
    from actuatorlab.logs.importers.lerobot import write_lerobot_dataset
    from actuatorlab.robots import load_robot
    from actuatorlab.sim.arm import initial_state, make_inputs
    from actuatorlab.sim.arm_native import rollout_native

    robot = load_robot("so101")
    nominal = robot.nominal_params()
    truth = {k: np.asarray(v, float).copy() for k, v in nominal.items()}
    truth["kt"] = truth["kt"] * 1.3
    truth["friction_viscous"] = truth["friction_viscous"] * 2.0
    rng = np.random.default_rng(0)
    T = 400
    t = np.arange(T) * robot.control_dt
    arm = [j for j in robot.joint_names if j != "gripper"]
    episodes = []
    for _ in range(3):
        qt = np.zeros((T, robot.n_joints))
        for j in arm:
            f0, f1, a = 0.3 + 0.2 * rng.random(), 2.0 + rng.random(), 0.3 + 0.2 * rng.random()
            qt[:, robot.index(j)] = a * np.sin(2 * np.pi * (f0 * t + 0.5 * (f1 - f0) / t[-1] * t**2) + 6 * rng.random())
        _, o = rollout_native(robot, truth, make_inputs(robot, qt), initial_state(robot, q=qt[0]))
        episodes.append({"state": np.degrees(np.asarray(o.q)), "action": np.degrees(qt)})
    root = write_lerobot_dataset(work / "so101_lerobot", episodes, fps=round(1 / robot.control_dt),
                                 joints=list(robot.joint_names), robot_type="so101_follower")
    mapping = {"format": "actuatorlab-lerobot-mapping", "position_unit": "deg",
               "joint_position_units": {"gripper": "deg"}}
    t0 = time.perf_counter()
    written = run_import([root], work / "lerobot_native", mapping=mapping)
    t_conv = time.perf_counter() - t0
    trajs = load_logs(work / "lerobot_native")
    t0 = time.perf_counter()
    r = fit_arm("so101", trajs, params=("kt", "friction_viscous"), max_evals=120, horizon=50, seed=0)
    got = {k: float(r["param_sets"][k][0]) for k in ("kt", "friction_viscous")}
    true = {k: float(np.ravel(truth[k])[0]) for k in ("kt", "friction_viscous")}
    return {"format": "lerobot", "logs": len(written), "samples": int(sum(t.n for t in trajs)),
            "convert_s": t_conv, "fit": "fit_arm so101 (kt, friction_viscous), 120 evals",
            "fit_s": time.perf_counter() - t0, "train_mae": float(r["train_mae"]), "unit": "rad",
            "params": got, "truth": true, "train_mae_nominal": float(r["train_mae_nominal"]),
            "rel_error": {k: abs(got[k] / true[k] - 1) for k in got}}


def excite_rows() -> list[dict]:
    from actuatorlab.identify.excite import Limits, candidates, compare_to_naive, design
    from actuatorlab.logs.format import Setup

    truth = dict(kt=0.4, R=3.5, armature=0.002, friction_base=0.03, friction_viscous=0.01)
    nominal = {k: v * f for (k, v), f in zip(truth.items(), (1.3, 0.8, 1.5, 0.7, 2.0))}
    setups = [Setup("xl330", "revolute", "dynamixel_pwm", {"kp": kp}, 7.4, {"mass": 0.49, "length": 0.1, "arm_mass": 0.0})
              for kp in (400.0, 800.0)]
    lim = Limits(q_min=-1.5, q_max=1.5, margin=0.1, v_max=3.0, duty=0.8)
    segs = candidates(setups, lim, dt=0.01, segment_s=2.0)
    by = {x.name: x for x in segs}
    t0 = time.perf_counter()
    rep = design(segs, "m1", nominal, 6.0)
    t_design = time.perf_counter() - t0
    naive = ("sine_a0.6_f0.5_kp400_m0.49", "sine_a0.25_f1.5_kp400_m0.49", "chirp_a0.8_kp400_m0.49")
    held = [by[n] for n in ("steps_a0.5_kp800_m0.49", "reversals_v0.5_kp400_m0.49", "chirp_a0.3_kp400_m0.49")]
    r = compare_to_naive([by[n] for n in rep["selected"]], {n: [by[n]] * 3 for n in naive}, held, "m1", truth)
    crlb = {x["name"]: x["crlb_relative_stderr"] for x in rep["candidates"]}
    rows = []
    for label, row in r.items():
        rows.append({"set": label, "segments": row["segments"], "duration_s": row["duration_s"],
                     "heldout_mae": row["heldout_mae"], "param_rel_error": row["param_rel_error"],
                     "mean_param_rel_error": row["mean_param_rel_error"],
                     "design_s": t_design if label == "designed" else None,
                     "logdet_F": rep["design"]["logdet"] if label == "designed" else
                     next(x["logdet"] for x in rep["candidates"] if x["name"] == label) + 5 * np.log(3.0),
                     "crlb": rep["design"]["crlb_relative_stderr"] if label == "designed" else crlb[label]})
    return rows


def fuzz_counts() -> dict:
    with tempfile.TemporaryDirectory() as d:
        dest = Path(d) / "counts.json"
        env = {**os.environ, "ACTUATORLAB_FUZZ_COUNTS": str(dest), "PYTHONPATH": str(ROOT / "src")}
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W",
                            "ignore::RuntimeWarning", str(ROOT / "tests" / "test_fuzz_importers.py")],
                           env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        counts = json.loads(dest.read_text()) if dest.exists() else {}
        return {"counts": counts, "pytest_rc": p.returncode, "wall_s": wall,
                "summary": next((ln.strip("= ") for ln in reversed(p.stdout.splitlines())
                                 if " passed" in ln or " failed" in ln), "no pytest summary")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-fuzz", action="store_true")
    ap.add_argument("--only", choices=["import", "excite", "fuzz"], help="run one section")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    logs = sorted(EXAMPLE.glob("*.json"))[:3]
    rows: list[dict] = []
    if a.only in (None, "import"):
        with tempfile.TemporaryDirectory() as d:
            work = Path(d)
            rows.append(fit_row("bam", logs, work))
            rows.append(fit_row("mcap", bam_as_mcap(logs, work), work))
            rows.append(fit_row("csv", bam_as_csv(logs, work), work))
            emps = SHARED / "data" / "emps" / "DATA_EMPS.mat"
            if emps.is_file():
                rows.append(fit_row("emps", [emps], work))
            rows.append(lerobot_row(work))
    ex = excite_rows() if a.only in (None, "excite") else []
    fuzz = None if a.no_fuzz or a.only not in (None, "fuzz") else fuzz_counts()
    print(f"{'format':8} {'logs':>4} {'samples':>8} {'conv s':>7} {'fit':38} {'fit s':>6} {'train MAE':>12}  parameters")
    for r in rows:
        mae = f"{r['train_mae'] * 1e3:.3f} m{r['unit']}"
        ps = ", ".join(f"{k}={v:.4g}" + (f" (true {r['truth'][k]:.4g})" if "truth" in r else "")
                       for k, v in list(r["params"].items())[:4])
        print(f"{r['format']:8} {r['logs']:>4} {r['samples']:>8} {r['convert_s']:>7.2f} {r['fit']:38} "
              f"{r['fit_s']:>6.1f} {mae:>12}  {ps}")
    if ex:
        print(f"\n{'excitation set (6 s each)':34} {'log det F':>9} {'held-out MAE':>13} {'mean param err':>14}  "
              "per parameter (fitted vs truth)")
        for r in ex:
            print(f"{r['set']:34} {r['logdet_F']:>9.1f} {r['heldout_mae'] * 1e3:>10.4f} mrad {100 * r['mean_param_rel_error']:>13.1f}%  "
                  + ", ".join(f"{k} {100 * v:.1f}%" for k, v in r["param_rel_error"].items()))
        print(f"designed = {', '.join(ex[0]['segments'])}")
    if fuzz:
        print(f"fuzzed cases per importer ({fuzz['summary']}, {fuzz['wall_s']:.0f} s): " + ", ".join(
            f"{k} {sum(v.values())} ({v.get('error', 0)} one-line errors, {v.get('ok', 0)} converted)"
            for k, v in fuzz["counts"].items()))
    emit({"bench": "importers", "rows": rows, "excitation": ex, "fuzz": fuzz}, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

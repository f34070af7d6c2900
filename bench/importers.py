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
* excitation design (:mod:`actuatorlab.excite.design`, one joint): a 6 s D-optimal set designed from a rough
  guess of an XL330 pendulum's m1 parameters vs three naive 6 s sets (one sine or chirp repeated),
  each fitted (m1, quick budget) on synthetic logs of the truth: parameter error and held-out MAE.

* whole-robot excitation design (:mod:`actuatorlab.excite.design`, ``--only excite-robot``):
  SO-101 shoulder_lift + elbow_flex, m1 per joint (kt, friction_base, friction_viscous),
  a 6 s D-optimal set designed at the config's nominal values vs three naive 6 s sets (each joint's
  sine in turn, one multi-sine repeated, a random draw of candidates), each fitted per joint
  (``fit_arm``, CMA-ES) on synthetic logs of per-joint truths (x1/1.5..x1.5 of nominal; several
  truth seeds, white position noise): parameter error and held-out MAE; plus the cost of the
  Jacobian by batched native central differences vs MJX forward mode.

Usage: ``python bench/importers.py [--no-fuzz] [--only import|excite|excite-robot|fuzz] [--out FILE]``.
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
from actuatorlab.app.jobs import run_fit, run_import  # noqa: E402
from actuatorlab.identify.select import FamilyOptions  # noqa: E402

EXAMPLE = ROOT / "src" / "actuatorlab" / "examples" / "bam_xl330"
SHARED = ROOT.parent / "shared"


def fit_row(fmt: str, src: list[Path], work: Path, mapping=None) -> dict:
    out = work / f"{fmt}_native"
    t0 = time.perf_counter()
    written = run_import(src, out, mapping=mapping)
    t_conv = time.perf_counter() - t0
    back = load_logs(out)  # native round trip
    t0 = time.perf_counter()
    d = run_fit([out], work / f"{fmt}_run", model="m1", options=FamilyOptions(budget="quick", seed=0))
    s = d["_summary"]
    return {"format": fmt, "logs": len(written), "samples": int(sum(t.n for t in back)), "convert_s": t_conv,
            "fit": "m1 quick", "fit_s": time.perf_counter() - t0, "train_mae": s["position_mae"],
            "unit": s["unit"], "params": {k: v["value"] for k, v in d["parameters"].items() if v["free"]}}


def bam_as_mcap(paths: list[Path], work: Path) -> list[Path]:
    from actuatorlab.logs.importers.mcap_ros2 import JointBag, write_joint_bag

    out = []
    for p in paths:
        bam = load_log(p)
        t = bam.time - bam.time[0]
        bag = work / "mcap" / f"{p.stem}.mcap"
        bag.parent.mkdir(exist_ok=True)
        # the command is stamped when BAM sent it: just before the bus read it is logged with
        write_joint_bag(bag, JointBag(["servo"], t, bam["position"][:, None], velocity=bam["velocity"][:, None],
                                      commands=bam["position_target"][:, None], command_times=t - 1e-6,
                                      enable=bam["torque_enable"], enable_times=t - 1e-6))
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
    from actuatorlab.excite.backends import JointBackend
    from actuatorlab.excite.candidates import Limits, candidates
    from actuatorlab.excite.design import compare_to_naive, design
    from actuatorlab.logs.format import Setup

    truth = dict(kt=0.4, R=3.5, armature=0.002, friction_base=0.03, friction_viscous=0.01)
    nominal = {k: v * f for (k, v), f in zip(truth.items(), (1.3, 0.8, 1.5, 0.7, 2.0))}
    setups = [Setup("xl330", "revolute", "dynamixel_pwm", {"kp": kp}, 7.4, {"mass": 0.49, "length": 0.1, "arm_mass": 0.0})
              for kp in (400.0, 800.0)]
    lim = Limits(q_min=-1.5, q_max=1.5, margin=0.1, v_max=3.0, duty=0.8)
    segs = candidates(setups, lim, dt=0.01, segment_s=2.0)
    by = {x.name: x for x in segs}
    t0 = time.perf_counter()
    backend = JointBackend("m1", lim)
    rep = design(backend, segs, nominal, 6.0)
    t_design = time.perf_counter() - t0
    naive = ("sine_a0.6_f0.5_kp400_m0.49", "sine_a0.25_f1.5_kp400_m0.49", "chirp_a0.8_kp400_m0.49")
    held = [by[n] for n in ("steps_a0.5_kp800_m0.49", "reversals_v0.5_kp400_m0.49", "chirp_a0.3_kp400_m0.49")]
    r = compare_to_naive(backend, [by[n] for n in rep["selected"]], {n: [by[n]] * 3 for n in naive}, held, truth)
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


def excite_robot_rows(seeds=(0, 1, 2), noise: float = 0.003, max_evals: int = 400) -> dict:
    from actuatorlab.excite.backends import RobotBackend, design_robot_setup
    from actuatorlab.excite.candidates import RobotLimits, robot_candidates
    from actuatorlab.excite.design import compare_to_naive, design, information, logdet
    from actuatorlab.robots import load_robot
    from actuatorlab.synth.model_truth import draw_param_sets

    base = load_robot("so101")
    r, p = design_robot_setup(base, "m1")
    joints, names = ["shoulder_lift", "elbow_flex"], ["kt", "friction_base", "friction_viscous"]
    held = ("multisine_a0.4_s1", "steps_a0.5@elbow_flex", "reversals_v0.3@all")
    segs = robot_candidates(r, joints, RobotLimits(), segment_s=2.0)
    by = {s.name: s for s in segs}
    pool = [s for s in segs if s.name not in held]
    t0 = time.perf_counter()
    rep = design(RobotBackend(r, tuple(names), tuple(joints)), pool, p, 6.0)
    t_design = time.perf_counter() - t0
    n = len(rep["selected"])
    rng = np.random.default_rng(0)
    naive = {"sine per joint": [by[f"sine_a0.6_f0.5@{joints[i % 2]}"] for i in range(n)],
             "multisine x3": [by["multisine_a0.4_s0"]] * n,
             "random draw": [pool[i] for i in rng.choice(len(pool), n, replace=False)]}
    per_seed = []
    for seed in seeds:
        truth = draw_param_sets(base, "m1", seed=seed, spread=0.5, names=tuple(names))
        keep = [r.index(j) for j in r.joint_names if j not in joints]
        for k in truth:
            truth[k][keep] = p[k][keep]
        backend = RobotBackend(r, tuple(names), tuple(joints), base=base, max_evals=max_evals, horizon=50)
        per_seed.append(compare_to_naive(backend, [by[x] for x in rep["selected"]], naive,
                                         [by[h] for h in held], truth, seed=seed, noise=noise))

    def set_logdet(segs_l: list[str]) -> float:  # log det of the set's summed information (at nominal)
        uniq = list(dict.fromkeys(segs_l))
        _, F = information(RobotBackend(r, tuple(names), tuple(joints)), [by[x] for x in uniq], p)
        return logdet(sum(F[uniq.index(x)] for x in segs_l))

    rows = []
    for label in per_seed[0]:
        segs_l = per_seed[0][label]["segments"]
        rows.append({"set": label, "segments": segs_l,
                     "heldout_mae": float(np.mean([s[label]["heldout_mae"] for s in per_seed])),
                     "mean_param_rel_error": float(np.mean([s[label]["mean_param_rel_error"] for s in per_seed])),
                     "param_rel_error": {k: float(np.mean([s[label]["param_rel_error"][k] for s in per_seed]))
                                         for k in per_seed[0][label]["param_rel_error"]},
                     "per_seed": [{k: s[label][k] for k in ("heldout_mae", "mean_param_rel_error")} for s in per_seed],
                     "logdet_F": rep["design"]["logdet"] if label == "designed" else set_logdet(segs_l)})
    return {"rows": rows, "design_s": t_design, "n_candidates": len(pool), "rejected": len(rep["rejected"]),
            "parameters": rep["parameters"], "seeds": list(seeds), "noise_rad": noise, "max_evals": max_evals,
            "crlb_design": rep["design"]["crlb_relative_stderr"], "jacobian": jacobian_cost(r, p, segs[:8], names, joints)}


def jacobian_cost(r, p, segs, names, joints) -> dict:
    """Seconds for the information of ``segs``: batched native central differences vs MJX jacfwd
    (compile and run); and how far their sqrt(diag F) agree."""
    import jax
    import jax.numpy as jnp

    from actuatorlab.excite.backends import ENCODER_NOISE, RobotBackend, _stack_inputs
    from actuatorlab.excite.design import information
    from actuatorlab.sim.arm import ArmInputs, make_mjx_rollout

    t0 = time.perf_counter()
    _, F_nat = information(RobotBackend(r, tuple(names), tuple(joints)), segs, p)
    t_nat = time.perf_counter() - t0
    x, s0 = _stack_inputs(r, segs)
    cols = [(k, r.index(j)) for k in names for j in joints]
    with jax.enable_x64(True):
        roll = jax.vmap(make_mjx_rollout(r), in_axes=(None, 0, 0))
        base_p = {k: jnp.asarray(v) for k, v in p.items()}
        xi = ArmInputs(*[jnp.asarray(v) for v in x])
        si = type(s0)(*[jnp.asarray(v) for v in s0])

        def q_of(lt):
            pp = dict(base_p)
            for i, (k, g) in enumerate(cols):
                pp[k] = pp[k].at[g].set(jnp.exp(lt[i]))
            return roll(pp, xi, si)[1].q

        lt0 = jnp.log(jnp.array([p[k][g] for k, g in cols]))
        jac = jax.jit(jax.jacfwd(q_of))
        t0 = time.perf_counter()
        jac(lt0).block_until_ready()
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        Jm = np.asarray(jac(lt0).block_until_ready())
        t_run = time.perf_counter() - t0
    Jm = Jm / ENCODER_NOISE  # (C, T, n, P)
    F_m = np.einsum("ctnp,ctnq->cpq", Jm, Jm)
    ratio = np.sqrt(np.einsum("cpp->cp", F_nat)) / np.maximum(np.sqrt(np.einsum("cpp->cp", F_m)), 1e-30)
    return {"candidates": len(segs), "steps": int(segs[0].q.shape[0]), "parameters": len(cols),
            "native_fd_s": t_nat, "mjx_jacfwd_compile_and_first_s": t_first, "mjx_jacfwd_run_s": t_run,
            "sqrt_diag_ratio_native_over_mjx": {"median": float(np.median(ratio)), "min": float(ratio.min()),
                                                "max": float(ratio.max())}}


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
    ap.add_argument("--only", choices=["import", "excite", "excite-robot", "fuzz"], help="run one section")
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
    exr = excite_robot_rows() if a.only in (None, "excite-robot") else None
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
    if exr:
        print(f"\nwhole robot (so101 shoulder_lift + elbow_flex, m1 per joint, {len(exr['parameters'])} parameters; "
              f"{exr['n_candidates']} candidates, design {exr['design_s']:.1f} s; fits: {exr['max_evals']} evals, "
              f"noise {exr['noise_rad'] * 1e3:g} mrad, truth seeds {exr['seeds']})")
        print(f"{'6 s set':18} {'log det F':>9} {'held-out MAE':>13} {'mean param err':>14}  per parameter (mean over seeds)")
        for r in exr["rows"]:
            print(f"{r['set']:18} {r['logdet_F']:>9.1f} {r['heldout_mae'] * 1e3:>10.4f} mrad {100 * r['mean_param_rel_error']:>13.1f}%  "
                  + ", ".join(f"{k} {100 * v:.1f}%" for k, v in r["param_rel_error"].items()))
        print(f"designed = {', '.join(exr['rows'][0]['segments'])}")
        jc = exr["jacobian"]
        print(f"Jacobian of {jc['candidates']} candidates x {jc['steps']} steps x {jc['parameters']} parameters: native "
              f"central differences {jc['native_fd_s']:.2f} s; MJX jacfwd {jc['mjx_jacfwd_compile_and_first_s']:.1f} s "
              f"compile+first, {jc['mjx_jacfwd_run_s']:.2f} s run; sqrt diag F native/MJX median "
              f"{jc['sqrt_diag_ratio_native_over_mjx']['median']:.3f} ({jc['sqrt_diag_ratio_native_over_mjx']['min']:.3f}"
              f"..{jc['sqrt_diag_ratio_native_over_mjx']['max']:.3f})")
    if fuzz:
        print(f"fuzzed cases per importer ({fuzz['summary']}, {fuzz['wall_s']:.0f} s): " + ", ".join(
            f"{k} {sum(v.values())} ({v.get('error', 0)} one-line errors, {v.get('ok', 0)} converted)"
            for k, v in fuzz["counts"].items()))
    emit({"bench": "importers", "rows": rows, "excitation": ex, "excitation_robot": exr, "fuzz": fuzz}, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

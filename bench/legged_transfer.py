"""Legged transfer benchmark (issue 44), first section: identification of ANYmal C's drives from in-air logs.

One command (from the repo root)::

    python bench/legged_transfer.py                         # reduced: scale 0.3, seed 0, 100 CMA-ES evaluations per model
    python bench/legged_transfer.py --scale 1 --max-evals 300 --out bench/out/legged_transfer.json

The reduced configuration (both sections, the five arms of :data:`TABLE_ARMS`, seed 0, 4 M env steps per policy)
trains policies side by side (``--jobs``, default :data:`JOBS`: 3 on 2 cores; spawned worker processes), the
fit-free arms while the identification runs; each run is deterministic by its seed, so the
figures do not depend on ``--jobs``.

In one run:

* the in-air dataset (``actuatorlab synth --robot anymal_c --suite legged``, :func:`actuatorlab.synth.run_legged`),
  cached in ``bench/out/legged/anymal_c_sSEED_xSCALE`` (git-ignored);
* the default ``fit DIR/train DIR/drive --robot anymal_c`` (:func:`actuatorlab.app.jobs.run_fit`, the path the CLI
  takes: the drive-rate logs' drive-side identification, :mod:`actuatorlab.identify.drive`, whose values every
  member keeps; base welded, each log's drive gains and foot loads, one parameter set per joint type, the nested
  ladder judged on a split of the training logs; where the drive-rate logs measure every value of
  g2+backlash+delay, that member per joint is selected (selection "auto", since 2026-12-07), the ladder's table
  kept; timed wall and CPU; cached in ``bench/out/legged/fit_sSEED_xSCALE_eN_drive_default``; ``--no-drive``:
  ``DIR/train`` alone, the protocol before its drive-rate logs), and with ``--replay-row`` the replay fit
  beside it (selection "replay", the ladder's pick: the fit of the replay and diagnostic arms, ``..._drive``,
  built anyway when one of those arms is trained);
* held-out MAE per joint type (mean over the four joints of the type of the 100-step window-rollout MAE,
  :func:`actuatorlab.identify.arm_fit.evaluate_logs`: each log replayed on the robot as it was recorded,
  base welded, its gains and foot loads) on heldout/excitation, load and gain for the identified model,
  the hand-written ``robots/actuators/anymal_c_sea.json`` (replayed, not refitted) and the robot config's own
  rigid m1 (the policy runs' "builtin-like" nominal);
* parameter recovery: every parameter the selected model shares with the truth
  (:func:`actuatorlab.synth.zoo_family.zoo_params`, output side), the fitted value per joint type against the
  mean of the four drawn units of that type, and the hand-written file's value against the same truth; the
  drive-side identification's median and largest error over the 12 units against each unit's own truth.

Second section (``--section transfer``; ``all`` runs both), the matched ablation of issue 44 item 6: per arm and
seed, a trot policy trained with ``actuatorlab train-policy`` (homotopy-adaptive, proprioceptive observation with
2 frames of history, ``--policy-steps`` env steps; cached in ``bench/out/legged/policies/ARM_sSEED``, resumed when
interrupted), then deployed on the dataset's truth drives on the ground
(:func:`actuatorlab.policy.deploy.deploy_policy`: the 12 fixed commands, ``--deploy-steps`` steps each) next to its
own training environment. Arms (:data:`ARMS`): ``identified`` (the first section's default fit), ``identified_fleet``
(the same + the fleet randomization spec: ``--spec``, or by default the library's, built and cached here by
:func:`_fleet_spec`: the selected model fitted per joint (from the type fit) with the foot-load jackknife, then
``randomize``, docs/randomization.md), ``identified_replay`` and ``identified_fleet_replay`` (the same on the replay
fit: the default before 2026-12-07), ``identified_cover`` (the same spec with its spread scaled until the
randomized fleet's replay scatter on the training logs matches the fit's replay error there: bench/fleet_cover.py,
tried and not adopted), ``measured_compliant`` (m2+backlash with every value the drive-rate logs measure, spring
and dead band included, by joint type, + the fleet spec; not the selected member: tried, not adopted),
``measured_mesh`` (the oracle's member less the delay, g2+backlash, with every joint's own drive-rate values, the
mesh frictions included; no randomization), ``measured_mesh_delay`` (the same + every joint's command delay as the
drive-rate logs measure it: every value from the logs; ``measured_mesh_delay_fleet`` with the fleet spec too), ``identified_fleet_delay`` (identified_fleet + the measured
delay by joint type), and two diagnostics that use the truth: ``oracle_nodelay`` (the oracle less its delay) and
``measured_mesh_truth_delay`` (measured_mesh + the truth's delay),
``builtin`` (MuJoCo's own position
servos of the MJCF), ``builtin_naive`` (the robot config's rigid m1, the hand-set model the built-in servos stand
for, + wide naive randomization: the built-in servos' parameters are not randomizable through a spec),
``oracle`` (every unit's truth parameters, per joint, in the family member that has all of them,
g2+backlash+delay: the truth is not itself a member), ``config_m1`` (the config's m1 without randomization).
Targets (issue 44; also reported for the other arms of :data:`SPEC_ARMS`): identified_fleet on the truth <= 1.25x
its training-environment velocity RMSE, <= 0.2 m/s,
<= 5 % falls, <= 1.3x the oracle's velocity RMSE.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import functools
import json
import multiprocessing
import os
import platform
import sys
import time
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from common import emit  # noqa: E402
from fleet_cover import covering_spec  # noqa: E402

from actuatorlab.app.jobs import RobotFitOptions, run_fit  # noqa: E402
from actuatorlab.app.use_jobs import RandomizeJob, run_randomize_job  # noqa: E402
from actuatorlab.identify.select import FamilyOptions  # noqa: E402
from actuatorlab.policy.deploy import DeployConfig, deploy_policy  # noqa: E402
from actuatorlab.policy.train import TrainConfig, train_policy  # noqa: E402
from actuatorlab.identify.arm_fit import evaluate_logs  # noqa: E402
from actuatorlab.logs.io import load_native  # noqa: E402
from actuatorlab.models.registry import get_model  # noqa: E402
from actuatorlab.synth import run_legged  # noqa: E402
from actuatorlab.synth.legged import JOINT_TYPES  # noqa: E402
from actuatorlab.synth.legged_sim import GENERATOR_VERSION, legged_robot  # noqa: E402
from actuatorlab.synth.zoo import actuator_from_dict  # noqa: E402
from actuatorlab.synth.zoo_family import zoo_params  # noqa: E402

CACHE = BENCH / "out" / "legged"
HAND = BENCH.parent / "src" / "actuatorlab" / "robots" / "actuators" / "anymal_c_sea.json"
#: training scenes (--scene): the robot config's MJX scene, or the same with the full model's foot contact
SCENES = {"mjx": None, "elliptic": "scene_mjx_elliptic.xml"}
SPLITS = ("heldout/excitation", "heldout/load", "heldout/gain")
HORIZON = 100


def _dataset(seed: int, scale: float) -> Path:
    d = CACHE / f"anymal_c_s{seed}_x{scale:g}"
    card = d / "dataset.json"
    if not card.is_file() or json.loads(card.read_text())["generator_version"] != GENERATOR_VERSION:
        run_legged("anymal_c", d, seed, scale, overwrite=True)
    return d


def _logs(d: Path, split: str) -> list:
    return [load_native(p, strict=False) for p in sorted((d / split).glob("*.parquet"))]


def _per_type(ev: dict[str, Any]) -> dict[str, float]:
    """{joint type: mean of its joints' MAE at the longest horizon} [rad]."""
    h = str(ev["horizon"])
    return {jt: float(np.mean([v[h] for j, v in ev["per_joint"].items() if j.endswith(jt) and h in v]))
            for jt in JOINT_TYPES}


def _score(d: Path, params: dict | None, model: str | None) -> dict[str, dict[str, float]]:
    """{split: {joint type: MAE [rad], "all": pooled}} of one parameter set replayed on each held-out split."""
    out = {}
    for split in ("train",) + SPLITS:
        trajs = _logs(d, split)
        ev = evaluate_logs("anymal_c", params, trajs, horizons=(HORIZON,), model=model)
        out[split] = {**_per_type(ev), "all": float(ev["position_mae"])}
    return out


def _truth_by_type(card: dict[str, Any]) -> dict[str, dict[str, float]]:
    """{joint type: {parameter: mean over the type's four units}} of the truth under the models' names."""
    out: dict[str, dict[str, float]] = {}
    for jt in JOINT_TYPES:
        units = [zoo_params(actuator_from_dict(u)) for j, u in card["units"].items() if j.endswith(jt)]
        out[jt] = {k: float(np.mean([u[k][0] for u in units])) for k in units[0]}
    return out


#: the drive-side identification's values and the truth's (synth.zoo.Gear) field of each
DRIVE_TRUTH = {"armature": "reflected_inertia", "friction_base": "coulomb", "friction_stribeck": "stribeck",
               "friction_viscous": "viscous", "mesh_friction_drive": "load_drive", "mesh_friction_back": "load_back",
               "stiffness": "stiffness", "backlash": "backlash", "bearing": "bearing", "spring_damping": "damping"}


def _drive_recovery(fit: dict[str, Any], card: dict[str, Any]) -> dict[str, dict[str, float]]:
    """{value: median and max |relative error| over the joints} of the drive-side identification against each
    unit's truth ({} without drive-rate logs)."""
    per = (fit.get("drive_identification") or {}).get("per_joint") or {}
    out = {}
    for k, field in DRIVE_TRUTH.items():
        e = [abs(v[k] / getattr(actuator_from_dict(card["units"][j]).gear, field) - 1.0) for j, v in per.items()]
        if e:
            out[k] = {"median_abs_rel_err": float(np.median(e)), "max_abs_rel_err": float(np.max(e))}
    return out


def _recovery(fit: dict[str, Any], hand: dict[str, Any], truth: dict[str, dict[str, float]]) -> list[dict]:
    """Per joint type and parameter the truth has: fitted and hand-written values against the truth,
    ``determined`` (False: the fit's own sensitivity pass says the in-air logs do not determine it to 10 %)
    and ``improvable`` (True: moving it alone lowers the fit's error, the search stopped short); None where
    no such pass was recorded."""
    rows = []
    sens = (fit.get("identifiability") or {}).get("sensitivity")
    if fit.get("per_joint"):  # a fit per joint: each type's median against the type's mean truth, no pass
        sens = None
        fit = {**fit, "params": {k: {f"@{jt}": float(np.median([v for j, v in per.items() if j.endswith("_" + jt)]))
                                     for jt in JOINT_TYPES} for k, per in fit["params"].items()}}
    for k, per_set in fit["params"].items():
        for name, v in per_set.items():
            jt = name.rsplit("@", 1)[-1]
            if k not in truth.get(jt, {}):
                continue
            t = truth[jt][k]
            h = hand["params"].get(k)
            known = sens is not None and (sens["change"].get(k) or {}).get(name) is not None
            det = f"{k}@{name}" not in sens["not_determined"] if known else None
            short = f"{k}@{name}" in (sens.get("improvable") or []) if known else None
            rows.append({"type": jt, "param": k, "truth": t, "fitted": float(v), "fit_rel_err": float(v / t - 1.0),
                         "determined": det, "improvable": short,
                         "hand": h, "hand_rel_err": None if h is None else float(h / t - 1.0)})
    for k, h in hand["params"].items():  # what the hand-written file assumes and the fit does not have
        if k not in fit["params"]:
            for jt in JOINT_TYPES:
                if k in truth[jt]:
                    t = truth[jt][k]
                    rows.append({"type": jt, "param": k, "truth": t, "fitted": None, "fit_rel_err": None,
                                 "hand": h, "hand_rel_err": float(h / t - 1.0)})
    return rows


#: the ablation's arms: name -> what the policy is trained with
ARMS = {
    "identified": "the default fit's model (the identification section's FIT/arm_model.json: with drive-rate logs that "
                  "measure every value of g2+backlash+delay, that member per joint, nothing searched)",
    "identified_fleet": "the same + the fleet's randomization spec (--spec; default: the one `randomize` proposes "
                        "from the model's fit per joint)",
    "identified_replay": "the nested ladder's pick on the 50 Hz in-air replay (`fit` with selection replay, the "
                         "default before 2026-12-07: m1 on the reduced configuration's seed 0)",
    "identified_fleet_replay": "the same + its fleet spec (the replay pick fitted per joint, load jackknife)",
    "identified_cover": "the same + the fleet's spec scaled to cover the fit's replay error (bench/fleet_cover.py)",
    "measured_compliant": "every mechanism the drive-rate logs measure (m2+backlash: spring and dead band, by joint "
                          "type, the medians of the joints' values) + the fleet's spec; not the selected member",
    "measured_mesh": "the oracle's member without the delay, g2+backlash, with every joint's own drive-rate values "
                     "(spring, dead band, Stribeck, mesh frictions); no randomization",
    "identified_fleet_delay": "identified_fleet's model and spec + the command delay the drive-rate logs measure "
                              "(m1+delay, the delay by joint type: actuatorlab.identify.drive.command_delay)",
    "builtin": "MuJoCo's built-in position servos of the MJCF (kp 100)",
    "builtin_naive": "the config's rigid m1 + wide naive randomization (armature, friction x e^(+-0.7), viscous +-0.3)",
    "oracle": "every unit's truth parameters per joint in g2+backlash+delay (the closest member)",
    "oracle_nodelay": "the oracle without its delay: every unit's truth parameters per joint in g2+backlash "
                      "(diagnostic: what the delay adds)",
    "measured_mesh_delay": "measured_mesh with every joint's command delay as the drive-rate logs measure it "
                           "(g2+backlash+delay: every value from the logs, none searched); no randomization",
    "measured_mesh_delay_fleet": "measured_mesh_delay + the fleet's randomization spec (identified_fleet's)",
    "measured_mesh_truth_delay": "measured_mesh with every unit's truth command delay per joint "
                                 "(diagnostic: whether the delay is what measured_mesh lacks)",
    "config_m1": "the config's rigid m1, hand-set, no randomization",
}
#: the arms trained on the default fit (`fit --robot anymal_c` as a user runs it); every other fitted arm on the
#: replay fit (selection "replay"), the fit the diagnostic arms were built on
DEFAULT_ARMS = ("identified", "identified_fleet")
#: the replay fit's identified arms and the names their runs are cached under (theirs while it was the default)
REPLAY_ARMS = {"identified_replay": "identified", "identified_fleet_replay": "identified_fleet"}
#: arms trained with a spec built from the fit (after it)
SPEC_ARMS = ("identified_fleet", "identified_fleet_replay", "identified_cover", "measured_compliant",
             "identified_fleet_delay", "measured_mesh_delay_fleet")
#: the member with every mechanism the drive-side regression measures well (the mesh frictions, 17-37 % off,
#: left out; journal/legged.md 2026-12-06) and the values it takes from it
COMPLIANT_MODEL = "m2+backlash"
COMPLIANT_PARAMS = ("armature", "stiffness", "backlash", "friction_base", "friction_stribeck", "stribeck_velocity",
                    "stribeck_alpha", "friction_viscous")


#: the oracle's member less the delay (which the drive-rate logs do not measure), per joint, and its parameters
MESH_MODEL = "g2+backlash"
MESH_PARAMS = COMPLIANT_PARAMS + ("mesh_friction_drive", "mesh_friction_back")


def _drive_model_file(fit_dir: Path, name: str, model: str, params: tuple[str, ...], by_type: bool) -> Path:
    """``fit_dir/name``: an arm_model.json of ``model`` with the fit's drive-side values of ``params``, by joint type
    (the median over each type's joints, as the fit keeps them) or per joint; written once for every seed's cell."""
    doc = json.loads((fit_dir / "arm_model.json").read_text())
    per = (doc.get("drive_identification") or {}).get("per_joint")
    if not per:
        raise SystemExit(f"{fit_dir}: no drive-side identification (fit with the drive-rate logs)")
    if by_type:
        values = {k: {f"anydrive@{t}": float(np.median([v[k] for j, v in per.items() if j.endswith("_" + t)]))
                      for t in JOINT_TYPES} for k in params}
    else:
        values = {k: {j: float(v[k]) for j, v in per.items()} for k in params}
    return _write_if_changed(fit_dir / name, json.dumps({"format": "actuatorlab-model", "format_version": "2", "robot": "anymal_c", "kind": "analytic",
                       "model": model, "params": values,
                       "sources": {"params": f"{fit_dir / 'arm_model.json'} drive_identification, "
                                             + ("median per joint type" if by_type else "per joint")}}, indent=1))


def _write_if_changed(p: Path, text: str) -> Path:
    """``p`` with ``text``, written only when it differs (the file is shared by every seed's cell)."""
    if not p.is_file() or p.read_text() != text:
        p.write_text(text)
    return p


def _compliant_file(fit_dir: Path) -> Path:
    """The ``measured_compliant`` arm's model: :data:`COMPLIANT_MODEL` with the drive-side values by joint type."""
    return _drive_model_file(fit_dir, "measured_compliant.json", COMPLIANT_MODEL, COMPLIANT_PARAMS, by_type=True)


def _mesh_file(fit_dir: Path) -> Path:
    """The ``measured_mesh`` arm's model: :data:`MESH_MODEL` with every joint's own drive-side values."""
    return _drive_model_file(fit_dir, "measured_mesh.json", MESH_MODEL, MESH_PARAMS, by_type=False)


@functools.lru_cache(maxsize=None)
def _measured_delays(fit_dir: Path, d: Path) -> dict[str, float]:
    """{joint: command delay [s]} of the fit's drive-side identification; a fit made before the delay was measured
    gets it from the dataset's drive-rate logs (the same library function, nothing else refitted; once per
    process, not per cell)."""
    per = (json.loads((fit_dir / "arm_model.json").read_text()).get("drive_identification") or {}).get("per_joint")
    if per and all(v.get("delay") is not None for v in per.values()):
        return {j: float(v["delay"]) for j, v in per.items()}
    from actuatorlab.identify.arm_space import log_groups
    from actuatorlab.identify.drive import drive_logs, identify_drives
    from actuatorlab.logs import load_logs

    fast, _ = drive_logs(load_logs(sorted((d / "drive").glob("*.json"))), legged_robot().joint_names)
    return {j: float(f.delay) for j, f in identify_drives(log_groups("anymal_c", fast)).items() if f.delay is not None}


def _delay_file(fit_dir: Path, d: Path) -> Path:
    """The ``identified_fleet_delay`` arm's model: the fit's arm_model.json with the measured delay by joint type
    (the median over each type's joints, as the fit keeps its drive-side values)."""
    doc = json.loads((fit_dir / "arm_model.json").read_text())
    delays = _measured_delays(fit_dir, d)
    doc["model"] = get_model(doc["model"] + "+delay").name
    doc["params"]["delay"] = {f"anydrive@{t}": float(np.median([v for j, v in delays.items() if j.endswith("_" + t)]))
                              for t in JOINT_TYPES}
    return _write_if_changed(fit_dir / "identified_delay.json", json.dumps(doc, indent=1))


def _mesh_delay_file(fit_dir: Path, card: dict[str, Any], truth: bool = False) -> Path:
    """The ``measured_mesh_delay`` arm's model: the ``measured_mesh`` file's values and every joint's measured delay
    (``truth``: every unit's truth delay instead, the ``measured_mesh_truth_delay`` diagnostic)."""
    doc = json.loads(_mesh_file(fit_dir).read_text())
    doc["model"] = MESH_MODEL + "+delay"
    if truth:
        doc["params"]["delay"] = _truth_params(card)["delay"]
        doc["sources"]["delay"] = "the legged dataset's drawn truth (dataset.json units): a diagnostic, not measured"
    else:
        doc["params"]["delay"] = _measured_delays(fit_dir, _dataset(card['seed'], card['scale']))
        doc["sources"]["delay"] = "actuatorlab.identify.drive.command_delay on the drive-rate logs, per joint"
    return _write_if_changed(fit_dir / f"measured_mesh_{'truth_' if truth else ''}delay.json", json.dumps(doc, indent=1))


#: the issue's five arms (the default; config_m1, identified_cover and measured_compliant are not in the issue's
#: table)
TABLE_ARMS = ("identified", "identified_fleet", "builtin", "builtin_naive", "oracle")
ORACLE_MODEL = "g2+backlash+delay"
OBS = {"observation": "proprioceptive", "history": 2}
NAIVE = {"format": "actuatorlab-randomization", "format_version": "1",
         "description": "wide naive randomization (bench/legged_transfer.py builtin_naive)",
         "entries": [{"name": "armature_wide", "kind": "unit", "parameter": "armature", "distribution": "lognormal", "std": 0.7},
                     {"name": "coulomb_wide", "kind": "unit", "parameter": "friction_base", "distribution": "lognormal",
                      "std": 0.7},
                     {"name": "viscous_wide", "kind": "unit", "parameter": "friction_viscous",
                      "distribution": "add_uniform", "half_width": 0.3, "clip": [0.0, 1.0]}]}


def _truth_params(card: dict[str, Any]) -> dict[str, dict[str, float]]:
    """{parameter: {joint: value}}: every unit's truth parameters (zoo_params, output side)."""
    params: dict[str, dict[str, float]] = {}
    for j, u in card["units"].items():
        for k, (v, _) in zoo_params(actuator_from_dict(u)).items():
            params.setdefault(k, {})[j] = float(v)
    return params


def _oracle_file(card: dict[str, Any], delay: bool = True) -> Path:
    """An arm_model.json with every unit's truth parameters (zoo_params, output side) per joint; without ``delay``
    the oracle's member less its command delay."""
    params = _truth_params(card)
    model = ORACLE_MODEL if delay else ORACLE_MODEL.removesuffix("+delay")
    if not delay:
        params.pop("delay", None)
    p = CACHE / f"oracle{'' if delay else '_nodelay'}_s{card['seed']}.json"
    p.write_text(json.dumps({"format": "actuatorlab-model", "format_version": "2", "robot": "anymal_c",
                             "kind": "analytic", "model": model, "params": params,
                             "sources": {"params": "the legged dataset's drawn truth (dataset.json units), "
                                                   "actuatorlab.synth.zoo_family.zoo_params"}}, indent=1))
    return p


#: the fleet spec's recipe (issue 44 item 3, docs/randomization.md "From a legged robot's fleet"): the selected
#: model fitted per joint from the fit by type, then refitted without each foot-load group (the jackknife
#: whose variance ``randomize`` removes from the units' spread); journal/legged.md 2026-12-05, `jkload`
FLEET_EVALS = 300
FLEET_GROUP_BY = ("load",)


def _fleet_spec(d: Path, fit_dir: Path, seed: int, data: list[Path], cover: bool = False) -> Path:
    """The fleet's randomization spec through the library (fit per joint of ``data`` + jackknife, ``randomize``);
    with ``cover``, scaled to cover the fit's replay error on the training logs (bench/fleet_cover.py, tried and
    not adopted); cached."""
    model = json.loads((fit_dir / "arm_model.json").read_text())["model"]
    units = CACHE / (f"fit_per_joint_{model}_init_{d.name.removeprefix('anymal_c_')}_e{FLEET_EVALS}_jkload"
                     + ("_drive" if d / "drive" in data else ""))
    spec = units / "fleet_spec.json"
    if not spec.is_file():
        t0, c0 = time.perf_counter(), time.process_time()
        run_fit(data, units, model=model, options=FamilyOptions(seed=seed, group_by=FLEET_GROUP_BY),
                jackknife="group", robot=RobotFitOptions("anymal_c", max_evals=FLEET_EVALS, per_joint=True,
                                                         init=fit_dir / "arm_model.json"))
        run_randomize_job(RandomizeJob((units / "arm_model.json",), out=spec))
        print(f"fleet spec {spec} ({time.perf_counter() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU)")
    covered = units / "fleet_spec_cover.json"
    if cover and not covered.is_file():
        t0 = time.perf_counter()
        doc = covering_spec(units / "arm_model.json", [d / "train"], fit_dir / "arm_model.json", covered)
        print(f"covering spec {covered}: spread x {doc['source']['coverage']['scale']:.3g} "
              f"({time.perf_counter() - t0:.0f} s wall)")
    return covered if cover else spec


def _env_options(arm: str, fit_dir: Path, spec: Path | None, card: dict[str, Any]) -> dict[str, Any]:
    if arm == "identified":
        return {"actuator": str(fit_dir / "arm_model.json"), "config": OBS}
    if arm == "measured_compliant":
        return {"actuator": str(_compliant_file(fit_dir)), "randomization": str(spec), "config": OBS}
    if arm == "measured_mesh":
        return {"actuator": str(_mesh_file(fit_dir)), "config": OBS}
    if arm == "identified_fleet_delay":
        return {"actuator": str(_delay_file(fit_dir, _dataset(card['seed'], card['scale']))), "randomization": str(spec), "config": OBS}
    if arm in ("identified_fleet", "identified_cover"):
        if spec is None:
            raise SystemExit(f"{arm} needs a spec (--spec, or the library's: transfer() builds it)")
        return {"actuator": str(fit_dir / "arm_model.json"), "randomization": str(spec), "config": OBS}
    if arm == "builtin":
        return {"actuator": "builtin", "config": OBS}
    if arm == "builtin_naive":
        p = CACHE / "naive_wide.json"
        p.write_text(json.dumps(NAIVE, indent=1))
        return {"actuator": "nominal", "randomization": str(p), "config": OBS}
    if arm == "oracle":
        return {"actuator": str(_oracle_file(card)), "config": OBS}
    if arm == "oracle_nodelay":
        return {"actuator": str(_oracle_file(card, delay=False)), "config": OBS}
    if arm == "measured_mesh_delay_fleet":
        return {"actuator": str(_mesh_delay_file(fit_dir, card)), "randomization": str(spec), "config": OBS}
    if arm in ("measured_mesh_delay", "measured_mesh_truth_delay"):
        return {"actuator": str(_mesh_delay_file(fit_dir, card, truth=arm == "measured_mesh_truth_delay")),
                "config": OBS}
    if arm == "config_m1":
        return {"actuator": "nominal", "config": OBS}
    raise SystemExit(f"unknown arm {arm!r}; known: {', '.join(ARMS)}")


def _policy(arm: str, seed: int, steps: int, env_options: dict[str, Any], scene: str = "mjx", tag: str = "") -> Path:
    """The arm's trained run (trained, or resumed, here when missing); ``scene`` "elliptic" trains on
    ``scene_mjx_elliptic.xml`` (the hardware's foot contact) instead of the config's MJX scene."""
    if scene != "mjx":
        env_options = {**env_options, "mjcf": SCENES[scene]}
    name = "_".join([arm] + ([scene] if scene != "mjx" else []) + ([tag] if tag else []))
    run = CACHE / "policies" / f"{name}_s{seed}"
    cached = json.loads((run / "config.json").read_text()).get("steps") if (run / "config.json").is_file() else steps
    if cached != steps:  # the cache is named by arm, scene, tag and seed: another budget needs its own tag
        raise SystemExit(f"{run}: trained for {cached} steps, not {steps}; give --tag for another budget")
    if not (run / "policy.json").is_file():
        train_policy(TrainConfig("anymal_c", "trot", "homotopy-adaptive", steps=steps, seed=seed, out=run,
                                 resume=(run / "config.json").is_file(), env_options=env_options))
    return run


#: policies trained side by side by default: 1.5 x the cores (one training keeps about 1.2 cores busy, and with
#: fewer workers than arms the last one trains alone; journal/legged.md 2026-12-06, thirteenth session)
JOBS = max(1, round(1.5 * (os.cpu_count() or 1)))
#: arms whose environment needs no fit (trained while the identification runs, with ``--jobs`` > 1)
FIT_FREE = ("builtin", "builtin_naive", "oracle", "oracle_nodelay", "config_m1")


def _arm_row(arm: str, seed: int, steps: int, env_options: dict[str, Any], scene: str, tag: str, d: Path,
             deploy_steps: int) -> dict[str, Any]:
    """One cell of the table: the arm's policy trained (or reused), then deployed on the truth of ``d``."""
    t0 = time.perf_counter()
    run = _policy(arm, seed, steps, env_options, scene, tag)
    return deployed(run, seed, d, deploy_steps, time.perf_counter() - t0)


def deployed(run: Path, seed: int, d: Path, deploy_steps: int, train_wall_s: float) -> dict[str, Any]:
    """One cell's figures: ``run``'s policy deployed on the truth of ``d`` (``deploy_steps`` per command, the
    deployment seed = the policy's seed), written to ``run/deploy_<d.name>``."""
    t1 = time.perf_counter()
    doc = deploy_policy(run, d, run / f"deploy_{d.name}", DeployConfig(steps=deploy_steps, seed=seed))
    return {"seed": seed, "run": str(run), "train_wall_s": train_wall_s, "deploy_wall_s": time.perf_counter() - t1,
            "hardware": doc["hardware_figures"], "training_env": doc["training_env"], "gap": doc["gap"]}


def _fit_data(a: argparse.Namespace, d: Path) -> list[Path]:
    """The identification's logs: the in-air logs at 50 Hz and, unless ``--no-drive``, the drive-rate logs."""
    return [d / "train"] + ([] if a.no_drive else [d / "drive"])


#: arms whose runs are cached under the tag ``drv`` when the fit has the drive-rate logs (measured_compliant
#: exists only with them)
DRIVE_TAGGED = ("identified", "identified_fleet", "identified_cover")  # measured_mesh: only with them


def _fit_dir(a: argparse.Namespace, arm: str) -> Path:
    """The fit ``arm`` is trained on: the default fit (:data:`DEFAULT_ARMS`) or the replay fit (built when missing)."""
    if arm in DEFAULT_ARMS:
        return a.fits["default"]
    if not (a.fits["replay"] / "arm_model.json").is_file():
        _replay_fit(a)
    return a.fits["replay"]


def _cell(a: argparse.Namespace, arm: str, seed: int, d: Path, spec: Path | None, card: dict[str, Any]) -> tuple:
    """The arguments of :func:`_arm_row` for one cell (the same in a worker process and in this one); the
    identified arms' policies of a fit with the drive-rate logs are cached under the tag ``drv`` (the replay fit's
    pick) or ``msr`` (the drive-measured member), the policies of another hardware than seed 0 at scale 0.3 under
    ``hw<seed>x<scale>``; the replay arms under their names of :data:`REPLAY_ARMS`."""
    name = REPLAY_ARMS.get(arm, arm)
    fit_dir = a.fits["default"] if arm in FIT_FREE else _fit_dir(a, arm)  # the fit-free arms start before any fit
    hw = "" if (a.seed, a.scale) == (0, 0.3) else f"hw{a.seed}x{a.scale:g}"  # another hardware: its own runs
    rule = None if arm in FIT_FREE else (
        json.loads((fit_dir / "arm_model.json").read_text()).get("selection") or {}).get("rule")
    drv = "" if a.no_drive or name not in DRIVE_TAGGED else "msr" if rule == "drive-measured" else "drv"
    tag = "_".join(t for t in (a.tag, hw, drv) if t)
    return name, seed, a.policy_steps, _env_options(name, fit_dir, spec, card), a.scene, tag, d, a.deploy_steps


def _submit(pool: Executor | None, a: argparse.Namespace, d: Path, spec: Path | None,
            card: dict[str, Any], arms: list[str]) -> dict[tuple[str, int], Any]:
    """{(arm, seed): future} of the arms' cells in ``pool`` (nothing without one: :func:`transfer` runs them)."""
    if pool is None:
        return {}
    return {(arm, seed): pool.submit(_arm_row, *_cell(a, arm, seed, d, spec, card))
            for arm in arms for seed in a.seeds}


def transfer(a: argparse.Namespace, d: Path, pool: Executor | None = None,
             started: dict[tuple[str, int], Any] | None = None) -> dict[str, Any]:
    """The ablation table: train (or reuse) every arm x seed, deploy each on the dataset's truth; with a
    ``pool``, the cells run in its worker processes (``started``: those submitted before the fit existed)."""
    card = json.loads((d / "dataset.json").read_text())
    futures = dict(started or {})
    running = {arm for arm, _ in futures}
    futures.update(_submit(pool, a, d, a.spec, card,
                           [arm for arm in a.arms if arm not in SPEC_ARMS and arm not in running]))
    specs: dict[str, Path | None] = {}
    for arm in (x for x in SPEC_ARMS if x in a.arms):  # while the pool trains the other arms
        specs[arm] = a.spec if a.spec is not None and arm == "identified_fleet" else (
            _fleet_spec(d, _fit_dir(a, arm), a.seed, _fit_data(a, d), cover=arm == "identified_cover"))
        futures.update(_submit(pool, a, d, specs[arm], card, [arm]))
    rows: dict[str, list[dict[str, Any]]] = {}
    for arm in a.arms:
        for seed in a.seeds:
            f = futures.get((arm, seed))
            rows.setdefault(arm, []).append(f.result() if f is not None else
                                            _arm_row(*_cell(a, arm, seed, d, specs.get(arm, a.spec), card)))
    table = {}
    for arm, rs in rows.items():
        m = {k: float(np.mean([r["hardware"][k] for r in rs])) for k in ("vel_rmse", "yaw_rmse", "fell", "torque_rms",
                                                                        "elec_power")}
        m.update({f"train_env_{k}": float(np.mean([r["training_env"][k] for r in rs]))
                  for k in ("vel_rmse", "yaw_rmse", "fell")})
        m["gap_vel"] = m["vel_rmse"] / m["train_env_vel_rmse"] if m["train_env_vel_rmse"] > 0 else None
        m["seeds"] = [r["seed"] for r in rs]
        table[arm] = m
    if "oracle" in table:
        for m in table.values():
            m["vs_oracle_vel"] = m["vel_rmse"] / table["oracle"]["vel_rmse"]
    print(f"deployed on the truth of {d.name} ({a.deploy_steps} steps x 12 commands; mean over seeds; "
          f"training scene {a.scene})")
    print(f"{'arm':<26}{'seeds':>6}{'train-env vel':>14}{'truth vel':>11}{'gap':>7}{'truth yaw':>11}{'falls':>7}"
          f"{'torque':>8}{'elec W':>8}{'/oracle':>9}")
    for arm, m in table.items():
        vo = m.get("vs_oracle_vel")
        print(f"{arm:<26}{len(m['seeds']):>6}{m['train_env_vel_rmse']:14.3f}{m['vel_rmse']:11.3f}"
              f"{(m['gap_vel'] or float('nan')):7.2f}{m['yaw_rmse']:11.3f}{m['fell']:7.0%}{m['torque_rms']:8.1f}"
              f"{m['elec_power']:8.0f}{(vo if vo is not None else float('nan')):9.2f}")
    targets: dict[str, dict[str, bool | None]] = {}
    for arm in (x for x in SPEC_ARMS if x in table):
        f = table[arm]
        targets[arm] = {"gap_le_1.25": bool(f["gap_vel"] is not None and f["gap_vel"] <= 1.25),
                        "vel_le_0.2": f["vel_rmse"] <= 0.2, "falls_le_5pct": f["fell"] <= 0.05,
                        "oracle_le_1.3": (f.get("vs_oracle_vel") or float("inf")) <= 1.3 if "oracle" in table else None}
        print(f"targets ({arm}):", targets[arm])
    return {"arms": {k: ARMS[k] for k in table}, "table": table, "runs": rows, "targets": targets or None,
            "policy_steps": a.policy_steps, "deploy_steps": a.deploy_steps, "scene": a.scene}


def identification(a: argparse.Namespace, d: Path, card: dict[str, Any], run: Path,
                   synth_s: tuple[float, float]) -> dict[str, Any]:
    """The first section: fit, held-out MAE per joint type, parameter recovery (module docstring)."""
    t1, c1 = time.perf_counter(), time.process_time()
    doc = run_fit(_fit_data(a, d), run, robot=RobotFitOptions("anymal_c", max_evals=a.max_evals))
    fit_s = (time.perf_counter() - t1, time.process_time() - c1)
    hand = json.loads(HAND.read_text())
    n_sets = len(JOINT_TYPES)
    replay = {}
    if a.replay_row and a.fits["replay"] != run:  # the replay fit's pick beside it (its own fit: opt-in)
        rep_doc = json.loads((_fit_dir(a, "identified_replay") / "arm_model.json").read_text())
        replay = {"identified_replay": _score(d, rep_doc["params"], rep_doc["model"])}
    scores = {"identified": _score(d, doc["params"], doc["model"]), **replay,
              "hand_written_sea": _score(d, {k: [v] * n_sets for k, v in hand["params"].items()}, hand["model"]),
              "config_m1": _score(d, None, None)}
    rec = _recovery(doc, hand, _truth_by_type(card))
    drive = _drive_recovery(doc, card)

    sel = doc.get("selection") or {}
    print(f"ANYmal C in air: scale {a.scale:g}, seed {a.seed}, {card['splits']}; selected {doc['model']}"
          f"{' per joint (' + sel['rule'] + '; the replay picks ' + sel['replay_selected'] + ')' if doc['per_joint'] else ''} "
          f"(fit {fit_s[0]:.0f} s wall, {fit_s[1]:.0f} s CPU; synth {synth_s[0]:.0f} s wall)")
    for row in sel.get("table", []):
        print(f"  {row['model']:<18} train {1e3 * row['train_mae']:7.2f} mrad  validation "
              f"{1e3 * row['validation_mae']:7.2f} mrad  earns place "
              f"{'measured' if row.get('measured') else row['earns_place']}")
    print(f"{'held-out MAE [mrad], 100-step windows':<40}" + "".join(f"{s.split('/')[-1] + ' ' + jt:>15}"
                                                                   for s in SPLITS for jt in JOINT_TYPES))
    for who, sc in scores.items():
        print(f"{who:<40}" + "".join(f"{1e3 * sc[s][jt]:15.2f}" for s in SPLITS for jt in JOINT_TYPES))
    print("parameter recovery (truth: mean of the type's 4 units)")
    for r in rec:
        fit_txt = "-" if r["fitted"] is None else (f"{r['fitted']:.4g} ({100 * r['fit_rel_err']:+.0f} %"
                                                   + (", not determined)" if r.get("determined") is False else
                                                      ", search stopped short)" if r.get("improvable") else ")"))
        hand_txt = "-" if r["hand"] is None else f"{r['hand']:.4g} ({100 * r['hand_rel_err']:+.0f} %)"
        print(f"  {r['type']} {r['param']:<20} truth {r['truth']:.4g}  fitted {fit_txt}  hand-written {hand_txt}")
    if drive:
        print("drive-side identification (the drive-rate logs), per joint: median |error| (max) against each unit's truth")
        for k, v in drive.items():
            print(f"  {k:<20} {100 * v['median_abs_rel_err']:5.1f} %  ({100 * v['max_abs_rel_err']:.1f} %)"
                  + ("" if k in (doc["drive_identification"].get("taken") or ()) else "  (not in the selected model)"))
    summary = {"bench": "legged_transfer", "section": "identification_in_air", "robot": "anymal_c",
               "scale": a.scale, "seed": a.seed, "max_evals": a.max_evals, "splits": card["splits"],
               "selected": doc["model"], "per_joint": doc["per_joint"], "rule": sel.get("rule"),
               "replay_selected": sel.get("replay_selected"), "selection": sel.get("table"), "heldout_mae_rad": scores,
               "parameter_recovery": rec, "drive_recovery": drive, "drive_logs": not a.no_drive, "fit_wall_s": fit_s[0], "fit_cpu_s": fit_s[1], "synth_wall_s": synth_s[0],
               "synth_cpu_s": synth_s[1], "date": dt.date.today().isoformat(),
               "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)"}
    return summary


def _replay_fit(a: argparse.Namespace) -> None:
    """The replay fit (selection "replay": the nested ladder's pick on the 50 Hz in-air replay) into
    ``a.fits["replay"]``, the fit of :data:`REPLAY_ARMS` and the diagnostic arms."""
    t0 = time.perf_counter()
    run_fit(_fit_data(a, _dataset(a.seed, a.scale)), a.fits["replay"],
            robot=RobotFitOptions("anymal_c", max_evals=a.max_evals, selection="replay"))
    print(f"replay fit {a.fits['replay']} ({time.perf_counter() - t0:.0f} s wall)")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-evals", type=int, default=100)
    ap.add_argument("--no-drive", action="store_true",
                    help="identify from the in-air logs at 50 Hz alone (the protocol before its drive-rate logs)")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--replay-row", action="store_true",
                    help="identification: also fit with selection replay (the default before 2026-12-07) and score its "
                         "pick beside the default's (one more fit of the 12 joints, about 7 min on 2 cores)")
    ap.add_argument("--section", choices=("identification", "transfer", "all"), default="all")
    ap.add_argument("--arms", nargs="+", default=list(TABLE_ARMS), choices=list(ARMS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--policy-steps", type=int, default=4_000_000)
    ap.add_argument("--deploy-steps", type=int, default=500)
    ap.add_argument("--scene", choices=tuple(SCENES), default="mjx",
                    help="the training scene: the config's MJX variant, or with the hardware's foot contact")
    ap.add_argument("--tag", default="", help="a suffix of the cached runs' names (another spec, another recipe)")
    ap.add_argument("--spec", type=Path, default=None,
                    help="the fleet's randomization spec (identified_fleet; default: the library's, built here)")
    ap.add_argument("--jobs", type=int, default=JOBS,
                    help="policies trained side by side in worker processes (the fit-free arms during the fit); "
                         "each run is deterministic by its seed, so the figures do not depend on it "
                         "(default: 1.5 x the cores, as one training uses about 1.2 cores)")
    a = ap.parse_args(argv)
    t0, c0 = time.perf_counter(), time.process_time()
    d = _dataset(a.seed, a.scale)
    synth_s = (time.perf_counter() - t0, time.process_time() - c0)
    card = json.loads((d / "dataset.json").read_text())
    replay = CACHE / f"fit_s{a.seed}_x{a.scale:g}_e{a.max_evals}{'' if a.no_drive else '_drive'}"
    run = replay if a.no_drive else replay.with_name(replay.name + "_default")  # without drive logs: the same fit
    a.fits = {"default": run, "replay": replay}
    out: dict[str, Any] = {"bench": "legged_transfer", "robot": "anymal_c", "scale": a.scale, "seed": a.seed}
    with contextlib.ExitStack() as stack:
        pool = None
        if a.jobs > 1 and a.section in ("transfer", "all"):  # spawned: JAX's threads do not survive a fork
            pool = stack.enter_context(ProcessPoolExecutor(a.jobs, mp_context=multiprocessing.get_context("spawn")))
        started = _submit(pool, a, d, None, card, [arm for arm in a.arms if arm in FIT_FREE])
        if a.section in ("identification", "all") or not (run / "arm_model.json").is_file():
            out["identification"] = identification(a, d, card, run, synth_s)
        if a.section in ("transfer", "all"):
            out["transfer"] = transfer(a, d, pool, started)
            out["transfer"]["jobs"] = a.jobs
    out["wall_s"] = time.perf_counter() - t0
    out.update(date=dt.date.today().isoformat(), machine=f"{platform.machine()}, {os.cpu_count()} cores (shared)")
    emit(out, a.out)
    return out


if __name__ == "__main__":
    main()

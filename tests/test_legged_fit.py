"""The whole-robot fit of the legged in-air logs (identify/arm_space.robot_for_log, log_groups): a robot hung
in the air, parameter sets by joint type, each log's drive gains and foot loads; the fit beats the
hand-written SEA file on held-out conditions."""

import dataclasses
import json
from pathlib import Path

import numpy as np

import pytest

from actuatorlab.app.cli import main
from actuatorlab.app.jobs import RobotFitOptions, run_fit
from actuatorlab.errors import ActuatorlabError, DataError
from actuatorlab.identify.drive import (MEASURED_MEMBER, DelaySegment, command_delay, drive_logs, identify_drives,
                                       measured_values, set_values)
from actuatorlab.models.registry import get_model
from actuatorlab.synth.zoo import actuator_from_dict
from actuatorlab.identify.arm_fit import evaluate_logs, fit_arm
from actuatorlab.identify.arm_space import log_groups, robot_for_log
from actuatorlab.logs.io import load_native
from actuatorlab.synth.legged import HELDOUT_GAIN, TRAIN_GAIN
from actuatorlab.synth.legged_sim import run_legged

ROBOT_JOINTS = tuple(f"{leg}_{jt}" for leg in ("LF", "RF", "LH", "RH") for jt in ("HAA", "HFE", "KFE"))
HAND = Path(__file__).resolve().parents[1] / "src/actuatorlab/robots/actuators/anymal_c_sea.json"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("legged_fit") / "d"
    run_legged("anymal_c", out, seed=1, scale=0.02)
    d = {s: [load_native(p, strict=False) for p in sorted((out / s).glob("*.parquet"))]
         for s in ("train", "heldout/excitation", "heldout/load", "heldout/gain", "drive")}
    return {**d, "dir": out, "card": json.loads((out / "dataset.json").read_text())}


def test_robot_for_log_in_air(data):
    loaded = next(t for t in data["train"] if t.conditions["load"] != "none")
    r = robot_for_log("anymal_c", loaded)
    assert r.fixed_base and not r.contacts and r.nq == 12
    assert [g.name for g in r.groups] == ["anydrive@HAA", "anydrive@HFE", "anydrive@KFE"]
    assert r.groups[r.joint("RH_KFE").group].name == "anydrive@KFE"
    assert r.law_constants().kp[0] == TRAIN_GAIN[0] and r.law_constants().kd[0] == TRAIN_GAIN[1]
    # the 1 kg at each foot is in the replayed model: 4 kg more than the unloaded robot's
    free = robot_for_log("anymal_c", data["train"][0] if data["train"][0] is not loaded else data["train"][1])
    assert len(r.point_masses) == 4 and not free.point_masses
    assert np.sum(r.model().body_mass) - np.sum(free.model().body_mass) == pytest.approx(4.0)
    assert robot_for_log("anymal_c", data["heldout/gain"][0]).law_constants().kp[0] == HELDOUT_GAIN[0]
    groups = log_groups("anymal_c", data["train"] + data["heldout/gain"])
    assert len(groups) == 3 and sum(len(t) for _, t in groups) == len(data["train"]) + len(data["heldout/gain"])
    other = dataclasses.replace(loaded, setup=dataclasses.replace(loaded.setup, extra={"robot": "anymal_c"}))
    with pytest.raises(DataError, match="in-air"):
        log_groups("anymal_c", [loaded, other])


def test_fit_beats_the_hand_written_file_on_heldout_conditions(data):
    hand = json.loads(HAND.read_text())
    fit = fit_arm("anymal_c", data["train"], model="m1", max_evals=16, seed=0, horizon=50, max_windows=24)
    assert fit["n_log_groups"] == 2 and fit["train_mae"] < fit["train_mae_nominal"]
    for split in ("heldout/excitation", "heldout/load", "heldout/gain"):
        ours = evaluate_logs("anymal_c", fit["params"], data[split], horizons=(100,), model="m1")["position_mae"]
        theirs = evaluate_logs("anymal_c", {k: [v] * 3 for k, v in hand["params"].items()}, data[split],
                               horizons=(100,), model=hand["model"])["position_mae"]
        assert ours < theirs, (split, ours, theirs)


# --- the drive-rate logs (identify/drive.py) --------------------------------------------------------------

def _truth(card, joint, field):
    return getattr(actuator_from_dict(card["units"][joint]).gear, field)


def test_drive_rate_logs_determine_inertia_friction_and_the_spring(data):
    """The regression on the drive's registers at 1 kHz (2 s per log here) recovers each unit's reflected
    inertia, Coulomb friction and spring to within a few per cent: the 50 Hz logs determine none of them."""
    fast, rest = drive_logs(data["drive"] + data["train"], ROBOT_JOINTS)
    assert len(fast) == len(data["drive"]) == 9 and len(rest) == len(data["train"])
    fits = identify_drives(log_groups("anymal_c", fast))
    assert set(fits) == set(ROBOT_JOINTS)  # every joint is excited by every family in one of the rotations
    err = {k: [getattr(f, k) / _truth(data["card"], j, field) - 1.0 for j, f in fits.items()]
           for k, field in (("armature", "reflected_inertia"), ("friction_base", "coulomb"),
                            ("friction_viscous", "viscous"), ("stiffness", "stiffness"))}
    med = {k: float(np.median(np.abs(v))) for k, v in err.items()}
    assert med["armature"] < 0.12 and med["friction_base"] < 0.12 and med["stiffness"] < 0.03, med
    assert med["friction_viscous"] < 0.25, med
    with pytest.raises(DataError, match="drive-rate"):
        identify_drives(log_groups("anymal_c", data["train"][:1]))
    bare = dataclasses.replace(fast[0], setup=dataclasses.replace(
        fast[0].setup, extra={k: v for k, v in fast[0].setup.extra.items() if k != "drive"}))
    with pytest.raises(DataError, match="torque constant"):
        identify_drives(log_groups("anymal_c", [bare]))


def test_drive_rate_logs_measure_the_command_delay(data):
    """The drive's PD law on the logged commands, shifted by the delay, explains the logged current: each unit's
    delay (command + a reading's age) within 1.2 ms, the drive's 1 kHz tick, of the truth (a 50 Hz log cannot:
    its period is 20 ms)."""
    fits = identify_drives(log_groups("anymal_c", data["drive"]))
    truth = {j: u["interface"]["command_delay"] + u["sensors"]["receive_delay"] for j, u in data["card"]["units"].items()}
    err = np.array([fits[j].delay - truth[j] for j in ROBOT_JOINTS])
    assert np.all(err > -0.0003) and np.all(err < 0.0012), err
    assert abs(float(np.median(err))) < 0.0006, err


def _pd_log(delay: float, dt: float = 0.001, seconds: float = 4.0, seed: int = 0) -> DelaySegment:
    """A drive whose current is its PD torque on the commands ``delay`` [s] late, with noise and 10 mA
    quantisation; the commands a smooth random walk, sometimes clipped by the effort limit."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, seconds, dt)
    target = np.cumsum(np.convolve(rng.normal(0.0, 0.01, t.size), np.ones(40) / 40, "same"))
    q = np.interp(t - 0.02, t, target) + 0.01 * np.sin(7 * t)  # a joint that follows 20 ms late
    v = np.gradient(q, dt)
    kp, kd, limit = 80.0, 2.0, 4.0
    tau = np.clip(kp * (np.interp(t - delay, t, target) - q) - kd * v, -limit, limit)
    i = np.round((tau + rng.normal(0.0, 0.02, t.size)) / 0.01) * 0.01  # 1 N.m/A, noise, 10 mA steps
    return DelaySegment(t, target, q, v, i, None, np.zeros_like(t), kp, kd, limit)


@pytest.mark.parametrize("delay", [0.0, 0.0034, 0.0125])
def test_command_delay_recovers_a_known_delay(delay):
    est = command_delay([_pd_log(delay, seed=1), _pd_log(delay, seed=2)])
    assert est is not None and abs(est - delay) < 0.0001, est


def test_command_delay_beyond_its_range_is_none():
    assert command_delay([_pd_log(0.03)], max_delay=0.02) is None
    assert command_delay([]) is None


def test_the_fit_keeps_what_the_drive_rate_logs_measured(data):
    fits = identify_drives(log_groups("anymal_c", data["drive"]))
    rb = log_groups("anymal_c", data["train"])[0][0]
    given = set_values(rb, fits)
    assert [g.name for g in rb.groups] == ["anydrive@HAA", "anydrive@HFE", "anydrive@KFE"]
    # m1 has nothing left to search: the measured values, scored as they are
    m1 = fit_arm("anymal_c", data["train"], model="m1", max_evals=8, seed=0, horizon=50, max_windows=16, given=given)
    assert m1["evaluations"] == 1 and sorted(m1["given"]) == ["armature", "friction_base", "friction_viscous"]
    for k in m1["given"]:
        assert [m1["params"][k][g] for g in ("anydrive@HAA", "anydrive@HFE", "anydrive@KFE")] == given[k]
    # m3 searches its load friction only, around the measured values
    m3 = fit_arm("anymal_c", data["train"], model="m3", max_evals=8, seed=0, horizon=50, max_windows=16, given=given)
    assert m3["evaluations"] > 1 and "load_friction" not in m3["given"]
    assert m3["params"]["armature"]["anydrive@KFE"] == given["armature"][2]


def test_fit_robot_with_drive_rate_logs_records_them(data, tmp_path, capsys):
    """`fit DIR/train DIR/drive --robot anymal_c`: the drive-rate logs go to the drive-side regression, the model
    keeps its values (m1: nothing left to search), the file records them and the command says so."""
    cfg = tmp_path / "fit.json"
    cfg.write_text(json.dumps({"max_evals": 4}))
    run = tmp_path / "run"
    assert main(["fit", str(data["dir"] / "train"), str(data["dir"] / "drive"), "--robot", "anymal_c", "--model", "m1",
                 "--config", str(cfg), "--out", str(run)]) == 0
    assert "drive-side identification (9 drive-rate logs, 12 joints): m1 keeps armature" in capsys.readouterr().out
    doc = json.loads((run / "arm_model.json").read_text())
    di = doc["drive_identification"]
    assert len(di["logs"]) == 9 and sorted(di["taken"]) == ["armature", "friction_base", "friction_viscous"]
    assert doc["params"]["armature"]["anydrive@HFE"] == pytest.approx(
        float(np.median([di["per_joint"][j]["armature"] for j in ROBOT_JOINTS if j.endswith("HFE")])))
    with pytest.raises(ActuatorlabError, match="control rate"):
        run_fit([data["dir"] / "drive"], tmp_path / "run2", model="m1", robot=RobotFitOptions("anymal_c", max_evals=4))


def test_the_default_fit_selects_the_member_the_drive_rate_logs_measure(data, tmp_path, capsys):
    """Without --model, where the drive-rate logs measure every value of MEASURED_MEMBER for every joint, `fit
    --robot` selects it per joint with exactly those values (nothing searched); the ladder's replay table stays,
    with the member's row; ``selection: replay`` keeps the ladder's pick. A joint without a delay: no such member."""
    fits = identify_drives(log_groups("anymal_c", data["drive"]))
    rb = log_groups("anymal_c", data["train"])[0][0]
    measured = measured_values(rb, fits)
    assert measured is not None and set(measured) == set(get_model(MEASURED_MEMBER).free_for("effort"))
    assert measured["delay"] == [fits[j].delay for j in rb.joint_names]
    cfg = tmp_path / "fit.json"
    cfg.write_text(json.dumps({"max_evals": 4}))
    args = ["fit", str(data["dir"] / "train"), str(data["dir"] / "drive"), "--robot", "anymal_c", "--config"]
    assert main(args + [str(cfg), "--out", str(tmp_path / "auto")]) == 0
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "auto" / "arm_model.json").read_text())
    sel = doc["selection"]
    assert doc["model"] == get_model(MEASURED_MEMBER).name and doc["per_joint"] and sel["rule"] == "drive-measured"
    assert doc["fit"]["evaluations"] == 1 and sorted(doc["drive_identification"]["taken"]) == sorted(measured)
    for k, v in measured.items():
        assert [doc["params"][k][j] for j in rb.joint_names] == v
    rows = {r["model"]: r for r in sel["table"]}
    assert [r["model"] for r in sel["table"] if r["selected"]] == [doc["model"]] and rows[doc["model"]]["n_free"] == 0
    assert sel["replay_selected"] in rows and sel["replay_selected"] != doc["model"]
    assert f"the replay alone would select {sel['replay_selected']}" in " ".join(out.split())
    cfg.write_text(json.dumps({"max_evals": 4, "selection": "replay"}))
    assert main(args + [str(cfg), "--out", str(tmp_path / "replay")]) == 0
    rep = json.loads((tmp_path / "replay" / "arm_model.json").read_text())
    assert rep["selection"]["rule"] == "replay" and rep["model"] == sel["replay_selected"] and not rep["per_joint"]
    no_delay = {**fits, rb.joint_names[4]: dataclasses.replace(fits[rb.joint_names[4]], delay=None)}
    assert measured_values(rb, no_delay) is None
    cfg.write_text(json.dumps({"selection": "best"}))
    assert main(args + [str(cfg), "--out", str(tmp_path / "bad")]) != 0
    assert "auto" in capsys.readouterr().err

"""The whole-robot fit of the legged in-air logs (identify/arm_space.robot_for_log, log_groups): a robot hung
in the air, parameter sets by joint type, each log's drive gains and foot loads; the fit beats the
hand-written SEA file on held-out conditions."""

import dataclasses
import json
from pathlib import Path

import numpy as np

import pytest

from actuatorlab.errors import DataError
from actuatorlab.identify.arm_fit import evaluate_logs, fit_arm
from actuatorlab.identify.arm_space import log_groups, robot_for_log
from actuatorlab.logs.io import load_native
from actuatorlab.synth.legged import HELDOUT_GAIN, TRAIN_GAIN
from actuatorlab.synth.legged_sim import run_legged

HAND = Path(__file__).resolve().parents[1] / "src/actuatorlab/robots/actuators/anymal_c_sea.json"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("legged_fit") / "d"
    run_legged("anymal_c", out, seed=1, scale=0.02)
    return {s: [load_native(p, strict=False) for p in sorted((out / s).glob("*.parquet"))]
            for s in ("train", "heldout/excitation", "heldout/load", "heldout/gain")}


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

"""The whole-robot fit of the legged in-air logs (identify/arm_space.robot_for_logs): a robot hung in the
air, parameter sets by joint type, the logs' drive gains; the fit beats the hand-written SEA file on
held-out conditions."""

import json
from pathlib import Path

import pytest

from actuatorlab.errors import DataError
from actuatorlab.identify.arm_fit import fit_arm
from actuatorlab.identify.arm_space import robot_for_logs
from actuatorlab.logs.io import load_native
from actuatorlab.sim.arm_data import evaluate_arm
from actuatorlab.synth.legged import HELDOUT_GAIN, TRAIN_GAIN
from actuatorlab.synth.legged_sim import run_legged

HAND = Path(__file__).resolve().parents[1] / "src/actuatorlab/robots/actuators/anymal_c_sea.json"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("legged_fit") / "d"
    run_legged("anymal_c", out, seed=1, scale=0.02)
    return {s: [load_native(p, strict=False) for p in sorted((out / s).glob("*.parquet"))]
            for s in ("train", "heldout/excitation", "heldout/load", "heldout/gain")}


def test_robot_for_logs_in_air(data):
    r = robot_for_logs("anymal_c", data["train"])
    assert r.fixed_base and not r.contacts and r.nq == 12
    assert [g.name for g in r.groups] == ["anydrive@HAA", "anydrive@HFE", "anydrive@KFE"]
    assert r.groups[r.joint("RH_KFE").group].name == "anydrive@KFE"
    assert r.law_constants().kp[0] == TRAIN_GAIN[0] and r.law_constants().kd[0] == TRAIN_GAIN[1]
    assert robot_for_logs("anymal_c", data["heldout/gain"]).law_constants().kp[0] == HELDOUT_GAIN[0]
    with pytest.raises(DataError, match="gain sets"):
        robot_for_logs("anymal_c", data["train"] + data["heldout/gain"])


def test_fit_beats_the_hand_written_file_on_heldout_conditions(data):
    hand = json.loads(HAND.read_text())
    fit = fit_arm(robot_for_logs("anymal_c", data["train"]), data["train"], model="m1", max_evals=16, seed=0,
                  horizon=50, max_windows=24)
    assert fit["train_mae"] < fit["train_mae_nominal"]
    for split in ("heldout/excitation", "heldout/load", "heldout/gain"):
        rb = robot_for_logs("anymal_c", data[split])
        ours = evaluate_arm(rb, fit["params"], data[split], horizons=(100,), model="m1")["position_mae"]
        theirs = evaluate_arm(rb, {k: [v] * 3 for k, v in hand["params"].items()}, data[split], horizons=(100,),
                              model=hand["model"])["position_mae"]
        assert ours < theirs, (split, ours, theirs)

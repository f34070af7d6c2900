"""The delete-a-group jackknife of a whole-robot fit (actuatorlab.identify.arm_jackknife, the fit job's
``jackknife`` with a robot): refits without each group, standard errors by the jackknife formula per joint,
a clear refusal with one group, and the fit itself unchanged when no jackknife is asked."""

from __future__ import annotations

import json

import numpy as np
import pytest

from actuatorlab.app.cli.identify import _print_fit_robot
from actuatorlab.app.identify_jobs import FitResult
from actuatorlab.app.jobs import RobotFitOptions, _fit_robot
from actuatorlab.errors import DataError
from actuatorlab.identify.arm_fit import fit_arm
from actuatorlab.identify.arm_jackknife import arm_jackknife
from actuatorlab.robots import load_robot

from test_arm_fit import ROBOT, chirp_logs

JOINTS = {"joint1", "joint2", "joint3", "joint4"}


@pytest.fixture(scope="module")
def logs():
    """Three short logs of a robot whose kt is 0.8 x nominal, tagged with three excitations."""
    robot = load_robot(ROBOT)
    truth = robot.nominal_params()
    truth["kt"] = truth["kt"] * 0.8
    return [t.replace(conditions={"excitation": f"e{k}", "load": "none"})
            for k, t in enumerate(chirp_logs(robot, truth, T=80, n_logs=3))]


def _se(x: np.ndarray) -> float:
    G = len(x)
    return float(np.sqrt((G - 1) / G * np.sum((x - x.mean()) ** 2)))


def test_jackknife_per_joint_gives_the_formula_and_finite_errors(logs):
    fit = fit_arm(ROBOT, logs, params=("kt", "friction_viscous"), per_joint=True, max_evals=12, horizon=40)
    u = arm_jackknife(ROBOT, logs, fit, by="group", group_by=("excitation",), max_evals=12, horizon=40)
    assert u["n_resamples"] == 3 and u["key"] == "excitation"
    assert u["groups"] == ["excitation=e0", "excitation=e1", "excitation=e2"]
    assert u["max_evals"] == 10  # a third of 12, at least 10
    assert u["space"] == {"kt": "log", "friction_viscous": "linear"}
    for n in ("kt", "friction_viscous"):
        assert set(u["stderr"][n]) == JOINTS
        for j in JOINTS:
            est = np.array(u["estimates"][n][j])
            assert est.shape == (3,) and np.all(np.isfinite(est))
            assert u["stderr"][n][j] == pytest.approx(_se(est), rel=1e-12, abs=1e-15)
            z = np.log(est) if n == "kt" else est
            assert u["stderr_natural"][n][j] == pytest.approx(_se(z), rel=1e-12, abs=1e-15)
    # every joint's refits moved off the all-data optimum (each joint keeps its own best: per_set_best), else
    # the spread is no measure; the all-data kt lies within the refits' range +- 3 se
    for j in JOINTS:
        assert any(x != fit["params"]["kt"][j] for x in u["estimates"]["kt"][j]) and u["stderr"]["kt"][j] > 0
    for j in JOINTS:
        est, se = np.array(u["estimates"]["kt"][j]), u["stderr"]["kt"][j]
        assert est.min() - 3 * se - 1e-12 <= fit["params"]["kt"][j] <= est.max() + 3 * se + 1e-12


def test_jackknife_refuses_one_group(logs):
    with pytest.raises(DataError, match=r"jackknife by group: the 3 logs form 1 group\(s\) of condition 'load'"):
        arm_jackknife(ROBOT, logs, {"params": {}, "model": None, "per_joint": True, "param_sets": {}},
                      group_by=("load",))
    one = logs[:1]
    with pytest.raises(DataError, match="at least 2"):
        arm_jackknife(ROBOT, one, {"params": {}, "model": None, "per_joint": True, "param_sets": {}}, by="log")


def test_fit_unchanged_without_jackknife_and_written_with_it(logs, tmp_path, capsys):
    """The default whole-robot fit writes exactly the fit (no ``uncertainty``; parameters bit-identical to a
    direct fit_arm call); with the jackknife the same parameters and an ``uncertainty`` per joint."""
    ro = RobotFitOptions(ROBOT, max_evals=12, per_joint=True, horizon=40, max_windows=None)
    plain = _fit_robot(ROBOT, logs, tmp_path / "plain", "m1", 0, ro, None)
    direct = fit_arm(ROBOT, logs, model="m1", per_joint=True, max_evals=12, horizon=40, seed=0)
    assert "uncertainty" not in plain
    assert "uncertainty" not in json.loads((tmp_path / "plain" / "arm_model.json").read_text())
    assert plain["params"] == direct["params"]
    jk = _fit_robot(ROBOT, logs, tmp_path / "jk", "m1", 0, ro, None, ("log", ("excitation",)))
    assert jk["params"] == plain["params"]
    on_disk = json.loads((tmp_path / "jk" / "arm_model.json").read_text())
    u = on_disk["uncertainty"]
    assert u["by"] == "log" and u["n_resamples"] == 3 and set(u["stderr_natural"]) == set(plain["params"])
    for n, per in u["stderr_natural"].items():
        assert set(per) == JOINTS and all(np.isfinite(v) and v >= 0 for v in per.values())
    capsys.readouterr()
    _print_fit_robot(FitResult(jk, tmp_path / "jk", ROBOT))  # the fit's summary: one jackknife line
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("jackknife:")]
    assert len(lines) == 1 and "delete-one-log jackknife: 3 refits (10 CMA-ES evaluations each, per joint" in lines[0]
    n = next(iter(u["stderr_natural"]))
    assert f"{n} {np.median(list(u['stderr_natural'][n].values())):.3g}" in lines[0]

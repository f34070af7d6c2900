"""Selection by held-out condition groups and the log-level resampled uncertainty.

* leave-one-group-out never puts samples of one log on both sides of a fold;
* the selection picks a mechanism present in the synthetic truth (command delay) and rejects one
  that is absent (an encoder offset, on top of the delay), judged on held-out excitation groups;
* jackknife standard errors over whole logs are wider than the Jacobian ones when the residuals are
  autocorrelated and agree with them (within 30 %) when the residuals are white.
"""

from __future__ import annotations

import numpy as np
import pytest

from synthetic import TRUTH_M1, synthetic_set

from actuatorlab.identify import family, select
from actuatorlab.identify.identifiability import identifiability
from actuatorlab.identify.folds import condition_folds, group_jackknife, resampled_uncertainty
from actuatorlab.identify.search import SearchSettings
from actuatorlab.identify.select import FamilyOptions, SelectionBudget, fit_family

SPECS = [("chirp400", "chirp", 400), ("sine800", "sine", 800), ("drop400", "drop", 400),
         ("steps800", "steps", 800), ("chirp800", "chirp", 800), ("sine400", "sine", 400)]
TRUTH_DELAY = {**TRUTH_M1, "delay": 0.012}


@pytest.fixture(scope="module")
def delay_logs():
    return synthetic_set(SPECS, TRUTH_DELAY, duration=1.5, model="m1+delay")


def test_leave_one_group_out_never_splits_a_log(delay_logs):
    names = [t.name for t in delay_logs]
    folds = condition_folds(delay_logs, ("excitation", "gain"))
    assert len(folds) == 4 + 2  # four excitations, two gains
    for key in ("excitation", "gain"):
        kf = [f for f in folds if f.key == key]
        held = sorted(i for f in kf for i in f.heldout)
        assert held == list(range(len(names)))  # every log held out exactly once per tag
        for f in kf:
            assert not set(f.train) & set(f.heldout)
            assert sorted(f.train + f.heldout) == list(range(len(names)))
            value = f.label.split("=", 1)[1]
            assert all(delay_logs[i].conditions[key] == value for i in f.heldout)
            assert all(delay_logs[i].conditions[key] != value for i in f.train)
    # one tag value only: no leave-one-group-out folds (fit_family falls back to a split)
    assert condition_folds(delay_logs, ("load",)) == []


def test_leave_one_log_out_key_holds_out_each_log_once(delay_logs):
    folds = condition_folds(delay_logs, (select.LOG_KEY,))
    assert sorted(f.heldout for f in folds) == [(i,) for i in range(len(delay_logs))]
    assert all(f.label == f"log={delay_logs[f.heldout[0]].name}" for f in folds)
    for f in folds:
        assert not set(f.train) & set(f.heldout) and len(f.train) == len(delay_logs) - 1


@pytest.fixture()
def test_budget(monkeypatch):
    monkeypatch.setitem(select.SELECTION_BUDGETS, "test", SelectionBudget(300, 600, 10, 1))
    return "test"


def test_selection_keeps_a_true_delay_and_rejects_an_absent_offset(delay_logs, test_budget, monkeypatch):
    monkeypatch.setattr(family, "SELECTION_EXTENSIONS", ("delay", "offset"))
    sel = fit_family(delay_logs, ("m1",), FamilyOptions(budget=test_budget))
    row = {r["model"]: r for r in sel.table}
    assert sel.scheme == "logo" and len(sel.groups) == 4
    # no log of a held-out group is in that fold's training set
    for f in sel.folds:
        assert not {delay_logs[i].name for i in f.train} & {delay_logs[i].name for i in f.heldout}
    assert row["m1+delay"]["earns_place"] and row["m1+delay"]["gain_vs_parent"] > 0.3
    # an offset is not in the truth: on top of the delay it does not earn its place
    assert not row.get("m1+delay+offset", {"earns_place": False})["earns_place"]
    assert sel.selected == "m1+delay"
    assert sel.final.params["delay"] == pytest.approx(0.012, rel=0.15)
    # the leave-one-group-out refits double as a delete-a-group jackknife
    u = sel.uncertainty
    assert u["n_resamples"] == 4 and set(u["stderr"]) == set(sel.final.space.names)


def test_fits_side_by_side_give_the_results_of_fits_one_after_the_other(delay_logs, test_budget, monkeypatch):
    """SideBySide runs the single extensions of a base (and bases that do not contain each other)
    on two threads; every fit must start from the same fold optima and keep its own random stream,
    so the table and the final fit equal those of the walk one fit at a time, to the last digit."""
    monkeypatch.setattr(family, "SELECTION_EXTENSIONS", ("delay", "offset", "climit"))
    runs = {}
    for threads in (1, 2):
        monkeypatch.setattr(select, "WALK_THREADS", threads)
        sel = fit_family(delay_logs, ("m1", "m3", "m4"), FamilyOptions(budget=test_budget, workers=2))
        runs[threads] = ([(r["model"], r["parent"], r["validation_mae"], r["train_mae"], r["earns_place"])
                          for r in sel.table], sel.selected, sel.final.params)
    assert len(runs[1][0]) >= 6  # the walk fitted the bases and single extensions
    assert runs[2] == runs[1]


def test_log_jackknife_is_tight_when_the_model_contains_the_truth(delay_logs):
    p = {**TRUTH_M1, "delay": 0.012}
    from actuatorlab.models.params import neutral_params

    u = resampled_uncertainty(delay_logs, "m1+delay", {**neutral_params(), **p}, by="log",
                              search=SearchSettings(150, popsize=10, sigma0=0.05))
    assert u["n_resamples"] == len(delay_logs)
    for name in ("kt", "armature", "friction_viscous", "delay"):
        assert u["relative"][name] < 0.1, (name, u["relative"][name])


# ---------------------------------------------------------------------------------------------
# resampled vs Jacobian standard errors on a model with a closed-form fit (fast, exact refits)
# ---------------------------------------------------------------------------------------------


def _logs(rho: float, n_logs: int = 40, n: int = 200, seed: int = 0):
    """y = a x + b + e per log; x a slow sine with a random phase; e AR(1) with coefficient rho
    and unit marginal variance (rho = 0: white)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / n
    xs, ys = [], []
    for _ in range(n_logs):
        x = np.sin(2 * np.pi * (t + rng.uniform()))
        w = rng.normal(size=n)
        e = np.empty(n)
        e[0] = w[0]
        for k in range(1, n):
            e[k] = rho * e[k - 1] + np.sqrt(1 - rho**2) * w[k]
        xs.append(x)
        ys.append(2.0 * x + 0.5 + 0.1 * e)
    return xs, ys


def _fit(xs, ys):
    X = np.concatenate(xs)
    A = np.stack([X, np.ones_like(X)], 1)
    return np.linalg.lstsq(A, np.concatenate(ys), rcond=None)[0]


@pytest.mark.parametrize("rho", [0.0, 0.97])
def test_log_jackknife_vs_jacobian_standard_errors(rho):
    xs, ys = _logs(rho)
    theta = _fit(xs, ys)
    X, Y = np.concatenate(xs), np.concatenate(ys)
    jac = identifiability(lambda th: th[0] * X + th[1] - Y, theta, ["a", "b"])["stderr"]
    est = np.array([_fit(xs[:i] + xs[i + 1:], ys[:i] + ys[i + 1:]) for i in range(len(xs))])
    jk = group_jackknife(est, ["a", "b"], {"a": theta[0], "b": theta[1]})["stderr"]
    ratio = np.array([jk["a"] / jac["a"], jk["b"] / jac["b"]])
    if rho == 0.0:
        assert np.all(np.abs(ratio - 1.0) < 0.3), ratio
    else:  # ~ sqrt((1 + rho) / (1 - rho)) = 8 for independent samples; at least twice as wide
        assert np.all(ratio > 2.0), ratio


def test_run_fit_writes_selection_and_both_uncertainties(delay_logs, tmp_path, monkeypatch):
    import json

    from actuatorlab.logs import save_trajectory
    from actuatorlab.app.jobs import run_fit

    for t in delay_logs:
        save_trajectory(t, tmp_path / "logs" / f"{t.name}.parquet")
    monkeypatch.setitem(select.SELECTION_BUDGETS, "test", SelectionBudget(150, 300, 10, 1))
    monkeypatch.setitem(select.BUDGETS, "test", (300, 1, 0))
    monkeypatch.setattr(family, "LADDERS", {**family.LADDERS, "servo": ("m1", "m3")})
    monkeypatch.setattr(family, "SELECTION_EXTENSIONS", ("delay",))
    run_fit([tmp_path / "logs"], tmp_path / "run", options=FamilyOptions(budget="test"), jackknife="log")
    d = json.loads((tmp_path / "run" / "model.json").read_text())
    sel = d["selection"]
    assert sel["scheme"] == "logo" and sel["group_by"] == ["excitation"] and len(sel["groups"]) == 4
    assert {r["model"] for r in sel["table"]} >= {"m1", "m3", "m1+delay"}
    for r in sel["table"]:
        assert set(r["per_group"]) == {g["group"] for g in sel["groups"]}
    u = d["uncertainty"]
    assert u["method"].startswith("delete-one-log jackknife") and u["n_resamples"] == len(delay_logs)
    free = [n for n, e in d["parameters"].items() if e["free"]]
    for n in free:
        e = d["parameters"][n]
        assert e["stderr"] is not None and e["stderr_resampled"] is not None
        assert e["poorly_determined"] == (n in u["flagged"])
    assert "timestep_sensitivity" not in d  # only on request
    assert "resampled" in (tmp_path / "run" / "report.html").read_text()


def test_one_condition_group_falls_back_to_a_split_and_says_so(delay_logs, test_budget):
    same = [t for t in delay_logs if t.conditions["excitation"] == "chirp"]  # 2 logs, one group
    sel = fit_family(same, ("m1",), FamilyOptions(budget=test_budget, extensions=()))
    assert sel.scheme == "split" and sel.uncertainty is None and len(sel.folds) == 1
    # fewer than 3 logs: each is cut in time, the first 70 % fits and the last 30 % validates
    assert all(n.endswith("[:70%]") for n in sel.fit_names) and all(n.endswith("[70%:]") for n in sel.val_names)
    assert sel.final.model == "m1"
    p = sel.final.params  # kt and R trade off on chirps alone; their ratio (the stall torque / V) does not
    assert p["kt"] / p["R"] == pytest.approx(TRUTH_M1["kt"] / TRUTH_M1["R"], rel=0.1), (p["kt"], p["R"])


def test_unknown_options_name_what_exists(delay_logs):
    """Checked before any fit: the jackknife unit lists the units it accepts."""
    from actuatorlab.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="group"):
        resampled_uncertainty(delay_logs, "m1", {}, by="session")



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

from actuatorlab.identify import select
from actuatorlab.identify.identifiability import identifiability
from actuatorlab.identify.select import condition_folds, fit_family, group_jackknife, resampled_uncertainty

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


def test_fold_starts_never_worsen_a_fold_and_record_their_wins(delay_logs, monkeypatch):
    """More CMA-ES starts per fold: start 0 is the same search (same seeds), later starts only
    replace a fold's optimum when they beat it, so every fold's training objective is <= the
    one-start result; ``extras["starts"]`` counts which start won each fold."""
    monkeypatch.setitem(select.SELECTION_BUDGETS, "tiny", (80, 100, 8, 1))
    one = fit_family(delay_logs, ("m1",), budget="tiny", extensions=())
    two = fit_family(delay_logs, ("m1",), budget="tiny", extensions=(), fold_starts=2)
    assert one.extras["starts"]["m1"]["wins_per_start"] == [4]
    wins = two.extras["starts"]["m1"]["wins_per_start"]
    assert len(wins) == 2 and sum(wins) == 4
    assert two.extras["timing"]["fold_starts"] == 2
    assert two.fits["m1"].objective <= one.fits["m1"].objective + 1e-12
    assert two.extras["starts"]["m1"]["evaluations"] > one.extras["starts"]["m1"]["evaluations"]


def test_fold_seeds_score_each_group_over_independent_replicas(delay_logs, monkeypatch):
    """``fold_seeds=3``: every fold is searched 3 times with different CMA-ES seeds; a model's
    score on a group is the mean (or median) of its replicas' held-out MAE, and the final refit
    picks among ``final_seeds`` searches. (Replica 0 uses the one-seed search's CMA-ES seeds but
    not bit for bit its float32 batches, so it is not asserted equal to it.)"""
    monkeypatch.setitem(select.SELECTION_BUDGETS, "tiny", (80, 100, 8, 1))
    one = fit_family(delay_logs, ("m1",), budget="tiny", extensions=())
    three = fit_family(delay_logs, ("m1",), budget="tiny", extensions=(), fold_seeds=3)
    med = fit_family(delay_logs, ("m1",), budget="tiny", extensions=(), fold_seeds=3, fold_score="median",
                     final_seeds=3, final_pick="medoid")
    r1, r3, rm = (s.table[0] for s in (one, three, med))
    assert "per_group_seeds" not in r1 and three.extras["timing"]["fold_seeds"] == 3
    assert len(three.fold_params["m1"]) == 3 * len(three.folds)
    for g, reps in r3["per_group_seeds"].items():
        assert len(reps) == 3
        assert r3["per_group"][g] == pytest.approx(np.mean(reps))
        assert rm["per_group"][g] == pytest.approx(np.median(rm["per_group_seeds"][g]))
    assert len(set(map(tuple, r3["per_group_seeds"].values()))) > 1  # the replicas differ
    fs = med.extras["starts"]["final seeds"]
    assert len(fs["objective"]) == 3 and fs["rule"] == "medoid" and 0 <= fs["picked"] < 3
    with pytest.raises(Exception, match="median"):
        fit_family(delay_logs, ("m1",), budget="tiny", extensions=(), fold_score="mode")


def test_final_evals_sets_the_refits_budget_and_never_the_selection(delay_logs, monkeypatch):
    """``final_evals``: the final all-logs refit gets that many evaluations per start (recorded in
    ``timing``), the fold searches and so the selection table are those of the default; an explicit
    budget below one evaluation is an error."""
    monkeypatch.setitem(select.SELECTION_BUDGETS, "tiny", (80, 400, 8, 1))
    full = fit_family(delay_logs, ("m1",), budget="tiny", extensions=())
    short = fit_family(delay_logs, ("m1",), budget="tiny", extensions=(), final_evals=24)
    assert full.extras["timing"]["final_evals"] == 400 and short.extras["timing"]["final_evals"] == 24
    assert short.table[0]["per_group"] == pytest.approx(full.table[0]["per_group"])
    starts = short.extras["starts"]["final (all data)"]
    assert starts["evaluations"] <= 24 * len(starts["wins_per_start"]) + 8 * len(starts["wins_per_start"])
    assert full.final.evaluations > short.final.evaluations
    assert full.final.objective <= short.final.objective + 1e-9  # same seeded search, run longer: never worse
    with pytest.raises(Exception, match="final_evals"):
        fit_family(delay_logs, ("m1",), budget="tiny", extensions=(), final_evals=0)


def test_fold_init_all_starts_every_fold_from_the_all_logs_fit(delay_logs, monkeypatch):
    """``fold_init="all"``: each model is first fitted on all logs, every fold refines that optimum;
    the fold optima then stay near it (they differ by data, not by the optimizer's path)."""
    monkeypatch.setitem(select.SELECTION_BUDGETS, "tiny", (80, 100, 8, 1))
    sel = fit_family(delay_logs, ("m1",), budget="tiny", extensions=(), fold_init="all")
    assert sel.extras["timing"]["fold_init"] == "all" and sel.scheme == "logo"
    kt = np.array([p["kt"] for p in sel.fold_params["m1"]])
    assert np.ptp(kt) / np.mean(kt) < 0.5
    assert np.isfinite(sel.table[0]["validation_mae"])


@pytest.fixture()
def test_budget(monkeypatch):
    monkeypatch.setitem(select.SELECTION_BUDGETS, "test", (300, 600, 10, 1))
    return "test"


def test_selection_keeps_a_true_delay_and_rejects_an_absent_offset(delay_logs, test_budget, monkeypatch):
    monkeypatch.setattr(select, "SELECTION_EXTENSIONS", ("delay", "offset"))
    sel = fit_family(delay_logs, ("m1",), budget=test_budget)
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


def test_log_jackknife_is_tight_when_the_model_contains_the_truth(delay_logs):
    p = {**TRUTH_M1, "delay": 0.012}
    from actuatorlab.models.params import neutral_params

    u = resampled_uncertainty(delay_logs, "m1+delay", {**neutral_params(), **p}, by="log", max_evals=150)
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
    monkeypatch.setitem(select.SELECTION_BUDGETS, "test", (150, 300, 10, 1))
    monkeypatch.setitem(select.BUDGETS, "test", (300, 1, 0))
    monkeypatch.setattr(select, "LADDERS", {**select.LADDERS, "servo": ("m1", "m3")})
    monkeypatch.setattr(select, "SELECTION_EXTENSIONS", ("delay",))
    run_fit([tmp_path / "logs"], tmp_path / "run", budget="test", jackknife="log")
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
    sel = fit_family(same, ("m1",), budget=test_budget, extensions=())
    assert sel.scheme == "split" and sel.uncertainty is None and len(sel.folds) == 1
    # fewer than 3 logs: each is cut in time, the first 70 % fits and the last 30 % validates
    assert all(n.endswith("[:70%]") for n in sel.fit_names) and all(n.endswith("[70%:]") for n in sel.val_names)
    assert sel.final.model == "m1"
    p = sel.final.params  # kt and R trade off on chirps alone; their ratio (the stall torque / V) does not
    assert p["kt"] / p["R"] == pytest.approx(TRUTH_M1["kt"] / TRUTH_M1["R"], rel=0.1), (p["kt"], p["R"])


def test_unknown_options_name_what_exists(delay_logs):
    """Checked before any fit: each optimizer-noise option lists the names it accepts."""
    from actuatorlab.errors import ActuatorlabError, UnknownNameError

    for kw, listed in ((dict(fold_score="mode"), "mean"), (dict(fold_init="best"), "all"),
                       (dict(final_pick="last"), "medoid"), (dict(train_objective="dro"), "mean_std"),
                       (dict(select_rule="aic"), "one_se")):
        with pytest.raises(UnknownNameError, match=listed):
            fit_family(delay_logs, ("m1",), budget="quick", **kw)
    for kw in (dict(fold_seeds=0), dict(final_seeds=0), dict(fold_seeds=-2)):  # 0 is not "the default"
        with pytest.raises(ActuatorlabError, match="must be >= 1"):
            fit_family(delay_logs, ("m1",), budget="quick", **kw)
    with pytest.raises(UnknownNameError, match="group"):
        resampled_uncertainty(delay_logs, "m1", {}, by="session")


def test_group_objectives_are_the_hand_computed_aggregates_over_the_selected_groups():
    """objective_from_sums with condition groups: pooled ignores them; mean_std and worst combine
    each selected group's pooled MAE (hand-computed); a deselected log's group does not count; one
    selected group reduces to the pooled objective."""
    from actuatorlab.errors import UnknownNameError
    from actuatorlab.identify.fit import SPREAD_WEIGHT, objective_from_sums

    n = np.array([10.0, 30.0, 20.0, 40.0])
    groups = np.array([0, 0, 1, 2])
    abs_q = np.array([[1.0, 5.0, 4.0, 40.0],    # per-group MAE: (1 + 5) / 40 = 0.15, 0.2, 1.0
                      [2.0, 2.0, 10.0, 4.0]])   # 0.1, 0.5, 0.1
    sums = {"abs_q": abs_q, "sq_q": abs_q, "sq_u": abs_q}
    w = np.ones(4)
    pooled = objective_from_sums(sums, n, w, groups=groups, aggregate="pooled")
    assert pooled == pytest.approx([50 / 100, 18 / 100])
    g0 = np.array([0.15, 0.2, 1.0])
    g1 = np.array([0.1, 0.5, 0.1])
    ms = objective_from_sums(sums, n, w, groups=groups, aggregate="mean_std")
    assert ms == pytest.approx([g0.mean() + SPREAD_WEIGHT * g0.std(), g1.mean() + SPREAD_WEIGHT * g1.std()])
    assert objective_from_sums(sums, n, w, groups=groups, aggregate="worst") == pytest.approx([1.0, 0.5])
    # the worst-group objective prefers the candidate the pooled one ranks second
    assert np.argmin(pooled) == 1 and np.argmin(objective_from_sums(sums, n, w, groups=groups, aggregate="worst")) == 1
    w_no_last = np.array([1.0, 1.0, 1.0, 0.0])  # group 2 deselected
    assert objective_from_sums(sums, n, w_no_last, groups=groups, aggregate="worst") == pytest.approx([0.2, 0.5])
    only_first = np.array([1.0, 1.0, 0.0, 0.0])
    for agg in ("mean_std", "worst"):
        assert objective_from_sums(sums, n, only_first, groups=groups, aggregate=agg) == pytest.approx(
            objective_from_sums(sums, n, only_first))
    with pytest.raises(UnknownNameError, match="worst"):
        objective_from_sums(sums, n, w, groups=groups, aggregate="minimax")


def test_worst_group_objective_lowers_the_worst_training_group(delay_logs, monkeypatch):
    """fit_family(train_objective="worst"): every fit minimises its worst training group. m1 fitted
    to logs made with a command delay misfits the excitation groups unequally; the worst-group
    refit lowers the worst group's MAE (by more than 5 %) and pays for it in pooled MAE, which the
    pooled refit minimises. The choice is recorded in ``timing``."""
    from actuatorlab.identify.fit import make_loss
    from actuatorlab.identify.select import group_ids
    from actuatorlab.sim.rollout import make_batches

    monkeypatch.setitem(select.SELECTION_BUDGETS, "tiny", (80, 600, 8, 1))
    logs = list(delay_logs)
    runs = {obj: fit_family(logs, ("m1",), budget="tiny", extensions=(), train_objective=obj)
            for obj in ("pooled", "worst")}
    ids = group_ids(logs)
    assert ids.tolist() == [0, 1, 2, 3, 0, 1]  # chirp, sine, drop, steps, chirp, sine

    def worst(sel):
        out = []
        for g in np.unique(ids):
            part = [t for t, i in zip(logs, ids) if i == g]
            b = make_batches(part, sel.final.dt)
            out.append(float(make_loss(sel.final.spec, sel.final.space, b)(sel.final.theta)))
        return max(out), out

    w_pooled, per_pooled = worst(runs["pooled"])
    w_worst, per_worst = worst(runs["worst"])
    assert runs["worst"].extras["timing"]["train_objective"] == "worst"
    assert runs["pooled"].extras["timing"]["train_objective"] == "pooled"
    # measured: worst group 31.9 -> 28.0 mrad, pooled MAE 24.7 -> 26.1 mrad: the trade
    assert w_worst < 0.95 * w_pooled, (per_pooled, per_worst)
    assert runs["pooled"].final.train_mae < runs["worst"].final.train_mae


def test_one_se_rule_picks_the_simplest_model_within_a_paired_standard_error():
    """one_se_choice by hand: with b = m5 (lowest mean), m3's paired differences (1, -1, 1, -1)
    have mean 0 <= sd / 2, so m3 (fewer free parameters) is chosen; with (1, 0, 1, 0) the mean 0.5
    exceeds sd / 2 = 0.29 and m5 stays; a model with non-finite scores is never chosen."""
    from actuatorlab.identify.select import SELECT_RULES, one_se_choice

    nf = {"m1": 3, "m3": 5, "m5": 8}
    sc = {"m1": np.array([10.0, 10, 10, 10]), "m3": np.array([9.0, 7, 10, 8]), "m5": np.array([8.0, 8, 9, 9])}
    assert one_se_choice(sc, nf, "m5") == "m3"
    assert SELECT_RULES["best"](sc, nf, "m5") == "m5"
    sc["m3"] = np.array([9.0, 8, 10, 9])
    assert one_se_choice(sc, nf, "m5") == "m5"
    sc["m1"] = np.array([8.0, np.inf, 9, 9])
    assert one_se_choice(sc, nf, "m5") == "m5"

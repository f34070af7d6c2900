"""Motor-condition detection: the 20 window features against a hand computation, exact 64/32
window segmentation, the current threshold on a case with a known answer, baselines that never see
test windows (standardization or fitting), the condition head's supervised training, the synth
restricted/normal pairs (the suite's own files unchanged) and the CLI's --json keys; the learned
detector's calibration (causal smoothing, thresholds chosen from validation scores alone, applied
by run_condition, refused on evaluated logs), twin-pair training (frame-aligned twin rows), the
residual input tau_ext and the online ConditionMonitor (the offline numbers, one frame at a time).

One small synthetic dataset (smoke suite + 3 restricted/normal pairs of 4 s) is generated once
for the module; the learned model is a tiny MLP."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from actuatorlab.errors import DataError
from actuatorlab.estimate.condition import run_condition
from actuatorlab.estimate.condition_calibrate import (_best_threshold, calibrate_condition, calibrated_scores,
                                                      leave_one_log_out_windows, log_verdicts, position_spread,
                                                      smooth_scores)
from actuatorlab.estimate.condition_windows import (FEATURE_NAMES, STRIDE, WINDOW, ConditionLog, CurrentThreshold,
                                                    fit_baselines, log_windows, window_features, window_starts)


def job_config(path, fields: dict) -> str:
    """A ``--config`` file holding ``fields`` (a job's options without a flag)."""
    path.write_text(json.dumps(fields))
    return str(path)


MJCF = Path(__file__).resolve().parents[2] / "shared" / "models" / "open_manipulator_x" / "open_manipulator_x.xml"
ROBOT = "open_manipulator_x"


def _reference_features(i, e, q, v, dt):
    """The docstring's formulas with plain Python loops (an independent implementation)."""
    N = len(i)
    mean = lambda a: sum(a) / len(a)  # noqa: E731
    std = lambda a: math.sqrt(mean([(x - mean(a)) ** 2 for x in a]))  # noqa: E731

    def slope(x, y, eps):
        mx, my = mean(x), mean(y)
        return mean([(a - mx) * (b - my) for a, b in zip(x, y)]) / (mean([(a - mx) ** 2 for a in x]) + eps)

    t = [n * dt for n in range(N)]
    ic = [x - mean(i) for x in i]
    P, f = [], []
    for k in range(1, N // 2 + 1):
        re = sum(ic[n] * math.cos(2 * math.pi * k * n / N) for n in range(N))
        im = sum(ic[n] * math.sin(2 * math.pi * k * n / N) for n in range(N))
        P.append(re * re + im * im)
        f.append(k / (N * dt))
    tot = sum(P)
    p = [x / tot for x in P]
    return [mean(i), mean([abs(x) for x in i]), std(i), math.sqrt(mean([x * x for x in i])), max(i) - min(i),
            mean(e), mean([abs(x) for x in e]), std(e), max(abs(x) for x in e),
            slope(t, i, 0.0), slope(t, e, 0.0),
            sum(1 for n in range(1, N) if ic[n] * ic[n - 1] < 0) / (N - 1), max(q) - min(q), mean([abs(x) for x in v]),
            sum(a * b for a, b in zip(f, P)) / tot, sum(b for a, b in zip(f, P) if a <= 5.0) / tot,
            -sum(x * math.log(x) for x in p if x > 0) / math.log(N // 2),
            slope(q, i, 1e-6), slope(v, i, 1e-6), mean([a * b for a, b in zip(i, v)])]


def test_features_match_a_hand_computed_window():
    dt, N = 0.01, WINDOW
    n = np.arange(N)
    q = 0.01 * n                         # [rad] a ramp at 1 rad/s
    i = 0.3 + 0.5 * q                    # [A] current proportional to displacement: a 0.5 A/rad "spring"
    e = 0.01 * (-1.0) ** n               # [rad] alternating tracking error
    v = np.ones(N)                       # [rad/s]
    x = dict(zip(FEATURE_NAMES, window_features(i, e, q, v, dt)))
    assert len(FEATURE_NAMES) == 20 and len(set(FEATURE_NAMES)) == 20
    # closed forms of this window
    assert x["i_mean"] == pytest.approx(0.3 + 0.5 * 0.315)
    assert x["i_p2p"] == pytest.approx(0.5 * 0.63)
    assert x["i_trend"] == pytest.approx(0.5)                      # 0.5 A/rad x 1 rad/s
    assert x["k_current"] == pytest.approx(0.5, rel=1e-4)          # the spring, eps = 1e-6 rad^2 aside
    assert x["b_current"] == pytest.approx(0.0, abs=1e-12)         # constant speed: no velocity information
    assert x["power"] == pytest.approx(x["i_mean"])                # v = 1
    assert x["i_crossings"] == pytest.approx(1 / 63)               # a ramp crosses its mean once
    assert x["e_mean"] == pytest.approx(0.0, abs=1e-15) and x["e_absmean"] == pytest.approx(0.01)
    assert x["e_std"] == pytest.approx(0.01) and x["e_absmax"] == pytest.approx(0.01)
    assert x["q_range"] == pytest.approx(0.63) and x["v_absmean"] == pytest.approx(1.0)
    # every feature against the loop implementation, on this window and on a random one
    ref = _reference_features(list(i), list(e), list(q), list(v), dt)
    np.testing.assert_allclose(window_features(i, e, q, v, dt), ref, rtol=1e-9, atol=1e-12)
    rng = np.random.default_rng(0)
    r = [rng.standard_normal(N) for _ in range(4)]
    np.testing.assert_allclose(window_features(*r, dt), _reference_features(*map(list, r), dt), rtol=1e-9,
                               atol=1e-12)
    # batched over leading axes
    b = window_features(np.stack([i, r[0]]), np.stack([e, r[1]]), np.stack([q, r[2]]), np.stack([v, r[3]]), dt)
    np.testing.assert_allclose(b[1], _reference_features(*map(list, r), dt), rtol=1e-9, atol=1e-12)


def _log(name, T, cur, restricted, rng=None):
    """A ConditionLog with given current (T, C) and zero motion."""
    C = cur.shape[1]
    z = np.zeros((T, C))
    return ConditionLog(name, f"/data/{name}.parquet", tuple(f"joint{c + 1}" for c in range(C)), 0.01, z, z, z, cur,
                        np.asarray(restricted, bool))


def test_window_segmentation_is_64_steps_with_50_percent_overlap():
    assert WINDOW == 64 and STRIDE == 32
    assert window_starts(200).tolist() == [0, 32, 64, 96, 128]      # 160 + 64 > 200
    assert window_starts(64).tolist() == [0] and window_starts(63).tolist() == []
    assert window_starts(96).tolist() == [0, 32] and window_starts(95).tolist() == [0]
    T = 250
    cur = np.stack([np.arange(T, dtype=float), -np.arange(T, dtype=float)], axis=1)
    X, y, s = log_windows(_log("a", T, cur, [False, True]))
    assert s.tolist() == list(range(0, T - 64 + 1, 32))
    # window w holds samples s_w .. s_w + 63 exactly: its mean current is s_w + 31.5, its p2p 63
    np.testing.assert_allclose(X[:, 0, FEATURE_NAMES.index("i_mean")], s + 31.5)
    np.testing.assert_allclose(X[:, 0, FEATURE_NAMES.index("i_p2p")], 63.0)
    np.testing.assert_allclose(X[:, 1, FEATURE_NAMES.index("i_mean")], -(s + 31.5))
    assert y.tolist() == [[0, 1]] * len(s)


def test_current_threshold_separates_a_known_case():
    rng = np.random.default_rng(1)
    k = FEATURE_NAMES.index("i_absmean")
    X = rng.standard_normal((200, 20))
    y = np.r_[np.zeros(150, int), np.ones(50, int)]
    X[:, k] = np.where(y == 1, rng.uniform(0.5, 0.8, 200), rng.uniform(0.1, 0.3, 200))
    m = CurrentThreshold().fit(X, y)
    assert m.sign_ == 1.0 and 0.3 <= m.threshold_ <= 0.5 and m.youden_ == pytest.approx(1.0)
    Xt = rng.standard_normal((100, 20))
    yt = rng.integers(0, 2, 100)
    Xt[:, k] = np.where(yt == 1, rng.uniform(0.52, 0.8, 100), rng.uniform(0.1, 0.28, 100))
    assert (m.predict(Xt) == yt).all()
    # restricted = LOWER current: the direction flips
    X[:, k] = np.where(y == 1, 0.1, 0.6) + 0.01 * rng.standard_normal(200)
    m = CurrentThreshold().fit(X, y)
    assert m.sign_ == -1.0 and (m.predict(X) == y).all()


def _windows_dataset(seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((120, 2, 20))
    y = np.zeros((120, 2), int)
    y[60:, 1] = 1
    X[60:, 1, 3] += 2.0  # a separable shift on channel 2
    return X, y


def test_baselines_never_see_test_windows(monkeypatch):
    Xtr, ytr = _windows_dataset(0)
    models = fit_baselines(Xtr, ytr, seed=0)
    for name in ("svm", "random_forest"):
        assert models[name].models[0] is None           # channel 1: one class only -> constant "normal"
        scaler = models[name].models[1][0]
        np.testing.assert_allclose(scaler.mean_, Xtr[:, 1].mean(0))  # training statistics only
        np.testing.assert_allclose(scaler.scale_, Xtr[:, 1].std(0))
    Xte, _ = _windows_dataset(1)
    s1 = {k: m.scores(Xte) for k, m in models.items()}
    Xte2 = Xte.copy()
    Xte2[::2] *= 50.0                                   # other test windows change wildly
    s2 = {k: m.scores(Xte2) for k, m in models.items()}
    for k in s1:
        np.testing.assert_array_equal(s1[k][1::2], s2[k][1::2])  # no test statistic leaks into a score
        assert (s1[k][:, 0] < 0).all()                   # constant normal
    # end to end: every array handed to any fit() holds training windows only
    from sklearn.pipeline import Pipeline

    import actuatorlab.estimate.condition_windows as cond

    seen = []
    orig_p, orig_t = Pipeline.fit, cond.CurrentThreshold.fit
    def spy_p(self, X, y=None, **kw):
        seen.append(np.array(X))
        return orig_p(self, X, y, **kw)

    def spy_t(self, X, y):
        seen.append(np.array(X))
        return orig_t(self, X, y)

    monkeypatch.setattr(Pipeline, "fit", spy_p)
    monkeypatch.setattr(cond.CurrentThreshold, "fit", spy_t)
    rng = np.random.default_rng(2)
    T = 400

    def mk(name, restricted):
        shift = np.array([0.0, 3.0]) if restricted else 0.0
        return _log(name, T, rng.standard_normal((T, 2)) + shift, [False, restricted])

    train = [mk("tr0", False), mk("tr1", True), mk("tr2", False), mk("tr3", True)]
    test = [mk("te0", False), mk("te1", True)]
    res = run_condition(None, test, train_logs=train)
    Xtrain = np.concatenate([log_windows(lg)[0][:, 1] for lg in train])
    Xtest = np.concatenate([log_windows(lg)[0][:, 1] for lg in test])
    assert len(seen) == 3                                # threshold, SVM, forest on channel 2 only
    for X in seen:
        np.testing.assert_array_equal(X, Xtrain)
        assert not any((X == row).all(1).any() for row in Xtest)
    assert set(res) >= {"current_threshold", "svm", "random_forest"} and "learned" not in res
    assert res["random_forest"]["auc"] > 0.95 and res["current_threshold"]["by_channel"]["joint2"]["recall"] > 0.9
    # the same file as training and test log is refused
    with pytest.raises(DataError, match="both a training and an evaluated log"):
        run_condition(None, [train[0]], train_logs=train)
    # the same name with other samples (a second unit's log of the same synthetic trajectory) is accepted
    import dataclasses

    other = dataclasses.replace(train[1], current=train[1].current + 0.01)
    assert run_condition(None, [other, test[0]], train_logs=train)["random_forest"]["n_windows"] > 0


# ----------------------------------------------------------------------------------------------
# Virtual hardware: synth pairs, the learned head, the CLI
# ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    if not MJCF.is_file():
        pytest.skip("../shared/models/open_manipulator_x is not present")
    from actuatorlab.synth import run_synth

    root = tmp_path_factory.mktemp("cond")
    run_synth(ROBOT, "smoke", root / "plain", seed=0)
    s = run_synth(ROBOT, "smoke", root / "pairs", seed=0, scale=0.01, restricted_pairs=3)
    assert s["n_trajectories"] == 4 + 6 and s["restricted_pairs"] == 3
    return root


def _hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*.*")) if p.suffix in (".parquet", ".json") and p.name != "dataset.json"}


def test_restricted_pairs_leave_the_suite_untouched(data):
    plain, pairs = _hashes(data / "plain"), _hashes(data / "pairs")
    assert plain and all(pairs.get(k) == v for k, v in plain.items())   # same files, same bytes, same split
    extra = sorted(k for k in pairs if k not in plain)
    assert len(extra) == 12                                             # 6 trajectories x (parquet + json)
    card = json.loads((data / "pairs" / "dataset.json").read_text())
    recs = {r["name"]: r for r in card["trajectories"] if r["name"].startswith("cond_")}
    for n, r in recs.items():
        if r["restricted"]:
            twin = recs[n.replace("cond_restricted_", "cond_normal_")]
            assert twin["split"] == r["split"] and twin["pair"] == r["pair"] == n and not twin["restricted"]
            assert r["conditions"]["restricted"] == "restricted_joint3"
    assert {r["split"] for r in recs.values()} == {"train", "val", "test"}
    assert "restricted_pairs" not in json.loads((data / "plain" / "dataset.json").read_text())


@pytest.fixture(scope="module")
def tiny_model(data):
    from actuatorlab.learned.arm import save_arm_model
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision
    from actuatorlab.robots import load_robot
    from actuatorlab.estimate.condition_train import make_condition_model

    with physics_precision():
        r = load_robot(ROBOT)
        trajs = load_logs([data / "pairs" / "train"])
        m = make_condition_model(r, trajs, arch="mlp", sizes=dict(width=16, depth=1, d=16, head_width=16),
                                 history=2)
        save_arm_model(data / "model", ROBOT, m, None)
    return r, m, trajs


def test_condition_head_training_learns_and_keeps_the_other_heads(tiny_model, data):
    import jax
    from actuatorlab.estimate.condition_train import ConditionTrainConfig, train_condition_head
    from actuatorlab.estimate.condition_train import teacher_forced as _teacher_forced
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision

    r, m, trajs = tiny_model
    with physics_precision():
        new, info = train_condition_head(r, m, trajs, ConditionTrainConfig(steps=60, batch=128, lr=3e-3, scope="head",
                                                                           eval_every=20),
                                         val_trajs=load_logs([data / "pairs" / "val"]))
        X, Y = _teacher_forced(r, m, trajs)
        f = lambda net: jax.vmap(lambda w: net(m.normalizer.apply(w)))(X[:256])  # noqa: E731
        h0, h1 = f(m.net), f(new.net)
    # only the condition head moved: effort, force and gate outputs are bit-identical
    for a, b in ((h0.torque, h1.torque), (h0.force_raw, h1.force_raw), (h0.gate_logit, h1.gate_logit)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.array_equal(np.asarray(h0.condition_logit), np.asarray(h1.condition_logit))
    assert info["n_restricted"] > 0 and np.mean(info["loss"][-10:]) < 0.8 * np.mean(info["loss"][:5])
    # the teacher-forced training windows are exactly what the causal online estimator sees
    from actuatorlab.estimate.condition_windows import condition_log
    from actuatorlab.estimate.condition_train import learned_frame_scores

    with physics_precision():
        lg = condition_log(r, trajs[0], new.layout.channels)
        online = learned_frame_scores(r, new, lg)
        Xl, _ = _teacher_forced(r, new, trajs[:1])
        batch = jax.nn.sigmoid(jax.vmap(lambda w: new.net(new.normalizer.apply(w)).condition_logit)(Xl))
    np.testing.assert_allclose(online, np.asarray(batch), rtol=1e-5, atol=1e-6)
    # early stopping: the returned parameters are those of the lowest validation loss
    steps, vals = zip(*info["val"])
    assert steps == (0, 20, 40, 60) and info["best_step"] == steps[int(np.argmin(vals))]


def test_cli_condition_json_keys_and_report(data, tiny_model, capsys):
    from actuatorlab.app.cli import main

    d = data / "pairs"
    rep = data / "out" / "condition.html"
    capsys.readouterr()
    rc = main(["condition", str(data / "model" / "arm_model.json"), str(d / "test"), "--robot", ROBOT,
               "--train", str(d / "train"), "--json", "--report", str(rep),
               "--config", job_config(data / "frames.json", {"options": {"frames_csv": str(data / "out" / "f.csv"),
                                                                          "use_calibration": False}})])  # the model's own head (the default trains a detector)
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    for method in ("learned", "current_threshold", "svm", "random_forest"):
        assert {"accuracy", "precision", "recall", "auc"} <= set(out[method])
        assert out[method]["n_windows"] > 0 and out[method]["n_restricted"] > 0
        assert 0.0 <= out[method]["auc"] <= 1.0
    logs = {lg["log"]: lg for lg in out["logs"]}
    assert any(lg["label"]["joint3"] for lg in logs.values())
    assert all(set(lg["verdict"]) == {"joint1", "joint2", "joint3", "joint4"} for lg in logs.values())
    al = out["learned"]["alarms"]
    assert al["restricted"]["n"] == sum(lg["label"]["joint3"] for lg in logs.values())
    assert al["warmup_s"] == pytest.approx(0.03)                       # the tiny model's window: 3 frames
    html = rep.read_text()
    assert "ROC curves" in html and html.count("actuatorlab-figure") >= 2 and "<script src=\"plotly-" in html
    assert "Per-frame alarm" in html
    assert (data / "out" / "f.csv").read_text().startswith("log,time,condition/joint1")
    rc = main(["condition", str(data / "model" / "arm_model.json"), str(d / "test"), "--robot", ROBOT])
    assert rc == 0 and "per-frame alarm (after a 0.03 s warm-up)" in capsys.readouterr().out
    rc = main(["condition", str(data / "model" / "arm_model.json"), str(d / "test"), "--robot", ROBOT,
               "--config", job_config(data / "hold.json", {"options": {"alarm_hold_s": 0.05}})])
    assert rc == 0 and "raised after 0.05 s below the threshold" in " ".join(capsys.readouterr().out.split())
    rc = main(["condition", str(data / "model" / "arm_model.json"), str(d / "test"), "--robot", ROBOT,
               "--config", job_config(data / "hold_bad.json", {"options": {"alarm_hold_s": -1}})])
    assert rc == 2 and "alarm hold" in capsys.readouterr().err
    # training and evaluated logs must differ
    rc = main(["condition", str(data / "model" / "arm_model.json"), str(d / "train"), "--robot", ROBOT,
               "--train", str(d / "train"), "--json"])
    assert rc == 2 and "both a training and an evaluated log" in capsys.readouterr().err


def test_report_heads_holds_force_and_condition_parts(data, tiny_model, capsys):
    from actuatorlab.app.cli import main

    d = data / "pairs"
    rep = data / "out" / "heads.html"
    capsys.readouterr()
    rc = main(["report-heads", str(data / "model" / "arm_model.json"), str(d / "test"), "--robot", ROBOT,
               "--train", str(d / "train"), "--out", str(rep), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["force"]["force_mae"]) == {"learned", "id_linear", "id_friction", "momentum_observer"}
    assert {"learned", "random_forest"} <= set(out["condition"]) and out["condition"]["learned"]["n_windows"] > 0
    html = rep.read_text()
    # both reports' parts, in one page with plotly.js inlined (no sibling file needed)
    for part in ("End-effector force", "Force traces", "fig-force-", "learned gate", "force MAE [N]",
                 "Motor-condition detection", "ROC curves", 'data-target="fig-roc"', "Per-log verdicts"):
        assert part in html, part
    assert html.index('id="force"') < html.index('id="condition"') and '<script src="plotly-' not in html
    n_logs = out["force"]["n_logs"]
    assert html.count("fig-force-") >= 2 * min(n_logs, 12) and out["condition"]["n_logs"] == n_logs


# ----------------------------------------------------------------------------------------------
# Calibration on validation logs, twin-pair training
# ----------------------------------------------------------------------------------------------

def test_smoothing_is_a_causal_moving_mean():
    rng = np.random.default_rng(0)
    s = rng.uniform(size=(50, 3))
    for n in (1, 2, 7, 80):
        out = smooth_scores(s, n)
        ref = np.stack([s[max(0, k - n + 1):k + 1].mean(0) for k in range(50)])
        np.testing.assert_allclose(out, ref, rtol=1e-12)
    s2 = s.copy()
    s2[30:] = 0.0                                          # a change in the future leaves the past alone
    np.testing.assert_array_equal(smooth_scores(s2, 7)[:30], smooth_scores(s, 7)[:30])
    with pytest.raises(ValueError):
        smooth_scores(s, 0)


def _val_scores(rng, n_logs=8, T=400):
    """Validation logs whose restricted channel 1 scores 0.30 +- 1.0 frame noise, normal 0.62 +- 1.0
    (channel 0: always normal, scores near 1): 64-frame windows still overlap, longer means separate."""
    fs, labs = [], []
    for k in range(n_logs):
        r = bool(k % 2)
        c1 = (0.30 if r else 0.62) + 1.0 * rng.standard_normal(T)
        fs.append(np.stack([0.95 + 0.01 * rng.standard_normal(T), c1], axis=1))
        labs.append(np.array([False, r]))
    return fs, labs


def test_calibration_is_chosen_on_the_validation_scores_alone():
    rng = np.random.default_rng(1)
    fs, labs = _val_scores(rng)
    cal = calibrate_condition(fs, labs, 0.01, log_odds=False)   # the plain means (scores here leave [0, 1])
    # channel 0 has one class: only channel 1 counts; smoothing helps against frame noise, so the
    # longest window wins, and both thresholds fall between the class means 0.30 and 0.62
    assert cal["channels_used"] == [1]
    aucs = cal["val"]["window_auc"]
    assert aucs["0"] < 0.97 < aucs["4"] and list(aucs) == ["0", "0.25", "0.5", "1", "2", "4", "8"]
    best = max(aucs.values())
    assert cal["smooth_s"] == min(float(k) for k, v in aucs.items() if v == best)    # ties: the shorter window
    assert 0.30 < cal["window_threshold"] < 0.62 and 0.30 < cal["verdict_threshold"] < 0.62
    assert cal["val"]["log_accuracy"] == 1.0 and cal["val"]["n_logs"] == 8
    # the calibration depends on the validation scores only: shifting them moves the thresholds
    cal2 = calibrate_condition([f - 0.2 for f in fs], labs, 0.01, log_odds=False)
    assert cal2["verdict_threshold"] == pytest.approx(cal["verdict_threshold"] - 0.2, abs=0.05)
    # a lone class on every channel cannot be calibrated
    with pytest.raises(DataError, match="both conditions"):
        calibrate_condition(fs[::2], labs[::2], 0.01)
    # verdict threshold: midway in the widest gap between the per-log scores
    last = [log_verdicts(smooth_scores(f, 400), 0.01, 5.0)[0][1] for f in fs]
    hi_r = max(v for v, lab in zip(last, labs) if lab[1])
    lo_n = min(v for v, lab in zip(last, labs) if not lab[1])
    assert hi_r < cal["verdict_threshold"] < lo_n


def test_min_recall_operating_point_trades_false_alarms_for_recall():
    # restricted (positive) scores 0.1 .. 0.9 and normal scores 0.5 .. 1.3 overlap; restricted iff
    # score < threshold. Balanced accuracy picks a threshold inside the overlap; min_recall = 0.9
    # must call at least 90 % of the restricted windows, with as few normal ones as that allows.
    pos = np.linspace(0.1, 0.9, 9)
    neg = np.linspace(0.5, 1.3, 9)
    s = np.r_[pos, neg]
    y = np.r_[np.ones(9, bool), np.zeros(9, bool)]
    thr_b, _ = _best_threshold(s, y, balanced=True)
    thr_r, _ = _best_threshold(s, y, balanced=True, min_recall=0.9)
    rec = lambda t: float((pos < t).mean())  # noqa: E731
    fa = lambda t: float((neg < t).mean())  # noqa: E731
    assert rec(thr_b) < 0.9 <= rec(thr_r)
    assert fa(thr_r) > fa(thr_b)
    # fewest false alarms among the thresholds that reach the recall: between 0.8 and 0.9 is enough
    # (8/9 < 0.9, so 0.9 itself must be called), nothing above the next score 1.0 is needed
    assert 0.9 < thr_r <= 1.0 and fa(thr_r) == pytest.approx(5 / 9)
    # unreachable recall falls back to the threshold of the most recall
    thr_all, _ = _best_threshold(s, y, balanced=True, min_recall=1.0)
    assert rec(thr_all) == 1.0
    # through the calibration: the chosen window threshold reaches the stated recall on validation
    rng = np.random.default_rng(1)
    fs, labs = _val_scores(rng)
    cal = calibrate_condition(fs, labs, 0.01, smooth_grid_s=(0.0,), min_recall=0.95)
    assert cal["min_recall"] == 0.95 and cal["val"]["window_recall"] >= 0.95
    cal_b = calibrate_condition(fs, labs, 0.01, smooth_grid_s=(0.0,))
    assert cal_b["val"]["window_recall"] < 0.95 and cal["window_threshold"] > cal_b["window_threshold"]
    with pytest.raises(DataError, match="min_recall"):
        calibrate_condition(fs, labs, 0.01, min_recall=1.5)


def test_run_condition_applies_the_calibration(monkeypatch):
    import actuatorlab.estimate.condition as cond

    T = 256
    z = np.zeros((T, 2))
    logs = [ConditionLog(n, f"/d/{n}", ("joint1", "joint2"), 0.01, z, z, z, z, np.array([False, r]))
            for n, r in (("a", False), ("b", True))]
    level = {"a": 0.45, "b": 0.2}                          # normal log a sits just under 0.5
    monkeypatch.setattr(cond, "learned_frame_scores",
                        lambda robot, model, lg, est=None: np.c_[np.ones(T), np.full(T, level[lg.name])])
    monkeypatch.setattr(cond, "OnlineEstimator", lambda model: None)
    m = type("M", (), {"layout": type("L", (), {"channels": ("joint1", "joint2"), "history": 7})()})()
    plain = run_condition(None, logs, model=m)
    assert [d["verdict"]["joint2"] for d in plain["logs"]] == ["restricted", "restricted"]   # threshold 0.5
    assert plain["learned"]["by_channel"]["joint2"]["precision"] == pytest.approx(0.5)
    cal = {"smooth_s": 0.5, "window_threshold": 0.3, "verdict_threshold": 0.3, "verdict_s": 1.0}
    res = run_condition(None, logs, model=m, calibration=cal)
    assert [d["verdict"]["joint2"] for d in res["logs"]] == ["normal", "restricted"]
    assert res["learned"]["by_channel"]["joint2"]["precision"] == 1.0 and res["learned"]["recall"] == 1.0
    assert res["calibration"]["window_threshold"] == 0.3 and res["calibration"]["verdict_s"] == 1.0
    assert res["learned"]["n_windows"] == 2 * 2 * len(window_starts(T))
    al = res["learned"]["alarms"]                          # per-frame alarm after the 8-frame warm-up
    assert al["restricted"]["detected"] == 1 and al["restricted"]["first_alarm_s"]["median"] == pytest.approx(0.08)
    assert al["normal"]["with_alarm"] == 0 and al["warmup_s"] == pytest.approx(0.08)
    held = run_condition(None, logs, model=m, calibration=cal, alarm_hold_s=0.5)["learned"]["alarms"]
    assert held["hold_s"] == pytest.approx(0.5)                # 50 frames below after the warm-up
    assert held["restricted"]["first_alarm_s"]["median"] == pytest.approx(0.08 + 0.49)


def test_auc_selection_learns_and_batched_scores_match_online(tiny_model, data):
    from actuatorlab.estimate.condition_windows import condition_log
    from actuatorlab.estimate.condition_train import (ConditionTrainConfig, learned_frame_scores,
                                                      learned_frame_scores_batched, train_condition_head)
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision

    r, m, trajs = tiny_model
    with physics_precision():
        new, info = train_condition_head(r, m, trajs, ConditionTrainConfig(steps=40, batch=64, lr=3e-3, scope="net",
                                                                           select="auc", eval_every=20),
                                         val_trajs=load_logs([data / "pairs" / "val"]))
        lg = condition_log(r, trajs[0], new.layout.channels)
        online = learned_frame_scores(r, new, lg)
        batched = learned_frame_scores_batched(r, new, lg, chunk=37)
    assert info["select"] == "auc"
    assert np.mean(info["loss"][-10:]) < np.mean(info["loss"][:5])
    steps, vals = zip(*info["val"])
    assert steps == (0, 20, 40) and all(0.0 <= v <= 1.0 for v in vals)    # AUC, highest kept
    assert info["best_step"] == steps[int(np.argmax(vals))]
    np.testing.assert_allclose(batched, online, rtol=1e-5, atol=1e-6)


def test_cli_calibrates_on_validation_logs_only(data, tiny_model, capsys):
    from actuatorlab.app.cli import main

    d = data / "pairs"
    capsys.readouterr()
    rep = data / "out" / "calibrated.html"
    rc = main(["condition", str(data / "model" / "arm_model.json"), str(d / "test"), "--robot", ROBOT,
               "--train", str(d / "train"), "--json", "--report", str(rep),
               "--config", job_config(data / "cal.json", {"options": {"calibrate": [str(d / "val")]}})])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    cal = out["calibration"]
    assert f"below {cal['verdict_threshold']:.3f}: restricted" in rep.read_text()   # the report says what it applied
    assert cal["source"].startswith("2 calibration logs") and cal["channels_used"] == ["joint3"]
    assert set(cal) >= {"smooth_s", "window_threshold", "verdict_threshold", "verdict_s"}
    for method in ("learned", "current_threshold", "svm", "random_forest"):
        assert {"accuracy", "precision", "recall", "auc"} <= set(out[method])
    # a calibration log that is also evaluated (or a training log) is refused
    rc = main(["condition", str(data / "model" / "arm_model.json"), str(d / "test"), "--robot", ROBOT,
               "--train", str(d / "train"), "--json",
               "--config", job_config(data / "cal_bad.json", {"options": {"calibrate": [str(d / "test")]}})])
    assert rc == 2 and "calibration log" in capsys.readouterr().err


def test_same_log_means_same_samples_not_just_the_same_name():
    from types import SimpleNamespace

    from actuatorlab.app.estimate_jobs import _same_samples

    t = np.arange(5) * 0.01
    a = SimpleNamespace(time=t, data={"q": np.sin(t), "i": np.cos(t)})
    assert _same_samples(a, SimpleNamespace(time=t.copy(), data={"q": np.sin(t), "i": np.cos(t)}))
    # a second unit's log of the same name: other samples, not the same log
    assert not _same_samples(a, SimpleNamespace(time=t, data={"q": np.sin(t) + 1e-9, "i": np.cos(t)}))
    assert not _same_samples(a, SimpleNamespace(time=t[:4], data={"q": np.sin(t[:4]), "i": np.cos(t[:4])}))
    assert not _same_samples(a, SimpleNamespace(time=t, data={"q": np.sin(t)}))


def test_window_stats_net_measures_stiffness_and_ignores_absolute_position():
    import jax

    from actuatorlab.models.nets import WindowStats, make_net

    T, C, F = 64, 2, 3                                    # per channel: q, dq, current
    t = np.arange(T) * 0.01
    q = 0.3 * np.sin(2 * np.pi * t)
    x = np.zeros((T, C, F), np.float32)
    x[:, :, 0] = q[:, None]
    x[:, :, 1] = np.gradient(q, 0.01)[:, None]
    x[:, 0, 2] = 0.5 * q                                  # channel 0: a 0.5 "A/rad" spring
    x[:, 1, 2] = 0.1                                      # channel 1: constant current
    net = make_net("window_stats", n_features=C * F, n_channels=C, history=T - 1, key=jax.random.PRNGKey(0),
                   drop_mean=1)
    assert isinstance(net, WindowStats)
    st = np.asarray(net.stats(x.reshape(T, C * F))).reshape(C, 5 * F + F * (F - 1))
    pairs = [(a, b) for a in range(F) for b in range(F) if a != b]
    k = 5 * F + pairs.index((2, 0))                       # slope of current on q
    var_q = q.var()
    assert st[0, k] == pytest.approx(0.5 * var_q / (var_q + 1e-3), rel=1e-4)
    assert st[1, k] == pytest.approx(0.0, abs=1e-6)
    assert st[0, 0] == 0.0                                # the mean of q is left out (drop_mean bit 0)
    assert st[1, F + 2] == pytest.approx(1e-3, rel=1e-3)  # std of a constant: sqrt(1e-6)
    # an offset of the absolute position changes nothing; an offset of the current does (its level counts)
    y = x.copy()
    y[:, :, 0] += 2.0
    out = lambda a: np.asarray(net(a.reshape(T, C * F)).condition_logit)  # noqa: E731
    np.testing.assert_allclose(out(y), out(x), atol=1e-5)
    z = x.copy()
    z[:, 0, 2] += 1.0
    assert np.abs(out(z) - out(x)).max() > 1e-4
    keep_mean = make_net("window_stats", n_features=C * F, n_channels=C, history=T - 1, key=jax.random.PRNGKey(0))
    assert np.abs(np.asarray(keep_mean(y.reshape(T, C * F)).condition_logit)
                  - np.asarray(keep_mean(x.reshape(T, C * F)).condition_logit)).max() > 1e-4
    from actuatorlab.errors import ModelError

    with pytest.raises(ModelError, match="per-channel inputs"):
        make_net("window_stats", n_features=7, n_channels=2, history=3, key=jax.random.PRNGKey(0))


def test_window_stats_condition_model_round_trips(data, tmp_path):
    from actuatorlab.estimate.condition_train import make_condition_model
    from actuatorlab.learned.arm import load_arm_model, save_arm_model
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision
    from actuatorlab.robots import load_robot

    with physics_precision():
        r = load_robot(ROBOT)
        trajs = load_logs([data / "pairs" / "train"])
        m = make_condition_model(r, trajs, arch="window_stats", history=15,
                                 per_channel=("q", "dq", "err", "current"),
                                 sizes=dict(width=8, depth=1, d=8, head_width=8))
        assert dict(m.sizes)["drop_mean"] == 1                     # q's mean left out by default
        save_arm_model(tmp_path, ROBOT, m, None, extra={"condition_calibration": {"smooth_s": 1.0}})
        _, m2, d = load_arm_model(tmp_path / "arm_model.json", ROBOT)
        x = np.random.default_rng(0).standard_normal((16, m.layout.n_features)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(m.net(x).condition_logit), np.asarray(m2.net(x).condition_logit))
    assert m2.arch == "window_stats" and dict(m2.sizes)["drop_mean"] == 1
    assert d["condition_calibration"]["smooth_s"] == 1


def test_window_stats_ensemble_averages_member_probabilities_and_round_trips(data, tmp_path):
    import jax
    from actuatorlab.estimate.condition_train import make_condition_model
    from actuatorlab.learned.arm import load_arm_model, save_arm_model
    from actuatorlab.models.nets import make_net, param_count
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision
    from actuatorlab.robots import load_robot

    kw = dict(n_features=6, n_channels=2, history=15, width=8, depth=1, d=8, head_width=8)
    one = make_net("window_stats", key=jax.random.PRNGKey(0), **kw)
    ens = make_net("window_stats", key=jax.random.PRNGKey(0), members=3, **kw)
    assert param_count(ens) == 3 * param_count(one)
    x = np.random.default_rng(1).standard_normal((16, 6)).astype(np.float32)
    mh = ens.member_heads(x)
    p = jax.nn.sigmoid(np.asarray(mh.condition_logit, np.float64)).mean(0)   # members' mean probability
    np.testing.assert_allclose(np.asarray(ens(x).condition_logit), np.log(p / (1 - p)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ens(x).torque), np.asarray(mh.torque).mean(0), rtol=1e-6, atol=1e-7)
    assert np.ptp(np.asarray(mh.condition_logit), axis=0).min() > 1e-4         # members differ
    # M = 1 keeps the single-network layout: member_heads is its output with a leading axis of 1
    np.testing.assert_array_equal(np.asarray(one.member_heads(x).condition_logit)[0],
                                  np.asarray(one(x).condition_logit))
    from actuatorlab.errors import ModelError

    with pytest.raises(ModelError, match="at least 1 member"):
        make_net("window_stats", key=jax.random.PRNGKey(0), members=0, **kw)
    with physics_precision():
        r = load_robot(ROBOT)
        trajs = load_logs([data / "pairs" / "train"])
        m = make_condition_model(r, trajs, arch="window_stats", history=15, per_channel=("q", "dq", "err", "current"),
                                 sizes=dict(width=8, depth=1, d=8, head_width=8, members=3))
        new = m
        save_arm_model(tmp_path, ROBOT, new, None)
        _, m2, _ = load_arm_model(tmp_path / "arm_model.json", ROBOT)
        xx = np.random.default_rng(2).standard_normal((16, m.layout.n_features)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(new.net(xx).condition_logit), np.asarray(m2.net(xx).condition_logit))
    assert dict(m2.sizes)["members"] == 3


def test_out_of_fold_scores_never_score_a_log_with_a_detector_that_saw_it_or_its_twin(monkeypatch):
    """bench/condition.py --calibrate-oof (a recipe of the benchmark, not adopted as a default)."""
    import sys
    import types

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "bench"))
    sys.modules.pop("condition_recipes", None)
    from actuatorlab.estimate.condition_train import ConditionTrainConfig
    import condition_recipes as cond

    def log(name, pair="none", restricted="none"):
        return types.SimpleNamespace(name=name, conditions={"pair": pair, "restricted": restricted})

    trajs = [log(f"plain_{i}") for i in range(5)]
    for i in range(4):  # 4 restricted / normal twin pairs
        r = f"cond_restricted_{i}"
        trajs += [log(r, pair=r, restricted="restricted_joint3"), log(f"cond_normal_{i}", pair=r)]
    seen, scored = [], {}

    def fake_train(robot, model, tr, cfg, *, val_trajs):
        seen.append({t.name for t in tr})
        assert cfg.steps == 3 and cfg.seed == 4 * 1000 + len(seen) and val_trajs is None
        return types.SimpleNamespace(layout=model.layout, fold=len(seen) - 1), {}

    def fake_scores(robot, m, lg):
        scored[lg] = m.fold
        return np.full((4, 2), float(m.fold))

    monkeypatch.setattr(cond, "train_condition_head", fake_train)
    monkeypatch.setattr(cond, "condition_log", lambda robot, t, ch: t.name)
    monkeypatch.setattr(cond, "learned_frame_scores_batched", fake_scores)
    model = types.SimpleNamespace(layout=types.SimpleNamespace(channels=("j1", "j2")))
    scores, fold = cond.out_of_fold_frame_scores(None, model, trajs, ConditionTrainConfig(steps=3), folds=3, seed=4)
    assert len(seen) == 3 and sorted(set(fold)) == [0, 1, 2]
    assert set(scored) == {t.name for t in trajs}                         # every training log scored once
    for t, f, s in zip(trajs, fold, scores):
        assert t.name not in seen[f] and scored[t.name] == f and s[0, 0] == f  # by the fold that never saw it
        assert seen[f] == {u.name for u, g in zip(trajs, fold) if g != f}    # trained on all the other folds
    by_name = dict(zip((t.name for t in trajs), fold))
    for i in range(4):                                                    # a twin pair is never split
        assert by_name[f"cond_restricted_{i}"] == by_name[f"cond_normal_{i}"]
    with pytest.raises(ValueError, match="at least 2 folds"):
        cond.out_of_fold_frame_scores(None, model, trajs, folds=1)
    with pytest.raises(DataError, match="9 log groups for 10 folds"):
        cond.out_of_fold_frame_scores(None, model, trajs, folds=10)


def test_leave_one_log_out_recall_is_what_the_threshold_gives_on_an_unseen_log():
    # one channel, 4 windows per log, constant scores (restricted iff score < threshold):
    # restricted logs at 0.1, 0.2 and 0.55 (a hard one), normal logs at 0.6, 0.8, 0.9. Chosen on all
    # six, the threshold sits between 0.55 and 0.6: in-sample recall and precision 1. Without the
    # hard log, the widest gap puts it at 0.4 and the hard log's windows are missed; without the
    # 0.6 log, it moves to 0.675 and that log's windows become false alarms.
    levels = [0.1, 0.2, 0.55, 0.6, 0.8, 0.9]
    ws = [np.full((4, 1), v) for v in levels]
    ys = [np.full((4, 1), k < 3) for k in range(6)]
    t, _ = _best_threshold(np.concatenate(ws), np.concatenate(ys), balanced=True)
    assert 0.55 < t < 0.6
    loo = leave_one_log_out_windows(ws, ys)
    assert loo["folds"] == 6
    assert loo["recall"] == pytest.approx(8 / 12) and loo["precision"] == pytest.approx(8 / 12)
    # a log whose removal leaves one class only is not scored
    one = leave_one_log_out_windows([ws[0], ws[4], ws[5]], [ys[0], ys[4], ys[5]])
    assert one["folds"] == 2 and one["recall"] is None and one["precision"] is None
    # through the calibration: the check is reported beside the in-sample recall, and a clean
    # separation leaves nothing to lose on a left-out log
    fs = [np.full((640, 2), [1.0, v]) for v in levels]
    labs = [np.array([False, k < 3]) for k in range(6)]
    cal = calibrate_condition(fs, labs, 0.01, smooth_grid_s=(0.0,))
    assert cal["val"]["window_recall"] == 1.0 and cal["val"]["window_recall_loo"] == pytest.approx(2 / 3)
    fs_clean = [np.full((640, 2), [1.0, v]) for v in (0.1, 0.15, 0.2, 0.8, 0.85, 0.9)]
    cal_clean = calibrate_condition(fs_clean, labs, 0.01, smooth_grid_s=(0.0,))
    assert cal_clean["val"]["window_recall_loo"] == 1.0 and cal_clean["val"]["window_precision_loo"] == 1.0


def _condition_recipes():
    """bench/condition_recipes.py (the options measured and not adopted)."""
    import sys

    bench = str(Path(__file__).resolve().parents[1] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import condition_recipes

    return condition_recipes


def test_motion_weighted_smoothing_hand_computed_and_chosen_when_evidence_comes_with_motion():
    """The motion-weighted smoothing (a bench recipe, not adopted): by hand, and chosen by the
    calibration when the evidence comes with motion."""
    # weighted causal mean by hand: frames 0..3, window 2
    s = np.array([[1.0], [0.0], [0.5], [1.0]])
    w = np.array([[1.0], [3.0], [1.0], [1.0]])
    out = smooth_scores(s, 2, w)
    assert out[:, 0] == pytest.approx([1.0, (1 * 1 + 3 * 0) / 4, (3 * 0 + 1 * 0.5) / 4, (0.5 + 1.0) / 2])
    with pytest.raises(ValueError, match="positive"):
        smooth_scores(s, 2, np.zeros_like(w))
    # causal spread of the position over the last n frames = numpy's std of the same frames
    rng = np.random.default_rng(3)
    q = rng.normal(size=(50, 2))
    sp = position_spread(q, 8)
    for k in (0, 3, 7, 8, 30, 49):
        assert sp[k] == pytest.approx(q[max(0, k - 7):k + 1].std(axis=0), abs=1e-12)
    # logs of 1,200 frames, channel 1 scored: the joint moves in bursts (a sine during 2 s of every
    # 6 s), stands still otherwise. While it moves a restricted log scores 0.2 and a normal one
    # 0.9; at rest both score 0.6 +- noise (no evidence). Weighting by motion keeps the evidence of
    # the last burst through the rest, so its window AUC is higher than the plain mean's.
    T, dt = 1200, 0.01
    t = np.arange(T) * dt
    moving = (t % 6.0) < 2.0
    qpos = np.where(moving, 0.3 * np.sin(2 * np.pi * t), 0.0)
    fs, labs, qs = [], [], []
    for k in range(8):
        r = k % 2 == 0
        sc = np.where(moving, 0.2 if r else 0.9, 0.6) + 0.15 * rng.standard_normal(T)
        fs.append(np.stack([np.ones(T), sc], 1))
        labs.append(np.array([False, r]))
        qs.append(np.stack([np.zeros(T), qpos], 1))
    plain = calibrate_condition(fs, labs, dt, smooth_grid_s=(2.0,))
    mw = calibrate_condition(fs, labs, dt, smooth_grid_s=(2.0,), weightings=_condition_recipes().motion_weighting(qs))
    assert "smooth_weight" not in plain and mw["smooth_weight"] == "motion"
    assert mw["val"]["window_auc"]["2 motion"] > plain["val"]["window_auc"]["2"] + 0.01
    assert mw["motion_floor"][1] > 0 and mw["motion_frames"] == WINDOW
    # applying it needs the positions
    with pytest.raises(DataError, match="positions"):
        calibrated_scores(fs[0], mw, dt)
    assert calibrated_scores(fs[0], mw, dt, qs[0]).shape == fs[0].shape
    with pytest.raises(DataError, match="the motion weighting needs the weights of every log"):
        calibrate_condition(fs, labs, dt, weightings=_condition_recipes().motion_weighting(qs[:3]))


def test_metrics_by_excitation_family_split_the_rows_by_the_logs_tag():
    # two excitation families; on "easy" the restricted channel's current is shifted by 3 A, on
    # "hard" it is not shifted at all: the forest finds the easy family's restricted windows and
    # misses the hard family's, which the per-family rows must show (pooled, they average out)
    import dataclasses
    from types import SimpleNamespace
    from actuatorlab.estimate.condition_windows import excitation_of

    rng = np.random.default_rng(4)
    T = 640

    def mk(name, restricted, family, shift=3.0):
        cur = rng.standard_normal((T, 2)) + (np.array([0.0, shift]) if restricted else 0.0)
        lg = _log(name, T, cur, [False, restricted])
        return dataclasses.replace(lg, traj=SimpleNamespace(conditions={"excitation": family}))

    train = [mk(f"tr{k}", k % 2 == 1, "easy") for k in range(6)]
    test = [mk("e0", False, "easy"), mk("e1", True, "easy"), mk("h0", False, "hard"), mk("h1", True, "hard", 0.0)]
    res = run_condition(None, test, train_logs=train)
    assert res["restricted_channels"] == ["joint2"]
    fam = res["random_forest"]["by_excitation"]
    assert set(fam) == {"easy", "hard"}
    n_win = len(window_starts(T))
    assert fam["easy"]["n_windows"] == fam["hard"]["n_windows"] == 2 * n_win   # 2 logs x joint2 rows only
    assert fam["easy"]["n_restricted"] == fam["hard"]["n_restricted"] == n_win
    assert fam["easy"]["recall"] > 0.9 and fam["hard"]["recall"] < 0.3
    assert 0.3 < res["random_forest"]["by_channel"]["joint2"]["recall"] < 0.8
    # a family of normal logs only has no recall (not 0)
    res2 = run_condition(None, [mk("e2", True, "easy"), mk("n0", False, "calm")], train_logs=train)
    assert res2["random_forest"]["by_excitation"]["calm"]["recall"] is None
    assert excitation_of(dataclasses.replace(test[0], traj=None)) == "unknown"


def test_residual_input_is_a_causal_external_torque_stored_with_the_model(data, tmp_path):
    """The ``tau_ext`` input: the model's residual_input (id_friction, calibrated on the free-motion
    TRAINING logs) run causally over a log. Frame k's value never depends on a later frame (a
    truncated log gives the same values), the given logs are not modified, the restricted joint's
    residual is larger than its normal twin's (the elastic restriction is an external torque), the
    calibration travels with the model file, and a model without one refuses a log without the
    channel, naming the file."""
    import dataclasses
    from actuatorlab.estimate.condition_train import make_condition_model
    from actuatorlab.learned.arm import arm_log, load_arm_model, save_arm_model, with_residual_inputs
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision
    from actuatorlab.robots import load_robot

    with physics_precision():
        r = load_robot(ROBOT)
        trajs = load_logs([data / "pairs" / "train"])
        m = make_condition_model(r, trajs, arch="window_stats", history=15,
                                 per_channel=("q", "dq", "err", "current", "tau_ext"),
                                 sizes=dict(width=8, depth=1, d=8, head_width=8))
        assert m.residual_input is not None and m.residual_input.method == "id_friction"
        assert not m.residual_input.calibration.labelled
        pairs = [t for t in load_logs([data / "pairs"]) if t.name.startswith("cond_")]
        assert not any(t.has("tau_ext/joint3") for t in pairs)
        aug = with_residual_inputs(r, m, pairs)
        assert not any(t.has("tau_ext/joint3") for t in pairs)          # the given logs are untouched
        assert all(t.has(f"tau_ext/{j}") for t in aug for j in m.layout.channels)
        assert with_residual_inputs(r, m, aug)[0] is aug[0]              # present channels are kept
        k = pairs[0].n // 2
        head = with_residual_inputs(r, m, [pairs[0].slice(0, k)])[0]
        np.testing.assert_array_equal(head["tau_ext/joint3"], aug[0]["tau_ext/joint3"][:k])   # causal
        by = {t.name: t for t in aug}
        gaps = []
        for n, t in by.items():
            if n.startswith("cond_restricted_"):
                twin = by[n.replace("cond_restricted_", "cond_normal_")]
                gaps.append(np.mean(np.abs(t["tau_ext/joint3"])) - np.mean(np.abs(twin["tau_ext/joint3"])))
        assert len(gaps) == 3 and min(gaps) > 0, gaps
        # a model that does not read tau_ext gets the logs back as they are
        plain = make_condition_model(r, trajs, arch="window_stats", history=15, per_channel=("q", "current"),
                                     sizes=dict(width=8, depth=1, d=8, head_width=8))
        assert plain.residual_input is None and with_residual_inputs(r, plain, pairs)[1] is pairs[1]
        # the calibration travels with the model file
        save_arm_model(tmp_path, ROBOT, m, None)
        _, m2, d = load_arm_model(tmp_path / "arm_model.json", ROBOT)
        assert d["residual_input"]["method"] == "id_friction"
        np.testing.assert_array_equal(with_residual_inputs(r, m2, pairs[:1])[0]["tau_ext/joint3"],
                                      aug[0]["tau_ext/joint3"])
        bare = dataclasses.replace(m, residual_input=None)
        with pytest.raises(DataError, match=pairs[0].name):
            with_residual_inputs(r, bare, pairs[:1])
        with pytest.raises(DataError, match="with_residual_inputs"):
            arm_log(r, pairs[0], m.layout.channels, m.layout.per_channel)


def test_condition_monitor_is_the_offline_detector_one_frame_at_a_time(data):
    """``ConditionMonitor`` on raw frames (no tau_ext channel in the log: the model's residual_input
    is stepped inside) gives the offline path's numbers: the per-frame scores of
    learned_frame_scores on the log with_residual_inputs, the calibration's causal smoothing
    (plain and motion-weighted) of calibrated_scores, the alarm at the window threshold and, at the
    last frame, the per-log verdict of log_verdicts. A truncated log gives the same prefix (causal);
    the force estimator reads the same tau_ext input; a tau_ext model without its residual_input is
    refused by name."""
    import dataclasses

    from actuatorlab.errors import ModelError
    from actuatorlab.sim.force import LearnedForceEstimator, read_force_log
    from actuatorlab.estimate.monitor import ConditionMonitor
    from actuatorlab.estimate.condition_windows import condition_log
    from actuatorlab.estimate.condition_train import learned_frame_scores, make_condition_model
    from actuatorlab.estimate.condition_calibrate import persistent_alarm
    from actuatorlab.learned.arm import with_residual_inputs
    from actuatorlab.logs import load_logs
    from actuatorlab.precision import physics_precision
    from actuatorlab.robots import load_robot

    with physics_precision():
        r = load_robot(ROBOT)
        m = make_condition_model(r, load_logs([data / "pairs" / "train"]), arch="window_stats", history=15,
                                 per_channel=("q", "dq", "err", "current", "tau_ext"), seed=3,
                                 sizes=dict(width=8, depth=1, d=8, head_width=8))
        log = [t for t in load_logs([data / "pairs"]) if t.name.startswith("cond_restricted_")][0]
        assert not log.has("tau_ext/joint3")
        lg = condition_log(r, with_residual_inputs(r, m, [log])[0], m.layout.channels)
        fs = learned_frame_scores(r, m, lg)
        assert fs.std() > 1e-4                     # the scores vary: the comparison below means something
        dt, C = r.control_dt, len(m.layout.channels)
        plain = {"smooth_s": 0.5, "window_threshold": float(np.median(fs)), "verdict_threshold": 0.5,
                 "verdict_s": 1.0}
        motion = {**plain, "smooth_weight": "motion", "motion_floor": [0.01] * C, "motion_frames": WINDOW}
        odds = {**motion, "smooth_space": "log_odds"}
        for cal in (None, plain, motion, odds):
            o = ConditionMonitor(r, m, cal).run(read_force_log(r, log))
            np.testing.assert_allclose(o["score"], fs, atol=1e-6)
            sm = calibrated_scores(fs, cal, dt, lg.q)
            np.testing.assert_allclose(o["smoothed"], sm, atol=1e-6)
            thr = (cal or {}).get("window_threshold", 0.5)
            w0 = m.layout.history + 1                        # the warm-up: one full window of real frames
            assert np.array_equal(o["alarm"][w0:], sm[w0:] < thr) and not o["alarm"][:w0].any()
            assert not o["verdict"][:w0].any() and (cal is None or 0 < o["alarm"].mean() < 1)
            v, verdict = log_verdicts(sm, dt, (cal or {}).get("verdict_s", 5.0), (cal or {}).get("verdict_threshold", 0.5))
            np.testing.assert_allclose(o["verdict_score"][-1], v, atol=1e-6)
            assert np.array_equal(o["verdict"][-1], verdict)
        # an on-delay of 0.05 s (5 frames): the offline rule of alarm_timing, frame by frame
        held = ConditionMonitor(r, m, plain, alarm_hold_s=0.05).run(read_force_log(r, log))
        below = calibrated_scores(fs, plain, dt, lg.q) < plain["window_threshold"]
        below[:m.layout.history + 1] = False
        want = persistent_alarm(below, 5)
        assert np.array_equal(held["alarm"], want) and want.sum() < below.sum()
        k = log.n // 2
        mon = ConditionMonitor(r, m, motion)
        head = mon.run(read_force_log(r, log.slice(0, k)))
        full = mon.run(read_force_log(r, log))                 # run() resets: the same monitor is reusable
        for f in head:
            np.testing.assert_array_equal(head[f], full[f][:k])
        fe = LearnedForceEstimator(r, m)
        fe.reset()
        est = fe.step(read_force_log(r, log).frame(0))
        assert np.all(np.isfinite(est.force)) and 0.0 <= est.contact <= 1.0
        bare = dataclasses.replace(m, residual_input=None)
        for make in (lambda: ConditionMonitor(r, bare), lambda: LearnedForceEstimator(r, bare)):
            with pytest.raises(ModelError, match="residual_input"):
                make()


def test_alarm_timing_counts_first_alarms_and_false_alarm_onsets_by_hand():
    """alarm_timing on a hand-made case: log A's restricted channel first alarms at frame 2 (0.02 s
    at 10 ms), log B's never does (missed); A's normal channel alarms at frames 0-1 and 5 (two
    onsets, 3 alarmed frames of 20 normal frames = 0.2 s), B's normal one never."""
    from actuatorlab.estimate.condition_calibrate import alarm_timing

    a = np.ones((10, 2))
    a[[2, 4, 5], 0] = 0.2               # restricted channel 0: alarms at 2, 4, 5
    a[[0, 1, 5], 1] = 0.3               # normal channel 1: onsets at 0 and 5
    b = np.ones((10, 2))
    b[:, 0] = 0.6                       # restricted, never below 0.5
    out = alarm_timing([a, b], [np.array([True, False]), np.array([True, False])], 0.01, 0.5)
    r, n = out["restricted"], out["normal"]
    assert (r["n"], r["detected"], r["missed"]) == (2, 1, 1)
    assert r["first_alarm_s"]["median"] == pytest.approx(0.02) and r["first_alarm_s"]["max"] == pytest.approx(0.02)
    assert r["alarm_time_fraction"] == pytest.approx(3 / 20)
    assert (n["n"], n["with_alarm"]) == (2, 1)
    assert n["alarm_time_fraction"] == pytest.approx(3 / 20)
    assert n["false_alarms_per_hour"] == pytest.approx(2 / (20 * 0.01 / 3600))
    none = alarm_timing([b], [np.array([True, False])], 0.01, 0.5)
    assert none["restricted"]["first_alarm_s"]["median"] is None and none["normal"]["false_alarms_per_hour"] == 0
    # a 3-frame warm-up: A's restricted channel first alarms at frame 4, its normal one once (frame 5),
    # over 7 + 7 live normal frames
    w = alarm_timing([a, b], [np.array([True, False]), np.array([True, False])], 0.01, 0.5, warmup_frames=3)
    assert w["restricted"]["first_alarm_s"]["median"] == pytest.approx(0.04) and w["warmup_s"] == pytest.approx(0.03)
    assert w["restricted"]["alarm_time_fraction"] == pytest.approx(2 / 14)
    assert w["normal"]["alarm_time_fraction"] == pytest.approx(1 / 14)
    assert w["normal"]["false_alarms_per_hour"] == pytest.approx(1 / (14 * 0.01 / 3600))
    # a 2-frame on-delay: A's restricted channel alarms only at frame 5 (4 and 5 below), its normal
    # channel at frame 1 (0 and 1 below; frame 5 alone is a dip): one onset, 1 alarmed frame of 20
    h = alarm_timing([a, b], [np.array([True, False]), np.array([True, False])], 0.01, 0.5, hold_frames=2)
    assert h["hold_s"] == pytest.approx(0.02) and w["hold_s"] == 0.0
    assert h["restricted"]["first_alarm_s"]["median"] == pytest.approx(0.05)
    assert h["restricted"]["alarm_time_fraction"] == pytest.approx(1 / 20)
    assert h["normal"]["alarm_time_fraction"] == pytest.approx(1 / 20)
    assert h["normal"]["false_alarms_per_hour"] == pytest.approx(1 / (20 * 0.01 / 3600))
    # the on-delay counts from the warm-up's end: with 3 warm-up frames A's restricted run 4-5 counts
    hw = alarm_timing([a, b], [np.array([True, False]), np.array([True, False])], 0.01, 0.5, warmup_frames=3,
                      hold_frames=2)
    assert hw["restricted"]["first_alarm_s"]["median"] == pytest.approx(0.05)
    assert hw["normal"]["with_alarm"] == 0


def test_persistent_alarm_is_the_run_length_rule_by_hand():
    """persistent_alarm raises at frame k when frames k-h+1..k are all flagged (h = 3 by hand);
    h <= 1 returns the input; a negative hold is refused by name."""
    from actuatorlab.errors import ActuatorlabError
    from actuatorlab.estimate.condition_calibrate import hold_frames, persistent_alarm

    b = np.array([1, 1, 1, 0, 1, 1, 1, 1, 0, 1], bool)
    want = np.array([0, 0, 1, 0, 0, 0, 1, 1, 0, 0], bool)
    np.testing.assert_array_equal(persistent_alarm(b, 3), want)
    np.testing.assert_array_equal(persistent_alarm(np.stack([b, ~b], 1), 3)[:, 0], want)
    np.testing.assert_array_equal(persistent_alarm(np.stack([b, ~b], 1), 3)[:, 1], np.zeros(10, bool))
    for h in (0, 1):
        np.testing.assert_array_equal(persistent_alarm(b, h), b)
    assert hold_frames(0.5, 0.01) == 50 and hold_frames(0.0, 0.01) == 0
    with pytest.raises(ActuatorlabError, match="hold"):
        hold_frames(-1.0, 0.01)


def test_log_odds_smoothing_keeps_short_strong_evidence_and_is_chosen_when_it_ranks_better():
    """smooth_log_odds = sigmoid(mean of clip(logit(s), -10, 10)) by hand; a log with 2 strong frames
    (1e-6) among 8 ambiguous ones (0.6) scores below a log of 10 mildly low frames (0.3) in
    log-odds, above it in the plain mean; on validation logs built that way (restricted: rare
    strong evidence, normal: frequent mild dips) calibrate_condition (log_odds=True, the default) picks the
    log-odds mean (higher window AUC) and records it, and without the option nothing changes."""
    from actuatorlab.estimate.condition_calibrate import smooth_log_odds

    s = np.r_[np.full(8, 0.6), 1e-6, 1e-6][:, None]
    z = (8 * np.log(0.6 / 0.4) + 2 * -10.0) / 10
    assert smooth_log_odds(s, 10)[-1, 0] == pytest.approx(1 / (1 + np.exp(-z)))
    mild = np.full((10, 1), 0.3)
    assert smooth_log_odds(s, 10)[-1, 0] < smooth_log_odds(mild, 10)[-1, 0]     # strong evidence kept
    assert smooth_scores(s, 10)[-1, 0] > smooth_scores(mild, 10)[-1, 0]         # ... averaged away by the mean
    np.testing.assert_allclose(smooth_log_odds(s, 1), np.clip(s, 1 / (1 + np.exp(10)), None))   # n = 1: clip only

    rng = np.random.default_rng(0)
    T, fs, labs = 1200, [], []
    for k in range(12):
        restricted = k % 2 == 0
        x = np.clip(0.6 + 0.05 * rng.standard_normal(T), 0.01, 0.99)
        if restricted:      # a 0.2 s burst of strong evidence every 4 s
            for a in range(0, T, 400):
                x[a + 100:a + 120] = 1e-5
        else:               # mild dips a third of the time
            x[rng.random(T) < 0.33] = 0.25
        fs.append(np.c_[np.full(T, 0.9), x])
        labs.append(np.array([False, restricted]))
    cal = calibrate_condition(fs, labs, 0.01)                  # log-odds tried by default
    assert calibrate_condition(fs, labs, 0.01, log_odds=True) == cal
    plain = calibrate_condition(fs, labs, 0.01, log_odds=False)
    assert cal.get("smooth_space") == "log_odds" and "smooth_space" not in plain
    assert max(cal["val"]["window_auc"].values()) > max(plain["val"]["window_auc"].values()) + 0.01
    sm = calibrated_scores(fs[0], cal, 0.01)
    np.testing.assert_allclose(sm, smooth_log_odds(fs[0], round(cal["smooth_s"] / 0.01)))
    with pytest.raises(DataError, match="smooth_space"):
        calibrated_scores(fs[0], {**cal, "smooth_space": "median"}, 0.01)


def test_default_trains_and_calibrates_the_adopted_detector_when_the_model_has_none(data, tiny_model):
    """``condition`` with a model file holding no calibrated detector (the tiny untrained MLP, as
    train-heads writes it: no condition_calibration) trains bench/condition.py's detector on the
    training logs, selects and calibrates it on DIR/val beside them, and evaluates it as learned;
    a short training here (the recipe's 800 steps take minutes)."""
    from actuatorlab.app.estimate_jobs import ConditionOptions, run_condition_files
    from actuatorlab.estimate.condition_train import ConditionTrainConfig, DetectorConfig

    d = data / "pairs"
    det = DetectorConfig(min_restricted_windows=5, train=ConditionTrainConfig(steps=20, batch=64, scope="net",
                                                                              eval_every=10, select="auc"))
    out = run_condition_files(data / "model" / "arm_model.json", [d / "test"], ROBOT,
                              ConditionOptions(train=(d / "train",), detector=det))
    got = out["detector"]
    assert got["trained"] and got["detector"].startswith("window_stats (history 63")
    assert got["restricted_channels"] == ["joint3"] and got["best_step"] in (0, 10, 20)
    assert got["calibration"] == out["calibration"]["source"] and got["calibration"].startswith("2 validation logs")
    assert out["calibration"]["channels_used"] == ["joint3"] and "window_threshold" in out["calibration"]
    assert out["learned"]["alarms"]["warmup_s"] == pytest.approx(0.64)     # the detector's window, not the MLP's 3
    for method in ("learned", "current_threshold", "svm", "random_forest"):
        assert out[method]["n_windows"] > 0 and out[method]["n_restricted"] > 0
    # the model's own head on request: no detector trained
    own = run_condition_files(data / "model" / "arm_model.json", [d / "test"], ROBOT,
                              ConditionOptions(train=(d / "train",), use_calibration=False, detector=det))
    assert own["detector"] == {"trained": False, "reason": "the model's own condition head"}
    assert own["learned"]["alarms"]["warmup_s"] == pytest.approx(0.03)


def test_default_says_when_the_training_logs_cannot_support_a_detector(data, tiny_model):
    """Too few restricted training windows (the pairs' one 4 s restricted training log, under the
    default 20), or no restricted training log at all: one line in "detector" and a warning, and
    the classical detectors only."""
    from actuatorlab.app.estimate_jobs import ConditionOptions, run_condition_files

    d = data / "pairs"
    for train, why in ((d / "train", "too few restricted training windows"),
                       (data / "plain" / "train", "no restricted training log")):
        with pytest.warns(UserWarning, match="no learned detector trained"):
            out = run_condition_files(data / "model" / "arm_model.json", [d / "test"], ROBOT,
                                      ConditionOptions(train=(train,)))
        assert out["detector"]["trained"] is False and out["detector"]["reason"].startswith(why)
        assert why in out["detector"]["message"] and "learned" not in out
        assert {"current_threshold", "svm", "random_forest"} <= set(out) and out["random_forest"]["n_windows"] > 0

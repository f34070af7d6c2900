"""Operating envelope: recorded from training logs, checked on hand-made logs (inside, outside by
velocity, outside by a stall at rest that every 1-D range accepts, an unseen gain), the error
attribution, the ``evaluate --json`` keys and the evaluation report."""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from synthetic import TRUTH_M1, make_trajectory, xl330_setup

from actuatorlab.errors import ModelError
from actuatorlab.evaluate.envelope import check_log, compute_envelope, log_features, validate_envelope
from actuatorlab.evaluate.envelope_summary import envelope_warnings, error_attribution
from actuatorlab.logs import save_trajectory
from actuatorlab.logs.format import Channel


def job_config(path, fields: dict) -> str:
    """A ``--config`` file holding ``fields`` (a job's options without a flag)."""
    path.write_text(json.dumps(fields))
    return str(path)

DT = 0.005
DUTY = Channel("1", "measured", side="none", description="duty cycle in [-1, 1]")


def log(name: str, q: np.ndarray, dq: np.ndarray, duty: np.ndarray, *, target=None, gain: str = "kp400",
        excitation: str = "sine", session: str = "s1"):
    t = DT * np.arange(q.size)
    tr = make_trajectory(name, t, q if target is None else target, setup=xl330_setup(400.0), position=q,
                         velocity=dq, conditions={"load": "0.49kg@0.1m", "gain": gain, "excitation": excitation,
                                                  "session": session})
    return tr.with_channel("pwm_duty", duty, DUTY)


def sweep(name: str, *, amp: float = 0.8, freq: float = 0.5, phase: float = 0.0, seconds: float = 4.0, **kw):
    """A sine sweep whose duty saturates only while moving fast (|dq| > 1.5 rad/s)."""
    t = DT * np.arange(int(seconds / DT))
    w = 2 * np.pi * freq
    q = amp * np.sin(w * t + phase)
    dq = amp * w * np.cos(w * t + phase)
    return log(name, q, dq, np.clip(dq / 1.5, -1.0, 1.0), **kw)


def holds(name: str, **kw):
    """Still at -0.6 ... 0.6 rad and back (0.5 s each, unsaturated duty), 0.2 s moves in between."""
    qs, dqs, duty = [], [], []
    levels = [-0.6, -0.3, 0.0, 0.3, 0.6, 0.3, 0.0, -0.3]
    for a, b in zip(levels, levels[1:] + levels[:1]):
        qs.append(np.full(100, a)); dqs.append(np.zeros(100)); duty.append(np.full(100, 0.2))
        s = np.linspace(0, 1, 40)
        qs.append(a + (b - a) * s); dqs.append(np.full(40, (b - a) / 0.2)); duty.append(np.full(40, 0.5))
    return log(name, np.concatenate(qs), np.concatenate(dqs), np.concatenate(duty), excitation="steps", **kw)


def stall(name: str, **kw):
    """Moving like the sweep, then 1 s stalled at 0.6 rad with full duty against a far target."""
    a = sweep("x", seconds=2.0)
    n = 200
    q = np.concatenate([a["position"], np.full(n, 0.6)])
    dq = np.concatenate([a["velocity"], np.zeros(n)])
    duty = np.concatenate([a["pwm_duty"], np.ones(n)])
    target = np.concatenate([a["position_target"], np.full(n, 1.5)])
    return log(name, q, dq, duty, target=target, **kw)


@pytest.fixture(scope="module")
def env():
    return compute_envelope([sweep("train_sweep"), holds("train_holds")], DT)


def check(env, tr):
    return check_log(env, log_features(tr, DT), tr.name)


def test_envelope_records_ranges_regimes_and_conditions(env):
    d = env["dimensions"]
    assert set(d) == {"position", "velocity", "effort", "gravity_torque"}
    # 0.1-99.9 % quantiles widened by 5 % of the span: the sweep reaches +-0.8 rad, +-0.8 pi rad/s
    assert d["position"]["lower"] == pytest.approx(-0.88, abs=0.01) and d["position"]["upper"] == pytest.approx(0.88, abs=0.01)
    assert d["velocity"]["upper"] == pytest.approx(1.1 * 0.8 * np.pi, rel=0.02)
    assert d["effort"]["upper"] == pytest.approx(1.1, abs=1e-6)
    # gravity torque of 0.49 kg at 0.1 m at the extreme positions
    assert d["gravity_torque"]["max"] == pytest.approx(0.49 * 0.1 * 9.81 * np.sin(0.8), rel=1e-3)
    assert 0.2 < env["regimes"]["rest"] < 0.5 and env["regimes"]["rest_saturated"] == 0.0
    assert env["conditions"]["gain"] == ["kp400"] and env["conditions"]["excitation"] == ["sine", "steps"]
    assert env["torque_disabled_seen"] is False
    assert json.loads(json.dumps(env)) == env  # plain JSON
    assert validate_envelope(env) is env


def test_a_log_like_the_training_logs_is_inside(env):
    for tr in (sweep("inside", amp=0.78, phase=0.7, session="s2"), holds("holds_again")):
        c = check(env, tr)
        assert c.any_outside.mean() < 0.01, c.fractions()
        assert c.unseen_conditions == {}  # a new session is not a new condition


def test_faster_motion_is_outside_by_velocity(env):
    c = check(env, sweep("fast", freq=1.5))
    fr = c.fractions()
    # |dq| = 0.8 * 3 pi |cos|: outside the trained +-2.76 rad/s where |cos| > 0.366, 76 % of the time
    assert fr["velocity"] == pytest.approx(0.76, abs=0.03)
    assert "position" not in fr and "gravity_torque" not in fr


def test_a_stall_at_rest_is_an_unseen_combination_of_seen_ranges(env):
    tr = stall("stall")
    c = check(env, tr)
    fr = c.fractions()
    for dim in ("position", "velocity", "effort", "gravity_torque"):
        assert dim not in fr, fr  # every 1-D range accepts the stall
    # the 200 stalled samples (of 600) minus the rest window's edge are at rest and saturated
    assert fr["rest_saturated"] == pytest.approx(0.31, abs=0.03)
    stalled = np.arange(c.n) >= 400
    assert c.outside["rest_saturated"][~stalled].sum() == 0
    # the moving part, where the training logs also saturated, stays inside
    assert c.any_outside[:390].mean() < 0.01


def test_an_unseen_gain_or_excitation_puts_the_whole_log_outside(env):
    for tag, kw in (("gain", {"gain": "kp1600"}), ("excitation", {"excitation": "chirp"})):
        c = check(env, sweep("other", amp=0.78, phase=0.7, **kw))
        assert c.unseen_conditions == {tag: kw[tag]}
        assert c.fractions()[f"condition:{tag}"] == 1.0 and c.any_outside.all()
        assert c.signal_outside.mean() < 0.01  # the samples themselves are in range
        (w,) = envelope_warnings(c, None, "rad")
        assert f"{tag}={kw[tag]} was never seen in training" in w


def test_error_attribution_names_the_dimension_the_error_comes_from(env):
    c = check(env, stall("stall"))
    err = np.full(c.n, 0.01)
    err[c.outside["rest_saturated"]] = 0.15  # the model fails during the stall
    a = error_attribution(c, err)
    assert a["concentrated"] and a["error_share"] == pytest.approx(0.15 * 186 / (0.15 * 186 + 0.01 * 414), abs=0.05)
    assert a["by_dimension"]["rest_saturated"]["concentrated"]
    (w,) = envelope_warnings(c, a, "rad")
    assert w.startswith("stall: its position error comes from outside") and "rest_saturated" in w
    # the same error everywhere: nothing to blame on the envelope
    a = error_attribution(c, np.full(c.n, 0.05))
    assert not a["concentrated"] and envelope_warnings(c, a, "rad") == []


def test_bad_envelope_is_reported_with_the_file(env):
    bad = json.loads(json.dumps(env))
    bad["planes"]["position_velocity"]["occupied"] = bad["planes"]["position_velocity"]["occupied"][:3]
    with pytest.raises(ModelError, match="run/model.json: .*position_velocity"):
        validate_envelope(bad, "run/model.json")
    with pytest.raises(ModelError, match="envelope version"):
        validate_envelope({**env, "version": "0"}, "m.json")


# ------------------------------------------------------------------------------------------------
# evaluate --json and --report with a model.json written by the test (no fit)
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory, env):
    from actuatorlab.models.params import PARAMS
    from actuatorlab.app.jobs import run_evaluate

    root = tmp_path_factory.mktemp("envelope")
    logs = root / "logs"
    logs.mkdir()
    for tr in (sweep("inside", amp=0.78, phase=0.7), stall("stall")):
        save_trajectory(tr, logs)
    params = {n: {"value": float(TRUTH_M1.get(n, p.neutral)), "unit": "",
                  "free": n in TRUTH_M1} for n, p in PARAMS.items()}
    model = {"format": "actuatorlab-model", "format_version": "1", "model": "m1", "joint_type": "revolute",
             "controller": "dynamixel_pwm", "setup": xl330_setup(400.0).to_dict(), "parameters": params,
             "fit": {"dt": DT}, "data": {"logs": [{"name": "train_sweep"}, {"name": "train_holds"}]},
             "envelope": env}
    (root / "model.json").write_text(json.dumps(model))
    old = {k: v for k, v in model.items() if k != "envelope"}
    (root / "old.json").write_text(json.dumps(old))
    s = run_evaluate(root / "model.json", [logs], report=root / "out" / "eval.html")
    return dict(root=root, logs=logs, s=s)


def test_evaluate_reports_the_outside_fraction_per_log_and_pooled(evaluated):
    s = evaluated["s"]
    assert s["envelope_available"] is True
    per = {r["log"]: r for r in s["per_log"]}
    assert per["inside"]["envelope_outside_fraction"] < 0.01
    assert per["stall"]["envelope_outside_fraction"] == pytest.approx(0.31, abs=0.03)
    assert per["stall"]["envelope_outside_dimensions"]["rest_saturated"] == pytest.approx(0.31, abs=0.03)
    n = {r["log"]: r["n"] for r in s["per_log"]}
    pooled = sum(per[k]["envelope_outside_fraction"] * n[k] for k in n) / sum(n.values())
    assert s["envelope_outside_fraction"] == pytest.approx(pooled)
    assert set(per["stall"]["envelope"]) >= {"outside_fraction", "outside_dimensions", "error", "warnings",
                                             "unseen_conditions", "unchecked"}
    json.dumps(s)  # JSON-ready


def test_old_model_files_still_evaluate_without_an_envelope(evaluated):
    from actuatorlab.app.jobs import run_evaluate

    s = run_evaluate(evaluated["root"] / "old.json", [evaluated["logs"]], report=evaluated["root"] / "old.html")
    assert s["envelope_available"] is False and s["envelope_outside_fraction"] is None
    assert "records no operating envelope" in (evaluated["root"] / "old.html").read_text(encoding="utf-8")
    assert "no operating envelope" in s["envelope_unavailable_reason"]
    assert all(r["envelope_outside_fraction"] is None for r in s["per_log"])
    assert s["position_mae"] == pytest.approx(evaluated["s"]["position_mae"])


def test_cli_json_has_the_envelope_keys(evaluated, capsys):
    from actuatorlab.app.cli import main

    capsys.readouterr()
    assert main(["evaluate", str(evaluated["root"] / "model.json"), str(evaluated["logs"]), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert 0.0 < s["envelope_outside_fraction"] < 1.0
    assert all("envelope_outside_fraction" in r and "envelope_outside_dimensions" in r for r in s["per_log"])


def test_evaluation_report_has_the_envelope_section_and_stays_small(evaluated):
    import plotly.offline

    path = evaluated["root"] / "out" / "eval.html"
    text = path.read_text(encoding="utf-8")
    assert "Operating envelope coverage" in text and "rest_saturated" in text and "Evaluation" in text
    # plotly.js once, from a sibling file referenced relatively; the page itself is small
    (src,) = re.findall(r'<script src="([^"]+)"', text)
    assert "/" not in src and (path.parent / src).read_text(encoding="utf-8") == plotly.offline.get_plotlyjs()
    assert plotly.offline.get_plotlyjs()[:300] not in text
    assert path.stat().st_size < 300_000
    # the stalled span is shaded in the stall log's figure
    assert "outside the envelope" in text


def test_effort_from_the_firmware_law_when_no_duty_is_logged():
    """Without pwm_duty the effort is the Dynamixel law on the logged command and measured position:
    duty = clip(kp * error_gain * (q_target - q), +-1), error_gain = (4096 / 2 pi) / (256 * 885)."""
    t = DT * np.arange(200)
    q = np.zeros(200)
    target = np.where(t < 0.5, 0.5, 1.0)  # 0.5 rad error: duty 0.575 at kp 400; 1 rad: saturated
    tr = make_trajectory("law", t, target, setup=xl330_setup(400.0), position=q, velocity=q)
    f = log_features(tr, DT)
    gain = (4096 / (2 * np.pi)) / (256 * 885)
    np.testing.assert_allclose(f["signals"]["effort"][:100], 400 * gain * 0.5, rtol=1e-6)
    np.testing.assert_allclose(f["signals"]["effort"][100:], 1.0)
    assert "dynamixel_pwm law" in f["effort_source"]


def test_cli_report_standalone_inlines_plotly_and_needs_report(evaluated, capsys):
    from actuatorlab.app.cli import main

    out = evaluated["root"] / "single" / "eval.html"
    capsys.readouterr()
    assert main(["evaluate", str(evaluated["root"] / "model.json"), str(evaluated["logs"]), "--report", str(out),
                 "--config", job_config(out.parent.parent / "standalone.json", {"standalone": True})]) == 0
    _, err = capsys.readouterr()
    assert "warning: stall" in err  # the stall log's error is reported as coming from outside
    assert [p.name for p in out.parent.iterdir()] == ["eval.html"]
    assert '<script src="' not in out.read_text(encoding="utf-8")
    assert main(["evaluate", str(evaluated["root"] / "model.json"), str(evaluated["logs"]),
                 "--config", job_config(out.parent.parent / "standalone.json", {"standalone": True})]) == 2
    assert "--standalone needs --report" in capsys.readouterr().err


def test_report_planes_show_the_evaluated_samples_outside_in_orange(evaluated):
    text = (evaluated["root"] / "out" / "eval.html").read_text(encoding="utf-8")
    blobs = dict(re.findall(r'data-target="(fig-envelope-\d)">(.*?)</script>', text, flags=re.S))
    figs = {json.loads(v)["layout"]["title"]["text"].split(" (")[0]: json.loads(v) for v in blobs.values()}
    scat = {t["name"]: t for t in figs["velocity x effort"]["data"] if t["type"] == "scatter"}
    assert set(scat) == {"inside", "stall"}
    color = {k: np.frombuffer(base64.b64decode(t["marker"]["color"]["bdata"]), "<f4") for k, t in scat.items()}
    assert scat["stall"]["marker"]["colorscale"][1] == [1, "#ff9900"]
    assert color["stall"].max() == 1.0 and color["inside"].max() == 0.0  # orange = 1: outside
    assert color["stall"].size <= 300


def test_controller_level_from_the_logged_duty_or_from_the_firmware_law():
    """The controller level is the logged duty where there is one; without it, the firmware law
    on the logged command and the measured position, duty = clip(kp g_e (q_target - q), +-1)."""
    from actuatorlab.models.control import DEFAULT_ERROR_GAIN
    from actuatorlab.sim.rollout import controller_level, log_arrays

    tr = stall("s")
    a = log_arrays(tr, DT)
    level, source = controller_level(tr, a, DT)
    assert source.startswith("measured pwm_duty")
    np.testing.assert_allclose(level, np.interp(tr.time[0] + a["t"], tr.time, tr["pwm_duty"]), atol=1e-12)
    bare = tr.without_channels("pwm_duty")
    level2, source2 = controller_level(bare, log_arrays(bare, DT), DT)
    assert "law" in source2
    hand = np.clip(400.0 * DEFAULT_ERROR_GAIN["dynamixel_pwm"] * (a["q_target"] - a["q_meas"]), -1.0, 1.0)
    np.testing.assert_allclose(level2, hand, atol=1e-9)
    assert np.all(level2[-150:] == 1.0)  # 0.9 rad short of the target at kp 400: saturated


def test_stall_regime_of_a_replayed_log():
    """Replayed by a model, the hand-made stall (1 s at rest, full duty, the target 0.9 rad ahead)
    is the log's ``stall`` regime, found from the log's duty, and nothing before it is."""
    from actuatorlab.evaluate.metrics import log_metrics, regime_masks
    from actuatorlab.evaluate.replay import replay_batches
    from actuatorlab.models.params import neutral_params
    from actuatorlab.sim.rollout import make_batches

    tr = stall("s")
    (r,) = replay_batches("m1", {**neutral_params(), **TRUTH_M1}, make_batches([tr], DT))
    m = regime_masks(r)["stall"]
    assert 190 <= m.sum() <= 200  # the 200 stalled samples (the static threshold is relative)
    assert np.all(r.t[m] >= 2.0 - 1e-9)
    st = log_metrics(r)["regimes"]["stall"]
    assert st["n_samples"] == m.sum()
    assert st["position_mae"] == pytest.approx(np.mean(np.abs(r.q_sim - r.q_meas)[m]))

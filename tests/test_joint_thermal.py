"""Winding temperature (``+thermal``) on the one-joint path: a stalled servo heats along the
first-order solution, its stall torque falls as kt V / R(T), a huge heat capacity is the model
without ``+thermal`` at R(T0), models without ``+thermal`` ignore temperature exactly, the rollout
starts from the log's first logged temperature, and a fit recovers the heating well enough to
predict the stall angle of a log at a temperature it was not fitted at.
"""

from __future__ import annotations

import numpy as np
import pytest

from actuatorlab.errors import ModelError
from actuatorlab.identify.fit import fit_model, substeps_for
from actuatorlab.logs.format import Channel
from actuatorlab.models.actuator import StepConfig, make_step
from actuatorlab.models.motor import R_REFERENCE_TEMPERATURE
from actuatorlab.models.registry import get_model
from actuatorlab.sim.rollout import make_batches, one_step, rollout_batch

from stall_logs import stall_window, sweep
from synthetic import DT, ENCODER_STEP, TRUTH_M1, full_params, make_trajectory, simulate, xl330_setup

ALPHA = 0.00393  # [1/K] copper


def with_temperature(tr, celsius):
    """``tr`` with a logged temperature channel (constant ``celsius``, the servo's sensor)."""
    data = {**tr.data, "temperature": np.full(tr.n, float(celsius))}
    channels = {**tr.channels, "temperature": Channel("degC", "measured", "none")}
    return tr.replace(data=data, channels=channels)


def held(name, T=2.0, target=1.0, kp=800.0, **setup):
    t = DT * np.arange(int(round(T / DT)) + 1)
    return make_trajectory(name, t, np.full(t.size, target), setup=xl330_setup(kp, **setup),
                           conditions={"excitation": "hold"}, source_file=f"{name}.synthetic")


def chirp(name, T=1.5, kp=400.0):
    t = DT * np.arange(int(round(T / DT)) + 1)
    return make_trajectory(name, t, 0.8 * np.sin(2 * np.pi * (0.5 * t + 0.75 * t**2)), setup=xl330_setup(kp),
                           conditions={"excitation": "chirp"}, source_file=f"{name}.synthetic")


def run(trajs, model, values):
    spec = get_model(model)
    (b,) = make_batches(trajs, DT)
    return b, rollout_batch(b.step_config(spec.compliant, substeps_for(spec), spec.thermal), full_params(values),
                            b.arrays())


def test_stalled_winding_heats_along_first_order_solution():
    """A joint held by a huge Coulomb friction at full duty draws i = V / R; with the tempco off
    the heat P = V^2 / R is constant and T(t) = T_amb + P R_th + (T0 - T_amb - P R_th) exp(-t / tau),
    tau = R_th C_th, up to the explicit Euler step."""
    R_th, C_th, T0, amb = 8.0, 0.25, 40.0, 25.0
    p = dict(TRUTH_M1, friction_base=50.0, thermal_resistance=R_th, thermal_capacitance=C_th,
             resistance_tempco=0.0, ambient_temperature=amb)
    b, out = run([with_temperature(held("stall"), T0)], "m1+thermal", p)
    T = np.asarray(out.temperature[0])
    assert np.all(np.abs(np.asarray(out.q[0])) < 1e-9)  # it never moves
    P = 7.4**2 / TRUTH_M1["R"]
    t = b.t[0]
    expect = amb + P * R_th + (T0 - amb - P * R_th) * np.exp(-t / (R_th * C_th))
    rise = expect[-1] - T0
    assert rise > 20.0  # a strong heating, so the check has teeth
    np.testing.assert_allclose(T, expect, atol=0.01 * rise)
    assert T[0] == T0


def test_stall_torque_falls_as_resistance_rises():
    """With copper's tempco the torque at stall is kt V / R(T) at every period's temperature, and
    it drops by the ratio R(T0) / R(T_end) over the log."""
    p = dict(TRUTH_M1, friction_base=50.0, thermal_resistance=8.0, thermal_capacitance=0.25)
    _, out = run([with_temperature(held("stall"), 30.0)], "m1+thermal", p)
    T, tau = np.asarray(out.temperature[0]), np.asarray(out.tau_motor[0])
    R_T = TRUTH_M1["R"] * (1.0 + ALPHA * (T - R_REFERENCE_TEMPERATURE))
    np.testing.assert_allclose(tau, TRUTH_M1["kt"] * 7.4 / R_T, rtol=1e-9)
    assert T[-1] - T[0] > 15.0
    assert tau[-1] / tau[0] == pytest.approx(R_T[0] / R_T[-1], rel=1e-9)
    assert tau[-1] < 0.95 * tau[0]


def test_huge_capacity_is_parent_at_start_temperature():
    """C_th -> infinity: the winding stays at the logged start temperature, so the rollout is the
    model without +thermal with R replaced by R(T0)."""
    T0 = 45.0
    trs = [with_temperature(chirp("c"), T0), with_temperature(held("h", target=1.2), T0)]
    p = dict(TRUTH_M1, friction_base=0.03, load_friction=0.1)
    _, hot = run(trs, "m3+thermal", dict(p, thermal_capacitance=1e12))
    _, cold = run(trs, "m3", dict(p, R=p["R"] * (1.0 + ALPHA * (T0 - R_REFERENCE_TEMPERATURE))))
    np.testing.assert_allclose(np.asarray(hot.q), np.asarray(cold.q), atol=1e-9)
    assert float(np.ptp(np.asarray(hot.q))) > 0.5


def test_without_thermal_temperature_changes_nothing():
    """Models without +thermal: the logged temperature and the thermal parameters change nothing
    (exact equality) and no temperature is carried."""
    p = dict(TRUTH_M1, friction_base=0.03)
    _, a = run([chirp("c")], "m1", p)
    _, b = run([with_temperature(chirp("c"), 55.0)], "m1",
               dict(p, thermal_resistance=0.5, thermal_capacitance=1.0, ambient_temperature=50.0))
    np.testing.assert_array_equal(np.asarray(a.q), np.asarray(b.q))
    assert a.temperature is None and b.temperature is None


def test_start_temperature_from_log_else_ambient():
    """The batch holds each log's first logged temperature (NaN without a channel); a +thermal
    rollout starts there, or at ``ambient_temperature`` when the log has none."""
    late = with_temperature(held("c", T=0.2), 40.0)
    late.data["temperature"][0] = np.nan  # no reading at the start: a later one is not used (causal)
    trs = [with_temperature(held("a", T=0.2), 33.0), held("b", T=0.2), late]
    (b,) = make_batches(trs, DT)
    assert b.temperature0[0] == 33.0 and np.isnan(b.temperature0[1]) and np.isnan(b.temperature0[2])
    _, out = run(trs, "m1+thermal", dict(TRUTH_M1, ambient_temperature=21.0))
    assert [float(x) for x in out.temperature[:, 0]] == [33.0, 21.0, 21.0]


def test_one_step_and_refusals():
    """one_step runs a +thermal model from the rollout's winding temperature (finite, equal to the
    rollout's prediction on the first step); +thermal needs a voltage drive."""
    trs = [with_temperature(chirp("c"), 35.0)]
    p = dict(TRUTH_M1, thermal_resistance=20.0, thermal_capacitance=1.0)
    b, out = run(trs, "m1+thermal", p)
    pred = np.asarray(one_step(b.step_config(False, 1, True), full_params(p), b.arrays()))
    assert np.all(np.isfinite(pred))
    assert pred[0, 1] == pytest.approx(float(out.q[0, 1]), abs=1e-12)  # same state at k = 0
    with pytest.raises(ModelError, match=r"\+thermal.*voltage"):
        make_step(StepConfig(law="emps_cascade", plant="carriage", thermal=True))


def test_fit_predicts_stall_of_a_hotter_log():
    """Ground truth m1+thermal (a small winding that heats 10-20 K in a 2 s stall). Fitted on
    stall sweeps started at 25 and 35 degC, m1+thermal predicts the stall angle of a sweep started
    at 55 degC within 0.02 rad; m1 (constant R), fitted the same way, misses it by more."""
    truth = dict(TRUTH_M1, thermal_resistance=25.0, thermal_capacitance=1.5)
    n = int(round(2.0 / DT)) + 1
    t = DT * np.arange(n)

    def case(name, celsius, mass, direction):
        tr = make_trajectory(name, t, sweep(t, direction), setup=xl330_setup(800.0, mass=mass),
                             conditions={"excitation": "stall", "temp": str(celsius)},
                             source_file=f"{name}.synthetic")
        return with_temperature(tr, celsius)

    drafts = [case("c25", 25.0, 0.7, 1), case("c35n", 35.0, 0.8, -1), case("c55", 55.0, 0.7, 1)]
    logs = []
    for tr, (q, dq) in zip(drafts, simulate(drafts, truth, "m1+thermal", DT)):
        logs.append(tr.replace(data={**tr.data, "position": np.round(q / ENCODER_STEP) * ENCODER_STEP,
                                     "velocity": dq}))
    train, test = logs[:2], logs[2:]
    hold = stall_window(t)
    q_true = test[0]["position"][hold]

    miss = {}
    for model in ("m1", "m1+thermal"):
        fit = fit_model(train, model, seed=0, max_evals=900, n_starts=1, grad_steps=0, popsize=12)
        (q_sim, _), = simulate(test, fit.params, model, DT)
        miss[model] = float(np.mean(np.abs(q_sim[hold] - q_true)))
    assert miss["m1+thermal"] < 0.02, miss
    assert miss["m1"] > 1.5 * miss["m1+thermal"], miss


def test_replay_json_and_report_show_the_winding(tmp_path):
    """Replaying a +thermal model keeps the rollout's winding temperature: per-log start / peak in
    the summary JSON, and a trace on its own axis in the report; a model without +thermal has none."""
    from actuatorlab.evaluate import summarize
    from actuatorlab.evaluate.replay import replay_batches
    from actuatorlab.report.fit import write_report

    trs = [with_temperature(held("stall"), 30.0), chirp("c")]
    p = dict(TRUTH_M1, friction_base=50.0, thermal_resistance=8.0, thermal_capacitance=0.25)
    hot = replay_batches("m1+thermal", full_params(p), make_batches(trs, DT))
    s = summarize(hot)
    w = s["per_log"][0]["winding_temperature_sim"]
    assert w["start_degC"] == 30.0 and w["max_degC"] > 45.0
    assert s["per_log"][1]["winding_temperature_sim"]["start_degC"] == 25.0  # no logged temperature
    html = write_report(tmp_path / "r.html", hot, model_name="m1+thermal").read_text()
    assert "winding temperature (model)" in html and "winding [degC]" in html
    cold = replay_batches("m1", full_params(p), make_batches(trs, DT))
    assert cold[0].winding_temperature_sim is None and "winding_temperature_sim" not in summarize(cold)["per_log"][0]

"""The correction gate of a one-joint residual (actuatorlab.learned.gate): the scaled torque head is
exactly the scaled correction, gate 0 replays as the base, the rule keeps only a gate that earns
its place on the held-out groups, and `run_train` keeps a correction that holds on the groups it
was not trained on."""

from __future__ import annotations

import json

import equinox as eqx
import jax
import numpy as np
import pytest

from synthetic import analytic_model, DT, TRUTH_M1, synthetic_set

from actuatorlab.errors import ModelError
from actuatorlab.identify.nested import MIN_GAIN
from actuatorlab.learned.gate import GATES, choose_gate, gate_scores, gated, per_log_mae
from actuatorlab.learned.joint import log_set, rollout_logs
from actuatorlab.learned.joint_train import build_joint_model
from actuatorlab.logs import save_trajectory
from actuatorlab.models.modelfile import save_model
from actuatorlab.models.nets import scale_torque_head
from actuatorlab.sim.rollout import make_batches

TINY = dict(width=16, depth=1, d=8, head_width=8)
# a base with a 30 % weaker motor and no friction: a correction learned on one excitation holds on another
WRONG = {**TRUTH_M1, "kt": 0.7 * TRUTH_M1["kt"], "friction_base": 0.0}



@pytest.fixture(scope="module")
def logs():
    return synthetic_set([("chirp", "chirp", 400), ("sine", "sine", 800), ("steps", "steps", 400)], TRUTH_M1,
                         duration=0.8, amplitude=0.6)


def _residual(batch, key=1):
    """A residual over WRONG whose torque head is not zero (as after training)."""
    m = build_joint_model("residual", "mlp", [batch], base=analytic_model(WRONG), history=3, sizes=TINY, seed=0)
    last = m.net.heads.torque.layers[-1]
    return eqx.tree_at(lambda n: n.net.heads.torque.layers[-1].weight, m,
                       0.3 * jax.random.normal(jax.random.PRNGKey(key), last.weight.shape, last.weight.dtype))


def test_scaled_head_is_the_scaled_correction_and_gate_0_is_the_base(logs):
    (b,) = make_batches(logs, DT)
    m = _residual(b)
    x = jax.random.normal(jax.random.PRNGKey(0), (4, m.layout.n_features))
    half = scale_torque_head(m.net, 0.5)
    t1, t05 = np.asarray(m.net(x).torque), np.asarray(half(x).torque)
    assert np.any(t1 != 0.0)
    assert np.array_equal(t05, 0.5 * t1)  # a power of two: exact
    assert np.array_equal(np.asarray(half(x).force_raw), np.asarray(m.net(x).force_raw))  # other heads untouched
    base = build_joint_model("residual", "mlp", [b], base=analytic_model(WRONG), history=3, sizes=TINY, seed=0)
    ls = log_set(m, b)
    q0, qb, q1 = (np.asarray(rollout_logs(x, ls).q) for x in (gated(m, 0.0), base, m))
    assert np.array_equal(q0, qb)
    assert not np.allclose(q1, qb)  # the correction does something: the check above can fail
    s = gate_scores(m, [b], (0.0, 1.0))
    assert s[0] == pytest.approx(float(np.mean(per_log_mae(base, [b]))), rel=1e-12)


def test_the_rule_keeps_only_a_gate_that_earns_its_place():
    g = (0.0, 0.5, 1.0)
    # gate 1 lower in every group by 10 %: chosen over 0.5 (5 %)
    c = choose_gate(np.array([[10.0, 20.0, 30.0], [9.5, 19.0, 28.5], [9.0, 18.0, 27.0]]), g, ["a", "b", "c"])
    assert c.gate == 1.0 and c.verdicts[2].earns_place and c.verdicts[2].wins == 3
    # gate 1 much lower on the mean but worse in two groups of three: not eligible; 0.5 wins all three
    c = choose_gate(np.array([[10.0, 20.0, 30.0], [9.5, 19.0, 28.5], [1.0, 21.0, 31.0]]), g)
    assert not c.verdicts[2].earns_place and c.gate == 0.5
    # lower everywhere but by less than MIN_GAIN: the base stays
    f = 1.0 - 0.5 * MIN_GAIN
    c = choose_gate(np.array([[10.0, 20.0], [10.0 * f, 20.0 * f], [12.0, 25.0]]), g)
    assert c.gate == 0.0 and not c.verdicts[1].earns_place
    # ties go to the smaller gate
    assert choose_gate(np.array([[10.0, 10.0], [5.0, 5.0], [5.0, 5.0]]), g).gate == 0.5
    assert choose_gate(np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), g).gate == 0.0  # an exact base: nothing to correct
    with pytest.raises(ModelError, match="do not contain 0"):
        choose_gate(np.ones((2, 2)), (0.5, 1.0))
    d = choose_gate(np.array([[1e-3, 2e-3], [0.5e-3, 1e-3]]), (0.0, 1.0), ["x", "y"]).to_dict()
    assert d["gate"] == 1.0 and d["gates"][1]["per_group"] == [0.5, 1.0] and d["groups"] == ["x", "y"]


def test_run_train_gates_a_correction_by_held_out_groups(tmp_path):
    """Over the 30 %-weak base the correction learned without a group holds on it: a gate > 0 earns
    its place, the written model replays as that gate's, and the fold runs are kept in RUN/gate/."""
    from actuatorlab.app.jobs import JointTrainOptions, run_evaluate, run_train

    logs = synthetic_set([("chirp400", "chirp", 400), ("chirp800", "chirp", 800), ("sine400", "sine", 400),
                          ("sine800", "sine", 800)], TRUTH_M1, duration=1.5, amplitude=0.6)
    paths = [save_trajectory(t, tmp_path / "logs" / f"{t.name}.parquet") for t in logs]
    base = save_model(analytic_model(WRONG), tmp_path / "base" / "model.json")
    run = tmp_path / "run"
    opts = JointTrainOptions(arch="mlp", residual=base, steps=150, n_windows=8, history=3, sizes=TINY, lr=2e-2,
                             curriculum=((0.0, 32),), gate="groups")
    d = run_train(paths, run, opts, progress=False)
    cg = d["fit"]["correction_gate"]
    assert cg["groups"] == ["excitation=chirp", "excitation=sine"]
    assert [r["gate"] for r in cg["gates"]] == list(GATES)
    assert sorted(p.name for p in (run / "gate").iterdir()) == ["excitation_chirp", "excitation_sine"]
    rows = {r["gate"]: r for r in cg["gates"]}
    assert cg["gate"] > 0.0 and rows[cg["gate"]]["earns_place"], json.dumps(cg)
    assert rows[cg["gate"]]["mean"] < 0.7 * rows[0.0]["mean"], json.dumps(cg)  # measured: gate 1, 28.7 vs 47.7 mrad
    learned, analytic = (run_evaluate(p, paths)["position_mae"] for p in (run / "model.json", base))
    assert learned < 0.5 * analytic, (learned, analytic)
    # a resumed run reuses the finished folds and the finished training: the same gate and scores
    assert run_train(paths, run, opts, resume=True, progress=False)["fit"]["correction_gate"] == cg


def test_cli_refuses_an_unknown_gate_before_any_work(tmp_path, capsys):
    from actuatorlab.app.cli import main

    (t,) = synthetic_set([("sine", "sine", 400)], TRUTH_M1, duration=0.2)
    p = save_trajectory(t, tmp_path / "sine.parquet")
    assert main(["train", str(p), "--arch", "mlp", "--gate", "half", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "half" in err and "groups, none" in err and len(err.strip().splitlines()) <= 2
    assert not (tmp_path / "run").exists()


def test_cli_refuses_a_whole_robot_budget_or_time_limit_for_one_joint_and_bad_values(tmp_path, capsys):
    """--budget / --time-limit set whole-robot training: one joint, an unknown budget or a limit <= 0
    is a one-line error before any work."""
    from actuatorlab.app.cli import main

    (t,) = synthetic_set([("sine", "sine", 400)], TRUTH_M1, duration=0.2)
    p = save_trajectory(t, tmp_path / "sine.parquet")
    for flags, words in ((["--time-limit", "60"], ("--robot",)), (["--budget", "full"], ("--robot",)),
                         (["--robot", "open_manipulator_x", "--budget", "huge"], ("huge", "default, full")),
                         (["--robot", "open_manipulator_x", "--time-limit", "0"], ("--time-limit", "> 0"))):
        assert main(["train", str(p), *flags, "--out", str(tmp_path / "run")]) == 2, flags
        err = capsys.readouterr().err
        assert all(w in err for w in words) and len(err.strip().splitlines()) <= 2, (flags, err)
        assert not (tmp_path / "run").exists()

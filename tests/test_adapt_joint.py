"""One-joint adaptation (``actuatorlab adapt`` on a run of the one-joint ``train``): the same servo
with a known change.

The old servo is the synthetic XL330-like pendulum with the m1 truth; the residual model's base is
that truth (its zeroed torque head: exactly the base). The new condition has twice the Coulomb
friction and 1.5x the armature (a heavier, stiffer joint: what another load or a worn gearbox does
to a fitted m1). Adapting on three logs of it must cut the replay error on two other logs of it by
more than half; RUN is only read, and the fine-tuning keeps the starting network when it never beats
it on the logs' validation parts.
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from synthetic import DT, TRUTH_M1, synthetic_set

from actuatorlab.app.cli import main
from actuatorlab.errors import ActuatorlabError
from actuatorlab.evaluate.replay import replay_joint
from actuatorlab.learned.adapt import AdaptConfig, adapt, adapt_joint
from actuatorlab.learned.joint_train import build_joint_model, load_joint_model, save_joint_model
from actuatorlab.logs import save_trajectory
from actuatorlab.models.modelfile import MODEL_FORMAT, MODEL_FORMAT_VERSION, load_model
from actuatorlab.precision import physics_precision
from actuatorlab.sim.rollout import make_batches

NEW = {**TRUTH_M1, "friction_base": 2.0 * TRUTH_M1["friction_base"], "armature": 1.5 * TRUTH_M1["armature"]}


def _analytic(params: dict) -> dict:
    return {"format": MODEL_FORMAT, "format_version": MODEL_FORMAT_VERSION, "model": "m1",
            "joint_type": "revolute", "controller": "dynamixel_pwm", "setup": {"joint_type": "revolute"},
            "parameters": {k: {"value": float(v), "free": True} for k, v in params.items()}, "fit": {"dt": DT}}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    old = synthetic_set([("o_chirp", "chirp", 400), ("o_steps", "steps", 400)], TRUTH_M1, duration=1.5,
                        quantise=False, amplitude=0.6)
    new = synthetic_set([("n_chirp", "chirp", 400), ("n_sine", "sine", 400), ("n_steps", "steps", 400)], NEW,
                        duration=1.5, quantise=False, amplitude=0.6)
    test = synthetic_set([("t_chirp", "chirp", 400), ("t_steps", "steps", 300)], NEW, duration=1.5,
                         quantise=False, amplitude=0.5)
    root = tmp_path_factory.mktemp("adapt_joint")
    run = root / "run"
    with physics_precision():
        (ob,) = make_batches(old, DT)
        base = _analytic(TRUTH_M1)
        model = build_joint_model("residual", "mlp", [ob], base=base, history=2, sizes=dict(width=16, depth=1, d=8,
                                                                                          head_width=8))
        save_joint_model(run, model, arch="mlp", sizes=dict(width=16, depth=1, d=8, head_width=8), base=base,
                         setup={"joint_type": "revolute", "controller": "dynamixel_pwm"}, data={"dt": DT},
                         training={"steps": 0})
    logs = root / "new_logs"
    logs.mkdir()
    for t in new:
        save_trajectory(t, logs / f"{t.name}.parquet")
    return dict(run=run, new=new, test=test, logs=logs)


def _mae(model_json, trajs) -> float:
    with physics_precision():
        d = load_model(model_json)
        m = load_joint_model(d, model_json)
        r = replay_joint(m, make_batches(trajs, DT))
    return float(np.mean(np.concatenate([np.abs(x.q_sim - x.q_meas)[x.mask] for x in r])))


def _snapshot(folder):
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir() if p.is_file()}


def test_adaptation_lowers_the_error_with_a_known_change(case, tmp_path):
    run, before_files = case["run"], _snapshot(case["run"])
    before = _mae(run / "model.json", case["test"])
    d = adapt_joint(run, case["new"], AdaptConfig(steps=0), out=tmp_path / "run2")
    after = _mae(tmp_path / "run2" / "model.json", case["test"])
    print(f"replay MAE on the new condition: {1e3 * before:.2f} -> {1e3 * after:.2f} mrad")
    assert before > 5e-3, before  # the change is visible
    assert after < 0.5 * before, (before, after)
    a = d["fit"]["adaptation"]
    assert a["n_trajectories"] == 3 and a["base_refit"]["evaluations"] >= 400
    fb = d["base"]["parameters"]["friction_base"]["value"]
    assert abs(fb - NEW["friction_base"]) < abs(TRUTH_M1["friction_base"] - NEW["friction_base"]), fb
    assert _snapshot(run) == before_files  # RUN only read
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run2"]


def test_fine_tuning_keeps_the_start_unless_it_does_better(case, tmp_path):
    """A destructive fine-tuning (learning rate 10) never beats the start on the validation parts:
    the start is kept (its network untouched); the run's validation at step 0 is recorded."""
    d = adapt_joint(case["run"], case["new"], AdaptConfig(steps=6, lr=10.0, refit_evals=0), out=tmp_path / "run2")
    f = d["fit"]
    assert f["steps"] == 6 and f["init_val_mae"] is not None and "kept" in f
    assert not (tmp_path / "run2" / "best.ckpt").exists()  # the fine-tuning's checkpoints are not the model's
    with physics_precision():
        m0 = load_joint_model(load_model(case["run"] / "model.json"), case["run"] / "model.json")
        m1 = load_joint_model(load_model(tmp_path / "run2" / "model.json"), tmp_path / "run2" / "model.json")
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(m1.net), jax.tree.leaves(m0.net)))


def test_cli_dispatches_on_the_model_file_and_refuses_bad_outs(case, tmp_path):
    cfg = tmp_path / "job.json"
    cfg.write_text(json.dumps({"adapt": {"steps": 0, "refit_evals": 16}}))
    out = tmp_path / "run2"
    assert main(["adapt", str(case["run"]), str(case["logs"]), "--out", str(out), "--config", str(cfg)]) == 0
    assert load_model(out / "model.json")["kind"] == "residual"
    with pytest.raises(ActuatorlabError) as e:
        adapt(case["run"], case["new"], AdaptConfig(steps=0), out=out)
    assert "already exists" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ActuatorlabError) as e:
        adapt(case["run"] / "model.json", case["new"], AdaptConfig(steps=0), out=case["run"] / "x")
    assert "inside" in str(e.value)

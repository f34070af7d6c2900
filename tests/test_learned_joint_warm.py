"""The one-joint path of the one training algorithm (:func:`actuatorlab.learned.learn.learn`): the
warm start by distillation reproduces the teacher in closed loop, the training step compiles once
per curriculum window shape (counted), a resume with another teacher is refused.

"Hardware": the synthetic XL330-like pendulum with the m1 ground truth; the teacher is an analytic
model fitted wrong (kt -15 %, Coulomb friction x 2), so its rollouts have a known, non-zero error.
A small MLP (2 x 128, three frames of history) replacing the whole actuator, distilled on the
measured frames of three training logs and four noisy copies (no simulator), must come within 1.2x of the teacher's
rollout error on windows of two held-out logs (another command, another gain): a test that fails
when the effort it learned is not the teacher's (the untrained network drives the joint off).
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from synthetic import analytic_model, DT, TRUTH_M1, synthetic_set

import actuatorlab.learned.joint_train as joint_train
from actuatorlab.errors import ModelError
from actuatorlab.learned.distill import DistillConfig, distill
from actuatorlab.learned.joint import JointModel, log_set, simulate, trainable, windows
from actuatorlab.learned.joint_train import WindowSampling, build_joint_model, distill_targets, train_joint
from actuatorlab.learned.trainer import TrainConfig
from actuatorlab.logs import save_trajectory
from actuatorlab.models.modelfile import save_model
from actuatorlab.precision import physics_precision
from actuatorlab.sim.rollout import make_batches

WRONG = {**TRUTH_M1, "kt": 0.85 * TRUTH_M1["kt"], "friction_base": 2.0 * TRUTH_M1["friction_base"]}
SIZES = dict(width=128, depth=2, d=32, head_width=32)



@pytest.fixture(scope="module")
def case():
    train = synthetic_set([("chirp", "chirp", 400), ("sine", "sine", 400), ("steps", "steps", 600)], TRUTH_M1,
                          duration=1.5, quantise=False, amplitude=0.6)
    held = synthetic_set([("h_chirp", "chirp", 500), ("h_steps", "steps", 300)], TRUTH_M1, duration=1.5,
                         quantise=False, amplitude=0.5)
    with physics_precision():
        (tb,) = make_batches(train, DT)
        (hb,) = make_batches(held, DT)
    return dict(train=train, tb=tb, hb=hb)


def _window_mae(model, hb, horizon=100) -> float:
    ls = log_set(model, hb)
    T = int(np.asarray(hb.mask).sum(1).min())
    k0 = np.arange(0, T - horizon, horizon // 2)
    idx = np.repeat(np.arange(ls.qt.shape[0]), len(k0))
    w = windows(model, ls, idx, np.tile(k0, ls.qt.shape[0]), horizon)
    out = jax.vmap(lambda wi: simulate(model, wi))(w)
    m = np.asarray(w.mask)
    return float(np.mean(np.abs(np.asarray(out.q) - np.asarray(w.q_meas))[m]))


def test_distillation_reproduces_the_teacher_in_closed_loop(case):
    teacher = analytic_model(WRONG)
    with physics_precision():
        model = build_joint_model("learned", "mlp", [case["tb"]], base=teacher, history=3, sizes=SIZES, seed=0)
        # the teacher itself: the residual over it with a correction clipped to zero
        ref = build_joint_model("residual", "mlp", [case["tb"]], base=teacher, history=3, sizes=SIZES)
        ref = JointModel(ref.net, ref.norm, ref.params, ref.kind, ref.cfg, ref.layout, ref.effort_scale, 0.0)
        truth = build_joint_model("residual", "mlp", [case["tb"]], base=analytic_model(TRUTH_M1), history=3, sizes=SIZES)
        truth = JointModel(truth.net, truth.norm, truth.params, truth.kind, truth.cfg, truth.layout,
                           truth.effort_scale, 0.0)
        cfg = DistillConfig(steps=3000, batch=256, lr=3e-3, copies=4)  # measured: 1.04x the teacher
        x, y, w = distill_targets(model, log_set(model, case["tb"]), teacher, cfg)
        warm, info = distill(model, lambda m, win: m.net(m.norm.apply(win)).torque, x, y, w, cfg,
                             filter_spec=trainable(model))
        mae_truth, mae_teacher = _window_mae(truth, case["hb"]), _window_mae(ref, case["hb"])
        mae_cold, mae_warm = _window_mae(model, case["hb"]), _window_mae(warm, case["hb"])
    assert info["mse_after"] < 0.05 * info["mse_before"] and info["r2"] > 0.95, info
    assert mae_truth < 0.5 * mae_teacher  # the teacher is wrong by a measurable amount
    assert mae_cold > 5 * mae_teacher, (mae_cold, mae_teacher)
    assert mae_warm <= 1.2 * mae_teacher, (mae_warm, mae_teacher, info)


def test_one_compilation_per_window_shape_and_resume_rules(case, tmp_path, monkeypatch):
    traces = []
    real = joint_train.window_loss

    def counting(m, w):  # called once per trace of the training step (never when it runs)
        traces.append(w.q_meas.shape)
        return real(m, w)

    monkeypatch.setattr(joint_train, "window_loss", counting)
    teacher = analytic_model(WRONG)
    with physics_precision():
        model = build_joint_model("learned", "mlp", [case["tb"]], base=teacher, history=2,
                                  sizes=dict(width=8, depth=1, d=8, head_width=8))
        cfg = TrainConfig(steps=3, warmup=1, checkpoint_every=3, eval_every=3)
        sampling = WindowSampling(n_windows=2, curriculum=((0.0, 8), (1 / 3, 8), (2 / 3, 16)))
        best, res = train_joint(tmp_path / "run", [case["tb"]], [case["hb"]], model, cfg, sampling=sampling,
                                progress=False, meta={"teacher": teacher, "distill": {"steps": 20, "batch": 64}})
    # three stages, two window shapes (8 and 16 control steps): two compilations of the step
    assert sorted({s[1] for s in traces}) == [8, 16] and len(traces) == 2, traces
    ws = res.warm_start
    assert ws["steps"] == 20 and ws["mse_after"] < ws["mse_before"]
    assert res.metrics[0]["step"] == 0  # the warm start is validated before the first step
    assert isinstance(best, JointModel)


def test_run_train_refuses_a_resume_with_another_teacher(case, tmp_path):
    from actuatorlab.app.jobs import JointTrainOptions, run_train

    paths = [save_trajectory(t, tmp_path / "logs" / f"{t.name}.parquet") for t in case["train"]]
    a = save_model(analytic_model(WRONG), tmp_path / "a" / "model.json")
    b = save_model(analytic_model({**WRONG, "kt": 0.5 * WRONG["kt"]}), tmp_path / "b" / "model.json")
    opts = JointTrainOptions(arch="mlp", teacher=a, steps=2, n_windows=2, history=2, curriculum=((0.0, 8),),
                             sizes=dict(width=8, depth=1, d=8, head_width=8), distill=DistillConfig(steps=5, batch=32))
    run = tmp_path / "run"
    d = run_train(paths, run, opts, progress=False)
    assert d["kind"] == "learned" and d["fit"]["warm_start"]["teacher"] == f"teacher {a}"
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    with pytest.raises(ModelError) as e:
        run_train(paths, run, JointTrainOptions(**{**opts.__dict__, "teacher": b}), resume=True, progress=False)
    assert "different teacher" in str(e.value) and "\n" not in str(e.value)
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before
    # a run written before the warm start existed (no teacher in its meta) resumes cold, fitting nothing
    cold = tmp_path / "cold"
    run_train(paths, cold, JointTrainOptions(**{**opts.__dict__, "teacher": None, "distill": None}), progress=False)
    cp = cold / "config.json"
    c = json.loads(cp.read_text())
    del c["meta"]["teacher"], c["meta"]["distill"]
    cp.write_text(json.dumps(c))
    d = run_train(paths, cold, JointTrainOptions(**{**opts.__dict__, "teacher": None}), resume=True, progress=False)
    assert d["fit"]["warm_start"]["teacher"] == "none: the resumed run was a cold start" and d["fit"]["steps"] == 2

"""The command-line contract (issue 41 item 8, issue 46): every refused input is ONE line on stderr
that names the file, option or missing extra, exit code 2, no traceback, and the input files
unchanged; ``--json`` prints exactly one JSON document on stdout; output redirected to a file is
neither cut to 80 columns nor littered with frozen progress rows.

Commands run in-process through :func:`actuatorlab.app.cli.main` (the entry point, which turns library
errors into one line) inside click's ``CliRunner`` isolation (separate stdout and stderr, neither
a terminal); a subprocess only where the purity of the process's own stdout is the point. The
expensive artefacts are built small: a quick m1 fit, a 16-evaluation whole-robot fit of the smoke
suite, untrained learned models, a two-chunk toy policy.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import cli
from synthetic import TRUTH_M1, synthetic_set

from actuatorlab.app.cli import app
from actuatorlab.logs import load_log, save_trajectory

ROOT = Path(__file__).resolve().parents[1]
ROBOT = "open_manipulator_x"
TOY = ["--robot", "toy", "--task", "point_mass", "--steps", "512", "--envs", "4"]


def digest(*paths: Path) -> dict[str, str]:
    """SHA-256 of every file at or under ``paths`` (the inputs whose bytes must not change)."""
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*"))) if f.is_file()]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def one_line_error(rc: int, err: str, *words) -> str:
    """The error line; asserts exit code 2, exactly one non-empty line, no traceback, and every word in it."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, (rc, err)
    assert lines[0].startswith("error:"), lines[0]
    for w in words:
        assert str(w) in lines[0], (w, lines[0])
    return lines[0]


def refused(argv, *words, inputs=(), absent=(), env=None) -> str:
    """Run ARGV, which must be refused in one line naming ``words``, leave ``inputs`` byte for byte
    as they were and create none of ``absent``."""
    before = digest(*inputs)
    rc, out, err = cli(*argv, env=env)
    line = one_line_error(rc, err, *words)
    assert digest(*inputs) == before
    for p in absent:
        assert not Path(p).exists(), p
    return line


# ------------------------------------------------------------------------------------------------
# artefacts (module scope: built once)
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    """Two short one-joint logs and ``fit --model m1 --budget quick`` of them, its stdout and
    stderr captured as if redirected to a file (not a terminal: rich assumes 80 columns)."""
    root = tmp_path_factory.mktemp("one")
    logs = root / "logs"
    logs.mkdir()
    for tr in synthetic_set([("chirp400", "chirp", 400), ("sine800", "sine", 800)], TRUTH_M1, duration=1.0):
        save_trajectory(tr.replace(source_file=""), logs)
    rc, out, err = cli("fit", logs, "--model", "m1", "--budget", "quick", "--out", root / "run")
    assert rc == 0, err
    return dict(root=root, logs=logs, model=root / "run" / "model.json", fit_out=out, fit_err=err)


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    """``synth --suite smoke`` (logs of 3-4 s) and a 16-evaluation ``fit --robot`` of its training logs."""
    root = tmp_path_factory.mktemp("arm")
    rc, synth_out, err = cli("synth", "--suite", "smoke", "--out", root / "syn", "--seed", "1")
    assert rc == 0, err
    (root / "fit.json").write_text(json.dumps({"max_evals": 16}))
    rc, _, err = cli("fit", root / "syn" / "train", "--robot", ROBOT, "--model", "m1", "--config", root / "fit.json",
                     "--out", root / "run")
    assert rc == 0, err
    return dict(root=root, data=root / "syn", model=root / "run" / "arm_model.json", synth_out=synth_out)


@pytest.fixture(scope="module")
def learned_joint(tmp_path_factory, one):
    """An untrained (but complete and valid) learned one-joint model.json + weights."""
    from actuatorlab.learned.joint_train import build_joint_model, save_joint_model
    from actuatorlab.models.nets import arch_sizes
    from actuatorlab.logs import load_logs
    from actuatorlab.sim.rollout import make_batches

    root = tmp_path_factory.mktemp("learned")
    (b,) = make_batches(load_logs([one["logs"] / "chirp400.json"]), 0.005)
    sizes = dict(width=16, depth=1, d=8, head_width=8)
    m = build_joint_model("learned", "mlp", [b], history=2, sizes=sizes, seed=0)
    save_joint_model(root, m, arch="mlp", sizes=arch_sizes("mlp", **sizes), base=None,
                     setup={"joint_type": "revolute", "controller": "dynamixel_pwm"}, data={"dt": 0.005}, training={})
    return root / "model.json"


@pytest.fixture(scope="module")
def learned_arm(tmp_path_factory):
    """An untrained learned whole-robot model (arm_model.json + weights) of the OM-X."""
    import jax
    import numpy as np

    from actuatorlab.learned.arm import make_learned_arm, save_arm_model
    from actuatorlab.models.features import Normalizer
    from actuatorlab.robots import load_robot

    root = tmp_path_factory.mktemp("learned_arm")
    r = load_robot(ROBOT)
    ch, feats = tuple(r.joint_names[:4]), ("q_target", "q", "dq", "err")
    n = len(ch) * len(feats)
    m = make_learned_arm(r, "mlp", channels=ch, per_channel=feats, normalizer=Normalizer(np.zeros(n), np.ones(n)),
                         effort_scale=0.5, history=2, key=jax.random.PRNGKey(0), width=16, depth=1, d=16,
                         head_width=16)
    save_arm_model(root, r.name, m, None)
    return root / "arm_model.json"


@pytest.fixture(scope="module")
def policy_run(tmp_path_factory):
    """A finished two-chunk toy policy run (RUN/policy.npz, RUN/ckpt/latest.npz)."""
    run = tmp_path_factory.mktemp("policy") / "run"
    rc, out, err = cli("train-policy", *TOY, "--out", run)
    assert rc == 0, err
    assert (run / "policy.npz").is_file() and (run / "ckpt" / "latest.npz").is_file()
    return run


def truncated_copy(run: Path, dest: Path, rel: str) -> Path:
    """A copy of run folder ``run`` at ``dest`` whose file ``rel`` is cut to half its length."""
    shutil.copytree(run, dest)
    f = dest / rel
    raw = f.read_bytes()
    f.write_bytes(raw[: len(raw) // 2])
    return f


# ------------------------------------------------------------------------------------------------
# export: a missing optional package names the extra to install
# ------------------------------------------------------------------------------------------------


def test_export_torchscript_without_torch_names_the_extra(learned_joint, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    line = refused(["export", learned_joint, "--torchscript", tmp_path / "a.pt"],
                   learned_joint, "--torchscript", "torch", "'export'", "actuatorlab[export]",
                   inputs=[learned_joint.parent], absent=[tmp_path / "a.pt", tmp_path / "README.md"])
    assert "ModuleNotFoundError" not in line


def test_export_onnx_without_onnx_names_the_extra(learned_joint, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    refused(["export", learned_joint, "--onnx", tmp_path / "a.onnx"],
            learned_joint, "--onnx", "'onnx'", "actuatorlab[onnx]",
            inputs=[learned_joint.parent], absent=[tmp_path / "a.onnx", tmp_path / "README.md"])


# ------------------------------------------------------------------------------------------------
# model files: refused at load, naming the file
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_parameter_is_refused_at_load(one, tmp_path, value):
    d = json.loads(one["model"].read_text())
    d["parameters"]["kt"]["value"] = value
    bad = tmp_path / "model.json"
    bad.write_text(json.dumps(d))  # NaN / Infinity: what json.dumps writes for them
    refused(["evaluate", bad, one["logs"], "--json"], bad, "'kt'", "finite", inputs=[bad, one["logs"]])
    refused(["export", bad, "--mjcf", tmp_path / "x.xml"], bad, "'kt'", "finite", inputs=[bad],
            absent=[tmp_path / "x.xml"])


def test_non_finite_physics_parameter_of_a_learned_model_is_refused(learned_joint, one, tmp_path):
    shutil.copytree(learned_joint.parent, tmp_path / "run")
    bad = tmp_path / "run" / "model.json"
    d = json.loads(bad.read_text())
    d["physics_parameters"]["armature"] = float("nan")
    bad.write_text(json.dumps(d))
    refused(["evaluate", bad, one["logs"]], bad, "'armature'", "finite", inputs=[tmp_path / "run"])


def test_unknown_model_name_names_the_file(one, tmp_path):
    bad = tmp_path / "model.json"
    bad.write_text(one["model"].read_text().replace('"model": "m1"', '"model": "m77"'))
    refused(["evaluate", bad, one["logs"]], bad, "'m77'", "m1", "m6", inputs=[bad, one["logs"]])


def test_arm_model_without_robot_option_reads_the_robot_from_the_file(arm, tmp_path):
    before = digest(arm["model"], arm["data"])
    rc, out, err = cli("evaluate", arm["model"], arm["data"], "--json")
    assert rc == 0, err
    assert set(json.loads(out)["per_joint"]) == {"joint1", "joint2", "joint3", "joint4"}
    assert digest(arm["model"], arm["data"]) == before
    d = json.loads(arm["model"].read_text())
    del d["robot"]
    anon = tmp_path / "arm_model.json"
    anon.write_text(json.dumps(d))
    line = refused(["evaluate", anon, arm["data"], "--json"], anon, "--robot", inputs=[anon, arm["data"]])
    assert "not an actuatorlab model file" not in line


def test_short_logs_say_why_a_horizon_has_no_column(arm):
    rc, out, err = cli("evaluate", arm["model"], arm["data"], "--robot", ROBOT, "--json")
    assert rc == 0, err
    s = json.loads(out)
    assert all("600" not in v for v in s["per_joint"].values())  # every log is shorter than 600 steps
    assert "600" in s["skipped_horizons"] and "100" not in s["skipped_horizons"]
    warn = [ln for ln in err.splitlines() if ln.strip()]
    assert all(ln.startswith("warning:") for ln in warn), err
    # one line says why there is no 600-step column; the others are the envelope's (the smoke suite
    # trains on one teleoperation log, so the held-out logs leave its range), one per log and joint
    horizon = [ln for ln in warn if "600-step" in ln]
    assert len(horizon) == 1 and "longer than every log" in horizon[0], err
    assert all("training envelope" in ln for ln in warn if ln not in horizon), err


def test_infer_names_the_log_file_that_lacks_a_channel(arm, learned_arm, tmp_path):
    tr = load_log(arm["data"] / "train" / "teleop_000.json")
    assert tr.source_file.startswith("synthetic:")  # the recorded origin is not a file
    bad = tmp_path / "logs"
    bad.mkdir()
    save_trajectory(tr.without_channels("position/joint2").replace(name="no_joint2"), bad)
    line = refused(["infer", learned_arm, bad, "--out", tmp_path / "pred.csv"],
                   bad / "no_joint2", "'position/joint2'", inputs=[bad, learned_arm.parent],
                   absent=[tmp_path / "pred.csv"])
    assert "synthetic:" not in line


def test_import_bam_of_a_json_that_is_no_bam_file(tmp_path):
    garbage = tmp_path / "garbage.json"
    garbage.write_text(json.dumps({"hello": [1, 2]}))
    line = refused(["import-bam", garbage, "--out", tmp_path / "model.json"],
                   garbage, "not a BAM parameter file", "'model'", "'actuator'",
                   inputs=[garbage], absent=[tmp_path / "model.json"])
    assert "None" not in line


def test_readme_import_bam_example_says_where_its_file_is():
    """The README's import-bam example names a file of this repository, or says it is BAM's."""
    lines = [ln for ln in (ROOT / "README.md").read_text().splitlines() if ln.startswith("actuatorlab import-bam ")]
    assert lines
    for ln in lines:
        arg = ln.split()[2]
        assert (ROOT / arg).is_file() or "BAM repository" in ln, ln


# ------------------------------------------------------------------------------------------------
# runs: --resume needs a run, damaged checkpoints and policies are one line
# ------------------------------------------------------------------------------------------------


def _no_work(monkeypatch, module: str, name: str) -> None:
    """Replace the command's work function: reaching it fails the test (the old behaviour)."""
    import importlib

    def started(*a, **k):
        raise AssertionError(f"{name} started although the command had to be refused")

    monkeypatch.setattr(importlib.import_module(module), name, started)
    cli_module = importlib.import_module("actuatorlab.app.cli")
    if hasattr(cli_module, name):  # the CLI module binds the job function by name too
        monkeypatch.setattr(cli_module, name, started)


def test_train_resume_of_a_missing_run_is_an_error(one, tmp_path, monkeypatch):
    _no_work(monkeypatch, "actuatorlab.app.jobs", "run_train")
    missing = tmp_path / "MISSING"
    refused(["train", one["logs"], "--out", missing, "--resume"], missing, "nothing to resume",
            inputs=[one["logs"]], absent=[missing])


def test_train_policy_resume_of_a_missing_run_is_an_error(tmp_path, monkeypatch):
    _no_work(monkeypatch, "actuatorlab.policy.train", "train_policy")
    missing = tmp_path / "MISSING"
    refused(["train-policy", *TOY, "--out", missing, "--resume"], missing, "nothing to resume", absent=[missing])


def test_train_policy_resume_from_a_truncated_checkpoint(policy_run, tmp_path):
    f = truncated_copy(policy_run, tmp_path / "run", "ckpt/latest.npz")
    refused(["train-policy", *TOY, "--out", tmp_path / "run", "--resume"], f, "corrupt",
            inputs=[f, tmp_path / "run" / "config.json"])


def test_eval_policy_of_a_truncated_policy_file(policy_run, tmp_path):
    f = truncated_copy(policy_run, tmp_path / "run", "policy.npz")
    refused(["eval-policy", tmp_path / "run"], f, "corrupt", inputs=[tmp_path / "run"])


# ------------------------------------------------------------------------------------------------
# numeric options: negative / zero budgets, steps and scales are refused before any work
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, option, work", [
    (["excite", "--model-file", "{model}", "--budget", "-5", "--out", "{out}"], "--budget", None),
    (["excite", "--model-file", "{model}", "--budget", "0", "--out", "{out}"], "--budget", None),
    (["excite", "--model-file", "{model}", "--config", "JOB segment_s -1", "--out", "{out}"], "segment_s", None),
    (["synth", "--suite", "smoke", "--scale", "0", "--out", "{out}"], "--scale", None),
    (["synth", "--suite", "smoke", "--scale", "-0.5", "--out", "{out}"], "--scale", None),
    (["fit", "{logs}", "--model", "m1", "--config", "JOB options.dt -0.005", "--out", "{out}"], "options.dt",
     ("actuatorlab.app.jobs", "run_fit")),
    (["train", "{logs}", "--steps", "-10", "--out", "{out}"], "--steps", ("actuatorlab.app.jobs", "run_train")),
    (["train-policy", "--robot", "toy", "--task", "point_mass", "--steps", "-1", "--out", "{out}"], "--steps",
     ("actuatorlab.policy.train", "train_policy")),
    (["train-policy", "--robot", "toy", "--task", "point_mass", "--envs", "0", "--out", "{out}"], "--envs",
     ("actuatorlab.policy.train", "train_policy")),
    (["eval-policy", "{out}", "--steps", "-3"], "--steps", ("actuatorlab.policy.train", "evaluate_policy")),
    (["eval-policy", "{out}", "--impl", "cuda"], "--impl", ("actuatorlab.policy.train", "evaluate_policy")),
], ids=["excite-budget-neg", "excite-budget-zero", "excite-segment", "synth-scale-zero", "synth-scale-neg", "fit-dt",
        "train-steps", "train-policy-steps", "train-policy-envs", "eval-policy-steps", "eval-policy-impl"])
def test_bad_numeric_options_are_refused_before_any_work(one, tmp_path, monkeypatch, argv, option, work):
    if work:
        _no_work(monkeypatch, *work)
    out = tmp_path / "OUT"
    argv = [a.format(model=one["model"], out=out, logs=one["logs"]) for a in argv]
    for i, a in enumerate(argv):  # "JOB field value": a --config file setting a field that has no flag
        if a.startswith("JOB "):
            _, field, value = a.split()
            head, _, leaf = field.rpartition(".")
            job = {leaf: float(value)} if not head else {head: {leaf: float(value)}}
            argv[i] = tmp_path / "job.json"
            argv[i].write_text(json.dumps(job))
    refused(argv, option, inputs=[one["model"], one["logs"]],
            absent=[] if argv[0] == "eval-policy" else [out])


# ------------------------------------------------------------------------------------------------
# --json: exactly one JSON document on stdout
# ------------------------------------------------------------------------------------------------


def json_commands() -> set[str]:
    """Every command with a --json option."""
    import inspect

    names = set()
    for c in app.registered_commands:
        params = inspect.signature(c.callback).parameters.values()
        if any("--json" in (getattr(p.default, "param_decls", None) or ()) for p in params):
            names.add(c.name or c.callback.__name__)
    return names


#: command -> (argv after the name, (module, work function), what it returns)
JSON_CASES = {
    "evaluate": (["{model}", "{logs}"], ("actuatorlab.app.jobs", "run_evaluate"), {}),
    "compare": (["{logs}", "--holdout", "{logs}"], ("actuatorlab.app.jobs", "run_compare"), {}),
    "audit": (["{logs}"], ("actuatorlab.app.jobs", "run_audit"), []),
    "estimate-force": (["-", "{logs}", "--robot", ROBOT], ("actuatorlab.app.estimate_jobs", "run_estimate_force"), {}),
    "condition": (["{model}", "{logs}", "--robot", ROBOT], ("actuatorlab.app.estimate_jobs", "run_condition_files"), {}),
    "report-heads": (["{model}", "{logs}", "--robot", ROBOT, "--train", "{logs}"],
                     ("actuatorlab.app.estimate_jobs", "run_heads_report"), {}),
    "replay": (["{logs}"], ("actuatorlab.evaluate.suite", "run_suite"), {"passed": True}),
    "train-policy": (["--robot", "toy", "--task", "point_mass", "--out", "{out}"],
                     ("actuatorlab.policy.train", "train_policy"), {}),
    "eval-policy": (["{out}"], ("actuatorlab.policy.train", "evaluate_policy"), {}),
}


def test_every_json_command_is_checked():
    assert json_commands() == set(JSON_CASES)


@pytest.mark.parametrize("command", sorted(JSON_CASES))
def test_json_stdout_is_one_document_despite_third_party_prints(one, tmp_path, monkeypatch, command):
    """A library that prints on stdout while the command runs (MJX prints "Failed to import warp"
    when first imported) must not spoil the JSON: its line goes to stderr."""
    import importlib

    argv, (module, name), result = JSON_CASES[command]
    mod = importlib.import_module(module)

    def noisy(*a, **k):
        print("Failed to import warp: No module named 'warp'")
        return {"stand-in": name, **result} if isinstance(result, dict) else result

    monkeypatch.setattr(mod, name, noisy)
    cli_module = importlib.import_module("actuatorlab.app.cli")
    if hasattr(cli_module, name):  # the CLI module binds the job function by name too
        monkeypatch.setattr(cli_module, name, noisy)
    argv = [a.format(model=one["model"], logs=one["logs"], out=tmp_path / "run") for a in argv]
    rc, out, err = cli(command, *argv, "--json")
    assert rc == 0, err
    json.loads(out)  # exactly one document: anything else on stdout is "Extra data" or not JSON
    assert "Failed to import warp" in err


#: ``actuatorlab ARGV`` in a fresh process in which the environment factory of train/eval-policy
#: first imports MJX, as a legged robot's environment does (the toy environment alone does not: a
#: legged-robot policy costs a minute of XLA compilation). Without the optional ``warp`` package
#: that import prints "Failed to import warp" on stdout.
DRIVER = """
import sys
import actuatorlab.policy.train as train
make_policy_env = train.make_policy_env
def make_env_importing_mjx(*a, **k):
    import mujoco.mjx  # noqa: F401
    return make_policy_env(*a, **k)
train.make_policy_env = make_env_importing_mjx
from actuatorlab.app.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_eval_policy_json_in_a_fresh_process_that_imports_mjx(policy_run, tmp_path):
    import importlib.util

    p = subprocess.run([sys.executable, "-c", DRIVER, "eval-policy", str(policy_run), "--steps", "5", "--envs", "4",
                        "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    d = json.loads(p.stdout)  # what `| python -m json.tool` needs: one document, nothing else
    assert d["steps"] == 5
    if importlib.util.find_spec("warp") is None:
        assert "Failed to import warp" in p.stderr  # MJX's message went to stderr


# ------------------------------------------------------------------------------------------------
# output that is not a terminal
# ------------------------------------------------------------------------------------------------


def test_fit_redirected_to_a_file_has_whole_cells_and_no_frozen_progress(one):
    out, err = one["fit_out"], one["fit_err"]
    assert "…" not in out, out  # rich's ellipsis: a cut cell
    for name in ("friction_viscous", "friction_base", "armature"):
        assert re.search(rf"\b{name}\b", out), name
    assert "wrote " in out and str(one["model"]) in out.replace("\n", "")
    assert not re.search(r"\b0\.0 ?%", err), err  # no progress row left at 0 %


def test_synth_scale_zero_fails_before_the_progress_bar(tmp_path):
    refused(["synth", "--suite", "smoke", "--scale", "0", "--out", tmp_path / "S"], "--scale",
            absent=[tmp_path / "S"])


def test_synth_summary_is_json(arm):
    out = arm["synth_out"]
    summary, end = json.JSONDecoder().raw_decode(out)
    assert summary["robot"] == ROBOT and summary["suite"] == "smoke"
    assert out[end:].strip().startswith("wrote ")

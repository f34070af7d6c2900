"""The ``actuatorlab`` command line end to end on short synthetic logs, and every bad-input path:
one line on stderr, exit code 2, no traceback, inputs untouched, no temporary files left."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import mujoco
import numpy as np
import pytest

from synthetic import TRUTH_M1, make_trajectory, synthetic_set

from actuatorlab.app.cli import main
from actuatorlab.models.modelfile import load_model
from actuatorlab.logs import load_log, save_trajectory
from actuatorlab.logs.format import Setup
from actuatorlab.models.registry import BASE_MODELS, EXTENSIONS


def job_config(path, fields: dict) -> str:
    """A ``--config`` file holding ``fields`` (a job's options without a flag)."""
    path.write_text(json.dumps(fields))
    return str(path)

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "actuatorlab" / "examples" / "bam_xl330"
SPECS = [("chirp400", "chirp", 400), ("sine800", "sine", 800), ("drop400", "drop", 400)]


def snapshot(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` (relative name -> hex)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def leftovers(folder: Path) -> list[str]:
    """Temporary or hidden files (atomic-write debris) under ``folder``."""
    return [p.name for p in folder.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc: int, err: str, *words: str) -> None:
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("error:")
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A folder of three native synthetic logs and the run folder of ``fit --model m1 --budget quick``."""
    root = tmp_path_factory.mktemp("cli")
    logs = root / "logs"
    logs.mkdir()
    for tr in synthetic_set(SPECS, TRUTH_M1, duration=1.0):
        save_trajectory(tr.replace(source_file=""), logs)
    before = snapshot(logs)
    rc = main(["fit", str(logs), "--model", "m1", "--budget", "quick", "--out", str(root / "run"), "--seed", "0"])
    return dict(root=root, logs=logs, run=root / "run", rc=rc, before=before, after=snapshot(logs))


# ------------------------------------------------------------------------------------------------
# the happy path
# ------------------------------------------------------------------------------------------------


def test_fit_writes_a_model_close_to_the_truth(work):
    assert work["rc"] == 0
    run = work["run"]
    names = sorted(p.name for p in run.iterdir())
    assert [n for n in names if not n.startswith("plotly-")] == ["identifiability.json", "model.json", "report.html"]
    assert len(names) == 4 and names[2].startswith("plotly-") and names[2].endswith(".min.js")  # once per folder
    d = load_model(run / "model.json")
    assert sorted(d["envelope"]["logs"]) == ["chirp400", "drop400", "sine800"] and d["envelope"]["dt"] == 0.005
    assert d["model"] == "m1" and d["joint_type"] == "revolute" and d["controller"] == "dynamixel_pwm"
    for name, truth in TRUTH_M1.items():
        e = d["parameters"][name]
        assert e["free"] and e["value"] == pytest.approx(truth, rel=0.05), name
        assert e["lower"] < e["value"] < e["upper"]
    assert d["parameters"]["delay"]["free"] is False and d["parameters"]["delay"]["value"] == 0.0
    assert d["parameters"]["kt"]["unit"] == "N.m/A" and d["parameters"]["armature"]["unit"] == "kg.m^2"
    assert sorted(x["name"] for x in d["data"]["logs"]) == ["chirp400", "drop400", "sine800"]
    assert d["metrics"]["train"]["position_mae"] < 2e-3
    assert d["fit"]["dt"] == 0.005
    ident = json.loads((run / "identifiability.json").read_text())
    assert set(ident["stderr"]) == set(TRUTH_M1)
    # every parameter recovered within 5 % is one these logs determine: 10 % of it moves the MAE by > 2 %
    assert ident["sensitivity"]["not_determined"] == [] and set(ident["sensitivity"]["change"]) == set(TRUTH_M1)
    for name in TRUTH_M1:
        assert d["parameters"][name]["determined"] is True and min(d["parameters"][name]["sensitivity"]) > 0.02, name


def test_fit_leaves_inputs_untouched_and_no_temporary_files(work):
    assert work["after"] == work["before"] and len(work["before"]) == 6  # 3 x (parquet + json)
    assert leftovers(work["run"]) == [] and leftovers(work["logs"]) == []


def test_run_files_have_the_permissions_of_a_plain_write(work):
    """Atomic writes (mkstemp is 0600) must still give files the mode a plain write would."""
    probe = work["root"] / "probe.txt"
    probe.write_text("x")
    mode = stat.S_IMODE(probe.stat().st_mode)
    for name in ("model.json", "identifiability.json", "report.html"):
        assert stat.S_IMODE((work["run"] / name).stat().st_mode) == mode, name


def test_evaluate_json(work, capsys):
    before = snapshot(work["logs"])
    rc, out, err = run_cli(capsys, "evaluate", work["run"] / "model.json", work["logs"], "--json")
    assert rc == 0, err
    s = json.loads(out)
    for key in ("position_mae", "position_rmse", "position_relative_error", "per_log", "regimes"):
        assert key in s, key
    assert s["model"] == "m1" and s["unit"] == "rad" and s["n_logs"] == 3 and s["n_samples"] == 603
    assert sorted(r["log"] for r in s["per_log"]) == ["chirp400", "drop400", "sine800"]
    for r in s["per_log"]:
        assert 0.0 < r["position_mae"] < 3e-3
    assert 0.0 < s["position_mae"] <= s["position_rmse"]
    assert s["position_relative_error"] < 0.01
    assert s["regimes"]["torque_disabled"]["n_samples"] > 0
    d = load_model(work["run"] / "model.json")
    assert s["position_mae"] == pytest.approx(d["metrics"]["train"]["position_mae"], rel=1e-9)
    assert snapshot(work["logs"]) == before and snapshot(work["run"])  # read only


def test_evaluate_table(work, capsys):
    rc, out, err = run_cli(capsys, "evaluate", work["run"] / "model.json", work["logs"])
    assert rc == 0, err
    assert "chirp400" in out and "sine800" in out


def test_export_mjcf_loads_in_mujoco(work, capsys):
    xml = work["root"] / "export" / "bench.xml"
    rc, out, err = run_cli(capsys, "export", work["run"] / "model.json", "--mjcf", xml)
    assert rc == 0, err
    d = load_model(work["run"] / "model.json")
    m = mujoco.MjModel.from_xml_path(str(xml))
    assert m.njnt == 1 and m.nu == 1
    assert m.dof_armature[0] == pytest.approx(d["parameters"]["armature"]["value"], rel=1e-6)
    assert m.dof_frictionloss[0] == pytest.approx(d["parameters"]["friction_base"]["value"], rel=1e-6)
    assert leftovers(xml.parent) == []


def test_audit(work, capsys):
    before = snapshot(work["logs"])
    rc, out, err = run_cli(capsys, "audit", work["logs"], "--json")
    assert rc == 0, err
    reports = json.loads(out)
    assert sorted(r["name"] for r in reports) == ["chirp400", "drop400", "sine800"]
    for r in reports:
        assert r["n_samples"] == 201
        assert r["timing"]["dt_median_s"] == pytest.approx(0.005)
        assert not [i for i in r["issues"] if i["severity"] == "error"], r["issues"]
    rc, out, err = run_cli(capsys, "audit", work["logs"])
    assert rc == 0 and "chirp400" in out
    assert snapshot(work["logs"]) == before


def test_import_a_cut_bam_log(tmp_path, capsys):
    src = EXAMPLE / "2026-01-15_10h29m04.json"
    doc = json.loads(src.read_text())
    doc["entries"] = [e for e in doc["entries"] if e["timestamp"] < 1.5]
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / src.name).write_text(json.dumps(doc))
    before = snapshot(raw)
    out_dir = tmp_path / "native"
    rc, out, err = run_cli(capsys, "import", raw, "--out", out_dir)
    assert rc == 0, err
    stem = src.stem
    assert sorted(p.name for p in out_dir.iterdir()) == [f"{stem}.json", f"{stem}.parquet"]
    a, b = load_log(raw / src.name), load_log(out_dir / f"{stem}.parquet")
    assert a.n == b.n == len(doc["entries"]) > 200
    np.testing.assert_array_equal(a["position"], b["position"])
    np.testing.assert_array_equal(a.time, b.time)
    assert b.setup.controller == "dynamixel_pwm" and b.setup.gains["kp"] == doc["kp"]
    assert snapshot(raw) == before and leftovers(out_dir) == [] and leftovers(raw) == []


def test_import_into_the_raw_folder_never_overwrites_a_raw_log(tmp_path, capsys):
    src = EXAMPLE / "2026-01-15_10h29m04.json"
    doc = json.loads(src.read_text())
    doc["entries"] = doc["entries"][:100]
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / src.name).write_text(json.dumps(doc))
    before = snapshot(raw)
    rc, out, err = run_cli(capsys, "import", raw, "--out", raw)
    assert snapshot(raw) == before  # nothing may be written over the raw log
    assert_one_line_error(rc, err, src.name)


def test_models_lists_models_and_laws(capsys):
    rc, out, err = run_cli(capsys, "models")
    assert rc == 0, err
    for name in list(BASE_MODELS) + ["+" + e for e in EXTENSIONS]:
        assert name in out, name
    for law in ("dynamixel_pwm", "feetech_pwm", "emps_cascade"):
        assert law in out


# ------------------------------------------------------------------------------------------------
# bad input: one line, exit code 2, nothing written
# ------------------------------------------------------------------------------------------------


def test_unknown_model_name(work, capsys, tmp_path):
    out_dir = tmp_path / "never"
    rc, out, err = run_cli(capsys, "fit", work["logs"], "--model", "m9", "--out", out_dir)
    assert_one_line_error(rc, err, "unknown model 'm9'", *BASE_MODELS, "+delay", "+backlash")
    assert not out_dir.exists()
    rc, out, err = run_cli(capsys, "fit", work["logs"], "--model", "m4+dealy", "--out", out_dir)
    assert_one_line_error(rc, err, "'dealy'", *EXTENSIONS)
    rc, out, err = run_cli(capsys, "fit", work["logs"], "--model", "m1", "--budget", "huge", "--out", out_dir)
    assert_one_line_error(rc, err, "'huge'", "quick", "default", "thorough")
    assert not out_dir.exists()
    rc, out, err = run_cli(capsys, "fit", work["logs"], "--out", out_dir, "--config",
                           job_config(tmp_path / "ext.json", {"options": {"extensions": ["thermal", "heat"]}}))
    assert_one_line_error(rc, err, "'heat'", *EXTENSIONS)
    rc, out, err = run_cli(capsys, "fit", work["logs"], "--model", "m1", "--out", out_dir, "--config",
                           job_config(tmp_path / "ext1.json", {"options": {"extensions": ["thermal"]}}))
    assert_one_line_error(rc, err, "--extensions", "m5+sag+thermal")
    assert not out_dir.exists()


def test_missing_file(work, capsys, tmp_path):
    missing = tmp_path / "nope.json"
    rc, out, err = run_cli(capsys, "evaluate", work["run"] / "model.json", missing)
    assert_one_line_error(rc, err, "nope.json")
    rc, out, err = run_cli(capsys, "evaluate", tmp_path / "no_model.json", work["logs"])
    assert_one_line_error(rc, err, "no_model.json")
    rc, out, err = run_cli(capsys, "audit", missing)
    assert_one_line_error(rc, err, "nope.json")


def _bam_doc(n: int = 40) -> dict:
    entries = [{"timestamp": 0.005 * k, "position": 0.01 * k, "goal_position": 0.01 * k + 0.02, "speed": 2.0,
                "load": 3, "input_volts": 7.4, "temp": 28, "torque_enable": True} for k in range(n)]
    return {"mass": 0.49, "length": 0.1, "kp": 400, "vin": 7.4, "motor": "xl330", "trajectory": "sin_sin",
            "entries": entries}


def _bad_logs(folder: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, word its error message must contain)."""
    folder.mkdir(parents=True, exist_ok=True)
    nan_doc = _bam_doc()
    nan_doc["entries"][12]["position"] = None
    back = _bam_doc()
    back["entries"][20]["timestamp"] = back["entries"][18]["timestamp"]
    files = {"nan": (folder / "nan_position.json", "NaN"),
             "back": (folder / "time_back.json", "not strictly increasing"),
             "empty": (folder / "empty.json", "empty")}
    files["nan"][0].write_text(json.dumps(nan_doc))
    files["back"][0].write_text(json.dumps(back))
    files["empty"][0].write_bytes(b"")
    # a native log whose position holds a NaN
    t = 0.005 * np.arange(50)
    q = np.sin(t)
    q[30] = np.nan
    tr = make_trajectory("nan_native", t, np.sin(t), setup=Setup("xl330", controller="dynamixel_pwm",
                                                                  gains={"kp": 400.0}, supply_voltage=7.4,
                                                                  bench={"mass": 0.49, "length": 0.1}), position=q)
    files["nan_native"] = (save_trajectory(tr, folder / "nan_native"), "NaN")
    return files


@pytest.mark.parametrize("which", ["nan", "back", "empty", "nan_native"])
def test_unusable_logs_give_one_line_naming_the_file(work, capsys, tmp_path, which):
    path, word = _bad_logs(tmp_path / "bad")[which]
    before = snapshot(tmp_path / "bad")
    rc, out, err = run_cli(capsys, "evaluate", work["run"] / "model.json", path)
    assert_one_line_error(rc, err, path.name, word)
    out_dir = tmp_path / "run_bad"
    rc, out, err = run_cli(capsys, "fit", path, "--model", "m1", "--budget", "quick", "--out", out_dir)
    assert_one_line_error(rc, err, path.name, word)
    assert not out_dir.exists()
    assert snapshot(tmp_path / "bad") == before


def test_corrupt_model_file(work, capsys, tmp_path):
    text = (work["run"] / "model.json").read_text()
    cases = {"cut.json": (text[: len(text) // 2], "not valid JSON"),
             "other.json": (json.dumps({"hello": 1}), "not an actuatorlab model file"),
             "future.json": (text.replace('"format_version": "2"', '"format_version": "9"'), "'9'"),
             "badmodel.json": (text.replace('"model": "m1"', '"model": "m77"'), "m77")}
    for name, (content, word) in cases.items():
        p = tmp_path / name
        p.write_text(content)
        rc, out, err = run_cli(capsys, "evaluate", p, work["logs"])
        assert_one_line_error(rc, err, word)
        assert out == ""


def test_prismatic_log_with_revolute_model_is_a_unit_mismatch(work, capsys, tmp_path):
    t = 0.001 * np.arange(200)
    setup = Setup("emps", joint_type="prismatic", controller="emps_cascade", gains={"kp": 160.18, "kv": 243.45},
                  bench={"gtau": 35.15})
    tr = make_trajectory("emps_cut", t, 0.01 * np.sin(t), setup=setup, position=0.01 * np.sin(t))
    path = save_trajectory(tr, tmp_path / "emps_cut")
    rc, out, err = run_cli(capsys, "evaluate", work["run"] / "model.json", path)
    assert_one_line_error(rc, err, "emps_cut", "unit mismatch", "prismatic", "revolute")


@pytest.mark.parametrize("argv", [("fit", "--no-such-option"), ("frobnicate",)])
def test_usage_errors_exit_2_without_traceback(capsys, argv):
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2 and "Traceback" not in err and argv[-1] in err


def test_no_temporary_files_anywhere_after_all_commands(work):
    assert leftovers(work["root"]) == []


def test_fit_extensions_reach_the_selection(work, capsys, tmp_path, monkeypatch):
    """`fit --extensions A --extensions B` hands exactly (A, B) to the family selection."""
    import actuatorlab.app.jobs as jobs

    seen = {}

    class Stop(Exception):
        pass

    def fake(trajs, *a, **kw):
        seen.update(kw)
        raise Stop

    monkeypatch.setattr(jobs, "fit_family", fake)
    with pytest.raises(Stop):
        main(["fit", str(work["logs"]), "--out", str(tmp_path / "r"), "--config",
              job_config(tmp_path / "ext.json", {"options": {"extensions": ["sag", "thermal"]}})])
    assert seen["options"].extensions == ("sag", "thermal")


def test_progress_bars_complete_a_finished_task_but_not_the_one_still_running():
    """The fit reports two models at once (its walk side by side): a new task completes the tasks
    before it except the one that reported last, which may still be running."""
    from rich.progress import Progress

    from actuatorlab.app.cli._common import _Bars

    with Progress(disable=True) as p:
        bars = _Bars(p)
        bars("m1", "cma-es", 0.5)
        bars("m2", "cma-es", 0.3)
        bars("m3", "cma-es", 0.1)  # m2 reported last: still running beside m3
        done = {t.description.split()[0]: t.completed for t in p.tasks}
        assert done == {"m1": 1.0, "m2": 0.3, "m3": 0.1}
        bars("m2", "polish", 0.8)
        bars("m4", "cma-es", 0.0)  # m3 did not report last: it is done
        done = {t.description.split()[0]: t.completed for t in p.tasks}
        assert done == {"m1": 1.0, "m2": 0.8, "m3": 1.0, "m4": 0.0}
        bars.done()
        assert all(t.completed == 1.0 for t in p.tasks)

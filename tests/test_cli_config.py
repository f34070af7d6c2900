"""``--config FILE``: every command's job from a JSON object of its fields, flags laid over it."""

from __future__ import annotations

import json

import pytest

from actuatorlab.app import identify_jobs
from actuatorlab.app.cli import app, main
from actuatorlab.app.config import job_to_json
from actuatorlab.app.jobs import example_data_dir

EXAMPLE = example_data_dir()


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def captured(monkeypatch):
    """The FitJob the fit command builds (the job function is replaced: nothing is fitted)."""
    jobs = []

    class Stop(Exception):
        pass

    def fake(job, **kw):
        jobs.append(job)
        raise Stop

    monkeypatch.setattr(identify_jobs, "run_fit_job", fake)

    def fit(*argv):
        with pytest.raises(Stop):
            main(["fit", *map(str, argv)])
        return jobs[-1]
    return fit


def test_every_command_with_options_takes_config():
    import inspect

    for c in app.registered_commands:
        params = inspect.signature(c.callback).parameters
        if (c.name or c.callback.__name__) in ("models", "version"):
            assert not params
            continue
        assert "config" in params, c.name or c.callback.__name__


def test_fit_job_json_reproduces_the_flags_job(captured, tmp_path):
    by_flags = captured(EXAMPLE, "--model", "m1", "--budget", "quick", "--seed", "3", "--out", tmp_path / "a")
    cfg = tmp_path / "fit.json"
    cfg.write_text(json.dumps(job_to_json(by_flags)))
    assert captured("--config", cfg) == by_flags
    assert by_flags.options.seed == 3 and by_flags.options.budget == "quick" and by_flags.model == "m1"


def test_flags_override_the_file(captured, tmp_path):
    cfg = tmp_path / "fit.json"
    cfg.write_text(json.dumps({"model": "m2", "out": str(tmp_path / "file_out"),
                               "options": {"seed": 5, "budget": "thorough", "extensions": ["sag"]},
                               "jackknife": "log"}))
    job = captured("--config", cfg, "--seed", "1", "--out", tmp_path / "flag_out")
    assert job.options.seed == 1 and job.out == tmp_path / "flag_out"                    # the flags
    assert job.model == "m2" and job.options.budget == "thorough" and job.jackknife == "log"  # the file
    assert job.options.extensions == ("sag",)
    assert captured("--config", cfg).options.seed == 5                                 # no flag: the file's


@pytest.mark.parametrize("doc, key", [
    ({"model": "m1", "bogus": 1}, "'bogus'"),
    ({"options": {"sede": 1}}, "'options.sede'"),
    ({"options": {"seed": "one"}}, "'options.seed'"),
    ({"data": "logs"}, "'data'"),
    ([1, 2], "one JSON object"),
])
def test_a_bad_config_is_one_line_naming_file_and_key(capsys, tmp_path, doc, key):
    cfg = tmp_path / "fit.json"
    cfg.write_text(json.dumps(doc))
    rc, out, err = run(capsys, "fit", "--config", cfg, "--out", tmp_path / "run")
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert str(cfg) in err and key in err, err
    assert not (tmp_path / "run").exists()


def test_a_missing_required_field_names_file_and_key(capsys, tmp_path):
    cfg = tmp_path / "evaluate.json"
    cfg.write_text(json.dumps({"data": [str(EXAMPLE)]}))
    rc, _, err = run(capsys, "evaluate", "--config", cfg)
    assert rc == 2 and err.count("\n") == 1 and str(cfg) in err and "'model'" in err, err
    rc, _, err = run(capsys, "evaluate", "--config", tmp_path / "missing.json")
    assert rc == 2 and "missing.json" in err and err.count("\n") == 1


def test_fit_from_config_writes_the_flags_model(capsys, tmp_path):
    """The same fit from flags and from the JSON of its job: the same model file (but wall times)."""
    rc, _, err = run(capsys, "fit", EXAMPLE, "--model", "m1", "--budget", "quick", "--out", tmp_path / "a")
    assert rc == 0, err
    cfg = tmp_path / "fit.json"
    cfg.write_text(json.dumps({"data": [str(EXAMPLE)], "model": "m1", "options": {"budget": "quick"},
                               "out": str(tmp_path / "b")}))
    rc, _, err = run(capsys, "fit", "--config", cfg)
    assert rc == 0, err
    a, b = (json.loads((tmp_path / r / "model.json").read_text()) for r in "ab")
    for d in (a, b):
        d["fit"].pop("wall_s")
    assert a == b


@pytest.mark.parametrize("name", sorted(c.name or c.callback.__name__ for c in app.registered_commands
                                        if (c.name or c.callback.__name__) not in ("models", "version")))
def test_help_says_what_config_takes(capsys, name):
    """``COMMAND --help`` renders (help texts are rich markup) and names the job --config takes."""
    rc, out, err = run(capsys, name, "--help")
    assert rc == 0, err
    assert "--config" in out and "Job" in out and "Fields:" in out

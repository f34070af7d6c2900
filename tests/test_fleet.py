"""Fleet fits: one model per unit, serial and on Ray, with the same results; the per-unit model
files feed `randomize` (spread across units)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from actuatorlab.app.cli import main
from actuatorlab.errors import UnknownNameError
from actuatorlab.app.fleet import fit_fleet, units_from_folders
from actuatorlab.logs import save_trajectory
from actuatorlab.sim.randomization import load_spec
from synthetic import TRUTH_M1, synthetic_set



def job_config(path, fields: dict) -> str:
    """A ``--config`` file holding ``fields`` (a job's options without a flag)."""
    path.write_text(json.dumps(fields))
    return str(path)


#: three units of one servo type with different torque constants and friction (the fleet's truth)
UNITS = {"u1": dict(kt=0.40, friction_base=0.030), "u2": dict(kt=0.44, friction_base=0.036),
         "u3": dict(kt=0.37, friction_base=0.026)}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("fleet")
    for u, truth in UNITS.items():
        (root / u).mkdir()
        logs = synthetic_set([(f"{u}_chirp", "chirp", 400.0), (f"{u}_drop", "drop", 800.0)],
                             {**TRUTH_M1, **truth}, duration=0.8)
        for tr in logs:
            save_trajectory(tr.replace(source_file=""), root / u)
    units = units_from_folders([root / u for u in UNITS])
    local = fit_fleet(units, root / "local", models=["m1"], budget="quick", seed=3)
    return dict(root=root, units=units, local=local)


def test_local_fleet_fits_each_unit(fleet):
    assert [r["unit"] for r in fleet["local"]] == ["u1", "u2", "u3"]
    for r in fleet["local"]:
        assert r["position_mae"] < 1e-3 and (fleet["root"] / "local" / r["unit"] / "model.json").is_file()
    # the units differ the way their truth does: u2 has the largest Coulomb friction, u3 the smallest
    fb = {r["unit"]: r["parameters"]["friction_base"] for r in fleet["local"]}
    assert fb["u3"] < fb["u1"] < fb["u2"]


# Ray runs in a child process, never in the test process: Ray's core worker installs its own fatal-signal
# handlers over Python's faulthandler (measured: after ray.init + ray.shutdown a segfault prints no
# traceback), so a later crash in the session (SciPy's .mat reader, see docs/format.md) left no trace.

RAY_CHILD = """
import json, sys
import ray
from actuatorlab.app.fleet import fit_fleet
units, out = json.loads(sys.argv[1]), sys.argv[2]
ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
try:
    remote = fit_fleet(units, out, models=["m1"], budget="quick", seed=3, backend="ray")
finally:
    ray.shutdown()
print("RESULT " + json.dumps(remote, default=str))
"""


def test_ray_backend_gives_the_serial_results(fleet):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'actuatorlab[ray]')")
    two = {u: [str(f) for f in fleet["units"][u]] for u in ("u1", "u2")}  # two tasks: order and results
    proc = subprocess.run([sys.executable, "-c", RAY_CHILD, json.dumps(two), str(fleet["root"] / "ray")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    remote = json.loads(line[len("RESULT "):])
    assert [r["unit"] for r in remote] == ["u1", "u2"]
    for a, b in zip(fleet["local"], remote):
        assert a["unit"] == b["unit"] and a["model"] == b["model"]
        assert a["parameters"] == pytest.approx(b["parameters"], rel=1e-9, abs=1e-12)
        assert a["train_mae"] == pytest.approx(b["train_mae"], rel=1e-9)


def test_randomize_takes_the_spread_across_the_fleet(fleet, capsys):
    files = [str(fleet["root"] / "local" / u / "model.json") for u in UNITS]
    spec_path = fleet["root"] / "spec.json"
    assert main(["randomize", *files, "--out", str(spec_path)]) == 0
    spec = load_spec(spec_path)
    kinds = {e.name: e.kind for e in spec.entries}
    assert kinds["friction_base_unit"] == "unit" and kinds["identified"] == "identified"


def test_bad_backend_and_cli(fleet, capsys, tmp_path):
    with pytest.raises(UnknownNameError, match="available: local, ray"):
        fit_fleet(fleet["units"], tmp_path, backend="spark")
    capsys.readouterr()
    assert main(["fit-fleet", str(fleet["root"] / "u1"), "--out", str(tmp_path), "--config",
                 job_config(tmp_path / "fleet.json", {"backend": "dask"})]) == 2
    assert "unknown backend 'dask'" in capsys.readouterr().err

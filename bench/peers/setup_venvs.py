"""Create the two peer virtual environments of the bench, if missing.

* ``bench/.venv-bam``   - Python 3.12 (``better-actuator-models`` 1.0.2 requires
  ``>=3.12,<3.13``) with ``requirements-bam.txt``.
* ``bench/.venv-sysid`` - Python 3.11 with ``requirements-sysid.txt``
  (``mujoco[sysid]``; a plain ``mujoco`` install leaves ``mujoco.sysid`` empty).

The interpreters are looked up in this order: ``$BENCH_PY312`` /
``$BENCH_PY311``; ``pythonX.Y`` on ``PATH``; ``pyenv prefix X.Y``; a glob over
``$HOME/.pyenv/versions/X.Y*/bin/python``; and, for 3.11, the running
interpreter if it is 3.11.  Uses the ordinary ``pip`` of each venv.

Usage: ``python bench/peers/setup_venvs.py [bam] [sysid] [--force]``.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
PEERS = BENCH / "peers"

VENVS = {
    # name: (python version, venv folder, requirements file, import that proves it works)
    "bam": ("3.12", BENCH / ".venv-bam", PEERS / "requirements-bam.txt",
            "import bam.simulate, optuna, cmaes"),
    "sysid": ("3.11", BENCH / ".venv-sysid", PEERS / "requirements-sysid.txt",
              "from mujoco import sysid; sysid.optimize"),
}


def _version_of(python: str) -> str | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def find_python(version: str) -> str:
    """Path of a Python ``version`` ("3.12") interpreter; raises ``FileNotFoundError``."""
    candidates: list[str] = []
    env = os.environ.get("BENCH_PY" + version.replace(".", ""))
    if env:
        candidates.append(env)
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(on_path)
    if shutil.which("pyenv"):
        out = subprocess.run(["pyenv", "prefix", version], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            candidates.append(str(Path(out.stdout.strip().splitlines()[0]) / "bin" / "python"))
    home = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(glob.glob(str(home / "versions" / f"{version}*" / "bin" / "python")),
                         reverse=True)
    if "%d.%d" % sys.version_info[:2] == version:
        candidates.append(sys.executable)
    for c in candidates:
        if _version_of(c) == version:
            return c
    raise FileNotFoundError(
        f"no Python {version} interpreter found (tried {candidates or 'nothing'}); "
        f"install one or set BENCH_PY{version.replace('.', '')}")


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def is_ready(name: str) -> bool:
    version, venv, _, probe = VENVS[name]
    py = venv_python(venv)
    if not py.exists() or _version_of(str(py)) != version:
        return False
    return subprocess.run([str(py), "-c", probe], capture_output=True).returncode == 0


def ensure(name: str, force: bool = False, quiet: bool = False) -> Path:
    """Create venv ``name`` ("bam" or "sysid") unless it already works; return its python."""
    version, venv, req, _ = VENVS[name]
    if not force and is_ready(name):
        return venv_python(venv)
    if venv.exists():
        shutil.rmtree(venv)
    base = find_python(version)
    log = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    log(f"[setup] creating {venv.relative_to(BENCH.parent)} from Python {version} ({base})")
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    pip = [str(venv_python(venv)), "-m", "pip", "install", "--disable-pip-version-check"]
    if quiet:
        pip.append("-q")
    subprocess.run(pip + ["-r", str(req)], check=True)
    if not is_ready(name):
        raise RuntimeError(f"{venv}: created, but `{VENVS[name][3]}` still fails")
    return venv_python(venv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Create the bench's peer venvs.")
    parser.add_argument("names", nargs="*", choices=[[], *VENVS], default=[])
    parser.add_argument("--force", action="store_true", help="recreate even if it works")
    args = parser.parse_args(argv)
    for name in args.names or list(VENVS):
        print(f"{name}: {ensure(name, force=args.force)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

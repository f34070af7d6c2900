"""Atomic file output: every file actuatorlab writes goes through a temporary file in the target's
folder and ``os.replace``, so a reader never sees a partial file and an interrupted run leaves the
previous version in place (never a user's raw data: outputs only)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

__all__ = ["atomic_write", "atomic_write_with", "read_json", "git_revision"]


def atomic_write_with(path: str | Path, write: Callable[[Path], Any]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, fsync it, give it ordinary
    permissions (mkstemp creates 0600) and move it onto ``path``; the temporary file is removed on
    any error. Creates the parent folder. Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically (:func:`atomic_write_with`)."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    return atomic_write_with(path, lambda tmp: tmp.write_bytes(raw))


def read_json(path: str | Path, error: type[Exception], missing: str) -> Any:
    """The JSON document in ``path``; a missing file raises ``error(f"{path}: {missing}")`` and a
    file that is not JSON ``error(f"{path}: not valid JSON (...)")``, one line naming the file."""
    import json

    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: {missing}")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{path}: not valid JSON ({e.__class__.__name__}: {e})") from None


def git_revision() -> str:
    """Git revision of the package source if it lives in a checkout, else "unknown"."""
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=5)
        rev = out.stdout.strip()
        if out.returncode == 0 and rev:
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"

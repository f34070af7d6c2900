"""``mujoco.mjx``, imported on first use and quietly.

Importing MJX costs seconds, so the modules that need it import it inside the functions that use it.
mujoco-mjx 3.x also prints "Failed to import warp ..." on stdout when its optional Warp backend is
not installed, which would precede a command's own output (a --json line, a table piped to a file)
and reads like an error. :func:`mjx` imports it with stdout captured and writes back whatever else
the import printed.
"""

from __future__ import annotations

import contextlib
import io
import sys
from types import ModuleType

__all__ = ["mjx", "mjx_warp"]

#: lines the import prints when the optional Warp backend is missing (nothing is wrong then)
_WARP_NOTICES = ("Failed to import warp", "Failed to import mujoco_warp")


def mjx() -> ModuleType:
    """The ``mujoco.mjx`` module (imported once; later calls return it at once)."""
    loaded = sys.modules.get("mujoco.mjx")
    if loaded is not None:
        return loaded
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        from mujoco import mjx as mod
    rest = [ln for ln in buf.getvalue().splitlines(keepends=True) if not ln.startswith(_WARP_NOTICES)]
    if rest:
        sys.stdout.write("".join(rest))
    return mod


def mjx_warp() -> ModuleType | None:
    """``mujoco.mjx.warp`` (MJX's bridge to MuJoCo Warp) when Warp is installed (the ``warp-lang``
    package), else None."""
    mjx()
    mod = sys.modules.get("mujoco.mjx.warp")
    return mod if mod is not None and mod.WARP_INSTALLED else None

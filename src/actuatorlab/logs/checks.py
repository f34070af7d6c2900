"""Shared helpers of the importers: file reading with clear errors and log validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from actuatorlab.errors import DataError
from actuatorlab.logs.format import Setup, Trajectory

__all__ = ["MIN_SAMPLES", "SETUP_FIELDS", "validate_trajectory", "read_json", "setup_from_doc", "zoh_indices"]

#: Fewest samples a log may have to be usable (strict mode).
MIN_SAMPLES = 10

#: Channels that may never hold NaN (strict mode): the time base and the joint position pair.
_NO_NAN = ("position", "position_target")


def read_json(path: Path) -> Any:
    """Parse a JSON file; empty, truncated or invalid files raise a one-line :class:`DataError`."""
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(path, "file is empty")
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise DataError(path, f"not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        hint = " (file looks truncated)" if e.pos >= len(raw.rstrip()) - 1 else ""
        raise DataError(path, f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}{hint}") from None


def _fmt_t(t: float) -> str:
    return f"{t:.6g} s"


def validate_trajectory(traj: Trajectory, path: str | Path | None = None) -> None:
    """Raise :class:`DataError` naming ``path`` on the first problem that makes a log unusable.

    Checks, in order: at least :data:`MIN_SAMPLES` samples; a ``position`` channel (or, for a
    multi-joint log, ``position/<joint>`` channels); no NaN in time, positions or position targets;
    timestamps strictly increasing (a duplicate or a step back names the sample index and both
    times).
    """
    path = path if path is not None else (traj.source_file or traj.name)
    t = np.asarray(traj.time, dtype=np.float64)
    if t.ndim != 1:
        raise DataError(path, f"time must be one-dimensional, got shape {t.shape}")
    if t.shape[0] < MIN_SAMPLES:
        raise DataError(path, f"only {t.shape[0]} samples (at least {MIN_SAMPLES} needed)")
    joint_positions = [c for c in traj.data if c.startswith("position/")]
    if "position" not in traj.data and not joint_positions:
        raise DataError(path, "no 'position' channel (nor 'position/<joint>' channels)")
    no_nan = [c for c in traj.data if c in _NO_NAN or c.split("/")[0] in _NO_NAN and "/" in c]
    for name, x in [("time", t)] + [(c, traj.data[c]) for c in no_nan]:
        bad = np.flatnonzero(~np.isfinite(np.asarray(x, dtype=np.float64)))
        if bad.size:
            raise DataError(path, f"{bad.size} NaN/inf value(s) in {name}, first at sample {bad[0]}")
    dt = np.diff(t)
    bad = np.flatnonzero(dt <= 0.0)
    if bad.size:
        i = int(bad[0]) + 1
        what = "a duplicate" if dt[i - 1] == 0.0 else "a step back"
        more = f"; {bad.size} such samples" if bad.size > 1 else ""
        raise DataError(
            path,
            f"timestamps not strictly increasing at sample {i} "
            f"(t={_fmt_t(t[i])} after t={_fmt_t(t[i - 1])}, {what}{more})",
        )


def zoh_indices(t_src: np.ndarray, t_query: np.ndarray) -> np.ndarray:
    """Index of the last source sample at or before each query time (-1 where there is none).

    (T_src,) [s] strictly increasing, (T_q,) [s] -> (T_q,) int.
    """
    return np.searchsorted(np.asarray(t_src), np.asarray(t_query), side="right") - 1


#: keys a mapping's ``setup`` object may hold (the :class:`~actuatorlab.logs.format.Setup` fields).
SETUP_FIELDS = ("actuator", "joint_type", "controller", "gains", "supply_voltage", "bench", "extra")


def setup_from_doc(where: str | Path, setup_doc: Any, extra: dict[str, Any],
                   joint_type: str | None = None) -> Setup:
    """A :class:`Setup` from a mapping's ``setup`` object (unknown keys and bad types are a
    :class:`DataError` naming ``where``); ``extra`` (importer facts) is merged under the mapping's own
    ``extra``; ``joint_type`` overrides the document's."""
    if setup_doc is None:
        setup_doc = {}
    if not isinstance(setup_doc, dict):
        raise DataError(where, "mapping 'setup' must be an object")
    bad = set(setup_doc) - set(SETUP_FIELDS)
    if bad:
        raise DataError(where, f"setup: unknown key(s) {', '.join(sorted(map(str, bad)))} "
                               f"(allowed: {', '.join(SETUP_FIELDS)})")
    jt = joint_type if joint_type is not None else setup_doc.get("joint_type", "revolute")
    if jt not in ("revolute", "prismatic"):
        raise DataError(where, f"setup.joint_type must be 'revolute' or 'prismatic', got {jt!r}")
    for key in ("gains", "bench", "extra"):
        v = setup_doc.get(key, {})
        if not isinstance(v, dict):
            raise DataError(where, f"setup.{key} must be an object")
        if key != "extra" and not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v.values()):
            raise DataError(where, f"setup.{key} values must be numbers")
    sv = setup_doc.get("supply_voltage")
    if sv is not None and (isinstance(sv, bool) or not isinstance(sv, (int, float))):
        raise DataError(where, f"setup.supply_voltage must be a number [V], got {sv!r:.40}")
    for key in ("actuator", "controller"):
        if key in setup_doc and not isinstance(setup_doc[key], str):
            raise DataError(where, f"setup.{key} must be a string")
    return Setup.from_dict({"actuator": "unknown", **setup_doc, "joint_type": jt,
                            "gains": {k: float(v) for k, v in setup_doc.get("gains", {}).items()},
                            "bench": {k: float(v) for k, v in setup_doc.get("bench", {}).items()},
                            "extra": {**extra, **setup_doc.get("extra", {})}})


def find_mapping(mapping: Any, *, fmt: str, kind: str, where: Path, default: Path, missing: Path,
                 given_for: str) -> tuple[dict[str, Any], Path]:
    """The importer mapping to use, and where it came from.

    ``mapping``: a dict (used as is), a path, or None (then ``default`` is looked for). A mapping
    written for another importer (``format`` "actuatorlab-..." other than ``fmt``, e.g. a CSV column
    mapping passed to a folder of several formats) is ignored as if none were given. ``kind`` names
    the mapping in errors ("a LeRobot mapping"); ``where`` is returned with a dict, ``missing`` when
    no mapping exists; ``given_for`` ends the error when an explicit file is absent.
    """
    def other(doc: Any) -> bool:
        f = doc.get("format") if isinstance(doc, dict) else None
        return isinstance(f, str) and f.startswith("actuatorlab-") and f != fmt

    def again() -> tuple[dict[str, Any], Path]:
        return find_mapping(None, fmt=fmt, kind=kind, where=where, default=default, missing=missing,
                            given_for=given_for)

    if isinstance(mapping, dict):
        return again() if other(mapping) else (mapping, where)
    cand = Path(mapping) if mapping is not None else default
    if cand.is_file():
        doc = read_json(cand)
        if not isinstance(doc, dict):
            raise DataError(cand, f"{kind} must be a JSON object")
        if other(doc) and mapping is not None:
            return again()
        if doc.get("format", fmt) != fmt:
            raise DataError(cand, f"not {kind} (format {doc.get('format')!r}, expected {fmt!r})")
        return doc, cand
    if mapping is not None:
        raise DataError(mapping, f"mapping file not found (given for {given_for})")
    return {}, missing

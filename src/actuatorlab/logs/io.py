"""Native on-disk format (FORMAT_VERSION "1"): ``NAME.parquet`` + ``NAME.json``.

``NAME.parquet`` holds column ``time`` [s] followed by one float64 column per channel, in the
order of ``Trajectory.channels``. ``NAME.json`` (the sidecar) holds the format name and version,
the trajectory name, every channel's meaning (:class:`~actuatorlab.logs.format.Channel`), the
setup, the condition tags, the source file, the number of samples and the SHA-256 of the parquet
file, so that a parquet file edited or swapped behind the sidecar's back is detected on load.

Writes are atomic: each file is written to a temporary file in the destination folder, flushed to
disk, then moved over the destination with ``os.replace``. The parquet file is written first; a
crash between the two moves leaves a sidecar whose checksum no longer matches, which
:func:`load_native` reports. See docs/format.md.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from actuatorlab.errors import DataError
from actuatorlab.logs.checks import read_json, validate_trajectory
from actuatorlab.logs.format import FORMAT_NAME, FORMAT_VERSION, Channel, Setup, Trajectory
from ..files import atomic_write_with

__all__ = ["save_trajectory", "load_native", "native_pair", "is_native_sidecar", "file_sha256"]

_SIDECAR_KEYS = ("format", "format_version", "name", "channels", "setup", "n_samples", "parquet_sha256")


def native_pair(path: str | Path) -> tuple[Path, Path]:
    """``(NAME.parquet, NAME.json)`` for ``path`` given as either file of the pair or as the stem."""
    path = Path(path)
    if path.suffix in (".parquet", ".json"):
        stem_path = path.with_suffix("")
    else:
        stem_path = path
    return stem_path.parent / (stem_path.name + ".parquet"), stem_path.parent / (stem_path.name + ".json")


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _atomic_write(dest: Path, write: Any) -> None:
    """Call ``write(tmp_path)`` on a temporary file beside ``dest``, fsync it, move it onto ``dest``."""

    atomic_write_with(dest, write)


def save_trajectory(traj: Trajectory, path: str | Path) -> Path:
    """Write ``traj`` as ``NAME.parquet`` + ``NAME.json`` and return the parquet path.

    Args:
        traj: the trajectory; every channel is stored as float64 (T,).
        path: an existing folder (files are named after ``traj.name``), or ``NAME``,
            ``NAME.parquet`` or ``NAME.json`` (both files of the pair are written).

    Both writes are atomic (temporary file in the same folder + ``os.replace``); raw logs are never
    touched.
    """
    path = Path(path)
    if path.is_dir():
        path = path / traj.name
    parquet_path, json_path = native_pair(path)
    parquet_path.parent.mkdir(parents=True, exist_ok=True)
    if "time" in traj.data:
        raise DataError(parquet_path, "a channel may not be called 'time' (reserved for the time column)")

    columns = {"time": np.asarray(traj.time, dtype=np.float64)}
    for name in traj.channels:
        columns[name] = np.asarray(traj.data[name], dtype=np.float64)
    table = pa.table({k: pa.array(v, type=pa.float64()) for k, v in columns.items()})
    _atomic_write(parquet_path, lambda tmp: pq.write_table(table, tmp))

    sidecar = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        **traj.meta_dict(),
        "columns": list(columns),
        "parquet_file": parquet_path.name,
        "parquet_sha256": file_sha256(parquet_path),
    }
    text = json.dumps(sidecar, indent=2, sort_keys=False, default=_json_default) + "\n"
    _atomic_write(json_path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return parquet_path


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON-serializable")


def is_native_sidecar(doc: Any) -> bool:
    """Whether a parsed JSON document is an actuatorlab native sidecar."""
    return isinstance(doc, dict) and doc.get("format") == FORMAT_NAME


def _read_sidecar(json_path: Path) -> dict[str, Any]:
    if not json_path.exists():
        raise DataError(json_path, "native sidecar is missing (expected next to the parquet file)")
    doc = read_json(json_path)
    if not is_native_sidecar(doc):
        raise DataError(json_path, f"not an actuatorlab trajectory sidecar (no \"format\": \"{FORMAT_NAME}\")")
    version = str(doc.get("format_version"))
    if version != FORMAT_VERSION:
        raise DataError(
            json_path,
            f"unknown format_version {doc.get('format_version')!r}; this actuatorlab reads version "
            f"{FORMAT_VERSION!r} (upgrade actuatorlab or re-import the raw log)",
        )
    missing = [k for k in _SIDECAR_KEYS if k not in doc]
    if missing:
        raise DataError(json_path, f"sidecar lacks required key(s) {', '.join(missing)}")
    _check_sidecar_types(json_path, doc)
    return doc


def _check_sidecar_types(json_path: Path, doc: dict[str, Any]) -> None:
    """Types and values of the sidecar's fields (a hand-edited sidecar fails here, not later)."""
    def bad(problem: str) -> DataError:
        return DataError(json_path, problem)

    if not isinstance(doc["name"], str) or not doc["name"]:
        raise bad("'name' must be a non-empty string")
    n = doc["n_samples"]
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise bad(f"'n_samples' must be a non-negative integer, got {n!r:.40}")
    if not isinstance(doc["parquet_sha256"], str):
        raise bad("'parquet_sha256' must be a string")
    if not isinstance(doc["channels"], dict):
        raise bad("'channels' must be an object {name: {unit, kind, side, ...}}")
    for name, c in doc["channels"].items():
        if not isinstance(c, dict):
            raise bad(f"channel {name!r} must be an object")
        for key in ("unit", "kind"):
            if key not in c:
                raise bad(f"channel {name!r} lacks '{key}'")
        for key in ("unit", "kind", "side", "source", "description"):
            if key in c and not isinstance(c[key], str):
                raise bad(f"channel {name!r}: '{key}' must be a string")
        if c["kind"] not in ("commanded", "measured", "estimated"):
            raise bad(f"channel {name!r}: kind must be commanded, measured or estimated, got {c['kind']!r}")
        if c.get("side", "output") not in ("output", "motor", "none"):
            raise bad(f"channel {name!r}: side must be output, motor or none, got {c['side']!r}")
        lat = c.get("latency_s", 0.0)
        if isinstance(lat, bool) or not isinstance(lat, (int, float)) or not np.isfinite(lat):
            raise bad(f"channel {name!r}: latency_s must be a finite number [s], got {lat!r:.40}")
    setup = doc["setup"]
    if not isinstance(setup, dict) or not isinstance(setup.get("actuator"), str):
        raise bad("'setup' must be an object with an 'actuator' string")
    if setup.get("joint_type", "revolute") not in ("revolute", "prismatic"):
        raise bad(f"setup.joint_type must be revolute or prismatic, got {setup.get('joint_type')!r:.40}")
    if not isinstance(setup.get("controller", ""), str):
        raise bad("setup.controller must be a string")
    for key in ("gains", "bench"):
        v = setup.get(key, {})
        if not isinstance(v, dict) or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                              for x in v.values()):
            raise bad(f"setup.{key} must be an object of numbers")
    if not isinstance(setup.get("extra", {}), dict):
        raise bad("setup.extra must be an object")
    sv = setup.get("supply_voltage")
    if sv is not None and (isinstance(sv, bool) or not isinstance(sv, (int, float))):
        raise bad(f"setup.supply_voltage must be a number [V] or null, got {sv!r:.40}")
    if not isinstance(doc.get("conditions", {}), dict):
        raise bad("'conditions' must be an object")


def load_native(path: str | Path, *, strict: bool = True) -> Trajectory:
    """Read a native pair given either of its files (or its stem).

    Checks the format version (a clear error for an unknown one), the SHA-256 of the parquet file
    and the number of samples against the sidecar, then (``strict``) the usual log validation
    (:func:`actuatorlab.logs.importers.validate_trajectory`).
    """
    parquet_path, json_path = native_pair(path)
    doc = _read_sidecar(json_path)
    if not parquet_path.exists():
        raise DataError(parquet_path, f"parquet file is missing (the sidecar {json_path.name} names it)")
    sha = file_sha256(parquet_path)
    if sha != doc["parquet_sha256"]:
        raise DataError(
            parquet_path,
            f"sha256 {sha[:12]}... does not match the sidecar's {str(doc['parquet_sha256'])[:12]}... "
            "(file changed or truncated after it was written)",
        )
    try:
        table = pq.read_table(parquet_path)
    except (pa.ArrowException, OSError) as e:
        raise DataError(parquet_path, f"unreadable parquet file: {e}") from None
    if table.num_rows != int(doc["n_samples"]):
        raise DataError(parquet_path, f"has {table.num_rows} rows, the sidecar says {doc['n_samples']}")
    cols = set(table.column_names)
    if "time" not in cols:
        raise DataError(parquet_path, "no 'time' column")
    channels = {k: Channel.from_dict(v) for k, v in doc["channels"].items()}
    missing = [k for k in channels if k not in cols]
    if missing:
        raise DataError(parquet_path, f"column(s) {', '.join(missing)} named in the sidecar are missing")
    try:
        time = table.column("time").to_numpy().astype(np.float64, copy=True)
        data = {k: table.column(k).to_numpy().astype(np.float64, copy=True) for k in channels}
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise DataError(parquet_path, f"a column is not numeric ({type(e).__name__})") from None
    if "time" in channels:
        raise DataError(json_path, "a channel may not be called 'time' (reserved for the time column)")
    traj = Trajectory(
        name=str(doc["name"]),
        time=time,
        data=data,
        channels=channels,
        setup=Setup.from_dict(doc["setup"]),
        conditions={str(k): str(v) for k, v in doc.get("conditions", {}).items()},
        source_file=str(doc.get("source_file", "")),
        path=str(json_path),
    )
    if strict:
        validate_trajectory(traj, parquet_path)
    return traj

"""Importer for generic CSV logs described by a small JSON column-mapping file.

The mapping (documented in docs/format.md) names the time column and, for each channel, its
column, unit, scale and offset, kind and side; it also carries the setup and condition tags. Values
are converted to SI: ``si = (raw * scale + offset) * factor(unit)``. Supported non-SI units: deg,
deg/s, rpm, ms, us, mm, mm/s, mA, mV, % (and their SI counterparts). A unit that is unknown, or
that does not fit the channel (e.g. "deg" for the position of a prismatic joint), is a
:class:`DataError` naming the file and the column.

Where the mapping is found (first that exists): the ``mapping`` argument (``--mapping FILE``),
``<stem>.mapping.json`` beside the CSV, ``mapping.json`` in the CSV's folder.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from actuatorlab.errors import DataError
from actuatorlab.logs.format import CANONICAL_CHANNELS, Channel, Trajectory, canonical_unit
from actuatorlab.logs.checks import read_json, setup_from_doc

__all__ = ["MAPPING_FORMAT", "UNITS", "find_mapping", "is_mapping_doc", "load_csv", "convert_units"]

MAPPING_FORMAT = "actuatorlab-csv-mapping"

#: unit -> (dimension, factor to the SI unit of that dimension).
UNITS: dict[str, tuple[str, float]] = {
    "s": ("time", 1.0), "ms": ("time", 1e-3), "us": ("time", 1e-6),
    "rad": ("angle", 1.0), "deg": ("angle", math.pi / 180.0),
    "rad/s": ("angular velocity", 1.0), "deg/s": ("angular velocity", math.pi / 180.0),
    "rpm": ("angular velocity", 2.0 * math.pi / 60.0),
    "m": ("length", 1.0), "mm": ("length", 1e-3),
    "m/s": ("linear velocity", 1.0), "mm/s": ("linear velocity", 1e-3),
    "A": ("current", 1.0), "mA": ("current", 1e-3),
    "V": ("voltage", 1.0), "mV": ("voltage", 1e-3),
    "N": ("force", 1.0), "N.m": ("torque", 1.0),
    "degC": ("temperature", 1.0),
    "1": ("dimensionless", 1.0), "%": ("dimensionless", 0.01),
    "bool": ("boolean", 1.0),
}
#: dimension -> SI unit.
_SI = {dim: u for u, (dim, f) in UNITS.items() if f == 1.0}

_DEFAULT_KIND = {"position_target": "commanded", "torque_enable": "commanded", "controller_output": "commanded"}
_DEFAULT_SIDE = {"position_target": "output", "position": "output", "velocity": "output", "effort": "output"}
_CHANNEL_KEYS = {"column", "unit", "scale", "offset", "kind", "side", "source", "latency_s", "description"}
_TOP_KEYS = {"format", "format_version", "csv", "time", "channels", "setup", "conditions", "keep_unmapped",
             "description"}


def is_mapping_doc(doc: Any) -> bool:
    """Whether a parsed JSON document is a CSV column mapping (not a log)."""
    return isinstance(doc, dict) and (doc.get("format") == MAPPING_FORMAT or ("channels" in doc and "time" in doc
                                                                                 and "entries" not in doc))


def convert_units(values: np.ndarray, unit: str) -> tuple[np.ndarray, str]:
    """(T,) values in ``unit`` -> ((T,) values in SI, SI unit). ``unit`` must be a key of :data:`UNITS`."""
    dim, factor = UNITS[unit]
    return np.asarray(values, dtype=np.float64) * factor, _SI[dim]


def find_mapping(csv_path: Path, mapping: str | Path | dict[str, Any] | None) -> tuple[dict[str, Any], Path | None]:
    """The mapping for ``csv_path`` and the file it came from (None when given as a dict)."""
    if isinstance(mapping, dict):
        return mapping, None
    candidates = [Path(mapping)] if mapping is not None else [
        csv_path.with_name(csv_path.stem + ".mapping.json"), csv_path.with_name("mapping.json")]
    for c in candidates:
        if c.is_file():
            doc = read_json(c)
            if not isinstance(doc, dict):
                raise DataError(c, "a column mapping must be a JSON object")
            return doc, c
    if mapping is not None:
        raise DataError(mapping, f"mapping file not found (given for {csv_path.name})")
    raise DataError(csv_path, f"a CSV log needs a column mapping: pass --mapping FILE or put "
                              f"{csv_path.stem}.mapping.json or mapping.json beside it (see docs/format.md)")


def _unit_error(where: Path, col: str, name: str, unit: Any, expected_dim: str | None, joint_type: str,
                csv_name: str) -> DataError:
    head = f"column '{col}' of {csv_name} -> channel '{name}'"
    if not isinstance(unit, str) or unit not in UNITS:
        return DataError(where, f"{head}: unknown unit {unit!r} (known: {', '.join(UNITS)})")
    fits = [u for u, (d, _) in UNITS.items() if d == expected_dim]
    joint = f" of a {joint_type} joint" if name in ("position", "position_target", "velocity", "effort") else ""
    return DataError(where, f"{head}: unit {unit!r} ({UNITS[unit][0]}) does not fit the {name}{joint} "
                            f"(use {' or '.join(fits)})")


def _column_values(df: Any, col: str, csv_path: Path, map_name: str) -> np.ndarray:
    import pandas as pd

    if col not in df.columns:
        raise DataError(csv_path, f"column '{col}' named in {map_name} not found (columns: {', '.join(map(str, df.columns))})")
    s = df[col]
    if s.dtype.kind not in "biuf":
        text = s.astype("string").str.strip().str.lower()
        text = text.replace({"true": "1", "false": "0", "": pd.NA})
        num = pd.to_numeric(text, errors="coerce")
        bad = np.flatnonzero(num.isna().to_numpy() & text.notna().to_numpy()
                             & ~text.isin(["nan", "na", "null", "none"]).fillna(False).to_numpy())
        if bad.size:
            raise DataError(csv_path, f"column '{col}' data row {bad[0] + 1}: {s.iloc[bad[0]]!r} is not a number")
        s = num
    return s.to_numpy(dtype=np.float64, na_value=np.nan)


def _read_csv(csv_path: Path, opts: Any, where: Path) -> Any:
    import csv

    import pandas as pd

    if not isinstance(opts, dict) or set(opts) - {"delimiter", "comment"}:
        raise DataError(where, "mapping 'csv' must be an object with 'delimiter' and 'comment' (one character each)")
    sep, comment = opts.get("delimiter", ","), opts.get("comment", "#")
    for key, v in (("delimiter", sep), ("comment", comment)):
        if not (isinstance(v, str) and len(v) == 1 and v not in "\r\n\"") and not (key == "comment" and v is None):
            raise DataError(where, f"mapping csv.{key} must be one character, got {v!r:.20}")
    if not csv_path.read_bytes().strip():
        raise DataError(csv_path, "file is empty")
    try:
        return pd.read_csv(csv_path, sep=sep, comment=comment, skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise DataError(csv_path, "file has no header or data") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, TypeError, csv.Error, OverflowError) as e:
        lines = str(e).strip().splitlines()
        raise DataError(csv_path, f"unreadable CSV: {lines[-1] if lines else type(e).__name__}") from None


def _mapped_channel(where: Path, name: str, spec: Any, joint_type: str, df: Any, csv_path: Path,
                    map_name: str) -> tuple[str, np.ndarray, Channel]:
    """(CSV column, values in SI units, channel) of the mapped channel ``name``, its spec checked."""
    if isinstance(spec, str):
        spec = {"column": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("column"), str):
        raise DataError(where, f"channel '{name}' must be a column name or an object with a 'column'")
    bad_keys = set(spec) - _CHANNEL_KEYS
    if bad_keys:
        raise DataError(where, f"channel '{name}': unknown key(s) {', '.join(sorted(bad_keys))} "
                               f"(allowed: {', '.join(sorted(_CHANNEL_KEYS))})")
    col = spec["column"]
    si_expected = canonical_unit(name, joint_type)
    unit = spec.get("unit", si_expected if si_expected is not None else "unknown")
    if name == "torque_enable" and unit == "1":
        unit = "bool"
    if not isinstance(unit, str):
        raise _unit_error(where, col, name, unit, None, joint_type, csv_path.name)
    if si_expected is not None:
        exp_dim = UNITS[si_expected][0]
        if unit not in UNITS or UNITS[unit][0] != exp_dim:
            raise _unit_error(where, col, name, unit, exp_dim, joint_type, csv_path.name)
    elif unit != "unknown" and unit not in UNITS:
        raise _unit_error(where, col, name, unit, None, joint_type, csv_path.name)
    kind = spec.get("kind", _DEFAULT_KIND.get(name, "measured"))
    side = spec.get("side", _DEFAULT_SIDE.get(name, "none"))
    if kind not in ("commanded", "measured", "estimated"):
        raise DataError(where, f"channel '{name}': kind must be commanded, measured or estimated, got {kind!r}")
    if side not in ("output", "motor", "none"):
        raise DataError(where, f"channel '{name}': side must be output, motor or none, got {side!r}")
    scale, offset = spec.get("scale", 1.0), spec.get("offset", 0.0)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (scale, offset)):
        raise DataError(where, f"channel '{name}': scale and offset must be finite numbers")
    lat = spec.get("latency_s", 0.0)
    if isinstance(lat, bool) or not isinstance(lat, (int, float)) or not math.isfinite(lat) or lat < 0:
        raise DataError(where, f"channel '{name}': latency_s must be a finite number >= 0 [s], got {lat!r:.40}")
    for key in ("source", "description"):
        if key in spec and not isinstance(spec[key], str):
            raise DataError(where, f"channel '{name}': {key} must be a string")
    raw = _column_values(df, col, csv_path, map_name) * float(scale) + float(offset)
    values, si_unit = (raw, "unknown") if unit == "unknown" else convert_units(raw, unit)
    conv = "" if unit in ("unknown", si_unit) else f", {unit} -> {si_unit}"
    lin = "" if (scale, offset) == (1.0, 0.0) else f" * {scale:g} + {offset:g}"
    src = f"CSV column '{col}'{lin}{conv}"
    return col, values, Channel(
        unit=si_unit, kind=kind, side=side,
        source=f"{spec['source']}; {src}" if "source" in spec else src,
        latency_s=float(spec.get("latency_s", 0.0)),
        description=str(spec.get("description", CANONICAL_CHANNELS.get(name, ""))),
    )


def load_csv(path: str | Path, mapping: str | Path | dict[str, Any] | None = None) -> Trajectory:
    """Read a CSV log with its column mapping as a :class:`Trajectory` in SI units (no validation)."""
    csv_path = Path(path)
    doc, map_path = find_mapping(csv_path, mapping)
    where = map_path if map_path is not None else csv_path
    map_name = map_path.name if map_path is not None else "the mapping"

    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise DataError(where, f"unknown mapping key(s) {', '.join(sorted(unknown))} (allowed: {', '.join(sorted(_TOP_KEYS))})")
    for key in ("time", "channels"):
        if key not in doc:
            raise DataError(where, f"mapping lacks required key '{key}'")
    if not isinstance(doc["channels"], dict) or not doc["channels"]:
        raise DataError(where, "mapping 'channels' must be a non-empty object {channel: {column, unit, ...}}")
    setup_doc = doc.get("setup", {})
    if not isinstance(setup_doc, dict):
        raise DataError(where, "mapping 'setup' must be an object")
    joint_type = setup_doc.get("joint_type", "revolute")
    if joint_type not in ("revolute", "prismatic"):
        raise DataError(where, f"setup.joint_type must be 'revolute' or 'prismatic', got {joint_type!r:.40}")
    if not isinstance(doc.get("conditions", {}), dict):
        raise DataError(where, "mapping 'conditions' must be an object")
    if not isinstance(doc.get("keep_unmapped", True), bool):
        raise DataError(where, "mapping 'keep_unmapped' must be true or false")

    df = _read_csv(csv_path, doc.get("csv", {}), where)

    # time
    tspec = doc["time"] if isinstance(doc["time"], dict) else {"column": doc["time"]}
    tcol, tunit = tspec.get("column"), tspec.get("unit", "s")
    if not isinstance(tcol, str):
        raise DataError(where, "mapping 'time' must name a column: {\"column\": NAME, \"unit\": \"s\" | \"ms\" | \"us\"}")
    if not isinstance(tunit, str) or tunit not in UNITS or UNITS[tunit][0] != "time":
        raise _unit_error(where, tcol, "time", tunit, "time", joint_type, csv_path.name)
    tscale, toffset = tspec.get("scale", 1.0), tspec.get("offset", 0.0)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in (tscale, toffset)):
        raise DataError(where, "time: scale and offset must be finite numbers")
    t_raw = _column_values(df, tcol, csv_path, map_name) * float(tscale) + float(toffset)
    time, _ = convert_units(t_raw, tunit)

    data: dict[str, np.ndarray] = {}
    channels: dict[str, Channel] = {}
    used = {tcol}
    for name, spec in doc["channels"].items():
        col, data[name], channels[name] = _mapped_channel(where, name, spec, joint_type, df, csv_path, map_name)
        used.add(col)

    dropped = []
    if doc.get("keep_unmapped", True):
        for col in df.columns:
            if col in used:
                continue
            if df[col].dtype.kind not in "biuf":
                dropped.append(str(col))
                continue
            name = "csv_" + "".join(ch if ch.isalnum() else "_" for ch in str(col))
            data[name] = df[col].to_numpy(dtype=np.float64, na_value=np.nan)
            channels[name] = Channel("unknown", "measured", "none", source=f"CSV column '{col}'",
                                     description="unmapped CSV column kept as is")

    extra: dict[str, Any] = {"source_format": "csv", "mapping_file": map_path.name if map_path else None}
    if dropped:
        extra["non_numeric_columns_not_imported"] = dropped
    setup = setup_from_doc(where, setup_doc, extra, joint_type=joint_type)
    conditions = {"load": "unknown", "gain": "unknown", "excitation": "unknown", "session": csv_path.stem}
    conditions.update({str(k): str(v) for k, v in doc.get("conditions", {}).items()})
    return Trajectory(name=csv_path.stem, time=time, data=data, channels=channels, setup=setup,
                      conditions=conditions, source_file=str(csv_path))

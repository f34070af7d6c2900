"""Importer for LeRobot datasets (the layout the ``lerobot`` package writes, codebase v2.x and v3.0).

Layout (lerobot ``datasets/utils.py``): ``meta/info.json`` (``codebase_version``, ``robot_type``,
``fps``, ``features``: name -> {dtype, shape, names}) and Parquet frames under ``data/``:
``data/chunk-000/episode_000000.parquet`` (v2.x, one episode per file) or
``data/chunk-000/file-000.parquet`` (v3.0, several episodes per file). Every frame row has
``timestamp`` [s] (float32, from the episode start), ``frame_index``, ``episode_index`` and one
list column per vector feature, e.g. ``observation.state`` with names ``["shoulder_pan.pos", ...]``
and ``action`` with the same names. One :class:`Trajectory` per episode, channels
``<canonical>/<joint>`` (multi-joint convention of docs/synth.md):

* ``observation.*`` ``<joint>.pos`` -> ``position/<joint>`` (measured, output);
  ``action`` ``<joint>.pos`` -> ``position_target/<joint>`` (commanded, output). LeRobot's record
  loop reads the observation of frame k, then sends action k: the target is in force from t_k on.
* ``<joint>.temp``/``.temperature`` -> ``temperature/<joint>`` [degC]; ``.vel``, ``.cur``/``.current``,
  ``.effort``/``.torque``, ``.load`` -> ``velocity``/``current``/``effort``/``load`` when their unit
  is declared in ``channel_units``, else kept as ``lerobot_<suffix>/<joint>`` with unit "unknown"
  (servo registers are stored raw by LeRobot: their scale depends on the motor model).
* any other numeric per-frame value is kept (unit "unknown"); camera features are not imported
  (listed in ``setup.extra``).

Units of positions: LeRobot stores them in **degrees** (``use_degrees=True``), or **normalised** to
the calibrated range (``RANGE_M100_100``; grippers always ``RANGE_0_100``), depending on the
recording configuration; the dataset does not say which. So the unit is an explicit choice in the
mapping (``--mapping FILE`` or ``<dataset>/actuatorlab.mapping.json``), an error when absent::

    {"format": "actuatorlab-lerobot-mapping", "position_unit": "deg",
     "joint_position_units": {"gripper": "range_0_100"},
     "calibration": "so101_follower.json", "resolution": 4096}

Units: ``rad``, ``deg``, ``range_m100_100``, ``range_0_100`` or ``skip`` (kept raw, not a joint).
A joint named ``gripper`` defaults to ``range_0_100`` (every LeRobot arm records it so), others
to ``position_unit``.
The range units need the LeRobot calibration (motor -> ``range_min``, ``range_max``,
``drive_mode`` in encoder counts; a file path relative to the mapping, or an object) and invert
lerobot's ``MotorsBus._normalize``: ``raw = min + (n + 100)/200 (max - min)`` (``n`` negated first
when ``drive_mode`` is 1; ``raw = min + n/100 (max - min)`` for 0..100), then
``q = (raw - (min + max)/2) 2 pi / (resolution - 1)`` [rad] -- the same zero (middle of the
calibrated range) and scale as lerobot's degree mode, ``q_deg = (raw - mid) 360/(resolution - 1)``.

``robot_type`` maps to a bundled robot config where one exists (``so101_follower`` -> ``so101``);
the mapping's ``"robot"`` overrides it. Other keys: ``channel_units`` (suffix -> unit or
{unit, scale}), ``setup``, ``conditions``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from actuatorlab.errors import DataError
from actuatorlab.logs.format import CANONICAL_UNITS, Channel, Trajectory
from actuatorlab.logs.checks import find_mapping, read_json, setup_from_doc
from ...robots import CONFIG_DIR

__all__ = ["LEROBOT_MAPPING_FORMAT", "ROBOT_TYPES", "POSITION_UNITS", "is_lerobot_root", "find_lerobot_root",
           "lerobot_episodes", "write_lerobot_dataset", "normalize_positions"]

LEROBOT_MAPPING_FORMAT = "actuatorlab-lerobot-mapping"

#: LeRobot ``robot_type`` -> bundled actuatorlab robot config.
ROBOT_TYPES: dict[str, str] = {"so101_follower": "so101", "so101": "so101"}

#: position units a mapping may declare.
POSITION_UNITS = ("rad", "deg", "range_m100_100", "range_0_100", "skip")

_MAPPING_KEYS = {"format", "format_version", "description", "position_unit", "joint_position_units",
                 "calibration", "resolution", "channel_units", "robot", "setup", "conditions"}
_SUFFIX = {"pos": "position", "vel": "velocity", "cur": "current", "current": "current", "effort": "effort",
           "torque": "effort", "load": "load", "temp": "temperature", "temperature": "temperature"}
_EXTRA_UNITS = {"deg/s": ("rad/s", math.pi / 180), "rad/s": ("rad/s", 1.0), "rpm": ("rad/s", math.pi / 30),
                "mA": ("A", 1e-3), "A": ("A", 1.0), "N.m": ("N.m", 1.0), "degC": ("degC", 1.0),
                "%": ("1", 0.01), "1": ("1", 1.0)}
_FRAME_COLS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


def is_lerobot_root(folder: Path) -> bool:
    """Whether ``folder`` is the root of a LeRobot dataset (``meta/info.json`` with ``features``)."""
    info = folder / "meta" / "info.json"
    if not info.is_file():
        return False
    try:
        doc = json.loads(info.read_bytes().decode("utf-8"))
    except (ValueError, OSError):
        return True  # a broken info.json still marks the folder: loading reports the problem
    return isinstance(doc, dict) and ("features" in doc or "codebase_version" in doc)


def find_lerobot_root(path: Path) -> Path | None:
    """The LeRobot dataset root that ``path`` is, or lies inside (None if none)."""
    p = path if path.is_dir() else path.parent
    for cand in (p, *p.parents):
        if is_lerobot_root(cand):
            return cand
    return None


def _names(feature: dict[str, Any], width: int) -> list[str]:
    names = feature.get("names")
    if isinstance(names, dict) and len(names) == 1:
        names = next(iter(names.values()))
    if isinstance(names, list) and len(names) == width and all(isinstance(n, str) for n in names):
        return names
    return [f"{i}" for i in range(width)]


def normalize_positions(q_rad: np.ndarray, unit: str, cal: dict[str, Any] | None = None,
                        resolution: int = 4096) -> np.ndarray:
    """Inverse of the import conversion: (T,) [rad] -> values in ``unit`` as LeRobot stores them
    (used to write test datasets and replayable command files)."""
    q = np.asarray(q_rad, dtype=np.float64)
    if unit == "rad":
        return q.copy()
    if unit == "deg":
        return np.degrees(q)
    if cal is None:
        raise ValueError(f"normalize_positions: unit {unit!r} needs the motor calibration (range_min, range_max)")
    lo, hi, flip = float(cal["range_min"]), float(cal["range_max"]), bool(cal.get("drive_mode", 0))
    raw = q * (resolution - 1) / (2 * math.pi) + 0.5 * (lo + hi)
    frac = (np.clip(raw, lo, hi) - lo) / (hi - lo)
    if unit == "range_m100_100":
        n = frac * 200.0 - 100.0
        return -n if flip else n
    n = frac * 100.0
    return 100.0 - n if flip else n


def _to_rad(where: Path, joint: str, x: np.ndarray, unit: str, cal: dict[str, Any] | None,
            resolution: int) -> tuple[np.ndarray, str]:
    if unit == "rad":
        return x, "rad as stored"
    if unit == "deg":
        return x * (math.pi / 180.0), "deg -> rad"
    if cal is None or joint not in cal:
        raise DataError(where, f"joint {joint!r}: position unit {unit!r} needs the LeRobot calibration of this "
                               "motor (\"calibration\": file or object with range_min, range_max, drive_mode), "
                               "or declare the joint \"skip\"")
    c = cal[joint]
    try:
        lo, hi, flip = float(c["range_min"]), float(c["range_max"]), bool(c.get("drive_mode", 0))
    except (KeyError, TypeError, ValueError):
        raise DataError(where, f"calibration of {joint!r} needs numeric range_min and range_max") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        raise DataError(where, f"calibration of {joint!r}: range_max {hi:g} must exceed range_min {lo:g}")
    if unit == "range_m100_100":
        n = -x if flip else x
        raw = lo + (n + 100.0) / 200.0 * (hi - lo)
    else:
        n = 100.0 - x if flip else x
        raw = lo + n / 100.0 * (hi - lo)
    src = (f"{unit} -> encoder counts with calibration [{lo:g}, {hi:g}]{' flipped' if flip else ''} "
           f"-> rad about the range middle ({resolution} counts/rev)")
    return (raw - 0.5 * (lo + hi)) * (2 * math.pi / (resolution - 1)), src


def _read_info(root: Path) -> dict[str, Any]:
    info_path = root / "meta" / "info.json"
    info = read_json(info_path)
    if not isinstance(info, dict):
        raise DataError(info_path, "info.json must be a JSON object")
    for key in ("features", "fps"):
        if key not in info:
            raise DataError(info_path, f"lacks required key '{key}' (a LeRobot info.json has features, fps, "
                                       "robot_type, codebase_version)")
    if not isinstance(info["features"], dict):
        raise DataError(info_path, "'features' must be an object")
    fps = info["fps"]
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise DataError(info_path, f"'fps' must be a positive number, got {fps!r:.40}")
    return info


def _read_frames(root: Path) -> Any:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted((root / "data").glob("chunk-*/*.parquet"))
    if not files:
        raise DataError(root, "LeRobot dataset without frames (no data/chunk-*/*.parquet file)")
    frames = []
    for f in files:
        try:
            frames.append(pq.read_table(f).to_pandas())
        except (pa.ArrowException, OSError, ValueError) as e:
            msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
            raise DataError(f, f"unreadable parquet file: {msg}") from None
        for col in ("timestamp", "episode_index"):
            if col not in frames[-1].columns:
                raise DataError(f, f"no '{col}' column (columns: {', '.join(map(str, frames[-1].columns))})")
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def _matrix(where: Path, col: Any, name: str, width: int) -> np.ndarray:
    """A list column -> (T, width) float64 (None / wrong lengths -> DataError)."""
    out = np.full((len(col), width), np.nan)
    for i, v in enumerate(col):
        try:
            a = np.asarray(v, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise DataError(where, f"column '{name}' row {i} is not numeric") from None
        if a.size != width:
            raise DataError(where, f"column '{name}' row {i} has {a.size} values, info.json says {width}")
        out[i] = a
    return out


def _read_mapping(root: Path, mapping: Any) -> _Units:
    """The dataset's mapping, checked: units of positions and extra channels, calibration."""
    doc, where = find_mapping(mapping, fmt=LEROBOT_MAPPING_FORMAT, kind="a LeRobot mapping", where=root,
                              default=root / "actuatorlab.mapping.json",
                              missing=root / "actuatorlab.mapping.json", given_for=f"the LeRobot dataset {root}")
    bad = set(doc) - _MAPPING_KEYS
    if bad:
        raise DataError(where, f"unknown mapping key(s) {', '.join(sorted(bad))} (allowed: "
                               f"{', '.join(sorted(_MAPPING_KEYS))})")
    unit = doc.get("position_unit")
    if unit is None:
        raise DataError(root, "LeRobot stores joint positions in degrees or in normalised ranges (-100..100, "
                              "grippers 0..100) depending on how it was recorded, and the dataset does not say "
                              f"which: declare \"position_unit\" ({', '.join(POSITION_UNITS)}) in "
                              f"{where.name} or pass --mapping FILE (docs/format.md)")
    joint_units = doc.get("joint_position_units", {})
    if not isinstance(joint_units, dict):
        raise DataError(where, "'joint_position_units' must map joint names to units")
    for u in [unit, *joint_units.values()]:
        if u not in POSITION_UNITS:
            raise DataError(where, f"unknown position unit {u!r} (known: {', '.join(POSITION_UNITS)})")
    resolution = doc.get("resolution", 4096)
    if isinstance(resolution, bool) or not isinstance(resolution, int) or resolution < 2:
        raise DataError(where, f"'resolution' must be an integer number of counts per revolution, got {resolution!r}")
    cal = doc.get("calibration")
    if isinstance(cal, str):
        cal_path = (where.parent / cal) if not Path(cal).is_absolute() else Path(cal)
        if not cal_path.is_file():
            raise DataError(where, f"calibration file {cal!r} not found")
        cal = read_json(cal_path)
    if cal is not None and not (isinstance(cal, dict) and all(isinstance(v, dict) for v in cal.values())):
        raise DataError(where, "'calibration' must map motor names to {range_min, range_max, drive_mode}")
    ch_units = doc.get("channel_units", {})
    if not isinstance(ch_units, dict):
        raise DataError(where, "'channel_units' must map suffixes (vel, cur, ...) to units")

    return _Units(doc, where, unit, joint_units, resolution, cal, ch_units)


@dataclass(frozen=True)
class _Units:
    """A checked LeRobot mapping (see :func:`_read_mapping`)."""

    doc: dict
    where: Path
    unit: str
    joint_units: dict
    resolution: int
    cal: Any
    ch_units: dict


def _feature_vectors(root: Path, info: dict, df: Any) -> tuple[dict[str, tuple[list[str], np.ndarray]], list[str]]:
    """({feature: (component names, (frames, width) values)}, features not imported)."""
    info_path = root / "meta" / "info.json"
    features = info["features"]
    vectors: dict[str, tuple[list[str], np.ndarray]] = {}
    not_imported: list[str] = []
    for fname, feat in features.items():
        if fname in _FRAME_COLS:
            continue
        if not isinstance(feat, dict) or feat.get("dtype") in ("video", "image", "string") or fname not in df.columns:
            not_imported.append(fname)
            continue
        shape = feat.get("shape", [1])
        if not isinstance(shape, (list, tuple)) or len(shape) != 1 or not isinstance(shape[0], int) or shape[0] < 1:
            not_imported.append(fname)
            continue
        width = shape[0]
        col = df[fname]
        if col.dtype.kind in "biuf":
            if width != 1:
                raise DataError(info_path, f"feature '{fname}' has shape {shape} but its column holds scalars")
            mat = col.to_numpy(dtype=np.float64)[:, None]
        else:
            mat = _matrix(root, col.tolist(), fname, width)
        vectors[fname] = (_names(feat, width), mat)

    return vectors, not_imported


def _episode_channels(m: _Units, vectors: dict[str, tuple[list[str], np.ndarray]], rows: np.ndarray,
                      ) -> tuple[dict[str, np.ndarray], dict[str, Channel], list[str]]:
    """(data, channels, joints with a measured position) of the frames ``rows`` of one episode."""
    where, unit, joint_units, cal, resolution, ch_units = m.where, m.unit, m.joint_units, m.cal, m.resolution, \
        m.ch_units
    data: dict[str, np.ndarray] = {}
    channels: dict[str, Channel] = {}
    ep_joints: list[str] = []
    for fname, (names, mat) in vectors.items():
        commanded = fname == "action" or fname.startswith("action.")
        for k, nm in enumerate(names):
            x = mat[rows, k]
            joint, _, sfx = nm.rpartition(".")
            if not joint:
                joint, sfx = nm, ("pos" if fname in ("observation.state", "action") else "")
            canon = _SUFFIX.get(sfx)
            if canon == "position":
                ju = joint_units.get(joint, "range_0_100" if joint == "gripper" and unit != "skip" else unit)
                if ju != "skip":
                    q, how = _to_rad(where, joint, x, ju, cal, resolution)
                    name = f"{'position_target' if commanded else 'position'}/{joint}"
                    data[name] = q
                    channels[name] = Channel(
                        "rad", "commanded" if commanded else "measured", "output",
                        source=f"LeRobot {fname}[{nm!r}] (float32), {how}",
                        description=("goal position sent right after observation k was read"
                                     if commanded else "present position read at frame k"))
                    if not commanded and joint not in ep_joints:
                        ep_joints.append(joint)
                    continue
            spec = ch_units.get(sfx)
            if canon == "temperature" and spec is None:
                spec = "degC"
            if canon is not None and canon != "position" and spec is not None:
                u, scale = (spec.get("unit"), spec.get("scale", 1.0)) if isinstance(spec, dict) else (spec, 1.0)
                if u not in _EXTRA_UNITS or isinstance(scale, bool) or not isinstance(scale, (int, float)):
                    raise DataError(where, f"channel_units[{sfx!r}]: unit must be one of "
                                           f"{', '.join(_EXTRA_UNITS)} with a numeric scale, got {spec!r:.60}")
                si, f = _EXTRA_UNITS[u]
                want = CANONICAL_UNITS.get(canon, {}).get("revolute")
                if want is not None and want != si:
                    raise DataError(where, f"channel_units[{sfx!r}]: unit {u!r} does not fit {canon} "
                                           f"(needs a unit convertible to {want})")
                name = f"{canon}{'_target' if commanded else ''}/{joint}"
                data[name] = x * float(scale) * f
                channels[name] = Channel(si, "commanded" if commanded else
                                         ("estimated" if canon == "velocity" else "measured"),
                                         "output" if canon in ("velocity", "effort") else "none",
                                         source=f"LeRobot {fname}[{nm!r}] * {scale:g} {u} -> {si}")
                continue
            safe = "".join(ch if ch.isalnum() or ch in "._" else "_" for ch in f"{fname}.{nm}")
            name = f"lerobot_{safe}" if canon is None else f"lerobot_{sfx}/{joint}"
            data[name] = x
            channels[name] = Channel("unknown", "commanded" if commanded else "measured", "none",
                                     source=f"LeRobot {fname}[{nm!r}] as stored",
                                     description="unit not declared (channel_units); kept raw")
    return data, channels, ep_joints


def lerobot_episodes(root: str | Path, mapping: str | Path | dict[str, Any] | None = None) -> list[Trajectory]:
    """Every episode of the LeRobot dataset at ``root`` as a :class:`Trajectory` (no validation)."""
    root = Path(root)
    info = _read_info(root)
    m = _read_mapping(root, mapping)
    doc, where, unit = m.doc, m.where, m.unit
    robot_type = info.get("robot_type")
    robot = doc.get("robot", ROBOT_TYPES.get(str(robot_type)) if robot_type is not None else None)
    df = _read_frames(root)
    vectors, not_imported = _feature_vectors(root, info, df)
    try:
        ep_all = df["episode_index"].to_numpy(dtype=np.float64)
        t_all = df["timestamp"].to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(root, "columns 'episode_index' and 'timestamp' must be numeric") from None
    if not np.all(np.isfinite(ep_all)):
        raise DataError(root, "column 'episode_index' holds NaN/inf")
    frame_all = df["frame_index"].to_numpy(dtype=np.float64) if "frame_index" in df.columns else None
    out: list[Trajectory] = []
    for ep in np.unique(ep_all):
        rows = np.flatnonzero(ep_all == ep)
        if frame_all is not None and np.all(np.isfinite(frame_all[rows])):
            rows = rows[np.argsort(frame_all[rows], kind="stable")]
        label = f"{int(ep):06d}"
        src = f"{root}#episode={int(ep)}"
        data, channels, ep_joints = _episode_channels(m, vectors, rows)
        rb = robot
        warnings = []
        if rb is not None:
            cfg_path = Path(CONFIG_DIR) / f"{rb}.json"
            cfg_joints = json.loads(cfg_path.read_text()).get("joints", {}) if cfg_path.is_file() else {}
            if not set(ep_joints) <= set(cfg_joints):
                warnings.append(f"robot_type {robot_type!r} maps to {rb}, but joints "
                                f"{sorted(set(ep_joints) - set(cfg_joints))} are not in its config")
                rb = None
        extra: dict[str, Any] = {"source_format": "lerobot", "codebase_version": info.get("codebase_version"),
                                 "robot_type": robot_type, "fps": float(info["fps"]), "episode_index": int(ep),
                                 "joints": ep_joints, "position_unit": unit}
        if rb is not None:
            extra["robot"] = rb
        if not_imported:
            extra["features_not_imported"] = not_imported
        if warnings:
            extra["warnings"] = warnings
        setup = setup_from_doc(where, doc.get("setup"), extra)
        cond = doc.get("conditions", {})
        if not isinstance(cond, dict):
            raise DataError(where, "'conditions' must be an object")
        conditions = {"load": "unknown", "gain": "unknown", "excitation": "unknown", "session": root.name,
                      **{str(k): str(v) for k, v in cond.items()}}
        t = t_all[rows]
        fps = float(info["fps"])
        with np.errstate(invalid="ignore", over="ignore"):
            snapped = np.round(t * fps) / fps
            on_grid = bool(np.all(np.abs(t - snapped) * fps < 1e-3))
        if on_grid:
            t = snapped  # float32 k/fps stamps put back on the exact frame grid
        out.append(Trajectory(name=f"{root.name}_episode_{label}", time=t, data=data,
                              channels=channels, setup=setup, conditions=conditions, source_file=src))
    if not out:
        raise DataError(root, "LeRobot dataset without any frame")
    return out


def write_lerobot_dataset(root: str | Path, episodes: list[dict[str, Any]], *, fps: float, joints: list[str],
                          robot_type: str | None = None, codebase_version: str = "v3.0",
                          extra_features: dict[str, dict[str, Any]] | None = None) -> Path:
    """Write episodes in the LeRobot layout (tests, benchmarks and replayable command sets).

    ``episodes``: dicts with ``state`` (T, n) and ``action`` (T, n) position values in the unit
    LeRobot would store, optional ``columns`` (name -> (T, w) for ``extra_features``). v3.0 writes
    all episodes into ``data/chunk-000/file-000.parquet`` and ``meta/episodes/chunk-000/file-000.parquet``;
    v2.1 one ``data/chunk-000/episode_NNNNNN.parquet`` per episode and ``meta/episodes.jsonl``.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(root)
    names = [f"{j}.pos" for j in joints]
    features: dict[str, Any] = {
        "observation.state": {"dtype": "float32", "shape": [len(joints)], "names": names},
        "action": {"dtype": "float32", "shape": [len(joints)], "names": names},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
        **(extra_features or {}),
    }
    tables, meta, start = [], [], 0
    for e, ep in enumerate(episodes):
        T = len(ep["state"])
        cols = {"observation.state": [list(map(float, r)) for r in np.asarray(ep["state"], np.float32)],
                "action": [list(map(float, r)) for r in np.asarray(ep["action"], np.float32)],
                "timestamp": (np.arange(T) / fps).astype(np.float32), "frame_index": np.arange(T),
                "episode_index": np.full(T, e), "index": np.arange(start, start + T), "task_index": np.zeros(T, int)}
        types = {"observation.state": pa.list_(pa.float32()), "action": pa.list_(pa.float32())}
        for k, v in (ep.get("columns") or {}).items():
            cols[k] = [list(map(float, r)) for r in np.asarray(v, np.float32).reshape(T, -1)]
            types[k] = pa.list_(pa.float32())
        tables.append(pa.table({k: pa.array(v, type=types.get(k)) for k, v in cols.items()}))
        meta.append({"episode_index": e, "tasks": ["actuatorlab"], "length": T,
                     "data/chunk_index": 0, "data/file_index": 0 if codebase_version.startswith("v3") else e,
                     "dataset_from_index": start, "dataset_to_index": start + T})
        start += T
    (root / "meta").mkdir(parents=True, exist_ok=True)
    (root / "data" / "chunk-000").mkdir(parents=True, exist_ok=True)
    if codebase_version.startswith("v3"):
        pq.write_table(pa.concat_tables(tables), root / "data" / "chunk-000" / "file-000.parquet")
        (root / "meta" / "episodes" / "chunk-000").mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(meta), root / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
        data_path = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    else:
        for e, tab in enumerate(tables):
            pq.write_table(tab, root / "data" / "chunk-000" / f"episode_{e:06d}.parquet")
        (root / "meta" / "episodes.jsonl").write_text(
            "".join(json.dumps({k: m[k] for k in ("episode_index", "tasks", "length")}) + "\n" for m in meta))
        data_path = "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet"
    info = {"codebase_version": codebase_version, "robot_type": robot_type, "total_episodes": len(episodes),
            "total_frames": start, "total_tasks": 1, "chunks_size": 1000, "fps": fps, "splits": {"train": f"0:{len(episodes)}"},
            "data_path": data_path, "video_path": None, "features": features}
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=4) + "\n")
    return root

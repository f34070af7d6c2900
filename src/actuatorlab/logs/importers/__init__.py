"""Log importers with format detection by content.

Supported sources (see docs/format.md):

* BAM pendulum-bench JSON (a top-level ``entries`` list), raw or processed;
* EMPS benchmark MATLAB .mat files;
* generic CSV plus a JSON column mapping;
* native actuatorlab pairs ``NAME.parquet`` + ``NAME.json``;
* ROS 2 bags in MCAP (``sensor_msgs/JointState`` + a command topic; optional extra ``[mcap]``);
* LeRobot datasets (a folder with ``meta/info.json`` and Parquet episodes; one trajectory per
  episode).

Detection looks at the bytes (Parquet magic ``PAR1``, MATLAB header, MCAP magic, JSON object and
its keys) before the extension, so a renamed file is still read correctly; a folder is a LeRobot
dataset when it holds ``meta/info.json``. Raw files are only read, never written.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from actuatorlab.errors import DataError
from actuatorlab.logs.format import Trajectory
from actuatorlab.logs.checks import MIN_SAMPLES, read_json, validate_trajectory
from actuatorlab.logs.importers.bam import decode_dynamixel_pwm, is_bam_doc, load_bam
from actuatorlab.logs.importers.csv_mapping import UNITS, convert_units, is_mapping_doc, load_csv
from actuatorlab.logs.importers.emps import is_mat_file, load_emps
from actuatorlab.logs.importers.lerobot import find_lerobot_root, is_lerobot_root, lerobot_episodes
from actuatorlab.logs.importers.mcap_ros2 import is_mcap_file, load_mcap
from actuatorlab.logs.io import is_native_sidecar, load_native

__all__ = [
    "MIN_SAMPLES",
    "SUPPORTED_SUFFIXES",
    "UNITS",
    "convert_units",
    "decode_dynamixel_pwm",
    "detect_format",
    "find_log_files",
    "lerobot_roots",
    "load_log",
    "load_logs",
    "validate_trajectory",
]

#: File suffixes a folder search looks at.
SUPPORTED_SUFFIXES = (".json", ".parquet", ".mat", ".csv", ".tsv", ".mcap")

_TEXT_SUFFIXES = (".csv", ".tsv", ".txt")


def _detect(path: Path) -> tuple[str, Any]:
    """(kind, parsed JSON or None); kind in "bam", "native", "emps", "csv", "mcap", "lerobot"."""
    if not path.exists():
        raise DataError(path, "no such file")
    if path.is_dir():
        if is_lerobot_root(path):
            return "lerobot", None
        raise DataError(path, "is a folder, not a log file (use load_logs to read a folder)")
    with open(path, "rb") as f:
        head = f.read(512)
    if not head.strip():
        raise DataError(path, "file is empty")
    root = find_lerobot_root(path)
    if root is not None:
        raise DataError(path, f"is part of the LeRobot dataset {root}: pass the dataset folder")
    if head.startswith(b"PAR1"):
        return "native", None
    if is_mat_file(head):
        return "emps", None
    if is_mcap_file(head):
        return "mcap", None
    if path.suffix.lower() == ".mcap":
        raise DataError(path, "not an MCAP file (no MCAP magic bytes)")
    looks_json = head.lstrip()[:1] in (b"{", b"[")
    if looks_json or path.suffix.lower() == ".json":
        doc = read_json(path)
        if is_native_sidecar(doc):
            return "native", doc
        if is_bam_doc(doc):
            return "bam", doc
        if is_mapping_doc(doc):
            raise DataError(path, "this is a CSV column mapping, not a log (pass it with --mapping)")
        keys = ", ".join(sorted(doc)[:8]) if isinstance(doc, dict) else type(doc).__name__
        raise DataError(path, f"JSON is not a known log: missing required top-level key 'entries' "
                              f"(BAM) or 'format' (actuatorlab sidecar); found {keys}")
    if path.suffix.lower() == ".parquet":
        raise DataError(path, "not a parquet file (no PAR1 magic bytes)")
    if path.suffix.lower() == ".mat":
        raise DataError(path, "not a MATLAB .mat file (no MATLAB header)")
    if b"\x00" in head:
        raise DataError(path, "unrecognised binary file (not parquet, .mat, JSON or CSV)")
    if path.suffix.lower() in _TEXT_SUFFIXES or b"," in head or b"\t" in head or b";" in head:
        return "csv", None
    raise DataError(path, "unrecognised file format (expected BAM JSON, EMPS .mat, CSV + mapping or native parquet)")


def detect_format(path: str | Path) -> str:
    """The importer that reads ``path``: "bam", "emps", "csv", "native", "mcap" or "lerobot" (by
    content first)."""
    return _detect(Path(path))[0]


def _load(path: Path, kind: str, doc: Any, mapping: Any, strict: bool) -> Trajectory:
    if kind == "native":
        return load_native(path, strict=strict)
    if kind == "bam":
        traj = load_bam(path, doc)
    elif kind == "emps":
        traj = load_emps(path)
    elif kind == "mcap":
        traj = load_mcap(path, mapping)
    elif kind == "lerobot":
        trajs = lerobot_episodes(path, mapping)
        if len(trajs) != 1:
            raise DataError(path, f"LeRobot dataset with {len(trajs)} episodes: read it with load_logs "
                                  "(every command accepts the folder)")
        traj = trajs[0]
    else:
        traj = load_csv(path, mapping)
    if strict:
        validate_trajectory(traj, path)
    return traj


def load_log(path: str | Path, *, mapping: str | Path | dict[str, Any] | None = None,
             strict: bool = True) -> Trajectory:
    """Read one log, whatever its supported format, as a :class:`Trajectory`.

    Args:
        path: a BAM JSON, EMPS .mat, CSV, MCAP bag or native ``.parquet``/``.json`` file, or a
            LeRobot dataset folder holding a single episode.
        mapping: column mapping for a CSV (file or dict; default: ``<stem>.mapping.json`` or
            ``mapping.json`` beside the CSV), topic choices for an MCAP bag (default
            ``<stem>.mapping.json``), units of a LeRobot dataset (default
            ``<dataset>/actuatorlab.mapping.json``). Ignored for other formats.
        strict: validate (>= 10 samples, a position channel, no NaN in time/position/
            position_target, strictly increasing timestamps); False returns the log as it is
            (for :func:`actuatorlab.logs.audit.audit_log`).

    Raises:
        DataError: naming the file and the problem in one line.
    """
    path = Path(path)
    kind, doc = _detect(path)
    return _load(path, kind, doc, mapping, strict)


def _is_candidate(p: Path) -> bool:
    if any(part.startswith(".") for part in p.parts[-1:]) or not p.is_file():
        return False
    suffix = p.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        return False
    if suffix == ".json":
        if p.name == "mapping.json" or p.name.endswith(".mapping.json"):
            return False
        if p.with_suffix(".parquet").exists():  # native sidecar: the parquet file stands for the pair
            return False
    return True


def find_log_files(folder: str | Path) -> list[Path]:
    """Candidate log files under ``folder`` (recursive, sorted): supported suffixes, without column
    mappings and without the JSON sidecars of native pairs."""
    folder = Path(folder)
    return sorted(p for p in folder.rglob("*") if _is_candidate(p) and not any(
        part.startswith(".") for part in p.relative_to(folder).parts))


def lerobot_roots(folder: str | Path) -> list[Path]:
    """LeRobot dataset roots under ``folder`` (itself included; sorted; not nested in another)."""
    folder = Path(folder)
    cands = sorted(i.parent.parent for i in folder.rglob("meta/info.json")
                   if not any(part.startswith(".") for part in i.relative_to(folder).parts))
    roots: list[Path] = []
    for c in cands:
        if is_lerobot_root(c) and not any(r in c.parents for r in roots):
            roots.append(c)
    return roots


def _episodes(root: Path, mapping: Any, strict: bool) -> list[Trajectory]:
    trajs = lerobot_episodes(root, mapping)
    if strict:
        for t in trajs:
            validate_trajectory(t, t.source_file)
    return trajs


def load_logs(paths: str | Path | Iterable[str | Path], *,
              mapping: str | Path | dict[str, Any] | None = None, strict: bool = True) -> list[Trajectory]:
    """Read several logs: files as given, folders searched recursively (sorted) for supported files.

    In a folder, JSON files that are neither BAM logs nor native sidecars (e.g. a model or a run
    configuration) are skipped; a folder without any log is a :class:`DataError` naming it. A file
    reached twice is read once.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    out: list[Trajectory] = []
    seen: set[Path] = set()
    for p in map(Path, paths):
        if not p.exists():
            raise DataError(p, "no such file or folder")
        if p.is_dir() and is_lerobot_root(p):
            if p.resolve() not in seen:
                seen.add(p.resolve())
                out.extend(_episodes(p, mapping, strict))
            continue
        if p.is_file():
            if p.resolve() not in seen:
                seen.add(p.resolve())
                out.append(load_log(p, mapping=mapping, strict=strict))
            continue
        n_before = len(out)
        roots = lerobot_roots(p)
        for r in roots:
            if r.resolve() not in seen:
                seen.add(r.resolve())
                out.extend(_episodes(r, mapping, strict))
        for f in find_log_files(p):
            if f.resolve() in seen or any(r in f.parents for r in roots):
                continue
            seen.add(f.resolve())
            try:
                kind, doc = _detect(f)
            except DataError as e:
                if f.suffix.lower() == ".json" and e.problem.startswith(("JSON is not a known log", "this is a CSV")):
                    continue  # an unrelated JSON file in the folder
                raise
            out.append(_load(f, kind, doc, mapping, strict))
        if len(out) == n_before:
            raise DataError(p, f"no supported log files in this folder (looked for {', '.join(SUPPORTED_SUFFIXES)} "
                               "recursively: BAM JSON, EMPS .mat, CSV + mapping, native parquet, MCAP, "
                               "LeRobot datasets)")
    return out

"""Property-based inputs for every importer (BAM JSON, EMPS .mat, CSV + mapping, native Parquet,
ROS 2 MCAP, LeRobot): random truncation, random bytes, missing and extra fields, NaN/inf, huge and
tiny values, non-monotonic and duplicated stamps, wrong units.

Property, for each generated input converted with ``actuatorlab import`` (``run_import``): either
it is converted, and every trajectory passes validation, or a :class:`DataError` is raised whose
message is one line naming a file of the input; never another exception; never an output file
when it fails; the input files are byte for byte the same afterwards. Budgets
(``max_examples``) keep the whole file well under a minute; ``N_CASES`` lists them.
"""

from __future__ import annotations

import collections
import hashlib
import io
import json
import math
import os
import struct
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actuatorlab.errors import DataError
from actuatorlab.logs import Channel, Setup, Trajectory, load_logs, save_trajectory
from actuatorlab.logs.importers.lerobot import write_lerobot_dataset
from actuatorlab.app.jobs import run_import

DATA = Path(__file__).resolve().parent / "data"
EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "actuatorlab" / "examples" / "bam_xl330"

#: hypothesis examples per importer and mutation family (the numbers the report quotes).
N_BYTES, N_FIELDS, N_SERIES, N_MAT_TAGS = 60, 60, 40, 60
N_CASES = {fmt: N_BYTES + N_FIELDS + N_SERIES + (N_MAT_TAGS if fmt == "emps" else 0)
           for fmt in ("bam", "emps", "csv", "native", "mcap", "lerobot")}

FUZZ = settings(max_examples=N_BYTES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SPECIAL = [math.nan, math.inf, -math.inf, 1e308, -1e308, 1e-308, 5e-324, 0, -1, 2**63, "text", "", None, True,
           [], {}, [1.0, 2.0], {"a": 1}]


# ----------------------------------------------------------------------------------------------
# Seeds: small valid inputs of each format, as {relative path: bytes}
# ----------------------------------------------------------------------------------------------

def _bam_seed() -> dict[str, bytes]:
    doc = json.loads(sorted(EXAMPLE.glob("*.json"))[0].read_text())
    doc["entries"] = doc["entries"][:40]
    return {"log.json": json.dumps(doc).encode()}


def _emps_seed() -> dict[str, bytes]:
    import scipy.io

    t = np.arange(40) * 1e-3
    buf = io.BytesIO()
    scipy.io.savemat(buf, {"t": t[:, None], "qm": 0.1 * np.sin(t)[:, None], "qg": 0.1 * np.sin(t + 0.01)[:, None],
                           "vir": np.cos(t)[:, None], "kp": 160.0, "kv": 243.0, "gtau": 35.0})
    return {"emps.mat": buf.getvalue()}


def _csv_seed() -> dict[str, bytes]:
    return {"servo.csv": (DATA / "servo_example.csv").read_bytes(),
            "servo.mapping.json": (DATA / "servo_example.mapping.json").read_bytes()}


def _traj(T: int = 30) -> Trajectory:
    t = np.arange(T) * 0.01
    ch = {"position": Channel("rad", "measured"), "position_target": Channel("rad", "commanded"),
          "velocity": Channel("rad/s", "estimated")}
    return Trajectory("nat", t, {"position": np.sin(t), "position_target": np.sin(t + 0.1), "velocity": np.cos(t)},
                      ch, Setup("xl330", controller="dynamixel_pwm", gains={"kp": 400.0}))


def _native_seed() -> dict[str, bytes]:
    with tempfile.TemporaryDirectory() as d:
        save_trajectory(_traj(), Path(d) / "nat")
        return {p.name: p.read_bytes() for p in Path(d).iterdir()}


def _mcap_seed(**kw) -> dict[str, bytes]:
    from actuatorlab.logs.importers.mcap_ros2 import JointBag, write_joint_bag

    T = 30
    t = np.arange(T) * 0.01
    q = np.stack([np.sin(t), np.cos(t)], 1)
    args = dict(velocity=q, log_times=t + 0.002, commands=q, command_times=t - 0.001)
    args.update(kw)
    with tempfile.TemporaryDirectory() as d:
        write_joint_bag(Path(d) / "arm.mcap", JointBag(["joint1", "joint2"], args.pop("stamps", t),
                                                       args.pop("position", q), **args))
        return {"arm.mcap": (Path(d) / "arm.mcap").read_bytes()}


LEROBOT_MAPPING = {"format": "actuatorlab-lerobot-mapping", "position_unit": "deg",
                   "joint_position_units": {"gripper": "deg"}}
SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def _lerobot_seed(state: np.ndarray | None = None, version: str = "v3.0") -> dict[str, bytes]:
    T = 20
    q = np.degrees(0.1 * np.sin(np.arange(T)[:, None] * 0.1 + np.arange(6))) if state is None else state
    with tempfile.TemporaryDirectory() as d:
        root = write_lerobot_dataset(Path(d) / "ds", [{"state": q, "action": q}], fps=50, joints=SO101,
                                     robot_type="so101_follower", codebase_version=version)
        (root / "actuatorlab.mapping.json").write_text(json.dumps(LEROBOT_MAPPING))
        return {str(p.relative_to(Path(d))): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


SEEDS: dict[str, Callable[[], dict[str, bytes]]] = {
    "bam": _bam_seed, "emps": _emps_seed, "csv": _csv_seed, "native": _native_seed, "mcap": _mcap_seed,
    "lerobot": _lerobot_seed,
}


#: cases run per importer and outcome ("ok" converted, "error" one-line DataError), this session.
COUNTS: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    """With ACTUATORLAB_FUZZ_COUNTS=FILE, write the cases run per importer there (bench/importers.py)."""
    yield
    dest = os.environ.get("ACTUATORLAB_FUZZ_COUNTS")
    if dest:
        Path(dest).write_text(json.dumps({k: dict(v) for k, v in COUNTS.items()}, indent=1))


def _has_mcap() -> bool:
    try:
        import mcap_ros2  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def seeds() -> dict[str, dict[str, bytes]]:
    """Seeds of every importer (MCAP only with the optional extra [mcap])."""
    return {k: f() for k, f in SEEDS.items() if k != "mcap" or _has_mcap()}


@pytest.fixture(autouse=True)
def _needs_seed(request, seeds):
    fmt = request.node.callspec.params.get("fmt") if hasattr(request.node, "callspec") else None
    if fmt is not None and fmt not in seeds:
        pytest.skip("optional extra [mcap] not installed")


# ----------------------------------------------------------------------------------------------
# The property
# ----------------------------------------------------------------------------------------------

def _input_path(fmt: str, folder: Path) -> Path:
    return folder / "ds" if fmt == "lerobot" else folder / {"bam": "log.json", "emps": "emps.mat", "csv": "servo.csv",
                                                             "native": "nat.parquet", "mcap": "arm.mcap"}[fmt]


def check(fmt: str, files: dict[str, bytes]) -> str:
    """Write ``files``, import them, assert the property; returns "ok" or "error"."""
    with tempfile.TemporaryDirectory() as d:
        src, out = Path(d) / "in", Path(d) / "out"
        for rel, data in files.items():
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            (src / rel).write_bytes(data)
        before = {rel: hashlib.sha256((src / rel).read_bytes()).hexdigest() for rel in files}
        try:
            written = run_import([_input_path(fmt, src)], out)
        except DataError as e:
            msg = str(e)
            assert "\n" not in msg and msg.strip(), repr(msg)
            assert str(src) in msg, f"error does not name a file of the input: {msg}"
            assert not out.exists() or not any(out.iterdir()), f"partial output after: {msg}"
            result = "error"
        else:
            assert written and all(p.exists() and p.with_suffix(".json").exists() for p in written)
            for tr in load_logs(out):  # what was written reads back and validates
                assert tr.n >= 10
            result = "ok"
        after = {rel: hashlib.sha256((src / rel).read_bytes()).hexdigest() for rel in files}
        assert after == before, "an input file was modified"
        assert sorted(str(p.relative_to(src)) for p in src.rglob("*") if p.is_file()) == sorted(files)
        COUNTS[fmt][result] += 1
        return result


def _main_file(fmt: str, files: dict[str, bytes]) -> str:
    if fmt == "lerobot":
        return "ds/data/chunk-000/file-000.parquet"
    return next(k for k in files if not k.endswith((".mapping.json",)) and not (fmt == "native" and k.endswith(".json")))


# ----------------------------------------------------------------------------------------------
# 1. bytes: truncation, overwritten and inserted random bytes (any file of the input)
# ----------------------------------------------------------------------------------------------

@st.composite
def byte_mutation(draw, files: dict[str, bytes], fmt: str):
    names = sorted(files)
    target = draw(st.sampled_from(names)) if draw(st.booleans()) else _main_file(fmt, files)
    data = bytearray(files[target])
    kind = draw(st.sampled_from(["truncate", "overwrite", "insert", "truncate_end"]))
    pos = draw(st.integers(0, max(len(data) - 1, 0)))
    if kind == "truncate":
        data = data[:pos]
    elif kind == "truncate_end":
        data = data[: max(0, len(data) - draw(st.integers(1, 64)))]
    elif kind == "overwrite":
        for _ in range(draw(st.integers(1, 8))):
            p = draw(st.integers(0, max(len(data) - 1, 0)))
            if data:
                data[p] = draw(st.integers(0, 255))
    else:
        data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    return {**files, target: bytes(data)}


@pytest.mark.parametrize("fmt", list(SEEDS))
def test_random_bytes(fmt, seeds):
    @FUZZ
    @given(st.data())
    def run(data):
        check(fmt, data.draw(byte_mutation(seeds[fmt], fmt)))

    run()


#: values written over 4-byte words of a .mat file: MAT type codes (valid, reserved, unknown), small
#: data element words, and sizes from zero to 4 GiB
MAT_WORDS = [0, 1, 5, 6, 7, 8, 9, 10, 11, 14, 15, 19, 99, 255, (1 << 16) | 99, (4 << 16) | 9, (5 << 16) | 1,
             1 << 20, 1 << 31, 2**32 - 1, 2**32 - 8]


def _mat_tag_offsets(data: bytes) -> list[int]:
    """Byte offsets of every tag in an uncompressed little-endian MAT v5 file: each top-level
    element and each sub-element inside it (small data elements are 8 bytes, others padded to 8)."""
    tags, pos = [], 128
    while pos + 8 <= len(data):
        end = pos + 8 + struct.unpack_from("<I", data, pos + 4)[0]
        tags.append(pos)
        p = pos + 8
        while p + 8 <= end:
            tags.append(p)
            word, n = struct.unpack_from("<II", data, p)
            p += 8 if word >> 16 else 8 + n + (-n) % 8
        pos = end
    return tags


@st.composite
def mat_tag_mutation(draw, files: dict[str, bytes]):
    data = bytearray(files["emps.mat"])
    tags = _mat_tag_offsets(bytes(data))
    for _ in range(draw(st.integers(1, 2))):
        at = draw(st.sampled_from(tags)) + draw(st.sampled_from([0, 4]))  # the type word or the size word
        struct.pack_into("<I", data, at, draw(st.sampled_from(MAT_WORDS) | st.integers(0, 2**32 - 1)))
    return {**files, "emps.mat": bytes(data)}


def test_mat_tag_and_size_words(seeds):
    """EMPS: type and size words of the .mat file overwritten with values SciPy's compiled reader
    trusts (a data tag of type 99 segfaulted SciPy 1.17's loadmat); random bytes reach them rarely."""
    results = collections.Counter()

    @settings(FUZZ, max_examples=N_MAT_TAGS)
    @given(st.data())
    def run(data):
        results[check("emps", data.draw(mat_tag_mutation(seeds["emps"])))] += 1

    run()
    assert results["error"] > N_MAT_TAGS // 2, results  # most such files are refused, none crashes


# ----------------------------------------------------------------------------------------------
# 2. fields: missing, extra, wrong-typed, NaN/inf, huge/tiny values, wrong units (JSON parts)
# ----------------------------------------------------------------------------------------------

def _json_files(fmt: str, files: dict[str, bytes]) -> list[str]:
    return sorted(k for k in files if k.endswith(".json"))


def _paths(doc: Any, prefix: tuple = (), depth: int = 0) -> list[tuple]:
    out = [prefix]
    if depth > 4:
        return out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,), depth + 1)
    elif isinstance(doc, list):
        for i in sorted({0, len(doc) // 2, len(doc) - 1}) if doc else []:
            out += _paths(doc[i], prefix + (i,), depth + 1)
    return out


UNIT_WORDS = ["deg", "degrees", "rad", "m", "mm", "N.m", "A", "V", "bool", "unknown", "rpm", "range_m100_100",
              "prismatic", "kg", "", "RAD"]


@st.composite
def field_mutation(draw, files: dict[str, bytes], fmt: str):
    names = _json_files(fmt, files)
    if fmt == "emps":  # no JSON: mutate the .mat variables instead
        import scipy.io

        mat = {k: v for k, v in scipy.io.loadmat(io.BytesIO(files["emps.mat"])).items() if not k.startswith("__")}
        key = draw(st.sampled_from(sorted(mat) + ["extra_var"]))
        action = draw(st.sampled_from(["delete", "special", "reshape", "string"]))
        if action == "delete":
            mat.pop(key, None)
        elif action == "special":
            v = draw(st.sampled_from([math.nan, math.inf, -math.inf, 1e308, 5e-324, 0.0]))
            arr = np.array(mat.get(key, np.zeros((40, 1))), dtype=np.float64)
            idx = draw(st.integers(0, arr.size - 1))
            arr.flat[idx] = v
            mat[key] = arr
        elif action == "reshape":
            mat[key] = np.zeros(draw(st.sampled_from([(0,), (3, 3), (40, 2), (1, 39), (2, 40, 1)])))
        else:
            mat[key] = "text"
        buf = io.BytesIO()
        scipy.io.savemat(buf, mat)
        return {**files, "emps.mat": buf.getvalue()}
    target = draw(st.sampled_from(names))
    doc = json.loads(files[target])
    path = draw(st.sampled_from(_paths(doc)))
    action = draw(st.sampled_from(["delete", "extra", "special", "unit"]))
    if action == "extra":
        path = path if path and isinstance(_get(doc, path), dict) else ()
        _set(doc, path + (draw(st.sampled_from(["zz_extra", "unit", "entries", "time", "format"])),),
             draw(st.sampled_from(SPECIAL + UNIT_WORDS)))
    elif not path:
        doc = draw(st.sampled_from(SPECIAL))
    elif action == "delete":
        parent = _get(doc, path[:-1])
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
        elif isinstance(parent, list) and parent:
            parent.pop(path[-1])
    elif action == "special":
        _set(doc, path, draw(st.sampled_from(SPECIAL)))
    else:
        _set(doc, path, draw(st.sampled_from(UNIT_WORDS)))
    text = json.dumps(doc, allow_nan=True)
    return {**files, target: text.encode()}


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _set(doc, path, value):
    if not path:
        return
    _get(doc, path[:-1])[path[-1]] = value




@pytest.mark.parametrize("fmt", list(SEEDS))
def test_missing_extra_and_bad_fields(fmt, seeds):
    files = seeds[fmt]
    if fmt == "mcap":  # a bag's fields live in its messages: mutate the mapping beside it instead
        files = {**files, "arm.mapping.json": json.dumps(
            {"format": "actuatorlab-mcap-mapping", "state_topic": "/joint_states", "command_topic": "/joint_commands",
             "joint_types": {"joint1": "revolute"}, "time": "header", "setup": {"actuator": "xm430", "gains": {"kp": 800}},
             "conditions": {"load": "none"}}).encode()}

    @settings(FUZZ, max_examples=N_FIELDS)
    @given(st.data())
    def run(data):
        check(fmt, data.draw(field_mutation(files, fmt)))

    run()


# ----------------------------------------------------------------------------------------------
# 3. series: NaN/inf, huge and tiny values, duplicated and non-monotonic stamps, in the samples
# ----------------------------------------------------------------------------------------------

@st.composite
def series_mutation(draw, T: int):
    """(which series, index, how, value): a change to one sample of the time base or a signal."""
    which = draw(st.sampled_from(["time", "signal"]))
    i = draw(st.integers(1, T - 1))
    if which == "time":
        how = draw(st.sampled_from(["duplicate", "back", "far_back", "nan", "inf", "huge", "shuffle"]))
    else:
        how = draw(st.sampled_from(["nan", "inf", "-inf", "huge", "tiny", "zero"]))
    return which, i, how


def _mutate(t: np.ndarray, x: np.ndarray, m: tuple) -> tuple[np.ndarray, np.ndarray]:
    which, i, how = m
    t, x = np.array(t, dtype=np.float64), np.array(x, dtype=np.float64)
    v = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "huge": 1e300, "tiny": 5e-324, "zero": 0.0}
    if which == "time":
        if how == "duplicate":
            t[i] = t[i - 1]
        elif how == "back":
            t[i] = t[i - 1] - 1e-4
        elif how == "far_back":  # a clock reset: from sample i on, time restarts before the log's start
            t[i:] -= t[i] - t[0] + (t[1] - t[0])
        elif how == "shuffle":
            t[[i - 1, i]] = t[[i, i - 1]]
        else:
            t[i] = v[how]
    else:
        x.flat[i * (x.size // len(x))] = v[how]
    return t, x


def _series_files(fmt: str, seeds: dict[str, dict[str, bytes]], m: tuple) -> dict[str, bytes]:
    files = dict(seeds[fmt])
    if fmt == "bam":
        doc = json.loads(files["log.json"])
        t = np.array([e["timestamp"] for e in doc["entries"]])
        x = np.array([e["position"] for e in doc["entries"]])
        t, x = _mutate(t, x, m)
        for e, ti, xi in zip(doc["entries"], t, x):
            e["timestamp"], e["position"] = float(ti), float(xi)
        files["log.json"] = json.dumps(doc, allow_nan=True).encode()
    elif fmt == "emps":
        import scipy.io

        mat = {k: v for k, v in scipy.io.loadmat(io.BytesIO(files["emps.mat"])).items() if not k.startswith("__")}
        t, x = _mutate(mat["t"].ravel(), mat["qm"].ravel(), m)
        mat["t"], mat["qm"] = t[:, None], x[:, None]
        buf = io.BytesIO()
        scipy.io.savemat(buf, mat)
        files["emps.mat"] = buf.getvalue()
    elif fmt == "csv":
        lines = files["servo.csv"].decode().splitlines()
        head = [ln for ln in lines if ln.startswith("#") or ln.startswith("time")]
        rows = [ln.split(",") for ln in lines if ln and not (ln.startswith("#") or ln.startswith("time"))]
        t = np.array([float(r[0]) for r in rows])
        x = np.array([float(r[2]) for r in rows])
        t, x = _mutate(t, x, m)
        for r, ti, xi in zip(rows, t, x):
            r[0], r[2] = repr(float(ti)), repr(float(xi))
        files["servo.csv"] = ("\n".join(head + [",".join(r) for r in rows]) + "\n").encode()
    elif fmt == "native":
        tr = _traj()
        t, x = _mutate(tr.time, tr["position"], m)
        with tempfile.TemporaryDirectory() as d:
            save_trajectory(tr.replace(time=t, data={**tr.data, "position": x}), Path(d) / "nat")
            files = {p.name: p.read_bytes() for p in Path(d).iterdir()}
    elif fmt == "mcap":
        T = 30
        t0 = np.arange(T) * 0.01 + 1.0
        q = np.stack([np.sin(t0), np.cos(t0)], 1)
        t, x = _mutate(t0, q, m)
        if not np.all(np.isfinite(t)) or np.any(np.abs(t) > 1e6):  # a stamp is an integer in the message:
            t = np.where(np.isfinite(t) & (np.abs(t) < 1e6), t, -1.0)  # the closest a bag gets is a bad one
        files = _mcap_seed(stamps=t, position=x, log_times=t0 + 0.002)  # received in order, stamped wrong
    else:
        T = 20
        q = np.degrees(0.1 * np.sin(np.arange(T)[:, None] * 0.1 + np.arange(6)))
        t, x = _mutate(np.arange(T) / 50.0, q, m)
        files = _lerobot_seed(state=x)
        if m[0] == "time":  # rewrite the timestamp column of the frames
            import pyarrow as pa
            import pyarrow.parquet as pq

            key = "ds/data/chunk-000/file-000.parquet"
            tab = pq.read_table(io.BytesIO(files[key]))
            tab = tab.set_column(tab.schema.get_field_index("timestamp"), "timestamp",
                                 pa.array(t.astype(np.float32)))
            buf = io.BytesIO()
            pq.write_table(tab, buf)
            files[key] = buf.getvalue()
    return files


@pytest.mark.parametrize("fmt", list(SEEDS))
def test_bad_samples_and_stamps(fmt, seeds):
    results = []

    @settings(FUZZ, max_examples=N_SERIES)
    @given(series_mutation(T=20))
    def run(m):
        r = check(fmt, _series_files(fmt, seeds, m))
        results.append((m, r))
        # a duplicated, reversed or non-finite stamp, or a non-finite position, can never be accepted
        which, _, how = m
        if (which == "time" and how != "huge") or how in ("nan", "inf", "-inf"):
            assert r == "error", (fmt, m)

    run()

"""Every unusable input gives one DataError whose message names the file; strict=False returns the
log as it is; raw files are never modified."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from actuatorlab.errors import DataError
from actuatorlab.logs import load_log, load_logs, load_native, save_trajectory

DATA = Path(__file__).resolve().parent / "data"


def _bam(n: int = 30, **top) -> dict:
    entries = [{"timestamp": 0.005 * k + 0.001, "position": 0.01 * k, "goal_position": 0.01 * k + 0.02,
                "speed": 2.0, "load": 65535 if k % 2 else 3, "input_volts": 7.3, "temp": 28,
                "torque_enable": True} for k in range(n)]
    return {"mass": 0.49, "length": 0.1, "kp": 400, "vin": 7.4, "motor": "xl330", "trajectory": "sin_sin",
            **top, "entries": entries}


def _write(path: Path, doc) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _error(path: Path, **kw) -> str:
    with pytest.raises(DataError) as e:
        load_log(path, **kw)
    msg = str(e.value)
    assert path.name in msg, msg
    assert "\n" not in msg and "Traceback" not in msg
    return msg


def test_valid_synthetic_bam_loads(tmp_path: Path) -> None:
    traj = load_log(_write(tmp_path / "2026-02-01_ok.json", _bam()))
    assert traj.n == 30 and traj.conditions["session"] == "2026-02-01"
    assert traj["pwm_duty"][1] == pytest.approx(-1 / 885) and traj["pwm_duty"][0] == pytest.approx(3 / 885)


@pytest.mark.parametrize("suffix", [".json", ".csv", ".mat", ".parquet", ".dat"])
def test_empty_file(tmp_path: Path, suffix: str) -> None:
    p = tmp_path / f"empty{suffix}"
    p.write_bytes(b"")
    assert "empty" in _error(p)


def test_truncated_json(tmp_path: Path) -> None:
    text = json.dumps(_bam())
    p = tmp_path / "cut.json"
    p.write_text(text[: len(text) // 2])
    msg = _error(p)
    assert "invalid JSON" in msg and "line 1" in msg


def test_invalid_json(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text('{"entries": [ {"timestamp": 0.0,, } ] }')
    assert "invalid JSON" in _error(p)


def test_json_without_entries(tmp_path: Path) -> None:
    doc = _bam()
    doc["samples"] = doc.pop("entries")
    assert "'entries'" in _error(_write(tmp_path / "noentries.json", doc))


@pytest.mark.parametrize("key", ["timestamp", "position", "goal_position"])
def test_sample_missing_required_key(tmp_path: Path, key: str) -> None:
    doc = _bam()
    del doc["entries"][7][key]
    msg = _error(_write(tmp_path / f"missing_{key}.json", doc))
    assert "sample 7" in msg and f"'{key}'" in msg


def test_non_numeric_value(tmp_path: Path) -> None:
    doc = _bam()
    doc["entries"][4]["position"] = "12deg"
    msg = _error(_write(tmp_path / "text.json", doc))
    assert "sample 4" in msg and "'position'" in msg


@pytest.mark.parametrize("key,channel", [("timestamp", "time"), ("position", "position"),
                                         ("goal_position", "position_target")])
def test_nan_in_key_channels(tmp_path: Path, key: str, channel: str) -> None:
    doc = _bam()
    doc["entries"][5][key] = None  # JSON null -> NaN
    p = _write(tmp_path / f"nan_{key}.json", doc)
    msg = _error(p)
    assert f"NaN/inf value(s) in {channel}, first at sample 5" in msg
    traj = load_log(p, strict=False)  # returned as is
    assert np.isnan({"time": traj.time}.get(channel, traj.data.get(channel))[5])


def test_nan_literal_in_json(tmp_path: Path) -> None:
    p = tmp_path / "nanlit.json"
    p.write_text(json.dumps(_bam()).replace('"position": 0.05,', '"position": NaN,', 1))
    assert "NaN/inf value(s) in position, first at sample 5" in _error(p)


def test_duplicated_timestamp(tmp_path: Path) -> None:
    doc = _bam()
    doc["entries"][12]["timestamp"] = doc["entries"][11]["timestamp"]
    p = _write(tmp_path / "dup.json", doc)
    raw_sha = hashlib.sha256(p.read_bytes()).hexdigest()
    msg = _error(p)
    assert "timestamps not strictly increasing at sample 12 (t=0.056 s after t=0.056 s, a duplicate)" in msg
    traj = load_log(p, strict=False)
    assert traj.time[12] == traj.time[11]
    assert hashlib.sha256(p.read_bytes()).hexdigest() == raw_sha  # never modified


def test_timestamps_going_back(tmp_path: Path) -> None:
    doc = _bam()
    doc["entries"][20]["timestamp"] = 0.03
    msg = _error(_write(tmp_path / "back.json", doc))
    assert "timestamps not strictly increasing at sample 20 (t=0.03 s after t=0.096 s, a step back" in msg


def test_too_few_samples(tmp_path: Path) -> None:
    p = _write(tmp_path / "short.json", _bam(n=6))
    assert "only 6 samples (at least 10 needed)" in _error(p)
    assert load_log(p, strict=False).n == 6


def test_empty_entries(tmp_path: Path) -> None:
    assert "no samples" in _error(_write(tmp_path / "none.json", _bam(n=0)))


def test_unknown_json_document(tmp_path: Path) -> None:
    assert "not a known log" in _error(_write(tmp_path / "list.json", [1, 2, 3]))
    shutil.copy(DATA / "servo_example.mapping.json", tmp_path / "m.json")
    assert "column mapping" in _error(tmp_path / "m.json")


def test_missing_path(tmp_path: Path) -> None:
    assert "no such file" in _error(tmp_path / "ghost.json")
    with pytest.raises(DataError, match="ghost_dir"):
        load_logs([tmp_path / "ghost_dir"])


# --------------------------------------------------------------------------- EMPS .mat
def _mat(path: Path, **vars) -> Path:
    import scipy.io

    T = 50
    t = np.arange(T) * 1e-3
    base = {"t": t[:, None], "qm": t[:, None], "qg": t[:, None], "vir": t[:, None], "gtau": np.array([[35.0]]),
            "kp": np.array([[1.0]]), "kv": np.array([[2.0]])}
    base.update(vars)
    scipy.io.savemat(path, {k: v for k, v in base.items() if v is not None})
    return path


def test_mat_missing_variable(tmp_path: Path) -> None:
    msg = _error(_mat(tmp_path / "noqg.mat", qg=None))
    assert "missing required variable(s) qg" in msg


def test_mat_wrong_length(tmp_path: Path) -> None:
    msg = _error(_mat(tmp_path / "short_qm.mat", qm=np.zeros((10, 1))))
    assert "'qm'" in msg and "50" in msg


def test_mat_nan_in_time(tmp_path: Path) -> None:
    t = np.arange(50) * 1e-3
    t[3] = np.nan
    assert "NaN/inf value(s) in time, first at sample 3" in _error(_mat(tmp_path / "nan_t.mat", t=t[:, None]))


def test_corrupt_mat(tmp_path: Path) -> None:
    p = _mat(tmp_path / "corrupt.mat")
    p.write_bytes(p.read_bytes()[:200])
    msg = _error(p)
    assert "corrupt .mat file" in msg and "claims" in msg and "are left" in msg


def _mat_bytes(**vars) -> bytearray:
    import io

    import scipy.io

    buf = io.BytesIO()
    scipy.io.savemat(buf, vars, do_compression=False)
    return bytearray(buf.getvalue())


#: byte offsets in an uncompressed MAT v5 file of the first variable's dimension values and data tag
#: (128-byte header, 8-byte matrix tag, 16 bytes of array flags, dimension tag; a short name is a
#: small data element of 8 bytes)
_DIMS, _DATA_TAG = 128 + 8 + 16 + 8, 128 + 8 + 16 + 8 + 8 + 8


def test_mat_structure_is_checked_before_scipy_parses_it(tmp_path: Path) -> None:
    """SciPy 1.17's compiled reader crashed the process (SIGSEGV / SIGBUS) on a data element of an
    unknown type: the structure walk refuses such files with a message naming the element."""
    import struct

    from actuatorlab.logs.importers.emps import check_mat5, read_mat

    t = np.arange(40.0)[:, None]
    good = _mat_bytes(t=t, name="abc", c=np.array([1 + 2j, 3.0]), i=np.arange(3, dtype=np.int16),
                      cell=np.array([1, "a"], dtype=object), st={"a": 1.0})
    assert check_mat5(bytes(good)) == {"t": 6, "name": 4, "c": 6, "i": 10, "cell": 1, "st": 2}
    (tmp_path / "good.mat").write_bytes(good)
    mat = read_mat(tmp_path / "good.mat")
    assert set(mat) == {"t", "name", "c", "i"}  # numeric and char only; cells and structs skipped
    assert np.array_equal(mat["t"], t) and mat["c"][0, 0] == 1 + 2j

    def corrupt(name: str, offset: int, fmt: str, *values) -> str:
        b = _mat_bytes(t=t)
        struct.pack_into(fmt, b, offset, *values)
        (tmp_path / name).write_bytes(b)
        with pytest.raises(DataError) as e:
            read_mat(tmp_path / name)
        assert str(e.value).startswith(str(tmp_path / name)) and "corrupt .mat file" in str(e.value)
        return str(e.value)

    assert "real data has type 99" in corrupt("type.mat", _DATA_TAG, "<I", 99)  # SciPy: segfault
    assert "need 85899345920" in corrupt("dims.mat", _DIMS, "<ii", 40, 1 << 28)
    assert "negative dimension" in corrupt("neg.mat", _DIMS, "<ii", -5, 1)  # SciPy: loads it
    assert "claims 1073741824 bytes" in corrupt("n.mat", _DATA_TAG + 4, "<I", 1 << 30)
    assert "claims" in corrupt("top.mat", 128 + 4, "<I", 1 << 20)
    # compressed: a flipped byte in the zlib stream, and a bomb-sized claim
    import io
    import zlib

    import scipy.io

    buf = io.BytesIO()
    scipy.io.savemat(buf, {"t": t}, do_compression=True)
    z = bytearray(buf.getvalue())
    z[128 + 8 + 2] ^= 0xFF
    with pytest.raises(ValueError, match="corrupt compressed data|claims|array flags|dimensions"):
        check_mat5(bytes(z))
    inner = zlib.compress(struct.pack("<II", 14, 1 << 31))
    bomb = bytes(z[:128]) + struct.pack("<II", 15, len(inner)) + inner
    with pytest.raises(ValueError, match="compressed matrix claims 2147483648 bytes"):
        check_mat5(bomb)
    # a required variable that is not numeric; a v4 file
    p = _mat(tmp_path / "struct_t.mat", t={"a": 1.0})
    assert "variable 't' is a struct array, not numeric" in _error(p)
    b4 = io.BytesIO()
    scipy.io.savemat(b4, {"t": t}, format="4")
    (tmp_path / "v4.mat").write_bytes(b4.getvalue())
    with pytest.raises(DataError, match="MAT v4 file"):
        read_mat(tmp_path / "v4.mat")


# --------------------------------------------------------------------------- CSV + mapping
def _csv_pair(tmp_path: Path, mapping_patch=None, csv_text: str | None = None) -> Path:
    csv = tmp_path / "log.csv"
    csv.write_text(csv_text if csv_text is not None else (DATA / "servo_example.csv").read_text())
    m = json.loads((DATA / "servo_example.mapping.json").read_text())
    if mapping_patch:
        mapping_patch(m)
    (tmp_path / "log.mapping.json").write_text(json.dumps(m))
    return csv


def test_csv_without_mapping(tmp_path: Path) -> None:
    p = tmp_path / "alone.csv"
    shutil.copy(DATA / "servo_example.csv", p)
    assert "needs a column mapping" in _error(p)


def test_csv_missing_column(tmp_path: Path) -> None:
    csv = _csv_pair(tmp_path, lambda m: m["channels"]["position"].update(column="pos_rad"))
    msg = _error(csv)
    assert "column 'pos_rad' named in log.mapping.json not found" in msg and "pos_deg" in msg


def test_csv_non_numeric_cell(tmp_path: Path) -> None:
    text = (DATA / "servo_example.csv").read_text().replace("30,24.271,9.271", "30,24.271,oops", 1)
    msg = _error(_csv_pair(tmp_path, csv_text=text))
    assert "column 'pos_deg' data row 4: 'oops' is not a number" in msg


def test_csv_deg_for_prismatic_joint(tmp_path: Path) -> None:
    def patch(m):
        m["setup"]["joint_type"] = "prismatic"

    csv = _csv_pair(tmp_path, patch)
    with pytest.raises(DataError) as e:
        load_log(csv)
    msg = str(e.value)
    assert "log.mapping.json" in msg and "log.csv" in msg
    assert "column 'cmd_deg'" in msg and "unit 'deg'" in msg and "prismatic" in msg and "use m or mm" in msg


@pytest.mark.parametrize("channel,unit,expect", [("current", "V", "use A or mA"),
                                                  ("position", "degrees", "unknown unit 'degrees'"),
                                                  ("velocity", "deg", "use rad/s or deg/s or rpm")])
def test_csv_unit_does_not_fit(tmp_path: Path, channel: str, unit: str, expect: str) -> None:
    csv = _csv_pair(tmp_path, lambda m: m["channels"][channel].update(unit=unit))
    with pytest.raises(DataError) as e:
        load_log(csv)
    msg = str(e.value)
    col = json.loads((DATA / "servo_example.mapping.json").read_text())["channels"][channel]["column"]
    assert "log.csv" in msg and "log.mapping.json" in msg and f"column '{col}'" in msg and expect in msg


def test_csv_mapping_typo_and_bad_json(tmp_path: Path) -> None:
    csv = _csv_pair(tmp_path, lambda m: m["channels"]["position"].update(untis="deg"))
    with pytest.raises(DataError, match=r"log\.mapping\.json.*unknown key\(s\) untis"):
        load_log(csv)
    (tmp_path / "log.mapping.json").write_text('{"time": ')
    with pytest.raises(DataError, match=r"log\.mapping\.json: invalid JSON"):
        load_log(csv)


def test_csv_duplicate_time(tmp_path: Path) -> None:
    text = (DATA / "servo_example.csv").read_text().replace("\n40,", "\n30,", 1)
    msg = _error(_csv_pair(tmp_path, csv_text=text))
    assert "timestamps not strictly increasing at sample 4 (t=0.03 s after t=0.03 s, a duplicate)" in msg


def test_csv_header_only(tmp_path: Path) -> None:
    text = "time_ms,cmd_deg,pos_deg,vel_rpm,current_mA,vbus,temp_c,enabled,comment\n"
    assert "only 0 samples" in _error(_csv_pair(tmp_path, csv_text=text))


# --------------------------------------------------------------------------- native pairs
def _native(tmp_path: Path) -> Path:
    return save_trajectory(load_log(DATA / "servo_example.csv"), tmp_path / "nat")


def test_native_unknown_version(tmp_path: Path) -> None:
    p = _native(tmp_path)
    side = p.with_suffix(".json")
    doc = json.loads(side.read_text())
    doc["format_version"] = "2"
    side.write_text(json.dumps(doc))
    with pytest.raises(DataError) as e:
        load_native(p)
    assert "nat.json" in str(e.value) and "unknown format_version '2'" in str(e.value)


def test_native_sha_mismatch(tmp_path: Path) -> None:
    p = _native(tmp_path)
    other = save_trajectory(load_log(DATA / "servo_example.csv").slice(0, 15), tmp_path / "other")
    shutil.copy(other, p)  # a valid parquet file swapped behind the sidecar's back
    with pytest.raises(DataError, match=r"nat\.parquet: sha256 .* does not match"):
        load_native(p)


def test_native_missing_parquet_or_sidecar(tmp_path: Path) -> None:
    p = _native(tmp_path)
    p.unlink()
    with pytest.raises(DataError, match=r"nat\.parquet: parquet file is missing"):
        load_log(p.with_suffix(".json"))
    q = _native(tmp_path / "b")
    q.with_suffix(".json").unlink()
    with pytest.raises(DataError, match=r"nat\.json: native sidecar is missing"):
        load_log(q)


def test_native_sidecar_missing_keys(tmp_path: Path) -> None:
    p = _native(tmp_path)
    side = p.with_suffix(".json")
    doc = json.loads(side.read_text())
    del doc["channels"]
    side.write_text(json.dumps(doc))
    with pytest.raises(DataError, match=r"nat\.json: sidecar lacks required key\(s\) channels"):
        load_native(p)

"""Importer for the EMPS benchmark (MATLAB v5 .mat, read with ``scipy.io.loadmat``).

EMPS: a DC motor drives a ball screw that moves a load (prismatic joint), run in closed loop at
1 kHz. Variables (Janot, Gautier, Brunot, "Data Set and Reference Models of EMPS", Workshop on
Nonlinear System Identification Benchmarks, 2019): ``t`` [s]; ``qm`` [m] motor position measured by a
50 000 counts/rev encoder and expressed on the load side; ``qg`` [m] reference position; ``vir`` [V]
controller output sent to the drive (load-side force = ``gtau * vir`` [N]); scalars ``gtau`` [N/V],
``kp`` [1/s], ``kv`` [V/(m/s)] of the cascade law ``v = kp*kv*(qg - q) - kv*dq``.

Any other variable with one value per sample is kept as an extra channel (unit "unknown" unless
known, e.g. ``pulses_N`` [N], the force pulses of the benchmark's test set); other scalars go to
``setup.extra``.

Before SciPy parses a file, :func:`check_mat5` walks its element structure (MATLAB's "MAT-File
Format", version 5: 128-byte header, then tagged data elements, optionally zlib-compressed) and
checks every size field against the bytes that are really there. SciPy's compiled reader trusts
those fields: on corrupted files it crashed the whole process (a bus error, seen in
tests/test_fuzz_importers.py) instead of raising. Only numeric and char variables are handed to
SciPy; cells, structs, sparse matrices and MATLAB objects are skipped (EMPS has none).
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from actuatorlab.errors import DataError
from actuatorlab.logs.format import Channel, Setup, Trajectory

__all__ = ["check_mat5", "is_mat_file", "load_emps", "read_mat"]

_REQUIRED = ("t", "qm", "qg", "vir")

#: extra per-sample variables whose meaning is known.
_KNOWN_EXTRA: dict[str, Channel] = {
    "pulses_N": Channel("N", "measured", "output", source="pulses_N",
                        description="external force pulses applied to the load (EMPS test set)"),
}


def is_mat_file(head: bytes) -> bool:
    """Whether the first bytes of a file are a MATLAB .mat header (v5 text header or v7.3 HDF5)."""
    return head.startswith(b"MATLAB") or head.startswith(b"\x89HDF")


#: MAT v5 data types (code -> name, bytes per element); 14 miMATRIX and 15 miCOMPRESSED hold elements
_MI = {1: ("miINT8", 1), 2: ("miUINT8", 1), 3: ("miINT16", 2), 4: ("miUINT16", 2), 5: ("miINT32", 4),
       6: ("miUINT32", 4), 7: ("miSINGLE", 4), 9: ("miDOUBLE", 8), 12: ("miINT64", 8), 13: ("miUINT64", 8),
       16: ("miUTF8", 1), 17: ("miUTF16", 2), 18: ("miUTF32", 4)}
_MI_MATRIX, _MI_COMPRESSED = 14, 15
#: MATLAB array classes (the low byte of the array flags); 6-15 are numeric, 4 is char
_MX = {1: "cell", 2: "struct", 3: "object", 4: "char", 5: "sparse", 6: "double", 7: "single", 8: "int8",
       9: "uint8", 10: "int16", 11: "uint16", 12: "int32", 13: "uint32", 14: "int64", 15: "uint64",
       16: "function handle", 17: "opaque"}
_MX_CHAR, _MX_NUMERIC = 4, range(6, 16)
#: most bytes one compressed variable may inflate to (a decompression bomb is refused, not allocated)
MAX_INFLATED_BYTES = 1 << 32


def _subelement(m: bytes, p: int, bo: str, where: str) -> tuple[int, int, int, int]:
    """(type, nbytes, data offset, next offset) of the sub-element at ``m[p:]``: the small format
    (type and size in one 4-byte word, at most 4 data bytes) or a full 8-byte tag, data padded to 8."""
    if p + 8 > len(m):
        raise ValueError(f"{where}: truncated element tag at byte {p} of {len(m)}")
    word = struct.unpack_from(bo + "I", m, p)[0]
    if word >> 16:
        mdtype, nbytes = word & 0xFFFF, word >> 16
        if nbytes > 4:
            raise ValueError(f"{where}: small data element at byte {p} claims {nbytes} bytes (at most 4)")
        return mdtype, nbytes, p + 4, p + 8
    mdtype, nbytes = struct.unpack_from(bo + "II", m, p)
    if p + 8 + nbytes > len(m):
        raise ValueError(f"{where}: element at byte {p} claims {nbytes} bytes, {len(m) - p - 8} are left")
    return mdtype, nbytes, p + 8, p + 8 + nbytes + (-nbytes) % 8


def _check_matrix(m: bytes, bo: str, where: str) -> tuple[str, int]:
    """(name, class) of one miMATRIX body after checking its header and, for numeric and char
    arrays, that the data holds exactly prod(dims) values of the stored type."""
    t, n, d, p = _subelement(m, 0, bo, where)
    if t != 6 or n != 8:
        raise ValueError(f"{where}: array flags must be 8 bytes of miUINT32 (got type {t}, {n} bytes)")
    flags = struct.unpack_from(bo + "I", m, d)[0]
    mclass, is_complex = flags & 0xFF, bool(flags & 0x0800)
    if mclass not in _MX:
        raise ValueError(f"{where}: unknown array class {mclass}")
    t, n, d, p = _subelement(m, p, bo, where)
    if t != 5 or n % 4 or n < 8:
        raise ValueError(f"{where}: dimensions must be at least 2 miINT32 values (got type {t}, {n} bytes)")
    dims = struct.unpack_from(f"{bo}{n // 4}i", m, d)
    if min(dims) < 0:
        raise ValueError(f"{where}: negative dimension in {dims}")
    t, n, d, p = _subelement(m, p, bo, where)
    if t != 1:
        raise ValueError(f"{where}: the array name must be miINT8 (got type {t})")
    name = m[d:d + n].decode("latin-1")
    where = f"{where} ({name!r}, {_MX[mclass]})"
    if mclass in _MX_NUMERIC or mclass == _MX_CHAR:
        count = 1
        for k in dims:
            count *= k
        for part in ("real", "imaginary")[:1 + (is_complex and mclass != _MX_CHAR)]:
            t, n, d, p = _subelement(m, p, bo, where)
            if t not in _MI:
                raise ValueError(f"{where}: {part} data has type {t}, not a numeric MAT type")
            size = _MI[t][1]
            if mclass == _MX_CHAR and t == 16:  # UTF-8: one to four bytes per character
                if not count <= n <= 4 * count:
                    raise ValueError(f"{where}: {n} UTF-8 bytes cannot hold {count} characters")
            elif n != count * size:
                raise ValueError(f"{where}: {part} data holds {n} bytes, dimensions {dims} of "
                                 f"{_MI[t][0]} need {count * size}")
    return name, mclass


def check_mat5(buf: bytes) -> dict[str, int]:
    """Check the structure of a MAT v5 (MATLAB -v6 / -v7) file: header, then every top-level data
    element (miMATRIX, or miCOMPRESSED holding one), with each size field inside the bytes present.

    Returns {variable name: array class}. Raises ValueError (the message says where) otherwise.
    Source: MathWorks, "MAT-File Format", version 5 documents (header; tag and small data element
    formats; array flags, dimensions, name and data sub-elements).
    """
    if len(buf) < 128:
        raise ValueError(f"{len(buf)} bytes: shorter than the 128-byte MAT v5 header")
    if 0 in buf[:4]:
        raise ValueError("a MAT v4 file (no text header); save with -v6 or -v7")
    order = buf[126:128]
    if order not in (b"IM", b"MI"):
        raise ValueError(f"endian indicator {order!r} at byte 126 is neither 'IM' nor 'MI'")
    bo = "<" if order == b"IM" else ">"
    version = struct.unpack_from(bo + "H", buf, 124)[0]
    if version != 0x0100:
        raise ValueError(f"MAT version field 0x{version:04x} (a v5 / v7 file has 0x0100)")
    names: dict[str, int] = {}
    pos, k = 128, 0
    while pos < len(buf):
        where = f"variable {k} (byte {pos})"
        if pos + 8 > len(buf):
            raise ValueError(f"{where}: {len(buf) - pos} trailing bytes, not a data element")
        mdtype, nbytes = struct.unpack_from(bo + "II", buf, pos)
        if nbytes == 0 or pos + 8 + nbytes > len(buf):
            raise ValueError(f"{where}: claims {nbytes} bytes, {len(buf) - pos - 8} are left")
        body = buf[pos + 8:pos + 8 + nbytes]
        if mdtype == _MI_COMPRESSED:
            z = zlib.decompressobj()
            try:
                body = z.decompress(body, MAX_INFLATED_BYTES)
            except zlib.error as e:
                raise ValueError(f"{where}: corrupt compressed data ({e})") from None
            if z.unconsumed_tail:
                raise ValueError(f"{where}: inflates to more than {MAX_INFLATED_BYTES} bytes")
            if len(body) < 8:
                raise ValueError(f"{where}: compressed element holds {len(body)} bytes, no tag")
            mdtype, n_inner = struct.unpack_from(bo + "II", body, 0)
            if 8 + n_inner > len(body):
                raise ValueError(f"{where}: compressed matrix claims {n_inner} bytes, {len(body) - 8} inflated")
            body = body[8:8 + n_inner]
        if mdtype != _MI_MATRIX:
            raise ValueError(f"{where}: element type {mdtype}, expected miMATRIX (14) or miCOMPRESSED (15)")
        name, mclass = _check_matrix(body, bo, where)
        if name in names:
            raise ValueError(f"{where}: variable {name!r} appears twice")
        names[name] = mclass
        pos += 8 + nbytes
        k += 1
    return names


def read_mat(path: str | Path, numeric: tuple[str, ...] = ()) -> dict[str, Any]:
    """The numeric and char variables of a MAT v5 / v7 file, {name: array}, read by SciPy after
    :func:`check_mat5` accepted the file's structure. ``numeric``: names that must be numeric
    arrays where present.

    Raises:
        DataError: naming the file: empty, HDF5 (v7.3), v4, corrupt structure, or a listed
        variable that is not numeric.
    """
    path = Path(path)
    import scipy.io

    try:
        buf = path.read_bytes()
    except OSError as e:
        raise DataError(path, f"cannot read: {e.strerror or e}") from None
    if not buf:
        raise DataError(path, "file is empty")
    if buf.startswith(b"\x89HDF"):
        raise DataError(path, "MATLAB v7.3 (HDF5) .mat files are not supported; save with -v7 or -v6")
    try:
        classes = check_mat5(buf)
    except ValueError as e:
        raise DataError(path, f"corrupt .mat file: {e}") from None
    for k in numeric:
        if k in classes and classes[k] not in _MX_NUMERIC:
            raise DataError(path, f"variable {k!r} is a {_MX[classes[k]]} array, not numeric")
    readable = [k for k, c in classes.items() if c in _MX_NUMERIC or c == _MX_CHAR]
    try:
        # the checked bytes themselves (not the path again), and only the checked variables
        mat = scipy.io.loadmat(io.BytesIO(buf), variable_names=readable) if readable else {}
    except Exception as e:  # scipy raises ValueError/TypeError/OSError on corrupt files
        raise DataError(path, f"unreadable .mat file: {type(e).__name__}: {e}") from None
    return {k: v for k, v in mat.items() if not k.startswith("__")}


def load_emps(path: str | Path) -> Trajectory:
    """Read an EMPS .mat file as a :class:`Trajectory` (structure checked, values not validated here)."""
    path = Path(path)
    mat = read_mat(path, numeric=_REQUIRED)
    missing = [k for k in _REQUIRED if k not in mat]
    if missing:
        raise DataError(path, f"missing required variable(s) {', '.join(missing)} (EMPS needs t, qm, qg, vir)")
    try:
        t = np.asarray(mat["t"], dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise DataError(path, "variable 't' is not numeric") from None
    T = t.shape[0]
    vectors: dict[str, np.ndarray] = {}
    scalars: dict[str, float] = {}
    others: list[str] = []
    for k, v in mat.items():
        arr = np.asarray(v)
        if arr.dtype.kind not in "biuf":
            others.append(k)
            continue
        flat = arr.astype(np.float64).ravel()
        if flat.size == T and arr.ndim <= 2 and min(arr.shape or (1,)) <= 1:
            vectors[k] = flat
        elif flat.size == 1:
            scalars[k] = float(flat[0])
        else:
            others.append(k)
    for k in _REQUIRED:
        if k not in vectors:
            raise DataError(path, f"variable '{k}' has shape {np.shape(mat[k])}, expected one value per sample of t ({T})")

    data = {
        "position": vectors["qm"],
        "position_target": vectors["qg"],
        "controller_output": vectors["vir"],
    }
    channels = {
        "position": Channel("m", "measured", "motor",
                            source="motor encoder 50000 counts/rev expressed on load side (qm)"),
        "position_target": Channel("m", "commanded", "output", source="qg (reference position)"),
        "controller_output": Channel("V", "commanded", "none", source="vir",
                                     description="controller output sent to the drive; load-side force = gtau*vir [N]"),
    }
    for k in sorted(set(vectors) - set(_REQUIRED)):
        name = k if k not in data else f"raw_{k}"
        data[name] = vectors[k]
        channels[name] = _KNOWN_EXTRA.get(k, Channel("unknown", "measured", "none", source=k,
                                                     description="variable not interpreted by the EMPS importer"))

    gains: dict[str, float] = {k: scalars[k] for k in ("kp", "kv") if k in scalars}
    bench = {"gtau": scalars["gtau"]} if "gtau" in scalars else {}
    extra: dict[str, Any] = {"source_format": "emps_mat"}
    extra.update({k: v for k, v in scalars.items() if k not in ("kp", "kv", "gtau")})
    warnings = [f"scalar '{k}' is absent" for k in ("kp", "kv", "gtau") if k not in scalars]
    if others:
        warnings.append(f"variables not imported (not one value per sample): {', '.join(sorted(others))}")
    if warnings:
        extra["warnings"] = warnings
    setup = Setup(actuator="emps", joint_type="prismatic", controller="emps_cascade", gains=gains,
                  supply_voltage=None, bench=bench, extra=extra)
    conditions = {"load": "emps", "gain": "kp{:g}_kv{:g}".format(gains.get("kp", np.nan), gains.get("kv", np.nan)),
                  "excitation": "emps_reference", "session": path.stem}
    return Trajectory(name=path.stem, time=t, data=data, channels=channels, setup=setup,
                      conditions=conditions, source_file=str(path))

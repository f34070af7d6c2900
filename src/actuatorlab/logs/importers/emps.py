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
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from actuatorlab.errors import DataError
from actuatorlab.logs.format import Channel, Setup, Trajectory

__all__ = ["is_mat_file", "load_emps"]

_REQUIRED = ("t", "qm", "qg", "vir")

#: extra per-sample variables whose meaning is known.
_KNOWN_EXTRA: dict[str, Channel] = {
    "pulses_N": Channel("N", "measured", "output", source="pulses_N",
                        description="external force pulses applied to the load (EMPS test set)"),
}


def is_mat_file(head: bytes) -> bool:
    """Whether the first bytes of a file are a MATLAB .mat header (v5 text header or v7.3 HDF5)."""
    return head.startswith(b"MATLAB") or head.startswith(b"\x89HDF")


def load_emps(path: str | Path) -> Trajectory:
    """Read an EMPS .mat file as a :class:`Trajectory` (no validation here)."""
    path = Path(path)
    import scipy.io

    head = path.read_bytes()[:128]
    if not head:
        raise DataError(path, "file is empty")
    if head.startswith(b"\x89HDF"):
        raise DataError(path, "MATLAB v7.3 (HDF5) .mat files are not supported; save with -v7 or -v6")
    try:
        mat = scipy.io.loadmat(path)
    except Exception as e:  # scipy raises ValueError/TypeError/OSError on corrupt files
        raise DataError(path, f"unreadable .mat file: {type(e).__name__}: {e}") from None
    mat = {k: v for k, v in mat.items() if not k.startswith("__")}
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

    gains = {k: scalars[k] for k in ("kp", "kv") if k in scalars}
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

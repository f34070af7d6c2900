"""Logs: the native trajectory format, importers, resampling and audit.

Public API (see docs/format.md)::

    from actuatorlab.logs import load_log, load_logs, save_trajectory, load_native
    traj = load_log("raw/2026-01-15_10h28m10.json")      # BAM, EMPS .mat, CSV + mapping, native
    uni = resample_uniform(traj, infer_dt(traj))          # commanded: zero-order hold
    report = audit_log(load_log(path, strict=False))      # JSON-serializable
"""

from actuatorlab.logs.audit import audit_log as audit_log
from actuatorlab.logs.audit import estimate_lag as estimate_lag
from actuatorlab.logs.audit import render_audit as render_audit
from actuatorlab.logs.format import CANONICAL_CHANNELS as CANONICAL_CHANNELS
from actuatorlab.logs.format import CANONICAL_UNITS as CANONICAL_UNITS
from actuatorlab.logs.format import FORMAT_NAME as FORMAT_NAME
from actuatorlab.logs.format import FORMAT_VERSION as FORMAT_VERSION
from actuatorlab.logs.format import Channel as Channel
from actuatorlab.logs.format import Setup as Setup
from actuatorlab.logs.format import Trajectory as Trajectory
from actuatorlab.logs.format import canonical_unit as canonical_unit
from actuatorlab.logs.importers import MIN_SAMPLES as MIN_SAMPLES
from actuatorlab.logs.importers import decode_dynamixel_pwm as decode_dynamixel_pwm
from actuatorlab.logs.importers import detect_format as detect_format
from actuatorlab.logs.importers import find_log_files as find_log_files
from actuatorlab.logs.importers import load_log as load_log
from actuatorlab.logs.importers import load_logs as load_logs
from actuatorlab.logs.importers import validate_trajectory as validate_trajectory
from actuatorlab.logs.io import load_native as load_native
from actuatorlab.logs.io import save_trajectory as save_trajectory
from actuatorlab.logs.resample import infer_dt as infer_dt
from actuatorlab.logs.resample import resample_uniform as resample_uniform
from actuatorlab.logs.resample import zero_order_hold as zero_order_hold

__all__ = [
    "CANONICAL_CHANNELS",
    "CANONICAL_UNITS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MIN_SAMPLES",
    "Channel",
    "Setup",
    "Trajectory",
    "audit_log",
    "canonical_unit",
    "decode_dynamixel_pwm",
    "detect_format",
    "estimate_lag",
    "find_log_files",
    "infer_dt",
    "load_log",
    "load_logs",
    "load_native",
    "render_audit",
    "resample_uniform",
    "save_trajectory",
    "validate_trajectory",
    "zero_order_hold",
]

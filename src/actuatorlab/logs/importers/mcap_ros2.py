"""Importer for ROS 2 bags in MCAP (``mcap`` + ``mcap-ros2-support``, optional extra ``[mcap]``).

What is read (ROS message definitions: ``sensor_msgs/msg/JointState``,
``trajectory_msgs/msg/JointTrajectory``, ``std_msgs/msg/Float64MultiArray``; units per REP 103,
SI: rad, rad/s, N.m for revolute joints, m, m/s, N for prismatic ones):

* the **state topic** (``sensor_msgs/JointState``; default: the only topic of that type) gives
  ``position``, ``velocity`` and ``effort`` by joint name, all ``measured`` on the output side
  (velocity is ``estimated``: drivers differentiate encoders);
* the **command topic** (default: the only ``JointTrajectory`` or ``Float64MultiArray`` topic;
  a ``JointState`` topic may also be named) gives ``position_target``, ``commanded``. Each command
  is put on the state time base by zero-order hold: a state sample sees the last command whose
  time is at or before it, never a later one. A ``JointTrajectory`` uses the first point of each
  message (streaming position control); a ``Float64MultiArray`` (a ``forward_command_controller``)
  carries no joint names, so ``command_joints`` gives their order (default: the state topic's
  order when the lengths agree, recorded as a warning). State samples before the first command
  are dropped (their target is unknown) and counted in ``setup.extra``.

Two clocks, made explicit. Every message has the recorder's **log time** (receive time, MCAP
``log_time``); ``JointState`` and ``JointTrajectory`` also carry the sender's **header stamp**.
``time`` (the time base) is the header stamp when every state message has a non-zero one, else the
log time (``"time": "header" | "log" | "auto"`` in the mapping; default auto);
``setup.extra["time_base"]`` says which. The channel ``receive_delay`` [s] = log time - header
stamp of each state sample (measured, side none) is kept whenever stamps exist: the audit reports
it and flags negative values (sender and recorder clocks disagree). With the log time as base,
the measured channels carry ``latency_s`` = the median receive delay (they describe the past).
Command times: header stamp when non-zero and the time base is the header, else log time (a zero
stamp means "now" in ROS). ``time`` starts at 0 at the first kept sample; the absolute origin
(UNIX s) is ``setup.extra["time_origin_unix_s"]``.

One joint gives the single-joint channels (``position``, ``position_target``, ``velocity``,
``effort``); several give ``<channel>/<joint>`` with ``setup.extra["joints"]`` and, when the joint
names are those of a bundled robot config (or ``"robot"`` is given), ``setup.extra["robot"]``.

The optional mapping (``--mapping FILE`` or ``<stem>.mapping.json`` beside the bag) is a JSON
object with ``"format": "actuatorlab-mcap-mapping"`` and any of: ``state_topic``,
``command_topic`` (``null`` for none), ``command_joints``, ``enable_topic`` (``std_msgs/Bool``,
torque on/off, held onto the states like the commands), ``joints`` (keep only these; state
messages lacking one are skipped and counted), ``joint_types`` (joint -> revolute | prismatic),
``time``, ``robot``, ``setup`` (as for CSV), ``conditions``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from actuatorlab.errors import DataError
from actuatorlab.logs.format import Channel, Kind, Trajectory
from actuatorlab.logs.checks import find_mapping, setup_from_doc, zoh_indices
from ...robots import CONFIG_DIR, list_robots

__all__ = ["MCAP_MAGIC", "MCAP_MAPPING_FORMAT", "MSGDEFS", "is_mcap_file", "load_mcap", "write_joint_bag", "JointBag",
           "robot_for_joints"]

#: first bytes of every MCAP file.
MCAP_MAGIC = b"\x89MCAP0\r\n"
MCAP_MAPPING_FORMAT = "actuatorlab-mcap-mapping"

_JOINT_STATE = "sensor_msgs/msg/JointState"
_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
_MULTIARRAY = "std_msgs/msg/Float64MultiArray"
_BOOL = "std_msgs/msg/Bool"
_COMMAND_TYPES = (_TRAJECTORY, _MULTIARRAY, _JOINT_STATE)
_MAPPING_KEYS = {"format", "format_version", "description", "state_topic", "command_topic", "command_joints",
                 "enable_topic",
                 "joints", "joint_types", "time", "robot", "setup", "conditions"}

_SEP = "=" * 80
_HEADER = f"""{_SEP}
MSG: std_msgs/Header
builtin_interfaces/Time stamp
string frame_id
{_SEP}
MSG: builtin_interfaces/Time
int32 sec
uint32 nanosec
"""
#: ROS 2 message definitions (with their dependencies) used by :func:`write_joint_bag`.
MSGDEFS: dict[str, str] = {
    _JOINT_STATE: "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\n"
                  "float64[] effort\n" + _HEADER,
    _TRAJECTORY: "std_msgs/Header header\nstring[] joint_names\nJointTrajectoryPoint[] points\n" + _HEADER
                 + f"{_SEP}\nMSG: trajectory_msgs/JointTrajectoryPoint\nfloat64[] positions\nfloat64[] velocities\n"
                   "float64[] accelerations\nfloat64[] effort\nbuiltin_interfaces/Duration time_from_start\n"
                   f"{_SEP}\nMSG: builtin_interfaces/Duration\nint32 sec\nuint32 nanosec\n",
    _BOOL: "bool data\n",
    _MULTIARRAY: "std_msgs/MultiArrayLayout layout\nfloat64[] data\n"
                 f"{_SEP}\nMSG: std_msgs/MultiArrayLayout\nMultiArrayDimension[] dim\nuint32 data_offset\n"
                 f"{_SEP}\nMSG: std_msgs/MultiArrayDimension\nstring label\nuint32 size\nuint32 stride\n",
}


def is_mcap_file(head: bytes) -> bool:
    """Whether the first bytes of a file are the MCAP magic."""
    return head.startswith(MCAP_MAGIC)


def _need_mcap(path: Path) -> Any:
    try:
        from mcap.reader import NonSeekingReader
        from mcap_ros2.decoder import DecoderFactory
    except ImportError:
        raise DataError(path, "reading MCAP bags needs the optional packages mcap and mcap-ros2-support "
                              "(pip install 'actuatorlab[mcap]')") from None
    return NonSeekingReader, DecoderFactory


def robot_for_joints(joints: list[str]) -> str | None:
    """The bundled robot config whose joint names include every name of ``joints`` (None if no
    single one does). Where several do, the ones with a ``mechanisms`` section are left out: such a
    config is a variant of a robot whose servo drives a joint through a linkage (its crank is no
    joint of the robot's description, which a ROS log names), e.g. ``open_manipulator_x_crank``
    beside ``open_manipulator_x`` for a log of the arm's joints."""

    hits, plain = [], []
    for name in list_robots():
        try:
            cfg = json.loads((Path(CONFIG_DIR) / f"{name}.json").read_text())
        except (OSError, ValueError):
            continue
        if set(joints) <= set(cfg.get("joints", {})):
            hits.append(name)
            if not cfg.get("mechanisms"):
                plain.append(name)
    if len(hits) > 1:
        hits = plain
    return hits[0] if len(hits) == 1 else None


def _stamp(msg: Any) -> int:
    """Header stamp [ns] (integer: float seconds since 1970 would lose sub-microsecond steps)."""
    st = msg.header.stamp
    return int(st.sec) * 1_000_000_000 + int(st.nanosec)


def _read(path: Path) -> dict[str, list[tuple[str, Any, int]]]:
    """topic -> [(schema name, decoded message, log_time ns)] in file order."""
    NonSeekingReader, DecoderFactory = _need_mcap(path)
    topics: dict[str, list[tuple[str, Any, int]]] = {}
    try:
        with open(path, "rb") as f:
            reader = NonSeekingReader(f, validate_crcs=True, decoder_factories=[DecoderFactory()],
                                      record_size_limit=64 * 1024 * 1024)
            for schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=False):
                name = schema.name if schema is not None else ""
                topics.setdefault(channel.topic, []).append((name, decoded, int(message.log_time)))
    except DataError:
        raise
    except MemoryError:
        raise DataError(path, "unreadable MCAP bag: a record claims more memory than is available") from None
    except Exception as e:  # mcap raises EndOfFile, McapError, struct/Unicode/Value errors on corrupt bags
        msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
        kind = "truncated or corrupt" if type(e).__name__ in ("EndOfFile", "error") else "unreadable"
        raise DataError(path, f"{kind} MCAP bag ({type(e).__name__}{': ' + msg if msg else ''})") from None
    return topics


def _pick_topic(path: Path, topics: dict, want: str | None, types: tuple[str, ...], what: str,
                required: bool) -> str | None:
    typed = {t: msgs[0][0] for t, msgs in topics.items() if msgs}
    if want is not None:
        if want not in topics:
            raise DataError(path, f"{what} topic {want!r} is not in the bag (topics: "
                                  f"{', '.join(f'{t} [{s}]' for t, s in sorted(typed.items())) or 'none'})")
        if typed[want] not in types:
            raise DataError(path, f"{what} topic {want!r} has type {typed[want]}, expected {' or '.join(types)}")
        return want
    cands = sorted(t for t, s in typed.items() if s in types)
    if len(cands) == 1:
        return cands[0]
    if not cands and not required:
        return None
    listing = ", ".join(f"{t} [{s}]" for t, s in sorted(typed.items())) or "none"
    if not cands:
        raise DataError(path, f"no {what} topic ({' or '.join(types)}) in the bag (topics: {listing})")
    raise DataError(path, f"several {what} topics ({', '.join(cands)}): name one with "
                          f"\"{'state_topic' if what == 'state' else 'command_topic'}\" in the mapping")


def _vec(path: Path, values: Any, n: int, field: str, i: int, topic: str) -> np.ndarray | None:
    arr = np.asarray(values, dtype=np.float64).ravel() if values is not None else np.zeros(0)
    if arr.size == 0:
        return None
    if arr.size != n:
        raise DataError(path, f"{topic} message {i}: {field} has {arr.size} values for {n} joint names")
    return arr


def _state_rows(path: Path, where: Any, doc: dict, msgs: list, st_topic: str,
                warnings: list[str]) -> tuple[list[str], list[tuple[int, int, dict[str, np.ndarray | None]]]]:
    """(joints, rows): the selected joints and, per kept state message, (stamp, log time, values)."""
    first_names = [str(n) for n in msgs[0][1].name]
    joints = doc.get("joints", first_names)
    if not isinstance(joints, list) or not joints or not all(isinstance(j, str) for j in joints):
        raise DataError(where, "'joints' must be a non-empty list of joint names")
    if len(set(joints)) != len(joints):
        raise DataError(path, f"{st_topic}: duplicate joint names {joints}")
    rows: list[tuple[int, int, dict[str, np.ndarray | None]]] = []
    skipped = 0
    for i, (_, m, log_ns) in enumerate(msgs):
        names = [str(n) for n in m.name]
        if len(set(names)) != len(names):
            raise DataError(path, f"{st_topic} message {i}: duplicate joint names {names}")
        if not set(joints) <= set(names):
            if "joints" in doc:
                skipped += 1
                continue
            raise DataError(path, f"{st_topic} message {i} lists joints {names}, message 0 lists {first_names}; "
                                  "choose the joints with \"joints\" in the mapping")
        idx = [names.index(j) for j in joints]
        vals = {}
        for field in ("position", "velocity", "effort"):
            v = _vec(path, getattr(m, field), len(names), field, i, st_topic)
            vals[field] = None if v is None else v[idx]
        if vals["position"] is None:
            raise DataError(path, f"{st_topic} message {i} has no position values")
        rows.append((_stamp(m), log_ns, vals))
    if skipped:
        warnings.append(f"{skipped} {st_topic} message(s) lacked one of the selected joints and were skipped")
    if not rows:
        raise DataError(path, f"no {st_topic} message lists all of the joints {joints}")
    return joints, rows


def _commands(path: Path, where: Any, doc: dict, cmsgs: list, cmd_topic: str, st_topic: str,
              joints: list[str], base: str, warnings: list[str]) -> tuple[np.ndarray, np.ndarray, str]:
    """(times [ns] (C,), targets (C, n_joints), source text) of the command topic, sorted by time."""
    ctype = cmsgs[0][0]
    order = doc.get("command_joints")
    if order is not None and (not isinstance(order, list) or not all(isinstance(j, str) for j in order)):
        raise DataError(where, "'command_joints' must be a list of joint names")
    ts, qs = [], []
    for i, (_, m, log_ns) in enumerate(cmsgs):
        cnames: list[str] | None
        if ctype == _MULTIARRAY:
            cvals = np.asarray(m.data, dtype=np.float64).ravel()
            cnames = order
            if cnames is None:
                if cvals.size != len(joints):
                    raise DataError(path, f"{cmd_topic} message {i} has {cvals.size} values for "
                                          f"{len(joints)} joints: give \"command_joints\" in the mapping")
                cnames = joints
            if cvals.size != len(cnames):
                raise DataError(path, f"{cmd_topic} message {i} has {cvals.size} values, "
                                      f"command_joints names {len(cnames)}")
            t_c = log_ns
        else:
            cnames = [str(x) for x in (m.joint_names if ctype == _TRAJECTORY else m.name)]
            if ctype == _TRAJECTORY:
                if not m.points:
                    raise DataError(path, f"{cmd_topic} message {i} has no trajectory point")
                cvals = np.asarray(m.points[0].positions, dtype=np.float64).ravel()
            else:
                cvals = np.asarray(m.position, dtype=np.float64).ravel()
            if cvals.size != len(cnames):
                raise DataError(path, f"{cmd_topic} message {i}: {cvals.size} positions for "
                                      f"{len(cnames)} joint names")
            s = _stamp(m)
            t_c = s if (base == "header" and s > 0) else log_ns
        missing = [j for j in joints if j not in cnames]
        if missing:
            raise DataError(path, f"{cmd_topic} message {i} has no command for joint(s) {', '.join(missing)}")
        ts.append(t_c)
        qs.append([cvals[list(cnames).index(j)] for j in joints])
    cmd_t, cmd_q = np.array(ts, dtype=np.int64), np.array(qs, dtype=np.float64).reshape(len(ts), len(joints))
    o = np.argsort(cmd_t, kind="stable")
    cmd_t, cmd_q = cmd_t[o], cmd_q[o]
    if ctype == _MULTIARRAY and order is None:
        warnings.append(f"{cmd_topic} (Float64MultiArray) carries no joint names: assumed the order of "
                        f"{st_topic} ({', '.join(joints)}); give \"command_joints\" to be sure")
    if ctype == _TRAJECTORY and any(len(m.points) > 1 for _, m, _ in cmsgs):
        warnings.append(f"{cmd_topic}: only the first point of each JointTrajectory is used")
    clock = "header stamp (log time where the stamp is zero)" if base == "header" and ctype != _MULTIARRAY \
        else "log time"
    cmd_src = (f"{cmd_topic} [{ctype}] at its {clock}, zero-order hold onto the {st_topic} time base "
               "(last command at or before each state sample)")
    return cmd_t, cmd_q, cmd_src


def _enable(path: Path, topics: dict, doc: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """Torque enable (std_msgs/Bool on "enable_topic": true = torque on): (log times [ns], 0/1), sorted."""
    if doc.get("enable_topic") is None:
        return None
    e_topic = _pick_topic(path, topics, doc["enable_topic"], (_BOOL,), "enable", True)
    assert e_topic is not None  # required: _pick_topic raises rather than return None
    emsgs = topics[e_topic]
    en_t = np.array([log_ns for _, _, log_ns in emsgs], dtype=np.int64)
    en_v = np.array([1.0 if bool(m.data) else 0.0 for _, m, _ in emsgs])
    o = np.argsort(en_t, kind="stable")
    return en_t[o], en_v[o]


def _parse_mapping(path: Path, mapping: Any) -> tuple[dict, Any, str]:
    """(mapping doc, where it came from, time mode) checked for unknown keys."""
    doc, where = find_mapping(mapping, fmt=MCAP_MAPPING_FORMAT, kind="an MCAP mapping", where=path,
                              default=path.with_name(path.stem + ".mapping.json"), missing=path,
                              given_for=path.name)
    bad = set(doc) - _MAPPING_KEYS
    if bad:
        raise DataError(where, f"unknown mapping key(s) {', '.join(sorted(bad))} (allowed: "
                               f"{', '.join(sorted(_MAPPING_KEYS))})")
    time_mode = doc.get("time", "auto")
    if time_mode not in ("auto", "header", "log"):
        raise DataError(where, f"'time' must be auto, header or log, got {time_mode!r}")
    return doc, where, time_mode


def _topics(path: Path, topics: dict, doc: dict) -> tuple[str, str | None]:
    """(state topic, command topic or None) chosen by the mapping or by message type."""
    st_topic = _pick_topic(path, topics, doc.get("state_topic"), (_JOINT_STATE,), "state", True)
    assert st_topic is not None  # required: _pick_topic raises rather than return None
    cmd_topic = None
    if doc.get("command_topic", "auto") not in (None, "auto"):
        cmd_topic = _pick_topic(path, topics, doc["command_topic"], _COMMAND_TYPES, "command", True)
    elif "command_topic" not in doc or doc["command_topic"] == "auto":
        cmd_topic = _pick_topic(path, {t: m for t, m in topics.items() if t != st_topic}, None,
                                (_TRAJECTORY, _MULTIARRAY), "command", False)
    return st_topic, cmd_topic


def _joint_channels(joints: list[str], jtypes: dict, rows: list, kept: np.ndarray, st_topic: str, lat: float,
                    target: tuple[np.ndarray, np.ndarray, str] | None, t_kept: np.ndarray,
                    data: dict[str, np.ndarray], channels: dict[str, Channel]) -> None:
    """Fill ``data`` / ``channels`` with each joint's target, position, velocity and effort."""
    single = len(joints) == 1
    for k, j in enumerate(joints):
        jt = jtypes.get(j, "revolute")
        u = {"q": "rad", "dq": "rad/s", "f": "N.m"} if jt == "revolute" else {"q": "m", "dq": "m/s", "f": "N"}
        sfx = "" if single else f"/{j}"
        if target is not None:
            cmd_t, cmd_q, cmd_src = target
            ix = zoh_indices(cmd_t, t_kept)
            data[f"position_target{sfx}"] = cmd_q[np.clip(ix, 0, None), k]
            channels[f"position_target{sfx}"] = Channel(u["q"], "commanded", "output", source=cmd_src)
        fields: tuple[tuple[str, str, Kind], ...] = (
            ("position", "position", "measured"), ("velocity", "velocity", "estimated"), ("effort", "effort", "measured"))
        for field, name, kind in fields:
            col = np.array([np.nan if (vec := r[2][field]) is None else vec[k] for r in rows])[kept]
            if field != "position" and np.all(np.isnan(col)):
                continue
            unit = {"position": u["q"], "velocity": u["dq"], "effort": u["f"]}[field]
            data[f"{name}{sfx}"] = col
            channels[f"{name}{sfx}"] = Channel(
                unit, kind, "output", source=f"{st_topic} [{_JOINT_STATE}] {field}[{j!r}]", latency_s=lat,
                description="as published by the driver (REP 103 SI units)")


def load_mcap(path: str | Path, mapping: str | Path | dict[str, Any] | None = None) -> Trajectory:
    """Read a ROS 2 MCAP bag as a :class:`Trajectory` (no validation here; see the module doc)."""
    path = Path(path)
    doc, where, time_mode = _parse_mapping(path, mapping)
    topics = _read(path)
    if not topics:
        raise DataError(path, "the bag holds no messages")
    st_topic, cmd_topic = _topics(path, topics, doc)
    warnings: list[str] = []
    joints, rows = _state_rows(path, where, doc, topics[st_topic], st_topic, warnings)
    stamps = np.array([r[0] for r in rows], dtype=np.int64)  # [ns]
    log_t = np.array([r[1] for r in rows], dtype=np.int64)  # [ns]
    has_stamps = bool(np.all(stamps > 0))
    if time_mode == "header" and not has_stamps:
        raise DataError(path, f"{st_topic}: {int(np.sum(stamps <= 0))} message(s) have a zero header stamp; "
                              "use \"time\": \"log\" in the mapping")
    base = "header" if (time_mode == "header" or (time_mode == "auto" and has_stamps)) else "log"
    t_abs = stamps if base == "header" else log_t
    n = len(rows)
    target = None if cmd_topic is None else _commands(path, where, doc, topics[cmd_topic], cmd_topic, st_topic,
                                                       joints, base, warnings)
    enable = _enable(path, topics, doc)

    # --- keep samples with a known target, sort check left to validation
    start = 0
    if target is not None:  # drop the leading states that precede every command (only a prefix: a
        after = np.flatnonzero(t_abs >= np.min(target[0]))  # stamp going back later stays for validation)
        start = int(after[0]) if after.size else n
        if start:
            warnings.append(f"{start} state sample(s) before the first command were dropped (target unknown)")
    kept = np.arange(start, n)
    if kept.size == 0:
        raise DataError(path, f"no {st_topic} sample at or after the first {cmd_topic} command")
    t0 = int(t_abs[kept[0]])
    time = (t_abs[kept] - t0).astype(np.float64) * 1e-9

    jtypes = doc.get("joint_types", {})
    if not isinstance(jtypes, dict) or not all(v in ("revolute", "prismatic") for v in jtypes.values()):
        raise DataError(where, "'joint_types' must map joint names to revolute or prismatic")
    single = len(joints) == 1
    data: dict[str, np.ndarray] = {}
    channels: dict[str, Channel] = {}
    delay = (log_t - stamps).astype(np.float64) * 1e-9
    lat = float(np.median(delay[kept])) if base == "log" and has_stamps else 0.0
    _joint_channels(joints, jtypes, rows, kept, st_topic, lat, target, t_abs[kept], data, channels)
    if enable is not None:
        en_t, en_v = enable
        ix = zoh_indices(en_t, t_abs[kept])
        en = np.where(ix >= 0, en_v[np.clip(ix, 0, None)], 1.0)  # before the first message: on (assumed)
        for j in joints:
            name = "torque_enable" if single else f"torque_enable/{j}"
            data[name] = en.copy()
            channels[name] = Channel("bool", "commanded", "none",
                                     source=f"{doc['enable_topic']} [{_BOOL}] at its log time, zero-order hold "
                                            "(on before its first message)")
    if has_stamps:
        data["receive_delay"] = delay[kept]
        channels["receive_delay"] = Channel(
            "s", "measured", "none", source=f"{st_topic}: MCAP log_time - header.stamp",
            description="transport + recording delay of each state message; negative = clocks disagree")

    robot = doc.get("robot")
    if robot is None and not single:
        robot = robot_for_joints(list(joints))
    extra: dict[str, Any] = {"source_format": "mcap_ros2", "state_topic": st_topic, "command_topic": cmd_topic,
                             "time_base": base, "time_origin_unix_s": t0 * 1e-9}
    if not single:
        extra["joints"] = list(joints)
        if robot is not None:
            extra["robot"] = str(robot)
    if warnings:
        extra["warnings"] = warnings
    jt_single = jtypes.get(joints[0], "revolute") if single else None
    setup = setup_from_doc(where, doc.get("setup"), extra, joint_type=jt_single)
    cond = doc.get("conditions", {})
    if not isinstance(cond, dict):
        raise DataError(where, "'conditions' must be an object")
    conditions = {"load": "unknown", "gain": "unknown", "excitation": "unknown", "session": path.stem}
    conditions.update({str(k): str(v) for k, v in cond.items()})
    return Trajectory(name=path.stem, time=time, data=data, channels=channels, setup=setup,
                      conditions=conditions, source_file=str(path))


# ----------------------------------------------------------------------------------------------
# Writing (tests, benchmarks, replayable command bags)
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class JointBag:
    """What :func:`write_joint_bag` writes: a JointState topic and, optionally, commands and enable.

    Fields:
        joints: joint names (n,).
        stamps: (T,) [s] header stamps of the states, relative to ``t0_unix`` (None: unstamped, i.e.
            zero stamps, as some drivers publish; ``log_times`` then required).
        position, velocity, effort: (T, n) SI values (velocity/effort None: empty arrays).
        log_times: (T,) [s] receive times (default: the stamps).
        commands: (K, n) position targets [rad | m], sent at ``command_times`` (K,) [s].
        command_type: "trajectory" (JointTrajectory, header stamped) or "multiarray" (Float64MultiArray).
        enable, enable_times: (E,) torque enable (0/1) published on ``enable_topic`` (std_msgs/Bool)
            at (E,) [s].
        state_topic, command_topic: topic names.
        t0_unix: [s] Unix time of stamp 0.
    """

    joints: list[str]
    stamps: np.ndarray | None
    position: np.ndarray
    velocity: np.ndarray | None = None
    effort: np.ndarray | None = None
    log_times: np.ndarray | None = None
    commands: np.ndarray | None = None
    command_times: np.ndarray | None = None
    command_type: str = "trajectory"
    enable: np.ndarray | None = None
    enable_times: np.ndarray | None = None
    enable_topic: str = "/torque_enable"
    state_topic: str = "/joint_states"
    command_topic: str = "/joint_commands"
    t0_unix: float = 1.7e9


def write_joint_bag(path: str | Path, bag: JointBag) -> Path:
    """Write ``bag`` (see :class:`JointBag`) as a ROS 2 MCAP bag at ``path``.

    The file is written to a temporary name and moved into place.
    """
    import os
    import tempfile

    from mcap_ros2.writer import Writer

    path = Path(path)
    b = bag
    stamps, joints, position, velocity, effort = b.stamps, b.joints, b.position, b.velocity, b.effort
    commands, command_times, enable, enable_times = b.commands, b.command_times, b.enable, b.enable_times
    log_times = stamps if b.log_times is None else b.log_times
    if log_times is None:
        raise ValueError("write_joint_bag: unstamped states need log_times")
    base_ns = int(round(b.t0_unix * 1e9))
    ns = lambda s: base_ns + int(round(float(s) * 1e9))  # noqa: E731

    def tmsg(s: float) -> dict:
        v = ns(s)
        return {"sec": v // 1_000_000_000, "nanosec": v % 1_000_000_000}

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            w = Writer(f)
            js = w.register_msgdef(_JOINT_STATE, MSGDEFS[_JOINT_STATE])
            events: list[tuple[int, str, Any, dict[str, Any]]] = []  # (log time [ns], topic, schema, message)
            for i in range(len(log_times)):
                stamp = {"sec": 0, "nanosec": 0} if stamps is None else tmsg(stamps[i])
                msg = {"header": {"stamp": stamp, "frame_id": ""}, "name": list(joints),
                       "position": [float(x) for x in position[i]],
                       "velocity": [] if velocity is None else [float(x) for x in velocity[i]],
                       "effort": [] if effort is None else [float(x) for x in effort[i]]}
                events.append((ns(log_times[i]), b.state_topic, js, msg))
            if commands is not None:
                if command_times is None:
                    raise ValueError("write_joint_bag: commands need command_times")
                ctype = {"trajectory": _TRAJECTORY, "multiarray": _MULTIARRAY}[b.command_type]
                cs = w.register_msgdef(ctype, MSGDEFS[ctype])
                for k in range(len(command_times)):
                    q = [float(x) for x in commands[k]]
                    if ctype == _TRAJECTORY:
                        msg = {"header": {"stamp": tmsg(command_times[k]), "frame_id": ""},
                               "joint_names": list(joints),
                               "points": [{"positions": q, "velocities": [], "accelerations": [], "effort": [],
                                           "time_from_start": {"sec": 0, "nanosec": 0}}]}
                    else:
                        msg = {"layout": {"dim": [], "data_offset": 0}, "data": q}
                    events.append((ns(command_times[k]), b.command_topic, cs, msg))
            if enable is not None:
                if enable_times is None:
                    raise ValueError("write_joint_bag: enable needs enable_times")
                bs = w.register_msgdef(_BOOL, MSGDEFS[_BOOL])
                for k in range(len(enable_times)):
                    events.append((ns(enable_times[k]), b.enable_topic, bs, {"data": bool(enable[k] > 0.5)}))
            events.sort(key=lambda e: e[0])
            for log_ns, topic, schema, msg in events:
                w.write_message(topic, schema, msg, log_time=log_ns, publish_time=log_ns)
            w.finish()
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path

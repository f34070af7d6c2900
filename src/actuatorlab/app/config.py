"""Typed job configs from JSON files: ``actuatorlab COMMAND --config FILE``.

A config file is a JSON object with the job dataclass's fields (same names; a nested dataclass is a
nested object, a tuple a list, a path a string). :func:`build_job` reads it, lays the flags given on
the command line over it and builds the frozen job; an unknown key, a value of the wrong type or a
missing required field is one line naming the file and the key. :func:`job_to_json` writes a job
back, so that ``--config`` reproduces a run.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from pathlib import Path
from typing import Any, Mapping

from ..errors import ActuatorlabError
from ..files import read_json

_MISSING = dataclasses.MISSING


def _kind(tp: Any) -> str:
    """A readable name of a field's type for the error line."""
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _convert(tp: Any, value: Any, where: str) -> Any:
    """``value`` (JSON) as a value of type ``tp``; ActuatorlabError naming ``where`` ("FILE: 'key'")
    when it is not one."""
    origin = typing.get_origin(tp)
    if tp is Any or tp is object:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(a, value, where)
            except ActuatorlabError:
                pass
        raise ActuatorlabError(f"{where}: expected {' | '.join(_kind(a) for a in args)}, got {json.dumps(value)}")
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ActuatorlabError(f"{where}: expected an object of {tp.__name__}'s fields, got {json.dumps(value)}")
        file, _, key = where.partition(": ")
        return _build(tp, dict(value), file, key.strip("'") + ".")
    if origin in (tuple, list) or tp in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ActuatorlabError(f"{where}: expected a list, got {json.dumps(value, default=str)}")
        item_types = [a for a in typing.get_args(tp) if a is not Ellipsis]
        item = item_types[0] if item_types else Any
        items: list[Any] = [_convert(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin or tp) is tuple else items
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise ActuatorlabError(f"{where}: expected an object, got {json.dumps(value, default=str)}")
        return dict(value)
    ok = {bool: lambda v: isinstance(v, bool),
          int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: lambda v: isinstance(v, str),
          Path: lambda v: isinstance(v, (str, Path))}.get(tp)
    if ok is None:
        return value
    if not ok(value):
        raise ActuatorlabError(f"{where}: expected {_kind(tp)}, got {json.dumps(value, default=str)}")
    return Path(value) if tp is Path else (float(value) if tp is float else value)


def _build(cls: type, values: dict, where: str, prefix: str = "") -> Any:
    """``cls(**values)`` with every value checked and converted; ``where`` names the file and
    ``prefix`` the enclosing keys ("options.") in the error line."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for k in values:
        if k not in fields:
            raise ActuatorlabError(f"{where}: unknown key {prefix + k!r} ({cls.__name__} has: {', '.join(fields)})")
    kw = {}
    for name, f in fields.items():
        if name in values:
            kw[name] = _convert(hints[name], values[name], f"{where}: {prefix + name!r}")
        elif f.default is _MISSING and f.default_factory is _MISSING:
            raise ActuatorlabError(f"{where}: missing required field {prefix + name!r} of {cls.__name__}")
    return cls(**kw)


def _set(tree: dict, dotted: str, value: Any) -> None:
    """tree[a][b] = value for ``dotted`` = "a.b" (nested objects created as needed)."""
    *parents, leaf = dotted.split(".")
    for p in parents:
        tree = tree.setdefault(p, {})
        if not isinstance(tree, dict):
            raise ActuatorlabError(f"{dotted}: {p!r} is not an object")
    tree[leaf] = value


def build_job(cls: type, config: str | Path | None, flags: Mapping[str, Any]) -> Any:
    """The job ``cls`` from the JSON object in ``config`` (None: no file) with ``flags`` laid over
    it ({field or "nested.field": value}, only the flags given on the command line)."""
    values: dict = {}
    if config is not None:
        values = read_json(config, ActuatorlabError, "no such config file")
        if not isinstance(values, dict):
            raise ActuatorlabError(f"{config}: a config file holds one JSON object of {cls.__name__}'s fields")
    values = json.loads(json.dumps(values))  # a private copy
    for k, v in flags.items():
        _set(values, k, list(v) if isinstance(v, tuple) else v)
    return _build(cls, values, str(config) if config is not None else f"{cls.__name__} (command line)")


def _plain(x: Any) -> Any:
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x) if f.init}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, Path):
        return str(x)
    return x


def job_to_json(job: Any) -> dict:
    """The JSON object of a job: what ``--config`` reads back into the same job."""
    return _plain(job)

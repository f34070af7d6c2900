"""Errors that the CLI turns into one clear line (file + problem), never a traceback."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ActuatorlabError", "DataError", "ModelError", "UnknownNameError"]


class ActuatorlabError(Exception):
    """Base class of every error the CLI reports as a one-line message with a non-zero exit."""


class DataError(ActuatorlabError):
    """A log file is unusable: names the file and the problem.

    >>> str(DataError("logs/a.json", "timestamps are not increasing at sample 12"))
    'logs/a.json: timestamps are not increasing at sample 12'
    """

    def __init__(self, path: str | Path | None, problem: str):
        self.path = None if path is None else str(path)
        self.problem = problem
        super().__init__(problem if path is None else f"{path}: {problem}")


class ModelError(ActuatorlabError):
    """A model file or parameter set is unusable (bad json, missing parameter, wrong version)."""


class UnknownNameError(ActuatorlabError, KeyError):
    """A registry lookup failed; the message lists every name that exists."""

    def __init__(self, kind: str, name: str, available: list[str] | tuple[str, ...]):
        self.kind, self.name, self.available = kind, name, tuple(available)
        super().__init__(f"unknown {kind} {name!r}; available: {', '.join(sorted(available))}")

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]

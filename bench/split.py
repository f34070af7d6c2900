"""Deterministic train / held-out split of the 11 real XL330 pendulum logs.

Both benchmark peers (BAM, MuJoCo sysid) and actuatorlab's own fitter fit on
``train`` and report their error on ``heldout``.  This file uses the standard
library only, so that every virtual environment of the bench (Python 3.11 or
3.12) can import it or run it.

Rule (no randomness, derived from the logs' own ``kp`` and ``trajectory``
fields, so it does not depend on file order or on a seed):

1. Group the logs by trajectory family (``lift_and_drop``, ``sin_sin``,
   ``sin_time_square``, ``up_and_down``).
2. Hold out exactly one log per family, each at a *different* gain ``kp``
   (a one-to-one family -> gain matching, so the held-out set is balanced over
   the gains), and keep at least one training log of every family and of every
   gain.
3. Among all matchings that satisfy 2, take the lexicographically smallest
   tuple of gains, families taken in alphabetical order.

On the 11 shared logs this gives four held-out logs: lift_and_drop at kp 100,
sin_sin at kp 200, up_and_down at kp 400, sin_time_square at kp 800; seven
logs train.  The file names are the same in ``raw/`` and ``processed/``.

Other splits by condition (``--holdout KEY=VALUE``, also ``make_split(holdout=...)``): hold out
*every* log whose ``trajectory`` or ``kp`` equals VALUE (a whole excitation family or a whole
gain), train on all the others. ``trajectory=sin_time_square`` holds out that family's three logs
(kp 100, 200, 800), so every gain stays in training but the excitation is new.

Run ``python bench/split.py [--holdout trajectory=sin_time_square]`` to print the split as JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
#: the shared data folder: beside the checkout, or $ACTUATORLAB_SHARED (e.g. for a git worktree elsewhere)
SHARED_DIR = Path(os.environ.get("ACTUATORLAB_SHARED", REPO_ROOT.parent / "shared"))
DEFAULT_DATA_DIR = SHARED_DIR / "data" / "bam" / "xl330"

RULE = (
    "hold out one log per trajectory family, each at a different kp "
    "(one-to-one family->gain matching), keeping >=1 training log per family "
    "and per gain; among valid matchings take the lexicographically smallest "
    "gain tuple with families in alphabetical order"
)


def read_meta(processed_dir: Path) -> dict[str, dict]:
    """Return ``{file name: {"kp": int, "trajectory": str}}`` for every log.

    Raises ``FileNotFoundError`` naming the folder when it holds no log.
    """
    files = sorted(processed_dir.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"{processed_dir}: no *.json log found")
    meta = {}
    for path in files:
        with open(path) as f:
            data = json.load(f)
        for key in ("kp", "trajectory"):
            if key not in data:
                raise ValueError(f"{path}: missing top-level key {key!r}")
        meta[path.name] = {"kp": int(data["kp"]), "trajectory": str(data["trajectory"])}
    return meta


def choose_heldout(meta: dict[str, dict]) -> list[str]:
    """Apply the documented rule to ``meta`` and return the held-out names, sorted."""
    by_cell: dict[tuple[str, int], list[str]] = {}
    for name, m in meta.items():
        by_cell.setdefault((m["trajectory"], m["kp"]), []).append(name)
    families = sorted({m["trajectory"] for m in meta.values()})
    gains = sorted({m["kp"] for m in meta.values()})
    if len(gains) < len(families):
        raise ValueError("fewer gains than trajectory families: no balanced matching")
    for chosen in itertools.permutations(gains, len(families)):
        cells = list(zip(families, chosen))
        if not all(cell in by_cell for cell in cells):
            continue
        # the first file (by name) of each chosen cell is held out
        held = {sorted(by_cell[cell])[0] for cell in cells}
        train = [n for n in meta if n not in held]
        if {meta[n]["trajectory"] for n in train} != set(families):
            continue
        if {meta[n]["kp"] for n in train} != set(gains):
            continue
        return sorted(held)
    raise ValueError("no family->gain matching satisfies the split rule")


def parse_holdout(holdout: str) -> tuple[str, str]:
    """``"trajectory=sin_sin"`` or ``"kp=800"`` -> (key, value); raises ValueError naming the problem."""
    key, sep, value = holdout.partition("=")
    if not sep or key not in ("trajectory", "kp") or not value:
        raise ValueError(f"--holdout {holdout!r}: expected trajectory=FAMILY or kp=GAIN")
    return key, value


def make_split(data_dir: Path = DEFAULT_DATA_DIR, holdout: str | None = None) -> dict:
    """Return the split as a JSON-ready dict.

    ``holdout`` None: the balanced rule above. ``"trajectory=FAMILY"`` / ``"kp=GAIN"``: every log of
    that family / gain is held out (a split by condition); ``name`` says which.

    Keys: ``rule`` (str), ``data_dir`` (str, relative to the repo root), ``train`` / ``heldout``
    (sorted file names), ``meta`` (``{name: {"kp", "trajectory", "set"}}``).
    ``data_dir`` holds ``raw/`` and ``processed/``.
    """
    data_dir = Path(data_dir)
    meta = read_meta(data_dir / "processed")
    if holdout is None:
        heldout, rule, split_name = choose_heldout(meta), RULE, "balanced"
    else:
        key, value = parse_holdout(holdout)
        heldout = sorted(n for n, m in meta.items() if str(m[key]) == value)
        if not heldout or len(heldout) == len(meta):
            raise ValueError(f"--holdout {holdout!r}: holds out {len(heldout)} of {len(meta)} logs")
        rule, split_name = f"hold out every log with {key} = {value}", holdout
    train = sorted(n for n in meta if n not in heldout)
    for name in meta:
        meta[name]["set"] = "heldout" if name in heldout else "train"
    return {
        "name": split_name,
        "rule": rule,
        "data_dir": os.path.relpath(data_dir, REPO_ROOT),
        "train": train,
        "heldout": heldout,
        "meta": meta,
    }


def split_paths(data_dir: Path = DEFAULT_DATA_DIR, kind: str = "processed",
                holdout: str | None = None) -> tuple[list[Path], list[Path]]:
    """Return ``(train paths, held-out paths)`` inside ``data_dir / kind``."""
    split = make_split(data_dir, holdout)
    base = Path(data_dir) / kind
    return [base / n for n in split["train"]], [base / n for n in split["heldout"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help="folder holding raw/ and processed/ (default: ../shared/data/bam/xl330)")
    parser.add_argument("--holdout", default=None,
                        help="trajectory=FAMILY or kp=GAIN: hold out that whole condition instead")
    args = parser.parse_args(argv)
    json.dump(make_split(args.data_dir, args.holdout), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

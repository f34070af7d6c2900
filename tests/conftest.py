"""Shared fixtures: the shared data folder (skip cleanly when absent) and small synthetic logs."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared() -> Path:
    if not (SHARED / "data").is_dir():
        pytest.skip("../shared is not present")
    return SHARED


@pytest.fixture(scope="session")
def example_dir() -> Path:
    return ROOT / "src" / "actuatorlab" / "examples" / "bam_xl330"

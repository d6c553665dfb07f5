"""Shared fixtures."""

from __future__ import annotations

import pytest

from commmodel.io.profiles import load_system


@pytest.fixture(scope="session")
def dgx_h100():
    """The shipped DGX H100 profile."""
    return load_system("dgx-h100")

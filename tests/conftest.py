"""Shared fixtures."""

from __future__ import annotations

import pytest
from hypothesis import settings

from commmodel.io.profiles import load_system

# Property tests draw the same examples on every run (CI must not go red by chance); run
# ``pytest --hypothesis-profile=explore`` to search with fresh random examples.
settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("deterministic")


@pytest.fixture(scope="session")
def dgx_h100():
    """The shipped DGX H100 profile."""
    return load_system("dgx-h100")

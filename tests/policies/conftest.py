"""Fixtures for policy tests: the real embedded model, loaded once per test session."""

from __future__ import annotations

import pytest

from genmem.policies.local import LocalPolicy, load_policy


@pytest.fixture(scope="session")
def default_policy() -> LocalPolicy:
    """The embedded SmolLM2 (shared with every other user of the default in this process)."""
    return load_policy()

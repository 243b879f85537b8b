"""Fixtures shared by the environment and evaluation tests."""

from __future__ import annotations

from typing import Any

import matplotlib.axes
import pytest


@pytest.fixture
def errorbars(monkeypatch) -> list[dict[str, Any]]:
    """Every error bar drawn, as the keyword arguments matplotlib got."""
    drawn: list[dict[str, Any]] = []
    real = matplotlib.axes.Axes.errorbar

    def spy(self, x, y, *args, **kwargs):
        drawn.append({"x": list(x), "y": list(y), "yerr": kwargs.get("yerr")})
        return real(self, x, y, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", spy)
    return drawn

"""Helpers shared by the tests of the in-process fake cluster (kubelet, workloads)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

SCALE = 1000.0  # simulated seconds per wall second


def wait_for(predicate: Callable[[], Any], timeout_wall_s: float = 10.0) -> Any:
    """Poll ``predicate`` until it returns something truthy (fail after the wall timeout)."""
    deadline = time.monotonic() + timeout_wall_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.005)
    raise AssertionError("condition not reached in time")

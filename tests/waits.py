"""Calls that must end: each runs in a thread joined within a bound, so a regression that would hang
fails its test instead of the whole run."""
from __future__ import annotations

import threading
from typing import Any, Callable

TIMEOUT = 120   # seconds a test waits for a thread that must finish


def finishes(fn: Callable[..., Any], *args: Any, timeout: float = TIMEOUT) -> Any:
    """``fn(*args)`` in a daemon thread joined within ``timeout`` seconds: its result, or its
    exception raised here."""
    box: dict[str, Any] = {}

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{getattr(fn, '__name__', fn)} did not finish within {timeout} s"
    if "error" in box:
        raise box["error"]
    return box["value"]

"""The memory a block of code needs: the process's peak resident set while it runs.

On Linux, writing ``5`` to ``/proc/self/clear_refs`` resets the peak resident set (``VmHWM`` in
``/proc/self/status``) to the current one, so the peak read after the block is the block's own,
whatever allocated it: NumPy, Python objects or a C library such as CRFsuite. Elsewhere the
figures are NaN.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["PeakMemory", "peak_memory"]

_STATUS = "/proc/self/status"


def _status_mb(field: str) -> float:
    with open(_STATUS) as fh:
        match = re.search(rf"^{field}:\s+(\d+) kB", fh.read(), re.MULTILINE)
    if match is None:
        raise OSError(f"{_STATUS} has no {field}")
    return int(match.group(1)) / 1024.0


@dataclass
class PeakMemory:
    """Filled in when the ``with`` block ends.

    Attributes
    ----------
    peak_mb : float
        The process's peak resident set during the block, in MiB (it includes what the process
        held before: interpreter, libraries, data).
    extra_mb : float
        ``peak_mb`` minus the resident set at the block's start: what the block itself added at
        its peak.
    """

    peak_mb: float = float("nan")
    extra_mb: float = float("nan")


@contextlib.contextmanager
def peak_memory() -> Iterator[PeakMemory]:
    """Measure the peak resident set of the ``with`` block (see the module's docstring)."""
    result = PeakMemory()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        start = _status_mb("VmRSS")
    except OSError:
        yield result
        return
    yield result
    result.peak_mb = _status_mb("VmHWM")
    result.extra_mb = result.peak_mb - start

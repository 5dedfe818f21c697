"""Stub of the compiled Cython module built from _viterbi.pyx, for type checkers: its names are
typed Any (the typed memoryview signatures are in the .pyx)."""
from typing import Any

def __getattr__(name: str) -> Any: ...

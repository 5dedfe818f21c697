"""The experiment suite behind ``slr report``: denoising (Table 1), baselines, Theorem 1.1.

Each experiment module exposes ``run(profile, out_dir, log)`` (computes missing cells,
resuming from the results CSV) and ``write_report(profile, out_dir, meta)`` (markdown + PNG
from the CSV and the per-cell artifacts). :mod:`slr.cli` wires them to the command line.
"""
from slr.reports.profiles import PROFILES, Profile, get_profile

__all__ = ["PROFILES", "Profile", "get_profile"]

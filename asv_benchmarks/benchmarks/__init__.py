"""asv benchmarks for slr (see ``asv_benchmarks/asv.conf.json``; ``make bench`` runs them)."""

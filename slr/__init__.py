"""slr: structured learning via iterated logistic regression (Domke)."""
__version__ = "0.1.0"

from slr.learner import StructuredLogisticRegression

__all__ = ["StructuredLogisticRegression"]

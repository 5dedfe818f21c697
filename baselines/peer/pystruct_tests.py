"""Run pystruct 0.3.2's own test functions in the peer environment; runs INSIDE the peer env.

Executed by the peer environment's CPython 3.6 (``python pystruct_tests.py [module[::test] ...]``),
so it is Python 3.6 code. pystruct's tests use nose, which the environment does not hold: a
stand-in of the few names they import (``nose.SkipTest``, ``nose.tools.assert_*``) is put on the
path, then every ``test_*`` function of the named modules of ``pystruct.tests`` (all of them when
none is named) is called, yield tests case by case. One line per test (``PASS``, ``FAIL``,
``SKIP``, ``ERROR``) and the counts go to stdout; the exit status is 1 when any failed.

Example (the tests behind the port's learner cases)::

    ~/.cache/slr/pystruct-peer/bin/python baselines/peer/pystruct_tests.py \\
        test_learners.test_one_slack_ssvm test_learners.test_subgradient_svm::test_binary_blocks
"""
import importlib
import os
import sys
import tempfile
import traceback
import types
import unittest
import warnings

_NOSE_TOOLS = ("assert_equal", "assert_not_equal", "assert_true", "assert_false", "assert_less",
               "assert_greater", "assert_less_equal", "assert_greater_equal", "assert_raises",
               "assert_almost_equal", "assert_in", "assert_is_instance")


def _install_nose():
    """A ``nose`` module with ``SkipTest`` and ``nose.tools``' asserts (unittest's methods)."""
    case = unittest.TestCase("__init__")
    nose = types.ModuleType("nose")
    nose.SkipTest = unittest.SkipTest
    tools = types.ModuleType("nose.tools")
    for name in _NOSE_TOOLS:
        camel = "".join(part.capitalize() for part in name.split("_"))
        setattr(tools, name, getattr(case, camel[0].lower() + camel[1:]))
    nose.tools = tools
    sys.modules["nose"], sys.modules["nose.tools"] = nose, tools


def _tests(spec):
    """``(name, callable)`` of the tests ``spec`` names (``module`` or ``module::function``)."""
    module_name, _, function = spec.partition("::")
    module = importlib.import_module("pystruct.tests." + module_name)
    names = [function] if function else sorted(n for n in dir(module) if n.startswith("test_"))
    for name in names:
        yield module_name + "::" + name, getattr(module, name)


def _run(name, test):
    """Run one test (a generator's cases one by one); ``[(label, outcome)]``."""
    outcomes = []
    try:
        result = test()
        cases = list(result) if isinstance(result, types.GeneratorType) else None
    except unittest.SkipTest:
        return [(name, "SKIP")]
    except AssertionError:
        return [(name, "FAIL\n" + traceback.format_exc(limit=3))]
    except Exception:
        return [(name, "ERROR\n" + traceback.format_exc(limit=3))]
    if cases is None:
        return [(name, "PASS")]
    for k, (function, *args) in enumerate(cases):
        outcomes += _run("%s[%d]" % (name, k), lambda: function(*args))
    return outcomes


def main(argv):
    warnings.simplefilter("ignore")
    _install_nose()
    os.chdir(tempfile.mkdtemp())   # SaveLogger's files and the like land in a scratch directory
    specs = argv[1:] or sorted(
        os.path.splitext(os.path.relpath(os.path.join(root, f), _tests_dir()))[0].replace(os.sep, ".")
        for root, _, files in os.walk(_tests_dir()) for f in files if f.startswith("test_") and f.endswith(".py"))
    counts = {}
    for spec in specs:
        for name, test in _tests(spec):
            for label, outcome in _run(name, test):
                counts[outcome.split("\n")[0]] = counts.get(outcome.split("\n")[0], 0) + 1
                print(label, outcome, flush=True)
    print("counts: " + ", ".join("%s %d" % item for item in sorted(counts.items())))
    return 1 if counts.get("FAIL") or counts.get("ERROR") else 0


def _tests_dir():
    import pystruct.tests
    return os.path.dirname(pystruct.tests.__file__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

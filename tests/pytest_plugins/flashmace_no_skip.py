"""pytest plugin (loaded with -p flashmace_no_skip by every pytest CTest test): with FLASHMACE_NO_SKIP=1
in the environment (.ci/run sets it), a skipped test, or a module skipped at collection (e.g. by
pytest.importorskip("mace") without mace-torch), fails the run instead of counting as passed.
Without the variable, skips behave as usual, so a developer without mace-torch can still run the rest."""
import os

import pytest

_skipped = []


def _enabled():
    return os.environ.get("FLASHMACE_NO_SKIP") == "1"


def _record(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skipped.append(f"{report.nodeid}: {reason}")


def pytest_collectreport(report):
    _record(report)


def pytest_runtest_logreport(report):
    _record(report)


def pytest_sessionfinish(session, exitstatus):
    if not _enabled() or not _skipped:
        return
    print(f"\nFLASHMACE_NO_SKIP=1: {len(_skipped)} skipped test(s) count as failures:")
    for line in _skipped:
        print(f"  SKIPPED {line}")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED

"""Counts of op×dtype×layout cases that passed, per suite and device; printed at the end of
the session by ``conftest.pytest_terminal_summary``."""

# suite name -> {device or "": number of cases that passed}
CASES_PASSED = {}


def count_case(suite: str, device: str = "") -> None:
    """Called by a test once its op×dtype×layout comparison has passed."""
    per = CASES_PASSED.setdefault(suite, {})
    per[device] = per.get(device, 0) + 1

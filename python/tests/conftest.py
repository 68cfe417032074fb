"""Shared pytest setup: makes ``reference`` and ``casecount`` importable and prints the
per-suite case counts at the end of the session ("torch suite: N op×dtype×layout cases
passed")."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import casecount  # noqa: E402


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for suite, per in sorted(casecount.CASES_PASSED.items()):
        total = sum(per.values())
        detail = ", ".join(f"{d}: {n}" for d, n in sorted(per.items()) if d)
        line = f"{suite} suite: {total} op×dtype×layout cases passed"
        if detail:
            line += f" ({detail})"
        terminalreporter.write_line(line)

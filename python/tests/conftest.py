"""Shared fixtures: small data files written for each test, and the skip policy.

No silent skips: a test whose optional dependency (scipy, torch, torchdata) is missing is
skipped with its reason locally, the count is printed at the end, and under CI (CI=true) every
such skip is a failure.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
IN_CI = os.environ.get("CI") == "true"


def pytest_configure(config):
    # exfeed.torch filters, when it is imported, a few warnings that say nothing to its users.
    # pytest restores the warning filters after each test (and after collection), so an import
    # inside a test would keep them for that test only: import it here, as a user's program does.
    try:
        import exfeed.torch  # noqa: F401
    except ImportError:  # pragma: no cover - without torch; the torch tests say so themselves
        pass


def child_env() -> dict:
    """The environment of a child Python that imports this checkout's exfeed."""
    paths = [str(REPO / "python"), os.environ.get("PYTHONPATH")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, paths)))


def require(module: str):
    """Imports an optional dependency; skips (fails in CI) when it is missing."""
    if IN_CI:
        try:
            return __import__(module, fromlist=["_"])
        except ImportError as e:  # pragma: no cover - only without the test environment
            pytest.fail(f"{module} is required in CI: {e}")
    return pytest.importorskip(module)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skipped = len(terminalreporter.stats.get("skipped", []))
    if skipped:
        terminalreporter.write_line(
            f"exfeed: {skipped} Python test(s) SKIPPED (missing optional dependencies; see above)",
            yellow=True,
        )


def pytest_sessionfinish(session, exitstatus):
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if IN_CI and reporter is not None and reporter.stats.get("skipped"):
        session.exitstatus = 1


def write_ctf(
    path: pathlib.Path, sequences: int, *, dim: int = 3, classes: int = 5, seed: int = 0, first_key: int = 0
) -> dict:
    """A CTF file of `sequences` sequences of 1..4 samples, keyed from `first_key`: dense `x`
    [dim] and a sparse one-hot `y` [classes] on each sequence's first sample. Returns {key: (x
    rows as float64, exactly as written, label)}."""
    rng = np.random.default_rng(seed)
    truth = {}
    lines = []
    for key in range(first_key, first_key + sequences):
        n = int(rng.integers(1, 5))
        rows = np.round(rng.standard_normal((n, dim)), 4)
        label = int(rng.integers(0, classes))
        for i, row in enumerate(rows):
            text = " ".join(f"{v:g}" for v in row)
            lines.append(f"{key} |x {text}" + (f" |y {label}:1" if i == 0 else ""))
        truth[key] = (rows, label)
    path.write_text("\n".join(lines) + "\n")
    return truth


INPUTS = {"x": ("dense", 3), "y": ("sparse", 5)}


@pytest.fixture
def ctf(tmp_path):
    """(path, truth) of a 200-sequence CTF file."""
    path = tmp_path / "data.ctf"
    return path, write_ctf(path, 200)

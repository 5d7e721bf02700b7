"""Hostile uses of the Python package (issue 24): negative numbers, forks, signals, threads,
corpora with broken links, outputs that are not files. Each test reproduces what failed."""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

import exfeed
from conftest import INPUTS, write_ctf

# Every unsigned argument of the package: (call, name). Each gets -1.
READER_ARGUMENTS = [
    "minibatch_size",
    "max_sweeps",
    "max_samples",
    "seed",
    "window_chunks",
    "window_samples",
    "max_errors",
    "num_workers",
    "worker_rank",
    "threads",
    "prefetch_chunks",
    "max_record_size",
    "chunk_size",
    "equalize",
]
TOOL_ARGUMENTS = [
    ("check", "max_errors"),
    ("check", "max_record_size"),
    ("dump", "max_errors"),
    ("convert", "max_errors"),
    ("convert", "chunk_size"),
    ("to_arrow", "chunk_size"),
    ("to_arrow", "max_errors"),
]


@pytest.mark.parametrize("name", READER_ARGUMENTS)
def test_a_negative_reader_argument_is_a_value_error_naming_it(ctf, name):
    path, _ = ctf
    kwargs = {"minibatch_size": 8, "inputs": INPUTS, name: -1}
    with pytest.raises(ValueError, match=f"^{name}: ") as e:
        exfeed.Reader(path, **kwargs)
    assert not isinstance(e.value, OverflowError)


@pytest.mark.parametrize("function,name", TOOL_ARGUMENTS)
def test_a_negative_tool_argument_is_a_value_error_naming_it(ctf, tmp_path, function, name):
    path, _ = ctf
    args = [path, tmp_path / "out.cbf"] if function == "convert" else [path]
    with pytest.raises(ValueError, match=f"^{name}: "):
        getattr(exfeed, function)(*args, inputs=INPUTS, **{name: -1})


def test_negative_sizes_of_reader_methods_are_value_errors_naming_them(ctf):
    path, _ = ctf
    with exfeed.Reader(path, minibatch_size=8, inputs=INPUTS) as r:
        with pytest.raises(ValueError, match="^size: must not be negative, found -1"):
            r.next_minibatch(-1)
    for args, name in [((-1, 1), "start"), ((0, -1), "end")]:
        with pytest.raises(ValueError, match=f"^{name}: must not be negative"):
            exfeed._exfeed._read_chunks(str(path), *args, inputs=INPUTS)


def test_a_too_large_argument_is_a_value_error_naming_it(ctf):
    path, _ = ctf
    with pytest.raises(ValueError, match="^threads: is too large, found 1" + "0" * 30):
        exfeed.Reader(path, minibatch_size=8, inputs=INPUTS, threads=10**30)


def test_a_broken_symlink_matched_by_a_corpus_glob_is_an_error_naming_it(tmp_path):
    g = tmp_path / "g"
    g.mkdir()
    for name in ["a.ctf", "b.ctf"]:
        write_ctf(g / name, 10)
    (g / "c.ctf").symlink_to("/nonexistent")
    glob = str(g / "*.ctf")
    for call in [
        lambda: exfeed.Reader(corpus=glob, minibatch_size=8, inputs=INPUTS),
        lambda: exfeed.check(corpus=glob, inputs=INPUTS),
    ]:
        with pytest.raises(FileNotFoundError) as e:
            call()
        assert f"matched by the corpus glob '{glob}', a symbolic link to '/nonexistent'" in str(e.value)
        assert e.value.filename == str(g / "c.ctf")


def test_ctrl_c_while_numpy_is_first_imported_is_a_keyboard_interrupt(ctf):
    """SIGINT at random moments of a plain loop's start, when the first array access used to
    import NumPy: always KeyboardInterrupt, never a PanicException from the NumPy capsule.
    (Ctrl-C during `import numpy` itself, now in `import exfeed`, is NumPy's to report.)"""
    import random
    import signal
    import sys
    import time

    path, _ = ctf
    script = (
        "import exfeed\n"
        "print('started', flush=True)\n"
        "try:\n"
        f"    r = exfeed.Reader({str(path)!r}, minibatch_size=8, inputs={INPUTS!r}, max_sweeps=None)\n"
        "    for mb in r:\n"
        "        mb['x'].values.sum()\n"
        "except KeyboardInterrupt:\n"
        "    print('KeyboardInterrupt', flush=True)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(exfeed.__file__).parents[1]))
    rng = random.Random(24)
    for run in range(12):
        child = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        assert child.stdout.readline() == "started\n"
        time.sleep(rng.uniform(0.0, 0.4))
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
        assert "PanicException" not in err and "panicked" not in err, f"run {run}: {err}"
        assert out == "KeyboardInterrupt\n", f"run {run}: {out!r} {err}"
        assert child.returncode == 0, err

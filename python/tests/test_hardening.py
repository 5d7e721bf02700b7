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
    "window_bytes",
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


def run_forked_child(body, timeout=30.0):
    """Runs `body()` in a child of os.fork(); gives (exit status, what it wrote) or fails when
    the child does not end within `timeout` seconds (it is killed)."""
    import time

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read_end)
        try:
            os.write(write_end, repr(body()).encode())
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            os.write(write_end, f"{type(e).__name__}: {e}".encode())
            code = 1
        os._exit(code)
    os.close(write_end)
    started = time.monotonic()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > timeout:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(read_end)
            pytest.fail(f"the forked child still ran after {timeout} s")
        time.sleep(0.02)
    with os.fdopen(read_end) as f:
        return os.waitstatus_to_exitcode(status), f.read()


def test_a_reader_inherited_through_fork_fails_at_once_saying_why(tmp_path):
    import gc
    import time

    path = tmp_path / "data.ctf"
    write_ctf(path, 20000)
    # Many chunks: the child needs chunks the parent's threads never decoded.
    options = dict(minibatch_size=8, inputs=INPUTS, threads=2, chunk_size=4096)
    r = exfeed.Reader(path, **options)
    first = r.next_minibatch().keys.tolist()

    def child():
        started = time.monotonic()
        with pytest.raises(RuntimeError) as e:
            for _ in r:
                pass
        assert time.monotonic() - started < 5
        for call in [r.state_dict, lambda: r.done, lambda: r.diagnostics]:
            with pytest.raises(RuntimeError, match="inherited through fork"):
                call()
        r.close()  # neither hangs nor raises
        return str(e.value)

    code, message = run_forked_child(child)
    assert code == 0, message
    assert "was created in process" in message and "inherited through fork()" in message, message
    assert "threads=0" in message, message
    # Dropped in a child by the garbage collector: no hang either.
    readers = [exfeed.Reader(path, **options)]
    readers[0].next_minibatch()
    code, out = run_forked_child(lambda: (readers.clear(), gc.collect()) and "dropped")
    assert (code, out) == (0, "'dropped'")
    # The parent's readers go on.
    assert len(readers) == 1 and readers[0].next_minibatch() is not None
    second = r.next_minibatch().keys.tolist()
    assert second and second != first
    r.close()


def test_a_reader_without_threads_reads_on_after_fork(ctf):
    path, truth = ctf
    r = exfeed.Reader(path, minibatch_size=8, inputs=INPUTS, threads=0, randomize=False)
    code, out = run_forked_child(lambda: sum(len(mb.keys) for mb in r))
    assert code == 0, out
    assert int(out) == len(truth)


def test_threads_sharing_a_reader_take_turns_and_get_every_sequence_once(tmp_path):
    import threading

    path = tmp_path / "data.ctf"
    truth = write_ctf(path, 3000)
    r = exfeed.Reader(path, minibatch_size=16, inputs=INPUTS, chunk_size=4096, threads=2)
    keys, errors = [], []

    def consume():
        try:
            while (mb := r.next_minibatch()) is not None:
                keys.extend(mb.keys.tolist())
                mb["x"].values.sum()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    consumers = [threading.Thread(target=consume) for _ in range(4)]
    for t in consumers:
        t.start()
    # A watchdog asking what it may while the consumers read.
    watched = 0
    while any(t.is_alive() for t in consumers):
        try:
            r.state_dict(), r.done, r.diagnostics, r.total_samples, r.closed
            watched += 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
            break
    for t in consumers:
        t.join()
    assert errors == []
    assert watched > 0
    assert sorted(keys) == sorted(truth)
    assert r.done
    r.close()


def test_close_from_another_thread_ends_a_read_in_progress(tmp_path):
    import threading
    import time

    path = tmp_path / "data.ctf"
    write_ctf(path, 3000)
    # A read that would not end: a minibatch of 10**9 samples from endless sweeps.
    r = exfeed.Reader(path, minibatch_size=16, inputs=INPUTS, chunk_size=4096, max_sweeps=None)
    outcome = []

    def read():
        try:
            outcome.append(r.next_minibatch(10**9))
        except BaseException as e:  # noqa: BLE001 - checked below
            outcome.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.5)
    assert reader.is_alive() and outcome == []
    started = time.monotonic()
    r.close()
    assert time.monotonic() - started < 1, "close() does not wait for the read"
    reader.join(timeout=10)
    assert not reader.is_alive(), "the read went on after close()"
    assert len(outcome) == 1 and isinstance(outcome[0], ValueError), outcome
    assert "closed (by close() in another thread) during this read" in str(outcome[0])
    assert r.closed
    with pytest.raises(ValueError, match="the reader is closed"):
        r.next_minibatch()


def test_overwrite_writes_into_a_fifo_for_its_reader(ctf, tmp_path):
    path, _ = ctf
    reference = tmp_path / "reference.cbf"
    exfeed.convert(path, reference, inputs=INPUTS)
    fifo = tmp_path / "out.cbf"
    os.mkfifo(fifo)
    with pytest.raises(FileExistsError, match="output is a FIFO"):
        exfeed.convert(path, fifo, inputs=INPUTS)
    got = tmp_path / "got.cbf"
    consumer = subprocess.Popen(["sh", "-c", 'exec cat "$0" > "$1"', str(fifo), str(got)])
    exfeed.convert(path, fifo, inputs=INPUTS, overwrite=True)
    assert consumer.wait(timeout=20) == 0
    assert got.read_bytes() == reference.read_bytes()
    assert pathlib.Path(fifo).is_fifo()

"""The promises at the boundary: no copy, kept arrays never overwritten, the GIL released,
errors as the right exceptions with their positions, no panic into Python."""

from __future__ import annotations

import errno
import gc
import os
import pathlib
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import exfeed
from exfeed import _exfeed
from conftest import INPUTS, REPO, write_ctf


def test_arrays_are_views_on_the_readers_buffers(ctf):
    path, _ = ctf
    r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=64, randomize=False)
    mb = r.next_minibatch()
    x = mb["x"]
    v = x.values
    # No copy: the array's memory is the Rust buffer, owned by the minibatch's buffers.
    assert v.ctypes.data == _exfeed._buffer_address(x)
    assert not v.flags.owndata and type(v.base).__name__ == "Buffers"
    assert np.shares_memory(v, mb["x"].values)
    assert x.offsets.base is v.base and mb["y"].data.base is v.base


def test_buffers_are_reused_only_when_nothing_refers_to_them(tmp_path):
    # One sample per sequence: every minibatch has the same size, so a reused buffer needs
    # no reallocation and keeps its address.
    path = tmp_path / "frames.ctf"
    path.write_text("".join(f"{k} |x {k} 1 2 |y {k % 5}:1\n" for k in range(1000)))
    r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=64, randomize=False, max_sweeps=None)
    mb = r.next_minibatch()
    address = _exfeed._buffer_address(mb["x"])
    del mb
    gc.collect()
    # Nothing refers to the first minibatch: its buffers are refilled.
    assert _exfeed._buffer_address(r.next_minibatch()["x"]) == address

    kept = r.next_minibatch()["x"].values  # keep only an array
    snapshot = kept.copy()
    kept_address = kept.ctypes.data
    for _ in range(20):
        mb = r.next_minibatch()
        assert mb["x"].values.ctypes.data != kept_address
        del mb
    np.testing.assert_array_equal(kept, snapshot)  # never overwritten


def test_buffers_are_reused_while_a_training_loop_holds_the_last_minibatch(tmp_path):
    # A loop holds minibatch k (its loop variable, tensors made from it) while it asks for
    # k + 1: the buffers of k - 1 are refilled, so two sets of buffers take turns.
    path = tmp_path / "frames.ctf"
    path.write_text("".join(f"{k} |x {k} 1 2 |y {k % 5}:1\n" for k in range(1000)))
    r = exfeed.Reader(path, inputs=INPUTS, minibatch_size=64, randomize=False, max_sweeps=None)
    held = r.next_minibatch()
    arrays = [held["x"].values]  # kept alive: their memory is never handed out again
    addresses = set()
    for _ in range(12):
        mb = r.next_minibatch()
        addresses.add(_exfeed._buffer_address(mb["x"]))
        held = mb
    assert len(addresses) == 2
    assert arrays[0].ctypes.data not in addresses


def big_ctf(path, sequences=30000):
    row = " ".join(f"{i * 0.37:.3f}" for i in range(40))
    path.write_text("".join(f"{k} |x {row} |y 1:1\n" for k in range(sequences)))
    return {"x": ("dense", 40), "y": ("sparse", 5)}


def assert_other_threads_run_during(call):
    """Runs call() while another Python thread counts; returns call's result. With the GIL
    held for the whole call the other thread could not run in it at all (but for a switch
    interval at its edges); released, it runs through most of it."""
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    t = threading.Thread(target=spin)
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        t.start()
        time.sleep(0.05)
        start = time.perf_counter()
        result = call()
        end = time.perf_counter()
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    during = [x for x in ticks if start < x < end]
    assert end - start > 0.05
    assert during and during[-1] - during[0] > 0.5 * (end - start), (len(during), end - start)
    return result


def test_reading_releases_the_gil(tmp_path):
    path = tmp_path / "big.ctf"
    inputs = big_ctf(path)
    r = exfeed.Reader(path, inputs=inputs, minibatch_size=10**9, randomize=False, threads=0)
    # One call decodes and packs the whole file.
    mb = assert_other_threads_run_during(r.next_minibatch)
    assert mb.num_sequences == 30000


def test_converting_releases_the_gil(tmp_path):
    path = tmp_path / "big.ctf"
    inputs = big_ctf(path)
    done = assert_other_threads_run_during(
        lambda: exfeed.convert(path, tmp_path / "big.cbf", inputs=inputs, sync=False))
    assert done["sequences"] == 30000


def test_data_error_has_the_position_and_the_clis_message(tmp_path):
    path = tmp_path / "bad.ctf"
    path.write_text("0 |x 1 2 3 |y 0:1\n1 |x 1 2 3 4 |y 1:1\n")
    with pytest.raises(exfeed.DataError) as e:
        list(exfeed.Reader(path, inputs=INPUTS, minibatch_size=8))
    err = e.value
    assert isinstance(err, ValueError)
    assert (err.path, err.line, err.column, err.byte, err.input) == (str(path), 2, 4, 21, "x")
    assert err.kind == "invalid" and err.message == "has 4 dense values, dim is 3"
    cli = REPO / "target" / "debug" / "exfeed"
    if cli.exists():
        out = subprocess.run([cli, "read", path, "-i", "x:dense:3", "-i", "y:sparse:5", "-m", "8"],
                             capture_output=True, text=True)
        assert out.returncode == 1
        assert f"exfeed: error: {err}" in out.stderr
    assert str(err) == f"{path}:2:4 (byte 21): input 'x': has 4 dense values, dim is 3"


def test_io_errors_are_oserrors_with_errno(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        exfeed.Reader(tmp_path / "missing.ctf", inputs=INPUTS, minibatch_size=8)
    assert e.value.errno == errno.ENOENT and "missing.ctf" in str(e.value.filename)
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.ctf"
        write_ctf(locked, 3)
        locked.chmod(0)
        with pytest.raises(PermissionError):
            exfeed.Reader(locked, inputs=INPUTS, minibatch_size=8)
    with pytest.raises(IsADirectoryError):
        exfeed.Reader(tmp_path, inputs=INPUTS, minibatch_size=8)


def test_a_panic_becomes_an_exception():
    with pytest.raises(exfeed.InternalError, match="internal error in exfeed .*: boom") as e:
        _exfeed._panic_for_tests("boom")
    assert isinstance(e.value, RuntimeError)
    # The interpreter goes on.
    assert sum(range(4)) == 6


def test_truncated_cbf_is_a_data_error(tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(b"cntk_bin" [::-1] + b"\x01\x00")
    with pytest.raises(exfeed.DataError) as e:
        exfeed.Reader(path, minibatch_size=8)
    assert e.value.path == str(path) and e.value.byte is not None

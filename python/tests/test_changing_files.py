"""Files that change under a Reader: an error naming the file, never a crash or wrong data.

Each case runs in a child process: a file mapped into memory that shrinks kills the process
with SIGBUS, which must show up here as a failure rather than end the test session.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import exfeed
from conftest import INPUTS, write_ctf


def run_child(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=env
    )


def truncated_between_steps(path, size: int, **reader_options) -> subprocess.CompletedProcess:
    """Reads one minibatch of `path`, truncates it to `size` bytes, and reads on (the threads
    decoding ahead are likely in the middle of a chunk then)."""
    return run_child(
        f"""
        import os, exfeed
        r = exfeed.Reader({str(path)!r}, minibatch_size=8, randomize=False, **{reader_options!r})
        r.next_minibatch()
        os.truncate({str(path)!r}, {size})
        try:
            while r.next_minibatch() is not None:
                pass
        except Exception as e:
            print("ERROR", type(e).__name__, e)
        else:
            print("NO ERROR")
        """
    )


def test_a_cbf_file_truncated_while_read_is_an_error_naming_it(tmp_path):
    src = tmp_path / "data.ctf"
    write_ctf(src, 2000)
    cbf = tmp_path / "data.cbf"
    exfeed.convert(src, cbf, inputs=INPUTS, chunk_size=4096)
    done = truncated_between_steps(cbf, 1000)
    assert done.returncode == 0, f"killed by signal {-done.returncode}: {done.stderr}"
    assert "ERROR" in done.stdout and "data.cbf" in done.stdout, done.stdout


def test_a_ctf_file_truncated_while_read_is_an_error_naming_it_and_the_byte(tmp_path):
    # Mapped, a chunk being decoded by a thread ahead when the file shrank killed the process in
    # about half the runs; each run must now end in the error.
    original = tmp_path / "original.ctf"
    write_ctf(original, 200000)
    path = tmp_path / "data.ctf"
    for index in ("full", "none") * 4:
        path.write_bytes(original.read_bytes())
        done = truncated_between_steps(path, 1000, inputs=INPUTS, chunk_size=1 << 20, index=index)
        assert done.returncode == 0, f"index={index}: killed by signal {-done.returncode}: {done.stderr}"
        assert "ERROR" in done.stdout and "data.ctf" in done.stdout and "byte" in done.stdout, done.stdout


def test_a_state_is_refused_on_other_contents_under_the_same_name(tmp_path):
    # Python compared the file names only: the same name, size and first 64 KiB (the sample
    # estimate without an index) with other sequences after them resumed there.
    n = 12000
    old = "".join(f"{i:05} |x {i % 10}\n" for i in range(n))
    regrouped = "".join(f"{i // 2:05} |x {i % 10}\n" for i in range(n))
    start = old.index("\n", 70000) + 1
    path = tmp_path / "data.ctf"
    path.write_text(old)
    options = dict(inputs={"x": ("dense", 1)}, minibatch_size=10, chunk_size=8192, seed=2)
    r = exfeed.Reader(path, **options)
    for _ in range(3):
        r.next_minibatch()
    state = r.state_dict()
    r.close()
    # Restored on the same data, copied elsewhere (new inode and times): accepted.
    (tmp_path / "copy").mkdir()
    copy = tmp_path / "copy" / "data.ctf"
    copy.write_text(old)
    exfeed.Reader(copy, **options).load_state_dict(state)
    path.write_text(old[:start] + regrouped[start:])
    with pytest.raises(exfeed.ConfigError, match="data file data.ctf has other contents"):
        exfeed.Reader(path, **options).load_state_dict(state)

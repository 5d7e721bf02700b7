"""A corpus of more shards than the process may have files open (issue 24, item 11)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def test_a_corpus_of_5000_shards_is_read_whole_under_a_limit_of_256_open_files(tmp_path):
    # The Reader kept every shard open: "Too many open files" past about 250 shards at 256.
    shards = 5000
    for i in range(shards):
        (tmp_path / f"s-{i:05}.ctf").write_text(f"{2 * i} |x {i % 7}\n{2 * i + 1} |x 1\n")
    code = f"""
        import resource, exfeed
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        r = exfeed.Reader(corpus={str(tmp_path / "s-*.ctf")!r}, inputs={{"x": ("dense", 1)}}, minibatch_size=100)
        keys = [k for mb in r for k in mb.keys.tolist()]
        print(len(keys), len(set(keys)))
        expected = {{i << 40 | k for i in range({shards}) for k in (2 * i, 2 * i + 1)}}
        print(set(keys) == expected)
        """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["10000", "10000", "True"], done.stdout

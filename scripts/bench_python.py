"""The measurements of scripts/bench-python. Each reader runs in a fresh process (so its peak
RSS is its own); the data is read once first so every run finds it in the page cache."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from bench_common import peak_rss_mb

DIM = 200
MINIBATCH = 256


def write_data(ctf: str, csv: str, mb: int, slice_mb: int) -> None:
    """`mb` MB of dense CTF (a 64 MB block of `|x v1 ... v200` lines repeated) and the first
    `slice_mb` MB of it as CSV."""
    if os.path.exists(ctf) and os.path.getsize(ctf) >= mb << 20 and os.path.exists(csv):
        return
    rng = np.random.default_rng(0x9E3779B9)
    block_lines = (64 << 20) // (DIM * 10 + 4)
    values = rng.integers(0, 20_000_000, size=(block_lines, DIM)) / 1e6 - 10.0
    rows = [" ".join(f"{v:.6f}" for v in row) for row in values]
    block = "".join(f"|x {r}\n" for r in rows).encode()
    with open(ctf, "wb") as f:
        written = 0
        while written < mb << 20:
            f.write(block)
            written += len(block)
    with open(csv, "w") as f:
        for r in rows[: len(rows) * slice_mb // 64]:
            f.write(r.replace(" ", ",") + "\n")


def plain_python_ctf(path: str) -> int:
    """What a Python user would write: split each line, float() each value, stack 256 rows."""
    rows, n = [], 0
    with open(path) as f:
        for line in f:
            for part in line.split("|")[1:]:
                name, _, rest = part.partition(" ")
                if name == "x":
                    rows.append([float(v) for v in rest.split()])
            if len(rows) == MINIBATCH:
                np.asarray(rows, dtype=np.float32)
                n += len(rows)
                rows = []
    return n + len(rows)


def child(mode: str, path: str) -> None:
    """One measurement in this process; prints JSON {seconds, samples, rss_mb, rss_before_mb}."""
    import exfeed

    options = dict(inputs={"x": ("dense", DIM)}, window_chunks=4)
    if mode == "torch":
        import torch  # noqa: F401 - imported before the clock starts
        import exfeed.torch
    if mode in ("loadtxt", "pandas"):
        import pandas  # noqa: F401
    before = peak_rss_mb()
    start = time.perf_counter()
    samples = 0
    if mode == "reader":
        for mb in exfeed.Reader(path, minibatch_size=MINIBATCH, **options):
            samples += mb["x"].values.shape[0]
    elif mode == "torch":
        ds = exfeed.torch.Dataset(path, minibatch_size=MINIBATCH, layout="packed", equalize=False, **options)
        for batch in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0):
            samples += batch["x"].shape[0]
    elif mode == "loadtxt":
        samples = np.loadtxt(path, delimiter=",", dtype=np.float32).shape[0]
    elif mode == "pandas":
        import pandas as pd

        samples = len(pd.read_csv(path, header=None, engine="pyarrow", dtype=np.float32))
    elif mode == "plain":
        samples = plain_python_ctf(path)
    print(json.dumps({"seconds": time.perf_counter() - start, "samples": samples,
                      "rss_mb": peak_rss_mb(), "rss_before_mb": before}))


def run_child(mode: str, path: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, path], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exfeed")
    ap.add_argument("--dir")
    ap.add_argument("--mb", type=int, default=1000)
    ap.add_argument("--slice", type=int, default=64)
    ap.add_argument("--child", nargs=2)
    a = ap.parse_args()
    if a.child:
        return child(*a.child)
    os.makedirs(a.dir, exist_ok=True)
    ctf, csv = os.path.join(a.dir, f"bench-python-{a.mb}.ctf"), os.path.join(a.dir, f"bench-python-{a.slice}.csv")
    write_data(ctf, csv, a.mb, a.slice)
    ctf_slice = os.path.join(a.dir, f"bench-python-{a.slice}.ctf")
    if not os.path.exists(ctf_slice):
        with open(ctf, "rb") as src, open(ctf_slice, "wb") as dst:
            dst.write(src.read(a.slice << 20).rsplit(b"\n", 1)[0] + b"\n")
    for p in (ctf, csv, ctf_slice):
        with open(p, "rb") as f:  # into the page cache
            while f.read(1 << 24):
                pass
    size, slice_size = os.path.getsize(ctf) / 1e6, os.path.getsize(ctf_slice) / 1e6
    print(f"python bench: {size:.0f} MB dense CTF ({DIM} floats/line), minibatch {MINIBATCH}, window 4 chunks "
          f"of 32 MB; slow peers on the first {slice_size:.0f} MB; load average {os.getloadavg()[0]:.2f}")

    start = time.perf_counter()
    cli = subprocess.run([a.exfeed, "read", ctf, "-i", f"x:dense:{DIM}", "-m", str(MINIBATCH), "--window-chunks", "4"],
                         check=True, capture_output=True, text=True)
    cli_s = time.perf_counter() - start
    cli_rate = size / cli_s
    print(f"  exfeed read:                    {cli_rate:7.1f} MB/s ({cli_s:.2f} s wall, process start included)")
    print(f"    its summary: {cli.stderr.strip().splitlines()[-1]}")
    results = {}
    for mode, path, mbytes, label in [
        ("reader", ctf, size, "Python loop over exfeed.Reader"),
        ("torch", ctf, size, "exfeed.torch.Dataset, DataLoader(batch_size=None, num_workers=0), packed"),
        ("pandas", csv, None, "pandas.read_csv(engine='pyarrow') on the CSV"),
        ("loadtxt", csv, None, "numpy.loadtxt on the CSV"),
        ("plain", ctf_slice, slice_size, "plain-Python CTF parser"),
    ]:
        r = run_child(mode, path)
        # The CSV peers are rated by the CTF bytes their numbers stand for.
        mbytes = mbytes or slice_size * r["samples"] / max(1, sum(1 for _ in open(ctf_slice)))
        rate = mbytes / r["seconds"]
        results[mode] = rate
        extra = f"{rate / cli_rate:6.1%} of exfeed read" if mode in ("reader", "torch") else \
            f"exfeed.Reader is {results['reader'] / rate:.1f}x faster"
        print(f"  {label}: {rate:7.1f} MB/s ({r['seconds']:.2f} s, {r['samples']} samples); {extra}; "
              f"peak RSS {r['rss_mb']:.0f} MB ({r['rss_mb'] - r['rss_before_mb']:+.0f} MB over the imports)")


if __name__ == "__main__":
    main()

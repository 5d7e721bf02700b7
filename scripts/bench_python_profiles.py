"""The measurements of scripts/bench-python-profiles: `exfeed.Reader` reading the same CTF and
CBF with the extension of each profile, each read a fresh process, alternating; medians."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

import numpy as np

INPUTS = "{'x': ('dense', 200), 'y': ('sparse', 10)}"
PROFILES = ("python-release", "release")
# The read alone, without the interpreter's start and imports: wall-clock and the CPU of all
# the process's threads.
CHILD = f"""
import sys, time, exfeed
path = sys.argv[1]
start, cpu = time.perf_counter(), time.process_time()
options = dict(inputs={INPUTS}) if path.endswith('.ctf') else {{}}
for _ in exfeed.Reader(path, minibatch_size=256, **options):
    pass
print(time.perf_counter() - start, time.process_time() - cpu)
"""


def generate(root: str) -> tuple[str, str]:
    """80,000 lines of 200 floats with 6 decimals and a sparse label (153 MB), and its CBF."""
    ctf, cbf = f"{root}/dense.ctf", f"{root}/dense.cbf"
    if not os.path.exists(cbf):
        rng = np.random.default_rng(7)
        with open(ctf, "w") as f:
            for _ in range(16):
                values = rng.integers(0, 20_000_000, size=(5_000, 200)) / 1e6 - 10.0
                labels = rng.integers(0, 10, size=5_000)
                f.writelines(f"|x {' '.join(f'{v:.6f}' for v in row)} |y {label}:1\n"
                             for row, label in zip(values, labels))
        convert = f"import exfeed; exfeed.convert({ctf!r}, {cbf!r}, inputs={INPUTS})"
        subprocess.run([sys.executable, "-c", convert], check=True,
                       env=dict(os.environ, PYTHONPATH=f"{root}/{PROFILES[0]}"))
    return ctf, cbf


def read(root: str, profile: str, path: str) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=f"{root}/{profile}"))
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--runs", type=int, default=9)
    a = ap.parse_args()
    print(f"load average {os.getloadavg()}; {a.runs} runs each, alternating, medians")
    for path in generate(a.root):
        times: dict = {p: [] for p in PROFILES}
        for _ in range(a.runs):
            for profile in PROFILES:
                times[profile].append(read(a.root, profile, path))
        size = os.path.getsize(path) / 1e6
        medians = {p: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
                   for p, t in times.items()}
        for profile, (wall, cpu) in medians.items():
            print(f"{os.path.basename(path)} {size:.0f} MB, {profile}: {wall:.3f} s, {cpu:.3f} s CPU")
        (thin_wall, thin_cpu), (fat_wall, fat_cpu) = (medians[p] for p in PROFILES)
        print(f"  python-release / release: {thin_wall / fat_wall:.2f}x the wall-clock, "
              f"{thin_cpu / fat_cpu:.2f}x the CPU")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()

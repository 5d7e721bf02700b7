#!/usr/bin/env bash
# Single-threaded CTF parsing speed of exfeed beside pyarrow.csv.read_csv on the same numbers
# written as CSV: (a) 200 dense floats per line with 6 decimals, (b) MNIST-like 784 small
# integers + a label. Installs pyarrow from PyPI into target/bench-venv. Not part of the tests.
# Usage: scripts/bench-ctf-vs-pyarrow.sh [MB per data set, default 64] [runs, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
mb="${1:-64}"
runs="${2:-5}"
cargo build --release --locked -p exfeed-cli
venv=target/bench-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import pyarrow" 2>/dev/null || "$venv/bin/pip" install -q pyarrow
data=target/bench-data
ours="$(./target/release/exfeed bench ctf --mb "$mb" --runs "$runs" --write-to "$data")"
echo "$ours"
"$venv/bin/python" - "$data" "$runs" "$ours" <<'PY'
import re, statistics, sys, time
import pyarrow, pyarrow.csv as csv

data, runs, ours = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mine = {}
for line in ours.splitlines():
    m = re.match(r"ctf (\w+).*?([\d.]+) MB/s wall-clock, ([\d.]+) MB/s per CPU-second", line)
    if m:
        mine[m.group(1)] = (float(m.group(2)), float(m.group(3)))

def measure(path, threads):
    size = __import__("os").path.getsize(path) / 1e6
    wall, cpu = [], []
    opts = csv.ReadOptions(autogenerate_column_names=True, use_threads=threads)
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        table = csv.read_csv(path, read_options=opts)
        wall.append(size / (time.perf_counter() - t))
        cpu.append(size / max(time.process_time() - c, 1e-9))
    return statistics.median(wall), statistics.median(cpu), table.num_rows

print(f"pyarrow {pyarrow.__version__}")
for name in ("dense", "mnist"):
    w1, c1, rows = measure(f"{data}/{name}.csv", False)
    wn, cn, _ = measure(f"{data}/{name}.csv", True)
    mw, mc = mine.get(name, (float("nan"), float("nan")))
    # Same numbers, different bytes: compare time per data set, not MB/s of different files.
    import os
    k = os.path.getsize(f"{data}/{name}.csv") / os.path.getsize(f"{data}/{name}.ctf")
    print(f"pyarrow.csv {name}: {rows} rows; 1 thread: {w1:.0f} MB/s wall-clock, {c1:.0f} MB/s per CPU-second; "
          f"all threads: {wn:.0f} MB/s wall-clock, {cn:.0f} MB/s per CPU-second")
    print(f"ratio exfeed/pyarrow {name} (1 thread): {mw * k / w1:.2f}x wall-clock, {mc * k / c1:.2f}x per CPU-second; "
          f"vs pyarrow all threads: {mw * k / wn:.2f}x wall-clock (time to read the same numbers)")
PY

"""The measurements of scripts/bench-loaders: exfeed.torch beside the loaders PyTorch users pick
(Mosaic Streaming, LitData, Hugging Face datasets, WebDataset), each reading the same generated
samples from its own format, with the ceiling (a NumPy memmap read in random batches) and
PyTorch's transfer cap (a loader that reads nothing and yields fresh tensors of the same shapes).

Each loader runs in a fresh process: EPOCHS shuffled epochs of minibatches of BATCH samples into
torch tensors, through torch.utils.data.DataLoader with num_workers 0 and 2 (exfeed's, LitData's
and WebDataset's own loader classes where they have one). It reports samples/s over all epochs,
the time from creating the loader to its first minibatch, and peak RSS (the main process, and
the largest worker). Preparation time is what it took to write the loader's format from the
NumPy arrays (for exfeed: CTF is the users' data as it is; CBF is `exfeed.convert` of it, in
the 1 MiB chunks docs/pytorch.md recommends for exfeed.torch). Then scripts/shuffle_quality.py
puts each loader's default shuffle beside a full one."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
from bench_common import peak_rss_mb

DIM = 784
CLASSES = 10
BATCH = 256
EPOCHS = 3
INPUTS = {"features": ("dense", DIM), "labels": ("sparse", CLASSES)}
LOADERS = ("memmap", "fresh", "exfeed-cbf", "exfeed-ctf", "litdata", "datasets", "mosaic", "webdataset")
# What the files are written as; a new value writes them again (2: CBF in chunks of 1 MiB).
LAYOUT = 2
# The memmap ceiling and the fresh-tensor cap are each measured where they bound the others:
# reading in the main process, and the transfer from two workers.
ONLY_WORKERS = {"memmap": (0,), "fresh": (2,)}


def arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
    """MNIST-like: 784 values a sample, 70% zeros, the rest integers 1-255; a label 0-9."""
    rng = np.random.default_rng(23)
    x = rng.integers(1, 256, size=(n, DIM), dtype=np.int32) * (rng.random((n, DIM)) >= 0.7)
    return x.astype(np.float32), rng.integers(0, CLASSES, size=n)


def prepare(data: str, n: int) -> dict:
    """Writes every format into `data` (once: kept for later runs); returns seconds per format."""
    done = os.path.join(data, f"prepared-{n}-v{LAYOUT}.json")
    if os.path.exists(done):
        with open(done) as f:
            return json.load(f)
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    x, y = arrays(n)
    seconds = {}

    def timed(name, write):
        start = time.perf_counter()
        write()
        seconds[name] = time.perf_counter() - start

    def memmap():
        np.save(f"{data}/x.npy", x)
        np.save(f"{data}/y.npy", y)

    def ctf():
        with open(f"{data}/data.ctf", "w") as f:
            for row, label in zip(x.astype(np.int32), y):
                f.write(f"|features {' '.join(map(str, row))} |labels {label}:1\n")

    def cbf():
        import exfeed

        exfeed.convert(f"{data}/data.ctf", f"{data}/data.cbf", inputs=INPUTS, chunk_size=1 << 20)

    def litdata():
        import litdata

        litdata.optimize(fn=_litdata_sample, inputs=[(f"{data}/x.npy", f"{data}/y.npy", i) for i in range(n)],
                         output_dir=f"{data}/litdata", chunk_bytes="64MB", num_workers=1)

    def datasets():
        import datasets
        import pyarrow as pa

        table = pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), DIM), "y": pa.array(y)})
        datasets.Dataset(table).save_to_disk(f"{data}/datasets")

    def mosaic():
        from streaming import MDSWriter

        with MDSWriter(out=f"{data}/mds", columns={"x": f"ndarray:float32:{DIM}", "y": "int"}) as out:
            for row, label in zip(x, y):
                out.write({"x": row, "y": int(label)})

    def webdataset():
        import webdataset as wds

        os.makedirs(f"{data}/wds")
        shards = 16
        for s in range(shards):
            with wds.TarWriter(f"{data}/wds/{s:04d}.tar") as out:
                for i in range(s, n, shards):
                    out.write({"__key__": f"{i:09d}", "x.npy": x[i], "cls": int(y[i])})

    for name, write in (("memmap", memmap), ("exfeed-ctf", ctf), ("exfeed-cbf", cbf), ("litdata", litdata),
                        ("datasets", datasets), ("mosaic", mosaic), ("webdataset", webdataset)):
        timed(name, write)
    seconds["exfeed-ctf"] = 0.0  # the users' data as it is; the writing above only made it
    with open(done, "w") as f:
        json.dump(seconds, f)
    return seconds


def _litdata_sample(item):
    xs, ys, i = item
    return {"x": np.load(xs, mmap_mode="r")[i].copy(), "y": int(np.load(ys, mmap_mode="r")[i])}


# ---------------------------------------------------------------- one loader, in its own process


def loader(name: str, data: str, workers: int, n: int):
    """An iterable over minibatches, as that loader's users write it; each minibatch becomes
    (features float32 [B, 784], labels int64 [B])."""
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    if name == "memmap":
        x, y = np.load(f"{data}/x.npy", mmap_mode="r"), np.load(f"{data}/y.npy", mmap_mode="r")

        class Memmap:
            epoch = 0

            def __iter__(self):
                order = np.random.default_rng(self.epoch).permutation(n)
                self.epoch += 1
                for i in range(0, n, BATCH):
                    rows = np.sort(order[i:i + BATCH])
                    yield torch.from_numpy(x[rows]), torch.from_numpy(y[rows])

        return Memmap()
    if name == "fresh":
        class Fresh(IterableDataset):
            def __iter__(self):
                info = torch.utils.data.get_worker_info()
                share = range(0, n, BATCH)[info.id::info.num_workers] if info else range(0, n, BATCH)
                for i in share:
                    b = min(BATCH, n - i)
                    yield torch.empty((b, DIM)), torch.zeros(b, dtype=torch.int64)

        return DataLoader(Fresh(), batch_size=None, num_workers=workers)
    if name.startswith("exfeed"):
        import exfeed.torch

        path = f"{data}/data.{name.split('-')[1]}"
        options = {"inputs": INPUTS} if path.endswith(".ctf") else {}
        dataset = exfeed.torch.Dataset(path, batch_size=BATCH, layout="packed", sparse="ids", **options)
        return _pairs(DataLoader(dataset, batch_size=None, num_workers=workers), "features", "labels")
    if name == "litdata":
        import litdata

        dataset = litdata.StreamingDataset(f"{data}/litdata", shuffle=True)
        return _pairs(litdata.StreamingDataLoader(dataset, batch_size=BATCH, num_workers=workers), "x", "y")
    if name == "datasets":
        import datasets

        dataset = datasets.load_from_disk(f"{data}/datasets").with_format("torch")
        return _pairs(DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=workers), "x", "y")
    if name == "mosaic":
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        dataset = StreamingDataset(local=f"{data}/mds", shuffle=True, batch_size=BATCH)
        return _pairs(DataLoader(dataset, batch_size=BATCH, num_workers=workers), "x", "y")
    if name == "webdataset":
        import webdataset as wds

        shards = sorted(f"{data}/wds/{s}" for s in os.listdir(f"{data}/wds"))
        dataset = (wds.WebDataset(shards, shardshuffle=len(shards), empty_check=False)
                   .shuffle(1000).decode().to_tuple("x.npy", "cls").batched(BATCH))
        return wds.WebLoader(dataset, batch_size=None, num_workers=workers)
    raise ValueError(name)


class _pairs:
    """A loader's dict minibatches as (features, labels); re-iterable, one epoch per iteration."""

    def __init__(self, inner, xs: str, ys: str):
        self.inner, self.xs, self.ys = inner, xs, ys

    def __iter__(self):
        for batch in self.inner:
            yield batch[self.xs], batch[self.ys]


def child(name: str, data: str, workers: int, n: int) -> None:
    """EPOCHS epochs of one loader; prints JSON."""
    import torch

    torch.set_num_threads(1)
    start = time.perf_counter()
    batches = loader(name, data, workers, n)
    first = None
    samples = 0
    for _ in range(EPOCHS):
        for xs, ys in batches:
            if first is None:
                first = time.perf_counter() - start
            assert xs.shape[1:] == (DIM,) and xs.dtype == torch.float32, (xs.shape, xs.dtype)
            assert ys.shape[0] == xs.shape[0], (ys.shape, xs.shape)
            samples += xs.shape[0]
    seconds = time.perf_counter() - start
    if samples != EPOCHS * n:
        sys.exit(f"{name}: {samples} samples in {EPOCHS} epochs of {n}")
    worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 if workers else 0.0
    print(json.dumps({"seconds": seconds, "first": first, "rss": peak_rss_mb(), "worker_rss": worker_rss}))


def measure(name: str, data: str, workers: int, n: int) -> dict:
    out = subprocess.run([sys.executable, "-W", "ignore", __file__, "--child", name, str(workers), "--data", data,
                          "--samples", str(n)], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr.strip() or out.stdout.strip())[-400:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--loaders", default=",".join(LOADERS))
    ap.add_argument("--child", nargs=2, metavar=("LOADER", "WORKERS"))
    a = ap.parse_args()
    if a.child:
        return child(a.child[0], a.data, int(a.child[1]), a.samples)

    print(f"load average {os.getloadavg()}; {a.samples} MNIST-like samples, {EPOCHS} shuffled epochs, "
          f"minibatch {BATCH}; medians of {a.runs}", flush=True)
    prep = prepare(a.data, a.samples)
    rows = {}
    for name in a.loaders.split(","):
        for workers in ONLY_WORKERS.get(name, (0, 2)):
            runs = [measure(name, a.data, workers, a.samples) for _ in range(a.runs)]
            failed = [r["error"] for r in runs if "error" in r]
            if failed:
                print(f"{name:11} workers={workers}: failed: {failed[0]}", flush=True)
                continue
            rate = statistics.median(EPOCHS * a.samples / r["seconds"] for r in runs)
            first = statistics.median(r["first"] for r in runs)
            rss = max(r["rss"] for r in runs)
            worker = max(r["worker_rss"] for r in runs)
            rows[(name, workers)] = rate
            print(f"{name:11} workers={workers}: {rate / 1e3:7.1f}k samples/s, first batch {first:6.3f} s, "
                  f"peak RSS {rss:5.0f} MB" + (f" (largest worker {worker:.0f} MB)" if workers else "")
                  + (f", prepared in {prep[name]:.1f} s" if name in prep else ""), flush=True)
    ceiling, cap = rows.get(("memmap", 0)), rows.get(("fresh", 2))
    for name in ("exfeed-cbf", "exfeed-ctf"):
        if ceiling and (name, 0) in rows:
            print(f"{name} workers=0: {rows[(name, 0)] / ceiling:.0%} of the memmap ceiling")
        if cap and (name, 2) in rows:
            print(f"{name} workers=2: {rows[(name, 2)] / cap:.0%} of the fresh-tensor transfer cap")
    print(f"load average {os.getloadavg()}", flush=True)
    subprocess.run([sys.executable, "-W", "ignore", os.path.join(os.path.dirname(__file__), "shuffle_quality.py"),
                    "--data", a.data, "--samples", str(a.samples)], check=False)


if __name__ == "__main__":
    main()

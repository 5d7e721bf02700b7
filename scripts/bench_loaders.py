"""The measurements of scripts/bench-loaders: exfeed.torch beside the loaders PyTorch users pick
(Mosaic Streaming, LitData, Hugging Face datasets, WebDataset), each reading the same generated
samples from its own format, with the ceiling (a NumPy memmap read in random batches) and
PyTorch's transfer cap (a loader that reads nothing and yields fresh tensors of the same shapes).

Two data sets (--set): "mnist", MNIST-like samples in minibatches of 256 samples; "sequences",
sequences of 1-100 samples of 32 floats with a label each, in minibatches of 64 sequences padded
to the longest ([64, longest, 32] and the lengths), each peer storing one sequence per item and
padding in its collate function as its users do. samples/s counts samples (not the padding).

Each loader runs in a fresh process: EPOCHS shuffled epochs of minibatches of BATCH samples into
torch tensors, through torch.utils.data.DataLoader with num_workers 0 and 2 (exfeed's, LitData's
and WebDataset's own loader classes where they have one). Each loader's modules are imported
before the clock starts (their import time is reported apart); it reports samples/s over all
epochs from creating the loader (its files dropped from the page cache and read back in order
before, so that every loader reads from a cache in the same state), the time to make the loader
(the dataset and DataLoader objects), the time from the start of the first epoch's iteration to
its first minibatch, and peak RSS (the main process, and the largest worker). Beside the rate over
all epochs it gives the rate of the epochs after the first (the first also fills the page tables
and allocates what is reused later, which a long training amortizes). With --runs N the loaders
take turns, N rounds of one run each, and the medians are taken. Preparation time
is what it took to write the loader's format from the NumPy arrays (for exfeed: CTF is the users' data as it is; CBF is `exfeed.convert` of it, in
the 1 MiB chunks docs/pytorch.md recommends for exfeed.torch). Then, for the MNIST-like set,
scripts/shuffle_quality.py puts each loader's default shuffle beside a full one."""

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
# The variable-length set: sequences of 1-100 samples of SEQ_DIM values, a label per sequence,
# in minibatches of SEQ_BATCH sequences.
SEQ_DIM = 32
SEQ_LONGEST = 100
SEQ_BATCH = 64
SEQ_INPUTS = {"features": ("dense", SEQ_DIM), "labels": ("sparse", CLASSES)}
SETS = {"mnist": 200_000, "sequences": 100_000}  # the set and its default count of items
LOADERS = ("memmap", "fresh", "exfeed-cbf", "exfeed-ctf", "litdata", "datasets", "mosaic", "webdataset")
# What the files are written as; a new value writes them again (2: CBF in chunks of 1 MiB).
LAYOUT = 2
# The peers' directories under the data directory.
DIRECTORIES = {"litdata": "litdata", "datasets": "datasets", "mosaic": "mds", "webdataset": "wds"}
# The memmap ceiling and the fresh-tensor cap are each measured where they bound the others:
# reading in the main process, and the transfer from two workers.
ONLY_WORKERS = {"memmap": (0,), "fresh": (2,)}
# The modules each loader imports, imported before its clock starts.
MODULES = {"exfeed-cbf": "exfeed.torch", "exfeed-ctf": "exfeed.torch", "litdata": "litdata",
           "datasets": "datasets", "mosaic": "streaming", "webdataset": "webdataset"}


def arrays(n: int) -> tuple[np.ndarray, np.ndarray]:
    """MNIST-like: 784 values a sample, 70% zeros, the rest integers 1-255; a label 0-9."""
    rng = np.random.default_rng(23)
    x = rng.integers(1, 256, size=(n, DIM), dtype=np.int32) * (rng.random((n, DIM)) >= 0.7)
    return x.astype(np.float32), rng.integers(0, CLASSES, size=n)


def sequences(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n sequences of 1-100 samples of 32 values in -9.99..9.99 (two decimals), all samples
    stacked [samples, 32]; their offsets [n + 1]; a label 0-9 per sequence."""
    rng = np.random.default_rng(23)
    offsets = np.concatenate([[0], np.cumsum(rng.integers(1, SEQ_LONGEST + 1, size=n))])
    x = (rng.integers(-999, 1000, size=(int(offsets[-1]), SEQ_DIM)) / 100).astype(np.float32)
    return x, offsets, rng.integers(0, CLASSES, size=n)


def prepare(data: str, n: int, dataset: str, loaders: list) -> dict:
    """Writes the formats `loaders` read into `data` (each once: kept for later runs); returns
    seconds per format written."""
    done = os.path.join(data, f"prepared-{n}-v{LAYOUT}.json")
    seconds = {}
    if os.path.exists(done):
        with open(done) as f:
            seconds = json.load(f)
    else:
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(data)
    # The memmap's offsets say every loader how many samples to expect; CBF is converted from CTF.
    wanted = {"memmap", *loaders} - {"fresh"} | ({"exfeed-ctf"} if "exfeed-cbf" in loaders else set())
    if wanted <= seconds.keys():
        return seconds
    if dataset == "mnist":
        x, y = arrays(n)
        offsets = np.arange(n + 1)
        inputs = INPUTS
    else:
        x, offsets, y = sequences(n)
        inputs = SEQ_INPUTS
    dim = x.shape[1]
    seconds = {}

    def items():
        """One item per sequence, as each peer stores it ([784] for MNIST-like, [length, 32])."""
        for i, label in enumerate(y):
            yield (x[i] if dataset == "mnist" else x[offsets[i]:offsets[i + 1]]), int(label)

    def timed(name, write):
        if name in DIRECTORIES:  # what an interrupted write left
            shutil.rmtree(f"{data}/{DIRECTORIES[name]}", ignore_errors=True)
        start = time.perf_counter()
        write()
        # CTF is the users' data as it is; the writing only made it.
        seconds[name] = 0.0 if name == "exfeed-ctf" else time.perf_counter() - start
        with open(done, "w") as f:
            json.dump(seconds, f)

    def memmap():
        np.save(f"{data}/x.npy", x)
        np.save(f"{data}/y.npy", y)
        np.save(f"{data}/offsets.npy", offsets)

    def ctf():
        with open(f"{data}/data.ctf", "w") as f:
            if dataset == "mnist":
                for row, label in zip(x.astype(np.int32), y):
                    f.write(f"|features {' '.join(map(str, row))} |labels {label}:1\n")
                return
            # Values k/100 written from a table of their texts (formatting each is slower).
            text = [f"{k / 100:.2f}" for k in range(-999, 1000)]
            codes = np.rint(x * 100).astype(np.int64) + 999
            for i, label in enumerate(y):
                lo, hi = offsets[i], offsets[i + 1]
                lines = [f"{i} |features {' '.join(map(text.__getitem__, row))}" for row in codes[lo:hi].tolist()]
                lines[0] += f" |labels {label}:1"
                f.write("\n".join(lines) + "\n")

    def cbf():
        import exfeed

        exfeed.convert(f"{data}/data.ctf", f"{data}/data.cbf", inputs=inputs, chunk_size=1 << 20)

    def litdata():
        import litdata

        litdata.optimize(fn=_litdata_item, inputs=[(data, dataset, i) for i in range(n)],
                         output_dir=f"{data}/litdata", chunk_bytes="64MB", num_workers=1)

    def datasets():
        import datasets
        import pyarrow as pa

        rows = pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), dim)
        if dataset == "sequences":
            rows = pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), rows)
        datasets.Dataset(pa.table({"x": rows, "y": pa.array(y)})).save_to_disk(f"{data}/datasets")

    def mosaic():
        from streaming import MDSWriter

        shape = f":{dim}" if dataset == "mnist" else ""  # a shape of its own per sequence
        with MDSWriter(out=f"{data}/mds", columns={"x": f"ndarray:float32{shape}", "y": "int"}) as out:
            for row, label in items():
                out.write({"x": row, "y": label})

    def webdataset():
        import webdataset as wds

        os.makedirs(f"{data}/wds")
        shards = 16
        writers = [wds.TarWriter(f"{data}/wds/{s:04d}.tar") for s in range(shards)]
        for i, (row, label) in enumerate(items()):
            writers[i % shards].write({"__key__": f"{i:09d}", "x.npy": row, "cls": label})
        for out in writers:
            out.close()

    for name, write in (("memmap", memmap), ("exfeed-ctf", ctf), ("exfeed-cbf", cbf), ("litdata", litdata),
                        ("datasets", datasets), ("mosaic", mosaic), ("webdataset", webdataset)):
        if name in wanted and name not in seconds:
            timed(name, write)
    return seconds


def _litdata_item(item):
    data, dataset, i = item
    x, y = (np.load(f"{data}/{name}.npy", mmap_mode="r") for name in ("x", "y"))
    if dataset == "mnist":
        return {"x": x[i].copy(), "y": int(y[i])}
    offsets = np.load(f"{data}/offsets.npy", mmap_mode="r")
    return {"x": x[offsets[i]:offsets[i + 1]].copy(), "y": int(y[i])}
# ---------------------------------------------------------------- one loader, in its own process


def loader(name: str, data: str, workers: int, n: int, dataset: str):
    """An iterable over minibatches, as that loader's users write it; each minibatch becomes
    (features, labels, lengths): MNIST-like, float32 [B, 784], int64 [B] and None; sequences,
    float32 [B, longest, 32] padded with 0, the labels and int64 [B]."""
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    mnist = dataset == "mnist"
    batch = BATCH if mnist else SEQ_BATCH
    lengths_key = None if mnist else "lengths"
    collate = None if mnist else _padded_batch
    if name == "memmap":
        x, y = np.load(f"{data}/x.npy", mmap_mode="r"), np.load(f"{data}/y.npy", mmap_mode="r")
        offsets = np.load(f"{data}/offsets.npy")

        class Memmap:
            epoch = 0

            def __iter__(self):
                order = np.random.default_rng(self.epoch).permutation(n)
                self.epoch += 1
                for i in range(0, n, batch):
                    picked = np.sort(order[i:i + batch])
                    if mnist:
                        yield torch.from_numpy(x[picked]), torch.from_numpy(y[picked]), None
                        continue
                    starts, lengths = offsets[picked], offsets[picked + 1] - offsets[picked]
                    sequence = np.repeat(np.arange(len(picked)), lengths)
                    step = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
                    padded = np.zeros((len(picked), lengths.max(), SEQ_DIM), dtype=np.float32)
                    padded[sequence, step] = x[starts[sequence] + step]
                    yield torch.from_numpy(padded), torch.from_numpy(y[picked]), torch.from_numpy(lengths)

        return Memmap()
    if name == "fresh":
        lengths = np.diff(np.load(f"{data}/offsets.npy"))

        class Fresh(IterableDataset):
            def __iter__(self):
                info = torch.utils.data.get_worker_info()
                share = range(0, n, batch)[info.id::info.num_workers] if info else range(0, n, batch)
                for i in share:
                    b = min(batch, n - i)
                    if mnist:
                        yield torch.empty((b, DIM)), torch.zeros(b, dtype=torch.int64), None
                    else:
                        part = torch.from_numpy(lengths[i:i + b])
                        yield torch.empty((b, int(part.max()), SEQ_DIM)), torch.zeros(b, dtype=torch.int64), part

        return DataLoader(Fresh(), batch_size=None, num_workers=workers)
    if name.startswith("exfeed"):
        import exfeed.torch

        path = f"{data}/data.{name.split('-')[1]}"
        options = {"inputs": INPUTS if mnist else SEQ_INPUTS} if path.endswith(".ctf") else {}
        dataset = exfeed.torch.Dataset(path, batch_size=batch, layout="packed" if mnist else "padded", sparse="ids",
                                       **options)
        return _triples(DataLoader(dataset, batch_size=None, num_workers=workers), "features", "labels",
                        None if mnist else "features_lengths")
    if name == "litdata":
        import litdata

        dataset = litdata.StreamingDataset(f"{data}/litdata", shuffle=True)
        return _triples(litdata.StreamingDataLoader(dataset, batch_size=batch, num_workers=workers,
                                                    collate_fn=collate), "x", "y", lengths_key)
    if name == "datasets":
        import datasets

        dataset = datasets.load_from_disk(f"{data}/datasets").with_format("torch")
        return _triples(DataLoader(dataset, batch_size=batch, shuffle=True, num_workers=workers, collate_fn=collate),
                        "x", "y", lengths_key)
    if name == "mosaic":
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        dataset = StreamingDataset(local=f"{data}/mds", shuffle=True, batch_size=batch)
        return _triples(DataLoader(dataset, batch_size=batch, num_workers=workers, collate_fn=collate),
                        "x", "y", lengths_key)
    if name == "webdataset":
        import webdataset as wds

        shards = sorted(f"{data}/wds/{s}" for s in os.listdir(f"{data}/wds"))
        dataset = (wds.WebDataset(shards, shardshuffle=len(shards), empty_check=False)
                   .shuffle(1000).decode().to_tuple("x.npy", "cls").batched(batch, collation_fn=collate or
                                                                            wds.filters.default_collation_fn))
        batches = wds.WebLoader(dataset, batch_size=None, num_workers=workers)
        return batches if mnist else _triples(batches, "x", "y", "lengths")
    raise ValueError(name)


def _padded_batch(items: list) -> dict:
    """The collate function of a peer's user for sequences (dicts, or (x, label) pairs):
    [B, longest, 32] padded with 0."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    pairs = [(item["x"], item["y"]) if isinstance(item, dict) else item for item in items]
    xs = [torch.as_tensor(x) for x, _ in pairs]
    ys = [int(y) for _, y in pairs]
    return {"x": pad_sequence(xs, batch_first=True), "y": torch.tensor(ys),
            "lengths": torch.tensor([len(x) for x in xs])}


class _triples:
    """A loader's dict minibatches as (features, labels, lengths or None); re-iterable, one
    epoch per iteration."""

    def __init__(self, inner, xs: str, ys: str, lengths: str | None):
        self.inner, self.xs, self.ys, self.lengths = inner, xs, ys, lengths

    def __iter__(self):
        for batch in self.inner:
            yield batch[self.xs], batch[self.ys], batch[self.lengths] if self.lengths else None


def child(name: str, data: str, workers: int, n: int, dataset: str) -> None:
    """EPOCHS epochs of one loader; prints JSON."""
    import importlib

    import torch

    torch.set_num_threads(1)
    total = n if dataset == "mnist" else int(np.load(f"{data}/offsets.npy", mmap_mode="r")[-1])
    imported = time.perf_counter()
    if name in MODULES:
        importlib.import_module(MODULES[name])
    start = time.perf_counter()
    batches = loader(name, data, workers, n, dataset)
    made = time.perf_counter()
    first = None
    samples = 0
    ends = []  # the clock and the samples so far at the end of each epoch
    for _ in range(EPOCHS):
        for item in batches:
            xs, ys, lengths = item if len(item) == 3 else (*item, None)
            if first is None:
                first = time.perf_counter() - made
            assert xs.dtype == torch.float32 and xs.shape[-1] == (DIM if lengths is None else SEQ_DIM), xs.shape
            assert len(ys) == xs.shape[0], (ys.shape, xs.shape)
            samples += xs.shape[0] if lengths is None else int(lengths.sum())
        ends.append((time.perf_counter(), samples))
    seconds = ends[-1][0] - start
    if samples != EPOCHS * total:
        sys.exit(f"{name}: {samples} samples in {EPOCHS} epochs of {total}")
    worker_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 if workers else 0.0
    later = (ends[-1][0] - ends[0][0], ends[-1][1] - ends[0][1])  # the epochs after the first
    print(json.dumps({"seconds": seconds, "samples": samples, "later": later, "first": first, "import": start - imported,
                      "make": made - start, "rss": peak_rss_mb(), "worker_rss": worker_rss}))


# What each loader reads; dropped from the page cache and read through once before its runs (warm),
# so that every loader starts from a cache in the same state.
FILES = {"memmap": ("x.npy", "y.npy", "offsets.npy"), "exfeed-cbf": ("data.cbf",), "exfeed-ctf": ("data.ctf",),
         **{name: (directory,) for name, directory in DIRECTORIES.items()}}


def warm(data: str, name: str) -> None:
    for entry in FILES.get(name, ()):
        path = os.path.join(data, entry)
        paths = [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs] if os.path.isdir(path) else [path]
        for p in paths:
            with open(p, "rb", buffering=0) as f:
                # Dropped from the page cache first, then read in order: every loader's files are
                # cached the same way, as a first sequential read leaves them. (A file the jobs
                # before left cached piecemeal read up to 1.2x slower here, the same bytes.)
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                while f.read(1 << 20):
                    pass


def measure(name: str, data: str, workers: int, n: int, dataset: str) -> dict:
    out = subprocess.run([sys.executable, "-W", "ignore", __file__, "--child", name, str(workers), "--data", data,
                          "--samples", str(n), "--set", dataset], capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr.strip() or out.stdout.strip())[-400:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--set", choices=tuple(SETS), default="mnist")
    ap.add_argument("--samples", type=int, help="samples of the MNIST-like set (200000), sequences of the other "
                    "(100000)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--loaders", default=",".join(LOADERS))
    ap.add_argument("--child", nargs=2, metavar=("LOADER", "WORKERS"))
    a = ap.parse_args()
    n = a.samples or SETS[a.set]
    if a.child:
        return child(a.child[0], a.data, int(a.child[1]), n, a.set)

    data = os.path.join(a.data, a.set)
    what = (f"{n} MNIST-like samples, minibatch {BATCH}" if a.set == "mnist" else
            f"{n} sequences of 1-{SEQ_LONGEST} samples of {SEQ_DIM} values, minibatch {SEQ_BATCH} sequences padded")
    print(f"load average {os.getloadavg()}; {what}, {EPOCHS} shuffled epochs; medians of {a.runs}", flush=True)
    names = a.loaders.split(",")
    prep = prepare(data, n, a.set, names)
    rows = {}
    for name in names:
        warm(data, name)  # once, before any run (the page cache holds every loader's files)
    cases = [(name, workers) for name in names for workers in ONLY_WORKERS.get(name, (0, 2))]
    results = {case: [] for case in cases}
    for _ in range(a.runs):
        # Rounds of one run of each: a change of the machine's load falls on every loader alike.
        for name, workers in cases:
            results[(name, workers)].append(measure(name, data, workers, n, a.set))
    for (name, workers), runs in results.items():
        failed = [r["error"] for r in runs if "error" in r]
        if failed:
            print(f"{name:11} workers={workers}: failed: {failed[0]}", flush=True)
            continue
        rate = statistics.median(r["samples"] / r["seconds"] for r in runs)
        later = statistics.median(r["later"][1] / r["later"][0] for r in runs)
        first = statistics.median(r["first"] for r in runs)
        imported = statistics.median(r["import"] for r in runs)
        made = statistics.median(r["make"] for r in runs)
        rss = max(r["rss"] for r in runs)
        worker = max(r["worker_rss"] for r in runs)
        rows[(name, workers)] = (rate, later)
        print(f"{name:11} workers={workers}: {rate / 1e3:7.1f}k samples/s (later epochs {later / 1e3:7.1f}k), "
              f"first batch {first:6.3f} s "
              f"(made in {made:.3f} s, imported in {imported:.2f} s), peak RSS {rss:5.0f} MB" + (f" (largest worker {worker:.0f} MB)" if workers else "")
              + (f", prepared in {prep[name]:.1f} s" if name in prep else ""), flush=True)
    ceiling, cap = rows.get(("memmap", 0)), rows.get(("fresh", 2))
    for name in ("exfeed-cbf", "exfeed-ctf"):
        for workers, bound, what in ((0, ceiling, "the memmap ceiling"), (2, cap, "the fresh-tensor transfer cap")):
            if bound and (name, workers) in rows:
                (rate, later), (bound_rate, bound_later) = rows[(name, workers)], bound
                print(f"{name} workers={workers}: {rate / bound_rate:.0%} of {what} "
                      f"(later epochs: {later / bound_later:.0%} of its later epochs)")
    print(f"load average {os.getloadavg()}", flush=True)
    if a.set == "mnist":
        subprocess.run([sys.executable, "-W", "ignore", os.path.join(os.path.dirname(__file__), "shuffle_quality.py"),
                        "--data", data, "--samples", str(n)], check=False)


if __name__ == "__main__":
    main()

"""How well each loader's default shuffle mixes a data set (docs/pytorch.md, "How well the
default window shuffles"; scripts/bench-loaders runs it with the peers installed).

The orders: exfeed.torch's default (read from the real files, keys delivered in one epoch),
exfeed.Reader's (CNTK's window), a full shuffle, and the peers' defaults computed with their
own shuffle functions on the layout the benchmark writes (LitData: chunks of 64 MB, Mosaic
Streaming: shards of 64 MiB, WebDataset: 16 shards and a buffer of 1000). Three figures per
order of N samples in minibatches of 256:

- moved: the mean distance a sample moves, |delivered position - file position| / N (a full
  shuffle: 1/3; no shuffle: 0);
- neighbours kept: the share of samples that share their minibatch with the sample after them
  in the file (a full shuffle: 255 / (N - 1); no shuffle: 1);
- classes: for a file sorted by label into 10 classes of N / 10, the mean number of classes in
  a minibatch (a full shuffle: 10.0; no shuffle: 1.0-2.0).
"""

from __future__ import annotations

import argparse

import numpy as np

BATCH = 256
CLASSES = 10


def figures(order: np.ndarray) -> tuple[float, float, float]:
    n = len(order)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)  # where each file sample is delivered
    moved = float(np.abs(position - np.arange(n)).mean() / n)
    batch = position // BATCH
    kept = float((batch[:-1] == batch[1:]).mean())
    labels = order * CLASSES // n  # the label of each delivered sample in a file sorted by label
    per_batch = [len(np.unique(labels[i:i + BATCH])) for i in range(0, n, BATCH)]
    return moved, kept, float(np.mean(per_batch))


def exfeed_order(path: str, inputs, torch_defaults: bool) -> np.ndarray:
    import exfeed
    import exfeed.torch

    options = {"inputs": inputs} if path.endswith(".ctf") else {}
    if torch_defaults:
        dataset = exfeed.torch.Dataset(path, batch_size=BATCH, layout="packed", with_keys=True, **options)
        keys = np.concatenate([b["keys"].numpy() for b in dataset])
    else:
        with exfeed.Reader(path, minibatch_sequences=BATCH, **options) as reader:
            keys = np.concatenate([mb.keys for mb in reader])
    # Keys in file order (line numbers, or the byte offsets of a CTF file read without an
    # index) as positions in the file.
    return np.searchsorted(np.sort(keys), keys)


def litdata_order(n: int, per_chunk: int, seed: int = 0) -> np.ndarray:
    """LitData's FullShuffle on one worker: the chunks permuted, then each chunk's items in
    blocks of its default item window (256) in random order, shuffled inside each block."""
    from litdata.streaming.shuffle import _DEFAULT_ITEM_SHUFFLE_WINDOW
    from litdata.utilities.shuffle import _block_shuffle

    rng = np.random.RandomState(seed)
    chunks = [np.arange(s, min(s + per_chunk, n)) for s in range(0, n, per_chunk)]
    out = []
    for c in rng.permutation(len(chunks)):
        out.extend(_block_shuffle(chunks[c].tolist(), _DEFAULT_ITEM_SHUFFLE_WINDOW, rng))
    return np.asarray(out)


def mosaic_order(n: int, per_shard: int, seed: int = 0) -> np.ndarray:
    """Mosaic Streaming's default: py1e, one canonical node (one physical node), a block of
    max(4,000,000 // nodes, 2^18) samples."""
    from streaming.base.shuffle import get_shuffle

    sizes = np.array([min(per_shard, n - s) for s in range(0, n, per_shard)], dtype=np.int64)
    return np.asarray(get_shuffle("py1e", sizes, 1, seed, 0, max(4_000_000, 1 << 18)))


def webdataset_order(n: int, shards: int = 16, buffer: int = 1000, seed: int = 0) -> np.ndarray:
    """WebDataset as the benchmark uses it: the shards shuffled, then .shuffle(1000)."""
    import random

    from webdataset.filters import _shuffle

    rng = random.Random(seed)
    per = -(-n // shards)
    order = list(range(shards))
    rng.shuffle(order)
    stream = (i for s in order for i in range(s * per, min(n, (s + 1) * per)))
    return np.fromiter(_shuffle(stream, bufsize=buffer, initial=100, rng=rng), dtype=np.int64)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True, help="the directory of scripts/bench-loaders' files")
    ap.add_argument("--samples", type=int, required=True)
    ap.add_argument("--sample-bytes", type=int, default=784 * 4 + 16)
    a = ap.parse_args()
    n = a.samples
    inputs = {"features": ("dense", 784), "labels": ("sparse", 10)}
    per_64mb = (64 << 20) // a.sample_bytes
    import exfeed.torch

    window = f"{exfeed.torch.WINDOW_BYTES >> 20} MiB windows"
    orders = {
        "full shuffle": np.random.default_rng(0).permutation(n),
        f"exfeed.torch default, {window} (CTF)": exfeed_order(f"{a.data}/data.ctf", inputs, True),
        f"exfeed.torch default, {window} (CBF)": exfeed_order(f"{a.data}/data.cbf", inputs, True),
        "exfeed.Reader default, CNTK's window (CBF)": exfeed_order(f"{a.data}/data.cbf", inputs, False),
        "LitData 0.2.76 (64 MB chunks)": litdata_order(n, per_64mb),
        "Mosaic Streaming 0.13.0 (py1e)": mosaic_order(n, per_64mb),
        "WebDataset (16 shards, buffer 1000)": webdataset_order(n),
        "no shuffle": np.arange(n),
    }
    print(f"{n} samples, minibatches of {BATCH}")
    print("| order | moved (full: 0.333) | neighbours kept | classes per minibatch (full: 10) |")
    print("|---|---|---|---|")
    for name, order in orders.items():
        assert sorted(order.tolist()) == list(range(n)), name
        moved, kept, classes = figures(order)
        print(f"| {name} | {moved:.3f} | {kept:.2%} | {classes:.1f} |", flush=True)


if __name__ == "__main__":
    main()

"""The measurements of scripts/bench-remote: exfeed reading a CTF file and its CBF from the
local S3 server (SeaweedFS, started by scripts/services) beside the same files on the local
disk, what a user would do instead (download the object, then read it), and Mosaic Streaming
reading MDS shards of the same samples from the same server. Run by scripts/bench-remote in
its own virtual environment; every reader is a fresh process."""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np

DIM, CLASSES, MINIBATCH = 200, 10, 256
INPUTS = ["-i", f"x:dense:{DIM}", "-i", f"y:sparse:{CLASSES}"]
RANK0 = ["--num-workers", "8", "--worker-rank", "0", "--window-chunks", "1"]


def env(name: str) -> str:
    return os.environ[f"EXFEED_TEST_S3_{name}"]


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


# ---------------------------------------------------------------- the data


# `d.ddd` for 0..9999 and `ddd ` for 0..999: the text of a value in [0, 1e7) as `d.dddddd `.
HIGH = np.array([list(b"%d.%03d" % divmod(i, 1000)) for i in range(10_000)], np.uint8)
LOW = np.array([list(b"%03d " % i) for i in range(1000)], np.uint8)


def ctf_lines(first_id: int, values: np.ndarray, labels: np.ndarray) -> bytes:
    """`ID |x v1 ... v200 |y k:1` lines; `values` are integers in [0, 1e7), written as
    `d.dddddd` (fixed width, so the text is made with table look-ups, not a format call per
    value)."""
    rows = values.shape[0]
    high, low = np.divmod(values.astype(np.int32), 1000)
    text = np.concatenate([HIGH[high], LOW[low]], axis=2).reshape(rows, DIM * 9)
    return b"".join(
        b"%d |x " % (first_id + i) + text[i, :-1].tobytes() + b" |y %d:1\n" % labels[i]
        for i in range(rows)
    )


def generate(ctf: str, mb: int, mds_dir: str) -> int:
    """About `mb` MB of dense CTF with sequence ids (one sequence a line) at `ctf`, and the same
    samples (x as float32[200], y as int) as MDS shards in `mds_dir` (MDSWriter's default 64 MB
    shards, uncompressed). Returns the number of samples."""
    from streaming import MDSWriter

    rng = np.random.default_rng(21)
    block, n = 4096, 0
    with open(ctf, "wb") as out, MDSWriter(
        out=mds_dir, columns={"x": f"ndarray:float32:{DIM}", "y": "int"}
    ) as mds:
        while out.tell() < mb * 1_000_000:
            values = rng.integers(0, 10_000_000, (block, DIM))
            labels = rng.integers(0, CLASSES, block)
            out.write(ctf_lines(n, values, labels))
            floats = (values / 1e6).astype(np.float32)
            for i in range(block):
                mds.write({"x": floats[i], "y": int(labels[i])})
            n += block
    return n


def uploaded(s3, bucket: str, key: str, path: str) -> bool:
    """Whether the bucket holds `key` already, of `path`'s size (reused data, uploaded before)."""
    try:
        return s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == os.path.getsize(path)
    except Exception:
        return False


def s3_client():
    import boto3

    return boto3.client("s3", endpoint_url=env("ENDPOINT"))


# ---------------------------------------------------------------- the counting proxy


class CountingProxy:
    """A loopback TCP proxy in front of the S3 server: counts the bytes the server sends
    (response headers included) and the GET requests the client sends."""

    def __init__(self, upstream: str):
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.bytes_down = self.gets = 0
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def reset(self) -> None:
        with self.lock:
            self.bytes_down = self.gets = 0

    def accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            server = socket.create_connection(self.upstream)
            threading.Thread(target=self.pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self.pump, args=(server, client, True), daemon=True).start()

    def pump(self, src: socket.socket, dst: socket.socket, down: bool) -> None:
        try:
            while data := src.recv(1 << 20):
                with self.lock:
                    if down:
                        self.bytes_down += len(data)
                    else:
                        self.gets += data.count(b"GET /")
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


# ---------------------------------------------------------------- exfeed runs


def exfeed_read(exfeed: str, source: str, endpoint: str, extra: list[str]) -> tuple[float, str]:
    """One `exfeed read` as a fresh process: wall-clock seconds (process start to exit) and its
    summary line."""
    cmd = [exfeed, "read", source, "-m", str(MINIBATCH), *extra]
    if source.endswith(".ctf"):
        cmd += INPUTS
    if source.startswith("s3://"):
        cmd += ["--storage-option", f"aws_endpoint={endpoint}"]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    return secs, out.stderr.strip().splitlines()[-1]


def medians(runs: int, measures: dict) -> dict:
    """Each of `measures` (name -> function giving seconds) `runs` times, alternating; medians."""
    times = {name: [] for name in measures}
    for _ in range(runs):
        for name, f in measures.items():
            times[name].append(f())
    return {name: statistics.median(t) for name, t in times.items()}


# ---------------------------------------------------------------- Mosaic Streaming


def mosaic_child(remote: str, cache: str) -> None:
    """One pass over StreamingDataset(remote, local=cache) in this process, cache empty at the
    start; prints JSON seconds: to the first sample, to the first 256, to the end."""
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    dataset = StreamingDataset(remote=remote, local=cache, shuffle=True, batch_size=MINIBATCH)
    first = first_batch = None
    n = 0
    for sample in dataset:
        n += 1
        if first is None:
            first = time.perf_counter() - start
        if n == MINIBATCH:
            first_batch = time.perf_counter() - start
    end = time.perf_counter() - start
    assert sample["x"].shape == (DIM,)
    shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps({"first": first, "first_batch": first_batch, "end": end, "samples": n}))


def mosaic(remote: str, cache: str) -> dict:
    out = subprocess.run([sys.executable, "-W", "ignore", __file__, "--mosaic-child", remote, cache],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"Mosaic Streaming failed: {out.stderr.strip()[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- the figures


def pace(size: int, get) -> float:
    """Seconds to fetch `size` bytes with `get("bytes=A-B")`, in 8 MiB ranges, 8 at a time."""
    part = 8 << 20
    ranges = [f"bytes={a}-{min(a + part, size) - 1}" for a in range(0, size, part)]
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = sum(len(b) for b in pool.map(get, ranges))
    assert got == size, (got, size)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exfeed")
    ap.add_argument("--dir")
    ap.add_argument("--mb", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--whole-runs", type=int, help="runs of the whole-file reads (default: --runs)")
    ap.add_argument("--whole-only", action="store_true",
                    help="only the whole-file reads and the servers' pace (no Mosaic shards uploaded)")
    ap.add_argument("--mosaic-child", nargs=2)
    a = ap.parse_args()
    if a.mosaic_child:
        return mosaic_child(*a.mosaic_child)

    endpoint, bucket = env("ENDPOINT"), env("BUCKET")
    whole_runs = a.whole_runs or a.runs
    # exfeed, boto3 and Mosaic Streaming (S3_ENDPOINT_URL) take the keys from the environment.
    os.environ.update(AWS_ACCESS_KEY_ID=env("ACCESS_KEY_ID"), AWS_SECRET_ACCESS_KEY=env("SECRET_ACCESS_KEY"),
                      AWS_REGION="us-east-1", AWS_DEFAULT_REGION="us-east-1", S3_ENDPOINT_URL=endpoint)
    os.makedirs(a.dir, exist_ok=True)
    ctf, cbf = os.path.join(a.dir, "remote.ctf"), os.path.join(a.dir, "remote.cbf")
    prefix = f"s3://{bucket}/bench"
    urls = {"ctf": f"{prefix}/remote.ctf", "cbf": f"{prefix}/remote.cbf"}
    local = {"ctf": ctf, "cbf": cbf}

    t = time.perf_counter()
    s3 = s3_client()
    made, mds = os.path.join(a.dir, f"made-{a.mb}"), os.path.join(a.dir, "mds")
    if not os.path.exists(made):  # the data of an interrupted run is reused
        samples = generate(ctf, a.mb, mds)
        subprocess.run([a.exfeed, "convert", ctf, cbf, *INPUTS, "--no-sync", "--force"], check=True)
        with open(made, "w") as f:
            f.write(str(samples))
    with open(made) as f:
        samples = int(f.read())
    for kind in ("ctf", "cbf"):
        if not uploaded(s3, bucket, f"bench/remote.{kind}", local[kind]):
            s3.upload_file(local[kind], bucket, f"bench/remote.{kind}")
    for name in [] if a.whole_only else os.listdir(mds):
        s3.upload_file(os.path.join(mds, name), bucket, f"bench/mds/{name}")
    size = {k: os.path.getsize(p) for k, p in local.items()}
    print(f"remote bench: {samples} samples (200 floats + a sparse label); CTF {size['ctf'] / 1e6:.0f} MB, "
          f"CBF {size['cbf'] / 1e6:.0f} MB, MDS shards of the same samples; made and uploaded in "
          f"{time.perf_counter() - t:.0f} s; medians of {a.runs} (whole-file reads and Mosaic: {whole_runs}); page cache warm for the local files and "
          f"the server's volumes; load average {load()}")

    # (1) The whole file, one process, default options: locally, from S3, and over HTTP from
    # nginx (the same ranged reads from a server that sends a file as fast as loopback goes,
    # which tells the client's own cost from the S3 server's pace).
    http_root, http_url = os.environ["EXFEED_TEST_HTTP_ROOT"], os.environ["EXFEED_TEST_HTTP_URL"]
    for kind in ("ctf", "cbf"):
        served = os.path.join(http_root, f"bench-remote.{kind}")
        shutil.copyfile(local[kind], served)
        sources = {"local": local[kind], "S3": urls[kind], "HTTP": f"{http_url}/bench-remote.{kind}"}
        summary = {}

        def run(source):
            secs, summary[source] = exfeed_read(a.exfeed, source, endpoint, [])
            return secs

        m = medians(whole_runs, {name: (lambda s=s: run(s)) for name, s in sources.items()})
        os.remove(served)
        mb = size[kind] / 1e6
        rates = ", ".join(
            f"{name} {m[name]:.2f} s ({mb / m[name]:.0f} MB/s, {samples / m[name] / 1e3:.0f}k samples/s"
            + ("" if name == "local" else f", {m['local'] / m[name]:.0%} of local") + ")"
            for name in sources)
        print(f"  read {kind.upper()} whole: {rates}; load {load()}")
        for name, source in sources.items():
            print(f"    {name}: {summary[source]}")

    # The server's own pace: the whole object in ranged GETs of 8 MiB, 8 at a time (as many as
    # exfeed keeps in flight with its default options on 2 cores, at most), nothing decoded.
    for kind in ("ctf", "cbf"):
        served = os.path.join(http_root, f"bench-remote.{kind}")
        shutil.copyfile(local[kind], served)
        paces = {
            "S3 (boto3)": pace(size[kind], lambda r: s3.get_object(
                Bucket=bucket, Key=f"bench/remote.{kind}", Range=r)["Body"].read()),
            "HTTP (urllib)": pace(size[kind], lambda r: urllib.request.urlopen(urllib.request.Request(
                f"{http_url}/bench-remote.{kind}", headers={"Range": r})).read()),
        }
        os.remove(served)
        print(f"  the servers' pace, {kind.upper()} in ranged GETs of 8 MiB, 8 at a time: " + ", ".join(
            f"{name} {secs:.2f} s = {size[kind] / 1e6 / secs:.0f} MB/s" for name, secs in paces.items())
            + f"; load {load()}")

    if a.whole_only:
        return

    # (4) What a user would do instead: download the object (boto3, as `aws s3 cp` does), then
    # read it. One download of each object (they take long); the reading is the local figure.
    download = os.path.join(a.dir, "downloaded")
    downloaded = {}
    for kind in ("ctf", "cbf"):
        start = time.perf_counter()
        s3.download_file(bucket, f"bench/remote.{kind}", download)
        downloaded[kind] = time.perf_counter() - start
        os.remove(download)
        print(f"  download the {kind.upper()} object with boto3 (10 threads): {downloaded[kind]:.2f} s = "
              f"{size[kind] / 1e6 / downloaded[kind]:.0f} MB/s; load {load()}")

    # (2) Rank 0 of 8, window 1 chunk: the first minibatch, from S3, locally, after the download.
    chunk_sizes = {"ctf 32M": ["--chunk-size", "32M"], "ctf 4M": ["--chunk-size", "4M"], "cbf": []}
    for name, extra in chunk_sizes.items():
        kind = name.split()[0]
        first = [*RANK0, *extra, "--stop-after", "1"]
        m = medians(a.runs, {
            "local": lambda: exfeed_read(a.exfeed, local[kind], endpoint, first)[0],
            "s3": lambda: exfeed_read(a.exfeed, urls[kind], endpoint, first)[0],
        })
        then = downloaded[kind] + m["local"]
        print(f"  first minibatch, rank 0 of 8, {name}: local {m['local'] * 1e3:.0f} ms, S3 "
              f"{m['s3'] * 1e3:.0f} ms ({m['s3'] / m['local']:.1f}x); download first, then read: "
              f"{then:.2f} s ({then / m['s3']:.0f}x S3); load {load()}")

    # (3) Bytes the server sends rank 0 of 8 over a sweep (through the counting proxy).
    proxy = CountingProxy(endpoint)
    proxied = f"http://127.0.0.1:{proxy.port}"
    for name, extra in chunk_sizes.items():
        kind = name.split()[0]
        header, chunk = 0, {"ctf 32M": 32 << 20, "ctf 4M": 4 << 20}.get(name)
        if kind == "cbf":  # its header (from its offset to the end) and its largest chunk
            info = subprocess.run([a.exfeed, "info", cbf, "--json", "--all-chunks"], check=True,
                                  capture_output=True, text=True)
            info = json.loads(info.stdout)
            header = size["cbf"] - info["headerOffset"]
            chunk = max(c["bytes"] for c in info["chunks"])
        proxy.reset()
        secs, summary = exfeed_read(a.exfeed, urls[kind], proxied, [*RANK0, *extra])
        goal = size[kind] / 8 + chunk + header
        print(f"  rank 0 of 8, one sweep, {name}: {proxy.bytes_down / 1e6:.1f} MB from the server in "
              f"{proxy.gets} GETs = {proxy.bytes_down / size[kind]:.3f} of the object, "
              f"{proxy.bytes_down / goal:.2f}x the goal (1/8 + one chunk of {chunk / 1e6:.1f} MB + the header "
              f"{header / 1e3:.0f} kB = {goal / 1e6:.1f} MB); {secs:.2f} s\n    {summary}")

    # (5) Mosaic Streaming on its MDS shards of the same samples, cache emptied each run.
    cache = os.path.join(a.dir, "mosaic-cache")
    runs = [mosaic(f"{prefix}/mds", cache) for _ in range(whole_runs)]
    first, batch, end = (statistics.median(r[k] for r in runs) for k in ("first", "first_batch", "end"))
    mds_bytes = sum(o["Size"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="bench/mds/")["Contents"])
    print(f"  Mosaic Streaming (shuffle=True, one process, no DataLoader workers), {runs[0]['samples']} samples "
          f"of {mds_bytes / 1e6:.0f} MB of MDS shards: first sample {first * 1e3:.0f} ms, first {MINIBATCH} "
          f"{batch * 1e3:.0f} ms, all {end:.2f} s = {runs[0]['samples'] / end / 1e3:.0f}k samples/s "
          f"(after its imports); load {load()}")


if __name__ == "__main__":
    main()

"""URLs in the Python API, against the real test services (`scripts/services`: SeaweedFS for s3://
with signed requests, nginx for http://, fake-gcs-server for gs://): exfeed.Reader, check, dump,
info, to_arrow, convert's input, exfeed.torch.Dataset, exfeed.cntk.io's deserializers and
exfeed.ray.read with the data only in the bucket, with storage_options={...} or the
environment's credentials.

Without the services' variables these tests are skipped; under CI=true they fail."""

from __future__ import annotations

import os
import pathlib
import subprocess
import urllib.parse
import urllib.request
import uuid
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import IN_CI, INPUTS, require, write_ctf

import exfeed


def _services() -> dict:
    if "EXFEED_TEST_S3_ENDPOINT" not in os.environ:
        why = 'the test services are not running: eval "$(scripts/services start)" first'
        if IN_CI:
            pytest.fail(f"{why} (required in CI)")
        pytest.skip(why)
    return dict(os.environ)


def _put(local: pathlib.Path, key: str) -> None:
    """Puts the file into the test bucket under `key` (a signed PUT by curl)."""
    env = os.environ
    subprocess.run(
        ["curl", "-sSf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
         f"{env['EXFEED_TEST_S3_ACCESS_KEY_ID']}:{env['EXFEED_TEST_S3_SECRET_ACCESS_KEY']}",
         "-T", str(local),
         f"{env['EXFEED_TEST_S3_ENDPOINT']}/{env['EXFEED_TEST_S3_BUCKET']}/{key}"],
        check=True,
    )


@pytest.fixture
def remote(tmp_path):
    """A 300-sequence CTF file put into the bucket (a signed PUT by curl) and served by nginx:
    its URLs, the storage options of the read-write identity, and {key: (rows, label)}."""
    env = _services()
    local = tmp_path / "data.ctf"
    truth = write_ctf(local, 300)
    name = f"py-{os.getpid()}-{uuid.uuid4().hex}"
    endpoint, bucket = env["EXFEED_TEST_S3_ENDPOINT"], env["EXFEED_TEST_S3_BUCKET"]
    key_id, secret = env["EXFEED_TEST_S3_ACCESS_KEY_ID"], env["EXFEED_TEST_S3_SECRET_ACCESS_KEY"]
    _put(local, f"{name}/data.ctf")
    served = pathlib.Path(env["EXFEED_TEST_HTTP_ROOT"]) / f"{name}.ctf"
    served.write_bytes(local.read_bytes())
    storage = {
        "aws_endpoint": endpoint,
        "aws_access_key_id": key_id,
        "aws_secret_access_key": secret,
        "aws_region": "us-east-1",
    }
    yield SimpleNamespace(
        local=local,
        s3=f"s3://{bucket}/{name}/data.ctf",
        http=f"{env['EXFEED_TEST_HTTP_URL']}/{name}.ctf",
        storage=storage,
        truth=truth,
        secret=secret,
    )
    served.unlink()


def _sources(remote):
    """(url, storage_options) for the bucket and the HTTP server."""
    return [(remote.s3, remote.storage), (remote.http, None)]


def test_the_reader_and_the_tools_read_a_url_as_its_file(remote, tmp_path):
    for url, storage in _sources(remote):
        options = dict(inputs=INPUTS, storage_options=storage)
        keys = [
            k
            for mb in exfeed.Reader(url, minibatch_size=16, randomize=False, **options)
            for k in mb.keys.tolist()
        ]
        assert keys == sorted(remote.truth), url
        assert exfeed.check(url, **options)["sequences"] == 300, url
        for d in exfeed.dump(url, **options):
            np.testing.assert_allclose(d["x"], remote.truth[d["key"]][0], rtol=1e-6)
        table = exfeed.to_arrow(url, **options).read_all()
        assert sorted(table.column("key").to_pylist()) == sorted(remote.truth), url
        out = tmp_path / f"{len(url)}.cbf"
        assert exfeed.convert(url, out, **options)["sequences"] == 300, url
        assert exfeed.info(out)["sequences"] == 300
    # Into the bucket, with the storage options given for the input: the same bytes as the
    # local file, and an existing object refused unless overwrite=True.
    local, stored = tmp_path / "local.cbf", remote.s3 + ".out.cbf"
    options = dict(inputs=INPUTS, storage_options=remote.storage)
    assert exfeed.convert(remote.local, local, inputs=INPUTS)["sequences"] == 300
    assert exfeed.convert(remote.local, stored, **options)["sequences"] == 300
    with pytest.raises(FileExistsError):
        exfeed.convert(remote.local, stored, **options)
    assert exfeed.info(stored, storage_options=remote.storage)["sequences"] == 300
    with exfeed.Reader(stored, minibatch_size=64, randomize=False,
                       storage_options=remote.storage) as back:
        assert [k for mb in back for k in mb.keys.tolist()] == sorted(remote.truth)


def _gcs_put(data: bytes, key: str) -> str:
    """Puts `data` into fake-gcs-server's bucket (the JSON API's media upload); its gs:// URL."""
    env = os.environ
    bucket = env["EXFEED_TEST_GCS_BUCKET"]
    name = urllib.parse.quote(key, safe="")
    upload = (f"{env['EXFEED_TEST_GCS_URL']}/upload/storage/v1/b/{bucket}/o"
              f"?uploadType=media&name={name}")
    request = urllib.request.Request(upload, data=data, method="POST",
                                     headers={"Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(request) as response:
        assert response.status == 200
    return f"gs://{bucket}/{key}"


def test_the_reader_and_check_read_a_gs_url(remote):
    url = _gcs_put(remote.local.read_bytes(), f"py-{os.getpid()}-{uuid.uuid4().hex}/data.ctf")
    # An emulator: its base URL, and no credentials to sign with.
    storage = {"google_base_url": os.environ["EXFEED_TEST_GCS_URL"],
               "google_skip_signature": "true"}
    options = dict(inputs=INPUTS, storage_options=storage)
    with exfeed.Reader(url, minibatch_size=16, randomize=False, **options) as reader:
        assert [k for mb in reader for k in mb.keys.tolist()] == sorted(remote.truth)
    assert exfeed.check(url, **options)["sequences"] == 300
    with pytest.raises(OSError, match="not found") as caught:
        exfeed.check(url + ".missing", **options)
    assert url + ".missing" in str(caught.value)


def test_a_wrong_secret_is_refused_naming_the_url_and_never_showing_the_secret(remote):
    wrong = dict(remote.storage, aws_secret_access_key="wrong-secret-31c8e2d97a")
    with pytest.raises(OSError) as caught:
        exfeed.check(remote.s3, inputs=INPUTS, storage_options=wrong)
    shown = f"{caught.value} {caught.value!r}"
    assert remote.s3 in shown
    assert "wrong-secret-31c8e2d97a" not in shown and remote.secret not in shown
    with pytest.raises(TypeError, match="storage_options"):
        exfeed.check(remote.s3, inputs=INPUTS, storage_options=["aws_region=x"])


def test_a_torch_dataset_reads_a_url_in_dataloader_workers(remote):
    torch = require("torch")
    import exfeed.torch

    dataset = exfeed.torch.Dataset(
        remote.s3, minibatch_size=20, inputs=INPUTS, with_keys=True,
        storage_options=remote.storage,
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    keys = [k for batch in loader for k in batch["keys"].tolist()]
    assert sorted(keys) == sorted(remote.truth)


def test_cntk_io_deserializers_read_a_url(remote):
    from exfeed.cntk.io import CTFDeserializer, MinibatchSource, StreamDef, StreamDefs

    source = MinibatchSource(
        CTFDeserializer(remote.http, StreamDefs(x=StreamDef(field="x", shape=3))),
        randomize=False,
    )
    info = source.stream_info("x")
    samples = sum(len(rows) for rows, _ in remote.truth.values())
    mb = source.next_minibatch(samples)
    assert mb[info].num_sequences == 300 and mb[info].num_samples == samples


def test_ray_read_tasks_fetch_their_own_ranges_from_the_bucket(remote):
    ray = require("ray")
    import exfeed.ray

    remote.local.unlink()  # the data is only in the bucket
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        ds = exfeed.ray.read(
            remote.s3, inputs=INPUTS, chunk_size=2048, override_num_blocks=4,
            storage_options=remote.storage,
        )
        keys = sorted(r["key"] for r in ds.take_all())
        assert keys == sorted(remote.truth)
    finally:
        ray.shutdown()


def test_cache_dir_and_cache_limit_keywords(remote, tmp_path):
    cache = tmp_path / "cache"
    options = dict(inputs=INPUTS, storage_options=remote.storage, cache_dir=cache)
    for _ in range(2):
        with exfeed.Reader(remote.s3, minibatch_size=16, randomize=False, **options) as r:
            assert [k for mb in r for k in mb.keys.tolist()] == sorted(remote.truth)
        assert exfeed.check(remote.s3, **options)["sequences"] == 300
        assert exfeed.to_arrow(remote.s3, **options).read_all().num_rows == 300
        assert len(list((cache / "entries").iterdir())) > 0
    # A limit too small to keep a chunk: read uncached, with a ConfigWarning.
    small = dict(options, cache_dir=tmp_path / "small", cache_limit=100)
    with pytest.warns(exfeed.ConfigWarning, match="read uncached") as caught:
        with exfeed.Reader(remote.s3, minibatch_size=16, randomize=False, **small) as r:
            assert sum(len(mb.keys) for mb in r) == 300
    assert all(remote.secret not in str(w.message) for w in caught)
    with pytest.raises(ValueError, match="cache_limit"):
        exfeed.check(remote.s3, inputs=INPUTS, storage_options=remote.storage, cache_limit=10)


def _index_entries(cache: pathlib.Path) -> list:
    """The inodes of the cache's entries that hold a CTF index (an index cache's magic)."""
    entries = cache / "entries"
    if not entries.is_dir():
        return []
    return [e.stat().st_ino for e in entries.iterdir() if e.read_bytes().startswith(b"EXFIDX")]


def test_cache_index_keeps_a_urls_index_in_the_local_cache(remote, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))
    user_cache = tmp_path / "home-cache" / "exfeed" / "index"
    given = tmp_path / "cache"
    for cache_dir, where in [(None, user_cache), (given, given)]:
        options = dict(inputs=INPUTS, storage_options=remote.storage, cache_index=True)
        if cache_dir is not None:
            options["cache_dir"] = cache_dir
        kept = []
        for _ in range(2):
            with exfeed.Reader(remote.s3, minibatch_size=16, randomize=False, **options) as r:
                assert [k for mb in r for k in mb.keys.tolist()] == sorted(remote.truth)
            kept.append(_index_entries(where))
        # One entry, read the second time, not written again (the same file).
        assert len(kept[0]) == 1 and kept[1] == kept[0], (where, kept)
    assert len(_index_entries(user_cache)) == 1


def test_ray_read_expands_a_glob_by_listing_the_bucket(remote, tmp_path):
    ray = require("ray")
    import exfeed.ray

    prefix = remote.s3.rsplit("/", 1)[0]  # s3://bucket/NAME
    key_prefix = prefix.split("/", 3)[3]
    truth = {}
    for shard in range(3):
        local = tmp_path / f"train-{shard}.ctf"
        truth.update(write_ctf(local, 50, seed=shard, first_key=1000 * (shard + 1)))
        _put(local, f"{key_prefix}/train-{shard}.ctf")
        local.unlink()  # the data is only in the bucket
    remote.local.unlink()  # data.ctf, in the bucket too, does not match
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        source = exfeed.ray.ExfeedDatasource(
            f"{prefix}/train-*.ctf", inputs=INPUTS, storage_options=remote.storage
        )
        assert source._paths == [f"{prefix}/train-{i}.ctf" for i in range(3)]
        ds = exfeed.ray.read(
            f"{prefix}/train-*.ctf", inputs=INPUTS, chunk_size=1024, override_num_blocks=3,
            storage_options=remote.storage,
        )
        rows = ds.take_all()
        assert sorted(r["key"] for r in rows) == sorted(truth)
        for r in rows:
            x = np.array([list(sample) for sample in r["x"]], dtype=np.float32)
            np.testing.assert_array_equal(x, truth[r["key"]][0].astype(np.float32))
        with pytest.raises(exfeed.ConfigError, match="names no file"):
            exfeed.ray.read(f"{prefix}/nothing-*.ctf", inputs=INPUTS, storage_options=remote.storage)
        with pytest.raises(Exception, match="cannot list") as wrong:
            exfeed.ray.read(
                f"{prefix}/train-*.ctf", inputs=INPUTS,
                storage_options={**remote.storage, "aws_secret_access_key": "wrong-secret-0123"},
            )
        assert "wrong-secret-0123" not in str(wrong.value)
    finally:
        ray.shutdown()

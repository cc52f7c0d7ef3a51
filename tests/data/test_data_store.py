"""Dataset registry and store: mirror / cache / download, checksums, CLI (no network)."""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import urllib.error
from pathlib import Path

import pytest

from gpudefrag import cli_data
from gpudefrag.data import catalog, registry, store
from gpudefrag.data.registry import DatasetEntry
from gpudefrag.errors import ConfigError, DataError

REAL_MIRROR_FALLBACK = Path("/work/shared/data")
_ENV_MIRROR = os.environ.get("GPUDEFRAG_MIRROR")  # read before the fixtures replace it


def real_mirror() -> Path | None:
    """The real dataset mirror: $GPUDEFRAG_MIRROR, else /work/shared/data; None if absent."""
    env = _ENV_MIRROR
    for cand in ([Path(env)] if env else []) + [REAL_MIRROR_FALLBACK]:
        if (cand / "openb" / "openb_node_list_gpu_node.csv").is_file():
            return cand
    return None


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _entry(name: str, data: bytes, url: str | None = None, group: str = "openb") -> DatasetEntry:
    return DatasetEntry(
        name=name,
        group=group,
        relpath=f"{group}/{name}.csv",
        url=url,
        sha256=_sha(data),
        size=len(data),
        licence="test-licence",
        note="" if url else "mirror only (test)",
    )


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """Empty mirror and cache folders, a fresh checksum memo, and no network."""
    mirror = tmp_path / "mirror"
    cache = tmp_path / "cache"
    mirror.mkdir()
    monkeypatch.setenv("GPUDEFRAG_MIRROR", str(mirror))
    monkeypatch.setenv("GPUDEFRAG_CACHE", str(cache))
    store.clear_verify_cache()

    def no_network(url, timeout=None):
        if url.startswith("file:"):
            import urllib.request

            return urllib.request.urlopen(url, timeout=timeout)
        raise AssertionError(f"test tried to reach the network: {url}")

    monkeypatch.setattr(store, "_urlopen", no_network)
    yield
    store.clear_verify_cache()


@pytest.fixture
def mirror() -> Path:
    return Path(os.environ["GPUDEFRAG_MIRROR"])


@pytest.fixture
def cache() -> Path:
    return Path(os.environ["GPUDEFRAG_CACHE"])


def _use(monkeypatch, *entries: DatasetEntry) -> None:
    monkeypatch.setattr(registry, "DATASETS", tuple(entries))


def _write(root: Path, entry: DatasetEntry, data: bytes) -> Path:
    path = root / entry.relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


# --- registry ----------------------------------------------------------------------------------


def test_registry_contents():
    entries = registry.DATASETS
    assert len({e.name for e in entries}) == len(entries)
    assert len({e.relpath for e in entries}) == len(entries)
    by_group = {g: [e for e in entries if e.group == g] for g in registry.GROUPS}
    assert sum(map(len, by_group.values())) == len(entries)
    openb_csv = [e for e in by_group["openb"] if e.relpath.endswith(".csv")]
    assert len(openb_csv) == 26  # 2 node lists + 24 pod lists
    assert len(by_group["fgd-published"]) == 4
    assert [e.relpath for e in by_group["go-math-rand"]] == ["go-math-rand/rng_cooked.txt"]
    for e in entries:
        assert e.relpath.startswith(e.group + "/")
        assert len(e.sha256) == 64 and e.size > 0 and e.licence
        if e.url is None:
            assert e.note  # mirror-only entries say why
        elif e.group == "openb":
            assert e.url.startswith(
                "https://raw.githubusercontent.com/alibaba/clusterdata/"
                + registry.ALIBABA_CLUSTERDATA_COMMIT
                + "/cluster-trace-gpu-v2023/"
            )
        elif e.group == "fgd-published":
            assert e.url == (
                "https://raw.githubusercontent.com/hkust-adsl/kubernetes-scheduler-"
                f"simulator/{registry.SIMULATOR_COMMIT}/experiments/analysis/"
                f"expected_results/{e.relpath.split('/')[-1]}"
            )
        elif e.group == "microsoft-itp-elasticflow":
            assert e.url == (
                "https://raw.githubusercontent.com/microsoft/elasticflow-traces/"
                f"{registry.ELASTICFLOW_TRACES_COMMIT}/data/raw-traces.tar.gz"
            )
        else:
            assert e.url == (
                "https://raw.githubusercontent.com/petuum/adaptdl/"
                f"{registry.ADAPTDL_COMMIT}/simulator/traces/philly.csv"
            )
    itp_csvs = {f"itp_cluster{n:02d}" for n in range(1, 11)}
    assert {e.name for e in entries if e.url is None} == {"alloc_at_130_summary", "rng_cooked"} | itp_csvs
    # Upstream ships the ITP CSVs only inside raw-traces.tar.gz: each names the archive entry.
    for name in itp_csvs:
        e = registry.get(name)
        assert e.archive == "itp_raw_traces" and e.member == e.relpath.split("/")[-1]
        assert e.relpath == f"microsoft-itp-elasticflow/raw-traces/{e.member}"
    assert registry.get("itp_raw_traces").url is not None
    assert registry.get("philly").relpath == "philly-pollux/philly.csv"
    assert [e.licence for e in by_group["microsoft-itp-elasticflow"]] == ["MIT"] * 11
    assert by_group["philly-pollux"][0].licence.startswith("CC-BY-4.0")
    assert registry.get("openb_pod_list_default") is registry.get("openb/openb_pod_list_default.csv")


def test_unknown_name_lists_what_exists():
    with pytest.raises(ConfigError) as info:
        registry.get("openb_pod_list_nope")
    msg = str(info.value)
    assert "openb_pod_list_nope" in msg and "openb_pod_list_default" in msg and "rng_cooked" in msg
    with pytest.raises(ConfigError):
        store.resolve("no/such.csv")


def test_registry_matches_real_mirror(monkeypatch):
    root = real_mirror()
    if root is None:
        pytest.skip("dataset mirror not available")
    monkeypatch.setenv("GPUDEFRAG_MIRROR", str(root))
    results = catalog.verify()
    bad = [r.describe() for r in results if not r.ok]
    assert not bad, bad
    assert all(r.actual_size == r.entry.size for r in results)


# --- resolve: mirror, cache, errors ------------------------------------------------------------


def test_resolve_from_mirror(monkeypatch, mirror, cache):
    data = b"a,b\n1,2\n"
    entry = _entry("fake", data, url="https://example.invalid/fake.csv")
    _use(monkeypatch, entry)
    path = _write(mirror, entry, data)
    assert store.resolve("fake") == path.absolute()
    assert store.resolve("openb/fake.csv") == path.absolute()
    assert _files(cache) == []  # nothing downloaded


def test_resolve_from_cache_and_mirror_wins(monkeypatch, mirror, cache):
    data = b"cached\n"
    entry = _entry("fake", data)
    _use(monkeypatch, entry)
    cpath = _write(cache, entry, data)
    assert store.resolve("fake") == cpath.absolute()
    mpath = _write(mirror, entry, data)
    assert store.resolve("fake") == mpath.absolute()
    monkeypatch.delenv("GPUDEFRAG_MIRROR")
    assert store.resolve("fake") == cpath.absolute()


def test_mirror_checksum_mismatch_names_file_and_both_digests(monkeypatch, mirror):
    good, bad = b"good data\n", b"bad data!\n"
    entry = _entry("fake", good)
    _use(monkeypatch, entry)
    _write(mirror, entry, bad)
    with pytest.raises(DataError) as info:
        store.resolve("fake")
    msg = str(info.value)
    assert "openb/fake.csv" in msg
    assert _sha(good) in msg and _sha(bad) in msg


def test_missing_without_url(monkeypatch):
    entry = _entry("derived", b"x\n", url=None)
    _use(monkeypatch, entry)
    with pytest.raises(DataError) as info:
        store.resolve("derived")
    msg = str(info.value)
    assert "openb/derived.csv" in msg and "GPUDEFRAG_MIRROR" in msg
    assert "openb/, fgd-published/, go-math-rand/" in msg


def test_verification_is_memoised_and_notices_changes(monkeypatch, mirror):
    data = b"0123456789\n"
    entry = _entry("fake", data)
    _use(monkeypatch, entry)
    path = _write(mirror, entry, data)
    calls = []
    real = store._sha256_file
    monkeypatch.setattr(store, "_sha256_file", lambda p: calls.append(p) or real(p))
    for _ in range(5):
        store.resolve("fake")
    assert len(calls) == 1
    path.write_bytes(b"0123456780\n")  # same size, new content
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with pytest.raises(DataError, match="checksum mismatch"):
        store.resolve("fake")
    assert len(calls) == 2


# --- downloads -----------------------------------------------------------------------------------


def test_download_via_file_url(monkeypatch, tmp_path, cache):
    data = b"name,cpu\np,1\n" * 100
    src = tmp_path / "upstream.csv"
    src.write_bytes(data)
    entry = _entry("fake", data, url=src.as_uri())
    _use(monkeypatch, entry)
    path = store.resolve("fake")
    assert path == (cache / "openb" / "fake.csv").absolute()
    assert path.read_bytes() == data
    assert _files(cache) == [cache / "openb" / "fake.csv"]  # no temp file left
    # A second resolve uses the cache; the network is not touched again.
    monkeypatch.setattr(store, "_urlopen", lambda *a, **k: pytest.fail("downloaded twice"))
    assert store.resolve("fake") == path


def test_download_checksum_mismatch_leaves_nothing(monkeypatch, tmp_path, cache):
    expected, served = b"expected content\n", b"served content!!\n"
    src = tmp_path / "upstream.csv"
    src.write_bytes(served)
    entry = _entry("fake", expected, url=src.as_uri())
    _use(monkeypatch, entry)
    with pytest.raises(DataError) as info:
        store.resolve("fake")
    msg = str(info.value)
    assert "openb/fake.csv" in msg and _sha(expected) in msg and _sha(served) in msg
    assert _files(cache) == []


def test_download_too_large_is_aborted(monkeypatch, tmp_path, cache):
    expected = b"small\n"
    src = tmp_path / "upstream.csv"
    src.write_bytes(b"much larger than expected\n" * 10_000)
    entry = _entry("fake", expected, url=src.as_uri())
    _use(monkeypatch, entry)
    with pytest.raises(DataError, match="larger than the registered"):
        store.resolve("fake")
    assert _files(cache) == []


class _BrokenResponse(io.BytesIO):
    """Delivers some bytes, then fails like a dropped connection."""

    def read(self, n=-1):
        if self.tell() >= 8:
            raise TimeoutError("timed out")
        return super().read(min(n, 8))


@pytest.mark.parametrize("failure", ["connect", "midstream", "interrupt"])
def test_failed_download_leaves_nothing(monkeypatch, cache, failure):
    data = b"0123456789abcdef" * 4
    entry = _entry("fake", data, url="https://example.invalid/fake.csv")
    _use(monkeypatch, entry)

    def opener(url, timeout=None):
        assert timeout and timeout > 0
        if failure == "connect":
            raise urllib.error.URLError("Name or service not known")
        if failure == "interrupt":

            class Interrupting(io.BytesIO):
                def read(self, n=-1):
                    raise KeyboardInterrupt

            return Interrupting(data)
        return _BrokenResponse(data)

    monkeypatch.setattr(store, "_urlopen", opener)
    if failure == "interrupt":
        with pytest.raises(KeyboardInterrupt):
            store.resolve("fake")
    else:
        with pytest.raises(DataError) as info:
            store.resolve("fake")
        msg = str(info.value)
        assert "openb/fake.csv" in msg and "cannot download" in msg
        assert "GPUDEFRAG_MIRROR" in msg and "gpudefrag data fetch" in msg
    assert _files(cache) == []


# --- fetch / verify / list ------------------------------------------------------------------------


def test_fetch_all_downloads_and_skips_mirror_only(monkeypatch, tmp_path, cache):
    data = b"downloadable\n"
    src = tmp_path / "up.csv"
    src.write_bytes(data)
    dl = _entry("dl", data, url=src.as_uri())
    derived = _entry("derived", b"derived\n", url=None, group="fgd-published")
    _use(monkeypatch, dl, derived)
    seen = []
    results = catalog.fetch(progress=False, on_result=seen.append)
    assert [(r.entry.name, r.status) for r in results] == [("dl", "downloaded"), ("derived", "skipped")]
    assert seen == results
    assert [r.status for r in catalog.fetch(progress=False)] == ["cached", "skipped"]
    with pytest.raises(DataError, match="derived"):
        catalog.fetch(["derived"], progress=False)


def test_verify_and_list_statuses(monkeypatch, mirror, cache):
    ok, bad, missing = (_entry(n, f"{n}\n".encode()) for n in ("ok", "bad", "missing"))
    cached = _entry("cached", b"cached\n")
    _use(monkeypatch, ok, bad, missing, cached)
    _write(mirror, ok, b"ok\n")
    _write(mirror, bad, b"corrupt\n")
    _write(cache, cached, b"cached\n")
    results = {r.entry.name: r for r in catalog.verify()}
    assert results["ok"].status == "ok" and results["ok"].location == "in mirror"
    assert results["cached"].status == "ok" and results["cached"].location == "cached"
    assert results["missing"].status == "missing"
    assert results["bad"].status == "mismatch"
    assert bad.sha256 in results["bad"].describe()
    assert results["bad"].actual_sha256 in results["bad"].describe()
    statuses = {s.entry.name: s.status for s in catalog.list_datasets()}
    assert statuses == {"ok": "in mirror", "bad": "in mirror", "missing": "missing", "cached": "cached"}


# --- CLI ---------------------------------------------------------------------------------------------


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="gpudefrag")
    cli_data.add_data_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_list_verify_fetch(monkeypatch, tmp_path, mirror, capsys):
    good = _entry("good", b"good\n")
    src = tmp_path / "up.csv"
    src.write_bytes(b"remote\n")
    remote = _entry("remote", b"remote\n", url=src.as_uri())
    _use(monkeypatch, good, remote)
    _write(mirror, good, b"good\n")

    assert _run(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert "name" in out and "licence" in out
    assert any(
        line.startswith("good") and "in mirror" in line and "test-licence" in line
        for line in out.splitlines()
    )
    assert any(line.startswith("remote") and "missing" in line for line in out.splitlines())

    assert _run(["data", "verify"]) == 0
    assert "ok        good" in capsys.readouterr().out

    assert _run(["data", "fetch", "remote", "--no-progress"]) == 0
    assert "downloaded" in capsys.readouterr().out
    assert _run(["data", "fetch", "--all", "--no-progress"]) == 0

    _write(mirror, good, b"tampered\n")
    store.clear_verify_cache()
    assert _run(["data", "verify"]) == 2
    assert "MISMATCH" in capsys.readouterr().out

    with pytest.raises(ConfigError):
        _run(["data", "fetch"])
    with pytest.raises(ConfigError):
        _run(["data", "fetch", "unknown-name"])


# --- files extracted from a registered archive ---------------------------------------------------


def _tar_gz(path: Path, members: dict[str, bytes]) -> bytes:
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path.read_bytes()


def _member_entry(name: str, data: bytes, archive: str, member: str) -> DatasetEntry:
    return DatasetEntry(
        name=name,
        group="openb",
        relpath=f"openb/sub/{member}",
        url=None,
        sha256=_sha(data),
        size=len(data),
        licence="test-licence",
        note="inside the archive (test)",
        archive=archive,
        member=member,
    )


def _archive_setup(monkeypatch, tmp_path, member_bytes: bytes, *, url: bool, served: bytes | None = None):
    """An archive ``arch`` holding ``c.csv`` (= ``served`` or ``member_bytes``) and an entry
    ``c`` for that member; the archive is downloadable from a file URL or placed in the mirror."""
    blob = _tar_gz(tmp_path / "arch.tar.gz", {"c.csv": served if served is not None else member_bytes})
    arch = DatasetEntry(
        name="arch",
        group="openb",
        relpath="openb/arch.tar.gz",
        url=(tmp_path / "arch.tar.gz").as_uri() if url else None,
        sha256=_sha(blob),
        size=len(blob),
        licence="test-licence",
        note="test archive",
    )
    member = _member_entry("c", member_bytes, "arch", "c.csv")
    _use(monkeypatch, arch, member)
    return arch, member, blob


def test_member_extracted_from_archive_in_mirror(monkeypatch, tmp_path, mirror, cache):
    data = b"job_id,submission_time,duration,num_gpu\nx,0,600,1\n"
    arch, member, blob = _archive_setup(monkeypatch, tmp_path, data, url=False)
    _write(mirror, arch, blob)
    path = store.resolve("c")
    assert path == (cache / "openb" / "sub" / "c.csv").absolute()
    assert path.read_bytes() == data
    assert _files(cache) == [cache / "openb" / "sub" / "c.csv"]  # no temp file, archive not copied
    assert [r.status for r in catalog.fetch(["c"], progress=False)] == ["cached"]
    # Once the member is in the mirror, the mirror copy wins.
    mpath = _write(mirror, member, data)
    assert store.resolve("c") == mpath.absolute()


def test_member_extraction_downloads_the_archive_first(monkeypatch, tmp_path, cache):
    data = b"a,b\n1,2\n" * 50
    _archive_setup(monkeypatch, tmp_path, data, url=True)
    results = catalog.fetch(progress=False)  # fetch --all does not skip archive members
    assert [(r.entry.name, r.status) for r in results] == [("arch", "downloaded"), ("c", "extracted")]
    assert [r.status for r in catalog.fetch(progress=False)] == ["cached", "cached"]
    store.clear_verify_cache()
    (cache / "openb" / "sub" / "c.csv").unlink()
    (cache / "openb" / "arch.tar.gz").unlink()
    assert [r.status for r in catalog.fetch(["c"], progress=False)] == ["extracted"]
    assert (cache / "openb" / "sub" / "c.csv").read_bytes() == data


def test_member_checksum_mismatch_leaves_nothing(monkeypatch, tmp_path, mirror, cache):
    expected, served = b"expected member\n", b"served member!!\n"
    arch, _, blob = _archive_setup(monkeypatch, tmp_path, expected, url=False, served=served)
    _write(mirror, arch, blob)
    with pytest.raises(DataError) as info:
        store.resolve("c")
    msg = str(info.value)
    assert "openb/sub/c.csv" in msg and "extracted from openb/arch.tar.gz member c.csv" in msg
    assert _sha(expected) in msg and _sha(served) in msg
    assert _files(cache) == []


def test_member_missing_from_archive_or_archive_unavailable(monkeypatch, tmp_path, mirror, cache):
    data = b"x\n"
    arch, _, blob = _archive_setup(monkeypatch, tmp_path, data, url=False)
    other = _member_entry("d", data, "arch", "d.csv")
    _use(monkeypatch, arch, other)
    with pytest.raises(DataError, match=r"its archive openb/arch\.tar\.gz is unavailable"):
        store.resolve("d")  # the archive is neither in the mirror nor downloadable
    _write(mirror, arch, blob)
    with pytest.raises(DataError, match=r"has no member 'd\.csv'"):
        store.resolve("d")
    assert _files(cache) == []


def test_real_itp_csv_extracted_from_real_archive(monkeypatch, tmp_path, mirror, cache):
    found = real_mirror()
    if found is None:
        pytest.skip("dataset mirror not available")
    root = found.resolve()  # the mirror may be relative (.ci/run: ../shared/data); the link may not
    archive = registry.get("itp_raw_traces")
    (mirror / archive.relpath).parent.mkdir(parents=True)
    (mirror / archive.relpath).symlink_to(root / archive.relpath)
    path = store.resolve("itp_cluster10")
    entry = registry.get("itp_cluster10")
    assert path == (cache / entry.relpath).absolute()
    assert path.read_bytes() == (root / entry.relpath).read_bytes()
    assert [r.status for r in catalog.verify(["itp_cluster10"])] == ["ok"]

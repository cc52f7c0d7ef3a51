"""Explicit registry of the dataset files gpudefrag uses.

Every file is listed with its place in the mirror (``<group>/<file>``), an upstream URL pinned to a
commit (or ``None`` for files that exist only in the mirror), its SHA-256 and byte size (copied from
``shared/data/MANIFEST.md`` and re-checked against the files), and a licence string.

Mirror layout (the folder ``GPUDEFRAG_MIRROR`` points at, and the user cache)::

    openb/            Alibaba openb node and pod lists (cluster-trace-gpu-v2023)
    fgd-published/    published FGD (ATC '23) expected results, plus one derived summary
    go-math-rand/     Go's math/rand rngCooked table (derived from rng.go)
    microsoft-itp-elasticflow/
                      Microsoft ITP job traces (ElasticFlow, ASPLOS '23): the upstream archive
                      raw-traces.tar.gz and its ten extracted raw-traces/clusterNN.csv
    philly-pollux/    Microsoft Philly 2017 jobs as processed by Pollux (OSDI '21): philly.csv

Files that upstream ships only inside an archive (the ITP CSVs) have ``url=None`` and name the
registered archive entry (``archive``) and their path inside it (``member``); the store extracts
them from the archive, which it finds or downloads like any other file.

Look entries up with :func:`get` (by name, e.g. ``openb_pod_list_default``, or by relative path,
e.g. ``openb/openb_pod_list_default.csv``). An unknown name raises
:class:`~gpudefrag.errors.ConfigError` listing what exists.
"""

from __future__ import annotations

from gpudefrag.data.entries import (
    ADAPTDL_COMMIT,
    ALIBABA_CLUSTERDATA_COMMIT,
    ELASTICFLOW_TRACES_COMMIT,
    GROUPS,
    ITP_ARCHIVE_URL,
    LICENCE_DERIVED_SIM,
    LICENCE_GO,
    LICENCE_ITP,
    LICENCE_OPENB_UNSTATED,
    LICENCE_PHILLY,
    OPENB_URL,
    PHILLY_URL,
    SIMULATOR_COMMIT,
    DatasetEntry,
    itp_cluster_entry,
    openb_entry,
    published_entry,
)
from gpudefrag.errors import ConfigError

__all__ = [
    "ADAPTDL_COMMIT",
    "ALIBABA_CLUSTERDATA_COMMIT",
    "DATASETS",
    "ELASTICFLOW_TRACES_COMMIT",
    "GROUPS",
    "SIMULATOR_COMMIT",
    "DatasetEntry",
    "get",
    "names",
    "select",
]

DATASETS: tuple[DatasetEntry, ...] = (
    # --- openb: alibaba/clusterdata @ 7a6c496e, cluster-trace-gpu-v2023/csv/ -----------------
    openb_entry(
        "openb_node_list_all_node.csv",
        52287,
        "5a85c2af79c66a1efff8bbcbda430400aae56d8431370d738480967e1a9c6b15",
    ),
    openb_entry(
        "openb_node_list_gpu_node.csv",
        42353,
        "2beca64b4d3dfa342036a34b56a495c6cef9225db836c81f541282cb1df320b5",
    ),
    openb_entry(
        "openb_pod_list_cpu0.csv",
        499765,
        "1bc3fd9ee5c1468ccd018f624d9222746e08d59f963f66b925804734271c0eaa",
        licence=LICENCE_OPENB_UNSTATED,
        note="alibaba/clusterdata cluster-trace-gpu-v2023/csv only (absent from the simulator repo)",
    ),
    openb_entry(
        "openb_pod_list_cpu037.csv",
        518687,
        "8ed554026d041b15ff21ddc104d9a21dbd9a93c496262fa23ef7b5be27e220dc",
    ),
    openb_entry(
        "openb_pod_list_cpu050.csv",
        525811,
        "747f43247bffc2b0bb081d7f61f0705ca8d390dafc0b647e642c92f3baf3ba1e",
    ),
    openb_entry(
        "openb_pod_list_cpu072.csv",
        537576,
        "f8a2b031461b54d7b9f06d55473c2371eb3357b78a255c646bdca5e0833a8a2f",
    ),
    openb_entry(
        "openb_pod_list_cpu100.csv",
        554709,
        "bec1c33fbdde61fd463877534ec79b393aec73e1cbb22d55fab9f166ac480982",
    ),
    openb_entry(
        "openb_pod_list_cpu200.csv",
        622703,
        "b7e9d8a1a601da84d6e0b4110b19ef5001be5e4796d33e7b82f166ba95161f87",
    ),
    openb_entry(
        "openb_pod_list_cpu235.csv",
        651171,
        "87bebd4d012faa8305ce1fd82737f51cf03361aac28b75d42e34aa656d7f4ee0",
    ),
    openb_entry(
        "openb_pod_list_cpu250.csv",
        663708,
        "134c21ff96d57533df8a37b67632972884fec9396e77cd0898ddc370cc8e607d",
    ),
    openb_entry(
        "openb_pod_list_cpu300.csv",
        710698,
        "76528825f40ee662cb098b3b6e683c1efd9f87a0c8af7e628df1f32c639636d1",
    ),
    openb_entry(
        "openb_pod_list_default.csv",
        575468,
        "1ee7ed79c27a3b0861cda8ddba86a004c6aba904caafa329a76ae93ca63834a8",
    ),
    openb_entry(
        "openb_pod_list_gpushare100.csv",
        561220,
        "12dbc07d6a49bf8641e2275a2ff5bf7be74b5df7d148d531e135b140b95f9a3d",
    ),
    openb_entry(
        "openb_pod_list_gpushare20.csv",
        574603,
        "9be2d0efb52e242c32e23dd184cc5fcc1983478c6c9c02cbb6b4b62925c0ffcd",
    ),
    openb_entry(
        "openb_pod_list_gpushare40.csv",
        572662,
        "d83ce79a4eb6987524bedbb0c65e41aed3a36bf6c1b78b86234c3687a07e1d40",
    ),
    openb_entry(
        "openb_pod_list_gpushare60.csv",
        566361,
        "d31809628128a1f24491086eda4af3e23882b9213d3ef57a56ee2d1af69492fe",
    ),
    openb_entry(
        "openb_pod_list_gpushare80.csv",
        563740,
        "88b6649369ced40d0fde287d2498ea61ff4b05fccba8bdc95daf6042f2f8431e",
    ),
    openb_entry(
        "openb_pod_list_gpuspec05.csv",
        577176,
        "8f1c0ef7e4e511e982bd2818898ba22ee6d273bf5fce124b7ace285b5928cf4e",
    ),
    openb_entry(
        "openb_pod_list_gpuspec10.csv",
        579461,
        "2dc7e4cb9480484f08539720b433a9ec9ab5d76b396f3f7557c53a2ff78a7611",
    ),
    openb_entry(
        "openb_pod_list_gpuspec20.csv",
        582612,
        "6b9b89ab8913c1c074e994e98f548cf1a872fc5f76f2442ca8cd514a478b00a9",
    ),
    openb_entry(
        "openb_pod_list_gpuspec25.csv",
        584915,
        "9d030679a2ccd7e27a7ec9ff15baff34480d22a0012515691fc187e3f35ee68c",
    ),
    openb_entry(
        "openb_pod_list_gpuspec33.csv",
        587467,
        "eca4f746db1e5b25864ad021b55ece3943e101a3ebd4574d09dcb95c46117652",
    ),
    openb_entry(
        "openb_pod_list_multigpu20.csv",
        271530,
        "d9ec6f6c74fb980cc0b81239470c6353fceea077ea9abd610003b604c7cc2b01",
    ),
    openb_entry(
        "openb_pod_list_multigpu30.csv",
        277920,
        "a5e479c6444b1d83eef848159cf00c3cfa13441b2d1e2c113c391b91f1cc5b11",
    ),
    openb_entry(
        "openb_pod_list_multigpu40.csv",
        286202,
        "32c9e8731ca07ef96108aa65f2a289bb9aacb47f642ed9e3789f99b242df60eb",
    ),
    openb_entry(
        "openb_pod_list_multigpu50.csv",
        297219,
        "206f2f5959db30ecb7c44e7f13197c8ec50b7a35558ad3777cc3662ef0fe5373",
    ),
    DatasetEntry(
        name="openb_readme",
        group="openb",
        relpath="openb/README-upstream.md",
        url=OPENB_URL + "README.md",
        size=5237,
        sha256="4445ce29c045d3281f857f25c392b78880658978ea4fc420ec3f5b4bf621bc80",
        licence=LICENCE_OPENB_UNSTATED,
        note="alibaba/clusterdata cluster-trace-gpu-v2023/README.md, renamed in the mirror",
    ),
    # --- fgd-published: hkust-adsl/kubernetes-scheduler-simulator @ 8f3d6417 -------------------
    published_entry(
        "analysis_allo_discrete.csv",
        823208,
        "e00aff5923a52d53e47c16ec9d19190de4e788c15334865a77bd46e1bd006ea1",
    ),
    published_entry(
        "analysis_frag_discrete.csv",
        787709,
        "0d9181864ef9adb2169f232124c6af767579fe2a3c08f940419b4989420c8ce2",
    ),
    published_entry(
        "analysis_frag_ratio_discrete.csv",
        2361283,
        "78f55e6324b532c6af8d69da8e312d8cbe6f953719ccfa3f51e5a392b6b1d860",
    ),
    DatasetEntry(
        name="alloc_at_130_summary",
        group="fgd-published",
        relpath="fgd-published/alloc_at_130_summary.csv",
        url=None,
        size=17217,
        sha256="3ec5a330db2deb88b510ada3e2b6692ae1ccfca4e34021b50c3b7a5ae4c3a75c",
        licence=LICENCE_DERIVED_SIM,
        note=(
            "mirror only: derived from analysis_allo_discrete.csv (per workload x policy mean/"
            "std/min/max over seeds at columns 130, 120, 100); no upstream URL"
        ),
    ),
    # --- go-math-rand: golang/go tag go1.20.4, src/math/rand/rng.go ----------------------------
    DatasetEntry(
        name="rng_cooked",
        group="go-math-rand",
        relpath="go-math-rand/rng_cooked.txt",
        url=None,
        size=12371,
        sha256="f80ec7acd5eebd12590fc014d67af0b02dc5c18c07bc238bfbd735432055b0fa",
        licence=LICENCE_GO,
        note=(
            "mirror only: the 607 rngCooked values of golang/go go1.20.4 src/math/rand/rng.go, "
            "one per line (extracted from Go source); no upstream URL"
        ),
    ),
    # --- microsoft-itp-elasticflow: microsoft/elasticflow-traces @ 277ed24d -----------------------
    DatasetEntry(
        name="itp_raw_traces",
        group="microsoft-itp-elasticflow",
        relpath="microsoft-itp-elasticflow/raw-traces.tar.gz",
        url=ITP_ARCHIVE_URL,
        size=1943846,
        sha256="67398e1a89245c50ae0881bf997e6cda0c95f9f47980af5bc56d67998965669f",
        licence=LICENCE_ITP,
        note="microsoft/elasticflow-traces data/raw-traces.tar.gz (the ten ITP cluster CSVs + LICENSE)",
    ),
    itp_cluster_entry(1, 83726, "27d707f576fce5637f9efec43f610da3d335f36e3c6fd4ded2f5bccfce05974a"),
    itp_cluster_entry(2, 301866, "7a5849e73aff9f9bc33f87c9bacadf8aab2f3a9e7bc5d70956f5cbf40126526c"),
    itp_cluster_entry(3, 158198, "282d765c5289ab0ba870f494dd2c67893f9d16d726fdc8a51f13b7412515dbf8"),
    itp_cluster_entry(4, 825103, "247850e4265f35749e98d15e82a67765301e81272334265f1fe60d65787892a9"),
    itp_cluster_entry(5, 189032, "1553359ddd673a0ffc531ca10e73ba729dbacbce905ce878dbb8499d2dbed0fb"),
    itp_cluster_entry(6, 125228, "52c0d9247d1de9b19a8bdafc25137daf6fa04f274ad3a2eb6dac51226ac2362e"),
    itp_cluster_entry(7, 662831, "d4f46f32e2965c2265b2675c070565a86e40bff45733c828c5767bc0b8c1b318"),
    itp_cluster_entry(8, 682210, "d60c20d0cd05ddf49fddffabbc784ba6177bbc1a762fc5cf8a0bc9056b084db8"),
    itp_cluster_entry(9, 586203, "da4047d6f09cc41709ff85937c82e31f6a6791c896d22e241ae9e1dc7f82bcfd"),
    itp_cluster_entry(10, 13689, "139abea485b52090f5950d0f28d82878169df408e36052ec5c7cd04a3f3fcfa7"),
    # --- philly-pollux: petuum/adaptdl (branch osdi21-artifact) @ c793c708 -----------------------
    DatasetEntry(
        name="philly",
        group="philly-pollux",
        relpath="philly-pollux/philly.csv",
        url=PHILLY_URL,
        size=3444496,
        sha256="ebffb3dd1589bdf4e7bcd74496201c5ded1d557d498ee14f560463f37ec353da",
        licence=LICENCE_PHILLY,
        note=(
            "petuum/adaptdl simulator/traces/philly.csv: the Pollux processing of the Microsoft "
            "Philly trace (msr-fiddle/philly-traces, CC-BY-4.0); adaptdl code is Apache-2.0"
        ),
    ),
)


def _index() -> dict[str, DatasetEntry]:
    # Built on each call (a few dozen entries) so tests may monkeypatch ``DATASETS``.
    index: dict[str, DatasetEntry] = {}
    for entry in DATASETS:
        index[entry.name] = entry
        index[entry.relpath] = entry
    return index


def names() -> list[str]:
    """All registered names, in registry order."""
    return [entry.name for entry in DATASETS]


def get(name: str) -> DatasetEntry:
    """The entry for a name (``openb_pod_list_default``) or relative path
    (``openb/openb_pod_list_default.csv``); :class:`ConfigError` listing the names if unknown."""
    key = str(name).replace("\\", "/").strip()
    entry = _index().get(key)
    if entry is None:
        raise ConfigError(
            f"unknown dataset {name!r}; known datasets: {', '.join(names())} "
            "(a relative path such as 'openb/openb_pod_list_default.csv' also works)"
        )
    return entry


def select(selection: str | list[str] | tuple[str, ...] | None = None) -> list[DatasetEntry]:
    """Entries for a list of names/paths (order kept, duplicates dropped); all entries if ``None``."""
    if selection is None:
        return list(DATASETS)
    if isinstance(selection, str):
        selection = [selection]
    out: list[DatasetEntry] = []
    for name in selection:
        entry = get(name)
        if entry not in out:
            out.append(entry)
    return out

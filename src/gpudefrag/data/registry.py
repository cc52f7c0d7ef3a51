"""Explicit registry of the dataset files gpudefrag uses.

Every file is listed with its place in the mirror (``<group>/<file>``), an upstream URL pinned to a
commit (or ``None`` for files that exist only in the mirror), its SHA-256 and byte size (copied from
``shared/data/MANIFEST.md`` and re-checked against the files), and a licence string.

Mirror layout (the folder ``GPUDEFRAG_MIRROR`` points at, and the user cache)::

    openb/            Alibaba openb node and pod lists (cluster-trace-gpu-v2023)
    fgd-published/    published FGD (ATC '23) expected results, plus one derived summary
    go-math-rand/     Go's math/rand rngCooked table (derived from rng.go)

Look entries up with :func:`get` (by name, e.g. ``openb_pod_list_default``, or by relative path,
e.g. ``openb/openb_pod_list_default.csv``). An unknown name raises
:class:`~gpudefrag.errors.ConfigError` listing what exists.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudefrag.errors import ConfigError

__all__ = [
    "ALIBABA_CLUSTERDATA_COMMIT",
    "DATASETS",
    "GROUPS",
    "SIMULATOR_COMMIT",
    "DatasetEntry",
    "get",
    "names",
    "select",
]

ALIBABA_CLUSTERDATA_COMMIT = "7a6c496e4f4b6ce6150be8f881cb051bf2abff42"
SIMULATOR_COMMIT = "8f3d6417353c5083c6d56617f255fadd8dc306bc"

_OPENB_URL = (
    "https://raw.githubusercontent.com/alibaba/clusterdata/"
    f"{ALIBABA_CLUSTERDATA_COMMIT}/cluster-trace-gpu-v2023/"
)
_SIM_RESULTS_URL = (
    "https://raw.githubusercontent.com/hkust-adsl/kubernetes-scheduler-simulator/"
    f"{SIMULATOR_COMMIT}/experiments/analysis/expected_results/"
)

GROUPS = ("openb", "fgd-published", "go-math-rand")

LICENCE_OPENB_SIM = "Apache-2.0 (simulator copy); unstated in alibaba/clusterdata"
LICENCE_OPENB_UNSTATED = "unstated (alibaba/clusterdata only; cite ATC '23)"
LICENCE_SIM = "Apache-2.0"
LICENCE_DERIVED_SIM = "derived from Apache-2.0 data"
LICENCE_GO = "BSD-3-Clause (Go)"


@dataclass(frozen=True)
class DatasetEntry:
    """One registered file.

    ``name`` is the lookup key (the file stem), ``relpath`` the POSIX path inside the mirror,
    ``url`` the pinned upstream URL or ``None`` (mirror only), ``sha256``/``size`` the expected
    content, ``licence`` a short licence string and ``note`` provenance details.
    """

    name: str
    group: str
    relpath: str
    url: str | None
    sha256: str
    size: int
    licence: str
    note: str = ""


def _openb(
    file: str, size: int, sha256: str, licence: str = LICENCE_OPENB_SIM, note: str = ""
) -> DatasetEntry:
    stem = file.rsplit(".", 1)[0]
    return DatasetEntry(
        name=stem,
        group="openb",
        relpath=f"openb/{file}",
        url=_OPENB_URL + "csv/" + file,
        sha256=sha256,
        size=size,
        licence=licence,
        note=note
        or (
            "alibaba/clusterdata cluster-trace-gpu-v2023/csv; byte-identical to "
            "hkust-adsl/kubernetes-scheduler-simulator data/csv (Apache-2.0)"
        ),
    )


def _published(file: str, size: int, sha256: str) -> DatasetEntry:
    return DatasetEntry(
        name=file.rsplit(".", 1)[0],
        group="fgd-published",
        relpath=f"fgd-published/{file}",
        url=_SIM_RESULTS_URL + file,
        sha256=sha256,
        size=size,
        licence=LICENCE_SIM,
        note="hkust-adsl/kubernetes-scheduler-simulator experiments/analysis/expected_results",
    )


DATASETS: tuple[DatasetEntry, ...] = (
    # --- openb: alibaba/clusterdata @ 7a6c496e, cluster-trace-gpu-v2023/csv/ -----------------
    _openb(
        "openb_node_list_all_node.csv",
        52287,
        "5a85c2af79c66a1efff8bbcbda430400aae56d8431370d738480967e1a9c6b15",
    ),
    _openb(
        "openb_node_list_gpu_node.csv",
        42353,
        "2beca64b4d3dfa342036a34b56a495c6cef9225db836c81f541282cb1df320b5",
    ),
    _openb(
        "openb_pod_list_cpu0.csv",
        499765,
        "1bc3fd9ee5c1468ccd018f624d9222746e08d59f963f66b925804734271c0eaa",
        licence=LICENCE_OPENB_UNSTATED,
        note="alibaba/clusterdata cluster-trace-gpu-v2023/csv only (absent from the simulator repo)",
    ),
    _openb(
        "openb_pod_list_cpu037.csv",
        518687,
        "8ed554026d041b15ff21ddc104d9a21dbd9a93c496262fa23ef7b5be27e220dc",
    ),
    _openb(
        "openb_pod_list_cpu050.csv",
        525811,
        "747f43247bffc2b0bb081d7f61f0705ca8d390dafc0b647e642c92f3baf3ba1e",
    ),
    _openb(
        "openb_pod_list_cpu072.csv",
        537576,
        "f8a2b031461b54d7b9f06d55473c2371eb3357b78a255c646bdca5e0833a8a2f",
    ),
    _openb(
        "openb_pod_list_cpu100.csv",
        554709,
        "bec1c33fbdde61fd463877534ec79b393aec73e1cbb22d55fab9f166ac480982",
    ),
    _openb(
        "openb_pod_list_cpu200.csv",
        622703,
        "b7e9d8a1a601da84d6e0b4110b19ef5001be5e4796d33e7b82f166ba95161f87",
    ),
    _openb(
        "openb_pod_list_cpu235.csv",
        651171,
        "87bebd4d012faa8305ce1fd82737f51cf03361aac28b75d42e34aa656d7f4ee0",
    ),
    _openb(
        "openb_pod_list_cpu250.csv",
        663708,
        "134c21ff96d57533df8a37b67632972884fec9396e77cd0898ddc370cc8e607d",
    ),
    _openb(
        "openb_pod_list_cpu300.csv",
        710698,
        "76528825f40ee662cb098b3b6e683c1efd9f87a0c8af7e628df1f32c639636d1",
    ),
    _openb(
        "openb_pod_list_default.csv",
        575468,
        "1ee7ed79c27a3b0861cda8ddba86a004c6aba904caafa329a76ae93ca63834a8",
    ),
    _openb(
        "openb_pod_list_gpushare100.csv",
        561220,
        "12dbc07d6a49bf8641e2275a2ff5bf7be74b5df7d148d531e135b140b95f9a3d",
    ),
    _openb(
        "openb_pod_list_gpushare20.csv",
        574603,
        "9be2d0efb52e242c32e23dd184cc5fcc1983478c6c9c02cbb6b4b62925c0ffcd",
    ),
    _openb(
        "openb_pod_list_gpushare40.csv",
        572662,
        "d83ce79a4eb6987524bedbb0c65e41aed3a36bf6c1b78b86234c3687a07e1d40",
    ),
    _openb(
        "openb_pod_list_gpushare60.csv",
        566361,
        "d31809628128a1f24491086eda4af3e23882b9213d3ef57a56ee2d1af69492fe",
    ),
    _openb(
        "openb_pod_list_gpushare80.csv",
        563740,
        "88b6649369ced40d0fde287d2498ea61ff4b05fccba8bdc95daf6042f2f8431e",
    ),
    _openb(
        "openb_pod_list_gpuspec05.csv",
        577176,
        "8f1c0ef7e4e511e982bd2818898ba22ee6d273bf5fce124b7ace285b5928cf4e",
    ),
    _openb(
        "openb_pod_list_gpuspec10.csv",
        579461,
        "2dc7e4cb9480484f08539720b433a9ec9ab5d76b396f3f7557c53a2ff78a7611",
    ),
    _openb(
        "openb_pod_list_gpuspec20.csv",
        582612,
        "6b9b89ab8913c1c074e994e98f548cf1a872fc5f76f2442ca8cd514a478b00a9",
    ),
    _openb(
        "openb_pod_list_gpuspec25.csv",
        584915,
        "9d030679a2ccd7e27a7ec9ff15baff34480d22a0012515691fc187e3f35ee68c",
    ),
    _openb(
        "openb_pod_list_gpuspec33.csv",
        587467,
        "eca4f746db1e5b25864ad021b55ece3943e101a3ebd4574d09dcb95c46117652",
    ),
    _openb(
        "openb_pod_list_multigpu20.csv",
        271530,
        "d9ec6f6c74fb980cc0b81239470c6353fceea077ea9abd610003b604c7cc2b01",
    ),
    _openb(
        "openb_pod_list_multigpu30.csv",
        277920,
        "a5e479c6444b1d83eef848159cf00c3cfa13441b2d1e2c113c391b91f1cc5b11",
    ),
    _openb(
        "openb_pod_list_multigpu40.csv",
        286202,
        "32c9e8731ca07ef96108aa65f2a289bb9aacb47f642ed9e3789f99b242df60eb",
    ),
    _openb(
        "openb_pod_list_multigpu50.csv",
        297219,
        "206f2f5959db30ecb7c44e7f13197c8ec50b7a35558ad3777cc3662ef0fe5373",
    ),
    DatasetEntry(
        name="openb_readme",
        group="openb",
        relpath="openb/README-upstream.md",
        url=_OPENB_URL + "README.md",
        size=5237,
        sha256="4445ce29c045d3281f857f25c392b78880658978ea4fc420ec3f5b4bf621bc80",
        licence=LICENCE_OPENB_UNSTATED,
        note="alibaba/clusterdata cluster-trace-gpu-v2023/README.md, renamed in the mirror",
    ),
    # --- fgd-published: hkust-adsl/kubernetes-scheduler-simulator @ 8f3d6417 -------------------
    _published(
        "analysis_allo_discrete.csv",
        823208,
        "e00aff5923a52d53e47c16ec9d19190de4e788c15334865a77bd46e1bd006ea1",
    ),
    _published(
        "analysis_frag_discrete.csv",
        787709,
        "0d9181864ef9adb2169f232124c6af767579fe2a3c08f940419b4989420c8ce2",
    ),
    _published(
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

"""One registered dataset file (:class:`DatasetEntry`), the pinned upstream commits and URLs, the
licences, and the builders of the entries :mod:`gpudefrag.data.registry` lists."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ADAPTDL_COMMIT",
    "ALIBABA_CLUSTERDATA_COMMIT",
    "ELASTICFLOW_TRACES_COMMIT",
    "GROUPS",
    "SIMULATOR_COMMIT",
    "DatasetEntry",
]

ALIBABA_CLUSTERDATA_COMMIT = "7a6c496e4f4b6ce6150be8f881cb051bf2abff42"
SIMULATOR_COMMIT = "8f3d6417353c5083c6d56617f255fadd8dc306bc"
ELASTICFLOW_TRACES_COMMIT = "277ed24d0e908c31a1c98145819e2e3853d8ac00"
ADAPTDL_COMMIT = "c793c7089bd307462686339d29707925c461f9a9"  # branch osdi21-artifact

OPENB_URL = (
    "https://raw.githubusercontent.com/alibaba/clusterdata/"
    f"{ALIBABA_CLUSTERDATA_COMMIT}/cluster-trace-gpu-v2023/"
)
SIM_RESULTS_URL = (
    "https://raw.githubusercontent.com/hkust-adsl/kubernetes-scheduler-simulator/"
    f"{SIMULATOR_COMMIT}/experiments/analysis/expected_results/"
)
ITP_ARCHIVE_URL = (
    "https://raw.githubusercontent.com/microsoft/elasticflow-traces/"
    f"{ELASTICFLOW_TRACES_COMMIT}/data/raw-traces.tar.gz"
)
PHILLY_URL = f"https://raw.githubusercontent.com/petuum/adaptdl/{ADAPTDL_COMMIT}/simulator/traces/philly.csv"

GROUPS = ("openb", "fgd-published", "go-math-rand", "microsoft-itp-elasticflow", "philly-pollux")

LICENCE_OPENB_SIM = "Apache-2.0 (simulator copy); unstated in alibaba/clusterdata"
LICENCE_OPENB_UNSTATED = "unstated (alibaba/clusterdata only; cite ATC '23)"
LICENCE_SIM = "Apache-2.0"
LICENCE_DERIVED_SIM = "derived from Apache-2.0 data"
LICENCE_GO = "BSD-3-Clause (Go)"
LICENCE_ITP = "MIT"
LICENCE_PHILLY = "CC-BY-4.0 (Philly data: attribute Microsoft / ATC '19)"


@dataclass(frozen=True)
class DatasetEntry:
    """One registered file.

    ``name`` is the lookup key (the file stem), ``relpath`` the POSIX path inside the mirror,
    ``url`` the pinned upstream URL or ``None`` (mirror only), ``sha256``/``size`` the expected
    content, ``licence`` a short licence string and ``note`` provenance details.

    A file that upstream ships only inside an archive has ``url=None``, ``archive`` set to the
    name of the registered archive entry and ``member`` to its path inside that archive.
    """

    name: str
    group: str
    relpath: str
    url: str | None
    sha256: str
    size: int
    licence: str
    note: str = ""
    archive: str | None = None
    member: str | None = None


def openb_entry(
    file: str, size: int, sha256: str, licence: str = LICENCE_OPENB_SIM, note: str = ""
) -> DatasetEntry:
    stem = file.rsplit(".", 1)[0]
    return DatasetEntry(
        name=stem,
        group="openb",
        relpath=f"openb/{file}",
        url=OPENB_URL + "csv/" + file,
        sha256=sha256,
        size=size,
        licence=licence,
        note=note
        or (
            "alibaba/clusterdata cluster-trace-gpu-v2023/csv; byte-identical to "
            "hkust-adsl/kubernetes-scheduler-simulator data/csv (Apache-2.0)"
        ),
    )


def itp_cluster_entry(number: int, size: int, sha256: str) -> DatasetEntry:
    file = f"cluster{number:02d}.csv"
    return DatasetEntry(
        name=f"itp_cluster{number:02d}",
        group="microsoft-itp-elasticflow",
        relpath=f"microsoft-itp-elasticflow/raw-traces/{file}",
        url=None,
        sha256=sha256,
        size=size,
        licence=LICENCE_ITP,
        note=(
            f"microsoft/elasticflow-traces data/raw-traces.tar.gz member {file}; upstream has no "
            "plain copy, so it is extracted from the registered archive itp_raw_traces"
        ),
        archive="itp_raw_traces",
        member=file,
    )


def published_entry(file: str, size: int, sha256: str) -> DatasetEntry:
    return DatasetEntry(
        name=file.rsplit(".", 1)[0],
        group="fgd-published",
        relpath=f"fgd-published/{file}",
        url=SIM_RESULTS_URL + file,
        sha256=sha256,
        size=size,
        licence=LICENCE_SIM,
        note="hkust-adsl/kubernetes-scheduler-simulator experiments/analysis/expected_results",
    )

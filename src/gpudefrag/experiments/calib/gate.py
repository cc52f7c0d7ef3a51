"""The calibration gate: our replay of every published run against the published curve.

Gate (issue "Foundation"): FGD, BestFit, GpuPacking, GpuClustering and DotProd within 0.01 of
the published value in every column 0..130 on every seed; Random (not reproducible even by the
reference binary) within ±0.3 pp of the published seed-mean at every checkpoint.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpudefrag.experiments.calib.published import ALLOC_FILE, FRAG_FILE, published_curves
from gpudefrag.experiments.calib.run import run_experiment
from gpudefrag.experiments.common.atomic import atomic_write
from gpudefrag.experiments.common.environment import record_executor
from gpudefrag.experiments.common.executor import RunExecutor
from gpudefrag.policies.registry import DETERMINISTIC_POLICIES, POLICY_NAMES, PUBLISHED_LABEL

CHECKPOINTS = (50, 80, 100, 110, 120, 130)
EXACT_TOLERANCE = 0.01 + 1e-9
RANDOM_TOLERANCE_PP = 0.3
DEFAULT_SEEDS = tuple(range(42, 52))


@dataclass(frozen=True)
class RunCheck:
    """One run compared with its published row."""

    workload: str
    policy: str
    seed: int
    curve: np.ndarray
    published: np.ndarray
    frag_curve: np.ndarray
    published_frag: np.ndarray
    failed_pods: int
    wall_s: float

    @property
    def max_abs_diff(self) -> float:
        """Largest |ours - published| over columns where both have a value."""
        diff = np.abs(self.curve - self.published)
        finite = diff[~np.isnan(diff)]
        return float(finite.max()) if finite.size else 0.0

    @property
    def exact(self) -> bool:
        """Every column within one unit of the published rounding (NaN only where published is)."""
        same_gaps = np.array_equal(np.isnan(self.curve), np.isnan(self.published))
        return same_gaps and self.max_abs_diff <= EXACT_TOLERANCE

    @property
    def frag_exact(self) -> bool:
        """The fragmentation curve also matches ``analysis_frag_discrete.csv`` (reported, not gated)."""
        diff = np.abs(self.frag_curve - self.published_frag)
        return (
            np.array_equal(np.isnan(self.frag_curve), np.isnan(self.published_frag))
            and float(np.nanmax(diff, initial=0.0)) <= EXACT_TOLERANCE
        )


@dataclass(frozen=True)
class PolicySummary:
    workload: str
    policy: str
    seeds: int
    exact_runs: int
    ours_mean: dict[int, float]
    published_mean: dict[int, float]
    max_abs_diff: float
    frag_exact_runs: int
    passed: bool


def _check_one(task: tuple[str, str, int]) -> RunCheck:
    workload, policy, seed = task
    out = run_experiment(workload, policy, seed, with_frag=True)
    assert out.frag_curve is not None  # with_frag=True: the run tracks fragmentation, so it has the curve
    key = (out.workload, PUBLISHED_LABEL[policy], seed)
    published = published_curves(ALLOC_FILE)[key]
    published_frag = published_curves(FRAG_FILE).get(key, np.full_like(published, np.nan))
    return RunCheck(
        out.workload,
        policy,
        seed,
        out.curve,
        published,
        out.frag_curve,
        published_frag,
        out.result.failed,
        out.result.wall_s,
    )


def warm_up() -> None:
    """Compile (or load from the on-disk cache) every kernel once before forking workers."""
    from gpudefrag.experiments.common.inputs import cluster_from_nodes, workload_inputs
    from gpudefrag.model.pods import PodSpec
    from gpudefrag.policies.registry import make_policy

    inputs = workload_inputs()
    state = cluster_from_nodes(inputs.nodes)
    for name in POLICY_NAMES:
        make_policy(name, inputs.typical).select(state, PodSpec(1000, 1024, 1, 500))


def run_calibration(
    workloads: Iterable[str],
    policies: Iterable[str] = POLICY_NAMES,
    seeds: Iterable[int] = DEFAULT_SEEDS,
    jobs: int | None = None,
    progress: bool = True,
    executor: RunExecutor | None = None,
) -> list[RunCheck]:
    """Run the grid on ``executor`` (default: a local pool of ``jobs`` processes, all cores by
    default); results in (workload, policy, seed) order whatever the executor."""
    from gpudefrag.experiments.common.inputs import workload_inputs

    workloads, policies, seeds = list(workloads), list(policies), list(seeds)
    for w in workloads:
        workload_inputs(w)  # fail fast on a bad name or file, before any worker starts
    published = published_curves(ALLOC_FILE)
    published_curves(FRAG_FILE)
    stems = {w: workload_inputs(w).name for w in workloads}
    missing = [
        (stems[w], p, s)
        for w in workloads
        for p in policies
        for s in seeds
        if (stems[w], PUBLISHED_LABEL[p], s) not in published
    ]
    if missing:
        from gpudefrag.errors import ConfigError

        raise ConfigError(f"no published row for {len(missing)} runs, e.g. {missing[0]}")
    executor = executor or RunExecutor(jobs)
    record_executor(executor.describe())
    if executor.local:
        warm_up()
    tasks = [(w, p, s) for w in workloads for p in policies for s in seeds]
    return executor.run_all(_check_one, tasks, "calib", progress)


def summarise(checks: list[RunCheck]) -> list[PolicySummary]:
    """Per (workload, policy): seed means at the checkpoints, exact runs, and the gate verdict."""
    groups: dict[tuple[str, str], list[RunCheck]] = {}
    for c in checks:
        groups.setdefault((c.workload, c.policy), []).append(c)
    out = []
    for (workload, policy), runs in groups.items():
        ours = np.array([r.curve for r in runs])
        pub = np.array([r.published for r in runs])
        ours_mean = {x: float(np.nanmean(ours[:, x])) for x in CHECKPOINTS}
        pub_mean = {x: float(np.nanmean(pub[:, x])) for x in CHECKPOINTS}
        exact = sum(r.exact for r in runs)
        max_diff = max(r.max_abs_diff for r in runs)
        if policy in DETERMINISTIC_POLICIES:
            passed = exact == len(runs)
        else:
            passed = all(abs(ours_mean[x] - pub_mean[x]) <= RANDOM_TOLERANCE_PP + 1e-9 for x in CHECKPOINTS)
        frag_exact = sum(r.frag_exact for r in runs)
        out.append(
            PolicySummary(
                workload, policy, len(runs), exact, ours_mean, pub_mean, max_diff, frag_exact, passed
            )
        )
    return out


def format_table(summaries: list[PolicySummary]) -> str:
    """A Markdown table: ours vs published seed-mean at the checkpoints, max |Δ|, exact k/n, gate."""
    head = (
        ["workload", "policy"]
        + [f"{x}% ours / published" for x in CHECKPOINTS]
        + ["max |Δ|", "exact", "frag exact", "gate"]
    )
    lines = [
        "GPU allocation (%) at each share of the arrived load: our seed mean / the published one.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for s in summaries:
        cells = [s.workload.removeprefix("openb_pod_list_"), s.policy]
        cells += [f"{s.ours_mean[x]:.2f} / {s.published_mean[x]:.2f}" for x in CHECKPOINTS]
        cells += [
            f"{s.max_abs_diff:.2f}",
            f"{s.exact_runs}/{s.seeds}",
            f"{s.frag_exact_runs}/{s.seeds}",
            "pass" if s.passed else "FAIL",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_results(
    checks: list[RunCheck], summaries: list[PolicySummary], folder: Path, executor: str | None = None
) -> list[Path]:
    """``calib_runs.csv`` (one row per run) and ``calib_summary.csv`` / ``.md`` (the table, then
    the executor the runs ran on when ``executor`` is given)."""
    runs_path = folder / "calib_runs.csv"
    with atomic_write(runs_path) as fh:
        out = csv.writer(fh)
        out.writerow(
            ["workload", "policy", "seed", "exact", "frag_exact", "max_abs_diff", "failed_pods", "wall_s"]
            + [f"ours_{x}" for x in CHECKPOINTS]
            + [f"published_{x}" for x in CHECKPOINTS]
        )
        for c in checks:
            out.writerow(
                [
                    c.workload,
                    c.policy,
                    c.seed,
                    int(c.exact),
                    int(c.frag_exact),
                    f"{c.max_abs_diff:.4f}",
                    c.failed_pods,
                    f"{c.wall_s:.3f}",
                ]
                + [f"{c.curve[x]:.2f}" for x in CHECKPOINTS]
                + [f"{c.published[x]:.2f}" for x in CHECKPOINTS]
            )
    summary_path = folder / "calib_summary.csv"
    with atomic_write(summary_path) as fh:
        out = csv.writer(fh)
        out.writerow(
            ["workload", "policy", "seeds", "exact_runs", "frag_exact_runs", "max_abs_diff", "passed"]
            + [f"ours_mean_{x}" for x in CHECKPOINTS]
            + [f"published_mean_{x}" for x in CHECKPOINTS]
        )
        for s in summaries:
            out.writerow(
                [
                    s.workload,
                    s.policy,
                    s.seeds,
                    s.exact_runs,
                    s.frag_exact_runs,
                    f"{s.max_abs_diff:.4f}",
                    int(s.passed),
                ]
                + [f"{s.ours_mean[x]:.4f}" for x in CHECKPOINTS]
                + [f"{s.published_mean[x]:.4f}" for x in CHECKPOINTS]
            )
    md_path = folder / "calib_summary.md"
    with atomic_write(md_path) as fh:
        fh.write(format_table(summaries) + "\n")
        if executor is not None:
            fh.write(f"\nExecutor: {executor}\n")
    return [runs_path, summary_path, md_path]

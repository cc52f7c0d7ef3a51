"""The batch placer's settings (:class:`SolverConfig`), apart from the placer so that settings and
flags can be declared without loading OR-Tools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from annotated_types import Interval

__all__ = ["SolverConfig"]


@dataclass(frozen=True)
class SolverConfig:
    """Knobs of the batch placer.

    ``time_limit_s`` is the wall-clock budget per batch.  With ``deterministic`` set, the solver
    runs with a fixed seed and worker count and stops on ``deterministic_time`` (CP-SAT's
    machine-independent work units), so a rerun is bit for bit identical; the wall-clock budget
    then only guards against a stuck solve (a batch cut by it is counted in ``wall_limited``).
    """

    __pydantic_config__: ClassVar[dict[str, str]] = {"extra": "forbid"}  # unknown keys in a file: an error

    time_limit_s: Annotated[float, Interval(gt=0, le=3600)] = 0.5
    deterministic_time: Annotated[float, Interval(gt=0, le=3600)] = 0.01
    candidates_per_pod: Annotated[int, Interval(ge=1, le=10_000)] = 8
    max_pattern_size: Annotated[int, Interval(ge=1, le=64)] = 4
    max_patterns_per_node: Annotated[int, Interval(ge=1, le=10_000)] = 48
    prune_infeasible: bool = True
    protect_blocked: Annotated[int, Interval(ge=0, le=10_000)] = 0
    """Nodes to protect for blocked large pods (:mod:`gpudefrag.batch.protect`): FGD's plan keeps
    every pod off them while it fits elsewhere, and the solver pays ``protect_penalty_milli`` per
    protected node a plan uses."""
    protect_min_gpus: Annotated[int, Interval(ge=1, le=8)] = 2
    """Only blocked pods needing at least this many whole GPUs are protected."""
    protect_penalty_milli: Annotated[float, Interval(ge=0, le=1e9)] = 16000.0
    """Added to a plan's fragmentation for each protected node it uses (milli-GPU)."""
    min_solver_batch: Annotated[int, Interval(ge=1, le=10_000)] = 1
    """Batches with fewer pods take FGD's plan without a solve (FGD's truncated scores and
    tie-break pack better than an exact single-pod optimum: suite 1a, ``solver-b1``)."""
    age_weight_milli_per_s: Annotated[float, Interval(ge=0, le=1e6)] = 0.0
    """Age bonus of a placed pod, in milli-GPU per second it has waited, added to its GPU milli
    in the objective's first term (0: GPU milli only)."""
    age_max_gpus: Annotated[int, Interval(ge=0, le=8)] = 0
    """Only pods asking at most this many GPUs earn an age bonus (0: every pod).  A multi-GPU
    pod that has waited an hour outweighs any number of small pods for the same whole GPUs;
    with 1, a drained node goes to the small pods behind it, and the multi-GPU pod keeps its
    queue place in FGD's plan and its defragmentation plans (docs/tuning-suite1b.md, tenth
    part)."""
    whole_gpu_above_milli: Annotated[int, Interval(ge=0, le=999)] = 0
    """A sharing pod asking more than this many milli-GPU counts as a whole GPU (1,000 milli) in
    the objective's first term (0: every pod counts its own milli).  Few pods can share the rest
    of its GPU, so placing it takes the GPU much as a whole-GPU pod does; counted at its own
    milli, it loses every whole GPU to a whole-GPU pod that arrived after it (age bonuses aside)
    when whole GPUs are scarce (docs/tuning-suite1b.md, ninth part)."""
    lifetime_ties: bool = False
    """FGD's plan breaks score ties by the nodes' expected busy times when the scheduler gives
    node lifetimes (:mod:`gpudefrag.batch.lifetime`)."""
    deterministic: bool = True
    seed: Annotated[int, Interval(ge=0, le=2**31 - 1)] = 0
    workers: Annotated[int, Interval(ge=1, le=256)] = 1

"""Joint placement of a batch of pods: patterns -> CP-SAT -> validate -> keep the better of {solver, FGD}."""

from gpudefrag.batch.placer import BatchPlacer, BatchResult, SolverConfig

__all__ = ["BatchPlacer", "BatchResult", "SolverConfig"]

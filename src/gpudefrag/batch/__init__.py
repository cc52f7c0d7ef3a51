"""Joint placement of a batch of pods: patterns -> CP-SAT -> validate -> keep the better of {solver, FGD}
(:mod:`gpudefrag.batch.placer`; its settings in :mod:`gpudefrag.batch.solver_config`)."""

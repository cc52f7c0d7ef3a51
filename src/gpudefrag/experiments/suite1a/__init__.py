"""Suite 1a: FGD and its baselines on the openb trace, and the solver batches, arrival-only."""

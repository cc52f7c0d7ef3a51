"""The FGD protocol: one seeded run (run), the published curves (published), their discretisation (discretize) and the calibration gate (gate)."""

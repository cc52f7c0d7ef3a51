"""Experiments: the calibration gate, suites, statistics and reports."""

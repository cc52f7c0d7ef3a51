"""Shared by every suite: atomic result files, the machine and data a report states, where runs execute (in process, a pool, Dask), KEY=VALUE overrides, seed statistics, trace inputs, event logs."""

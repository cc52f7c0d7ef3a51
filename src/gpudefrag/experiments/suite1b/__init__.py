"""Suite 1b: the time-driven pod simulator with defragmentation: settings, scenario, runs, report, charts, the acceptance check and the noise floor."""

"""Jobs and gangs on a multi-level topology: placement policies (baselines and ours), gang
defragmentation and the job-level simulator of suite 2."""

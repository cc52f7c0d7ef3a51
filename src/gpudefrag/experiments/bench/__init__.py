"""Benchmarks that print figures: decision latency of one FGD run, the million-GPU scale bench and sweep, the gang scale bench."""

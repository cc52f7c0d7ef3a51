"""Simulators: the arrival-only replay of FGD's protocol (and later the time-driven engine)."""

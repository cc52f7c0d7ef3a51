"""Simulators: the arrival-only replay of FGD's protocol (``arrival``, ``batch_arrival``) and the
time-driven simulator (``timed``: a driver of the decision core, implementing its port)."""

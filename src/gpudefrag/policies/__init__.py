"""Per-pod placement policies and their registry."""

from gpudefrag.policies.registry import POLICY_NAMES, make_policy

__all__ = ["POLICY_NAMES", "make_policy"]

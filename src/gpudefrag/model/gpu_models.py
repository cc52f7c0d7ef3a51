"""GPU models known to gpudefrag and the bitmask encoding of a pod's model constraint.

A pod may restrict itself to some GPU models (openb column ``gpu_spec``, e.g. ``V100M16|V100M32``).
We encode the constraint as a bitmask over model ids: bit ``i`` set means model ``KNOWN_GPU_MODELS[i]``
is accepted. ``ANY_GPU_MODEL`` (-1, every bit set) means "no constraint".  The rule is the
reference simulator's ``IsNodeAccessibleToPodByType``: an empty constraint matches every node;
otherwise the node matches if any non-empty ``|``-separated part equals its model exactly.
"""

from __future__ import annotations

from gpudefrag.model.constants import ANY_GPU_MODEL

KNOWN_GPU_MODELS: tuple[str, ...] = ("A10", "G2", "G3", "P100", "T4", "V100M16", "V100M32")
"""Every GPU model that appears in the openb node list; ids are positions in this tuple."""

MODEL_ID: dict[str, int] = {name: i for i, name in enumerate(KNOWN_GPU_MODELS)}


def model_id(name: str) -> int:
    """Id of a known GPU model; raises ``KeyError`` listing the known models otherwise."""
    try:
        return MODEL_ID[name]
    except KeyError:
        raise KeyError(f"unknown GPU model {name!r}; known: {', '.join(KNOWN_GPU_MODELS)}") from None


def gpu_model_mask(gpu_spec: str) -> int:
    """Bitmask of the models a ``|``-separated constraint accepts (``ANY_GPU_MODEL`` if empty)."""
    parts = [p for p in gpu_spec.split("|") if p]
    if not parts:
        return ANY_GPU_MODEL
    mask = 0
    for part in parts:
        mask |= 1 << model_id(part)
    return mask


def mask_accepts(mask: int, model: int) -> bool:
    """True when a pod with constraint ``mask`` may use a GPU of model id ``model``."""
    return bool((mask >> model) & 1)

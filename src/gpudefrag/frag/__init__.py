"""The target workload ("typical pods") and FGD's fragmentation measure."""

from gpudefrag.frag.typical import TypicalPods, typical_pods

__all__ = ["TypicalPods", "typical_pods"]

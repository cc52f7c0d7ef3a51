"""Every annotation, label and resource name the driver reads or writes (one place, documented
in ``docs/kubernetes.md``)."""

from __future__ import annotations

SCHEDULER_NAME = "gpudefrag"
"""Pods with ``spec.schedulerName: gpudefrag`` are ours."""

# ---- requests -----------------------------------------------------------------------------
NVIDIA_GPU = "nvidia.com/gpu"
"""Whole GPUs, in ``resources.limits`` (or ``requests``) of the containers."""
ALIBABA_GPU_MILLI = "alibabacloud.com/gpu-milli"
"""openb convention (pod annotation): GPU milli per GPU, 1..1000."""
ALIBABA_GPU_COUNT = "alibabacloud.com/gpu-count"
"""openb convention (pod annotation): number of GPUs (default 1)."""
ALIBABA_GPU_MODEL = "alibabacloud.com/gpu-card-model"
"""openb convention (pod annotation): accepted GPU models, ``|``-separated; also the node label
naming a node's GPU model."""
ALIBABA_GPU_INDEX = "alibabacloud.com/gpu-index"
"""The GPU assignment, written by the scheduler in the binding's annotations: comma-separated
GPU indices (``"0"``, ``"2,3"``); empty for a CPU-only pod."""
KAI_GPU_FRACTION = "gpu-fraction"
"""NVIDIA KAI convention (pod annotation): a fraction of one GPU, ``0 < f <= 1``."""
NVIDIA_GPU_PRODUCT = "nvidia.com/gpu.product"
"""GPU feature discovery's node label naming the GPU model (read when the openb label is absent)."""

# ---- gangs and topology -------------------------------------------------------------------
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
"""scheduler-plugins: the PodGroup a pod belongs to (same namespace)."""
POD_GROUP_API = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
KUEUE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
"""Kueue TAS (pod annotation): a node label of the topology; all pods of the gang in one domain
of that level, or wait."""
KUEUE_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
"""Kueue TAS (pod annotation): start in one domain of that level, go up when it does not fit."""

# ---- checkpoints, disruption, reservations (ours) -----------------------------------------
LAST_CHECKPOINT = "gpudefrag.io/last-checkpoint"
"""RFC 3339 time of the pod's last checkpoint (absent: none yet; a restart begins from scratch)."""
CHECKPOINT_INTERVAL_S = "gpudefrag.io/checkpoint-interval-s"
"""Seconds between the pod's checkpoints (absent: it does not checkpoint)."""
DO_NOT_DISRUPT = "gpudefrag.io/do-not-disrupt"
"""``"true"``: the defragmentation controller never evicts the pod."""
RESERVED_FOR = "gpudefrag.io/reserved-for"
"""Node annotation written by the defragmentation controller: ``namespace/name`` of the blocked
pod the node's freed room is held for.  The scheduler places no other pod there."""
RESERVED_UNTIL = "gpudefrag.io/reserved-until"
"""Node annotation: RFC 3339 time at which the reservation expires."""
PLAN = "gpudefrag.io/defrag-plan"
"""Node annotation: JSON of the plan being executed for the reservation (victim pod UIDs), so a
restarted controller continues it instead of planning again."""
FAKE_RUN_S = "gpudefrag.io/fake-run-s"
"""Fake kubelet only: seconds the pod runs before it succeeds."""

MIRROR_POD = "kubernetes.io/config.mirror"
"""Annotation the kubelet sets on the API's mirror of a static pod."""

"""The pod status the fake kubelet writes when a pod starts and when it completes."""

from __future__ import annotations

from typing import Any

from gpudefrag.k8s.timefmt import to_rfc3339


def pod_status(uid: str, containers: list[str], now_s: float, running: bool) -> dict[str, Any]:
    """The status the kubelet writes when the pod starts (Running, ``startTime``, Ready) or when
    it completes (Succeeded, exit code 0, Ready False)."""
    now = to_rfc3339(now_s)
    ready = "True" if running else "False"
    done = {} if running else {"reason": "PodCompleted"}
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": now} for t in ("PodScheduled", "Initialized")
    ] + [
        {"type": t, "status": ready, "lastTransitionTime": now, **done} for t in ("ContainersReady", "Ready")
    ]
    state = (
        {"running": {"startedAt": now}}
        if running
        else {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now}}
    )
    statuses = [
        {
            "name": c,
            "ready": running,
            "started": running,
            "restartCount": 0,
            "image": "gpudefrag/fake",
            "imageID": "",
            "containerID": f"fake://{uid}/{c}",
            "state": state,
        }
        for c in containers
    ]
    status: dict[str, Any] = {"phase": "Running" if running else "Succeeded", "conditions": conditions}
    if running:
        status["startTime"] = now
    return {**status, "containerStatuses": statuses}

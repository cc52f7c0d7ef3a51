"""A lightkube client for the cluster a kubeconfig names (the driver's one maintained client
library: lightkube is typed, small and synchronous-friendly; the official client would add a
large generated package for the dozen calls used here)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import msgspec
from lightkube import Client, KubeConfig
from lightkube.models.core_v1 import ObjectReference
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta, Preconditions
from lightkube.resources.core_v1 import Pod

from gpudefrag.errors import InputError


def client_factory(kubeconfig: Path) -> Callable[[], Client]:
    """A function returning a fresh ``lightkube.Client`` for the cluster of ``kubeconfig``."""
    if not kubeconfig.is_file():
        raise InputError(kubeconfig, "no such kubeconfig file")
    try:
        config = KubeConfig.from_file(str(kubeconfig))
        config.get()
    except Exception as e:  # yaml errors and the like: still one line, exit 2
        raise InputError(kubeconfig, "not a usable kubeconfig: " + " ".join(str(e).split())) from None

    def make() -> Client:
        return Client(config=config, field_manager="gpudefrag")

    return make


def bind_pod(
    client: Client, namespace: str, name: str, node: str, annotations: dict[str, str] | None = None
) -> None:
    """``POST pods/{name}/binding`` (the annotations are copied onto the pod by the API server).

    The API answers 201 with a Success Status, which lightkube 1.0 tries to read as a Binding
    and fails on (no ``target``) after the bind has happened: that failure is the success."""
    binding = Pod.Binding(
        metadata=ObjectMeta(name=name, namespace=namespace, annotations=annotations),
        target=ObjectReference(apiVersion="v1", kind="Node", name=node),
    )
    with contextlib.suppress(msgspec.ValidationError):
        client.create(binding, name=name, namespace=namespace)


def evict_pod(client: Client, namespace: str, name: str, uid: str | None = None) -> None:
    """``POST pods/{name}/eviction`` (``policy/v1``), only of the pod with ``uid`` when given (a
    replacement with the same name is not touched: 409); a 429 (a PodDisruptionBudget allows no
    disruption now) and every other refusal raise ``lightkube.ApiError``.  The 201 Success
    Status is not read as an Eviction (as in :func:`bind_pod`)."""
    options = DeleteOptions(preconditions=Preconditions(uid=uid)) if uid else None
    eviction = Pod.Eviction(metadata=ObjectMeta(name=name, namespace=namespace), deleteOptions=options)
    with contextlib.suppress(msgspec.ValidationError):
        client.create(eviction, name=name, namespace=namespace)

"""The what-if analysis on small hand-made snapshots, every figure worked out in comments.

The scenario (``scenario()``): three nodes of 4 GPUs (V100M16, 32 CPUs, 128 GiB), now = T0.

    n1: w1 (1 GPU, GPU 0; started T0-1000 s, no checkpoint)
        w2 (1 GPU, GPU 1; started T0-3000 s, last checkpoint T0-100 s)        -> 2 GPUs free
    n2: w3 (2 GPUs, 0-1; started T0-50 s)  w4 (1 GPU, GPU 2; started T0-10 s) -> 1 free
    n3: w5 (3 GPUs; no gpu-index: the lowest free, 0-2)                         -> 1 free
    pending, in creation order: big (4 GPUs), small (1 GPU), cpuhog (100 CPUs, no GPU)

Allocation now: 8 of 12 GPUs = 66.67 %.  Typical pods (the 8 pods, all 1 CPU but cpuhog):
1-GPU x4 (f 4/8), and f 1/8 each for cpuhog, 2-, 3- and 4-GPU.  Every GPU is wholly free or
full, so FGD's F(node) = idle x (f of cpuhog, which never uses GPUs, + f of the GPU pods that do
not fit): F(idle 2) = 2000 x 3/8 = 750, F(idle 1) = 1000 x 4/8 = 500, F(idle 4) = 4000 x 1/8 =
500, F(idle 3) = 3000 x 2/8 = 750.  Now: 750 + 500 + 500 = 1750 milli = 1.75 GPUs = 43.75 %
of the 4 unallocated GPUs.

Pending: small fits now; big (4 GPUs) is blocked by fragmentation (4 GPUs free in total, at
most 2 on a node); cpuhog fits nowhere (100 CPUs > 32): short of capacity.

Plan for big (restart 60 s, grace 30 s; cost = GPUs x (lost + 30 + 60)):
    free n1: move w1 (1 x (1000 + 90) = 1090) and w2 (1 x (100 + 90) = 190)  = 1280
    free n2: move w3 (2 x (50 + 90) = 280) and w4 (1 x (10 + 90) = 100)      =  380  <- cheapest
    free n3: w5 (3 GPUs) has no node with 3 free GPUs                          impossible
so w3 -> n1 (GPUs 2, 3) and w4 -> n3 (GPU 3); total 380 GPU-s.

Placement by FGD, creation order:
(a) big does not fit; small: on n2 or n3 F goes 500 -> 0 (on n1 750 -> 500), so n2 (tie ->
    lowest rank); cpuhog nowhere.  9 / 12 GPUs = 75 %; F = 750 + 0 + 500 = 1.25 GPUs.
(b) after the moves n1, n3 are full and big takes n2: 12 / 12 = 100 %; small and cpuhog wait.
(c) from empty, in creation order: w1 -> n1 (tie); w2: n1 F 750 -> 750 vs n2 500 -> 750: n1;
    w3: n1 750 -> 0: n1; w4: n2 (tie with n3); w5: n2 F 750 -> 0 vs n3 500 -> 500: n2;
    big -> n3; small, cpuhog: no room.  12 / 12 = 100 %, 6 pods placed.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_k8s_snapshot import T0_S, at, make_node, make_pod

from gpudefrag.errors import ConfigError, InputError
from gpudefrag.k8s.checkpoints import lost_work_s, never_moved_reason
from gpudefrag.k8s.requests import ObjectError
from gpudefrag.k8s.snapshot import snapshot_from_objects
from gpudefrag.k8s.whatif import place_in_order, snapshot_typical, what_if
from gpudefrag.model.gpu_models import MODEL_ID
from gpudefrag.policies.registry import make_policy

CHECKPOINT = "gpudefrag.io/last-checkpoint"


def scenario(w3: dict[str, Any] | None = None, w4: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The module docstring's snapshot; ``w3``/``w4``: extra keyword arguments for those pods."""
    return [
        make_node("n1"),
        make_node("n2"),
        make_node("n3"),
        make_pod("w1", gpus=1, node="n1", gpu_index="0", created_s=-5000, started_s=-1000),
        make_pod(
            "w2",
            gpus=1,
            node="n1",
            gpu_index="1",
            created_s=-4000,
            started_s=-3000,
            annotations={CHECKPOINT: at(-100)},
        ),
        make_pod("w3", gpus=2, node="n2", gpu_index="0,1", created_s=-3000, started_s=-50, **(w3 or {})),
        make_pod("w4", gpus=1, node="n2", gpu_index="2", created_s=-2000, started_s=-10, **(w4 or {})),
        make_pod("w5", gpus=3, node="n3", created_s=-1000),
        make_pod("big", gpus=4, created_s=-300),
        make_pod("small", gpus=1, created_s=-200),
        make_pod("cpuhog", cpu="100", created_s=-100),
    ]


def test_the_scenario() -> None:
    r = what_if(snapshot_from_objects(scenario()), "fgd", restart_s=60.0, now_s=T0_S)
    assert (r.current.allocated_gpu_milli, r.current.capacity_gpu_milli) == (8000, 12000)
    assert r.current.frag_gpus == pytest.approx(1.75)
    assert r.current.frag_pct_of_unallocated == pytest.approx(43.75)
    assert (r.fits_now, r.blocked, r.no_capacity) == (["default/small"], ["default/big"], ["default/cpuhog"])
    [plan] = r.plans
    assert (plan.pod, plan.target_node, plan.cost_gpu_s) == ("default/big", "n2", pytest.approx(380.0))
    moves = {m.pod: (m.from_node, m.to_node, m.gpus, m.cost_gpu_s) for m in plan.moves}
    assert moves == {"default/w3": ("n2", "n1", (2, 3), 280.0), "default/w4": ("n2", "n3", (3,), 100.0)}
    assert r.total_cost_gpu_s == pytest.approx(380.0) and r.unplanned == []

    a, b, c = r.pending_placed, r.after_plan, r.repacked
    assert (a.allocation_pct, a.frag_gpus, a.placed, a.unplaced) == (
        75.0,
        pytest.approx(1.25),
        1,
        ("default/big", "default/cpuhog"),
    )
    assert (b.allocation_pct, b.frag_gpus, b.placed, b.unplaced) == (
        100.0,
        0.0,
        1,
        ("default/small", "default/cpuhog"),
    )
    assert (c.allocation_pct, c.frag_gpus, c.placed, c.unplaced) == (
        100.0,
        0.0,
        6,
        ("default/small", "default/cpuhog"),
    )


@pytest.mark.parametrize(
    ("w3", "w4", "why"),
    [
        ({}, {"annotations": {"gpudefrag.io/do-not-disrupt": "true"}}, "do-not-disrupt"),
        ({"owner": False}, {}, "no controller"),
        ({"labels": {"scheduling.x-k8s.io/pod-group": "g"}}, {}, "gang member"),
    ],
)
def test_pods_never_moved_push_the_plan_to_another_node(
    w3: dict[str, Any], w4: dict[str, Any], why: str
) -> None:
    # n2 cannot be freed any more (w3 or w4 stays), so the plan frees n1: 1090 + 190 = 1280 GPU-s;
    # w1 (listed first) goes to the first node with room, n2 (GPU 3), w2 to n3 (GPU 3)
    snap = snapshot_from_objects(scenario(w3, w4))
    fixed = [never_moved_reason(snap.objects[req.key], req) for req, _, _ in snap.running]
    assert why in fixed
    r = what_if(snap, now_s=T0_S)
    [plan] = r.plans
    assert plan.target_node == "n1" and plan.cost_gpu_s == pytest.approx(1280.0)
    moves = {m.pod: (m.to_node, m.gpus, m.cost_gpu_s) for m in plan.moves}
    assert moves == {"default/w1": ("n2", (3,), 1090.0), "default/w2": ("n3", (3,), 190.0)}


def test_no_plan_when_nothing_may_move() -> None:
    items = [o if o["kind"] == "Node" or "nodeName" not in o["spec"] else _orphan(o) for o in scenario()]
    r = what_if(snapshot_from_objects(items), now_s=T0_S)
    assert r.blocked == ["default/big"] and r.plans == [] and r.unplanned == ["default/big"]
    assert r.total_cost_gpu_s == 0.0
    # without moves, (b) is (a)
    assert (r.after_plan.allocated_gpu_milli, r.after_plan.unplaced) == (
        9000,
        ("default/big", "default/cpuhog"),
    )


def _orphan(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"].pop("ownerReferences", None)
    return pod


def test_restart_time_changes_the_cost() -> None:
    # restart 0: w3 2 x (50 + 30) = 160, w4 1 x (10 + 30) = 40
    r = what_if(snapshot_from_objects(scenario()), restart_s=0.0, now_s=T0_S)
    assert r.plans[0].target_node == "n2" and r.total_cost_gpu_s == pytest.approx(200.0)


def test_unusable_nodes_take_no_new_pod_but_count() -> None:
    # n4 (4 free GPUs) is not Ready: big stays blocked and the plan is unchanged; its idle GPUs
    # add F = 4000 x 1/8 = 500 milli; small goes to n2 as before (9 of 16 GPUs)
    items = scenario() + [make_node("n4", ready=False)]
    r = what_if(snapshot_from_objects(items), now_s=T0_S)
    assert r.unusable_nodes == ["n4"]
    assert r.blocked == ["default/big"] and r.plans[0].target_node == "n2"
    assert r.current.frag_gpus == pytest.approx(2.25)
    assert r.pending_placed.allocated_gpu_milli == 9000 and r.pending_placed.capacity_gpu_milli == 16000
    assert r.pending_placed.frag_gpus == pytest.approx(1.25 + 0.5)
    assert r.repacked.placed == 6  # n4 takes nothing in the re-placement either


def test_place_in_order_keeps_gangs_whole() -> None:
    snap = snapshot_from_objects(scenario())
    state = snap.cluster_state()
    before = state.snapshot()
    gang = {"labels": {"scheduling.x-k8s.io/pod-group": "g"}}
    pods = [make_pod("g-0", gpus=2, created_s=-10, **gang), make_pod("g-1", gpus=2, created_s=-9, **gang)]
    # g-0 fits on n1 (2 free GPUs), g-1 then fits nowhere (1 GPU free on n2 and n3): neither binds
    reqs = snapshot_from_objects([make_node("x"), *pods]).pending
    policy = make_policy("fgd", snapshot_typical(snap))
    assert place_in_order(state, reqs, policy) == (0, ["default/g-0", "default/g-1"])
    assert state.snapshot() == before
    # a gang of two 1-GPU pods fits
    ones = [make_pod("h-0", gpus=1, **gang), make_pod("h-1", gpus=1, **gang)]
    reqs = snapshot_from_objects([make_node("x"), *ones]).pending
    assert place_in_order(state, reqs, policy) == (2, [])
    assert state.used_gpu_milli == 10_000


def test_lost_work() -> None:
    def pod(started_s: float | None, checkpoint_s: float | None) -> dict[str, Any]:
        ann = {} if checkpoint_s is None else {CHECKPOINT: at(checkpoint_s)}
        p = make_pod("p", gpus=1, node="n1", started_s=started_s or 0.0, annotations=ann)
        if started_s is None:
            del p["status"]["startTime"]
        return p

    assert lost_work_s(pod(-600, None), T0_S) == 600  # no checkpoint: since the start
    assert lost_work_s(pod(-600, -120), T0_S) == 120  # since the last checkpoint
    assert lost_work_s(pod(-600, -900), T0_S) == 600  # a checkpoint older than this start
    assert lost_work_s(pod(None, None), T0_S) == 0  # not started
    bad = pod(-600, None)
    bad["metadata"]["annotations"][CHECKPOINT] = "yesterday"
    with pytest.raises(ObjectError, match=r"annotation 'gpudefrag\.io/last-checkpoint': 'yesterday'"):
        lost_work_s(bad, T0_S)
    bad = pod(-600, None)
    bad["metadata"]["annotations"]["gpudefrag.io/checkpoint-interval-s"] = "-5"
    with pytest.raises(ObjectError, match="checkpoint-interval-s"):
        lost_work_s(bad, T0_S)


def test_a_malformed_checkpoint_names_the_object() -> None:
    items = scenario(w4={"annotations": {CHECKPOINT: "soon"}})
    snap = snapshot_from_objects(items, source="snap.json")
    with pytest.raises(
        InputError, match=r"^snap.json: pods/default/w4: annotation 'gpudefrag.io/last-checkpoint'"
    ):
        what_if(snap, now_s=T0_S)


def test_unknown_policy() -> None:
    with pytest.raises(ConfigError, match="unknown policy 'nope'"):
        what_if(snapshot_from_objects(scenario()), "nope", now_s=T0_S)


def test_typical_pods_key_models_by_name() -> None:
    # "A10|H100" and "H100|A10" are one constraint; H100 is not a model gpudefrag knows
    ann1 = {"alibabacloud.com/gpu-card-model": "A10|H100"}
    ann2 = {"alibabacloud.com/gpu-card-model": "H100|A10"}
    items = [
        make_node("n1", model="H100"),
        make_pod("a", gpus=1, annotations=ann1),
        make_pod("b", gpus=1, annotations=ann2),
        make_pod("c", gpus=1),
    ]
    snap = snapshot_from_objects(items)
    tp = snapshot_typical(snap)
    h100 = snap.models.id_of("H100")
    rows = {
        (spec, int(count)): int(mask) for spec, count, mask in zip(tp.gpu_spec, tp.count, tp.gpu_model_mask)
    }
    assert rows == {("A10|H100", 2): (1 << MODEL_ID["A10"]) | (1 << h100), ("", 1): -1}

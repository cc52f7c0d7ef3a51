"""``gpudefrag plan``'s analysis on small hand-made snapshots, one per rule, every figure worked
out in comments.

The scenario (``scenario()``): three V100M16 nodes and one T4 node, 4 GPUs each (32 CPUs,
128 GiB), now = T0.  Every pod is ours (``schedulerName: gpudefrag``) with a ReplicaSet owner.

    n1: w1 (1 GPU, GPU 0; started T0-1000 s, no checkpoint)
        w2 (1 GPU, GPU 1; started T0-3000 s, last checkpoint T0-100 s)        -> 2 GPUs free
    n2: w3 (2 GPUs, 0-1; started T0-50 s)  w4 (1 GPU, GPU 2; started T0-10 s) -> 1 free
    n3: w5 (3 GPUs; no gpu-index: the lowest free, 0-2; started T0-1000 s)    -> 1 free
    n4 (T4): empty                                                            -> 4 free
    pending, in creation order: big (4 GPUs, V100M16 only), small (1 GPU), cpuhog (100 CPUs)

**Fragmentation now.**  The GPU workload is the 7 GPU pods (cpuhog is CPU-only): 1-GPU x4
(f 4/7), 2-GPU, 3-GPU and big (4-GPU, V100M16 only) 1/7 each.  Every GPU is wholly free or
full, so F(node) = free milli x the f of the GPU pods that do not fit: F(n1, 2 free) = 2000 x
2/7 = 571.4; F(n2) = F(n3) (1 free) = 1000 x 3/7 = 428.6; F(n4, 4 free T4) = 4000 x 1/7 (big:
another model) = 571.4.  Sum 2000 milli = 2.00 GPUs = 25.0 % of the 8 unallocated GPUs.

**Pending.**  big is blocked by fragmentation (4 V100 GPUs free in total, at most 2 on a node;
n4 is a T4); small fits now; cpuhog fits on no node (100 CPUs > 32).

**The controller's pass** (the defaults of ``gpudefrag defrag``: at most 8 moves, headroom 5 %;
suite 1b's planner: margin 0.2, harm weight 1, 32 drawn natural waits; restart 60 s, grace
30 s).  No pod has finished, so run times come from the prior, one run of 3,600 s: a pod that
has run a seconds has 3,600 - a left in every draw, and a pending pod is expected to run 3,600 s.
Headroom: with big placed 8 - 4 = 4 of 16 GPUs stay free (>= 5 %).  Two pending pods want room
of big's size (big and small), so its natural wait is the second room elsewhere.
Rooms for big: n1 at max(2600, 600) = 2600, n2 at max(3550, 3590) = 3590, n3 at 2600.
Cost = GPUs x (lost + 30 + 60); harm = sum over big's GPUs of (3600 - when that GPU frees).

    free n1: move w2 (1 x (100 + 90) = 190) and w1 (1 x (1000 + 90) = 1090) = 1280, harm
             (3600-2600) + (3600-600) + 3600 + 3600 = 11200: 12480
    free n2: move w4 (1 x (10 + 90) = 100) and w3 (2 x (50 + 90) = 280)     =  380, harm
             2 x (3600-3550) + (3600-3590) + 3600 = 3710: 4090                <- cheapest
    free n3: move w5 to n4 (3 x 1090 = 3270), harm 3 x 1000 + 3600: 9870

n2's benefit: min(second room elsewhere 2600, n2's own 3590) - 30 = 2570 s x 4 GPUs = 10280 >=
1.2 x 4090: the plan passes.  w3 (the larger) goes first to the first node with room, n1 (GPUs
2, 3); w4 then to n3 (GPU 3).  small is not blocked (n4 has room), cpuhog not by fragmentation.

**Before and after** (the scheduler, FGD against the same workload):
(a) big fits nowhere; small: n2 or n3 take F 428.6 -> 0 (n1 and n4 only -142.9), so 9 of 16
    GPUs, F = 571.4 + 0 + 428.6 + 571.4 = 1.57 GPUs; cpuhog waits: 1 placed, 2 pending.
(b) once w3 and w4 are evicted and recreated, n2 is reserved: big goes there; small to n3 (F
    428.6 -> 0); w3 (2 GPUs) to n1 (F 571.4 -> 0); w4 to n4 (the only room left): 13 of 16 GPUs,
    F = F(n4, 3 free T4: big does not fit) = 3000 x 1/7 = 0.43 GPUs; 2 placed + 2 moved, 1
    pending.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_k8s_snapshot import T0_S, at, make_node, make_pod

from gpudefrag.k8s.checkpoints import lost_work_s
from gpudefrag.k8s.defrag_config import DefragConfig
from gpudefrag.k8s.gpu_workload import gpu_workload_typical
from gpudefrag.k8s.nodes import ModelRegistry
from gpudefrag.k8s.policy import DecisionCore
from gpudefrag.k8s.requests import ObjectError, pod_request
from gpudefrag.k8s.whatif import WhatIf, what_if
from gpudefrag.model.gpu_models import MODEL_ID

CHECKPOINT = "gpudefrag.io/last-checkpoint"
V100_ONLY = {"alibabacloud.com/gpu-card-model": "V100M16"}


def scenario() -> list[dict[str, Any]]:
    """The module docstring's snapshot: nodes first, then pods."""
    return [
        make_node("n1"),
        make_node("n2"),
        make_node("n3"),
        make_node("n4", model="T4"),
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
        make_pod("w3", gpus=2, node="n2", gpu_index="0,1", created_s=-3000, started_s=-50),
        make_pod("w4", gpus=1, node="n2", gpu_index="2", created_s=-2000, started_s=-10),
        make_pod("w5", gpus=3, node="n3", created_s=-1000),
        make_pod("big", gpus=4, created_s=-300, annotations=dict(V100_ONLY)),
        make_pod("small", gpus=1, created_s=-200),
        make_pod("cpuhog", cpu="100", created_s=-100),
    ]


def by_name(items: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(o for o in items if o["metadata"]["name"] == name)


def analyse(items: list[dict[str, Any]], **config: Any) -> WhatIf:
    nodes = [o for o in items if o["kind"] == "Node"]
    pods = [o for o in items if o["kind"] == "Pod"]
    return what_if(nodes, pods, DefragConfig(**config), DecisionCore("fgd", []), T0_S)


def moves(r: WhatIf) -> list[tuple[str, str, str, str, tuple[int, ...], float]]:
    """(plan's pod, freed node, moved pod, to, GPUs, cost) of every move."""
    return [
        (p["pod"], p["node"], m["pod"], m["to"], tuple(m["gpus"]), m["cost_gpu_s"])
        for p in r.plans
        for m in p["moves"]
    ]


def verdicts(r: WhatIf) -> dict[str, str]:
    return {p.pod: p.verdict for p in r.pending}


def taint(node: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    node["spec"]["taints"] = [{"key": key, "value": value, "effect": "NoSchedule"}]
    return node


# ----------------------------------------------------------------------------- the scenario
def test_the_scenario() -> None:
    r = analyse(scenario())
    assert [(n.name, n.free_gpus, n.state) for n in r.nodes] == [
        ("n1", 2, "usable"),
        ("n2", 1, "usable"),
        ("n3", 1, "usable"),
        ("n4", 4, "usable"),
    ]
    assert (r.current.allocated_gpu_milli, r.current.capacity_gpu_milli) == (8000, 16000)
    assert r.current.frag_gpus == pytest.approx(2.0)
    assert r.current.frag_pct_of_unallocated == pytest.approx(25.0)
    assert r.workload_pods == 7
    assert verdicts(r) == {
        "default/big": "blocked by fragmentation",
        "default/small": "fits now",
        "default/cpuhog": "no node",
    }
    assert sorted(moves(r)) == [
        ("default/big", "n2", "default/w3", "n1", (2, 3), 280.0),
        ("default/big", "n2", "default/w4", "n3", (3,), 100.0),
    ]
    assert r.total_cost_gpu_s == pytest.approx(380.0)
    lost = {m["pod"]: m["lost_work_s"] for m in r.plans[0]["moves"]}
    assert lost == {"default/w3": 80.0, "default/w4": 40.0}  # since the start, plus the 30 s grace
    a, b = r.pending_placed, r.after_plan
    assert (a.allocated_gpu_milli, a.frag_gpus, a.placed, a.pending) == (
        9000,
        pytest.approx(1.5714, abs=1e-4),
        1,
        2,
    )
    assert (b.allocated_gpu_milli, b.frag_gpus, b.placed, b.moved, b.pending) == (
        13000,
        pytest.approx(0.4286, abs=1e-4),
        2,
        2,
        1,
    )


# ----------------------------------------------------------------------------- node selection
@pytest.mark.parametrize("how", ["nodeSelector", "affinity"])
def test_a_pod_no_node_selects_gets_no_plan(how: str) -> None:
    # big asks for H100 nodes: none of the four is one, so it may use no node and no plan may
    # free one for it (small and cpuhog as before)
    items = scenario()
    spec = by_name(items, "big")["spec"]
    if how == "nodeSelector":
        spec["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    else:
        term = {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [term]}]
                }
            }
        }
    r = analyse(items)
    row = next(p for p in r.pending if p.pod == "default/big")
    assert row.verdict == "no node" and "node selector or affinity rules out 4" in row.reason
    assert r.plans == []


def test_a_node_whose_taint_the_pod_does_not_tolerate_is_not_freed() -> None:
    # n2 is tainted; big does not tolerate it: the V100 nodes it may use (n1, n3) have 3 free
    # GPUs in total, short of its 4: no plan (before, the plan freed n2)
    items = scenario()
    taint(by_name(items, "n2"), "dedicated", "team-x")
    r = analyse(items)
    assert verdicts(r)["default/big"] == "short of capacity"
    assert r.plans == []
    assert next(n for n in r.nodes if n.name == "n2").taints == ("dedicated=team-x:NoSchedule",)


def test_moved_pods_keep_off_nodes_they_may_not_use() -> None:
    # n3 is tainted dedicated=ml; big tolerates it, w4 does not: the plan still frees n2 (same
    # costs and benefit), but w4 cannot go to n3 and takes the first node with room, n4 (GPU 0)
    items = scenario()
    taint(by_name(items, "n3"), "dedicated", "ml")
    by_name(items, "big")["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "ml"}]
    r = analyse(items)
    assert sorted(moves(r)) == [
        ("default/big", "n2", "default/w3", "n1", (2, 3), 280.0),
        ("default/big", "n2", "default/w4", "n4", (0,), 100.0),
    ]


@pytest.mark.parametrize(("field", "state"), [("unschedulable", "cordoned"), ("ready", "NotReady")])
def test_a_cordoned_or_not_ready_node_is_not_freed(field: str, state: str) -> None:
    # n2 takes no new pod: big may use n1 and n3 only (3 free GPUs): short, no plan
    items = scenario()
    n2 = by_name(items, "n2")
    if field == "unschedulable":
        n2["spec"]["unschedulable"] = True
    else:
        n2["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    r = analyse(items)
    assert next(n.state for n in r.nodes if n.name == "n2") == state
    assert verdicts(r)["default/big"] == "short of capacity" and r.plans == []


def test_free_gpus_of_a_node_that_is_not_ready_do_not_count_as_headroom() -> None:
    # n4 (4 free GPUs) NotReady: with big placed no GPU of a usable node would stay free
    # (< 5 %), so the controller makes no plan; the headline still counts n4's free GPUs
    items = scenario()
    by_name(items, "n4")["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    r = analyse(items)
    assert verdicts(r)["default/big"] == "blocked by fragmentation" and r.plans == []
    assert r.current.frag_gpus == pytest.approx(2.0)


# ----------------------------------------------------------------------------- the workload
def _system_pods(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Five CPU-only DaemonSet pods on every node (0.1 CPU, 128 MiB) and a static pod on n1."""
    extra = []
    for node in ("n1", "n2", "n3", "n4"):
        for ds in ("kube-proxy", "dcgm-exporter", "node-exporter", "device-plugin", "fluent-bit"):
            p = make_pod(f"{ds}-{node}", cpu="100m", memory="128Mi", node=node, ns="kube-system")
            p["metadata"]["ownerReferences"] = [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds, "uid": ds, "controller": True}
            ]
            p["spec"]["schedulerName"] = "default-scheduler"
            extra.append(p)
    static = make_pod("etcd-n1", cpu="100m", memory="128Mi", node="n1", ns="kube-system", owner=False)
    static["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "abc"
    return items + extra + [static]


def test_system_pods_leave_the_headline_and_the_plan_unchanged() -> None:
    # 21 CPU-only system pods: not part of the GPU workload, never moved; they take 0.5-0.6 of
    # a node's 32 CPUs, which every pod here still fits beside
    base, r = analyse(scenario()), analyse(_system_pods(scenario()))
    assert r.workload_pods == base.workload_pods == 7
    assert r.current.frag_gpus == pytest.approx(2.0)
    assert r.current.frag_pct_of_unallocated == pytest.approx(25.0)
    assert moves(r) == moves(base)
    assert (r.after_plan.allocated_gpu_milli, r.after_plan.frag_gpus) == (
        13000,
        pytest.approx(0.4286, abs=1e-4),
    )


def test_pods_the_controller_may_not_evict_are_never_moved() -> None:
    # w3 belongs to another scheduler: n2 cannot be freed.  n1 (12480) or n3 (9870, w5 to n4):
    # n3 is cheaper, but its benefit is min(second room elsewhere 3590, its own 2600) - 30 = 2570
    # s x 4 GPUs = 10280 < 1.2 x 9870: no plan at all
    items = scenario()
    by_name(items, "w3")["spec"]["schedulerName"] = "default-scheduler"
    other = make_pod("other", gpus=1, created_s=-50)
    other["spec"]["schedulerName"] = "default-scheduler"
    r = analyse([*items, other])
    assert r.plans == []
    row = next(p for p in r.pending if p.pod == "default/other")
    assert not row.planned_for and "scheduler 'default-scheduler'" in row.reason


def test_the_controllers_budgets() -> None:
    # one move at most: n1 and n2 need two; n3 (one move) fails the hysteresis as above
    assert analyse(scenario(), max_moves=1).plans == []
    # 30 % headroom: with big placed 4 of 16 GPUs (25 %) would stay free: no plan
    assert analyse(scenario(), headroom_fraction=0.3).plans == []
    # restart 0: w3 2 x (50 + 30) = 160, w4 1 x (10 + 30) = 40
    assert analyse(scenario(), restart_s=0.0).total_cost_gpu_s == pytest.approx(200.0)


def test_a_malformed_checkpoint_is_reported_and_the_pod_kept() -> None:
    # w4's checkpoint does not parse: the controller never moves it, so n2 cannot be freed
    # (as in the test above: no plan)
    items = scenario()
    by_name(items, "w4")["metadata"]["annotations"][CHECKPOINT] = "soon"
    r = analyse(items)
    assert r.plans == []
    assert any("pods/default/w4: annotation 'gpudefrag.io/last-checkpoint'" in s for s in r.skipped)


def test_after_the_plan_the_evicted_pods_come_back_as_new_pending_pods() -> None:
    from gpudefrag.k8s.whatif import after_plan_objects

    items = scenario()
    nodes = [o for o in items if o["kind"] == "Node"]
    pods = [o for o in items if o["kind"] == "Pod"]
    plan = {"pod": "default/big", "node": "n2", "victims": ["uid-w3"], "moves": []}
    before = copy.deepcopy(items)
    new_nodes, new_pods = after_plan_objects(nodes, pods, [plan], T0_S, 600.0)
    assert items == before  # the inputs are not changed
    n2 = by_name(new_nodes, "n2")["metadata"]["annotations"]
    assert n2["gpudefrag.io/reserved-for"] == "default/big"
    w3 = by_name(new_pods, "w3")
    assert w3["metadata"]["uid"] == "uid-w3-recreated" and "nodeName" not in w3["spec"]
    assert (
        w3["status"] == {"phase": "Pending"}
        and "alibabacloud.com/gpu-index" not in w3["metadata"]["annotations"]
    )


# ----------------------------------------------------------------------------- pieces
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


def test_the_gpu_workload_keys_models_by_name_and_leaves_out_system_pods() -> None:
    # "A10|H100" and "H100|A10" are one constraint; H100 is not a model gpudefrag knows; the
    # CPU-only pod and the DaemonSet pod asking a GPU are not part of the workload
    models = ModelRegistry()
    models.id_of("H100")
    ann1 = {"alibabacloud.com/gpu-card-model": "A10|H100"}
    ann2 = {"alibabacloud.com/gpu-card-model": "H100|A10"}
    ds = make_pod("ds", gpus=1)
    ds["metadata"]["ownerReferences"][0]["kind"] = "DaemonSet"
    objs = [
        make_pod("a", gpus=1, annotations=ann1),
        make_pod("b", gpus=1, annotations=ann2),
        make_pod("c", gpus=1),
        make_pod("cpu", cpu="2"),
        ds,
    ]
    tp = gpu_workload_typical([(o, pod_request(o, models)) for o in objs], models.mask_of)
    rows = {
        (spec, int(count)): int(mask) for spec, count, mask in zip(tp.gpu_spec, tp.count, tp.gpu_model_mask)
    }
    h100 = models.id_of("H100")
    assert rows == {("A10|H100", 2): (1 << MODEL_ID["A10"]) | (1 << h100), ("", 1): -1}

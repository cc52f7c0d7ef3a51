"""A profile: the actions a scheduler runs, in order, with their settings, as a TOML or YAML file.

The simulators and the Kubernetes driver load the same profiles, so what a suite measured is
what a cluster runs, and ``gpudefrag plan`` runs the profile the controller runs.  The settings
of each action are the fields of the configuration that action takes, with the ranges declared
on those fields (:mod:`gpudefrag.settings`), checked here by pydantic:

* ``allocate``: ``placer`` (``fgd``, ``bestfit``, ``gpupacking``, ``gpuclustering``,
  ``dotprod``, ``random``, or ``solver``: CP-SAT batches warm-started from FGD) and the
  ``solver``'s settings (:class:`~gpudefrag.batch.solver_config.SolverConfig`);
* ``defragment``: the controller's budgets (:class:`DefragmentSettings`) and the
  ``planner``'s settings (:class:`~gpudefrag.defrag.planner_config.PlannerConfig`; the restart
  and grace times are the cluster's, set by the driver or the scenario, not here); for jobs and
  gangs, ``[defragment.gangs]``: the gang defragmenter's
  (:class:`~gpudefrag.gangs.defrag.DefragConfig`);
* ``consolidate``: KAI's Consolidate action (:mod:`gpudefrag.gangs.kai_consolidate`), no
  settings;
* ``preempt``: a victim rule for blocked jobs of higher priority (``victims``: ``kube``,
  ``kai`` or ``ours``) and how long ours may wait for its victims' checkpoints
  (:class:`PreemptSettings`);
* ``elastic``: powering nodes on and off with the queue
  (:class:`~gpudefrag.capacity.elastic_config.ElasticConfig`).

``allocate.gangs`` names the placer of jobs and gangs on a topology (``volcano``, ``kueue``,
``kai``, ``slurm``, ``fgd``, ``ours``, ``ours-batch``); unset, the driver places gangs its own
way.  Which actions a driver runs: the suites' job simulators run all five; the Kubernetes
driver runs ``allocate`` and ``defragment`` for pods and refuses a profile that asks more.

``actions`` lists the actions in the order they run; a table for an action not listed is an
error, so is a key no action has.  Example::

    name = "kubernetes"
    actions = ["allocate", "defragment"]

    [allocate]
    placer = "fgd"

    [defragment]
    headroom_fraction = 0.05

    [defragment.planner]
    max_moves = 8

Any problem is an :class:`~gpudefrag.errors.InputError` naming the file and the field
(``actions[2]``, ``defragment.planner.max_moves``).
"""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from annotated_types import Interval
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from gpudefrag.batch.solver_config import SolverConfig
from gpudefrag.capacity.elastic_config import ElasticConfig
from gpudefrag.defrag.planner_config import PlannerConfig
from gpudefrag.errors import InputError
from gpudefrag.gangs.defrag import DefragConfig
from gpudefrag.model.migration import MigrationModel
from gpudefrag.settings import Fraction, Seconds, bounds_of

__all__ = [
    "ACTIONS",
    "PLACERS",
    "AllocateSettings",
    "DefragmentSettings",
    "PreemptSettings",
    "Profile",
    "load_profile",
    "shipped",
]

ACTIONS = ("allocate", "defragment", "consolidate", "preempt", "elastic")
"""The actions a profile may list."""
PLACERS = ("fgd", "bestfit", "gpupacking", "gpuclustering", "dotprod", "random", "solver")
GANG_PLACERS = ("volcano", "kueue", "kai", "slurm", "fgd", "ours", "ours-batch")
VICTIM_RULES = ("kube", "kai", "ours")
Budget = Annotated[int, Interval(ge=1, le=10_000)]


class AllocateSettings(BaseModel):
    """How pending pods are placed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    placer: Literal["fgd", "bestfit", "gpupacking", "gpuclustering", "dotprod", "random", "solver"] = "fgd"
    solver: SolverConfig = SolverConfig()
    """The batch placer's settings (with ``placer = "solver"``)."""
    gangs: Literal["volcano", "kueue", "kai", "slurm", "fgd", "ours", "ours-batch"] | None = None
    """The placer of jobs and gangs on a topology (None: the driver's own)."""


class DefragmentSettings(BaseModel):
    """The checkpoint-aware defragmenter (:class:`~gpudefrag.defrag.controller.DefragController`):
    its planner and its budgets per tick."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    planner: PlannerConfig = PlannerConfig()
    tick_interval_s: Seconds = 30.0
    """The controller plans at most once per tick."""
    replan_after_s: Seconds = 120.0
    """A pod without a plan is not planned for again before this long."""
    plans_per_tick: Budget = 1
    blocked_pods_per_tick: Budget = 2
    small_pods_per_tick: Annotated[int, Interval(ge=0, le=10_000)] = 0
    """Tries per tick for pods of at most one GPU, on a budget of their own (0: shared)."""
    small_plans_per_tick: Budget = 1
    small_margin: Annotated[float, Interval(gt=-1, le=1000)] | None = None
    """Hysteresis margin of those pods' plans (None: the planner's)."""
    headroom_fraction: Fraction = 0.0
    """Pods of 2+ GPUs get plans only while this share of the GPUs would stay free with them placed."""
    min_wait_s: Seconds = 0.0
    """A pod gets plans only once it has waited this long."""
    gangs: DefragConfig = DefragConfig()
    """The gang defragmenter's settings (its restart time is the cluster's)."""

    @field_validator("gangs")
    @classmethod
    def _no_gang_restart(cls, gangs: DefragConfig) -> DefragConfig:
        if gangs.restart_s != DefragConfig().restart_s:
            raise ValueError("the restart time is the cluster's: set it where the run is described")
        return gangs

    @field_validator("planner")
    @classmethod
    def _no_migration(cls, planner: PlannerConfig) -> PlannerConfig:
        if planner.migration != MigrationModel():
            raise ValueError(
                "the restart and grace times are the cluster's: set them where the run is described"
            )
        return planner


class PreemptSettings(BaseModel):
    """Preemption of lower-priority running jobs for a blocked job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    victims: Literal["kube", "kai", "ours"] = "ours"
    checkpoint_wait_s: Seconds = 0.0
    """How long a blocked job below production may wait for its victims' next checkpoints
    (only ``ours`` waits); below the checkpoint interval."""
    wait_price: Annotated[float, Interval(ge=0, le=1000)] = 0.0
    """What ``ours`` charges per GPU-second of such a wait."""


class Profile(BaseModel):
    """A named list of actions and their settings (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    actions: tuple[Literal["allocate", "defragment", "consolidate", "preempt", "elastic"], ...] = (
        "allocate",
    )
    allocate: AllocateSettings = AllocateSettings()
    defragment: DefragmentSettings = DefragmentSettings()
    consolidate: dict[str, Any] = {}
    """KAI's Consolidate has no settings: an empty table."""
    preempt: PreemptSettings = PreemptSettings()
    elastic: ElasticConfig = ElasticConfig()

    @field_validator("consolidate")
    @classmethod
    def _no_consolidate_settings(cls, table: dict[str, Any]) -> dict[str, Any]:
        if table:
            raise ValueError(f"KAI's Consolidate takes no settings, got {', '.join(sorted(table))}")
        return table

    @model_validator(mode="before")
    @classmethod
    def _tables_of_listed_actions(cls, data: Any) -> Any:
        if isinstance(data, dict):
            listed = data.get("actions", ["allocate"])
            for action in ACTIONS:
                if action in data and isinstance(listed, list | tuple) and action not in listed:
                    raise ValueError(f"[{action}] is set but '{action}' is not in actions")
        return data

    @field_validator("actions")
    @classmethod
    def _allocate_first_once(cls, actions: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(actions)) != len(actions):
            raise ValueError("an action is listed twice")
        if "allocate" not in actions:
            raise ValueError("a profile needs 'allocate' (something must place the pods)")
        return actions

    def runs(self, action: str) -> bool:
        return action in self.actions

    def beyond_pods(self) -> str | None:
        """What of this profile only the job simulators run (None when a pod driver, the
        Kubernetes driver, can run all of it): actions other than allocate and defragment, or
        a gang placer."""
        extra = [a for a in self.actions if a not in ("allocate", "defragment")]
        if extra:
            return f"actions {', '.join(extra)} run in the job simulators only"
        if self.allocate.gangs is not None:
            return f"allocate.gangs = {self.allocate.gangs!r} runs in the job simulators only"
        return None


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(the file)"


def _message(err: Any) -> str:
    """One line for a pydantic error: the field and what it accepts (the declared range)."""
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    where = _where(loc)
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        return f"{where}: unknown setting"
    if err["type"] in ("missing", "missing_argument"):
        return f"{where}: missing"
    if err["type"] == "literal_error":
        return f"{where}: {err['msg'].replace('Input should be', 'must be')}"
    rule = _rule_of(loc)
    if rule is not None and err["type"] not in ("value_error", "assertion_error"):
        return f"{where}: must be {rule}, got {err.get('input')!r}"
    return f"{where}: {str(err['msg']).removeprefix('Value error, ')}"


def _rule_of(loc: tuple[int | str, ...]) -> str | None:
    """The declared range of the field at ``loc`` (None when it is not a plain field)."""
    import dataclasses
    import typing

    owner: Any = Profile
    annotation: Any = None
    for part in loc:
        if isinstance(part, int) or owner is None:
            return None
        if isinstance(owner, type) and issubclass(owner, BaseModel):
            field = owner.model_fields.get(part)
            if field is None:
                return None
            annotation = (
                typing.Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation
            )
        elif dataclasses.is_dataclass(owner):
            annotation = typing.get_type_hints(owner, include_extras=True).get(part)
        else:
            return None
        owner = annotation if isinstance(annotation, type) else None
    return bounds_of(annotation).rule() if annotation is not None else None


def parse_profile(data: Any, source: str | Path) -> Profile:
    """A :class:`Profile` from parsed TOML/YAML ``data`` (errors name ``source``)."""
    if not isinstance(data, dict):
        raise InputError(source, "a profile is a table of settings (name, actions, [allocate], ...)")
    try:
        return Profile.model_validate(data)
    except ValidationError as e:
        raise InputError(source, _message(e.errors()[0])) from None


def load_profile(path: str | Path) -> Profile:
    """Read a profile file: ``.toml``, or ``.yaml``/``.yml`` (module docstring)."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror}") from None
    if p.suffix in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise InputError(p, f"not valid YAML: {' '.join(str(e).split())}") from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputError(p, f"not valid TOML: {e}") from None
    return parse_profile(data, p)


def shipped(name: str) -> Profile:
    """One of the profiles shipped with gpudefrag (``kubernetes``, ``suite1b``, ``suite2``,
    ``suite3``)."""
    files = resources.files("gpudefrag.profiles")
    path = files / f"{name}.toml"
    if not path.is_file():
        known = sorted(f.name.removesuffix(".toml") for f in files.iterdir() if f.name.endswith(".toml"))
        raise InputError(f"{name}.toml", f"no such shipped profile (shipped: {', '.join(known)})")
    return parse_profile(tomllib.loads(path.read_text()), f"gpudefrag/profiles/{name}.toml")


def profile_arg(text: str) -> Profile:
    """``--config``: a shipped profile's name or a file (errors name the file and field)."""
    p = Path(text)
    if p.suffix in (".toml", ".yaml", ".yml") or p.exists():
        return load_profile(p)
    return shipped(text)

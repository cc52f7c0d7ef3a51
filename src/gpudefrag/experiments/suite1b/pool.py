"""Suite 1b's results folders read back, and pooled into one verdict.

Every run of the suite writes ``settings.json`` beside ``results.csv`` (:func:`write_settings`):
the whole configuration, the seeds, the wall time and the version that ran.  A report can then
be rendered again from one or more folders (``gpudefrag suite 1b --from DIR [DIR ...]``):

* each folder's ``results.csv`` is read back into runs (:func:`read_results`) and its settings
  into the configuration (:func:`config_from_settings`; a key this version does not know, or one
  it misses, is an error naming the file and the key);
* folders are pooled only when their settings, seeds aside, are identical; otherwise the error
  names every key that differs.  Their seeds must not overlap, and a tuning seed never enters a
  pooled verdict (settings were chosen on them);
* the pooled report judges the suite's checks on every seed of the pool and names the seed sets
  pooled.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from gpudefrag import __version__
from gpudefrag.errors import ConfigError, InputError
from gpudefrag.experiments.common.atomic import atomic_write
from gpudefrag.experiments.suite1b.config import SEED_SETS, seed_set_name
from gpudefrag.experiments.suite1b.runs import Run1b
from gpudefrag.experiments.suite1b.suite import METRICS, Suite1bConfig, tasks
from gpudefrag.settings import check

__all__ = ["Pooled", "config_from_settings", "pool_folders", "read_results", "write_settings"]

SETTINGS_JSON = "settings.json"
RESULTS_CSV = "results.csv"


def write_settings(config: Suite1bConfig, wall_s: float, folder: Path) -> Path:
    """``settings.json`` in ``folder``: the configuration (seeds included), wall time, version."""
    path = folder / SETTINGS_JSON
    with atomic_write(path) as fh:
        json.dump({"version": __version__, "wall_s": wall_s, "config": asdict(config)}, fh, indent=1)
        fh.write("\n")
    return path


def _rebuilt(default: Any, data: Any, path: Path, key: str) -> Any:
    """``data`` (JSON) in the shape of ``default`` (a dataclass, tuple or scalar)."""
    if is_dataclass(default) and not isinstance(default, type):
        if not isinstance(data, dict):
            raise InputError(path, f"{key or 'config'}: expected a table", column=key or "config")
        names = {f.name for f in fields(default)}
        unknown = sorted(set(data) - names)
        missing = sorted(names - set(data))
        if unknown or missing:
            what = unknown[0] if unknown else missing[0]
            why = "unknown to this version" if unknown else "missing (written by another version?)"
            raise InputError(path, f"setting {why}", column=f"{key}.{what}" if key else what)
        return replace(
            default,
            **{n: _rebuilt(getattr(default, n), data[n], path, f"{key}.{n}" if key else n) for n in names},
        )
    if isinstance(default, tuple):
        if not isinstance(data, list):
            raise InputError(path, "expected a list", column=key)
        item = default[0] if default else None
        return tuple(_rebuilt(item, x, path, f"{key}.{i}") for i, x in enumerate(data))
    return _scalar(default, data, path, key)


def _scalar(default: Any, data: Any, path: Path, key: str) -> Any:
    """``data`` as the type of ``default`` (a float takes an integer; ``None`` takes any scalar),
    else an error naming the key."""
    if default is None or data is None:
        if data is None or isinstance(data, bool | int | float | str):
            return data
    elif isinstance(default, bool):
        if isinstance(data, bool):
            return data
    elif isinstance(default, int):
        if isinstance(data, int) and not isinstance(data, bool):
            return data
    elif isinstance(default, float):
        if isinstance(data, int | float) and not isinstance(data, bool):
            return float(data)
    elif isinstance(default, str):
        if isinstance(data, str):
            return data
    else:
        return data
    raise InputError(path, f"{data!r} is not a {type(default).__name__}", column=key)


def config_from_settings(path: Path) -> tuple[Suite1bConfig, float]:
    """(configuration, wall seconds) of a ``settings.json``; every value checked in its range."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(path, "file not found (a folder written before runs kept their settings)") from None
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON: {e.msg}", e.lineno) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(path, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(data, dict) or "config" not in data:
        raise InputError(path, "no 'config' table", column="config")
    config = _rebuilt(Suite1bConfig(), data["config"], path, "")
    try:
        check(config, str(path))
    except ConfigError as e:
        raise InputError(path, str(e)) from None
    wall_s = data.get("wall_s", math.nan)
    if isinstance(wall_s, bool) or not isinstance(wall_s, int | float):
        raise InputError(path, f"{wall_s!r} is not a number", column="wall_s")
    return config, float(wall_s)


def read_results(path: Path) -> list[Run1b]:
    """The runs of a ``results.csv`` (one row per metric, plus ``event_hash`` and ``wall_s``)."""
    runs: dict[tuple[str, float, int, float], dict[str, Any]] = {}
    try:
        fh = path.open(newline="", encoding="utf-8")
    except FileNotFoundError:
        raise InputError(path, "file not found") from None
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    with fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != ["variant", "load", "seed", "restart_s", "metric", "value"]:
            raise InputError(path, "not a suite 1b results.csv (header)", 1)
        for line, row in enumerate(reader, start=2):
            try:
                key = (row["variant"], float(row["load"]), int(row["seed"]), float(row["restart_s"]))
                got = runs.setdefault(key, {"metrics": {}})
                if row["metric"] == "event_hash":
                    got["event_hash"] = row["value"]
                elif row["metric"] == "wall_s":
                    got["wall_s"] = float(row["value"])
                else:
                    got["metrics"][row["metric"]] = float(row["value"])
            except (TypeError, ValueError):
                raise InputError(path, "not a number", line, "value") from None
            except UnicodeDecodeError:
                raise InputError(path, "not UTF-8 text", line) from None
    out = []
    for (variant, load, seed, restart_s), got in runs.items():
        missing = [m for m in METRICS if m not in got["metrics"]]
        if missing or "event_hash" not in got:
            raise InputError(
                path, f"run {variant} load {load:g} seed {seed}: missing {', '.join(missing) or 'event_hash'}"
            )
        out.append(
            Run1b(variant, load, seed, restart_s, got["metrics"], got["event_hash"], got.get("wall_s", 0.0))
        )
    return out


def _version(path: Path) -> str:
    return str(json.loads(path.read_text(encoding="utf-8")).get("version", "?"))


def _differences(a: Any, b: Any, key: str = "") -> list[str]:
    """Dotted keys where two settings tables differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for k in sorted(set(a) | set(b))
            for d in _differences(a.get(k), b.get(k), f"{key}.{k}" if key else k)
        ]
    return [] if a == b else [key]


class Pooled:
    """Runs of several folders with one configuration (seeds: all of theirs), the seed sets
    pooled by name, and the wall time they took together."""

    def __init__(self, runs: list[Run1b], config: Suite1bConfig, sets: list[str], wall_s: float) -> None:
        self.runs, self.config, self.sets, self.wall_s = runs, config, sets, wall_s

    @property
    def title(self) -> str:
        return f"pooled seed sets: {', '.join(self.sets)} ({len(self.config.seeds)} seeds)"


def pool_folders(folders: list[Path]) -> Pooled:
    """The module docstring's pooling of ``folders``."""
    if not folders:
        raise ConfigError("--from: give one or more results folders")
    loaded = []
    for folder in folders:
        config, wall_s = config_from_settings(folder / SETTINGS_JSON)
        loaded.append((folder, config, wall_s, read_results(folder / RESULTS_CSV)))
    first_folder, first = loaded[0][0], asdict(replace(loaded[0][1], seeds=()))
    versions = {folder: _version(folder / SETTINGS_JSON) for folder, *_ in loaded}
    if len(set(versions.values())) > 1:
        listed = ", ".join(f"{f} {v}" for f, v in versions.items())
        raise ConfigError(f"the folders ran different versions ({listed}): they cannot be pooled")
    seen: dict[int, Path] = {}
    sets = []
    for folder, config, _, runs in loaded:
        differ = _differences(first, asdict(replace(config, seeds=())))
        if differ:
            raise ConfigError(
                f"{folder} and {first_folder} ran different settings ({', '.join(differ)}): they cannot be pooled"
            )
        tuned = sorted(set(config.seeds) & set(SEED_SETS["tuning"]))
        if tuned:
            raise ConfigError(
                f"{folder}: tuning seeds {tuned} never enter a verdict (settings were chosen on them)"
            )
        for s in config.seeds:
            if s in seen:
                raise ConfigError(f"seed {s} is in both {seen[s]} and {folder}: a seed counts once")
            seen[s] = folder
        wanted = {(v, float(load), s, float(r)) for _, v, load, s, r in tasks(config)}
        ran = {(r.variant, r.load, r.seed, r.restart_s) for r in runs}
        if ran != wanted:
            missing, extra = sorted(wanted - ran), sorted(ran - wanted)
            what = f"{len(missing)} runs of its settings missing (e.g. {missing[0]})" if missing else ""
            what += ("; " if what else "") + (
                f"{len(extra)} runs not in its settings (e.g. {extra[0]})" if extra else ""
            )
            raise InputError(folder / RESULTS_CSV, f"{what}: only whole runs of a set are pooled")
        name = seed_set_name(config.seeds)
        sets.append(name or f"{folder.name} ({len(config.seeds)} seeds)")
    runs = [r for _, _, _, rs in loaded for r in rs]
    seeds = tuple(s for _, c, _, _ in loaded for s in c.seeds)
    return Pooled(runs, replace(loaded[0][1], seeds=seeds), sets, sum(w for _, _, w, _ in loaded))

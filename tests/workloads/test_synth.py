"""``synth``: a model fitted to a trace draws traces that keep its parts (shapes, batches, the
hour profile), the seed fixes the draw, growth and bigger jobs move what they say, and a saved
model reads back to the same draws."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpudefrag.cli import main
from gpudefrag.errors import ConfigError, InputError
from gpudefrag.model.jobs import Job
from gpudefrag.workloads.jobtrace import load_job_trace, write_job_trace
from gpudefrag.workloads.synth import fit, generate, load_model, save_model, size_class
from gpudefrag.workloads.synth_check import check_model, whole_weeks

HOUR = 3600.0


def _trace(weeks: int = 3, seed: int = 0) -> list[Job]:
    """Jobs only between 9:00 and 17:00, in pairs 1 s apart (whole seconds); 1-GPU jobs run an
    hour, 8-GPU jobs a day, one in four is an 8-GPU job."""
    rng = np.random.default_rng(seed)
    jobs: list[Job] = []
    for day in range(7 * weeks):
        for _ in range(20):
            t = float(int(day * 24 * HOUR + rng.uniform(9, 17) * HOUR))
            gpus = 8 if rng.random() < 0.25 else 1
            for k in range(2):
                jobs.append(Job(len(jobs), t + k, 86_400.0 if gpus == 8 else HOUR, gpus, 1000, gpus))
    return sorted(jobs, key=lambda j: j.submit_s)


def test_the_model_keeps_the_traces_parts() -> None:
    trace = _trace()
    model = fit(trace)
    assert set(model.batch_sizes) == {2} and set(model.batch_gaps) == {1.0} and model.resolution_s == 1.0
    out = generate(model, 14.0, seed=1)
    # times count from the trace's first submission and hours from it: back on the trace's
    # clock, nothing at night (to the hour: an hour's bin straddles the clock's hours)
    hours = np.array([((j.submit_s + trace[0].submit_s) // HOUR) % 24 for j in out])
    assert hours.min() >= 8 and hours.max() <= 17
    assert all(j.submit_s == int(j.submit_s) for j in out)
    assert {j.gpus for j in out} == {1, 8} and {j.priority for j in out} == {1, 8}
    eight = [j.duration_s for j in out if j.gpus == 8]
    assert 0.8 * 86_400 < np.median(eight) < 1.2 * 86_400  # durations of the 8-GPU class
    assert 0.15 < len(eight) / len(out) < 0.35
    assert 14 * 40 * 0.7 < len(out) < 14 * 40 * 1.3  # about 40 jobs a day
    assert [j.job_id for j in out] == list(range(len(out)))


def test_the_seed_fixes_the_draw_and_growth_and_bigger_jobs_move_it() -> None:
    model = fit(_trace())
    a, b, c = generate(model, 7.0, 5), generate(model, 7.0, 5), generate(model, 7.0, 6)
    assert a == b and a != c
    grown = generate(model, 7.0, 5, growth=2.0)
    assert 1.5 < len(grown) / len(a) < 2.6
    big = generate(model, 7.0, 5, bigger_jobs=3.0)
    share = sum(j.gpus >= 8 for j in big) / len(big)
    assert share > 1.5 * sum(j.gpus >= 8 for j in a) / len(a)


def test_a_saved_model_draws_the_same(tmp_path: Path) -> None:
    model = fit(_trace())
    path = save_model(model, tmp_path / "m.json")
    assert load_model(path) == model
    assert generate(load_model(path), 3.0, 9) == generate(model, 3.0, 9)
    (tmp_path / "bad.json").write_text('{"source": "x"}')
    with pytest.raises(InputError, match="not a workload model"):
        load_model(tmp_path / "bad.json")


def test_size_classes() -> None:
    assert [size_class(g) for g in (1, 2, 4, 5, 8, 9, 32, 33, 1024)] == [0, 1, 1, 2, 2, 3, 3, 4, 4]


def test_check_holds_out_the_weeks_after_the_fit() -> None:
    jobs = _trace(weeks=6)
    assert len(whole_weeks(jobs)) == 5  # the last week ends after the last submission
    rows = check_model(jobs, fit_weeks=3, seed=1)
    assert [r.week for r in rows] == [3, 4]
    # a trace that looks the same every week: fresh weeks are as close as real weeks are
    assert all(r.ks["GPUs"] < 0.2 for r in rows)


def test_the_command_writes_a_trace_and_refuses_what_does_not_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_job_trace(tmp_path / "mine.csv", _trace())
    out = tmp_path / "fresh.csv"
    assert main(["synth", "--like", str(src), "--days", "2", "--seed", "4", "--out", str(out)]) == 0
    assert "jobs" in capsys.readouterr().out and len(load_job_trace(out)) > 0
    assert main(["synth", "--like", str(src), "--days", "2", "--check"]) == 2
    assert "--days: not with --check" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["synth", "--like", "nosuch", "--days", "2", "--out", str(out)])
    assert stop.value.code == 2 and "'nosuch': give itp, philly" in capsys.readouterr().err


def test_batches_are_drawn_whole_and_short_traces_refused(tmp_path: Path) -> None:
    # one-GPU sweeps of 5 jobs and lone 8-GPU jobs: a drawn batch keeps its size with its shape
    jobs: list[Job] = []
    for day in range(8):
        for h in range(0, 24, 3):
            t = day * 86_400.0 + h * HOUR
            if h % 6:
                jobs += [Job(len(jobs) + i, t + i, HOUR, 1) for i in range(5)]
            else:
                jobs.append(Job(len(jobs), t, HOUR, 8))
    out = generate(fit(jobs), 7.0, seed=2)
    eights = [j.submit_s for j in out if j.gpus == 8]
    ones = [j.submit_s for j in out if j.gpus == 1]
    assert eights and ones and len(ones) % 5 == 0
    assert min(np.diff(sorted(eights))) > 1.0  # never a batch of 8-GPU jobs
    with pytest.raises(ConfigError, match="a model needs a week"):
        fit([j for j in jobs if j.submit_s < 3 * 86_400.0])
    model = save_model(fit(jobs), tmp_path / "m.json")
    data = model.read_text().replace('"shapes": [[8, 1000]', '"shapes": [[8, 1000, 3]')
    (tmp_path / "bad.json").write_text(data)
    with pytest.raises(InputError) as e:
        load_model(tmp_path / "bad.json")
    assert e.value.column == "shapes"

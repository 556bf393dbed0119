"""Smoke test of benchmarks/: each script runs in --quick mode and prints a markdown table
(gpu_check.sh's runs have their own module, test_gpu_check_runs.py).

No timing is asserted: the scripts are run by hand for evidence (docs/PERFORMANCE.md);
this only checks that they still run against the package. Each script's --quick mode is
the fewest runs, worker processes and seconds that still reach what its test checks;
with small tables (hidden 32) and the conftest's small checkpoint the module takes about
two minutes on two cores, most of it the runs' process starts (torch and scipy imports).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import bench_module

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
TABLE_RULE = "| ---"


def _run(args: list[str], tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    # Own cache and host-lock directory: never collide with someone's real run.
    env = dict(
        os.environ,
        EMBEDBENCH_CACHE=str(tmp_path / "cache"),
        EMBEDBENCH_LOCK_DIR=str(tmp_path),
    )
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


SCRIPTS = {
    "precision": ["--repeats", "2", "--hidden", "32"],
    "accuracy": ["--delays", "5", "--hidden", "32"],
    "overhead": ["--calls", "2000"],
    "loading": ["--hidden", "32", "--modes", "embedbench", "--caches", "cold"],
    "profile_cases": ["--hidden", "32", "--cases", "text", "interleaved"],
    "cli_startup": [],
    "canary_shapes": ["--trials", "2"],
    "neighbour_effect": [],
    "host_reference": [],
    "sim_promises": [],
    "sim_thresholds": [],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_quick(name: str, tmp_path: Path) -> None:
    out = tmp_path / f"{name}.json"
    res = _run([str(BENCH / f"{name}.py"), "--quick", "--json", str(out), *SCRIPTS[name]], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert TABLE_RULE in res.stdout
    assert out.is_file()


@pytest.mark.slow
def test_walltime_quick(small_checkpoint: Path, tmp_path: Path) -> None:
    res = _run(
        [
            str(BENCH / "walltime.py"),
            "--quick",
            "--no-notebook",
            "--model",
            str(small_checkpoint),
            # One run: the quick design's own blocks and process (the grid reuses it).
            *("--lengths", "1172", "--blocks", "4", "--processes", "1"),
        ],
        tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert TABLE_RULE in res.stdout


@pytest.mark.slow
def test_lm_shim_quick(small_checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "lm_shim.json"
    res = _run(
        [
            str(BENCH / "lm_shim.py"),
            "--quick",
            "--json",
            str(out),
            "--",
            *("--model", str(small_checkpoint), "--cases", "text", "audio", "--allow-busy"),
        ],
        tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert TABLE_RULE in res.stdout
    runs = json.loads(out.read_text())["runs"]
    assert [r["shim"] for r in runs] == ["flat", "production"]
    assert all(r["embedding_class"].endswith("ReferenceVocabEmbedding") for r in runs)


@pytest.mark.slow
def test_between_runs_quick(small_checkpoint: Path, tmp_path: Path) -> None:
    """The live path: two quick runs back to back (its reduced design must be a valid run).
    Each is one process, so its calibration column reads nan: the column's numbers are
    checked on kept runs of three workers, below."""
    flags = ["--quick", "--keep", str(tmp_path / "kept")]
    extra = ["--", "--model", str(small_checkpoint), "--cases", "audio", "--allow-busy"]
    res = _run([str(BENCH / "between_runs.py"), *flags, *extra], tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "| Audio |" in res.stdout and "SD ÷ within-run SE" in res.stdout
    assert len(list((tmp_path / "kept").glob("run*/summary.json"))) == 2


def _kept_run(where: Path, workers: list[float]) -> None:
    """A kept run directory as between_runs.py --keep leaves it, one case (audio)."""
    where.mkdir(parents=True)
    mean = sum(workers) / len(workers)
    row = {
        "case": "audio",
        "label": "Audio",
        "reduction_pct": mean,
        "reduction_ci95_pct": [mean - 1.0, mean + 1.0],
        "worker_reduction_pct": workers,
    }
    (where / "summary.json").write_text(json.dumps([row]))
    (where / "metadata.json").write_text(
        json.dumps({"processes": len(workers), "start_time": 100.0, "end_time": 130.0})
    )


def test_between_runs_pools_kept_sets_and_reports_calibration(tmp_path: Path) -> None:
    """--from analyses kept runs of two sets as one; the calibration column is the
    between-run SD over the RMS of each run's own standard error, with its F-test p."""
    import numpy as np
    from scipy import stats

    sets = {
        "a": [[40.0, 42.0, 41.0], [44.0, 43.0, 45.0]],
        "b": [[39.0, 41.5, 40.0], [46.0, 44.5, 45.5]],
    }
    for name, runs in sets.items():
        for i, workers in enumerate(runs):
            _kept_run(tmp_path / name / f"run{i:02d}", workers)
    res = _run(
        [str(BENCH / "between_runs.py"), "--from", str(tmp_path / "a"), str(tmp_path / "b")],
        tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    workers = [np.array(w) for runs in sets.values() for w in runs]
    means = np.array([w.mean() for w in workers])
    within = np.mean([w.var(ddof=1) / len(w) for w in workers])
    ratio = float(np.sqrt(means.var(ddof=1) / within))
    p = float(stats.f.sf(ratio**2, len(means) - 1, sum(len(w) - 1 for w in workers)))
    assert ratio > 2 and p < 0.01  # these runs differ far more than their workers do
    row = next(line for line in res.stdout.splitlines() if line.startswith("| Audio |"))
    assert f"| {ratio:.2f} (p {p:.2f}) |" in row, row
    assert "4 runs kept under" in res.stdout and "analysed together" in res.stdout

    empty = tmp_path / "empty"
    empty.mkdir()
    bad = _run([str(BENCH / "between_runs.py"), "--from", str(empty)], tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip() == f"between_runs: no kept runs (run*/summary.json) under {empty}"


@pytest.mark.slow
def test_families_quick(tmp_path: Path) -> None:
    out = tmp_path / "families.json"
    flags = ["--", "--cases", "text", "interleaved", "--lengths", "300", "--allow-busy"]
    res = _run(
        [str(BENCH / "families.py"), "--quick", "--hidden", "64", "--json", str(out), *flags],
        tmp_path,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert TABLE_RULE in res.stdout
    runs = json.loads(out.read_text())["runs"]
    assert [r["family"] for r in runs] == ["qwen2.5-omni", "qwen3-omni"]
    assert [r["embedding_shape"] for r in runs] == [[152064, 64], [152064, 64]]


@pytest.mark.slow
def test_interference_quick_counts_labels_and_reanalyses_kept_runs(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    """The live path with a real neighbour (quiet, then the toggled hog), then --from."""
    kept = tmp_path / "kept"
    flags = ["--quick", "--keep", str(kept), "--side-by-side", "1"]
    extra = ["--", "--model", str(small_checkpoint), "--cases", "text", "--allow-busy"]
    res = _run([str(BENCH / "interference.py"), *flags, *extra], tmp_path, timeout=400)
    assert res.returncode == 0, res.stderr[-2000:]
    for heading in ("#### Detection", "#### Unlabelled runs", "#### Every run"):
        assert heading in res.stdout
    assert "#### embedbench and pyperf on known pairs" in res.stdout
    assert re.search(r"\| same \| [^|]+ \| embedbench \| [01] / 1 \|", res.stdout)
    assert (kept / "side_by_side.json").is_file()
    assert "| quiet | 1 |" in res.stdout and "| hog on/off 3 s | 1 |" in res.stdout
    assert "Canary cost: at most" in res.stdout
    assert sorted(p.read_text() for p in kept.glob("run*.condition")) == [
        "hog on/off 3 s",
        "quiet",
    ]
    again = _run([str(BENCH / "interference.py"), "--from", str(kept)], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "| quiet | 1 |" in again.stdout
    replayed = _run([str(BENCH / "host_reference.py"), "--replay", str(kept)], tmp_path)
    assert replayed.returncode == 0, replayed.stderr[-2000:]
    assert "| 5 % | quiet | 1 |" in replayed.stdout
    assert "#### embedbench and pyperf on known pairs" in again.stdout


@pytest.mark.parametrize(
    ("printed", "verdict", "reduction"),
    [
        (
            "Mean +- std dev: [a] 2.41 ms +- 0.71 ms -> [b] 1.83 ms +- 0.12 ms: 1.32x faster\n"
            "Not significant!",
            "no detectable difference",
            24.07,
        ),
        (
            "Mean +- std dev: [a] 950 us +- 10 us -> [b] 1.00 ms +- 0.01 ms: 1.05x slower",
            "slower",
            -5.26,
        ),
        (
            "Mean +- std dev: [a] 1.00 ms +- 0.01 ms -> [b] 900 us +- 9 us: 1.11x faster",
            "faster",
            10.0,
        ),
    ],
)
def test_pyperf_compare_to_output_gives_its_verdict_and_reduction(printed, verdict, reduction):
    got_verdict, got_reduction = bench_module("side_by_side").compare_to_verdict(printed)
    assert got_verdict == verdict
    assert got_reduction == pytest.approx(reduction, abs=0.01)


def test_pyperf_compare_to_output_without_a_verdict_is_an_error():
    with pytest.raises(ValueError, match="no verdict"):
        bench_module("side_by_side").compare_to_verdict(
            "Benchmark hidden because not significant (1): x"
        )


def test_side_by_side_scores_right_verdicts_per_pair_and_tool():
    sbs = bench_module("side_by_side")
    tries = [
        {
            "tool": "embedbench",
            "pair": "blake2b",
            "verdict": "faster",
            "reduction_pct": 4.9,
            "ci95_pct": [2.0, 7.0],
            "wall_s": 10.0,
        },
        {
            "tool": "embedbench",
            "pair": "blake2b",
            "verdict": "no detectable difference",
            "reduction_pct": 1.0,
            "ci95_pct": [-1.0, 3.0],
            "wall_s": 12.0,
        },
        {
            "tool": "pyperf",
            "pair": "same",
            "verdict": "slower",
            "reduction_pct": -3.0,
            "ci95_pct": None,
            "wall_s": 30.0,
        },
    ]
    scored = sbs.score(tries)
    assert scored[("blake2b", "embedbench")]["right"] == 1
    assert scored[("blake2b", "embedbench")]["tries"] == 2
    assert scored[("same", "pyperf")]["right"] == 0
    text = sbs.table(tries)
    assert "| blake2b |" in text and "| 1 / 2 |" in text and "| 0 / 1 |" in text
    assert "4.9 % [2.0, 7.0] faster" in text and "11.0" in text


def test_canary_ab_alternates_which_arm_goes_first():
    order = bench_module("canary_ab").arm_order(3)
    assert order == ["on", "off", "off", "on", "on", "off"]


def test_canary_ab_sd_test_tells_equal_from_different_spreads():
    ab = bench_module("canary_ab")
    wide, narrow = [0.0, 4.0, -4.0, 8.0, -8.0, 2.0], [0.0, 0.1, -0.1, 0.2, -0.2, 0.05]
    assert ab.sd_ratio_p(wide, narrow) < 0.01
    assert ab.sd_ratio_p(narrow, wide) < 0.01
    assert ab.sd_ratio_p(wide, [2 * x for x in wide[::-1]]) > 0.05


@pytest.mark.slow
def test_canary_ab_quick_runs_both_arms_and_reanalyses(small_checkpoint: Path, tmp_path: Path):
    kept = tmp_path / "kept"
    flags = ["--quick", "--keep", str(kept)]
    extra = ["--", "--model", str(small_checkpoint), "--cases", "text", "--allow-busy"]
    res = _run([str(BENCH / "canary_ab.py"), *flags, *extra], tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "#### Canary on against off, per case" in res.stdout and "| Text |" in res.stdout
    assert re.search(r"\| on \| 1 \|", res.stdout) and re.search(r"\| off \| 1 \|", res.stdout)
    assert sorted(p.read_text() for p in kept.glob("run*.arm")) == ["off", "on"]
    off_dir = next(p.with_suffix("") for p in kept.glob("run*.arm") if p.read_text() == "off")
    assert json.loads((off_dir / "metadata.json").read_text()).get("host_probes") in (None, [])
    again = _run([str(BENCH / "canary_ab.py"), "--from", str(kept)], tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "#### Wall time" in again.stdout


@pytest.mark.slow
def test_checkout_ab_runs_two_checkouts_in_turn_and_reanalyses_them(
    small_checkpoint: Path, tmp_path: Path
) -> None:
    kept = tmp_path / "ab"
    design = ["--model", str(small_checkpoint), "--lengths", "300", "--cases", "text"]
    design += ["--allow-busy"]
    flags = ["--quick", "--arm", f"a={ROOT}", "--arm", f"b={ROOT}", "--keep", str(kept)]
    res = _run([str(BENCH / "checkout_ab.py"), *flags, "--", *design], tmp_path, timeout=400)
    assert res.returncode == 0, res.stderr[-2000:]
    assert sorted(p.name for p in kept.iterdir()) == ["run00-a", "run01-b"]
    assert "| a | text | 1 |" in res.stdout and "| b | text | 1 |" in res.stdout
    again = _run([str(BENCH / "checkout_ab.py"), "--from", str(kept)], tmp_path)
    assert again.returncode == 0 and "| a | text | 1 |" in again.stdout
    one = _run([str(BENCH / "checkout_ab.py"), "--arm", f"a={ROOT}"], tmp_path)
    assert one.returncode == 2 and "give two --arm" in one.stderr
    assert "Traceback" not in one.stderr


def test_interference_alternates_only_the_neighbours_asked_for(tmp_path: Path) -> None:
    interference = bench_module("interference")
    kinds = interference.neighbour_kinds("toggled, always")
    assert kinds == (interference.TOGGLED, interference.ALWAYS)
    assert interference.schedule(3, kinds) == [
        *(interference.QUIET, interference.TOGGLED, interference.QUIET),
        *(interference.ALWAYS, interference.QUIET, interference.TOGGLED),
    ]
    # Quiet runs first build the host's quiet reference.
    assert interference.schedule(1, kinds, warm=2) == [interference.QUIET] * 3 + [
        interference.TOGGLED
    ]
    assert interference.neighbour_kinds(None) == interference.NEIGHBOURS
    res = _run([str(BENCH / "interference.py"), "--neighbours", "hog,spin"], tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.strip().splitlines() == [
        "interference.py: unknown --neighbours hog; use a comma-separated list of "
        "toggled, always, bursts, spin"
    ]


def test_the_canary_cost_counts_every_read_the_canary_makes() -> None:
    interference = bench_module("interference")
    from embedbench.harness.canary import PROBE_COPIES, ROW_SETS

    records = [{"canary_us_start": 100.0, "canary_us_end": 200.0}, {"canary_us_start": 50.0}]
    probes = [
        {"worker": 0, "median_us": 10.0, "samples_us": [10.0] * 16, "pace_us": 2.0},
        {"worker": 0, "median_us": 30.0, "samples_us": [30.0] * 16, "attempts": 3},
        {"worker": 1, "median_us": 20.0, "samples_us": [20.0] * 16, "pace_us": 1.0},
    ]
    edges = 350.0
    reads = 160.0 + (480.0 + 30.0 * PROBE_COPIES * 2) + 320.0
    pace = 2.0 * PROBE_COPIES + 1.0 * PROBE_COPIES
    warm = ROW_SETS * (10.0 + 20.0)  # each worker's first probe sets its warm reads' time
    seconds = interference.canary_seconds({"host_probes": probes}, records)
    assert seconds == pytest.approx((edges + reads + pace + warm) / 1e6)


def _kept_position_run(where: Path, workers: int, level: float, stall: float | None) -> None:
    """A kept run as worker_position.py --keep leaves it: text, two blocks per worker,
    calls at ``level`` µs; with ``stall``, worker 0's first call takes that long."""
    where.mkdir(parents=True)
    records = []
    for worker in range(workers):
        for block in range(2):
            for position, variant in enumerate(("baseline", "fixed")):
                samples = [[level, level, level] for _ in range(10)]
                if stall and worker == 0 and block == 0 and variant == "baseline":
                    samples[0] = [stall, stall, stall]
                start = 1000.0 + worker * 10 + block * 2 + position
                records.append(
                    {
                        "case": "text",
                        "tokens": 300,
                        "variant": variant,
                        "block": worker * 2 + block,
                        "worker": worker,
                        "samples_us": samples,
                        "wall_start": start,
                        "minor_faults": 2051 if samples[0][0] == stall else 0,
                    }
                )
    parent = {"measuring_s": 1.0, "cpu_s": 0.01, "written_bytes": 0, "other_read_bytes": 0}
    meta = {
        "processes": workers,
        "workers": [{"worker": w, "parent_while_measuring": parent} for w in range(workers)],
    }
    (where / "metadata.json").write_text(json.dumps(meta))
    (where / "micro-raw.json").write_text(json.dumps(records))


def test_worker_position_reads_kept_pairs_and_counts_first_block_stalls(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    for index, (workers_us, single_us) in enumerate([(110.0, 100.0), (121.0, 110.0)]):
        _kept_position_run(kept / f"pair{index:02d}-workers", 3, workers_us, stall=2000.0)
        _kept_position_run(kept / f"pair{index:02d}-single", 1, single_us, stall=None)
    module = bench_module("worker_position")
    pairs = module._kept_pairs(kept)
    stalls = module.stall_counts([p["workers"] for p in pairs])
    assert stalls["counts"]["first"] == [2, 120, 2, 12]  # one slow, faulted call per run
    assert stalls["counts"]["other"] == [0, 120, 0, 12]
    (text_baseline, _fixed) = module.level_rows(pairs)
    assert text_baseline["ratio_pct"] == pytest.approx(10.0)  # 110/100 and 121/110
    assert text_baseline["agree"] is False  # the runs differ less (SD ~7 %) than the modes
    res = _run([str(BENCH / "worker_position.py"), "--from", str(kept)], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "| workers | first block | 2 / 120 | 2 / 12 |" in res.stdout
    assert "#### The parent while workers measured" in res.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = _run([str(BENCH / "worker_position.py"), "--from", str(empty)], tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("worker_position: no kept pairs")

"""harness.callgrind on hand-written callgrind output files: the totals read against the
events header, the per-call figures and their weights, the valgrind command, and the
one-line refusal where valgrind is missing."""

import shutil
import sys
from pathlib import Path

import pytest

from embedbench.cli import main
from embedbench.errors import ConfigError, MissingDependencyError
from embedbench.harness import callgrind, countrun
from embedbench.runner import paired_benchmark

DUMPS = Path(__file__).parent / "support" / "callgrind"


def test_a_dump_reads_its_part_and_the_summary_line_against_the_events_header():
    dump = callgrind.parse_dump((DUMPS / "callgrind.out.4242.1").read_text())
    assert dump.part == 1
    assert dump.totals == {
        "Ir": 3000,
        "Dr": 1200,
        "Dw": 600,
        "I1mr": 30,
        "D1mr": 90,
        "D1mw": 60,
        "ILmr": 3,
        "DLmr": 12,
        "DLmw": 6,
    }


def test_the_totals_line_stands_in_where_there_is_no_summary_and_short_lines_end_in_zeros():
    text = "events: Ir D1mr D1mw\ntotals: 17 2\n"
    assert callgrind.parse_dump(text) == callgrind.Dump(0, {"Ir": 17, "D1mr": 2, "D1mw": 0})


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("summary: 1 2 3\n", "events"),
        ("events: Ir D1mr\n", "summary"),
        ("events: Ir\nsummary: 1 2\n", "do not match"),
        ("events: Ir D1mr\nsummary: 1 x\n", "do not match"),
    ],
)
def test_a_file_that_is_not_a_whole_dump_is_refused(text, fragment):
    with pytest.raises(ValueError, match=fragment):
        callgrind.parse_dump(text)


def test_the_numbered_dumps_of_a_process_are_read_in_order_without_the_one_at_exit():
    dumps = callgrind.read_dumps(DUMPS, 4242)
    assert list(dumps) == [1, 2]
    assert [d.part for d in dumps.values()] == [1, 2]
    assert dumps[2].totals["Ir"] == 3006
    assert callgrind.read_dumps(DUMPS, 999) == {}


def test_per_call_figures_divide_the_totals_and_weigh_misses_as_cachegrind_does():
    totals = callgrind.parse_dump((DUMPS / "callgrind.out.4242.1").read_text()).totals
    figures = callgrind.per_call(totals, 3)
    assert figures == {
        "instructions": 1000,  # 3000 / 3
        "d1_misses": 50,  # (90 + 60) / 3
        "ll_misses": 6,  # (12 + 6) / 3
        # (3000 + 10 × (30 + 90 + 60) + 100 × (3 + 12 + 6)) / 3 = (3000 + 1800 + 2100) / 3
        "est_cycles": 2300,
    }
    assert set(figures) == set(callgrind.FIGURES) == set(callgrind.NOT_COUNTED)
    assert (callgrind.L1_MISS_CYCLES, callgrind.LL_MISS_CYCLES) == (10, 100)


def test_per_call_figures_round_to_the_nearest_integer_halves_up():
    base = dict.fromkeys(callgrind.EVENTS, 0)
    assert callgrind.per_call({**base, "Ir": 10}, 4)["instructions"] == 3  # 2.5
    assert callgrind.per_call({**base, "Ir": 9}, 4)["instructions"] == 2  # 2.25
    assert callgrind.per_call({**base, "Ir": 11}, 4)["instructions"] == 3  # 2.75


def test_per_call_needs_the_cache_events_and_a_call():
    with pytest.raises(ValueError, match="cache-sim"):
        callgrind.per_call({"Ir": 10}, 1)
    with pytest.raises(ValueError, match="at least 1"):
        callgrind.per_call(dict.fromkeys(callgrind.EVENTS, 0), 0)


def test_the_forms_take_turns_one_call_per_dump():
    assert callgrind.collected_calls(("baseline", "fixed"), 3) == [
        "baseline",
        "fixed",
        "baseline",
        "fixed",
        "baseline",
        "fixed",
    ]
    collected = callgrind.collected_calls(("a", "b"), callgrind.CALLS_PER_COUNT)
    assert collected.count("a") == collected.count("b") == callgrind.CALLS_PER_COUNT


def test_a_forms_figures_are_those_of_its_call_with_the_fewest_instructions():
    steady = {"instructions": 121_198, "ll_misses": 2}
    calls = [
        {"instructions": 122_914, "ll_misses": 1},  # a one-off: a specialisation retried
        {"instructions": 121_488, "ll_misses": 3},  # another: a new allocator arena
        {"instructions": 121_198, "ll_misses": 4},
        {"instructions": 121_488, "ll_misses": 0},
        steady,
    ]
    # Three of five calls carry a one-off: a median would take one of them.
    assert callgrind.steady_call(calls) == {"instructions": 121_198, "ll_misses": 4}
    assert callgrind.steady_call([*calls[:2], steady]) == steady  # one call's own figures
    with pytest.raises(ValueError, match="no counted call"):
        callgrind.steady_call([])


def test_the_command_turns_collection_on_nowhere_simulates_a_fixed_cache_and_dumps_apart(
    tmp_path,
):
    command = callgrind.valgrind_command(
        "/usr/bin/valgrind", ["python", "-m", "x"], tmp_path, instrument_at_start=False
    )
    assert command[:2] == ["/usr/bin/valgrind", "--tool=callgrind"]
    assert command[-3:] == ["python", "-m", "x"]
    assert "--instr-atstart=no" in command
    assert "--collect-atstart=no" in command
    assert "--cache-sim=yes" in command
    assert "--LL=33554432,16,64" in command
    assert f"--callgrind-out-file={tmp_path}/callgrind.out.%p" in command
    at_start = callgrind.valgrind_command("v", ["p"], tmp_path, instrument_at_start=True)
    assert "--instr-atstart=yes" in at_start


def _no_valgrind_path(tmp_path: Path) -> str:
    """A PATH with a python3 but no valgrind."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = shutil.which("python3")
    if python:
        (bin_dir / "python3").symlink_to(python)
    return str(bin_dir)


def test_without_valgrind_counts_are_refused_in_one_line_saying_how_to_install_it(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("PATH", _no_valgrind_path(tmp_path))
    assert callgrind.find_valgrind() is None
    with pytest.raises(MissingDependencyError, match="apt-get install valgrind"):
        callgrind.require_valgrind()


def test_run_counts_without_valgrind_exits_2_at_once_with_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", _no_valgrind_path(tmp_path))
    out = tmp_path / "results"
    code = main(["run", "--counts", "--model", str(tmp_path / "none"), "--output-dir", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert "valgrind" in lines[0] and "apt-get install valgrind" in lines[0]
    assert "Traceback" not in captured.err
    assert not out.exists()


def test_paired_benchmark_counts_a_factory_only_and_needs_valgrind(tmp_path, monkeypatch):
    variants = {"baseline": lambda: None, "fixed": lambda: None}
    with pytest.raises(ConfigError, match=r'counts=True needs a factory: .*"package\.module'):
        paired_benchmark(variants, warmup=1, blocks=2, iterations=1, counts=True)
    monkeypatch.setenv("PATH", _no_valgrind_path(tmp_path))
    with pytest.raises(MissingDependencyError, match="apt-get install valgrind"):
        paired_benchmark("nowhere:variants", warmup=1, blocks=2, iterations=1, counts=True)


def test_a_cuda_runs_forms_are_counted_on_their_cpu_copy_and_the_metadata_says_so(monkeypatch):
    from embedbench import runhost
    from embedbench.config import RunConfig
    from embedbench.harness import countrun
    from embedbench.measure import Share

    taken = {}

    def count_share(share, *, measured_device, log, env):
        taken.update(share=share, measured_device=measured_device)
        return countrun.Counts()

    monkeypatch.setattr(runhost, "count_share", count_share)
    share = Share(
        RunConfig(),
        worker=2,
        first_block=4,
        block_count=2,
        cpu_core=0,
        device="cuda:0",
        model_dir="/m",
    )
    runhost.RealHost().count_calls(share, measured_device="cuda", log=print, env={})
    assert (taken["share"]["device"], taken["share"]["worker"]) == ("cpu", 0)
    assert taken["measured_device"] == "cuda"
    how = countrun._metadata("/usr/bin/valgrind", "cuda", instrument_at_start=False)
    assert (how["device"], how["measured_device"]) == ("cpu", "cuda")
    assert how["note"] == "counted on the CPU copy of the same forms (the timing ran on cuda)"


def test_a_counting_process_that_fails_is_one_count_error_with_its_message():
    import os
    import sys

    from embedbench.harness import countrun

    script = (
        "import json, os; print(json.dumps({'event': 'ready', 'pid': os.getpid()})); "
        "print(json.dumps({'event': 'error', 'kind': 'usage', 'message': 'no table'})); "
        "raise SystemExit(2)"
    )
    seen = []
    with pytest.raises(countrun.CountError, match=r"exit code 2\): no table"):
        countrun._run(
            [sys.executable, "-c", script],
            dict(os.environ),
            lambda event, pid: seen.append(event),
            lambda event: seen.append(event),
            lambda _line: None,
        )
    assert [e["event"] for e in seen] == ["ready"]


def test_the_counting_process_keeps_only_what_it_needs_of_the_environment():
    caller = {
        "PATH": "/usr/bin",
        "PYTHONPATH": "/work/tests",
        "EMBEDBENCH_CACHE": "/cache",
        "PYTEST_CURRENT_TEST": "tests/test_counts.py::test_x (call)",
        "OLDPWD": "/elsewhere",
        "OMP_NUM_THREADS": "8",
    }
    env = countrun.counting_environment(caller)
    assert env == {
        "EMBEDBENCH_CACHE": "/cache",
        "PATH": "/usr/bin",
        "PYTHONPATH": "/work/tests",
        **countrun.SINGLE_THREAD_ENV,
        countrun.HASH_SEED_ENV: countrun.HASH_SEED,
    }
    # What moves from one command to the next leaves the environment as it was.
    moved = {"PYTEST_CURRENT_TEST": "other", "EMBEDBENCH_HOST_REFERENCE": "/tmp/a/b/ref.json"}
    assert countrun.counting_environment({**caller, **moved}) == env


def test_the_preparing_pass_leaves_a_fresh_factory_modules_bytecode_cached(tmp_path):
    """Natively, before the counted process: a module compiled in one counting process and
    read from its cache in the next moves their heaps, and their counts with them."""
    from embedbench import RunConfig
    from embedbench.measure import Share
    from embedbench.spawn import worker_environment

    source = Path(__file__).parent / "support" / "ledger_factories.py"
    shutil.copy(source, tmp_path / "fresh_factories.py")
    config = RunConfig(warmup=1, blocks=2, iterations=1, processes=1)
    share = Share(config, 0, 0, 2, 0, "cpu", "", factory="fresh_factories:lookups")
    env = countrun.counting_environment(worker_environment(extra=[str(tmp_path)]))
    out = tmp_path / "out"
    out.mkdir()
    assert not (tmp_path / "__pycache__").exists()
    countrun._prepare(share.to_json(), out, env, lambda _line: None)
    assert list((tmp_path / "__pycache__").glob("fresh_factories.*.pyc"))


def test_the_counted_process_starts_only_after_the_preparing_pass(monkeypatch):
    from embedbench import RunConfig
    from embedbench.measure import Share

    started: list[list[str]] = []

    def run(command, env, counted, ready, log):
        started.append(command)

    monkeypatch.setattr(countrun, "check_counts", lambda: "/usr/bin/valgrind")
    monkeypatch.setattr(countrun, "_run", run)
    share = Share(RunConfig(), 0, 0, 1, 0, "cpu", "", factory="support.ledger_factories:lookups")
    countrun.count_share(share.to_json(), measured_device="cpu", log=lambda _l: None, env={})
    native, counted = started
    assert native[:2] == [sys.executable, "-m"] and native[-1].endswith("prepare.json")
    assert counted[0] == "/usr/bin/valgrind" and counted[-1].endswith("spec.json")

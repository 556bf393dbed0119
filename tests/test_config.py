"""RunConfig coercion (papermill passes strings) and validation."""

import pytest

from embedbench.config import DEFAULT_BASELINE_REF, CompareConfig, ReportConfig, RunConfig
from embedbench.errors import ConfigError
from embedbench.harness.design import DERIVED, GIVEN
from embedbench.omni.scenarios import CASES


def test_defaults_match_the_original_script():
    c = RunConfig()
    assert (c.warmup, c.blocks, c.iterations, c.lengths) == (50, 20, 20, (1172,))
    assert c.baseline_ref == DEFAULT_BASELINE_REF
    assert c.cases == CASES and c.device == "auto" and c.target == "reference"
    assert c.lm_shim == "flat"


@pytest.mark.parametrize(
    "value, expected",
    [
        (1172, (1172,)),
        ("1172", (1172,)),
        ([512, 1172], (512, 1172)),
        ("[512, 1172]", (512, 1172)),
        ("512 1172", (512, 1172)),
        ("512,1172", (512, 1172)),
        (["512", "1172"], (512, 1172)),
        (["1172,4096"], (1172, 4096)),  # --lengths 1172,4096
        (["[512, 1172]"], (512, 1172)),  # --lengths "[512, 1172]"
        (["512", "1172, 4096"], (512, 1172, 4096)),
    ],
)
def test_lengths_forms(value, expected):
    assert RunConfig(lengths=value).lengths == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        ("Text", ("text",)),
        (["Text"], ("text",)),  # --cases Text
        (" AUDIO ", ("audio",)),
        ("text,Audio", ("text", "audio")),
        (["text,audio", "Video"], ("text", "audio", "video")),
        ("Audio + image + video", ("mixed",)),  # the report's labels
        (["Audio + image + video", "interleaved audio/video"], ("mixed", "interleaved")),
        ("['Audio + image + video', 'Text']", ("mixed", "text")),
        ("[text, audio]", ("text", "audio")),
    ],
)
def test_cases_match_names_and_labels_in_any_letter_case(value, expected):
    assert RunConfig(cases=value).cases == expected


def test_string_forms_of_scalars_and_flags():
    c = RunConfig(
        warmup="0",
        blocks="6",
        processes="3",
        iterations="5",
        seed="-3",
        cpu_core="0",
        overwrite="true",
        allow_busy="False",
        cases="audio video",
    )
    assert (c.warmup, c.blocks, c.iterations, c.seed, c.cpu_core) == (0, 6, 5, -3, 0)
    assert c.processes == 3
    assert c.overwrite is True and c.allow_busy is False
    assert c.cases == ("audio", "video")
    assert RunConfig(cases="['text']").cases == ("text",)
    assert RunConfig(model="", cpu_core="").model is None
    assert RunConfig(lm_shim=" Production ").lm_shim == "production"


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"lengths": 299}, ">= 300"),
        ({"lengths": "abc"}, "integer"),
        ({"lengths": []}, "at least"),
        ({"lengths": [512, 512]}, "duplicates"),
        ({"blocks": 0}, "blocks must be >= 2"),
        ({"blocks": 21}, "blocks must be even"),
        ({"processes": "None"}, "processes must be an integer"),
        ({"processes": 0}, "processes must be >= 1"),
        ({"blocks": 6, "processes": 4}, "pass --processes 3"),
        ({"iterations": 0}, "iterations must be >= 1"),
        ({"warmup": -1}, "warmup must be >= 0"),
        ({"cases": ["audio", "smell"]}, "unknown case 'smell'"),
        ({"cases": []}, "at least"),
        ({"cases": ["Text", "text"]}, "cases has duplicates: \\['text', 'text'\\]"),
        ({"cases": "Audio + video"}, "unknown case '\\+'"),
        ({"device": "tpu"}, "unknown device"),
        ({"target": "x"}, "unknown target"),
        ({"lm_shim": "bogus"}, "unknown lm_shim 'bogus'; choose from flat, production$"),
        ({"lm_shim": None}, "unknown lm_shim 'none'"),
        ({"seed": "1.5"}, "seed must be an integer"),
        ({"cpu_core": -1}, "cpu_core must be >= 0"),
        ({"baseline_ref": "--upload-pack=x"}, "must not start with '-'"),
        ({"overwrite": "maybe"}, "true or false"),
    ],
)
def test_bad_values_are_refused_with_one_line(changes, fragment):
    with pytest.raises(ConfigError, match=fragment) as info:
        RunConfig(**changes)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "given, design",
    [
        ({}, (20, 5, DERIVED, DERIVED)),
        ({"blocks": 6}, (6, 3, GIVEN, DERIVED)),
        ({"blocks": "4"}, (4, 2, GIVEN, DERIVED)),
        ({"blocks": 2}, (2, 1, GIVEN, DERIVED)),
        ({"blocks": 40}, (40, 5, GIVEN, DERIVED)),
        ({"blocks": 6, "processes": 3}, (6, 3, GIVEN, GIVEN)),
        ({"processes": 3}, (20, 3, DERIVED, GIVEN)),
        ({"processes": 12}, (24, 12, DERIVED, GIVEN)),  # the blocks adapt the same way
        ({"blocks": None, "processes": ""}, (20, 5, DERIVED, DERIVED)),  # papermill's unset
    ],
)
def test_an_unset_blocks_or_processes_adapts_to_the_other(given, design):
    c = RunConfig(**given)
    assert (c.blocks, c.processes, c.blocks_source, c.processes_source) == design
    assert sum(len(span) for span in c.worker_blocks()) == c.blocks
    assert all(len(span) >= 2 and len(span) % 2 == 0 for span in c.worker_blocks())


def test_a_derived_design_says_so_in_one_line_each():
    assert RunConfig().design.notes() == [] and RunConfig(blocks=10).design.notes() == []
    assert RunConfig(blocks=6).design.notes() == [
        "3 worker processes, not 5: --blocks 6 allows at most 3, one block in each order "
        "per worker; --blocks 10 or more runs 5"
    ]
    [alone] = RunConfig(blocks=2).design.notes()
    assert alone.startswith("1 worker process (the within-process interval), not 5:")
    assert RunConfig(processes=12).design.notes() == [
        "24 blocks, not 20: --processes 12 needs at least 24, one block in each order per worker"
    ]
    assert RunConfig(blocks=6, processes=3).design.notes() == []


def test_an_explicit_processes_the_blocks_cannot_hold_is_still_refused():
    with pytest.raises(ConfigError) as info:
        RunConfig(blocks=6, processes=4)
    assert str(info.value) == (
        "processes (4) must be at most blocks / 2 (3), so that every worker runs a block in "
        "each order; pass --processes 3 (notebook: processes=3) or --blocks 8"
    )


@pytest.mark.parametrize(
    "given, advice",
    [
        ({"blocks": 7}, "use 6 or 8"),
        ({"blocks": 3}, "use 2 or 4"),
        ({"blocks": 7, "processes": 3}, "use 6 or 8"),
        ({"blocks": 7, "processes": 4}, "use 8 (--processes 4 needs at least 8)"),
        ({"blocks": 7, "processes": 5}, "use 10 (--processes 5 needs at least 10)"),
    ],
)
def test_odd_blocks_are_refused_with_values_that_pass(given, advice):
    with pytest.raises(ConfigError, match="blocks must be even") as info:
        RunConfig(**given)
    message = str(info.value)
    assert message.endswith(advice)
    # Following the advice is one step: every value it names is accepted as it stands.
    for blocks in advice.split(" (")[0].removeprefix("use ").split(" or "):
        assert RunConfig(**{**given, "blocks": blocks}).blocks == int(blocks)


def test_from_mapping_refuses_unknown_names_and_round_trips_json():
    with pytest.raises(ConfigError, match="unknown parameter 'lenghts'"):
        RunConfig.from_mapping({"lenghts": 512})
    c = RunConfig(lengths=[512, 1172], cases=["audio"])
    assert RunConfig.from_mapping(c.to_json()) == c


def test_compare_and_report_parameters_are_coerced_like_the_run_parameters():
    c = CompareConfig(
        results_dirs="['a', 'b']",
        include_reference="false",
        max_slowdown_pct="2.5",
        allow_mixed_windows="True",
    )
    assert c == CompareConfig(("a", "b"), False, 2.5, True)
    assert CompareConfig(results_dirs=["/tmp/run A"]).results_dirs == ("/tmp/run A",)
    assert CompareConfig().include_reference is True and CompareConfig().results_dirs == ()
    assert ReportConfig(results_dir=" ").results_dir is None
    assert ReportConfig(results_dir="/tmp/x").results_dir == "/tmp/x"


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"include_reference": "maybe"}, "include_reference must be true or false"),
        ({"allow_mixed_windows": "2"}, "allow_mixed_windows must be true or false"),
        ({"max_slowdown_pct": "-1"}, "max_slowdown_pct must be >= 0"),
        ({"max_slowdown_pct": float("inf")}, "finite"),
        ({"max_slowdown_pct": "lots"}, "max_slowdown_pct must be a number"),
    ],
)
def test_bad_compare_parameters_are_refused_with_one_line(changes, fragment):
    with pytest.raises(ConfigError, match=fragment) as info:
        CompareConfig(**changes)
    assert "\n" not in str(info.value)

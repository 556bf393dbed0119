"""RunConfig coercion (papermill passes strings) and validation."""

import pytest

from embedbench.config import DEFAULT_BASELINE_REF, CompareConfig, ReportConfig, RunConfig
from embedbench.errors import ConfigError
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

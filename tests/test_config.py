"""RunConfig coercion (papermill passes strings) and validation."""

import pytest

from embedbench.config import DEFAULT_BASELINE_REF, RunConfig
from embedbench.errors import ConfigError
from embedbench.scenarios import CASES


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
    ],
)
def test_lengths_forms(value, expected):
    assert RunConfig(lengths=value).lengths == expected


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

"""Families (docs/families.md): detection from config.json, --family, synthetic Qwen3-Omni
checkpoints."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from embedbench.cases import CASES, expected_lookups
from embedbench.cli import main
from embedbench.config import RunConfig
from embedbench.errors import CheckpointError, ConfigError
from embedbench.omni import checkpoint as ck
from embedbench.omni import families, synthetic
from embedbench.omni.families import qwen3_omni, qwen25_omni
from embedbench.omni.validation import EXPECTED_LOOKUPS

QWEN3_OMNI, QWEN25_OMNI = qwen3_omni.NAME, qwen25_omni.NAME
DEFAULT_FAMILY = families.default().name

HIDDEN = 16


@pytest.fixture(scope="module")
def qwen3_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic.write_synthetic_checkpoint(
        tmp_path_factory.mktemp("q3") / "ckpt", hidden_size=HIDDEN, family=QWEN3_OMNI
    )


@pytest.fixture(scope="module")
def qwen25_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthetic.write_synthetic_checkpoint(
        tmp_path_factory.mktemp("q25") / "ckpt", hidden_size=8
    )


def test_the_published_qwen3_omni_values_are_the_synthetic_ones():
    """Geometry and token ids of Qwen/Qwen3-Omni-30B-A3B-Instruct's config.json, not
    transformers' class defaults (whose audio_token_id is Qwen2.5's 151646)."""
    q3 = qwen3_omni.FAMILY
    assert (q3.vocab_size, q3.hidden_size) == (152064, 2048)
    assert q3.token_ids == {
        "audio_token_id": 151675,
        "image_token_id": 151655,
        "video_token_id": 151656,
        "audio_start_token_id": 151669,
        "audio_end_token_id": 151670,
    }
    assert q3.deepstack_visual_indexes == (8, 16, 24)
    assert "Qwen3-Omni-30B-A3B-Instruct" in q3.published_config_url
    assert families.names() == (QWEN25_OMNI, QWEN3_OMNI)
    assert families.get(QWEN3_OMNI) is q3 and DEFAULT_FAMILY == QWEN25_OMNI


def test_expected_lookups_per_family():
    assert {c: expected_lookups(QWEN25_OMNI, c) for c in CASES} == EXPECTED_LOOKUPS
    q3 = {c: (e["baseline"], e["fixed"]) for c, e in qwen3_omni.FAMILY.expected_lookups.items()}
    assert q3 == {
        "text": (1, 1),
        "audio": (2, 1),
        "image": (2, 1),
        "video": (2, 1),
        "mixed": (2, 1),
        "interleaved": (1, 1),
    }


@pytest.mark.parametrize(
    ("config", "found"),
    [
        ({"model_type": "qwen3_omni_moe"}, (QWEN3_OMNI, "model_type")),
        ({"model_type": "qwen2_5_omni"}, (QWEN25_OMNI, "model_type")),
        (
            {"thinker_config": {"model_type": "qwen3_omni_moe_thinker"}},
            (QWEN3_OMNI, "thinker_config.model_type"),
        ),
        (
            {"architectures": ["Qwen3OmniMoeForConditionalGeneration"]},
            (QWEN3_OMNI, "architectures"),
        ),
        ({"architectures": ["Qwen2_5OmniModel"]}, (QWEN25_OMNI, "architectures")),
        ({"thinker_config": {}}, (DEFAULT_FAMILY, "default")),
    ],
)
def test_family_of_config(config, found):
    assert families.family_of_config(config) == found


def test_an_unknown_model_type_is_refused_in_one_line(qwen3_checkpoint: Path, tmp_path: Path):
    config = json.loads((qwen3_checkpoint / "config.json").read_text())
    config["model_type"] = "qwen2_vl"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as excinfo:
        ck.read_thinker_facts(tmp_path)
    message = str(excinfo.value)
    assert "\n" not in message and "'qwen2_vl'" in message and "qwen3_omni_moe" in message


def test_qwen3_facts_need_the_deepstack_indexes(qwen3_checkpoint: Path, tmp_path: Path):
    config = json.loads((qwen3_checkpoint / "config.json").read_text())
    del config["thinker_config"]["vision_config"]["deepstack_visual_indexes"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="deepstack_visual_indexes is missing"):
        ck.read_thinker_facts(tmp_path)


def test_synthetic_qwen3_checkpoint_reads_as_qwen3(qwen3_checkpoint: Path):
    facts = ck.read_thinker_facts(qwen3_checkpoint)
    assert (facts.family, facts.family_source, facts.deepstack_levels) == (
        QWEN3_OMNI,
        "model_type",
        3,
    )
    assert (facts.audio_token_id, facts.image_token_id, facts.video_token_id) == (
        151675,
        151655,
        151656,
    )
    assert (facts.audio_start_token_id, facts.audio_end_token_id) == (151669, 151670)
    assert (facts.vocab_size, facts.hidden_size) == (152064, HIDDEN)
    assert ck.locate_embedding(qwen3_checkpoint, facts).shape == (152064, HIDDEN)
    assert synthetic.is_synthetic(qwen3_checkpoint)


def test_the_qwen25_checkpoint_is_unchanged(qwen25_checkpoint: Path):
    facts = ck.read_thinker_facts(qwen25_checkpoint)
    assert (facts.family, facts.deepstack_levels) == (QWEN25_OMNI, 0)
    marker = json.loads((qwen25_checkpoint / "config.json").read_text())[synthetic.SYNTHETIC_MARKER]
    assert "family" not in marker  # the Qwen2.5 config (and fingerprint) as before Qwen3-Omni came


def test_default_qwen3_checkpoint_is_cached_under_its_own_name(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBEDBENCH_CACHE", str(tmp_path))
    path = synthetic.default_synthetic_checkpoint(HIDDEN, family=QWEN3_OMNI)
    assert path == tmp_path / f"qwen3-omni-synthetic-152064x{HIDDEN}-bf16-v1"
    assert synthetic.default_synthetic_checkpoint(HIDDEN, family=QWEN3_OMNI) == path
    assert ck.read_thinker_facts(path).family == QWEN3_OMNI


def test_run_config_family():
    assert RunConfig().family == "auto"
    assert RunConfig(family=" Qwen3-Omni ").family == QWEN3_OMNI
    with pytest.raises(ConfigError, match="unknown family 'qwen4'"):
        RunConfig(family="qwen4")


def test_check_family():
    assert families.check_family("auto", QWEN3_OMNI, "model_type", "/m") == QWEN3_OMNI
    assert families.check_family(QWEN3_OMNI, QWEN3_OMNI, "model_type", "/m") == QWEN3_OMNI
    with pytest.raises(ConfigError) as excinfo:
        families.check_family(QWEN3_OMNI, QWEN25_OMNI, "model_type", "/m")
    message = str(excinfo.value)
    assert "\n" not in message
    assert "family qwen3-omni contradicts the checkpoint /m" in message
    assert "'qwen2_5_omni'" in message and "--family auto" in message


def test_cli_refuses_a_family_the_checkpoint_contradicts(qwen25_checkpoint, tmp_path, capsys):
    code = main(
        [
            *("run", "--model", str(qwen25_checkpoint), "--family", "qwen3-omni"),
            *("--output-dir", str(tmp_path / "out"), "--allow-busy", "--no-progress"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "family qwen3-omni contradicts the checkpoint" in err
    assert not (tmp_path / "out" / "metadata.json").exists()


def test_cli_synth_checkpoint_family(tmp_path: Path, capsys):
    target = tmp_path / "small"
    assert main(["synth-checkpoint", str(target), "--family", "qwen3-omni", "--hidden", "8"]) == 0
    assert capsys.readouterr().out.strip() == str(target.absolute())
    config = json.loads((target / "config.json").read_text())
    assert config["model_type"] == "qwen3_omni_moe"
    assert main(["synth-checkpoint", str(tmp_path / "x"), "--family", "qwen9"]) == 2
    assert "unknown --family 'qwen9'" in capsys.readouterr().err


def test_prepare_without_model_uses_the_family_synthetic_checkpoint(tmp_path, monkeypatch):
    from embedbench import runner

    monkeypatch.setenv("EMBEDBENCH_CACHE", str(tmp_path / "cache"))
    small = functools.partial(synthetic.default_synthetic_checkpoint, HIDDEN)
    monkeypatch.setattr(synthetic, "default_synthetic_checkpoint", small)
    config = RunConfig(family="qwen3-omni", output_dir=str(tmp_path / "out"), allow_busy=True)
    prepared = runner.prepare(config, log=lambda _m: None)
    assert prepared.facts.family == QWEN3_OMNI
    assert prepared.model_dir.name == f"qwen3-omni-synthetic-152064x{HIDDEN}-bf16-v1"
    auto = runner.prepare(
        RunConfig(output_dir=str(tmp_path / "out2"), allow_busy=True), log=lambda _m: None
    )
    assert auto.facts.family == QWEN25_OMNI  # the embedded default stays Qwen2.5-Omni


@pytest.mark.parametrize("name", families.names())
def test_every_family_reads_its_own_synthetic_checkpoint_back(name):
    """A family's hooks agree with its facts: its synthetic config.json is detected as it,
    transformers-style attribute reads of its thinker_config read back the checkpoint's
    values, and its replica module builds the forms."""
    family = families.get(name)
    config = family.synthetic_config(HIDDEN, family.vocab_size)
    assert families.family_of_config(config) == (name, "model_type")
    facts = ck.facts_from_config(config)
    thinker = dict(facts.thinker_config)
    text = SimpleNamespace(**thinker.pop("text_config"))
    read = SimpleNamespace(**thinker, text_config=text)
    seen, expected = family.read_back(read, facts)
    assert seen == expected and len(expected) >= 3
    assert callable(family.hooks().build_target)
    assert family.compared == (("output", "deepstack_buffer") if family.deepstack else ("output",))
    assert set(family.expected_lookups) == set(CASES)


def test_the_registry_refuses_a_family_that_claims_anothers_config():
    twin = dataclasses.replace(qwen3_omni.FAMILY, name="twin", default=False)
    with pytest.raises(ValueError, match="belong to 'qwen3-omni'"):
        families.register(twin)
    second_default = dataclasses.replace(
        twin,
        model_type="x",
        architecture="X",
        thinker_model_type="x_thinker",
        other_architectures=(),
        default=True,
    )
    with pytest.raises(ValueError, match="already the default"):
        families.register(second_default)
    assert "twin" not in families.names()
    with pytest.raises(ConfigError, match=r"choose from auto, qwen2\.5-omni, qwen3-omni"):
        families.get("twin")

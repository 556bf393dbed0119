"""Provenance: no secrets, cpufreq facts when present, a header-only checkpoint fingerprint."""

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from embedbench.harness import devices, sysinfo
from embedbench.omni import checkpoint
from embedbench.omni.safetensors_header import header_entry

KEY = "thinker.model.embed_tokens.weight"
SHARD = "model-00001-of-00001.safetensors"
SECRETS = {
    "HF_TOKEN": "hf_FAKEtokenVALUE1234567890",
    "AWS_SECRET_ACCESS_KEY": "FAKEawsSECRETvalue/abcdef123456",
    "GITHUB_TOKEN": "ghp_FAKEgithubTOKENvalue0987654321",
    "VLLM_API_KEY": "FAKEvllmAPIkeyVALUE42",
}


def _checkpoint(root: Path, rows: int = 16, hidden: int = 4) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    save_file(
        {KEY: torch.ones(rows, hidden, dtype=torch.bfloat16), "other": torch.zeros(3)},
        str(root / SHARD),
    )
    index = {"metadata": {}, "weight_map": {KEY: SHARD, "other": SHARD}}
    (root / checkpoint.INDEX_NAME).write_text(json.dumps(index))
    return root


def _truncate_to_header(path: Path) -> None:
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    path.write_bytes(data[: 8 + length])


def test_provenance_records_allowed_environment_and_no_secret(tmp_path, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")  # makes every launch synchronous
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setenv("PYTORCH_SECRET_THING", "FAKEpytorchSECRET")
    text = json.dumps(sysinfo.provenance(0, devices.describe(torch.device("cpu"))))
    for name, value in SECRETS.items():
        assert value not in text
        assert name not in text
    assert "FAKEpytorchSECRET" not in text
    record = json.loads(text)
    assert record["environment"]["OMP_NUM_THREADS"] == "3"
    assert record["environment"]["CUDA_LAUNCH_BLOCKING"] == "1"
    assert record["environment"]["TORCH_CUDA_ARCH_LIST"] == "9.0"


def test_provenance_has_the_machine_and_software_facts():
    record = sysinfo.provenance(0, devices.describe(torch.device("cpu")))
    expected = {"cpu", "load_average", "python", "versions", "device", "environment"}
    assert set(record) >= expected
    assert "checkpoint" not in record  # the harness knows no model: the runner adds it
    cpu = record["cpu"]
    assert cpu["core"] == 0
    assert cpu["frequency_source"] in ("sysfs", "/proc/cpuinfo", "unavailable")
    assert set(cpu) >= {"model", "governor", "scaling_driver", "boost"}
    assert record["versions"]["torch"] == torch.__version__
    assert record["device"]["type"] == "cpu" and record["device"]["gpu"] is None
    json.dumps(record, allow_nan=False)


def test_checkpoint_fingerprint_describes_the_checkpoint(tmp_path):
    model = _checkpoint(tmp_path / "ckpt")
    ckpt = checkpoint.fingerprint(model, SHARD, KEY)
    assert ckpt["path"] == str(model) and ckpt["error"] is None
    assert ckpt["total_bytes"] == sum(p.stat().st_size for p in model.iterdir())
    assert ckpt["embedding_header"]["shape"] == [16, 4]
    assert ckpt["embedding_header"]["dtype"] == "BF16"
    json.dumps(ckpt, allow_nan=False)


def test_fingerprint_reads_only_the_header_and_follows_the_embedding_entry(tmp_path):
    a = _checkpoint(tmp_path / "a")
    first = checkpoint.fingerprint(a, SHARD, KEY)
    assert len(first["fingerprint"]) == 64

    # Data region cut off: the header alone gives the same fingerprint.
    _truncate_to_header(a / SHARD)
    cut = checkpoint.fingerprint(a, SHARD, KEY)
    assert cut["error"] is None and cut["fingerprint"] == first["fingerprint"]

    # A different embedding shape changes the header entry and the fingerprint.
    b = _checkpoint(tmp_path / "b", rows=17)
    assert checkpoint.fingerprint(b, SHARD, KEY)["fingerprint"] != first["fingerprint"]

    # A different index changes it too.
    c = _checkpoint(tmp_path / "c")
    index = json.loads((c / checkpoint.INDEX_NAME).read_text())
    index["metadata"] = {"total_size": 1}
    (c / checkpoint.INDEX_NAME).write_text(json.dumps(index))
    assert checkpoint.fingerprint(c, SHARD, KEY)["fingerprint"] != first["fingerprint"]


def test_fingerprint_reports_what_it_cannot_read(tmp_path):
    a = _checkpoint(tmp_path / "a")
    missing_key = checkpoint.fingerprint(a, SHARD, "no.such.tensor")
    assert missing_key["fingerprint"] is None and "no tensor" in missing_key["error"]
    (a / SHARD).write_bytes(b"\x01\x02")
    short = checkpoint.fingerprint(a, SHARD, KEY)
    assert short["fingerprint"] is None and short["error"]
    gone = checkpoint.fingerprint(tmp_path / "nothing", SHARD, KEY)
    assert gone["fingerprint"] is None and gone["total_bytes"] == 0


def test_header_entry_matches_safetensors(tmp_path):
    a = _checkpoint(tmp_path / "a", rows=5, hidden=3)
    entry = header_entry(a / SHARD, KEY)
    assert entry["dtype"] == "BF16" and entry["shape"] == [5, 3]
    start, end = entry["data_offsets"]
    assert end - start == 5 * 3 * 2
    with pytest.raises(ValueError):
        header_entry(a / SHARD, "missing")


def test_cpufreq_governor_driver_and_boost_from_sysfs(tmp_path, monkeypatch):
    root = tmp_path / "cpu"
    freq = root / "cpu3" / "cpufreq"
    freq.mkdir(parents=True)
    (freq / "scaling_governor").write_text("performance\n")
    (freq / "scaling_driver").write_text("acpi-cpufreq\n")
    (freq / "scaling_min_freq").write_text("800000\n")
    (freq / "scaling_max_freq").write_text("3500000\n")
    monkeypatch.setattr(sysinfo, "SYSFS_CPU", root)
    assert sysinfo.cpufreq_policy(3) == {
        "governor": "performance",
        "scaling_driver": "acpi-cpufreq",
        "min_mhz": 800.0,
        "max_mhz": 3500.0,
    }
    assert sysinfo.cpufreq_policy(0)["governor"] is None
    assert sysinfo.boost_state(3) == {"turbo_enabled": None, "source": "unavailable"}
    (freq / "boost").write_text("1\n")
    assert sysinfo.boost_state(3)["turbo_enabled"] is True
    (root / "intel_pstate").mkdir()
    (root / "intel_pstate" / "no_turbo").write_text("1\n")
    state = sysinfo.boost_state(3)
    assert state["turbo_enabled"] is False and state["source"].endswith("no_turbo")


def test_load_average_is_three_numbers_or_none():
    load = sysinfo.load_average()
    assert load is None or (len(load) == 3 and all(x >= 0 for x in load))

"""The isolation context pins, limits threads, disables gc, and restores everything."""

import gc
import os

import pytest
import torch

from embedbench.errors import ConfigError
from embedbench.harness.isolation import allowed_cores, isolated, resolve_cpu_core


def _state():
    return os.sched_getaffinity(0), torch.get_num_threads(), gc.isenabled()


def test_isolated_applies_and_restores_state():
    before = _state()
    core = allowed_cores()[-1]
    with isolated(core) as state:
        assert os.sched_getaffinity(0) == {core}
        assert torch.get_num_threads() == 1
        assert not gc.isenabled()
        assert torch.is_inference_mode_enabled()
        assert state.cpu_core == core and state.gc_disabled and state.torch_threads == 1
    assert _state() == before
    assert not torch.is_inference_mode_enabled()


def test_isolated_restores_state_when_the_body_raises():
    before = _state()
    with pytest.raises(RuntimeError), isolated(allowed_cores()[0]):
        raise RuntimeError("boom")
    assert _state() == before


def test_core_outside_affinity_set_is_refused():
    outside = max(allowed_cores()) + 1000
    with pytest.raises(ConfigError, match="affinity set"):
        resolve_cpu_core(outside)
    with pytest.raises(ConfigError), isolated(outside):
        pass


def test_default_core_is_the_lowest_allowed():
    assert resolve_cpu_core(None) == min(os.sched_getaffinity(0))

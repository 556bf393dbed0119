"""A throwaway third family for the tests: Qwen2.5-Omni's facts and hooks under another
name, model type and architecture, with another audio token id and no published table.

Registered in-process with ``families.register(FAMILY)``; worker processes find it
through ``EMBEDBENCH_FAMILIES=third_family`` with this folder on ``PYTHONPATH``.
"""

from __future__ import annotations

import dataclasses

from embedbench.omni.families import qwen25_omni

NAME = "test-omni"
# Qwen2.5-Omni's audio id is 151646; this family's is another in-vocabulary id.
AUDIO_TOKEN_ID = 151640

FAMILY = dataclasses.replace(
    qwen25_omni.FAMILY,
    name=NAME,
    label="Test-Omni",
    pr="#0000",
    model_type="test_omni",
    architecture="TestOmniModel",
    thinker_model_type="test_omni_thinker",
    other_architectures=(),
    token_ids={**qwen25_omni.FAMILY.token_ids, "audio_token_index": AUDIO_TOKEN_ID},
    other_config={"talker_config": {"model_type": "test_omni_talker"}},
    reference_table=None,
    default=False,
)

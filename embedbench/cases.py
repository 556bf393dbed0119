"""The facts about cases and variants that both sides need, without torch.

The run side (:mod:`embedbench.omni.scenarios`, :mod:`embedbench.omni.targets`,
:mod:`embedbench.omni.validation`) builds and checks the inputs with torch; the report side
(results, statistics, tables, plots, HTML, gate) only names them. Both import these
from here, so results can be re-rendered on a machine without torch (the report side
never imports it). The old homes re-export them.
"""

from __future__ import annotations

CASES: tuple[str, ...] = ("text", "audio", "image", "video", "mixed", "interleaved")

CASE_LABELS: dict[str, str] = {
    "text": "Text",
    "audio": "Audio",
    "image": "Image",
    "video": "Video",
    "mixed": "Audio + image + video",
    "interleaved": "Interleaved audio/video",
}

# The original refuses shorter inputs: the mixed layout ends at position 292.
MIN_TOKENS = 300

VARIANTS: tuple[str, str] = ("baseline", "fixed")

# What the sync count of a validation row or the probe is, wherever it is shown or stored:
# torch.cuda's sync debug mode warns only for syncs torch's own ops make, so a wait it
# does not see (the driver staging a pageable non_blocking=True copy, which the
# Qwen3-Omni replica makes) is not counted.
SYNC_LABEL = "syncs torch reports (a lower bound)"

# Text lookups per call: the text case delegates to the parent's single
# lookup in both forms; every multimodal case costs the baseline a second one.
EXPECTED_LOOKUPS: dict[str, dict[str, int]] = {
    case: ({"baseline": 1, "fixed": 1} if case == "text" else {"baseline": 2, "fixed": 1})
    for case in CASES
}

# Model families. The family comes from the checkpoint's config.json
# (``model_type``); ``auto`` takes it from there, a named family must agree with it.
# What the report side shows (names, labels, expected lookups) lives here, torch-free;
# what only the run side needs (classes, source paths, config keys, published geometry)
# lives in :mod:`embedbench.omni.families`.
QWEN25_OMNI = "qwen2.5-omni"
QWEN3_OMNI = "qwen3-omni"
FAMILIES: tuple[str, ...] = (QWEN25_OMNI, QWEN3_OMNI)
AUTO_FAMILY = "auto"
# The embedded default (no --model) and what a result without a ``family`` field measured.
DEFAULT_FAMILY = QWEN25_OMNI

FAMILY_LABELS: dict[str, str] = {QWEN25_OMNI: "Qwen2.5-Omni", QWEN3_OMNI: "Qwen3-Omni"}

# config.json ``model_type`` of each family's published checkpoints.
FAMILY_MODEL_TYPES: dict[str, str] = {QWEN25_OMNI: "qwen2_5_omni", QWEN3_OMNI: "qwen3_omni_moe"}

# The vLLM-Omni pull request that removed each family's redundant lookup.
FAMILY_PRS: dict[str, str] = {QWEN25_OMNI: "#7477", QWEN3_OMNI: "#7573"}

# Qwen3-Omni (PR #7573): text-only, empty multimodal and interleaved audio/video input
# keep a single lookup in both forms; the other multimodal cases drop from two to one.
EXPECTED_LOOKUPS_BY_FAMILY: dict[str, dict[str, dict[str, int]]] = {
    QWEN25_OMNI: EXPECTED_LOOKUPS,
    QWEN3_OMNI: {
        case: (
            {"baseline": 1, "fixed": 1}
            if case in ("text", "interleaved")
            else {"baseline": 2, "fixed": 1}
        )
        for case in CASES
    },
}


def expected_lookups(family: str, case: str) -> dict[str, int]:
    """Text lookups per call of each variant that ``family``'s two forms make on ``case``."""
    return dict(EXPECTED_LOOKUPS_BY_FAMILY[family][case])

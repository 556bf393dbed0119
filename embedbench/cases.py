"""The facts about cases and variants that both sides need, without torch.

The run side (:mod:`embedbench.omni.scenarios`, :mod:`embedbench.omni.targets`,
:mod:`embedbench.omni.validation`) builds and checks the inputs with torch; the report side
(results, statistics, tables, plots, HTML, gate) only names them. Both import these
from here, so results can be re-rendered on a machine without torch (the report side
never imports it). The old homes re-export them. What differs between model families
(names, labels, expected lookups, PRs) is each family's, in the torch-free registry
:mod:`embedbench.omni.families`.
"""

from __future__ import annotations

__all__ = [
    "CASES",
    "CASE_LABELS",
    "MIN_TOKENS",
    "SYNC_LABEL",
    "VARIANTS",
    "expected_lookups",
]

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
# DeepStack replica makes) is not counted.
SYNC_LABEL = "syncs torch reports (a lower bound)"


def expected_lookups(family: str, case: str) -> dict[str, int]:
    """Text lookups per call of each variant that ``family``'s two forms make on ``case``
    (the family's own facts, from the registry)."""
    from embedbench.omni import families

    return families.get(family).lookups(case)

"""The facts about cases and variants that both sides need, without torch.

The run side (:mod:`embedbench.omni.scenarios`, :mod:`embedbench.omni.targets`,
:mod:`embedbench.omni.validation`) builds and checks the inputs with torch; the report side
(results, statistics, tables, plots, HTML, gate) only names them. Both import these
from here, so results can be re-rendered on a machine without torch (DESIGN §1). The
old homes re-export them.
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

# Text lookups per call (SPEC §2): the text case delegates to the parent's single
# lookup in both forms; every multimodal case costs the baseline a second one.
EXPECTED_LOOKUPS: dict[str, dict[str, int]] = {
    case: ({"baseline": 1, "fixed": 1} if case == "text" else {"baseline": 2, "fixed": 1})
    for case in CASES
}

"""The probe: a quick check of the timed path on a device before a timed run.

No checkpoint: a seeded table of the family's published geometry is built on the device
(1.09 GB for Qwen2.5-Omni-7B, 0.62 GB for Qwen3-Omni-30B-A3B). For each case it checks
what the timed run relies on — int32 token ids and multimodal rows on the device, the
bool mask on the CPU, the expected lookup counts and ``torch.equal`` of the two forms —
and counts the syncs torch reports inside one call of each form (``torch.cuda`` sync
debug mode; None off CUDA): a lower bound, as the column says (``SYNC_LABEL``). About
15 s on a GPU; ``benchmarks/gpu_check.sh`` runs it first and stops when it fails.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import torch

from embedbench.cases import CASE_LABELS, CASES, SYNC_LABEL, VARIANTS
from embedbench.harness.devices import resolve_device
from embedbench.measure import probe_row
from embedbench.omni import checkpoint, families, synthetic
from embedbench.omni.scenarios import build_scenario, call_variant
from embedbench.omni.targets.reference import build_reference_target
from embedbench.report.markdown import markdown_table

__all__ = ["ProbeReport", "run_probe"]


@dataclass(kw_only=True)
class ProbeReport:
    """Every case's probe row (a validation row with placements and device syncs)."""

    family: str
    device: str
    tokens: int
    hidden: int
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(row["ok"] for row in self.rows)

    def to_json(self) -> dict[str, Any]:
        fields = ("family", "device", "tokens", "hidden", "rows")
        return {"ok": self.ok, **{name: getattr(self, name) for name in fields}}

    def table(self) -> str:
        """One markdown row per case: placements, lookups, equality, syncs, verdict."""

        def syncs(row: dict[str, Any]) -> str:
            counts = row["device_syncs"]
            if all(counts[v] is None for v in VARIANTS):
                return "n/a (not CUDA)"
            return " / ".join(str(counts[v]) for v in VARIANTS)

        body = [
            [
                CASE_LABELS[row["case"]],
                "; ".join(f"{k} {v}" for k, v in row["placements"].items() if v),
                " → ".join(str(row["calls"][v]) for v in VARIANTS),
                "yes" if row["torch_equal"] else "NO",
                syncs(row),
                "ok" if row["ok"] else f"FAILED: {row.get('mismatch')}",
            ]
            for row in self.rows
        ]
        headers = ["Input", "placements", "lookups (baseline → fixed)", "torch.equal"]
        headers += [f"{SYNC_LABEL} in one call (baseline / fixed)", "check"]
        return markdown_table(headers, body, align="llllll")


def run_probe(
    *, family: str, device: str = "auto", tokens: int = 1172, hidden: int | None = None
) -> ProbeReport:
    """Probe every case of ``family`` at ``tokens`` on ``device`` (see the module doc)."""
    published = families.get(family)
    hidden = hidden or published.hidden_size
    dev = resolve_device(device)
    config = published.synthetic_config(hidden, published.vocab_size)
    facts = checkpoint.facts_from_config(config, where=f"{published.label} (published layout)")
    table = synthetic.seeded_table(published.vocab_size, hidden, synthetic.DEFAULT_SEED)
    target = build_reference_target(table.to(dev), facts)
    report = ProbeReport(family=family, device=str(dev), tokens=tokens, hidden=hidden)
    for case in CASES:
        scenario = build_scenario(
            case,
            tokens,
            token_ids=facts,
            hidden_size=hidden,
            device=dev,
            tag=target.tag,
            deepstack_levels=facts.deepstack_levels,
        )
        calls = {
            name: functools.partial(call_variant, target.variants[name], scenario)
            for name in VARIANTS
        }
        report.rows.append(probe_row(target, scenario, calls))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    return report

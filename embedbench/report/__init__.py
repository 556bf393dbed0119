"""The report side: reading results and showing them, without torch.

The output directory (``results``, ``schema``, ``compat`` for older and the original
script's formats), per-case statistics (``summary``), tables (``tables``, ``markdown``),
figures (their data in ``figuredata``, drawn by ``static`` as PNG and ``interactive`` as
Vega-Lite, paired in ``views``), the report's sections for the notebooks and the
standalone page (``sections``, ``html``) and the CI gate (``gate``). Nothing here imports
torch or :mod:`embedbench.omni` (``tests/test_layout.py``), so a GPU box's results
re-render on a laptop.
"""

__all__ = []

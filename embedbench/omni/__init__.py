"""The vLLM-Omni domain: what is measured.

The model families (``families``: one module per family behind a torch-free registry,
the only part of this package the report side reads), the checkpoint and its one tensor
(``checkpoint``, ``safetensors_header``), the synthetic stand-in for a checkpoint
(``synthetic``: written once, cached), the six inputs (``scenarios``), the two wrapper
forms (``targets``: the built-in replica and the real code at two git refs via
``gitsource``), and the lookup-count and equality checks (``validation``). Otherwise
only the run side imports this package.
"""

__all__: list[str] = []  # the modules are the interface: import each by name

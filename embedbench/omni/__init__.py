"""The Qwen2.5-Omni / vLLM-Omni domain: what is measured.

The checkpoint and its one tensor (``checkpoint``, ``safetensors_header``), the six
inputs (``scenarios``), the two wrapper forms (``targets``: the built-in replica and the
real code at two git refs via ``gitsource``), and the lookup-count and equality checks
(``validation``). Only the run side imports this package.
"""

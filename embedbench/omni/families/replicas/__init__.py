"""The families' replica forms: the torch side of a family, imported on the run side only.

Each module here builds one family's thinker shim and its two wrapper forms on the shared
vLLM helper replicas (:mod:`embedbench.omni.targets.vllm_helpers`) and the language
models of :mod:`embedbench.omni.targets.reference`: ``build_target(table, facts, lm_shim,
family)``, and, where the real class needs more than config and language model,
``prepare_real_shim(shim, module, facts, table)`` for the ``vllm-omni`` target.
"""

__all__: list[str] = []

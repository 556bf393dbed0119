"""Error types the front ends turn into a one-line message and exit code 2."""


class EmbedbenchError(Exception):
    """Bad input or a refused run. The message is one line that says what to fix."""


class ConfigError(EmbedbenchError):
    """A run parameter is invalid."""


class CheckpointError(EmbedbenchError):
    """The checkpoint directory cannot provide the embedding table."""


class OutputDirError(EmbedbenchError):
    """The output directory cannot be used (it holds results, or is not writable)."""

"""Error types the front ends turn into a one-line message and exit code 2."""

__all__ = [
    "CheckpointError",
    "ConfigError",
    "ContentionError",
    "EmbedbenchError",
    "GitSourceError",
    "HostLockError",
    "HostNoisyError",
    "IoBusyError",
    "MissingDependencyError",
    "OutputDirError",
    "StaleCodeError",
    "one_line",
]


def one_line(value: object) -> str:
    """``value`` as one line (whitespace collapsed); an exception without a message
    gives its type's name."""
    text = " ".join(str(value).split())
    if not text and isinstance(value, BaseException):
        return type(value).__name__
    return text


class EmbedbenchError(Exception):
    """Bad input or a refused run. The message is one line that says what to fix:
    whatever text it is given is collapsed to one line here, once for every subclass."""

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(one_line(message), *args)


class ConfigError(EmbedbenchError):
    """A run parameter is invalid."""


class CheckpointError(EmbedbenchError):
    """The checkpoint directory cannot provide the embedding table."""


class OutputDirError(EmbedbenchError):
    """The output directory cannot be used (it holds results, or is not writable)."""


class MissingDependencyError(EmbedbenchError):
    """An optional package that this one step needs is not installed; the message says
    how to install it."""


class GitSourceError(EmbedbenchError):
    """A method cannot be taken from a git revision (repo, ref, file, class, method)."""


class ContentionError(EmbedbenchError):
    """The pinned core is busy with other work; measuring there would mislead.

    ``reading`` is the guard's reading (an ``isolation.ContentionReading``), for the record.
    """

    def __init__(self, message: str, reading: object | None = None) -> None:
        super().__init__(message)
        self.reading = reading


class IoBusyError(ContentionError):
    """The kernel is still writing back dirty pages (or iowait is high) after the wait.

    A ``ContentionError``, so whoever refuses a busy core refuses this the same way
    (exit 2); ``reading`` is an ``ioguard.IoReading``.
    """


class HostNoisyError(EmbedbenchError):
    """The canary says the host's speed is not steady (a neighbour on the memory system),
    and it did not settle within the wait: measuring now would mislead."""


class HostLockError(EmbedbenchError):
    """Another embedbench run holds the host lock; two runs must not overlap."""


class StaleCodeError(EmbedbenchError):
    """This process runs a module whose file on disk has changed since it was imported
    (a reused kernel after ``git checkout`` or an edit); measuring would time old code."""

"""Factories of simulated callables for paired_benchmark on the simulated host."""

from embedbench.sim import Work, spender


def planted():
    """A pair whose fixed form does 20 % less memory-bound work."""
    return {
        "baseline": spender(Work(0.0, 1000.0), "baseline"),
        "fixed": spender(Work(0.0, 800.0), "fixed"),
    }

"""What a worker and a run's end import: kept out of the measuring path on purpose.

Each worker process imports what it needs to time (torch), and nothing for analysis:
scipy.stats alone took 1.2 s of every worker's start. The schema check at the end of a
run loads jsonschema without the format libraries it would import on its own (one of them
compiles 38 grammars as it is imported). Structural checks, not timings.
"""

import subprocess
import sys

WORKER_IMPORTS = (
    "import sys, embedbench.worker, embedbench.measure; "
    "print(sorted(m for m in ('scipy', 'scipy.stats', 'pandas', 'matplotlib') "
    "if m in sys.modules))"
)
SCHEMA_IMPORTS = (
    "import sys; from embedbench.report import schema; assert schema.available(); "
    "print('rfc3987_syntax' in sys.modules); import rfc3987_syntax; print('importable')"
)


def _python(code: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return proc.stdout.split()


def test_a_worker_imports_no_analysis_library():
    assert _python(WORKER_IMPORTS) == ["[]"]


def test_the_schema_check_loads_jsonschema_without_the_slow_format_library():
    try:
        import rfc3987_syntax  # noqa: F401  # installed with Jupyter, not by this package
    except ImportError:
        import pytest

        pytest.skip("rfc3987_syntax is not installed here: nothing to keep out")
    # Kept out while jsonschema loads, and importable again afterwards.
    assert _python(SCHEMA_IMPORTS) == ["False", "importable"]

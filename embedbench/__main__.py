"""``python -m embedbench``."""

from embedbench.cli import console_main

console_main()

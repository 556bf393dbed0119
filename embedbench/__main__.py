"""``python -m embedbench``."""

import sys

from embedbench.cli import main

sys.exit(main())

"""``python -m tools.diagrams [OUTDIR]``: write every architecture diagram (see the package docstring)."""
import sys

from tools.diagrams import main

sys.exit(main())

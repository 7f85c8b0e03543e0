"""`python -m spora devices`: see spora._cli."""
import sys

from ._cli import main

sys.exit(main())

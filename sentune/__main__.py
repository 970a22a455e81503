"""`python -m sentune ...` (and `torchrun -m sentune train ...`) runs the command line."""

import sys

from sentune.cli import main

sys.exit(main())

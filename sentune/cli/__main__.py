import sys

from sentune.cli.app import main

sys.exit(main())

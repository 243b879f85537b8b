"""``python -m genmem.cli``: the ``genmem`` command."""

import sys

from genmem.cli.main import main

sys.exit(main())

"""``python -m simulation.cli``: the same as the ``agora`` console script."""

import sys

from simulation.cli.entry import main

sys.exit(main())

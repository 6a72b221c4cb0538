"""`python -m logway.cli …`: the same as the `logway` console script."""

import sys

from .main import main

sys.exit(main())

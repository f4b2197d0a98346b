"""`python -m consumer.cli`: the same as the `newsdedup` command."""

import sys

from consumer.cli import main

sys.exit(main())

"""``python -m sigex`` is the ``sigex`` command."""

import sys

from .cli import main

sys.exit(main())

"""``python -m gpudefrag`` = the ``gpudefrag`` command."""

import sys

from gpudefrag.cli import main

sys.exit(main())

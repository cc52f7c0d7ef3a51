"""setuptools hook: builds ``gpudefrag._aot``, the ahead-of-time compiled kernels
(``src/gpudefrag/aot.py``).  Everything else is in ``pyproject.toml``.

Without numba's AOT compiler (or with ``GPUDEFRAG_AOT=0``) the package installs without the
extension and numba compiles the same kernels at run time.
"""

import os
import sys
from pathlib import Path

from setuptools import setup


def _extensions() -> list:
    if os.environ.get("GPUDEFRAG_AOT", "1") == "0":
        return []
    sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))
    try:
        from gpudefrag.aot import extension

        return [extension()]
    except Exception as exc:  # the package works without it: numba compiles at run time
        print(f"gpudefrag: ahead-of-time kernels not built ({exc})", file=sys.stderr)
        return []
    finally:
        sys.path.pop(0)


setup(ext_modules=_extensions())

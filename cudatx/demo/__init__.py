"""``cudatx demo``: a small environment that shows the cu12/cu13 shared-path trap.

:func:`build_demo` compiles (or takes prebuilt) tiny real libraries, packs them into
wheels with :mod:`cudatx.demo.wheelfile`, and installs them offline with real uv into a venv
in a folder of the caller's choosing. See :mod:`cudatx.demo.build`.
"""

from cudatx.demo.build import DemoEnv, build_demo
from cudatx.demo.errors import DemoError

__all__ = ["DemoEnv", "DemoError", "build_demo"]

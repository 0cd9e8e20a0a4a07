"""Test-support library: real ELF fixtures, real wheels, real uv venvs, the real loader.

Nothing here mocks the system: :mod:`.cbuild` drives the system C compiler and GNU ld,
:mod:`.wheels` writes wheel zips with hashed RECORD files, :mod:`.venvs` runs the ``uv``
binary of the ``uv`` PyPI package offline, and :mod:`.judge` runs a real interpreter under
``LD_DEBUG`` and reports what glibc's dynamic loader actually did.

Built on them: :mod:`.cli` runs the cudatx command line (every test that runs it goes
through it); :mod:`.ext_world` (one library, one extension, one wheel, one venv),
:mod:`.cudnn_world` (the cu12/cu13 cuDNN story), :mod:`.txn_world` (the transaction
tests' trap) and :mod:`.pure_world` (two pure-Python wheels and a sentinel outside the venv,
for the hardening tests), :mod:`.blind_world` (a package that loads another's library by a
name computed at run time: the trial's tests) build the environments tests share;
:mod:`.torch_env` is the real torch environment of the slow tests; :mod:`.precommit_story`
the pre-commit story; :mod:`.digest` a tree's digest; :mod:`.paths` where the checkout and
tests/data are; :mod:`.conda` conda packages installed into a prefix as conda's link step
leaves them, with real records.
"""

from .cbuild import (
    BuildError,
    DynamicInfo,
    compile_extension,
    compile_lib,
    ext_suffix,
    read_dynamic,
    readelf_dynamic,
    symbol_for,
)
from .judge import (
    ANY,
    JudgeError,
    Observation,
    Request,
    SearchPath,
    observe_code,
    observe_dlopen,
    observe_import,
    parse_ld_debug,
)
from .venvs import (
    UvError,
    make_venv,
    site_packages,
    uv_bin,
    uv_install,
    uv_uninstall,
    venv_python,
)
from .wheels import build_wheel, dist_info_name, normalize_name, record_hash

__all__ = [
    "ANY",
    "BuildError",
    "DynamicInfo",
    "JudgeError",
    "Observation",
    "Request",
    "SearchPath",
    "UvError",
    "build_wheel",
    "compile_extension",
    "compile_lib",
    "dist_info_name",
    "ext_suffix",
    "make_venv",
    "normalize_name",
    "observe_code",
    "observe_dlopen",
    "observe_import",
    "parse_ld_debug",
    "read_dynamic",
    "readelf_dynamic",
    "record_hash",
    "site_packages",
    "symbol_for",
    "uv_bin",
    "uv_install",
    "uv_uninstall",
    "venv_python",
]

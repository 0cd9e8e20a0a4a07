"""The demo's one error."""

from __future__ import annotations

from cudatx.errors import CudatxError, ExitCode


class DemoError(CudatxError):
    """The demo environment could not be built (no compiler and no prebuilt copy, or uv
    failed). ``message`` is one line ending with the tool's last stderr line; ``command``
    and ``stderr`` keep the whole of it for a debug view."""

    exit_code = ExitCode.DEMO_FAILED

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        command: tuple[str, ...] = (),
        stderr: str = "",
    ) -> None:
        super().__init__(message, path=path)
        self.command = command
        self.stderr = stderr

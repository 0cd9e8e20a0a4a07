"""torch: so far its trial steps only.

What torch loads by hand (torch/__init__.py's preload list, `_load_global_deps`) is still
read by cudatx.discover.preloads, with cudatx/data/loadlists.json, and replayed as the
"torch" step of a context (cudatx.loader.roots): this reader finds nothing (no `markers`)
until that reading moves here (issue 35). Its GPU-free step is its import, which the trial
runs for every top-level package; its GPU start is declared here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from cudatx.discover.frameworks import FrameworkStep, SiteFiles, register
from cudatx.discover.frameworks.model import FrameworkLoads, Installed
from cudatx.discover.frameworks.source import Shape

# torch's GPU start, where the trial's probe found a device: CUDA init, a cuBLAS product
# and a cuDNN convolution.
_GPU_START = """\
import torch
if torch.version.cuda is None:
    raise SystemExit(0)  # a CPU or ROCm build has no CUDA start to judge
torch.cuda.init()
x = torch.ones(8, 8, device='cuda')
(x @ x).sum().item()
image = torch.ones(1, 1, 8, 8, device='cuda')
torch.nn.functional.conv2d(image, torch.ones(1, 1, 3, 3, device='cuda')).sum().item()
if torch.backends.cudnn.version() is None:
    raise SystemExit('torch finds no cuDNN')
"""


class TorchReader:
    name = "torch"
    markers: tuple[str, ...] = ()  # read by cudatx.discover.preloads, not here (yet)

    def find(self, site: str, marker: str, owner: str, files: SiteFiles) -> Installed | None:
        return None

    def read(self, found: Installed, texts: dict[str, str]) -> FrameworkLoads:
        raise Shape("torch's preloads are read by cudatx.discover.preloads")

    def steps(self, sites: Sequence[str], files: SiteFiles) -> Iterator[FrameworkStep]:
        yield FrameworkStep(
            "torch's GPU start (CUDA init, a cuBLAS product, a cuDNN convolution)",
            "torch",
            _GPU_START,
            "torch",
            gpu=True,
        )


register(TorchReader())

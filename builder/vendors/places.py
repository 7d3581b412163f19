"""Where each vendor's toolkit is looked for, in upstream's order (env vars, then defaults).

Shared by the vendors' quick toolkit detection and by preflight's providers; kept free of
imports so that loading a vendor costs nothing.
"""

from __future__ import annotations

CUDA_ENV_VARS = ("CUDA_HOME", "CUDA_PATH")
CUDA_DEFAULTS = ("/usr/local/cuda",)

MUSA_ENV_VARS = ("MUSA_ROOT", "MUSA_HOME", "MUSA_PATH")
MUSA_DEFAULTS = ("/usr/local/musa",)

PPU_ENV_VARS = ("THEAD_CUDA_ROOT", "PPU_CUDA_ROOT")
PPU_DERIVED = {"PPU_SDK_ROOT": "CUDA_SDK"}
PPU_DEFAULTS = ("/usr/local/PPU_SDK/CUDA_SDK",)

"""What this CPU can do natively, read once from the kernel's CPU flags."""

from __future__ import annotations

import functools
import platform
from pathlib import Path

#: /proc/cpuinfo flags of CPUs whose bf16 matrix products are native, not emulated
NATIVE_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})


@functools.cache
def native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """True when this CPU multiplies bfloat16 matrices natively (AMX-BF16 or AVX512-BF16).

    Read from the kernel's CPU flags (Linux); elsewhere False, so nothing chooses bf16 automatically
    where it cannot be told to pay off (emulated bf16 is slower than float32).
    """
    if platform.system() != "Linux":
        return False
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            return bool(NATIVE_BF16_FLAGS & set(line.partition(":")[2].split()))
    return False

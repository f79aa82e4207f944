"""What this CPU can do natively, read once from the kernel's CPU flags."""

from __future__ import annotations

import functools
import platform
from pathlib import Path

#: /proc/cpuinfo flags of CPUs whose bf16 matrix products are native, not emulated
NATIVE_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
#: /proc/cpuinfo flags of CPUs with bf16 matrix tiles (Intel AMX), where bf16 products run several times float32's
AMX_BF16_FLAGS = frozenset({"amx_bf16"})


@functools.cache
def native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """True when this CPU multiplies bfloat16 matrices natively (AMX-BF16 or AVX512-BF16).

    Read from the kernel's CPU flags (Linux); elsewhere False, so nothing chooses bf16 automatically
    where it cannot be told to pay off (emulated bf16 is slower than float32).
    """
    return bool(NATIVE_BF16_FLAGS & _flags(cpuinfo))


@functools.cache
def amx_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """True when this CPU has AMX bf16 tiles: the CPUs where bf16 batches outran the int8 ONNX export (measured
    before that export split its feed-forward outlier channels off; not measured on AMX since)."""
    return bool(AMX_BF16_FLAGS & _flags(cpuinfo))


def _flags(cpuinfo: str) -> set[str]:
    """The kernel's CPU flags (Linux); an empty set elsewhere or when they cannot be read."""
    if platform.system() != "Linux":
        return set()
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()

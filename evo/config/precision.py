"""``precision``: float32, or bfloat16 autocast where the processor computes it natively. Pure.

The check reads the processor's flags from ``/proc/cpuinfo`` (no torch here: the config layer
must import without it; evo/sb3/precision.py asks torch the same question when it builds a
model). bfloat16 needs ``avx512_bf16`` (Cooper Lake, Sapphire Rapids and later, AMD Zen 4) or
``amx_bf16`` (Sapphire Rapids' tile unit): elsewhere oneDNN emulates it, slower than float32,
so a bf16 run on such a processor would only be a slow float32 run with rounding noise.
"""

from __future__ import annotations

from pathlib import Path

PRECISIONS = ("fp32", "bf16")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""Either one means the processor multiplies bfloat16 natively."""
REPORTED_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_bf16")
"""The flags that decide how fast PPO's network runs, as the throughput benchmark prints them."""
CPUINFO = Path("/proc/cpuinfo")


def cpuinfo_field(name: str, cpuinfo: str | None = None) -> str:
    """Field ``name`` of the first processor in ``cpuinfo`` (the text of /proc/cpuinfo; read it if
    None), or "" where there is no /proc/cpuinfo (macOS) or no such field."""
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text()
        except OSError:
            return ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return ""


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The flags of the first processor in ``cpuinfo`` (the text of /proc/cpuinfo; read it if None).
    Empty where there is no /proc/cpuinfo (macOS) or no flags line (an ARM kernel's 'Features')."""
    return set(cpuinfo_field("flags", cpuinfo).split())


def native_bf16(flags: set[str]) -> bool:
    return any(flag in flags for flag in BF16_FLAGS)


def resolve_precision(flag: str | None, yaml_value: str | None, problems: list[str], cpuinfo: str | None = None) -> str:
    """``--precision``, else the YAML's ``precision``, else fp32; bf16 refused where the processor
    has no native bfloat16 (``cpuinfo``: the text of /proc/cpuinfo, read if None)."""
    precision = flag if flag is not None else yaml_value if yaml_value is not None else "fp32"
    where = "--precision" if flag is not None else "precision (YAML)"
    if precision not in PRECISIONS:
        problems.append(f"{where} {precision!r}: use one of {', '.join(PRECISIONS)}")
        return "fp32"
    if precision == "bf16":
        flags = cpu_flags(cpuinfo)
        if not native_bf16(flags):
            has = [flag for flag in REPORTED_FLAGS if flag in flags]
            problems.append(
                f"{where} bf16: this processor has no native bfloat16 (neither {' nor '.join(BF16_FLAGS)} in "
                f"/proc/cpuinfo; it has {', '.join(has) or 'none of ' + ', '.join(REPORTED_FLAGS)}), so bfloat16 "
                "would be emulated, slower than float32. Use --precision fp32 (the default) here, or run on a "
                "processor with avx512_bf16 or amx_bf16 (Intel Cooper Lake / Sapphire Rapids or later, AMD Zen 4)"
            )
            return "fp32"
    return precision

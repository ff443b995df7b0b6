"""How amounts and durations read everywhere a user sees them (tables, advice, status)."""
from __future__ import annotations


def vrt(wei: int) -> str:
    """1,234.50 VRT"""
    return f"{wei / 1e18:,.2f} VRT"


def duration(seconds: float) -> str:
    """42 s, 3 min 05 s, 2 h 10 min, 3 d 04 h (negative reads as 0 s)."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600:02d} h"

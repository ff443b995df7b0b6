"""Per-round curves as inline SVG (no chart library, no script): a polyline with a dot and label per round."""
from __future__ import annotations

from html import escape

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 320, 150, 44, 12, 14, 26


def curve_svg(points: list[tuple[int, float]], title: str, fmt: str = "{:.4f}", css: str = "curve",
              ceiling: float | None = None) -> str:
    """`points`: (round shown to people, value). The y axis runs from 0 (or below, for negative values) to the
    largest value, or to `ceiling` (accuracy: 1) when that is higher; a flat or single-point series still draws."""
    if not points:
        return f'<p class="muted">{escape(title)}: no finished round yet</p>'
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    lo, hi = min(0.0, min(ys)), max(ys) if ceiling is None else max(ceiling, max(ys))
    if hi - lo < 1e-12:
        hi = lo + 1.0
    x0, x1 = min(xs), max(xs)

    def px(x: float) -> float:
        return PAD_L + (W - PAD_L - PAD_R) * (0.5 if x1 == x0 else (x - x0) / (x1 - x0))

    def py(y: float) -> float:
        return PAD_T + (H - PAD_T - PAD_B) * (1 - (y - lo) / (hi - lo))

    line = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
    dots = "".join(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5"><title>round {x}: {fmt.format(y)}</title></circle>'
                   f'<text x="{px(x):.1f}" y="{H - 8}" text-anchor="middle">{x}</text>' for x, y in points)
    return (f'<svg class="{css}" viewBox="0 0 {W} {H}" role="img" aria-label="{escape(title)}">'
            f'<title>{escape(title)}</title>'
            f'<line class="axis" x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}"/>'
            f'<line class="axis" x1="{PAD_L}" y1="{PAD_T}" x2="{PAD_L}" y2="{H - PAD_B}"/>'
            f'<text x="{PAD_L - 4}" y="{PAD_T + 4}" text-anchor="end">{fmt.format(hi)}</text>'
            f'<text x="{PAD_L - 4}" y="{H - PAD_B}" text-anchor="end">{fmt.format(lo)}</text>'
            f'<polyline points="{line}"/>{dots}</svg>')

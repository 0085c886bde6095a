"""A bar chart of one-step jobs per second, written by hand as SVG (no plotting library to install)."""
from xml.sax.saxutils import escape

COLORS = {"shiftboss": "#2b6cb0", "peer": "#a0aec0", "raw": "#dd6b20"}
LABELS = {"shiftboss": "shiftboss", "peer": "peer", "raw": "raw limit"}


def bars(title, items, path):
    """items: (label, value, kind) with kind in COLORS; one horizontal bar each, longest first."""
    items = sorted((i for i in items if i[1]), key=lambda i: -i[1])
    if not items:
        return None
    w, left, bar, gap, top = 900, 330, 22, 8, 50
    h = top + len(items) * (bar + gap) + 40
    top_value = max(v for _, v, _ in items)
    scale = (w - left - 120) / top_value
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="13">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="28" text-anchor="middle" font-size="16">{escape(title)}</text>']
    for n, (label, value, kind) in enumerate(items):
        y = top + n * (bar + gap)
        out.append(f'<text x="{left - 8}" y="{y + bar - 6}" text-anchor="end">{escape(label)}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{max(1, value * scale):.1f}" height="{bar}" '
                   f'fill="{COLORS[kind]}"/>')
        out.append(f'<text x="{left + value * scale + 6:.1f}" y="{y + bar - 6}">{value:,.0f}</text>')
    ly = h - 16
    for i, (kind, color) in enumerate(COLORS.items()):
        x = left + i * 150
        out.append(f'<rect x="{x}" y="{ly - 11}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{x + 18}" y="{ly}">{LABELS[kind]}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path

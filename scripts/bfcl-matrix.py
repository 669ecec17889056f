#!/usr/bin/env python3
"""The BFCL every-item matrix of issue #27 as one table and one chart.

Reads results/bfcl/<column>/<category>/report.json (written by `plansmith eval bfcl --out`,
one category per run: scripts/bfcl-every-item.sh) for each column below, prints a Markdown
table (accuracy per category, non-live AST as the mean of the first four) and writes
results/bfcl/matrix.svg: grouped bars per category, with the published leaderboard rows beside
the non-live AST group. Standard library only.

    python3 scripts/bfcl-matrix.py
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
COLUMNS = [
    ("smollm2-constrained-full", "SmolLM2-135M, grammar, JSON array", "#1c7ed6"),
    ("smollm2-free-full", "SmolLM2-135M, free", "#a5d8ff"),
    ("qwen05-tool_call-full", "Qwen2.5-Coder-0.5B, grammar, <tool_call>", "#d9480f"),
    ("qwen05-json-full", "Qwen2.5-Coder-0.5B, grammar, JSON array", "#ff922b"),
    ("qwen05-free-full", "Qwen2.5-Coder-0.5B, free", "#ffc078"),
]
CATEGORIES = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance",
              "live_simple", "live_multiple", "live_irrelevance"]
NON_LIVE = CATEGORIES[:4]
# BFCL v4 leaderboard, non-live AST, as quoted in docs/results/bfcl.md.
LEADERBOARD = [("Qwen3-0.6B (published)", 71.79), ("Hammer2.1-0.5b (published)", 65.98),
               ("Llama-3.2-1B (published)", 38.38)]


def accuracy(column, category):
    path = ROOT / "results" / "bfcl" / column / category / "report.json"
    if not path.exists():
        return None
    report = json.loads(path.read_text())
    return 100.0 * report["categories"][category]["accuracy"]


def main():
    table = {c: {cat: accuracy(c, cat) for cat in CATEGORIES} for c, _, _ in COLUMNS}
    for c, row in table.items():
        vals = [row[cat] for cat in NON_LIVE]
        row["non-live AST"] = sum(vals) / 4 if None not in vals else None
    groups = CATEGORIES + ["non-live AST"]
    fmt = lambda v: "-" if v is None else f"{v + 1e-9:.1f}"  # 37.25 prints 37.3
    print("| category | " + " | ".join(label for _, label, _ in COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for g in groups:
        cells = [fmt(table[c][g]) for c, _, _ in COLUMNS]
        if g == "non-live AST":
            cells = [f"**{x}**" for x in cells]
        print(f"| {g} | " + " | ".join(cells) + " |")

    bar_h, gap, label_w, plot_w = 11, 16, 150, 420
    legend_h = 18 * (len(COLUMNS) + 1)
    rows = len(groups) * len(COLUMNS) + len(LEADERBOARD)
    height = 50 + legend_h + rows * bar_h + len(groups) * gap + 40
    width = label_w + plot_w + 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="20" font-size="14" font-weight="bold">BFCL v4, every item: '
           'accuracy by category (%)</text>']
    y = 34
    for _, label, colour in COLUMNS:
        out.append(f'<rect x="10" y="{y}" width="12" height="10" fill="{colour}"/>'
                   f'<text x="28" y="{y + 9}">{esc(label)}</text>')
        y += 18
    out.append(f'<rect x="10" y="{y}" width="12" height="10" fill="#868e96"/>'
               f'<text x="28" y="{y + 9}">published leaderboard row (non-live AST)</text>')
    top = 50 + legend_h
    bottom = height - 30
    for tick in (0, 25, 50, 75, 100):
        x = label_w + plot_w * tick / 100
        out.append(f'<line x1="{x}" y1="{top - 6}" x2="{x}" y2="{bottom}" stroke="#ddd"/>'
                   f'<text x="{x}" y="{bottom + 14}" text-anchor="middle" fill="#666">{tick}</text>')
    y = top
    for g in groups:
        bars = [(table[c][g], colour, "") for c, _, colour in COLUMNS]
        if g == "non-live AST":
            bars += [(v, "#868e96", " " + name) for name, v in LEADERBOARD]
        out.append(f'<text x="{label_w - 8}" y="{y + len(bars) * bar_h / 2 + 4}" '
                   f'text-anchor="end" font-weight="{"bold" if g == "non-live AST" else "normal"}">'
                   f'{esc(g)}</text>')
        for value, colour, name in bars:
            w = 0 if value is None else plot_w * max(0.0, min(100.0, value)) / 100
            out.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h - 1}" fill="{colour}"/>')
            text = "not run" if value is None else f"{value + 1e-9:.1f}{esc(name)}"
            out.append(f'<text x="{label_w + w + 4:.1f}" y="{y + bar_h - 2}" font-size="9" '
                       f'fill="#333">{text}</text>')
            y += bar_h
        y += gap
    out.append("</svg>")
    path = ROOT / "results" / "bfcl" / "matrix.svg"
    path.write_text("\n".join(out) + "\n")
    print(f"\nwrote {path.relative_to(ROOT)}", file=sys.stderr)


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


if __name__ == "__main__":
    main()

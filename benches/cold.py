"""Summarise `bench --cold` lines (scripts/gpu-run cold): median per label."""
import json
import statistics
import sys

rows = {}
with open(sys.argv[1]) as fh:
    for line in fh:
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            rows.setdefault(r["label"], []).append(r)

cols = ["open_ms", "first_apply3_ms", "decode_ms", "load_ms", "second_apply3_ms"]
print("| path / driver cache | runs | target | " + " | ".join(cols) + " | families loaded | check |")
print("|---" * (len(cols) + 5) + "|")
for label, rs in rows.items():
    med = [statistics.median(r[c] for r in rs) for c in cols]
    fams = sorted({",".join(r["families_loaded"]) for r in rs})
    checks = sorted({r["check"] for r in rs})
    print(
        f"| {label} | {len(rs)} | {rs[0]['target']} | "
        + " | ".join(f"{m:.2f}" for m in med)
        + f" | {' / '.join(fams)} | {' / '.join(checks)} |"
    )

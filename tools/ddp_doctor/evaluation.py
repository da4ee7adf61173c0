"""Recompute the totals of the doctor's evaluation (evaluation.md, beside this file) from its tables.

    python tools/ddp_doctor/evaluation.py          # each round's totals; exit 1 if a Totals line disagrees
    python tools/ddp_doctor/evaluation.py --json   # the same as JSON (lesson 14 reads it)

A round is a `## Round N` section. Its findings are the rows of a table whose fourth column is a verdict
(true, false or debatable); its scripts are the rows of the table whose header starts `| script | repository`.
Debatable findings count as false: precision = true / all findings. Standard library only.
"""

import json
import re
import sys
from pathlib import Path

RECORD = Path(__file__).resolve().with_name("evaluation.md")
VERDICTS = ("true", "false", "debatable")
TOTALS = re.compile(r"^Totals: (\d+) findings: (\d+) true, (\d+) false, (\d+) debatable; "
                    r"precision (\d+) % \((\d+)/(\d+)\)$")


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def rounds(text=None):
    """[{round, scripts, held_out, findings: [(script, place, rule, verdict)], true, false, debatable, total,
    precision, stated}] in the order of the file; stated is the Totals line's numbers (None without one)."""
    text = RECORD.read_text(encoding="utf-8") if text is None else text
    found = []
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        match = re.match(r"Round (\d+)", title)
        if not match:
            continue
        scripts, findings, stated = [], [], None
        header = None
        for line in body.splitlines():
            if line.startswith("|"):
                row = cells(line)
                if set("".join(row)) <= set("-: "):
                    continue
                if row[:2] == ["script", "repository"] or row[:2] == ["script", "place"]:
                    header = row[1]
                    continue
                if header == "repository":
                    scripts.append(row[0])
                elif header == "place" and len(row) >= 4:
                    findings.append(tuple(row[:4]))
            elif TOTALS.match(line.strip()):
                stated = tuple(int(n) for n in TOTALS.match(line.strip()).groups())
        counts = {v: sum(f[3] == v for f in findings) for v in VERDICTS}
        unknown = [f for f in findings if f[3] not in VERDICTS]
        total = len(findings)
        found.append({"round": int(match.group(1)), "scripts": scripts, "findings": findings, **counts,
                      "unknown": unknown, "total": total,
                      "precision": counts["true"] / total if total else None, "stated": stated,
                      "scripts_with_findings": sorted({f[0] for f in findings}),
                      "unlisted": sorted({f[0] for f in findings} - set(scripts))})
    return found


def computed_totals(r):
    percent = round(100 * r["precision"]) if r["total"] else 0
    return (r["total"], r["true"], r["false"], r["debatable"], percent, r["true"], r["total"])


def problems(all_rounds):
    """What disagrees: a Totals line that the tables do not give, a verdict not in VERDICTS, a finding of a
    script the round does not list."""
    found = []
    for r in all_rounds:
        if r["stated"] != computed_totals(r):
            found.append(f"round {r['round']}: Totals line says {r['stated']}, the table gives {computed_totals(r)}")
        found += [f"round {r['round']}: unknown verdict {f}" for f in r["unknown"]]
        found += [f"round {r['round']}: script {s} not in its table of scripts" for s in r["unlisted"]]
    return found


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    all_rounds = rounds()
    if "--json" in argv:
        print(json.dumps([{k: v for k, v in r.items() if k != "findings"} for r in all_rounds], indent=1))
    else:
        for r in all_rounds:
            share = f"{100 * r['precision']:.0f} %" if r["total"] else "-"
            print(f"round {r['round']}: {len(r['scripts'])} scripts, {r['total']} findings: {r['true']} true, "
                  f"{r['false']} false, {r['debatable']} debatable; precision {share}")
    bad = problems(all_rounds)
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

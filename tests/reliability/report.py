"""Write the measured figures of a soak run into ``docs/reliability.md``.

``python tests/reliability/report.py FIGURES DOC``: FIGURES is the JSON-lines file the
suites appended to (:func:`support.soak.record`), DOC the page whose part between the two
markers below is replaced by one table per suite, a row per case and backend (the counts as
measured, summed over the records of a case when a suite recorded it more than once).
Everything outside the markers is written by hand and left as it is.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

BEGIN = "<!-- figures:begin (tests/reliability/report.py writes this part) -->"
END = "<!-- figures:end -->"

ORDER = ["model", "crash", "races", "faults", "input", "security", "hostile"]
"""The suites in the order of the issue; any other suite follows."""
META = {"suite", "case", "backend", "soak", "at", "machine", "command", "seed"}
"""Fields of a record that are not counts (a seed is in the figures file, to replay)."""


def figures_table(records: list[dict[str, Any]]) -> list[str]:
    """One Markdown table of one suite's records: a row per (case, backend)."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        row = rows.setdefault((record["case"], record["backend"]), {})
        for name, value in record.items():
            if name in META:
                continue
            if isinstance(value, dict | list):
                continue  # a breakdown (refusals by code, say): in the figures file only
            if isinstance(value, bool) or not isinstance(value, int | float):
                row[name] = value
            elif name.endswith("_s"):  # a time: the longest
                row[name] = max(row.get(name, 0), value)
            else:
                row[name] = row.get(name, 0) + value
    columns = sorted({name for row in rows.values() for name in row})
    lines = [
        "| case | backend | " + " | ".join(columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    for (case, backend), row in sorted(rows.items()):
        cells = [_cell(row.get(name, "")) for name in columns]
        lines.append(f"| {case} | {backend} | " + " | ".join(cells) + " |")
    return lines


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def section(records: list[dict[str, Any]]) -> str:
    """The generated part of the page."""
    by_suite: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        by_suite[record["suite"]].append(record)
    suites = [s for s in ORDER if s in by_suite] + sorted(set(by_suite) - set(ORDER))
    soak = all(record.get("soak") for record in records)
    stamps = sorted(record["at"] for record in records)
    lines = [
        BEGIN,
        "",
        f"Measured at the soak's size{'' if soak else ' (partly at the bounded size)'}, "
        f"{stamps[0]} to {stamps[-1]}, on {records[0]['machine']}; "
        f"{len(records)} records.",
    ]
    for suite in suites:
        lines += ["", f"#### {suite}", "", *figures_table(by_suite[suite])]
    lines += ["", END]
    return "\n".join(lines)


def main(figures: Path, doc: Path) -> None:
    records = [json.loads(line) for line in figures.read_text().splitlines() if line.strip()]
    if not records:
        sys.exit(f"{figures}: no figures recorded")
    text = doc.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        sys.exit(f"{doc}: the markers of the figures are missing")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + section(records) + tail, encoding="utf-8")
    print(f"{doc}: {len(records)} records of {figures}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(Path(sys.argv[1]), Path(sys.argv[2]))

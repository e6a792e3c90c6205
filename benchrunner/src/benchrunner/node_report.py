"""The node validation summary as a table: a row per node and per link between two nodes, a column per check, each
cell its status and the fraction of the physical limit reached ("pass 0.93"); the reasons of failed and skipped
checks under it. As text (markdown) for the terminal and as an HTML section, green and red."""

from __future__ import annotations

import argparse
import html
import sys
from pathlib import Path
from typing import Any

from benchrunner import results

LATEST = Path("node-validation") / "latest.json"
CLUSTER_ROW = "(cluster)"


def _checks(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A node's checks: the validation role's (v2 on) and the acceptance checks (v3)."""
    return {**node.get("checks", {}), **(node.get("acceptance") or {}).get("checks", {})}


def _link_row(link: dict[str, Any]) -> str:
    return f"{link['a'] or '?'} <-> {link['b']}"


def rows(document: dict[str, Any]) -> list[tuple[str, dict[str, dict[str, Any]]]]:
    """(row name, check name -> check) for the cluster checks, each node, then each link; a link's test fills the
    column of the same collective within a node (nccl_all_reduce)."""
    found: list[tuple[str, dict[str, dict[str, Any]]]] = []
    if document.get("cluster"):
        found.append((CLUSTER_ROW, document["cluster"]))
    found += [(name, _checks(node)) for name, node in sorted(document["nodes"].items())]
    by_pair: dict[str, dict[str, dict[str, Any]]] = {}
    for link in document.get("links", []):
        by_pair.setdefault(_link_row(link), {})[f"nccl_{link['test']}"] = {
            "status": link["status"], "reason": link["reason"], "fraction": link["fraction"]}
    return found + sorted(by_pair.items())


def columns(table: list[tuple[str, dict[str, dict[str, Any]]]]) -> list[str]:
    """Every check that some row has, in the order they first appear."""
    seen: dict[str, None] = {}
    for _, checks in table:
        seen.update(dict.fromkeys(checks))
    return list(seen)


def cell(check: dict[str, Any] | None) -> str:
    if check is None:
        return "-"
    fraction = check.get("fraction")
    return check["status"] + (f" {fraction:.2f}" if isinstance(fraction, (int, float)) else "")


def reasons(table: list[tuple[str, dict[str, dict[str, Any]]]], status: str) -> list[str]:
    return [f"{row} {name}: {check.get('reason') or '(no reason given)'}" for row, checks in table
            for name, check in checks.items() if check["status"] == status]


def _actions(document: dict[str, Any]) -> list[str]:
    return [f"{a['node']}: {a['action']} ({'done' if a['done'] else 'NOT done'}): {a['reason']}"
            for a in document.get("actions", [])]


def markdown(document: dict[str, Any]) -> str:
    table = rows(document)
    names = columns(table)
    lines = [f"# Node validation {document['created']}: {document['status'].upper()}", "",
             "| node / link | " + " | ".join(names) + " |", "|" + "|".join("---" for _ in ["", *names]) + "|"]
    lines += ["| " + " | ".join([row] + [cell(checks.get(name)) for name in names]) + " |" for row, checks in table]
    for title, said in (("Failed", reasons(table, "fail")), ("Skipped", reasons(table, "skip")),
                        ("Actions", _actions(document))):
        if said:
            lines += ["", f"{title}:", *(f"- {line}" for line in said)]
    return "\n".join(lines) + "\n"


# Cell colours by status.
STYLE = ("table.node-validation{border-collapse:collapse}table.node-validation td,table.node-validation th"
         "{border:1px solid #ccc;padding:4px 8px}td.pass{background:#c8f0c8}td.fail{background:#f5b5b5}"
         "td.skip{background:#eee;color:#555}")


def html_section(document: dict[str, Any]) -> str:
    """A <section> with the table, each cell coloured by its status and titled with its reason, and the reasons of
    failed checks and the actions under it; every value escaped."""
    e = html.escape
    table = rows(document)
    names = columns(table)
    parts = [f"<section class='node-validation'><style>{STYLE}</style>",
             f"<h2>Node validation {e(document['created'])}: {e(document['status'].upper())}</h2>",
             "<table class='node-validation'><tr><th>node / link</th>"
             + "".join(f"<th>{e(name)}</th>" for name in names) + "</tr>"]
    for row, checks in table:
        cells = []
        for name in names:
            check = checks.get(name)
            status = check["status"] if check else ""
            title = f" title='{e(check.get('reason') or '')}'" if check else ""
            cells.append(f"<td class='{e(status)}'{title}>{e(cell(check))}</td>")
        parts.append(f"<tr><th>{e(row)}</th>" + "".join(cells) + "</tr>")
    parts.append("</table>")
    for title, said in (("Failed", reasons(table, "fail")), ("Actions", _actions(document))):
        if said:
            parts.append(f"<p>{title}:</p><ul>" + "".join(f"<li>{e(line)}</li>" for line in said) + "</ul>")
    return "\n".join([*parts, "</section>"]) + "\n"


def failed(document: dict[str, Any]) -> bool:
    return document["status"] == "fail" or any(
        check["status"] == "fail" for _, checks in rows(document) for check in checks.values())


def cmd_validation(args: argparse.Namespace) -> int:
    path = Path(args.path) if args.path else Path(args.results_dir) / LATEST
    document = results.load(results.NODE_VALIDATION, path)
    sys.stdout.write(markdown(document))
    if args.html:
        results.write_atomic(Path(args.html), "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Node "
                             f"validation</title></head><body>{html_section(document)}</body></html>\n")
    return 1 if args.strict and failed(document) else 0


def add_command(sub: Any) -> None:
    """`benchrunner validation`: the node validation summary as a table."""
    p = sub.add_parser("validation", allow_abbrev=False, help="show a node validation summary as a table (default: "
                       "<results-dir>/node-validation/latest.json)")
    p.add_argument("path", nargs="?", help="a node-validation JSON document")
    p.add_argument("--results-dir", default="results")
    p.add_argument("--html", metavar="FILE", help="also write the table as an HTML page")
    p.add_argument("--strict", action="store_true", help="exit 1 when any node, link or check failed")
    p.set_defaults(func=cmd_validation)

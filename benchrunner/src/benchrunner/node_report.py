"""The node validation summary as a table: a row per node and per link between two nodes, a column per check, each
cell its status and the fraction of the physical limit reached ("pass 0.93"); the verdict with how many checks ran and
how many were skipped ("PASS: 2 of 14 checks ran, 12 skipped"), and the reasons of failed and skipped checks and of
incomplete nodes under it. As text (markdown) for the terminal and as an HTML section, green and red."""

from __future__ import annotations

import argparse
import html
import re
import sys
from pathlib import Path
from typing import Any

from benchrunner import results

FOLDER = "node-validation"
LATEST_JSON = "latest.json"
LATEST = Path(FOLDER) / LATEST_JSON
# What the node_checks role names each summary: its UTC stamp (<dir>/<stamp>.json, tasks/summary.yml).
STAMP_JSON = re.compile(r"\d{8}T\d{6}Z\.json")
CLUSTER_ROW = "(cluster)"
# `--strict`'s exit status for a summary whose status is incomplete (nothing failed, but a node's expected hardware was
# never checked): apart from a failure's 1 and an unreadable summary's 2, as a monitoring check's UNKNOWN.
INCOMPLETE_EXIT = 3


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


def counts(document: dict[str, Any]) -> dict[str, int]:
    """How many checks the summary holds, ran (passed or failed) and skipped: the document's own (v4 on), counted here
    for older ones over the same checks (cluster, nodes, acceptance, links)."""
    if "counts" in document:
        return document["counts"]
    every = [*document["cluster"].values(), *document.get("links", [])]
    every += [check for node in document["nodes"].values() for check in _checks(node).values()]
    statuses = [check["status"] for check in every]
    passed, failed = statuses.count("pass"), statuses.count("fail")
    return {"total": len(statuses), "ran": passed + failed, "passed": passed, "failed": failed,
            "skipped": statuses.count("skip")}


def summary_status(document: dict[str, Any]) -> str:
    """pass, fail or incomplete; a summary before v4 that says pass over a failed check (none the role wrote) fails."""
    if document["status"] == "pass" and any(
            check["status"] == "fail" for _, checks in rows(document) for check in checks.values()):
        return "fail"
    return document["status"]


def verdict(document: dict[str, Any]) -> str:
    """"PASS: 2 of 14 checks ran, 12 skipped"; a failure says how many of those that ran failed."""
    tally = counts(document)
    failed = f" ({tally['failed']} failed)" if tally["failed"] else ""
    return (f"{summary_status(document).upper()}: {tally['ran']} of {tally['total']} checks ran{failed}, "
            f"{tally['skipped']} skipped")


def _incomplete(document: dict[str, Any]) -> list[str]:
    return [f"{name}: {node['verdict']['reason']}" for name, node in sorted(document["nodes"].items())
            if (node.get("verdict") or {}).get("status") == "incomplete"]


def notes(document: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The lists under the table, each with its title: failed checks, incomplete nodes, skipped checks, actions."""
    table = rows(document)
    found = (("Failed", reasons(table, "fail")), ("Incomplete", _incomplete(document)),
             ("Skipped", reasons(table, "skip")), ("Actions", _actions(document)))
    return [(title, said) for title, said in found if said]


def markdown(document: dict[str, Any]) -> str:
    table = rows(document)
    names = columns(table)
    lines = [f"# Node validation {document['created']}: {verdict(document)}", "",
             "| node / link | " + " | ".join(names) + " |", "|" + "|".join("---" for _ in ["", *names]) + "|"]
    lines += ["| " + " | ".join([row] + [cell(checks.get(name)) for name in names]) + " |" for row, checks in table]
    for title, said in notes(document):
        lines += ["", f"{title}:", *(f"- {line}" for line in said)]
    return "\n".join(lines) + "\n"


# Cell colours by status.
STYLE = ("table.node-validation{border-collapse:collapse}table.node-validation td,table.node-validation th"
         "{border:1px solid #ccc;padding:4px 8px}td.pass{background:#c8f0c8}td.fail{background:#f5b5b5}"
         "td.skip{background:#eee;color:#555}h2.incomplete{color:#a60}")


def html_section(document: dict[str, Any]) -> str:
    """A <section> with the verdict, the table, each cell coloured by its status and titled with its reason, and under
    it the same lists as the markdown (failed and skipped checks with their reasons, incomplete nodes, actions); every
    value escaped."""
    e = html.escape
    table = rows(document)
    names = columns(table)
    parts = [f"<section class='node-validation'><style>{STYLE}</style>",
             f"<h2 class='{e(summary_status(document))}'>Node validation {e(document['created'])}: {e(verdict(document))}</h2>",
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
    for title, said in notes(document):
        parts.append(f"<p>{title}:</p><ul>" + "".join(f"<li>{e(line)}</li>" for line in said) + "</ul>")
    return "\n".join([*parts, "</section>"]) + "\n"


def summary_path(given: Path) -> Path:
    """The summary a path names: a file as it is; a folder of summaries (results/node-validation) by its latest.json,
    or where that is missing its newest <stamp>.json."""
    if not given.is_dir():
        return given
    if (given / LATEST_JSON).exists():
        return given / LATEST_JSON
    stamped = sorted(path for path in given.iterdir() if STAMP_JSON.fullmatch(path.name))
    if not stamped:
        hint = f"; the results folder's summaries are in {given / FOLDER}" if (given / FOLDER).is_dir() else ""
        raise results.ResultError(f"{given}: no {LATEST_JSON} or <stamp>.json summary in this folder (the "
                                  f"node_checks role writes both){hint}")
    return stamped[-1]


def strict_exit(document: dict[str, Any]) -> int:
    return {"fail": 1, "incomplete": INCOMPLETE_EXIT}.get(summary_status(document), 0)


def cmd_validation(args: argparse.Namespace) -> int:
    path = summary_path(Path(args.path)) if args.path else Path(args.results_dir) / LATEST
    document = results.load(results.NODE_VALIDATION, path)
    sys.stdout.write(markdown(document))
    if args.html:
        results.write_atomic(Path(args.html), "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Node "
                             f"validation</title></head><body>{html_section(document)}</body></html>\n")
    return strict_exit(document) if args.strict else 0


def add_command(sub: Any) -> None:
    """`benchrunner validation`: the node validation summary as a table."""
    p = sub.add_parser("validation", allow_abbrev=False, help="show a node validation summary as a table (default: "
                       "<results-dir>/node-validation/latest.json)")
    p.add_argument("path", nargs="?", help="a node-validation JSON document, or a folder of them (results/node-validation: "
                   "its latest.json)")
    p.add_argument("--results-dir", default="results")
    p.add_argument("--html", metavar="FILE", help="also write the table as an HTML page")
    p.add_argument("--strict", action="store_true", help=f"exit 1 when any node, link or check failed, {INCOMPLETE_EXIT} "
                   "when the summary is incomplete (a node's expected hardware was not checked)")
    p.set_defaults(func=cmd_validation)

"""`ncclscope collect SYMPTOM`: what to collect for a support ticket (data/collect.json), as a person would paste it
into a job script and a ticket."""

from __future__ import annotations

from typing import Any

from ncclscope.common.data_files import data_json


def advice() -> dict[str, Any]:
    return dict(data_json("collect.json"))


def symptoms() -> list[str]:
    return list(advice()["symptoms"])


def collect_text(symptom: str) -> str:
    """The advice for one symptom: settings for the job, reports from the hosts, what the ticket should say."""
    data = advice()
    wanted = data["symptoms"][symptom]
    common = data["common"]
    lines = [f"What to collect for {wanted['title']}:", "", "1. Run the job with:"]
    settings = common["settings"] + wanted.get("settings", [])
    lines += [f"     {s['set']}\n       {s['why']} ({s['source']})" for s in settings]
    lines += ["", "2. From each host (and the one that failed first above all):"]
    lines += [f"     {r['run']}\n       {r['why']}" for r in common["reports"] + wanted.get("reports", [])]
    lines += ["", f"3. The ticket should say ({common['ticket_source']}):"]
    lines += [f"     - {item}" for item in common["ticket"]]
    lines += [
        "",
        "Then `ncclscope analyze <all of it>` reads every file at once, and `ncclscope bundle <all of it> -o "
        "ticket.tar.gz --redact` packs it with the report for the ticket.",
    ]
    return "\n".join(lines) + "\n"

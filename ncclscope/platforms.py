"""What hardware the inputs describe, and what it should reach (data/expected_busbw.json)."""

from __future__ import annotations

from ncclscope.model import BandwidthJudgement, Case, Platform


def detect_platform(case: Case) -> Platform:
    """GPU model, GPUs per host, hosts, NVLink links, NIC link layers, from every input."""
    return Platform()


def judge_bandwidth(case: Case, platform: Platform) -> list[BandwidthJudgement]:
    """One judgement per benchmark run, at its largest size, against the platform's expectation."""
    return []

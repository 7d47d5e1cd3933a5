"""Issue 44: `ncclscope collect SYMPTOM` says what to collect for a ticket, each setting with its source."""

from __future__ import annotations

import pytest

from ncclscope.cli.collect import advice, symptoms

from conftest import run_cli


@pytest.mark.parametrize("symptom", ["hang", "slow", "crash", "wrong"])
def test_each_symptom_names_settings_reports_and_the_ticket(symptom: str) -> None:
    done = run_cli("collect", symptom)
    text = done.stdout.decode()
    assert done.returncode == 0, done.stderr
    assert "NCCL_DEBUG=INFO" in text and "NCCL_DEBUG_FILE=nccl.%h.%p.log" in text
    assert "journalctl -k" in text and "The ticket should say" in text


def test_a_hang_asks_for_the_flight_recorder_and_a_slow_job_for_the_graph_subsystems() -> None:
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT=1" in run_cli("collect", "hang").stdout.decode()
    assert "NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,TUNING" in run_cli("collect", "slow").stdout.decode()


def test_an_unknown_symptom_is_a_usage_error() -> None:
    done = run_cli("collect", "everything")
    assert done.returncode == 2 and b"Traceback" not in done.stderr


def test_every_setting_has_a_source() -> None:
    data = advice()
    for name in symptoms():
        for setting in data["common"]["settings"] + data["symptoms"][name].get("settings", []):
            assert setting["source"] and setting["why"], setting

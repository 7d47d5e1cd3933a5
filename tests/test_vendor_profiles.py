"""Issue 44: the settings a cloud provider's image or plugin sets on purpose (data/vendor_profiles.json) are named
as the provider's, at info with their source; the same variable at another value is the user's own."""

from __future__ import annotations

from pathlib import Path

from ncclscope.diagnose.vendor_profiles import profiles

from conftest import REPO, findings_of

GIB = "fixtures/nccl/v2_25_gcp_gib_profile.log"


def test_a_gib_profile_is_one_info_finding_with_its_source() -> None:
    [found] = findings_of("ENV001", GIB)
    assert found.severity == "info"
    assert found.message.startswith("10 settings of Google Cloud's gIB NCCL profile (A3 Ultra, A4), set on purpose: ")
    assert "NCCL_NET_GDR_LEVEL=PIX" in found.message and "NCCL_IB_ADAPTIVE_ROUTING=1" in found.message
    assert "set_nccl_env.sh" in found.fix


def test_a_value_the_profile_does_not_set_is_the_users_own(tmp_path: Path) -> None:
    log = tmp_path / "gib.log"
    text = (
        (REPO / GIB)
        .read_text(encoding="utf-8")
        .replace("NCCL_NET_GDR_LEVEL set by environment to PIX", "NCCL_NET_GDR_LEVEL set by environment to LOC")
    )
    log.write_text(text, encoding="utf-8")
    found = findings_of("ENV001", log)
    own = [f for f in found if f.message.startswith("NCCL_NET_GDR_LEVEL=LOC")]
    assert len(own) == 1 and own[0].severity in ("warning", "error")
    assert any(f.message.startswith("9 settings of Google Cloud's gIB") for f in found)


def test_without_the_profiles_sign_the_same_settings_are_judged_as_before(tmp_path: Path) -> None:
    log = tmp_path / "ib.log"
    text = (REPO / GIB).read_text(encoding="utf-8")
    text = "\n".join(line for line in text.splitlines() if "gIB" not in line and "gib" not in line) + "\n"
    log.write_text(text, encoding="utf-8")
    severities = {f.message.split("=")[0]: f.severity for f in findings_of("ENV001", log)}
    assert severities["NCCL_IB_ADAPTIVE_ROUTING"] == "warning"


def test_the_aws_plugin_topology_file_is_the_plugins() -> None:
    [found] = findings_of("ENV001", "fixtures/nccl/efa_aws_ofi.log")
    assert found.severity == "info" and "aws-ofi-nccl plugin on AWS" in found.message


def test_every_profile_has_a_sign_and_a_source() -> None:
    for profile in profiles():
        signs = profile.signs
        assert signs.networks or signs.settings or signs.setting_prefixes, profile.key
        assert profile.source and profile.variables

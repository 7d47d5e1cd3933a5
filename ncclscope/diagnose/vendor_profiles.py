"""NCCL settings a cloud provider's image or network plugin sets on purpose (data/vendor_profiles.json): which
profile a case shows (the network its plugin gives, a variable's telltale value), and whether a setting is the
profile's own (ENV001 then says so, at info)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from ncclscope.common.data_files import data_path
from ncclscope.model import Case, EnvSetting


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Signs(_Data):
    networks: list[str] = []
    settings: dict[str, str] = {}  # a variable at this value
    setting_prefixes: dict[str, str] = {}  # a variable whose value begins so (a path of the image)


class Profile(_Data):
    key: str
    name: str
    signs: Signs
    variables: dict[str, str | None]  # the value the profile sets, or None for any
    source: str


class Profiles(_Data):
    about: str
    profiles: list[Profile]


@lru_cache(maxsize=1)
def profiles() -> list[Profile]:
    return Profiles.model_validate_json(data_path("vendor_profiles.json").read_bytes()).profiles


def shown_profiles(case: Case) -> list[Profile]:
    """The profiles whose signs the case shows."""
    networks = {p.network for p in case.processes if p.network}
    settings = {s.name: s.value.strip() for s in case.env}
    found = []
    for profile in profiles():
        signs = profile.signs
        if (
            networks & set(signs.networks)
            or any(settings.get(k) == v for k, v in signs.settings.items())
            or any(settings.get(k, "").startswith(v) for k, v in signs.setting_prefixes.items())
        ):
            found.append(profile)
    return found


def profile_of(case: Case, setting: EnvSetting) -> Profile | None:
    """The profile shown in the case that sets this variable at this value, or None (the user's own setting)."""
    for profile in shown_profiles(case):
        if setting.name in profile.variables:
            value = profile.variables[setting.name]
            if value is None or setting.value.strip().rstrip(".").lower() == value.lower():
                return profile
    return None

"""What an NVIDIA Xid, an NVSwitch SXid and a PCIe AER report mean (data/xid_catalog.json), typed and read once:
whether an Xid is a hardware fault, the application's own, or the fallout of an earlier one, and what to do."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

DATA_FILE = Path(__file__).parent.parent / "data" / "xid_catalog.json"


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Xid(_Data):
    code: int
    meaning: str
    cause: Literal["hardware", "application", "driver", "fallout", "maintenance", "recovery"]
    component: str
    action: str
    source: str


class SxidFacts(_Data):
    about: str
    fatal_action: str
    source: str


class AerFacts(_Data):
    about: str
    storm_reports: int  # this many corrected reports of one device ...
    storm_seconds: float  # ... within this long are a failing link, not noise
    action: str
    source: str


class XidCatalog(_Data):
    about: str
    sources: list[str]
    xids: list[Xid]
    sxid: SxidFacts
    aer: AerFacts


@lru_cache(maxsize=1)
def catalog() -> XidCatalog:
    return XidCatalog.model_validate_json(DATA_FILE.read_bytes())


@lru_cache(maxsize=256)
def xid(code: int | None) -> Xid | None:
    """The catalog's entry for an Xid code (None for one it does not list)."""
    return next((x for x in catalog().xids if x.code == code), None)

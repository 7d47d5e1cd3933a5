"""What an NVIDIA Xid, an NVSwitch SXid and a PCIe AER report mean (data/xid_catalog.json), typed and read once:
whether an Xid is a hardware fault, the application's own, or the fallout of an earlier one, and what to do."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ncclscope.common.data_files import data_path
from ncclscope.model import KernelEvent


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
    return XidCatalog.model_validate_json(data_path("xid_catalog.json").read_bytes())


@lru_cache(maxsize=256)
def xid(code: int | None) -> Xid | None:
    """The catalog's entry for an Xid code (None for one it does not list)."""
    return next((x for x in catalog().xids if x.code == code), None)


FALLEN_OFF_BUS = 79  # the Xid the driver's `fallen off the bus` message stands for when no Xid line is kept


def fault_xid(event: KernelEvent) -> int | None:
    """The hardware-fault Xid a kernel log line shows: its own, the one its Xid 45 names (`caused by previous
    Xid N`), or 79 for a GPU fallen off the bus; None for a line that shows no hardware fault."""
    if event.kind == "fallen_off_bus":
        return FALLEN_OFF_BUS
    if event.kind != "xid":
        return None
    entry = xid(event.xid)
    if entry is not None and entry.cause == "hardware":
        return entry.code
    cause = xid(event.caused_by) if entry is not None and entry.cause == "fallout" else None
    return cause.code if cause is not None and cause.cause == "hardware" else None


def fault_text(event: KernelEvent) -> str | None:
    """A kernel log line's hardware fault in a few words (`Xid 79 GPU has fallen off the bus`, `fatal SXid 20034`,
    `uncorrected PCIe error`), or None; corrected PCIe errors are a fault only as a storm (HW001 counts them)."""
    code = fault_xid(event)
    if code is not None:
        entry = xid(code)
        return f"Xid {code} {entry.meaning}" if entry else f"Xid {code}"
    if event.kind == "sxid" and (event.severity or "").lower() == "fatal":
        return f"fatal NVSwitch SXid {event.xid}"
    if event.kind == "aer" and not (event.severity or "").lower().startswith("corrected"):
        return "uncorrected PCIe error"
    return None

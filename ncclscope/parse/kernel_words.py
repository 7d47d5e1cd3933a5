"""The words a kernel log line about a GPU, an NVSwitch or PCIe holds (the NVIDIA driver's `NVRM:`, NVSwitch's
`SXid`, the kernel's AER reports): the kernel log reader's one test before its grammar, and the junk check's
sign that a block holds such lines. Apart from the reader because the byte-range workers load the junk check
before any model (parse/workers.py)."""

from __future__ import annotations

WORDS = ("NVRM:", "SXid", "AER:", "PCIe Bus Error")

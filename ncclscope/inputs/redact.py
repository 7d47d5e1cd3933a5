"""Redaction: hostnames, addresses, ids and user names replaced by consistent pseudonyms.

A `Redactor` first learns the hostnames of every input (NCCL record prefixes `host:pid:tid`,
nccl-tests device lines `on HOST device`, failure lines `HOST: Test ... failure`, the `hostname`
of nccl-tests -J JSON), then rewrites the inputs line by line, before they are parsed, so that
everything built from them is clean. The same original always gets the same pseudonym (`host-03`
everywhere, across all inputs). What the diagnosis needs stays: device names (mlx5_0, eth0),
versions (2.21.5+cuda12.4), numbers, bus ids and pointers.

The map from originals to pseudonyms stays in memory; `Redactor.write_map` writes it to a file of
its own on request. It is never put into a bundle.
"""

from __future__ import annotations

import gzip
import ipaddress
import json
import re
import shutil
import sys
import zlib
from collections.abc import Iterable
from pathlib import Path

from ncclscope.common.output_files import write_file
from ncclscope.inputs.opening import InputFile

KEEP_ENV_PREFIXES = ("NCCL_", "CUDA_", "UCX_", "FI_")

# ---------------------------------------------------------------------------------- learning

_HOST_CHARS = r"[A-Za-z0-9_.-]"
# host:pid:tid [dev] ... (the host is whatever precedes pid:tid, launcher prefixes excluded)
NCCL_PREFIX_RE = re.compile(r"([^\s:\[\]<>|`'\"(),]+):\d{1,10}:\d{1,10}[ \t]+\[\d{1,6}\]")
# host [dev] NCCL ... (pid:tid lost)
NCCL_BARE_HOST_RE = re.compile(r"(?:^|[\s\]>:])([A-Za-z][\w.-]*)[ \t]+\[\d{1,6}\][ \t]+NCCL ")
TESTS_DEVICE_RE = re.compile(r"\bRank\s+\d+\b.*?\bon\s+(\S+)\s+device\s+\d")
TESTS_FAILURE_RE = re.compile(r"([A-Za-z][\w.-]*):\s*Test (?:NCCL |CUDA )?failure")
TESTS_UNWIND_RE = re.compile(r"\.\.\s+(\S+)\s+pid\s+\d+:\s*Test failure")
JSON_HOSTNAME_RE = re.compile(r'"hostname"\s*:\s*"([^"]+)"')
NOT_HOSTS = frozenset({"NCCL", "INFO", "WARN", "TRACE", "", "-"})

# ---------------------------------------------------------------------------------- patterns

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
# four octets, not part of a longer dotted number (2.21.5, 1.2.3.4.5) nor glued to a word
IPV4_RE = re.compile(rf"(?<![\w.])(?<!\d\.){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)")
MAC_RE = re.compile(r"(?<![\w:])[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}(?![\w:])")
IPV6_CANDIDATE_RE = re.compile(r"(?<![\w:.])[0-9A-Fa-f:]*:[0-9A-Fa-f:]*(?:%[\w.]+)?(?![\w:]|\.\d)")
GUID_COLON_RE = re.compile(r"(?<![\w:])(?:0x)?[0-9A-Fa-f]{4}(?::[0-9A-Fa-f]{4}){3}(?![\w:])")
GUID_CONTEXT_RE = re.compile(r"(?i)(guid\W{0,3}(?:\w+\W{1,3})?)((?:0x)?[0-9a-f]{16})\b")
# NCCL's topology XML: a hash of the host's name (and boot id), the same on every rank of the host
# nvidia-smi: a GPU's UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx; MIG-... for an instance) and the board serial
GPU_UUID_RE = re.compile(r"\b(?:GPU|MIG)-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\b")
SERIAL_RE = re.compile(r"(Serial Number\s*:\s*)(\S+)")
HOST_HASH_RE = re.compile(r'(\bhost_hash=")([^"]+)(")')
HOME_RE = re.compile(r"(/home/|/Users/)([^/\s\"':,;]+)")
USER_ASSIGN_RE = re.compile(r"\b(USER|LOGNAME|USERNAME)=([^\s\"',;]+)")
CONTAINER_RE = re.compile(r"(?<![\w-])(?:[0-9a-f]{64}|[0-9a-f]{12})(?![\w-])")
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
POD_RE = re.compile(
    rf"(?<![\w-])(?:[a-z0-9][a-z0-9-]*-{UUID}(?:-[a-z]+-\d+)?"  # job-<uuid>-worker-0
    r"|[a-z][a-z0-9-]*-(?=[a-z0-9]{0,9}\d)[a-z0-9]{8,10}-[bcdfghjklmnpqrstvwxz2456789]{5})(?![\w-])"
)
PSEUDONYM_RE = re.compile(r"^(?:host|ip|ipv6|mac|guid|user|container|pod|uuid|serial)-\d{2,}$")


class Redactor:
    """Consistent pseudonyms for one invocation: the same original gets the same name everywhere."""

    def __init__(self) -> None:
        self.map: dict[str, dict[str, str]] = {}  # kind -> original -> pseudonym
        self.hosts: set[str] = set()
        self._host_re: re.Pattern[str] | None = None

    # ------------------------------------------------------------------------- pseudonyms
    def pseudonym(self, kind: str, original: str) -> str:
        names = self.map.setdefault(kind, {})
        if original not in names:
            names[original] = f"{kind}-{len(names) + 1:02d}"
        return names[original]

    def mapping(self) -> dict[str, str]:
        """original -> pseudonym, every kind together."""
        return {orig: pseudo for names in self.map.values() for orig, pseudo in names.items()}

    def write_map(self, path: str | Path) -> None:
        """The map as JSON (pseudonym kinds -> original -> pseudonym), to a file of its own."""
        text = json.dumps(self.map, indent=2, sort_keys=True) + "\n"
        write_file(Path(path), text.encode())

    # ------------------------------------------------------------------------- learning
    def add_host(self, name: str) -> None:
        name = name.strip()
        if name in NOT_HOSTS or name.isdigit() or PSEUDONYM_RE.match(name) or len(name) > 253:
            return
        if name not in self.hosts:
            self.hosts.add(name)
            self._host_re = None
            self.pseudonym("host", name)
            short = name.split(".", 1)[0]
            if short != name and not IPV4_RE.fullmatch(name) and not short.isdigit():
                self.hosts.add(short)
                self.map["host"].setdefault(short, self.map["host"][name])

    def learn_text(self, text: str) -> None:
        for line in text.splitlines():
            self.learn_line(line)

    def learn_line(self, line: str) -> None:
        if ":" in line:
            for match in NCCL_PREFIX_RE.finditer(line):
                self.add_host(_strip_launcher(match.group(1)))
            if "failure" in line:
                for regex in (TESTS_FAILURE_RE, TESTS_UNWIND_RE):
                    for match in regex.finditer(line):
                        self.add_host(match.group(1))
            if '"hostname"' in line:
                for match in JSON_HOSTNAME_RE.finditer(line):
                    self.add_host(match.group(1))
        if "NCCL " in line and "[" in line:
            for match in NCCL_BARE_HOST_RE.finditer(line):
                self.add_host(match.group(1))
        if " device " in line:
            for match in TESTS_DEVICE_RE.finditer(line):
                self.add_host(match.group(1))

    def learn_json(self, data: object) -> None:
        if isinstance(data, dict):
            for key, value in data.items():
                if key == "hostname" and isinstance(value, str):
                    self.add_host(value)
                else:
                    self.learn_json(value)
        elif isinstance(data, list):
            for value in data:
                self.learn_json(value)

    def learn_file(self, item: InputFile) -> None:
        for line in _read_lines(item):
            self.learn_line(line)

    # ------------------------------------------------------------------------- rewriting
    def redact_text(self, text: str) -> str:
        """Every line of `text` redacted; line breaks (and so line numbers) are kept."""
        return "".join(self.redact_line(line) for line in text.splitlines(keepends=True))

    def redact_line(self, line: str) -> str:
        line = self._hosts_sub(line)
        if ":" in line:
            line = MAC_RE.sub(lambda m: self.pseudonym("mac", m.group(0).lower()), line)
            line = IPV6_CANDIDATE_RE.sub(self._ipv6, line)
            line = GUID_COLON_RE.sub(lambda m: self.pseudonym("guid", m.group(0).lower()), line)
        if "." in line:
            line = IPV4_RE.sub(lambda m: self.pseudonym("ip", m.group(0)), line)
        if "uid" in line or "UID" in line:
            line = GUID_CONTEXT_RE.sub(
                lambda m: m.group(1) + self.pseudonym("guid", m.group(2).lower().removeprefix("0x")), line
            )
        if "GPU-" in line or "MIG-" in line:
            line = GPU_UUID_RE.sub(lambda m: self.pseudonym("uuid", m.group(0).lower()), line)
        if "Serial Number" in line:
            line = SERIAL_RE.sub(
                lambda m: m.group(0) if m.group(2) == "N/A" else m.group(1) + self.pseudonym("serial", m.group(2)), line
            )
        if "host_hash" in line:
            line = HOST_HASH_RE.sub(lambda m: m.group(1) + self.pseudonym("host", m.group(2)) + m.group(3), line)
        if "/home/" in line or "/Users/" in line:
            line = HOME_RE.sub(lambda m: m.group(1) + self.pseudonym("user", m.group(2)), line)
        if "=" in line:
            line = USER_ASSIGN_RE.sub(lambda m: f"{m.group(1)}={self.pseudonym('user', m.group(2))}", line)
        line = POD_RE.sub(lambda m: self.pseudonym("pod", m.group(0)), line)
        return CONTAINER_RE.sub(self._container, line)

    def redact_path(self, name: str) -> str:
        """A file or member name, redacted like a line (nccl.HOST.1234.log -> nccl.host-01.1234.log)."""
        return self.redact_line(name)

    def _hosts_sub(self, line: str) -> str:
        if not self.hosts:
            return line
        if self._host_re is None:
            names = sorted(self.hosts, key=lambda h: (-len(h), h))
            alternation = "|".join(re.escape(h) for h in names)
            # a hostname glued after a number ('-1gpu-f03: Test NCCL failure') is still a hostname
            self._host_re = re.compile(rf"(?<![A-Za-z_-])(?:{alternation})(?![A-Za-z0-9_-])")
        table = self.map["host"]
        return self._host_re.sub(lambda m: self._host_at(m, table), line)

    def _host_at(self, match: re.Match[str], table: dict[str, str]) -> str:
        name = match.group(0)
        start = match.start()
        if start and match.string[start - 1].isdigit() and not name[0].isalpha():
            return name  # '12node' glued to digits: only names starting with a letter
        return table[name]

    def _ipv6(self, match: re.Match[str]) -> str:
        text = match.group(0)
        address, _, zone = text.partition("%")
        if address.count(":") < 2:
            return text
        try:
            ipaddress.IPv6Address(address)
        except ValueError:
            return text
        groups = [g for g in address.split(":") if g]
        if len(groups) < 2 and not zone and address not in ("::1",):
            return text  # 'c10::' and such: a C++ namespace, not an address
        pseudo = self.pseudonym("ipv6", address.lower())
        return f"{pseudo}%{zone}" if zone else pseudo

    def _container(self, match: re.Match[str]) -> str:
        text = match.group(0)
        if len(text) == 12 and (text.isdigit() or text.isalpha()):
            return text  # a number or a word, not an id
        return self.pseudonym("container", text)

    # ------------------------------------------------------------------------- JSON
    def redact_json_data(self, data: object) -> object:
        """nccl-tests -J data: env entries other than NCCL_*/CUDA_*/UCX_*/FI_* dropped, strings redacted."""
        if isinstance(data, dict):
            out: dict[str, object] = {}
            for key, value in data.items():
                if key == "env" and isinstance(value, list):
                    value = [v for v in value if isinstance(v, str) and v.startswith(KEEP_ENV_PREFIXES)]
                elif key == "env" and isinstance(value, dict):
                    value = {k: v for k, v in value.items() if str(k).startswith(KEEP_ENV_PREFIXES)}
                if key == "hostname" and isinstance(value, str):
                    self.add_host(value)
                out[key] = self.redact_json_data(value)
            return out
        if isinstance(data, list):
            return [self.redact_json_data(v) for v in data]
        if isinstance(data, str):
            return self.redact_line(data)
        return data

    def redact_json_text(self, text: str) -> str | None:
        """Redacted JSON text, or None when `text` is not JSON."""
        try:
            data = json.loads(text)
        except ValueError:
            return None
        self.learn_json(data)
        indent = 2 if "\n" in text.strip() else None
        return json.dumps(self.redact_json_data(data), indent=indent) + ("\n" if text.endswith("\n") else "")

    # ------------------------------------------------------------------------- whole inputs
    def redact_bytes(self, data: bytes, name: str = "") -> bytes:
        """One input's bytes redacted (JSON when it is JSON, else line by line). Undecodable bytes pass."""
        text = data.decode("utf-8", "surrogateescape")
        if name.endswith(".json") or text.lstrip().startswith("{"):
            redacted = self.redact_json_text(text)
            if redacted is not None:
                return redacted.encode("utf-8", "surrogateescape")
        return self.redact_text(text).encode("utf-8", "surrogateescape")


def _strip_launcher(host: str) -> str:
    """'[1,0]<stdout>:cn-a11' was cut at '>' already; a leading 'rank0]:' or '0:' part is dropped."""
    return host.rsplit(":", 1)[-1] if ":" in host else host


def _read_lines(item: InputFile) -> Iterable[str]:
    data = read_input_bytes(item)
    return data.decode("utf-8", "surrogateescape").splitlines()


def read_input_bytes(item: InputFile) -> bytes:
    """The whole (decompressed) content of one input; stdin or a pipe is read once and kept for `item`."""
    cached = _STREAM_CACHE.get(id(item))
    if cached is not None:
        return cached
    if item.is_stream:
        try:
            if item.is_stdin:
                data = sys.stdin.buffer.read()
            else:
                with open(item.path, "rb") as stream:
                    data = stream.read()
        except OSError:
            data = b""
        _STREAM_CACHE[id(item)] = data
        return data
    try:
        if item.path.endswith(".gz"):
            with gzip.open(item.path, "rb") as handle:
                return _read_gzip(handle)
        return Path(item.path).read_bytes()
    except OSError:
        return b""


_STREAM_CACHE: dict[int, bytes] = {}


def _read_gzip(handle: gzip.GzipFile) -> bytes:
    parts = []
    while True:
        try:
            piece = handle.read1(1024 * 1024)
        except (EOFError, zlib.error, gzip.BadGzipFile, OSError):
            break  # a cut .gz: what came before is redacted, the reader reports the damage on the copy
        if not piece:
            break
        parts.append(piece)
    return b"".join(parts)


# -------------------------------------------------------------------------------- pipeline


def redact_inputs(
    files: list[InputFile], workdir: Path, redactor: Redactor | None = None
) -> tuple[list[InputFile], Redactor]:
    """Redacted copies of `files` under `workdir`, displayed under redacted names.

    Two passes: every input is read once to learn its hostnames, then each is rewritten. A `.gz`
    input is decompressed (its copy drops the suffix); the line numbers stay those of the original.
    """
    redactor = redactor or Redactor()
    contents = []
    for item in files:
        data = read_input_bytes(item)
        contents.append(data)
        text = data.decode("utf-8", "surrogateescape")
        if item.path.endswith(".json") or text.lstrip().startswith("{"):
            try:
                redactor.learn_json(json.loads(text))
                continue
            except ValueError:
                pass
        redactor.learn_text(text)
    copies: list[InputFile] = []
    for index, (item, data) in enumerate(zip(files, contents, strict=True)):
        name = Path(item.path).name if not item.is_stdin else "stdin"
        if name.endswith(".gz") and not name.endswith((".tar.gz", ".tgz")):
            name = name[:-3]
        target = workdir / f"{index:04d}" / redactor.redact_path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        if b"\x00" in data[:8192]:
            shutil.copyfile(item.path, target) if not item.is_stream else target.write_bytes(data)
        else:
            target.write_bytes(redactor.redact_bytes(data, name))
        display = redactor.redact_path(item.display)
        if display.endswith(".gz") and not display.endswith((".tar.gz", ".tgz")):
            display = display[:-3]
        copies.append(InputFile(str(target), display))
    return copies, redactor

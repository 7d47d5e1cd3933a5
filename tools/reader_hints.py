"""Write ncclscope/data/reader_hints.json: what the readers of other lines look for (other_lines.READERS' HINT_WORDS
and HINT_START, joined by line_hints.other_hints), written down so that a byte range's worker tests lines without
loading the readers and the models they build (issue 42). Run it after changing a reader's hints:

    python tools/reader_hints.py > ncclscope/data/reader_hints.json

tests/test_cheap_test.py fails, naming this command, while the file and the readers disagree.
"""

from __future__ import annotations

import json
import sys

from ncclscope.parse.line_hints import other_hints
from ncclscope.parse.other_lines import READERS


def main() -> None:
    hints = other_hints(READERS)
    data = {
        "about": "Derived, not knowledge: the readers' hints (HINT_WORDS, HINT_START) as line_hints.other_hints "
        "joins them, for workers that have not loaded the readers. Made by tools/reader_hints.py; bytes as Latin-1.",
        "words": [word.decode("latin-1") for word in hints.words],
        "starts": hints.starts.decode("latin-1"),
    }
    json.dump(data, sys.stdout, indent=2, ensure_ascii=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

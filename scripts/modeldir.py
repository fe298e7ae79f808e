"""Writing a generated model directory so that an interrupted run never leaves half of one."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Callable


def build_beside(directory: Path, build: Callable[[Path], dict], marker: str, label: str) -> None:
    """Build into `<directory>.tmp` (`build` returns the marker's content), then swap it in."""
    start = time.monotonic()
    tmp = directory.with_name(directory.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    content = build(tmp)
    (tmp / marker).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n")
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)
    size = sum(f.stat().st_size for f in directory.iterdir()) / 1e6
    print(f"{label}: wrote {directory} ({size:.1f} MB) in {time.monotonic() - start:.1f} s")

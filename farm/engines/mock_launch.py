"""`guidellm mock-server` with torch imported only if something uses it.

    python mock_launch.py mock-server ARGS...      # what `guidellm mock-server ARGS...` runs

The mock-server's tokenizer imports transformers, and transformers imports torch whenever torch is
installed (`modeling_rope_utils`; transformers 5 has no switch against it, USE_TORCH included),
though the mock-server never touches it: on 2 cores that import was 1.3 s of a 2.8 s start, every
mock trial. This runs guidellm's own command line in this interpreter, the same code the
`guidellm` script runs, with a stand-in for torch in `sys.modules`: the first read of any of its
attributes (or an import of one of its submodules) imports the real torch and hands it over, so
anything that does use torch gets it, later.

A file run by path with the standard library only (and guidellm, once started): the engine
process runs it with farm's interpreter, whatever `farm` is importable as there.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from pathlib import Path

_loading = threading.RLock()


class _Deferred(types.ModuleType):
    """Stands in for a module until one of its attributes is read (`__getattr__` runs only for what
    the stand-in lacks; it holds the spec and file, which the import system and `inspect` read)."""

    def __getattr__(self, attr: str):
        with _loading:
            real = sys.modules.get(self.__name__)
            if real is None or real is self:
                del sys.modules[self.__name__]
                real = importlib.import_module(self.__name__)
        return getattr(real, attr)


def defer(name: str) -> bool:
    """Put a stand-in for module `name` in `sys.modules`; False where it is imported already or
    not installed (then nothing changes: `import name` does what it always did)."""
    if name in sys.modules:
        return False
    spec = importlib.util.find_spec(name)
    if spec is None:
        return False
    stand_in = _Deferred(name)
    # what `importlib.util.find_spec` (transformers' `is_torch_available`) and `inspect` read
    stand_in.__spec__, stand_in.__loader__, stand_in.__file__ = spec, spec.loader, spec.origin
    sys.modules[name] = stand_in
    return True


def main() -> int:
    defer("torch")
    from guidellm.__main__ import cli

    # guidellm's usage errors name the program as the `guidellm` script would
    sys.argv[0] = str(Path(sys.executable).with_name("guidellm"))
    return cli()


if __name__ == "__main__":
    sys.exit(main())

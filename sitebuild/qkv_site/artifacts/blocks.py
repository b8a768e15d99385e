"""A snippet session: its blocks run in one namespace, and the state they leave is digested.

The blocks of one ``session="..."`` on a page share their globals, so they run in order in
one forked child of a worker process (:meth:`~qkv_site.artifacts.runner.Runner.session_worker`,
the line ``{"session": true}`` of :mod:`qkv_site.artifacts.worker`): each block
is a job of the task :func:`block`, which runs its code in the session's namespace, writes
what it printed to ``out/output.txt`` and the digest of the state it leaves to
``out/state.txt`` (empty when that cannot be hashed). Like markdown-exec, a block shows only
its own ``print()``.

A block's printed output depends on its code and on the state it starts from: the names
the earlier blocks of its session defined, and a little process-wide state that a block can
change without naming it (NumPy's global random generator and its print options, Python's
``random``; an unseeded generator that no block has used counts as untouched).
:func:`state_digest` hashes all of that, so a block's output can be cached by (state it
starts from, its code): an edit that leaves the state as it was (a comment, the wording of a
print, the format of a number) reruns that block only, not every block after it. Measured
(issue 27, ``benchmarks/serve_edits.py``, 2 runs of 3 edits each way, a 2-core machine at
load 15-18): a print added to the first of the seven blocks of why-scale shows in 7.9-12.3 s
with the digest and 17.3-32.8 s without it (the six blocks after it run again).

A value is hashed by pickling it into the hash, without keeping the bytes, except:

- a module, by its name; a function or class of an installed or project module, by its
  module and name (its source is one of the files the cache entry depends on already);
- a function defined by a block, by its compiled code, its defaults and its closure.

Worker processes run with ``PYTHONHASHSEED=0`` (see the runner), so a set of strings
pickles in the same order in every process.

When the state cannot be hashed (a value that does not pickle, or more than ``BUDGET``
bytes of arrays, such as a whole model's weights) the digest is ``None``, and the cache
falls back to keying each block by all the code run before it.

What this cannot see: other process-wide state a block changes (an attribute of an
imported module, the environment, files). The test suite's clean build (no cache at all) is
compared byte for byte with the cached one, so a difference would not go unnoticed.
"""

from __future__ import annotations

import functools
import hashlib
import io
import linecache
import pickle
import sys
import types
from pathlib import Path

BUDGET = 64 * 2**20  # bytes of array data hashed per block at most (a block's own cost)
SNIPPET_MODULE = "__snippet__"


class _Unhashable(Exception):
    pass


class _HashSink:
    def __init__(self):
        self.hash = hashlib.sha256()

    def write(self, data) -> int:  # bytes, or an array's own buffer (protocol 5)
        self.hash.update(data)
        return memoryview(data).nbytes


def _block_function(*parts):  # a marker in the pickle stream; never called
    raise NotImplementedError


def _code_parts(code: types.CodeType) -> tuple:
    """What a compiled function is made of, nested functions included. (Not marshal: its
    output depends on reference counts, so the same code could hash two ways.)"""
    consts = tuple(_code_parts(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return (
        code.co_code,
        consts,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_argcount,
        code.co_kwonlyargcount,
        code.co_flags,
    )


class _Digester(pickle.Pickler):
    def __init__(self, sink):
        super().__init__(sink, protocol=5)
        self.budget = BUDGET

    def reducer_override(self, obj):
        if isinstance(obj, types.ModuleType):
            return str, (f"module {obj.__name__}",)
        if isinstance(obj, types.FunctionType) and obj.__module__ == SNIPPET_MODULE:
            cells = tuple(c.cell_contents for c in obj.__closure__ or ())
            return _block_function, (_code_parts(obj.__code__), obj.__defaults__, obj.__kwdefaults__, cells)
        if isinstance(obj, type) and obj.__module__ == SNIPPET_MODULE:
            raise _Unhashable(f"class {obj.__qualname__} defined in a block")
        nbytes = getattr(obj, "nbytes", None)
        if isinstance(nbytes, int) and type(obj).__module__ == "numpy":
            self.budget -= nbytes
            if self.budget < 0:
                raise _Unhashable("more than BUDGET bytes of arrays")
        return NotImplemented  # pickle as usual (functions of modules: by reference)


_UNTOUCHED: dict[str, bytes] = {}  # each global generator's state when the session began


def _generators() -> dict:
    import random

    import numpy

    # the legacy global generator is the state in question: a block may call np.random.rand
    return {"random": random.getstate(), "numpy": numpy.random.get_state(legacy=False)}  # noqa: NPY002


def note_untouched_generators() -> None:
    """Remember the global random generators' states as a session begins. Unseeded, they
    start from the operating system's entropy, a different state in every process; until a
    block seeds or draws from one, it is digested as untouched."""
    _UNTOUCHED.update({name: pickle.dumps(value) for name, value in _generators().items()})


def _process_state() -> list:
    """The process-wide state a block may change without naming it."""
    import numpy

    found = [
        value if pickle.dumps(value) != _UNTOUCHED.get(name) else f"{name}: untouched"
        for name, value in _generators().items()
    ]
    found.append(sorted(numpy.get_printoptions().items(), key=lambda item: item[0]))
    return found


def state_digest(namespace: dict) -> str | None:
    """SHA-256 of the names in ``namespace`` (dunder names and ``print`` aside) and their
    values, and of the process-wide state above; None when it cannot be hashed."""
    names = sorted(n for n in namespace if not n.startswith("__") and n != "print")
    sink = _HashSink()
    try:
        _Digester(sink).dump([[(n, namespace[n]) for n in names], _process_state()])
    except (_Unhashable, pickle.PicklingError, TypeError, AttributeError, ValueError):
        return None
    return sink.hash.hexdigest()


# ---- running blocks ---------------------------------------------------------------------

STATE = "state.txt"
OUTPUT = "output.txt"
_NAMESPACE: dict = {}  # the session's globals: this worker runs one session


def _print(buffer, *texts, sep=" ", end="\n", **_):
    buffer.write(sep.join(str(text) for text in texts) + end)


def run_block(namespace: dict, number: int, code: str) -> str:
    """Run one block in ``namespace``; what it printed."""
    printed = io.StringIO()
    namespace["print"] = functools.partial(_print, printed)
    filename = f"<code block {number}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    exec(compile(code, filename, "exec"), namespace)
    return printed.getvalue()


def block(out: Path, code: str, number: int) -> None:
    """The task of one block (block ``number`` of its session): run ``code`` in the
    session's namespace; write what it printed and the digest of the state it leaves."""
    if not _NAMESPACE:  # the session's first block
        note_untouched_generators()
        sys.modules[SNIPPET_MODULE] = types.ModuleType(SNIPPET_MODULE)  # dataclasses look it up
        _NAMESPACE["__name__"] = SNIPPET_MODULE
    printed = run_block(_NAMESPACE, number, code)
    (out / OUTPUT).write_text(printed, encoding="utf-8")
    (out / STATE).write_text(state_digest(_NAMESPACE) or "", encoding="utf-8")

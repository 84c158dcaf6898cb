"""End a finished process without the interpreter's teardown.

A sweep's worker has closed its engine, ended its process group and sent its last message before it exits; the
sweep itself has written and synced every file. What is left for Python's own exit is tearing down the modules of
torch, transformers, vLLM, pandas and matplotlib, object by object: 0.9 s for an hf worker and 1.7 s for a vLLM one
on this project's 2-core CPU machine, paid by every entry and every sweep (docs/measurement.md, "Where a sweep's
time goes"). That work frees memory the operating system takes back anyway, so it is skipped. What a normal exit
does that matters is kept, in its order: the threads the program started finish, the `atexit` handlers run (they
remove temporary folders and unregister shared memory), logging's, the standard streams' and the C library's
buffers are written.
"""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import sys
import threading
from typing import NoReturn, Optional


def exit_now(code: Optional[int]) -> NoReturn:
    """Exit with `code` (None: 0, as `sys.exit`) once the program's own threads have ended, without tearing its
    modules down."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()  # what the interpreter's exit waits for first
    atexit._run_exitfuncs()  # CPython's own call at exit; public `atexit` has no other way to run them
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be written to it
            pass
    try:
        ctypes.CDLL(None).fflush(None)  # the C library's buffers too: what engines' native code printed
    except (OSError, AttributeError):  # no C library to load by that name: nothing of it to flush
        pass
    os._exit(0 if code is None else code)

"""The `verity` command's entry point (pyproject's console script and `python -m verity`).

Ctrl-C prints `interrupted` and exits 130, never a traceback and never a crash. A KeyboardInterrupt raised while a
module is still being imported leaves it half made, and torch, numpy or web3 then fail in ways no `except` can
tidy: a C++ abort through pybind11 (exit -6), `numpy has no attribute ndarray` (exit 1), a segfault (exit -11 in
CI). So a Ctrl-C that lands inside an import is put off: a helper thread asks again 50 ms later, until the
interpreter is out of every import, and only then is it Python's KeyboardInterrupt. Once the command is over, a
Ctrl-C ends the process at once (atexit callbacks would print its traceback). The handler is installed here
and not when a library or a test imports `verity.cli`: there a Ctrl-C stays Python's own (pytest tears its
services down on it).
"""
import os
import signal
import threading
import _thread

ASK_AGAIN_S = 0.05


def _inside_import(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _ask_again() -> None:
    threading.Event().wait(ASK_AGAIN_S)
    _thread.interrupt_main(signal.SIGINT)  # no real signal: nothing in C sees an EINTR


def interrupt_outside_imports(signum, frame) -> None:
    """SIGINT handler: KeyboardInterrupt, unless the main thread is importing; then the same question again soon."""
    if _inside_import(frame):
        threading.Thread(target=_ask_again, name="ctrl-c-after-import", daemon=True).start()
        return
    raise KeyboardInterrupt


def exit_interrupted(signum=None, frame=None) -> None:
    """Say `interrupted` and end now (130): for a Ctrl-C once the command is over and the interpreter shuts down,
    where a KeyboardInterrupt would print an atexit callback's traceback."""
    os.write(2, b"interrupted\n")  # unbuffered: os._exit flushes nothing
    os._exit(130)


def main() -> None:
    signal.signal(signal.SIGINT, interrupt_outside_imports)
    try:
        from verity.cli import run
    except KeyboardInterrupt:  # asked again the moment the imports ended, before run()'s own guard
        exit_interrupted()
    run()

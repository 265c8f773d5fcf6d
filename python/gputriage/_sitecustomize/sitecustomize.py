# Put on PYTHONPATH by `gputriage record --python`: turns on zero-code step
# markers in this Python process, then runs the sitecustomize it shadows (Debian
# and virtual environments ship their own).
import importlib
import os
import sys


def _gputriage_start():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from gputriage import zero_code
        zero_code.install()
    except Exception as e:  # the job runs regardless
        sys.stderr.write("gputriage: zero-code markers are off in this process: cannot load the gputriage package "
                         f"({e!r}); pip install ./python from the gputriage source tree, or set GPUTRIAGE_PYTHON_PATH\n")
    # Chain to the next sitecustomize on the path, as if this one were not there.
    del sys.modules["sitecustomize"]
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved


_gputriage_start()

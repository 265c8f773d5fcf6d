# Put on PYTHONPATH by `gputriage record --python`: turns on zero-code step
# markers in this Python process, then runs the sitecustomize it shadows (Debian
# and virtual environments ship their own).
import importlib
import importlib.util
import os
import sys


def _load_gputriage(package_dir):
    """The gputriage package this file belongs to, loaded from its own directory.
    Only this directory is on PYTHONPATH, not the one holding the package (an
    installed wheel's site-packages): the job sees none of that environment's
    other packages, and the recorder's own package wins over any other copy."""
    if "gputriage" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location("gputriage", os.path.join(package_dir, "__init__.py"),
                                                  submodule_search_locations=[package_dir])
    module = importlib.util.module_from_spec(spec)
    sys.modules["gputriage"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules["gputriage"]
        raise


def _gputriage_start():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        _load_gputriage(os.path.dirname(here))
        from gputriage import zero_code
        zero_code.install()
    except Exception as e:  # the job runs regardless
        sys.stderr.write("gputriage: zero-code markers are off in this process: cannot load the gputriage package "
                         f"({e!r})\n")
    # Chain to the next sitecustomize on the path, as if this one were not there.
    # The import system pops sys.modules["sitecustomize"] after this file runs,
    # and chaining sitecustomizes (ours, and other tools') remove or replace that
    # entry: it is put back at the end, or Python prints "Error in sitecustomize
    # ... KeyError" on every run.
    ours = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        importlib.import_module("sitecustomize")
    except KeyError as e:
        # Theirs ran and took itself out of sys.modules (chaining tools do), so the
        # import system's final pop failed: it did run.
        if e.args != ("sitecustomize",):
            sys.stderr.write(f"gputriage: the environment's own sitecustomize failed: {e!r}\n")
    except ImportError as e:
        if e.name != "sitecustomize":  # theirs exists but failed: say so, as Python would
            sys.stderr.write(f"gputriage: the environment's own sitecustomize failed: {e!r}\n")
    except Exception as e:  # noqa: BLE001 - theirs is not ours to fix; the job runs
        sys.stderr.write(f"gputriage: the environment's own sitecustomize failed: {e!r}\n")
    finally:
        sys.path[:] = saved
        theirs = sys.modules.get("sitecustomize")
        if ours is not None:
            if theirs is not None and theirs is not ours:
                ours.chained = theirs  # reachable, as `import sitecustomize` now gives ours
            sys.modules["sitecustomize"] = ours

_gputriage_start()

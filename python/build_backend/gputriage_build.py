"""PEP 517 build backend for the gputriage Python package, kept in the tree.

Builds gputriage._markers with CMake (python/CMakeLists.txt: CPython's limited
API, so the module serves CPython 3.8 and later) and packs the wheel with the
standard library alone: `pip install ./python` works offline, with no
setuptools or wheel to fetch into pip's isolated build environment. That wheel
holds the Python package only; scripts/build_wheel.sh packs the product's wheel
(the package with the CLI inside) with write_wheel() below.
"""
import base64
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
_NAME = "gputriage"


def _version():
    with open(os.path.join(_HERE, "..", "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(gputriage VERSION ([0-9.]+)", f.read())
    if m is None:
        raise RuntimeError("gputriage build: no 'project(gputriage VERSION x.y.z)' in CMakeLists.txt")
    return m.group(1)


def _tag():
    # The stable ABI of 3.8 (python/src/markers_module.cc), on this machine's platform.
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"cp38-abi3-{platform}"


def _dist_info():
    return f"{_NAME}-{_version()}.dist-info"


_SUMMARY = "Step markers for gputriage: time data loading against compute from inside the training loop"


def _metadata_files(tag=None, summary=_SUMMARY, description="", entry_points=None):
    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {_NAME}\n"
        f"Version: {_version()}\n"
        f"Summary: {summary}\n"
        "Requires-Python: >=3.8\n"
    )
    if description:
        metadata += "Description-Content-Type: text/markdown\n\n" + description
    wheel = f"Wheel-Version: 1.0\nGenerator: gputriage_build\nRoot-Is-Purelib: false\nTag: {tag or _tag()}\n"
    files = {"METADATA": metadata, "WHEEL": wheel}
    if entry_points:
        files["entry_points.txt"] = "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    return files


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    target = os.path.join(metadata_directory, _dist_info())
    os.makedirs(target, exist_ok=True)
    for name, text in _metadata_files().items():
        with open(os.path.join(target, name), "w", encoding="utf-8") as f:
            f.write(text)
    return _dist_info()


def _build_extension(build_dir):
    if shutil.which("cmake") is None:
        raise RuntimeError("gputriage build: 'cmake' not found (Debian: apt-get install cmake pybind11-dev python3-dev)")
    configure = ["cmake", "-S", _HERE, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                 f"-DPython_EXECUTABLE={sys.executable}"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    subprocess.run(configure, check=True, stdout=sys.stderr)
    subprocess.run(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 1)], check=True, stdout=sys.stderr)
    built = os.path.join(build_dir, "_markers.abi3.so")
    if not os.path.exists(built):
        raise RuntimeError(f"gputriage build: CMake did not produce {built}")
    return built, "_markers.abi3.so"


def package_sources():
    """The package's Python files: path in the wheel -> bytes."""
    files = {}
    package = os.path.join(_HERE, _NAME)
    for root, dirs, names in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(root, name)
                with open(path, "rb") as f:
                    files[os.path.relpath(path, _HERE).replace(os.sep, "/")] = f.read()
    return files


def write_wheel(wheel_directory, files, tag, executables=(), **metadata):
    """Writes {name}-{version}-{tag}.whl from `files` (path -> bytes) with its
    dist-info (metadata: summary, description, entry_points) and RECORD; the
    paths in `executables` and the extension modules are mode 755. Returns the
    file name. Entries carry a fixed date: the same inputs give the same bytes."""
    files = dict(files)
    wheel_name = f"{_NAME}-{_version()}-{tag}.whl"
    for name, text in _metadata_files(tag=tag, **metadata).items():
        files[f"{_dist_info()}/{name}"] = text.encode()
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{_dist_info()}/RECORD,,")
    files[f"{_dist_info()}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files.items():
            info = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            executable = path.endswith(".so") or path in executables
            # A regular file's type bits with its mode: pip sets the executable
            # bit only on entries that say they are regular files.
            info.external_attr = (stat.S_IFREG | (0o755 if executable else 0o644)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data, compresslevel=9)
    return wheel_name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with tempfile.TemporaryDirectory(prefix="gputriage-build-") as build_dir:
        extension, extension_name = _build_extension(build_dir)
        files = package_sources()
        with open(extension, "rb") as f:
            files[f"{_NAME}/{extension_name}"] = f.read()
        return write_wheel(wheel_directory, files, _tag())

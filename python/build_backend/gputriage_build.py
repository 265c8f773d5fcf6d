"""PEP 517 build backend for the gputriage Python package, kept in the tree.

Builds gputriage._markers with CMake (python/CMakeLists.txt, pybind11 from the
system) for the interpreter running pip, and packs the wheel with the standard
library alone: `pip install ./python` works offline, with no setuptools or wheel
to fetch into pip's isolated build environment.
"""
import base64
import hashlib
import os
import re
import shutil
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
    interpreter = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{interpreter}-{interpreter}{sys.abiflags}-{platform}"


def _dist_info():
    return f"{_NAME}-{_version()}.dist-info"


def _metadata_files():
    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {_NAME}\n"
        f"Version: {_version()}\n"
        "Summary: Step markers for gputriage: time data loading against compute from inside the training loop\n"
        "Requires-Python: >=3.8\n"
    )
    wheel = f"Wheel-Version: 1.0\nGenerator: gputriage_build\nRoot-Is-Purelib: false\nTag: {_tag()}\n"
    return {"METADATA": metadata, "WHEEL": wheel}


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
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    built = os.path.join(build_dir, "_markers" + suffix)
    if not os.path.exists(built):
        raise RuntimeError(f"gputriage build: CMake did not produce {built}")
    return built, "_markers" + suffix


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_name = f"{_NAME}-{_version()}-{_tag()}.whl"
    with tempfile.TemporaryDirectory(prefix="gputriage-build-") as build_dir:
        extension, extension_name = _build_extension(build_dir)
        files = {}  # path in the wheel -> bytes
        package = os.path.join(_HERE, _NAME)
        for root, _, names in os.walk(package):
            for name in sorted(names):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    with open(path, "rb") as f:
                        files[os.path.relpath(path, _HERE).replace(os.sep, "/")] = f.read()
        with open(extension, "rb") as f:
            files[f"{_NAME}/{extension_name}"] = f.read()
        for name, text in _metadata_files().items():
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
                info.external_attr = (0o755 if path.endswith(".so") else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                wheel.writestr(info, data)
    return wheel_name

"""A PEP 517 build backend for this package alone, standard library only, so that
`pip install ./clients/python` needs no package index (toolcage's machines reach none).
It builds a pure-Python wheel of the toolcage/ directory, and an sdist of this directory."""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

NAME = "toolcage"
HERE = os.path.dirname(os.path.abspath(__file__))


def _version():
    with open(os.path.join(HERE, NAME, "__init__.py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _metadata():
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        desc = re.search(r'^description = "([^"]*)"', f.read(), re.M).group(1)
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\nSummary: {desc}\n"
            "Requires-Python: >=3.9\n")


def _files():
    for root, dirs, files in os.walk(os.path.join(HERE, NAME)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith((".py", ".typed")):
                full = os.path.join(root, f)
                yield full, os.path.relpath(full, HERE).replace(os.sep, "/")


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    dist_info = f"{NAME}-{version}.dist-info"
    wheel_name = f"{NAME}-{version}-py3-none-any.whl"
    record = []

    def add(zf, arcname, data):
        zf.writestr(zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0)), data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arcname},sha256={digest},{len(data)}")

    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w",
                         zipfile.ZIP_DEFLATED) as zf:
        for full, arc in _files():
            with open(full, "rb") as f:
                add(zf, arc, f.read())
        add(zf, f"{dist_info}/METADATA", _metadata().encode())
        add(zf, f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: toolcage build_backend\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n")
        record.append(f"{dist_info}/RECORD,,")
        zf.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0)),
                    "\n".join(record) + "\n")
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tf:
        for rel in ["pyproject.toml", "build_backend.py", "README.md"]:
            if os.path.exists(os.path.join(HERE, rel)):
                tf.add(os.path.join(HERE, rel), f"{base}/{rel}")
        for full, arc in _files():
            tf.add(full, f"{base}/{arc}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    return name

#!/usr/bin/env python3
"""Packs a built dsopt folder into a wheel that `python3 -m pip install` takes offline.

  make_wheel.py --package BUILD/python/dsopt --out DIR [--version V] [--exclude GLOB ...]

The wheel holds the package's Python files, its native module _dsopt*.so and, when the build has
one, the CUDA backend libDSRuntimeCUDA.so beside it (the device registry looks for backend
libraries beside the binary that holds it: here _dsopt's folder). Only the standard library is
used, so no build backend (setuptools, wheel) and no network are needed:

  python3 -m pip install --no-deps --no-index DIR/dsopt-*.whl

The tag is this interpreter's (cpXY-cpXY-<platform>): the native module is built for it and for
the torch it was linked against (dsopt/_build.py names that torch; importing dsopt next to
another torch raises ImportError). Prints the wheel's path.
"""

import argparse
import base64
import fnmatch
import hashlib
import os
import sys
import sysconfig
import zipfile

NAME = "dsopt"


def wheel_tag() -> str:
    """cpXY-cpXY-<platform> of this interpreter (the module's ABI)."""
    impl = "cp%d%d" % sys.version_info[:2]
    abi = impl + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else "")
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (impl, abi, platform)


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def package_files(package: str, excludes) -> list:
    """(path on disk, path in the wheel) of every file to ship, sorted."""
    out = []
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if any(fnmatch.fnmatch(name, pattern) for pattern in excludes):
                continue
            if not (name.endswith(".py") or name.endswith(".so")):
                continue
            disk = os.path.join(root, name)
            rel = os.path.relpath(disk, os.path.dirname(package))
            out.append((disk, rel.replace(os.sep, "/")))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--package", required=True, help="the built dsopt folder (build/python/dsopt)")
    p.add_argument("--out", required=True, help="folder for the .whl")
    p.add_argument("--version", default="0.0.0")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                   help="file names to leave out (repeatable)")
    args = p.parse_args(argv)

    package = os.path.abspath(args.package)
    files = package_files(package, args.exclude)
    names = [rel for _, rel in files]
    if not any(n.startswith(NAME + "/_dsopt") and n.endswith(".so") for n in names):
        print("make_wheel.py: %s has no native module _dsopt*.so: build it first"
              % package, file=sys.stderr)
        return 1
    if NAME + "/__init__.py" not in names:
        print("make_wheel.py: %s has no __init__.py" % package, file=sys.stderr)
        return 1

    tag = wheel_tag()
    dist_info = "%s-%s.dist-info" % (NAME, args.version)
    metadata = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n"
                "Summary: dsopt runtime: run plans compiled by ds-compile (this project's "
                "runtime-only build)\nRequires-Python: ==%d.%d.*\n"
                % (NAME, args.version, sys.version_info[0], sys.version_info[1]))
    wheel = ("Wheel-Version: 1.0\nGenerator: dsopt make_wheel.py\nRoot-Is-Purelib: false\n"
             "Tag: %s\n" % tag)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "%s-%s-%s.whl" % (NAME, args.version, tag))
    tmp = path + ".tmp"
    records = []
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for disk, rel in files:
            with open(disk, "rb") as f:
                data = f.read()
            info = zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if rel.endswith(".so") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            records.append("%s,%s,%d" % (rel, record_hash(data), len(data)))
        for rel, text in ((dist_info + "/METADATA", metadata), (dist_info + "/WHEEL", wheel)):
            data = text.encode("utf-8")
            z.writestr(zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0)), data)
            records.append("%s,%s,%d" % (rel, record_hash(data), len(data)))
        records.append(dist_info + "/RECORD,,")
        z.writestr(zipfile.ZipInfo(dist_info + "/RECORD", date_time=(2020, 1, 1, 0, 0, 0)),
                   "\n".join(records) + "\n")
    os.replace(tmp, path)
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where the tests find the package, the tools and the test models.

Under ctest (python-bindings/CMakeLists.txt) PYTHONPATH, DS_BIN_DIR and
DS_TEST_MODELS_DIR point into the build tree. Run by hand, the defaults are the
same folders of /work/main/build-style trees next to this checkout:

    .venv/bin/python -m pytest -q python-bindings/tests
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build")

try:
    import dsopt  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(BUILD, "python"))


@pytest.fixture(scope="session")
def bin_dir():
    path = os.environ.get("DS_BIN_DIR", os.path.join(BUILD, "bin"))
    if not os.path.exists(os.path.join(path, "ds-run")):
        pytest.fail("ds-run not found in %s (build it, or set DS_BIN_DIR)" % path)
    return path


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """The TorchScript test models (test/models/make_models.py), made here
    when the ds_models fixture of ctest has not made them."""
    path = os.environ.get("DS_TEST_MODELS_DIR", os.path.join(BUILD, "test", "models"))
    if os.path.exists(os.path.join(path, "manifest.json")):
        return path
    path = str(tmp_path_factory.mktemp("models"))
    subprocess.run([sys.executable, os.path.join(ROOT, "test", "models", "make_models.py"),
                    path], check=True, stdout=subprocess.DEVNULL)
    return path

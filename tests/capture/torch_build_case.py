"""stagescope_torch refuses, in one line, a torch other than the build it was compiled against
(app/capture/CMakeLists.txt bakes torch's version and git revision into the package): once in
Python before the extension is loaded, once in the extension itself for an import that gets
past the first check.  Runs with the suite's Python and its own build of the module."""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_capture import CaptureCase  # noqa: E402


class TorchBuildCheck(CaptureCase):
    def run_python(self, code, package_dir):
        env = dict(os.environ, PYTHONPATH=package_dir)
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)

    def tampered_package(self, old, new):
        """A copy of the built package whose baked-in build facts say `new` where they said
        `old`; returns the folder to put on the path."""
        pkg = os.path.join(self.tmp, "pkg")
        shutil.copytree(os.environ["STAGESCOPE_PYTHON_DIR"], pkg)
        info = os.path.join(pkg, "stagescope_torch", "_build_info.py")
        with open(info) as f:
            text = f.read()
        with open(info, "w") as f:
            f.write(text.replace(old, new))
        return pkg

    def test_matching_torch_imports(self):
        r = self.run_python("import stagescope_torch, torch; "
                            "print(stagescope_torch._build_info.TORCH_VERSION == torch.__version__)",
                            os.environ["STAGESCOPE_PYTHON_DIR"])
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "True"), r.stderr)

    def test_other_torch_refused_before_loading(self):
        pkg = self.tampered_package('TORCH_VERSION = "', 'TORCH_VERSION = "0.0.1-other+')
        r = self.run_python("import stagescope_torch", pkg)
        self.assertNotEqual(r.returncode, 0)
        last = r.stderr.strip().splitlines()[-1]
        self.assertRegex(last, r"^ImportError: stagescope_torch was built against torch 0\.0\.1-other\+\S+ "
                               r"\(git [0-9a-f]+\) but \S+ imports torch \S+ \(git [0-9a-f]+\) from \S+: "
                               r"build it for this Python with scripts/build-capture-for\.sh \S+$")

    def test_other_python_refused(self):
        pkg = self.tampered_package('PYTHON_VERSION = "', 'PYTHON_VERSION = "2.')
        r = self.run_python("import stagescope_torch", pkg)
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr.strip().splitlines()[-1],
                         r"^ImportError: stagescope_torch at \S+ was built for Python 2\.\d+, not \S+ "
                         r"\(Python 3\.\d+\): build it for this Python with scripts/build-capture-for\.sh \S+$")

    def test_other_torch_refused_by_the_extension(self):
        r = self.run_python("import torch.version; torch.version.__version__ = '0.0.1-other'; "
                            "import stagescope_torch", os.environ["STAGESCOPE_PYTHON_DIR"])
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr.strip().splitlines()[-1],
                         r"^ImportError: stagescope_torch\._C was built against torch \S+ but this "
                         r"Python has torch 0\.0\.1-other: rebuild it")

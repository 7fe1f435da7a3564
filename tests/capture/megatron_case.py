"""Megatron-Core's own 1F1B schedule (forward_backward_pipelining_without_interleaving) on a tiny
GPT, 2 pipeline stages, recorded through the stagescope backend (megatron_job.py --cpu-shim).

Optional: megatron-core is not a dependency of stagescope.  The test runs with the Python named
by STAGESCOPE_MEGATRON_PYTHON, else .venv-megatron's (scripts/megatron-env.sh: megatron-core
0.19.2 on Python 3.12, with stagescope_torch built for it by `make build`), else the suite's own
Python; it SKIPs, saying why, when that Python cannot import megatron.core and stagescope_torch.
It never installs anything.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_util import JOB_TIMEOUT_S, job_env, rows  # noqa: E402
from test_capture import HERE, CaptureCase  # noqa: E402
from megatron_multimodule_case import megatron_env, megatron_python  # noqa: E402

import torch  # noqa: E402

MEGATRON_JOB = os.path.join(HERE, "megatron_job.py")


class MegatronCore1F1B(CaptureCase):
    def setUp(self):
        super().setUp()
        self.python = os.environ.get("STAGESCOPE_MEGATRON_PYTHON", sys.executable)
        if "STAGESCOPE_MEGATRON_PYTHON" not in os.environ and os.access(megatron_python(), os.X_OK):
            self.python = megatron_python()  # .venv-megatron (scripts/megatron-env.sh)
        self.env = job_env if self.python == sys.executable else megatron_env
        probe = subprocess.run([self.python, "-c", "import megatron.core, stagescope_torch; "
                                "print(megatron.core.__version__)"],
                               env=self.env(), capture_output=True, text=True)
        if probe.returncode != 0:
            self.skipTest(f"megatron-core or stagescope_torch is not importable by {self.python} (set "
                          "STAGESCOPE_MEGATRON_PYTHON to a Python that has both)")

    def launch(self, backend, out, run=None):
        cmd = [self.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               MEGATRON_JOB, "--backend", backend, "--out", out, "--cpu-shim"]
        r = subprocess.run(cmd, env=self.env(run, "stats"), capture_output=True, text=True,
                           timeout=JOB_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, f"{backend} job failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        return [torch.load(os.path.join(out, f"rank{k}.pt"), weights_only=False) for k in range(2)]

    def test_megatron_1f1b(self):
        plain = self.launch("gloo", os.path.join(self.tmp, "plain"))
        run = os.path.join(self.tmp, "megatron.db")
        captured = self.launch("stagescope", os.path.join(self.tmp, "captured"), run)
        for a, b in zip(plain, captured):  # forwarding is unchanged
            self.assertEqual(a["losses"], b["losses"])
            for k in a["params"]:
                self.assertTrue(torch.equal(a["params"][k], b["params"][k]), k)
        self.merge_and_check(run)
        transfers = rows(run, "SELECT edge, direction, side, shape, checksum FROM transfers")
        # 2 steps x 4 microbatches x (activation, gradient) x (send, recv) of [seq, mbs, hidden]
        self.assertEqual(len(transfers), 2 * 4 * 2 * 2)
        self.assertEqual({(t["edge"], t["shape"]) for t in transfers},
                         {("PIPELINE_MODEL_PARALLEL_GROUP:stage0->stage1", "16,2,32")})
        self.assertTrue(all(t["checksum"] is not None for t in transfers))
        self.assertGreater(rows(run, "SELECT count(*) AS n FROM gradients")[0]["n"], 0)

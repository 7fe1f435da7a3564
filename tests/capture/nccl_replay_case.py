"""The NCCL replay on a real captured job (docs/nccl-replay.md): tests/capture/
nccl_first_use_job.py completes on Gloo under the recording backend in both orders; `check`
predicts that the skewed order would deadlock on NCCL (nccl_replay, exit 20, the cycle and the
lazy_init rule naming the bridge group), with the lines docs/nccl-replay.md's tutorial prints,
and passes the fixed twin.  tests/capture/nccl_first_batch_job.py: a group's first
batch_isend_irecv joined by two of its three members - recorded as batches (p2p_batches), predicted
(first_batch); the same exchanges as plain ops pass."""

import os
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_util import stagescope  # noqa: E402
from test_capture import CaptureCase, torchrun, job_env  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "nccl_first_use_job.py")
BATCH_JOB = os.path.join(HERE, "nccl_first_batch_job.py")
DOC = os.path.join(HERE, "..", "..", "docs", "nccl-replay.md")


def replay_lines(text):
    """The FAIL line of nccl_replay in a check report (or a document) and its finding lines."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if "FAIL  nccl_replay " in ln)
    out = [lines[start]]
    for ln in lines[start + 1:]:
        if not ln.startswith("        - "):
            break
        out.append(ln)
    return out


class NcclFirstUse(CaptureCase):
    def capture(self, order, job=JOB, nproc=2):
        run = os.path.join(self.tmp, f"{order}.db")
        r = torchrun(job, nproc, ["--backend", "stagescope", "--order", order], job_env(run))
        self.assertEqual(r.returncode, 0, f"the {order} job failed on Gloo:\n{r.stderr[-3000:]}")
        m = stagescope("merge", run)
        self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
        return stagescope("check", run)

    def test_skewed_first_use_is_predicted_to_hang_and_its_twin_is_clean(self):
        c = self.capture("skewed")
        self.assertEqual(c.returncode, 20, c.stdout + c.stderr)
        line = next(ln for ln in c.stdout.splitlines() if "nccl_replay" in ln)
        self.assertIn("FAIL", line)
        self.assertIn("cycle rank 0 -> rank 1 -> rank 0", line)
        self.assertIn("group bridge", line)
        self.assertIn("[lazy_init]", c.stdout)
        self.assertIn("to complete on NCCL: create group bridge's communicator eagerly", c.stdout)
        with open(DOC, encoding="utf-8") as f:
            printed = f.read()
        self.assertEqual(replay_lines(c.stdout), replay_lines(printed),
                         "docs/nccl-replay.md's tutorial no longer prints what check says")
        fixed = self.capture("fixed")
        self.assertEqual(fixed.returncode, 0, fixed.stdout + fixed.stderr)
        self.assertIn("PASS  nccl_replay", fixed.stdout)

    def test_first_batch_not_joined_by_every_member_is_predicted_and_plain_ops_are_clean(self):
        c = self.capture("batched", BATCH_JOB, 3)
        self.assertEqual(c.returncode, 20, c.stdout + c.stderr)
        line = next(ln for ln in c.stdout.splitlines() if "nccl_replay" in ln)
        self.assertIn("FAIL", line)
        self.assertIn("[first_batch]", line)
        self.assertIn("group pp's communicator", line)
        self.assertIn("join its first batch_isend_irecv", c.stdout)
        self.assertNotIn("batches not recorded", c.stdout)

        con = sqlite3.connect(f"file:{os.path.join(self.tmp, 'batched.db')}?mode=ro", uri=True)
        n = con.execute("SELECT count(*) FROM p2p_batches").fetchone()[0]
        con.close()
        self.assertEqual(n, 4)  # rank 0: 1, rank 1: 2, rank 2: 1 op, each its own call
        fixed = self.capture("fixed", BATCH_JOB, 3)
        self.assertEqual(fixed.returncode, 0, fixed.stdout + fixed.stderr)
        self.assertIn("PASS  nccl_replay", fixed.stdout)

"""A captured job that raised, died or aborted is never `completed` (docs/capture.md "How a job
ended"): each rank records how it ended, and merge judges the run by every rank's record."""

import os

from capture_util import job_env, rows, stagescope, torchrun
from test_capture import CaptureCase

HERE = os.path.dirname(os.path.abspath(__file__))
CRASH_JOB = os.path.join(HERE, "crash_job.py")


class CrashedJobs(CaptureCase):
    def crash(self, mode):
        run = os.path.join(self.tmp, f"{mode}.db")
        r = torchrun(CRASH_JOB, 2, ["--mode", mode], job_env(run, "stats"), timeout=300)
        self.assertNotEqual(r.returncode, 0, f"the {mode} job was meant to fail:\n{r.stderr[-3000:]}")
        m = stagescope("merge", run)
        self.assertIn(m.returncode, (0, 10), m.stdout + m.stderr)
        status = rows(run, "SELECT status, status_reason FROM run")[0]
        c = stagescope("check", run)
        self.assertNotEqual(c.returncode, 0, f"check passed a {mode} job:\n{c.stdout}")
        self.assertNotIn("all checks passed", c.stdout)
        return run, status, c.stdout

    def test_raise_on_every_rank(self):
        run, status, out = self.crash("raise_all")
        self.assertEqual(status["status"], "failed", status)
        self.assertRegex(status["status_reason"],
                         r"^rank [01] raised RuntimeError: planted failure on rank [01] before any "
                         r"operation \(at crash_job.py:\d+ in main\); also failed: rank [01]$")
        self.assertIn("run did not complete: status failed", out)

    def test_raise_on_one_rank_mid_run(self):
        run, status, out = self.crash("raise_one")
        self.assertEqual(status["status"], "failed", status)
        self.assertTrue(status["status_reason"].startswith(
            "rank 1 raised ValueError: planted failure in iteration 1 after the receive"), status)
        # rank 0 then failed in its barrier (its peer was gone) or was stopped by torchrun:
        # either way it is named after the causally first failure, never as completed
        self.assertRegex(status["status_reason"],
                         r"; (also failed: rank 0|rank 0 recorded no end \(killed)")
        ends = rows(run, "SELECT rank, kind FROM diagnoses WHERE kind IN ('rank_end', 'rank_failed')")
        self.assertNotIn({"rank": 0, "kind": "rank_end"}, ends)
        # what both ranks recorded before survives: 2 sends and 2 receives
        self.assertEqual(rows(run, "SELECT count(*) AS n FROM transfers")[0]["n"], 4)

    def test_backend_abort_keeps_its_rows(self):
        run, status, out = self.crash("abort")
        self.assertNotEqual(status["status"], "completed", status)
        ends = rows(run, "SELECT rank, message FROM diagnoses WHERE kind = 'rank_failed'")
        aborted = [e for e in ends if " aborted: " in e["message"]]
        self.assertTrue(aborted, f"no rank recorded its abort: {ends}\n{status}")
        # the receive that was posted and never completed is said with the bytes it expected
        failed_ops = rows(run, "SELECT message FROM diagnoses WHERE kind = 'op_failed' AND rank = 1")
        self.assertTrue(any("recv from rank 0" in d["message"] and "256 bytes" in d["message"]
                            for d in failed_ops), failed_ops)
        self.assertGreater(rows(run, "SELECT count(*) AS n FROM ranks")[0]["n"], 0)

"""A hand-written 1F1B loop (hand_1f1b_job.py) recorded through the stagescope backend and judged
by `stagescope check --plan CONFIG` against stagescope's plan of the same layout (one llm, pp 2):
the loop as written follows the plan action by action; with its warmup off by one on stage 0
(--plant-warmup-bug: the send of activation 1 and the receive of gradient 0 in the other order)
check fails plan_order (exit 12) with that rank's first differing action, and the other rank
still follows the plan."""

import os
import unittest

from capture_util import job_env, stagescope, torchrun
from test_capture import HERE, CaptureCase

JOB = os.path.join(HERE, "hand_1f1b_job.py")
LAYOUT = """microbatches = 4
micro_batch_size = 2

[[modules]]
name = "llm"
kind = "llm"
pp = 2
layers = 2
"""


class HandWritten1F1B(CaptureCase):
    def record(self, name, args):
        run = os.path.join(self.tmp, name + ".db")
        r = torchrun(JOB, 2, ["--out", os.path.join(self.tmp, name)] + args, job_env(run))
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        m = stagescope("merge", run)
        self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
        return run

    def test_hand_written_1f1b_against_the_plan(self):
        layout = os.path.join(self.tmp, "llm-pp2.toml")
        with open(layout, "w") as f:
            f.write(LAYOUT)
        good = self.record("good", [])
        c = stagescope("check", good, "--plan", layout)
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
        self.assertIn(f"captured job against the plan of {layout}: 2 ranks, 1 iteration, 2 following "
                      "the plan to the end, 0 deviating, 0 stopped early; 16 messages posted, 16 "
                      "planned", c.stdout)
        # without --plan and without a declared layout, nothing is claimed
        c = stagescope("check", good)
        self.assertIn("SKIP  plan_order          (exit 12)  skipped: a captured job that declared no "
                      "layout", c.stdout)

        bad = self.record("bad", ["--plant-warmup-bug"])
        c = stagescope("check", bad, "--plan", layout)
        self.assertEqual(c.returncode, 12, c.stdout + c.stderr)
        self.assertIn("1 following the plan to the end, 1 deviating", c.stdout)
        self.assertIn("rank 0 (llm stage 0) deviates in iteration 0 at its communication action #1: "
                      "the plan posts SF_RB (send the activation of microbatch 1 to rank 1, receive "
                      "the gradient of microbatch 0 from rank 1); the job posted send the activation "
                      "of microbatch 1 to rank 1, send the activation of microbatch 2 to rank 1 — "
                      "not in the plan's action: send the activation of microbatch 2 to rank 1 "
                      "(first deviation on this rank)", c.stdout)
        self.assertNotIn("rank 1 (llm stage 1) deviates", c.stdout)

        # a layout of another world size is not silently applied
        with open(layout, "w") as f:
            f.write(LAYOUT.replace("pp = 2", "pp = 3").replace("layers = 2", "layers = 3"))
        c = stagescope("check", good, "--plan", layout)
        self.assertEqual(c.returncode, 12, c.stdout + c.stderr)
        self.assertIn(f"not judged against the plan: the layout ({layout}) has 3 ranks, the run 2",
                      c.stdout)


if __name__ == "__main__":
    unittest.main()

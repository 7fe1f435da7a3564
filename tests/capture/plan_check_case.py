"""A hand-written 1F1B loop (hand_1f1b_job.py) recorded through the stagescope backend and judged
by `stagescope check --plan CONFIG` against stagescope's plan of the same layout (one llm, pp 2):
the loop as written follows the plan action by action; with its warmup off by one on stage 0
(--plant-warmup-bug: the send of activation 1 and the receive of gradient 0 in the other order)
check fails plan_order (exit 12) with that rank's first differing action, and the other rank
still follows the plan.  A job that declares the layout itself (stagescope_torch.declare_layout)
is judged without --plan, its run file describes it by that layout, and the viewer's plan
overlay draws the planned actions over its operations, the deviating one in red."""

import os
import sqlite3
import subprocess
import unittest

from capture_util import job_env, read_probes, stagescope, torchrun
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
    def record(self, name, args, level="stats"):
        run = os.path.join(self.tmp, name + ".db")
        r = torchrun(JOB, 2, ["--out", os.path.join(self.tmp, name)] + args, job_env(run, level))
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
        # (a long summary continues one clause per line: where it breaks depends on the path)
        self.assertIn(f"captured job against the plan of {layout}: 2 ranks, 1 iteration, 2 following "
                      "the plan to the end, 0 deviating, 0 stopped early", c.stdout)
        self.assertIn("16 messages posted, 16 planned", c.stdout)
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

    def test_declared_layout_is_judged_described_and_drawn(self):
        layout = os.path.join(self.tmp, "llm-pp2.toml")
        with open(layout, "w") as f:
            f.write(LAYOUT)
        # a correct job with a declared layout passes at every level: at `full` it is judged by
        # what a capture records, never by the engine's own contracts (its input rows: "0 of 8
        # expected input rows recorded" failed it)
        good = self.record("declared-good-full", ["--declare-layout", layout], level="full")
        c = stagescope("check", good)
        self.assertEqual(c.returncode, 0, c.stdout + c.stderr)
        self.assertNotIn("input rows", c.stdout)
        bad = self.record("declared-bad", ["--plant-warmup-bug", "--declare-layout", layout])
        c = stagescope("check", bad)
        self.assertEqual(c.returncode, 12, c.stdout + c.stderr)
        self.assertIn("captured job against the plan of the layout the job declared: 2 ranks",
                      c.stdout)
        self.assertIn("rank 0 (llm stage 0) deviates in iteration 0 at its communication action #1",
                      c.stdout)
        # the run file describes the job by its layout, not as one flat "job" pipeline
        with sqlite3.connect(bad) as db:
            self.assertEqual(db.execute("SELECT name, kind, pp, rank_offset FROM modules").fetchall(),
                             [("llm", "llm", 2, 0)])
            self.assertEqual(db.execute("SELECT rank, module, pp, warmup FROM ranks ORDER BY rank")
                             .fetchall(), [(0, "llm", 0, 1), (1, "llm", 1, 0)])
            self.assertEqual(db.execute("SELECT microbatches FROM run").fetchone()[0], 4)
        # a declaration that does not fit the world is refused at once, in one line
        with open(layout, "w") as f:
            f.write(LAYOUT.replace("pp = 2", "pp = 3").replace("layers = 2", "layers = 3"))
        r = torchrun(os.path.join(HERE, "hand_1f1b_job.py"), 2,
                     ["--out", os.path.join(self.tmp, "wrong"), "--declare-layout", layout],
                     job_env(os.path.join(self.tmp, "wrong.db")))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ValueError: declare_layout(): the layout has 3 ranks, the job's world 2",
                      r.stdout + r.stderr)

        gui = os.environ.get("STAGESCOPE_GUI")
        if not gui:
            self.skipTest("STAGESCOPE_GUI (the viewer executable) is not set")
        if subprocess.run(["sh", "-c", "command -v xvfb-run"], capture_output=True).returncode != 0:
            self.skipTest("xvfb-run is not installed")
        shot = os.path.join(self.tmp, "plan.png")
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(self.tmp, "config"))
        g = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", gui, bad, "--size",
                            "1600x1000", "--script", "plan", "--script", "zoom-fit", "--script",
                            "frames 3", "--screenshot", shot],
                           env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        spans = read_probes(shot + ".probes").get("plan-span", [])
        red = (235, 80, 80)
        green = (110, 200, 120)
        by_rank = {r: [tuple(int(v) for v in p[5:8]) for p in spans if int(p[0]) == r] for r in (0, 1)}
        # rank 0: its first action as planned, then the deviation (red); rank 1: all as planned
        self.assertEqual(by_rank[0][:2], [green, red], spans)
        self.assertEqual(by_rank[0].count(red), 1, spans)
        self.assertTrue(by_rank[1] and all(c == green for c in by_rank[1]), spans)


if __name__ == "__main__":
    unittest.main()

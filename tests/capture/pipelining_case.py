"""Capture of PyTorch's own pipelining schedules (4 ranks, Gloo, CPU).

What check finds in torch.distributed.pipelining (2.11), and this test pins: when a stage
first runs, PipelineStage._get_init_p2p_neighbors_ops exchanges dummy tensors with its
neighbours — it sends a 0-dim float32 tensor and receives into a [1] float32 tensor (same
bytes, different shape: shape_mismatch), and posts its forward and backward receives into the
*same* buffer, so whichever lands last overwrites the other (the receiver's buffer at
completion then differs from what was sent: checksum_mismatch, depending on timing).  Every
other message — the training's activations and gradients — must pair and agree.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_util import rows  # noqa: E402
from test_capture import PIPELINING_JOB, CaptureCase  # noqa: E402

EDGES = ["pp:stage0->stage1", "pp:stage1->stage2", "pp:stage2->stage3"]


def is_training(t):
    """The schedule's activations and gradients: [microbatch rows, hidden] float32.  The rest
    are the stage's one-time setup in iteration 0: the dummy handshake and the shape-inference
    objects (send_object_list: an int64 size, then the pickled metadata as uint8)."""
    return (t["shape"], t["dtype"]) == ("2,16", "float32")


class Pipelining1F1B(CaptureCase):
    def test_pipelining_1f1b(self):
        args = ["--schedule", "1f1b", "--steps", "2", "--microbatches", "4"]
        plain = self.run_job(PIPELINING_JOB, 4, args, "gloo")
        run = os.path.join(self.tmp, "1f1b.db")
        captured = self.run_job(PIPELINING_JOB, 4, args, "stagescope", run=run, level="stats")
        self.assert_bitwise_equal(plain, captured)
        out = self.merge_and_check(run, expect_exit=14)
        # exactly the 6 handshake messages (3 edges x 2 directions) have a shape mismatch
        self.assertEqual(out.count("sent [] float32, received [1] float32"), 6, out)
        self.assertIn("PASS  unmatched_transfer", out)
        self.assertIn("PASS  nonfinite", out)
        for line in out.splitlines():
            if "checksum mismatch on" in line:
                self.assertIn("iteration 0 microbatch 0", line)  # only the aliased handshake

        transfers = rows(run, "SELECT * FROM transfers")
        key = lambda t: (t["edge"], t["direction"], t["iteration"], t["microbatch"], t["src_rank"], t["dst_rank"])
        sends = {key(t): t for t in transfers if t["side"] == "send"}
        recvs = {key(t): t for t in transfers if t["side"] == "recv"}
        self.assertEqual(set(sends), set(recvs))
        training = [k for k, s in sends.items() if is_training(s)]
        self.assertEqual(len(training), 2 * 4 * 3 * 2)  # steps x microbatches x edges x directions
        setup = [s for k, s in sends.items() if not is_training(s)]
        self.assertTrue(all(s["iteration"] == 0 for s in setup), setup)
        self.assertIn("uint8", {s["dtype"] for s in setup})
        for k in training:
            s, r = sends[k], recvs[k]
            self.assertEqual((r["shape"], r["dtype"]), ("2,16", "float32"), k)
            self.assertIsNotNone(s["checksum"])
            self.assertEqual(s["checksum"], r["checksum"], k)
        self.assertEqual({k[0] for k in training}, set(EDGES))


class GPipeVs1F1B(CaptureCase):
    """Two schedules of the same model and seed, both captured at full: `compare` aligns them
    by logical identity, finds every gradient equal (the job's own parameters agree too) and
    reports that the schedules (each rank's order of operations) differ."""

    def test_gpipe_vs_1f1b(self):
        import json

        from capture_util import stagescope

        runs, results = {}, {}
        for schedule in ("gpipe", "1f1b"):
            runs[schedule] = os.path.join(self.tmp, f"{schedule}.db")
            results[schedule] = self.run_job(PIPELINING_JOB, 4, ["--schedule", schedule, "--steps", "2"],
                                             "stagescope", run=runs[schedule], level="full")
            m = stagescope("merge", runs[schedule])
            self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
        self.assert_bitwise_equal(results["gpipe"], results["1f1b"])  # independent of stagescope
        report = os.path.join(self.tmp, "compare.json")
        c = stagescope("compare", runs["gpipe"], runs["1f1b"], "--json", report)
        with open(report) as f:
            cmp = json.load(f)
        self.assertEqual(cmp["gradients"]["compared"], 4 * 2 * 2, c.stdout)  # stages x (w, b) x steps
        self.assertEqual(cmp["gradients"]["differing"], 0, c.stdout)
        self.assertGreaterEqual(cmp["transfers"]["compared"], 48, c.stdout)
        # ... and says the schedules differ: the last stage receives mb1's activation before
        # sending mb0's gradient under GPipe, the other way round under 1F1B
        sched = cmp["schedule"]
        self.assertTrue(sched["compared"], sched)
        self.assertGreaterEqual(sched["ranks_differing"], 1, sched)
        self.assertEqual(sched["ranks_compared"], 4, sched)
        self.assertIn("Schedules: differ on", c.stdout)
        # the only messages that may differ are the stages' iteration-0 handshake, whose receive
        # buffer PyTorch aliases (see the module doc): never a training message
        if cmp["first_divergence"] is not None:
            self.assertEqual(cmp["first_divergence"]["iteration"], 0, cmp["first_divergence"])
        # the same schedule twice: the same order on every rank
        same = os.path.join(self.tmp, "same.json")
        stagescope("compare", runs["1f1b"], runs["1f1b"], "--json", same)
        with open(same) as f:
            self.assertEqual(json.load(f)["schedule"]["ranks_differing"], 0)

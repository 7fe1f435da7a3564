"""The capture backend's suite: real multi-process torch jobs recorded through the
`stagescope` c10d backend, then merged and checked by the stagescope CLI.

Usage: test_capture.py CASE    (CASE: p2p_pipeline | planted_shape_bug | planted_hang |
                                pipelining_1f1b | gpipe_vs_1f1b | collectives_view |
                                buffer_reuse | megatron_1f1b | megatron_multimodule |
                                megatron_unequal_depth_hang | megatron_fan_in |
                                megatron_numerics | torch_build_check | hand_1f1b_plan)
Environment: STAGESCOPE_BIN (the CLI), STAGESCOPE_PYTHON_DIR (the built stagescope_torch).
"""

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_util import (xxh3_of, rows, stagescope, torchrun, torchrun_cmd, job_env,  # noqa: E402
                          stop_job, unsigned)

HERE = os.path.dirname(os.path.abspath(__file__))
P2P_JOB = os.path.join(HERE, "p2p_pipeline_job.py")
PIPELINING_JOB = os.path.join(HERE, "pipelining_job.py")


def load_results(out_dir, world):
    return [torch.load(os.path.join(out_dir, f"rank{r}.pt"), weights_only=False) for r in range(world)]


class CaptureCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="stagescope-capture-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_job(self, script, nproc, args, backend, run=None, level="stats"):
        out = os.path.join(self.tmp, f"out-{backend}-{level}")
        r = torchrun(script, nproc, ["--backend", backend, "--out", out] + args,
                     job_env(run, level))
        self.assertEqual(r.returncode, 0, f"{backend} job failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
        return load_results(out, nproc)

    def merge_and_check(self, run, expect_exit=0):
        m = stagescope("merge", run)
        self.assertEqual(m.returncode, 0, f"merge failed:\n{m.stdout}\n{m.stderr}")
        c = stagescope("check", run)
        self.assertEqual(c.returncode, expect_exit,
                         f"check exit {c.returncode}, expected {expect_exit}:\n{c.stdout}\n{c.stderr}")
        return c.stdout

    def assert_bitwise_equal(self, a, b):
        """Forwarding is unchanged: the job's results are bitwise identical."""
        self.assertEqual(len(a), len(b))
        for ra, rb in zip(a, b):
            self.assertEqual(ra["losses"], rb["losses"])
            for k in ra["params"]:
                self.assertTrue(torch.equal(ra["params"][k], rb["params"][k]), f"parameter {k} differs")
            if "log" in ra:
                self.assertEqual(ra["log"], rb["log"])


class P2PPipeline(CaptureCase):
    """4 ranks: 2 pipelines of 2 stages (pp) x 2 data-parallel replicas (dp)."""

    def test_p2p_pipeline(self):
        args = ["--pp", "2", "--steps", "2", "--microbatches", "3"]
        plain = self.run_job(P2P_JOB, 4, args, "gloo")
        run = os.path.join(self.tmp, "p2p.db")
        captured = self.run_job(P2P_JOB, 4, args, "stagescope", run=run, level="full")
        self.assert_bitwise_equal(plain, captured)
        self.merge_and_check(run)

        transfers = rows(run, "SELECT * FROM transfers ORDER BY rank, action_seq, iteration")
        # Expected messages: per step, per replica, per microbatch, one activation and one
        # gradient on the single pp edge; each recorded by both sides.
        steps, mbs, replicas = 2, 3, 2
        self.assertEqual(len(transfers), steps * replicas * mbs * 2 * 2)
        for t in transfers:
            self.assertEqual(t["edge"], "pp:stage0->stage1")
            self.assertEqual(t["direction"], "activation" if t["src_rank"] < t["dst_rank"] else "gradient")
            self.assertEqual(t["src_rank"] // 2, t["dst_rank"] // 2)  # same replica
            self.assertEqual(t["src_group_rank"], t["src_rank"] % 2)  # group rank != global rank
            self.assertLessEqual(t["start_ns"], t["end_ns"])
            # payload (level full) and checksum agree, recomputed here
            self.assertEqual(xxh3_of(t["payload"]), unsigned(t["checksum"]))
        # every send pairs with exactly one receive (same key), with equal checksums
        key = lambda t: (t["edge"], t["direction"], t["iteration"], t["microbatch"], t["src_rank"], t["dst_rank"])
        sends = {key(t): t for t in transfers if t["side"] == "send"}
        recvs = {key(t): t for t in transfers if t["side"] == "recv"}
        self.assertEqual(len(sends), len(transfers) // 2)
        self.assertEqual(set(sends), set(recvs))
        for k, s in sends.items():
            self.assertEqual(s["checksum"], recvs[k]["checksum"], k)
        # the recorded checksums are the ones the job computed itself, in the job's order
        for rank, res in enumerate(captured):
            mine = rows(run, "SELECT side, src_rank, dst_rank, shape, checksum FROM transfers "
                             "WHERE rank = ? ORDER BY iteration, action_seq", (rank,))
            self.assertEqual(len(mine), len(res["log"]))
            for rec, (kind, peer, shape, _dtype, checksum) in zip(mine, res["log"]):
                self.assertEqual(rec["side"], kind)
                self.assertEqual(rec["dst_rank"] if kind == "send" else rec["src_rank"], peer)
                self.assertEqual(rec["shape"], ",".join(map(str, shape)))
                self.assertEqual(unsigned(rec["checksum"]), checksum)
        # collectives: dp gradient all-reduces and the world loss all-reduce, all members
        # present with equal results
        colls = rows(run, "SELECT * FROM collectives")
        groups = {}
        for c in colls:
            groups.setdefault((c["group_name"], c["group_ranks"], c["iteration"], c["group_seq"]), []).append(c)
        for (name, members, it, seq), cs in groups.items():
            self.assertEqual(sorted(c["rank"] for c in cs), [int(m) for m in members.split(",")])
            self.assertEqual(len({c["op"] for c in cs}), 1)
            if cs[0]["op"] == "all_reduce":
                self.assertEqual(len({c["out_checksum"] for c in cs}), 1, (name, it, seq))
        ops = {(c["group_name"], c["op"]) for c in colls}
        self.assertIn(("dp", "all_reduce"), ops)
        self.assertIn(("world", "all_reduce"), ops)
        self.assertIn(("world", "barrier"), ops)
        # gradients recorded after the dp reduction: equal across replicas, equal to the job's
        grads = rows(run, "SELECT rank, iteration, param, checksum, payload FROM gradients")
        self.assertEqual(len(grads), 4 * 2 * 2)  # ranks x steps x (weight, bias)
        by = {}
        for g in grads:
            self.assertEqual(xxh3_of(g["payload"]), unsigned(g["checksum"]))
            by.setdefault((g["iteration"], g["param"]), set()).add(g["checksum"])
        self.assertTrue(all(len(v) == 1 for v in by.values()))

        # A planted corruption in the file: one received message's checksum flipped.
        bad = os.path.join(self.tmp, "tampered.db")
        shutil.copy(run, bad)
        con = sqlite3.connect(bad)
        con.execute("UPDATE transfers SET checksum = ~checksum WHERE id = "
                    "(SELECT min(id) FROM transfers WHERE side = 'recv' AND iteration = 1)")
        con.commit()
        con.close()
        c = stagescope("check", bad)
        self.assertEqual(c.returncode, 15, c.stdout)
        self.assertIn("checksum mismatch on edge pp:stage0->stage1", c.stdout)


class PlantedShapeBug(CaptureCase):
    """The last stage posts one receive with the transposed shape: same bytes, so Gloo accepts
    it and the job runs on; check names the message (exit 14, shape_mismatch)."""

    def test_planted_shape_bug(self):
        run = os.path.join(self.tmp, "bug.db")
        self.run_job(P2P_JOB, 2, ["--pp", "2", "--steps", "2", "--microbatches", "2",
                                  "--plant-shape-bug"], "stagescope", run=run)
        out = self.merge_and_check(run, expect_exit=14)
        self.assertIn("shape mismatch on edge pp:stage0->stage1 activation iteration 1 microbatch 0", out)
        self.assertIn("sent [4, 8] float32, received [8, 4] float32", out)


def waits_of(shard):
    """The waits rows a running rank has committed to its shard so far ([] while unreadable)."""
    try:
        return rows(shard, "SELECT * FROM waits")
    except sqlite3.Error:
        return []


class PlantedHang(CaptureCase):
    """A hand-written 2-stage loop that hangs; the hang watchdog leaves what each rank waits
    on in its shard, so merge/check build the wait-for graph (docs/capture.md "Hangs")."""

    def test_killed_while_hanging(self):
        """Stage 1 skips its receive of the last activation: rank 0 blocks sending it, rank 1
        blocks sending its first gradient.  c10d's timeout is 30 min, the hang timeout 2 s;
        the launcher is killed once both ranks recorded their wait (as a CI timeout would)."""
        run = os.path.join(self.tmp, "hang.db")
        env = job_env(run, "stats")
        env["STAGESCOPE_HANG_TIMEOUT"] = "2"
        cmd = torchrun_cmd(P2P_JOB, 2, ["--backend", "stagescope", "--out", os.path.join(self.tmp, "o"),
                                        "--pp", "2", "--steps", "2", "--microbatches", "3",
                                        "--plant-hang", "skip-recv"])
        job = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
        try:
            # start-up takes seconds; a busy machine may take minutes, never 4
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and job.poll() is None:
                if all(waits_of(f"{run}.rank{r}.shard") for r in range(2)):
                    break
                time.sleep(0.5)
            self.assertIsNone(job.poll(), "the planted hang ended on its own; it must hang")
        finally:
            stop_job(job)  # the launcher kills its ranks
        m = stagescope("merge", run)
        self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
        self.assertIn("run hung", m.stdout)
        waits = {w["rank"]: w for w in rows(run, "SELECT * FROM waits")}
        self.assertEqual(sorted(waits), [0, 1])
        self.assertEqual((waits[0]["op"], waits[0]["peer"], waits[0]["edge"], waits[0]["direction"],
                          waits[0]["iteration"], waits[0]["microbatch"]),
                         ("send", 1, "pp:stage0->stage1", "activation", 0, 2))
        self.assertEqual((waits[1]["op"], waits[1]["peer"], waits[1]["direction"], waits[1]["microbatch"]),
                         ("send", 0, "gradient", 0))
        out = self.merge_and_check(run, expect_exit=10)
        self.assertIn("status hung", out)
        self.assertIn("rank 0 waits to send the activation of microbatch 2 to rank 1", out)
        self.assertIn("cycle rank 0 -> rank 1 -> rank 0", out)
        self.assertIn("rank 1 has not posted the receive of the activation of microbatch 2 from "
                      "rank 0 (edge pp:stage0->stage1, iteration 0) that rank 0 waits for", out)

    def test_collective_not_joined(self):
        """Stage 1 skips the loss all_reduce of iteration 0 and waits for iteration 1's first
        activation; rank 0 waits in the all_reduce.  No hang timeout is set: the groups' own
        (6 s) applies, c10d's wait fails at the same time and the job exits."""
        run = os.path.join(self.tmp, "coll.db")
        r = torchrun(P2P_JOB, 2, ["--backend", "stagescope", "--out", os.path.join(self.tmp, "o"),
                                  "--pp", "2", "--steps", "2", "--microbatches", "2", "--timeout", "6",
                                  "--plant-hang", "skip-allreduce"], job_env(run, "meta"))
        self.assertNotEqual(r.returncode, 0, "the planted hang must fail the job")
        self.assertNotEqual(r.returncode, 124, "the job must end by its own timeout")
        out = self.merge_and_check(run, expect_exit=10)
        self.assertIn("rank 0 waits for all_reduce #0 of group world, not joined by rank 1", out)
        self.assertIn("rank 1 waits for the activation of microbatch 0 from rank 0; last completed: "
                      "iteration 0", out)
        self.assertIn("rank 1 has not joined all_reduce #0 of group world (iteration 0)", out)
        pending = rows(run, "SELECT rank, state, group_ranks FROM collectives WHERE op = 'all_reduce' "
                            "AND iteration = 0")
        self.assertEqual([(p["rank"], p["group_ranks"]) for p in pending], [(0, "0,1")])


BUFFER_REUSE_JOB = os.path.join(HERE, "buffer_reuse_job.py")


class ShapePreambles(CaptureCase):
    """A job that sends each activation's shape (int64 [2]) before it on the same channel, as
    Megatron-Core does. With stagescope_torch.shape_preambles() the shape messages are recorded
    on <edge>#shape with their payload's microbatch, and the payloads keep microbatches 0..M-1;
    without it, counting every message numbers the payloads 1, 3, 5 (the shift it removes)."""

    def microbatches(self, run, mode):
        self.run_job(P2P_JOB, 2, ["--pp", "2", "--steps", "1", "--microbatches", "3",
                                  "--shape-preamble", mode], "stagescope", run=run)
        self.merge_and_check(run)
        got = {}
        for t in rows(run, "SELECT edge, dtype, microbatch FROM transfers WHERE direction = "
                           "'activation' AND side = 'send' ORDER BY microbatch"):
            got.setdefault((t["edge"], t["dtype"]), []).append(t["microbatch"])
        return got

    def test_shape_preambles(self):
        recorded = self.microbatches(os.path.join(self.tmp, "recorded.db"), "recorded")
        self.assertEqual(recorded, {("pp:stage0->stage1", "float32"): [0, 1, 2],
                                    ("pp:stage0->stage1#shape", "int64"): [0, 1, 2]})
        counted = self.microbatches(os.path.join(self.tmp, "counted.db"), "sent")
        self.assertEqual(counted, {("pp:stage0->stage1", "float32"): [1, 3, 5],
                                   ("pp:stage0->stage1", "int64"): [0, 2, 4]})


class BufferReuse(CaptureCase):
    """The digests run off the job's thread on copies taken when the bytes are defined: a job
    that overwrites its send buffer after wait(), its receive buffer right after reading it and
    its all_reduce result right away still has the values it sent/received recorded."""

    def test_buffer_reuse(self):
        run = os.path.join(self.tmp, "reuse.db")
        out = os.path.join(self.tmp, "out")
        r = torchrun(BUFFER_REUSE_JOB, 2, ["--out", out], job_env(run, "stats"))
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        self.merge_and_check(run)
        for rank in range(2):
            log = torch.load(os.path.join(out, f"rank{rank}.pt"), weights_only=False)["log"]
            p2p = [c for kind, c in log if kind in ("send", "recv")]
            recorded = [unsigned(t["checksum"]) for t in rows(
                run, "SELECT checksum FROM transfers WHERE rank = ? ORDER BY iteration", (rank,))]
            self.assertEqual(recorded, p2p, f"rank {rank}: transfer checksums")
            colls = rows(run, "SELECT in_checksum, out_checksum FROM collectives WHERE rank = ? AND "
                              "op = 'all_reduce' ORDER BY iteration", (rank,))
            self.assertEqual([unsigned(c["in_checksum"]) for c in colls],
                             [c for kind, c in log if kind == "all_reduce_in"], f"rank {rank}: inputs")
            self.assertEqual([unsigned(c["out_checksum"]) for c in colls],
                             [c for kind, c in log if kind == "all_reduce_out"], f"rank {rank}: results")


def main():
    case = sys.argv[1] if len(sys.argv) > 1 else ""
    cases = {"p2p_pipeline": P2PPipeline, "planted_shape_bug": PlantedShapeBug,
             "planted_hang": PlantedHang, "buffer_reuse": BufferReuse,
             "shape_preambles": ShapePreambles}
    try:
        import pipelining_case  # noqa: F401
        cases["pipelining_1f1b"] = pipelining_case.Pipelining1F1B
        cases["gpipe_vs_1f1b"] = pipelining_case.GPipeVs1F1B
    except ImportError:
        pass
    import collectives_case  # noqa: E402
    import megatron_case  # noqa: E402
    cases["collectives_view"] = collectives_case.CollectivesAcrossTheGroup
    cases["megatron_1f1b"] = megatron_case.MegatronCore1F1B
    import megatron_multimodule_case  # noqa: E402
    import torch_build_case  # noqa: E402
    cases["torch_build_check"] = torch_build_case.TorchBuildCheck
    cases["megatron_multimodule"] = megatron_multimodule_case.MegatronMultimodule
    cases["megatron_unequal_depth_hang"] = megatron_multimodule_case.MegatronUnequalDepthHang
    cases["megatron_fan_in"] = megatron_multimodule_case.MegatronFanIn
    import megatron_numerics_case  # noqa: E402
    cases["megatron_numerics"] = megatron_numerics_case.MegatronNumerics
    import plan_check_case  # noqa: E402
    cases["hand_1f1b_plan"] = plan_check_case.HandWritten1F1B
    import crash_case  # noqa: E402
    cases["crashed_jobs"] = crash_case.CrashedJobs
    import megatron_roles_case  # noqa: E402
    cases["megatron_message_roles"] = megatron_roles_case.MegatronMessageRoles
    import nccl_replay_case  # noqa: E402
    cases["nccl_replay"] = nccl_replay_case.NcclFirstUse
    if case not in cases:
        print(f"usage: {sys.argv[0]} CASE  (CASE: {' | '.join(cases)}); got {case!r}")
        return 2
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(cases[case])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if result.wasSuccessful() and result.testsRun and len(result.skipped) == result.testsRun:
        return 77  # every test skipped (ctest SKIP_RETURN_CODE): said, never counted as passed
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())

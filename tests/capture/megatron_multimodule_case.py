"""Megatron-Core 0.19.2's own multimodule 1F1B (MultiModulePipelineCommunicator, BridgeCommunicator,
HyperCommGrid, forward_backward_pipelining_without_interleaving) recorded through the
stagescope backend on CPU (megatron_multimodule_job.py, stagescope_torch.megatron.enable_cpu).

Runs with .venv-megatron's Python 3.12 (scripts/megatron-env.sh; STAGESCOPE_MEGATRON_PYTHON
names another) and the stagescope_torch built for it (scripts/build-capture-for.sh, run by
`make build`); SKIPs, saying which is missing, otherwise.

- megatron_multimodule: encoder vision pp1 -> llm pp2 (3 ranks): the capture is bitwise equal
  to plain Gloo, merges and passes check; the bridge, boundary and pipeline groups carry the
  names stagescope_torch.megatron.name_groups gives, on their members only.
- megatron_fan_in: encoder vision pp1 dp2 -> llm pp2 dp1 (4 ranks, a 2->1 bridge): recorded,
  merged and checked; each encoder replica's half-batch on its own bridge edge, the llm's
  pipeline carrying the whole batch, the replicas' gradient all_reduce on "vision_dp".
- megatron_unequal_depth_hang: vision pp2 + audio pp1 -> llm pp2 (5 ranks): Megatron gives the
  shorter encoder a warmup of 3 and the job deadlocks; with a 3 s hang timeout the capture's
  watchdog records what each rank waits on while the job hangs, the test kills the job as a
  launcher would, and merge/check report the hang and its wait-for cycle.
"""

import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_util import JOB_TIMEOUT_S, job_env, rows, stagescope, stop_job  # noqa: E402
from test_capture import HERE, CaptureCase, waits_of  # noqa: E402

import torch  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
JOB = os.path.join(HERE, "megatron_multimodule_job.py")
CONFORMING = ["--encoder", "vision:1", "--llm-pp", "2"]
UNEQUAL = ["--encoder", "vision:2", "--encoder", "audio:1", "--llm-pp", "2"]
FAN_IN = ["--encoder", "vision:1:2", "--llm-pp", "2"]
HANG_TIMEOUT_S = 3
# stagescope's own engine on the CONFORMING layout (vision pp1 at rank 0 -> llm pp2 at ranks 1-2)
ENGINE_TWIN = """iterations = 2
microbatches = 4
micro_batch_size = 2
[[modules]]
name = "vision"
kind = "encoder"
pp = 1
offset = 0
layers = 1
hidden = 8
heads = 1
ffn = 8
patches = 4
patch_dim = 8
[[modules]]
name = "llm"
kind = "llm"
pp = 2
offset = 1
layers = 2
hidden = 8
heads = 1
ffn = 8
vocab = 8
text_len = 4
"""


def megatron_python():
    return os.environ.get("STAGESCOPE_MEGATRON_PYTHON", os.path.join(REPO, ".venv-megatron", "bin", "python"))


def megatron_env(run=None, level="stats"):
    """The job's environment: stagescope_torch comes from the .pth the build wrote into the
    Megatron venv (the suite's STAGESCOPE_PYTHON_DIR holds the module of another Python)."""
    env = job_env(run, level)
    env["PYTHONPATH"] = os.pathsep.join(p for p in env["PYTHONPATH"].split(os.pathsep)
                                        if p and p != os.environ.get("STAGESCOPE_PYTHON_DIR"))
    env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
    return env


class MegatronCase(CaptureCase):
    """Runs the job with the Megatron venv's Python; SKIPs (saying why) without it."""

    def setUp(self):
        super().setUp()
        self.python = megatron_python()
        if not os.access(self.python, os.X_OK):
            self.skipTest(f"no Megatron-Core Python at {self.python} (scripts/megatron-env.sh makes "
                          ".venv-megatron; set STAGESCOPE_MEGATRON_PYTHON for another)")
        probe = subprocess.run(
            [self.python, "-c", "import megatron.core, stagescope_torch.megatron; "
                                "print(megatron.core.__version__)"],
            env=megatron_env(), capture_output=True, text=True)
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["?"])[-1]
            self.skipTest(f"{self.python} cannot import megatron.core and stagescope_torch ({last}); "
                          f"run scripts/build-capture-for.sh {self.python}")

    def cmd(self, nproc, args):
        return [self.python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                JOB] + args

    def launch(self, nproc, args, backend, run=None):
        out = os.path.join(self.tmp, f"out-{backend}")
        r = subprocess.run(self.cmd(nproc, args + ["--backend", backend, "--out", out]),
                           env=megatron_env(run), capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, f"{backend} job failed:\n{r.stdout[-3000:]}\n{r.stderr[-4000:]}")
        return [torch.load(os.path.join(out, f"rank{k}.pt"), weights_only=False) for k in range(nproc)]



class MegatronMultimodule(MegatronCase):
    def test_megatron_multimodule(self):
        plain = self.launch(3, CONFORMING, "gloo")
        run = os.path.join(self.tmp, "megatron.db")
        captured = self.launch(3, CONFORMING, "stagescope", run)
        self.assert_bitwise_equal(plain, captured)
        self.assertEqual(len(captured[2]["losses"]), 2)  # the llm's last stage: 2 steps x 4 losses
        self.assertEqual([len(l) for l in captured[2]["losses"]], [4, 4])
        self.assertEqual([r["current_stage"] for r in captured], [0, 1, 2])  # 3 global stages
        out = self.merge_and_check(run)
        self.assertIn("result: all checks passed", out)
        # the job's own losses (record_losses on the last stage), per microbatch and their mean
        recorded = rows(run, "SELECT iteration, microbatch, loss FROM losses WHERE rank = 2 "
                             "ORDER BY iteration, microbatch")
        want = []
        for it, per_mb in enumerate(captured[2]["losses"]):
            want.append((it, -1, sum(per_mb) / len(per_mb)))
            want += [(it, mb, v) for mb, v in enumerate(per_mb)]
        self.assertEqual(len(recorded), len(want), recorded)
        for r, (it, mb, v) in zip(recorded, want):
            self.assertEqual((r["iteration"], r["microbatch"]), (it, mb))
            self.assertAlmostEqual(r["loss"], v, delta=1e-6 * max(1.0, abs(v)))
        # judged against stagescope's plan of the layout the job declared (declare_layout):
        # every rank's messages are the plan's, action by action, in both iterations
        self.assertIn("plan_order          (exit 12)  captured job against the plan of the layout "
                      "the job declared: 3 ranks, 2 iterations, 3 following the plan to the end, "
                      "0 deviating, 0 stopped early\n        64 messages posted, 64 planned", out)

        # against stagescope's engine run of the same layout (its own small model): the numbers
        # are not comparable, the schedule is — the capture follows the plan the engine ran
        engine_cfg = os.path.join(self.tmp, "engine.toml")
        with open(engine_cfg, "w") as f:
            f.write(ENGINE_TWIN)
        engine = os.path.join(self.tmp, "engine.db")
        e = stagescope("run", engine_cfg, "-o", engine, "-q")
        self.assertEqual(e.returncode, 0, e.stdout + e.stderr)
        cmp = stagescope("compare", run, engine)
        self.assertIn("- Schedules: not compared (one run is a captured job, whose actions are its "
                      "messages only)", cmp.stdout)
        self.assertIn(f"- Schedule against the plan: the captured job {run} against {engine}'s plan "
                      "(what its engine ran): 3 of 3 ranks follow it to the end", cmp.stdout)
        self.assertIn("**Verdict: INCOMPLETE** — cannot call the runs equal: their numbers are not "
                      "comparable (a captured job trains its own model", cmp.stdout)
        self.assertEqual(cmp.returncode, 19, cmp.stdout)

        transfers = rows(run, "SELECT rank, edge, direction, side, shape, dtype, src_rank, dst_rank, "
                              "iteration, microbatch FROM transfers")
        edges = {(t["edge"], t["src_rank"], t["dst_rank"]) for t in transfers}
        # named groups: the bridge (ranks 0, 1) and the llm's pipeline group (ranks 1, 2); each
        # payload's shape message (int64 [3], sent first on the same channel) on <edge>#shape
        payload_edges = {("bridge:vision->llm:stage0->stage1", 0, 1),
                         ("bridge:vision->llm:stage0->stage1", 1, 0),
                         ("llm_pp:stage0->stage1", 1, 2), ("llm_pp:stage0->stage1", 2, 1)}
        self.assertEqual(edges, payload_edges | {(e + "#shape", s, d) for e, s, d in payload_edges})
        # per iteration, edge and direction: 4 microbatches, numbered 0-3 on payloads and shape
        # messages alike (a shape message never shifts the count), each seen by both sides
        per = {}
        for t in transfers:
            per.setdefault((t["edge"], t["direction"], t["iteration"], t["dtype"]), []).append(t)
        for (edge, direction, it, dtype), ts in per.items():
            self.assertEqual(dtype == "int64", edge.endswith("#shape"), edge)
            self.assertEqual(len(ts), 2 * 4, (edge, direction, it, dtype))
            self.assertEqual(sorted(t["microbatch"] for t in ts), [0, 0, 1, 1, 2, 2, 3, 3], edge)
            self.assertEqual({t["shape"] for t in ts}, {"3"} if dtype == "int64" else {"4,2,8"})
        self.assertEqual(len(transfers), 2 * 2 * 2 * 2 * 4 * 2)  # edges x dirs x its x kinds x mbs x sides
        # the boundary broadcasts (shape, then data) on one-member groups, on members only
        colls = rows(run, "SELECT rank, op, group_name, group_ranks FROM collectives WHERE op = 'broadcast'")
        self.assertEqual({(c["rank"], c["group_name"], c["group_ranks"]) for c in colls},
                         {(0, "boundary:vision:last", "0"), (1, "boundary:llm:first", "1")})
        grads = rows(run, "SELECT DISTINCT param FROM gradients")
        self.assertEqual({g["param"] for g in grads},
                         {f"{m}.{w}" for m in ("vision.stage0", "llm.stage0", "llm.stage1")
                          for w in ("weight", "bias")})


    def test_cpu_patches_opt_in(self):
        """Importing stagescope_torch.megatron patches nothing; enable_cpu() patches exactly the
        listed attributes (and no torch attribute); disable_cpu() restores them."""
        code = """
import importlib, torch, torch.distributed as dist
mods = [importlib.import_module("megatron.core." + m) for m in (
    "pipeline_parallel.bridge_communicator", "pipeline_parallel.schedules",
    "pipeline_parallel.p2p_communication", "distributed.param_and_grad_buffer",
    "distributed.distributed_data_parallel", "distributed.finalize_model_grads",
    "optimizer.optimizer", "optimizer.grad_scaler", "optimizer.clip_grads", "models.mimo.optimizer")]
b, s, p, buf, ddp, fin, opt, gs, clip, mimo = mods
f16 = opt.Float16OptimizerWithFloat16Params
import stagescope_torch.megatron as ssm
def state():
    return [b.dist] + [m.torch for m in mods] + [clip.l2_norm_impl, f16.__dict__["__init__"]]
original = state()
before = (torch.cuda.current_device, torch.cuda.synchronize, torch.cuda.current_stream)
assert original[:11] == [dist] + [torch] * 10, "patched at import"
names = ssm.enable_cpu()
print(",".join(names))
assert ssm.enable_cpu() == names  # idempotent
assert s.torch.zeros([], device="cuda").device.type == "cpu"
assert p.torch.cuda.current_device() == "cpu" and b.torch.cuda.synchronize() is None
assert buf.torch.cuda.current_stream().wait_stream(None) is None
assert (torch.cuda.current_device, torch.cuda.synchronize, torch.cuda.current_stream) == before
ssm.disable_cpu()
assert state() == original, "not restored"
print("ok")
"""
        r = subprocess.run([self.python, "-c", code], env=megatron_env(), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        core = "megatron.core."
        self.assertEqual(r.stdout.split(), [",".join(core + n for n in (
            "pipeline_parallel.bridge_communicator.dist", "pipeline_parallel.schedules.torch",
            "pipeline_parallel.p2p_communication.torch",
            "pipeline_parallel.bridge_communicator.torch",
            "distributed.param_and_grad_buffer.torch",
            "distributed.distributed_data_parallel.torch", "distributed.finalize_model_grads.torch",
            "optimizer.optimizer.torch", "optimizer.grad_scaler.torch", "optimizer.clip_grads.torch",
            "optimizer.clip_grads.l2_norm_impl", "models.mimo.optimizer.torch",
            "optimizer.optimizer.Float16OptimizerWithFloat16Params.__init__")), "ok"])


class MegatronUnequalDepthHang(MegatronCase):
    def test_megatron_unequal_depth_hang(self):
        run = os.path.join(self.tmp, "hang.db")
        env = megatron_env(run, "stats")
        env["STAGESCOPE_HANG_TIMEOUT"] = str(HANG_TIMEOUT_S)
        t0 = time.monotonic()
        log = open(os.path.join(self.tmp, "job.log"), "wb")  # a file: a pipe nobody reads fills up
        self.addCleanup(log.close)
        job = subprocess.Popen(self.cmd(5, UNEQUAL + ["--backend", "stagescope", "--out",
                                                      os.path.join(self.tmp, "o")]),
                               env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
        waiting = []
        try:
            deadline = time.monotonic() + 150  # start-up is seconds; a busy machine may take a minute
            while time.monotonic() < deadline and job.poll() is None:
                # the deadlock's two ends: audio (rank 2) sends into the bridge, the llm's first
                # stage (rank 3) blocks in its combined send-gradient/receive-activation
                waiting = [r for r in range(5) if waits_of(f"{run}.rank{r}.shard")]
                if {2, 3} <= set(waiting):
                    break
                time.sleep(0.5)
            detected = time.monotonic() - t0
            if job.poll() is not None:
                with open(log.name, "rb") as f:
                    self.fail("the unequal-depth job ended on its own; Megatron 0.19.2 deadlocks on "
                              "it:\n" + f.read().decode(errors="replace")[-3000:])
            self.assertTrue({2, 3} <= set(waiting), f"ranks with a waits row: {waiting}")
            print(f"hang recorded {detected:.1f} s after launch (hang timeout {HANG_TIMEOUT_S} s)")
        finally:
            stop_job(job)  # the launcher kills its ranks
        m = stagescope("merge", run)
        self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
        self.assertIn("run hung", m.stdout)
        # the cause leads the verdict: Megatron's own schedule (declared) against the plan, §7.5
        cause = ("audio stage 0 (rank 2): the job's warmup is 3 where the plan has 2; the job "
                 "places it at global stage 0 of 4, the plan at 1 of 4 (§7.5")
        self.assertIn("run hung: cause: " + cause, m.stdout)
        self.assertIn("to change: the job's schedule where it parts from the plan", m.stdout)
        print(m.stdout.strip().splitlines()[-1])  # the verdict line, as the tutorial quotes it
        waits = {w["rank"]: w for w in rows(run, "SELECT * FROM waits")}
        self.assertEqual((waits[2]["op"], waits[2]["peer"], waits[2]["edge"], waits[2]["direction"]),
                         ("send", 3, "bridge:audio->llm:stage0->stage1", "activation"))
        self.assertEqual(waits[3]["peer"], 2)
        # each rank's watchdog wrote its wait within a few seconds of the hang timeout
        for w in waits.values():
            self.assertEqual(w["timeout_s"], HANG_TIMEOUT_S)
            waited = float(re.search(r"not complete after ([0-9.]+) s", w["error"]).group(1))
            self.assertLess(waited, HANG_TIMEOUT_S + 5, w)
        c = stagescope("check", run)
        self.assertEqual(c.returncode, 10, c.stdout + c.stderr)
        self.assertIn("status hung", c.stdout)
        self.assertIn("cycle rank 2 -> rank 3 -> rank 2", c.stdout)
        self.assertIn("FAIL  plan_order", c.stdout)
        self.assertIn("the job's own schedule differs from the plan: " + cause, c.stdout)
        # where each rank stopped against the plan: audio in the plan's SF_RB with only its send
        # (check's text: a long summary continues one clause per line)
        self.assertIn("rank 2 (audio stage 0) stopped in iteration 0 at its communication action #2 "
                      "(SF_RB: send the activation of microbatch 2 to rank 3, receive the gradient of "
                      "microbatch 0 from rank 3)\n        recorded of it: send the activation of "
                      "microbatch 2 to rank 3, the job waiting to send the activation of microbatch 2 "
                      "to rank 3", c.stdout)
        # the stored verdict is one first line: the cause up to the section it cites
        reason = rows(run, "SELECT status_reason FROM run")[0]["status_reason"]
        self.assertTrue(reason.startswith("cause: " + cause + ")"), reason)
        self.assertLessEqual(len(reason), 220, reason)
        # audio's third payload (microbatch 2: shape messages are recorded as such and never
        # shift the count) against the llm's first gradient's shape, both on the audio bridge
        self.assertIn("rank 2 waits to send the activation of microbatch 2 to rank 3;", c.stdout)
        self.assertIn("rank 3 waits to send the shape of the gradient of microbatch 0 to rank 2;",
                      c.stdout)
        self.assertIn("rank 2 has not posted the receive of the shape of the gradient of microbatch "
                      "0 from rank 3 (edge bridge:audio->llm:stage0->stage1#shape, iteration 0)",
                      c.stdout)


class MegatronFanIn(MegatronCase):
    def test_megatron_fan_in(self):
        run = os.path.join(self.tmp, "fanin.db")
        captured = self.launch(4, FAN_IN, "stagescope", run)
        self.assertEqual([r["stages"] for r in captured],
                         [{"vision": [0, 1, 0, 2]}, {"vision": [0, 1, 1, 2]}, {"llm": [0, 2, 0, 1]},
                          {"llm": [1, 2, 0, 1]}])
        for k in captured[0]["params"]:  # the replicas stay equal (mean gradient)
            self.assertTrue(torch.equal(captured[0]["params"][k], captured[1]["params"][k]), k)
        out = self.merge_and_check(run)
        self.assertIn("result: all checks passed", out)
        # a 2->1 fan-in follows the plan (one receive per encoder replica in the llm's RF)
        self.assertIn("4 ranks, 2 iterations, 4 following the plan to the end, 0 deviating", out)
        sends = rows(run, "SELECT edge, src_rank, dst_rank, shape, count(*) AS n FROM transfers "
                          "WHERE side = 'send' AND dtype = 'float32' GROUP BY 1, 2, 3, 4")
        # the bridge group is ranks 0, 1, 2: group ranks name the edges; half a batch per replica
        self.assertEqual({(t["edge"], t["src_rank"], t["dst_rank"], t["shape"], t["n"]) for t in sends},
                         {("bridge:vision->llm:stage0->stage2", 0, 2, "4,1,8", 8),
                          ("bridge:vision->llm:stage0->stage2", 2, 0, "4,1,8", 8),
                          ("bridge:vision->llm:stage1->stage2", 1, 2, "4,1,8", 8),
                          ("bridge:vision->llm:stage1->stage2", 2, 1, "4,1,8", 8),
                          ("llm_pp:stage0->stage1", 2, 3, "4,2,8", 8),
                          ("llm_pp:stage0->stage1", 3, 2, "4,2,8", 8)})
        # §7.1 measured by stagescope itself: the same job on one encoder replica (vision pp1 ->
        # llm pp2), aligned by parameter name; the job averages the replicas' gradients over the
        # encoder's own dp (2) where the llm's dp is 1, so vision's are half the twin's
        twin = os.path.join(self.tmp, "twin.db")
        self.launch(3, CONFORMING, "stagescope", twin)
        self.assertEqual(stagescope("merge", twin).returncode, 0)
        cmp = stagescope("compare", run, twin)
        self.assertIn("- Uniform gradient ratio: vision: A's gradients are 0.5 x B's in all 2 of its "
                      "parameters in iteration 0 (by norms;", cmp.stdout)
        self.assertIn("the data-parallel factor d_L/d_E: 1/2 in A's layout, 1 in B's (§7.1", cmp.stdout)
        self.assertNotIn("ratio: llm:", cmp.stdout)  # the llm's gradients are the twin's
        reduces = rows(run, "SELECT rank, group_ranks FROM collectives WHERE op = 'all_reduce' "
                            "AND group_name = 'vision_dp'")
        self.assertEqual(sorted({(c["rank"], c["group_ranks"]) for c in reduces}), [(0, "0,1"), (1, "0,1")])
        self.assertEqual(len(reduces), 2 * 2 * 2)  # ranks x steps x (weight, bias)

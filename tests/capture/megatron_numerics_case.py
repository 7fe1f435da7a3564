"""Megatron-Core 0.19.2's real training path on CPU (Megatron DDP per module, the schedule's
finalize_model_grads_func, MimoOptimizer with float16 optimizers and dynamic grad scalers),
recorded through the stagescope backend with stagescope_torch.megatron.audited_finalize and
audited_step, judged by `check` from the one capture (megatron_numerics_job.py: vision dp2 ->
llm dp1 on 3 ranks).

Three upstream bugs of 2026, each as a buggy job whose capture fails `check` alone with its
named cause, next to a fixed job that passes:

- encoder gradients averaged over the encoder's own dp (Megatron-Bridge PR #4066; megatron-core
  0.19.2's per-module finalize_model_grads): "x 0.5", cause §7.1;
- modules disagreeing on calculate_per_token_loss (Megatron-Bridge PR #5555): also "x 0.5" in
  this layout, named as the normalisation mismatch, never as §7.1;
- FP16 loss scalers that part after an encoder-only overflow (Megatron-Bridge PR #5591,
  megatron-core 0.19.2's MimoOptimizer): named at the iteration and module where they part; the
  handled (skipped) overflow itself is an event, not a `nonfinite` failure.
"""

import os
import re
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_util import JOB_TIMEOUT_S, stagescope  # noqa: E402
from megatron_multimodule_case import MegatronCase, megatron_env  # noqa: E402
from test_capture import HERE  # noqa: E402

JOB = os.path.join(HERE, "megatron_numerics_job.py")
MISMATCH = ["--llm-per-token", "1", "--vision-per-token", "0"]
OVERFLOW = ["--fp16", "--overflow-at", "1", "--steps", "3"]


class MegatronNumerics(MegatronCase):
    def capture(self, name, args, level="stats"):
        """Runs the job under capture at `level`; returns (check's exit code, its output)."""
        run = os.path.join(self.tmp, f"{name}.db")
        r = subprocess.run(
            [self.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3", JOB,
             "--backend", "stagescope", "--out", os.path.join(self.tmp, name)] + args,
            env=megatron_env(run, level), capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, f"{name}: job failed:\n{r.stdout[-3000:]}\n{r.stderr[-4000:]}")
        m = stagescope("merge", run)
        self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
        c = stagescope("check", run)
        self.runs = getattr(self, "runs", {})
        self.runs[name] = run
        # check's text continues a long summary one clause per line (8 spaces, no "- "): joined
        # back with "; ", its summaries read as the clauses these assertions quote
        return c.returncode, re.sub(r"\n {8}(?!- )", "; ", c.stdout + c.stderr)

    def assert_passes(self, name, args, judged, level="stats"):
        """`judged`: the reduced gradients the audit must have judged (vision's 2 parameters and
        llm's 2 per iteration, less those of a handled overflow)."""
        code, out = self.capture(name, args, level)
        self.assertEqual(code, 0, f"{name}: the fixed job must pass check:\n{out}")
        self.assertIn(f"gradient audit: {judged} reduced gradients judged", out)
        return out

    def assert_fails(self, name, args, level="stats"):
        code, out = self.capture(name, args, level)
        self.assertRegex(out, r"FAIL  reference_gradient  \(exit 17\)", f"{name}:\n{out}")
        if level == "full":
            # At level full a capture's run_status also fails today: it expects the input rows
            # of an engine run (issue 38 item 7, fixed on another branch); 17 once that lands.
            self.assertIn(code, (10, 17), f"{name}:\n{out}")
        else:
            self.assertEqual(code, 17, f"{name}: the buggy job must fail reference_gradient:\n{out}")
        return out

    def test_megatron_numerics(self):
        # §7.1: megatron-core 0.19.2's per-module finalize (each DDP averages over its own dp)
        # (with overlap_grad_reduce: DDP reduces from the backward hooks, before finalize; the
        # gradients before the reduction are recorded in each bucket group's start_grad_sync)
        out = self.assert_fails("own_dp", ["--finalize", "own_dp", "--overlap-grad-reduce", "1"],
                                level="full")
        self.assertIn("gradient audit: vision iteration 0: the reduced gradients are 0.5 x the sum "
                      "over its 2 replicas / llm's dp 1 (llm's loss is a mean) in all 2 parameters "
                      "(by values); cause: vision averaged over its own dp 2 instead of llm's dp 1: "
                      "the factor d_L/d_E = 1/2 (docs/schedule.md §7.1", out)
        self.assertNotIn("normalise the loss differently", out)
        # ... fixed: scaled by d_E/d_L after finalize (Megatron-Bridge PR #4066)
        fixed = self.assert_passes("own_dp_fixed", ["--finalize", "module_local",
                                                    "--overlap-grad-reduce", "1"], 8)
        # llm (one replica, a mean loss: c = 1) bitwise by checksums, vision by element sums
        self.assertIn("(4 bitwise by checksums (one replica, c = 1), 4 by element sums (level "
                      "stats records no values))", fixed)

        # PR #5555: llm per-token, vision mean, corrected as if vision summed like the llm:
        # the same 0.5 here, named by the recorded normalisation (level stats: element sums)
        out = self.assert_fails("per_token", ["--finalize", "language_branch"] + MISMATCH)
        self.assertIn("gradient audit: vision iteration 0: the reduced gradients are 0.5 x the sum "
                      "over its 2 replicas / the global token count 16 (llm's loss is per-token) in "
                      "all 2 parameters (by element sums: level stats records no values); cause: "
                      "the modules normalise the loss differently: vision records mean "
                      "(calculate_per_token_loss off: its DDP averages over its dp 2), llm "
                      "per_token; a correction that assumes vision reduced like llm leaves x 0.5 "
                      "(Megatron-Bridge PR #5555", out)
        self.assertNotIn("§7.1", out)

        # PR #5591: an encoder-only overflow in iteration 1; each scaler updates from its own
        # found-inf (megatron-core 0.19.2's MimoOptimizer): [4, 8] from then on
        out = self.assert_fails("scalers", ["--finalize", "module_local", "--scalers",
                                            "independent"] + OVERFLOW)
        self.assertIn("loss scale: iteration 1: the loss scales part in this step's scaler update: "
                      "vision's becomes 4, llm's 8 (from 8); vision found Inf/NaN in its own "
                      "gradients, the others did not: each module's scaler updated from its own "
                      "found-inf, not the world's (Megatron-Bridge PR #5591", out)
        self.assertRegex(out, r"nonfinite\s+\(exit 16\)\s+\S*\s*\d+ tensors scanned; \d+ non-finite "
                              r"gradients of a handled overflow not counted \(an event, not a "
                              r"failure: iteration 1, vision found Inf/NaN and every module "
                              r"skipped the step\)")
        self.assertEqual(self.loss_scales(self.runs["scalers"], 2), {"vision": 4.0, "llm": 8.0})

        # the fixed job of both: per-module normalisation (PR #5555) and one scaler update from
        # the world-wide found-inf (PR #5591), with the same overflow, handled
        out = self.assert_passes("fixed", ["--finalize", "module_local", "--scalers", "synced"]
                                 + MISMATCH + OVERFLOW, 11)
        self.assertIn("(11 by element sums (level stats records no values)), 1 not judged; vision "
                      "iteration 1: non-finite values", out)
        self.assertIn("1 overflow handled (an event, not a failure): iteration 1: vision found "
                      "Inf/NaN, every module skipped the step", out)
        self.assertEqual(self.loss_scales(self.runs["fixed"], 2), {"vision": 4.0, "llm": 4.0})

    def test_bad_helper_input_is_one_line(self):
        """record_module_step refuses a normalisation outside its vocabulary in one line, also
        when nothing is being recorded."""
        r = subprocess.run([self.python, "-c", "import stagescope_torch as s; "
                            "s._C.record_module_step('vision', normalisation='median')"],
                           env=megatron_env(), capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stderr.strip().splitlines()[-1],
                         "ValueError: record_module_step(normalisation='median'): expected mean "
                         "or per_token")

    def loss_scales(self, run, iteration):
        with sqlite3.connect(run) as db:
            return {m: s for m, s in db.execute(
                "SELECT module, loss_scale FROM module_steps WHERE iteration = ? AND loss_scale "
                "IS NOT NULL", (iteration,))}

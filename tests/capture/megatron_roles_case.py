"""Message roles (docs/capture.md "Message roles"): megatron-core 0.19.2's batched P2P exchange on
a pipeline group of two ranks pairs one rank's gradient with the other's activation receive
(Megatron-LM PR #5271); shapes and checksums agree on every message, so only what each side
meant tells.  The buggy job (batch_p2p_comm=True) fails `check` with both ranks and the call
named; its twin (batch_p2p_comm=False, the exchange ordered by rank parity) passes."""

import os
import subprocess

import torch

from capture_util import JOB_TIMEOUT_S, rows, stagescope
from megatron_multimodule_case import MegatronCase, megatron_env
from test_capture import HERE

ROLES_JOB = os.path.join(HERE, "megatron_roles_job.py")


class MegatronMessageRoles(MegatronCase):
    def roles_run(self, batch_p2p):
        run = os.path.join(self.tmp, f"roles-batch{batch_p2p}.db")
        out = os.path.join(self.tmp, f"out{batch_p2p}")
        cmd = [self.python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               ROLES_JOB, "--batch-p2p", str(batch_p2p), "--out", out]
        r = subprocess.run(cmd, env=megatron_env(run), capture_output=True, text=True,
                           timeout=JOB_TIMEOUT_S)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        crossed = [torch.load(os.path.join(out, f"rank{k}.pt"), weights_only=False)["crossed"]
                   for k in range(2)]
        m = stagescope("merge", run)
        self.assertEqual(m.returncode, 0, m.stdout + m.stderr)
        return run, crossed, stagescope("check", run)

    def test_crossed_exchange_is_named(self):
        run, crossed, c = self.roles_run(1)
        # the job itself took its peer's gradient as its activation, on both ranks, every step
        self.assertEqual(crossed, [[True, True], [True, True]])
        # every message agrees in shape and checksum: only the roles tell
        self.assertIn("PASS  shape_mismatch", c.stdout)
        self.assertIn("PASS  checksum_mismatch", c.stdout)
        self.assertEqual(c.returncode, 11, c.stdout)
        self.assertIn("FAIL  unmatched_transfer", c.stdout)
        self.assertIn("message role: crossed: the two sides mean different tensors: rank 0 sent a "
                      "gradient to the previous stage (send_forward_backward_recv_forward_backward); "
                      "rank 1 received an activation from the previous stage "
                      "(send_forward_backward_recv_forward_backward)", c.stdout)
        roles = rows(run, "SELECT count(*) AS n FROM message_roles")[0]["n"]
        self.assertEqual(roles, 2 * 2 * 4)  # 2 steps x 2 ranks x 4 messages each

    def test_twin_takes_every_message_in_its_role(self):
        run, crossed, c = self.roles_run(0)
        self.assertEqual(crossed, [[False, False], [False, False]])
        self.assertEqual(c.returncode, 0, c.stdout)
        self.assertIn("with a role recorded on both sides, all taken in their role", c.stdout)

"""Collectives of a real captured job drawn as spans across their group: in the Chrome trace
(a slice per member, flow arrows tying the members) and in the viewer (a bar per member, a band
across the group's rows, the inspector saying whether the members' results agree).

The job: tests/capture/p2p_pipeline_job.py on 4 ranks, 2 pipelines of 2 stages x 2 data-parallel
replicas: per step two dp all_reduces on each of the two "dp" groups ({0,2} and {1,3}: same name,
different members), one world all_reduce of the loss, and a final world barrier.
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from capture_util import read_png, read_probes, rows, stagescope  # noqa: E402
from test_capture import P2P_JOB, CaptureCase  # noqa: E402

TEAL = (70, 200, 190)   # ui/CollectiveLayer.cpp kCollective
WHITE = (255, 255, 255)  # the selected instance's band
GOOD = (110, 200, 120)  # theme::kGood: "agree" in the inspector


def share(img, x0, y0, x1, y1, colour, tol=12):
    """Share of the pixels of [x0, x1) x [y0, y1) within `tol` of `colour`."""
    h, w = img.shape[:2]
    x0, x1 = max(0, int(x0)), min(w, int(x1))
    y0, y1 = max(0, int(y0)), min(h, int(y1))
    if x1 <= x0 or y1 <= y0:
        return 0.0
    region = img[y0:y1, x0:x1, :3].astype(int)
    close = (abs(region - colour) <= tol).all(axis=2)
    return float(close.mean())


def instance_order(colls):
    """The viewer's instance order (analysis::collectiveInstances): iteration, group name,
    members, number on the group."""
    keys = {(c["iteration"], c["group_name"], tuple(int(r) for r in c["group_ranks"].split(",")),
             c["group_seq"]) for c in colls}
    return sorted(keys)


class CollectivesAcrossTheGroup(CaptureCase):
    def test_collectives_view(self):
        run = os.path.join(self.tmp, "coll.db")
        self.run_job(P2P_JOB, 4, ["--pp", "2", "--steps", "2", "--microbatches", "2"], "stagescope",
                     run=run, level="stats")
        self.merge_and_check(run)
        colls = rows(run, "SELECT * FROM collectives")
        order = instance_order(colls)
        members = {}
        for c in colls:
            k = (c["iteration"], c["group_name"], tuple(int(r) for r in c["group_ranks"].split(",")),
                 c["group_seq"])
            members.setdefault(k, []).append(c)
        self.assertEqual(len(order), 2 * (4 + 1) + 1)  # per step 4 dp + 1 world; one barrier

        # The trace: one slice per member, members - 1 arrows per instance, agreement per slice.
        trace_path = os.path.join(self.tmp, "coll.json")
        e = stagescope("export", run, "--chrome-trace", trace_path)
        self.assertEqual(e.returncode, 0, e.stdout + e.stderr)
        with open(trace_path) as f:
            events = [x for x in json.load(f)["traceEvents"] if x.get("cat") == "collective"]
        slices = [x for x in events if x["ph"] == "X"]
        self.assertEqual(len(slices), len(colls))
        self.assertEqual(sum(1 for x in events if x["ph"] == "s"),
                         sum(len(m) - 1 for m in members.values()))
        for x in slices:
            want = "agree" if x["args"]["op"] == "all_reduce" else "not compared (per-member results)"
            self.assertEqual(x["args"]["agreement"], want, x)
            self.assertEqual(x["args"]["members_recorded"], len(x["args"]["group_ranks"]), x)

        # The viewer: select the world all_reduce of iteration 0 and look at the pixels.
        world = order.index(next(k for k in order if k[0] == 0 and k[1] == "world"))
        shot = os.path.join(self.tmp, "coll.png")
        gui = os.environ.get("STAGESCOPE_GUI")
        if not gui:
            self.skipTest("STAGESCOPE_GUI (the viewer executable) is not set")
        if subprocess.run(["sh", "-c", "command -v xvfb-run"], capture_output=True).returncode != 0:
            self.skipTest("xvfb-run is not installed")
        env = dict(os.environ, XDG_CONFIG_HOME=os.path.join(self.tmp, "config"))
        # Two pictures in one session: zoomed to the selected instance, then the whole run
        # (zoomed in, how many other instances fall inside the window depends on the timing).
        fit = os.path.join(self.tmp, "coll-fit.png")
        cmd = ["xvfb-run", "-a", "-s", "-screen 0 1600x1000x24", gui, run, "--size", "1600x1000",
               "--script", "frames 3", "--script", "zoom-fit", "--script", f"select-collective {world}",
               "--script", "frames 3", "--script", f"screenshot {shot}", "--script", "frames 3",
               "--script", "zoom-fit", "--script", "frames 3", "--screenshot", fit]
        g = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(g.returncode, 0, g.stdout + g.stderr)
        img = read_png(shot)
        probes = read_probes(shot + ".probes")
        timeline = probes["timeline"][0]
        bars = [p for p in probes.get("collective", []) if int(p[0]) == world]
        # one bar per member, on four different rows, filled in the collective colour
        self.assertEqual(sorted(int(b[1]) for b in bars), [0, 1, 2, 3], bars)
        self.assertEqual(len({b[3] for b in bars}), 4, bars)
        for _, rank, x0, y0, x1, y1, *_ in bars:
            x0, x1 = max(x0, timeline[0] + 200), min(x1, timeline[2])  # visible part
            self.assertGreater(share(img, x0 + 3, y0 + 3, x1 - 3, y1 - 3, TEAL), 0.5,
                               f"rank {int(rank)}'s bar at {x0:.0f},{y0:.0f}")
        # the band ties the four rows together: a white line from the top bar to the bottom one
        bands = [p for p in probes.get("collective-band", []) if int(p[0]) == world]
        self.assertEqual(len(bands), 1, probes.get("collective-band"))
        _, bx, by0, _, by1, r, g_, b = bands[0]
        self.assertEqual((r, g_, b), WHITE)
        self.assertLessEqual(by0, min(b[3] for b in bars) + 1)
        self.assertGreaterEqual(by1, max(b[5] for b in bars) - 1)
        self.assertGreater(share(img, bx - 1, by0, bx + 2, by1, WHITE, tol=30), 0.6)
        # seen whole, the other instances' bands are drawn too, in the collective colour
        fit_bands = read_probes(fit + ".probes").get("collective-band", [])
        self.assertTrue(any(int(p[0]) != world and tuple(p[5:8]) == TEAL for p in fit_bands),
                        fit_bands)
        # the inspector says the results agree (in green) and lists the members
        ins = probes["inspector"][0]
        green = share(img, ins[0], ins[1], ins[2], ins[3], GOOD, tol=20) * (ins[2] - ins[0]) * (ins[3] - ins[1])
        self.assertGreater(green, 15, "no 'agree' in the inspector")

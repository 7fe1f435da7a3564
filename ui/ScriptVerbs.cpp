// The script verbs' table (ScriptVerbs.h): runScriptCommand dispatches through it and
// scriptCommandHelp() is written from it.
#include "ui/ScriptVerbs.h"

#include <algorithm>
#include <string_view>

#include "ui/ScriptTarget.h"
#include "ui/Viewer.h"

namespace stagescope::ui {
namespace {

using Call = ScriptCall;

constexpr bool kNoRun = false, kRun = true;  // ScriptVerb::needsRun

// Reads a path; fails without one.
bool readPath(Call& c, std::string* p) {
  c.in >> *p;
  return c.need(!p->empty(), "expected a path");
}

std::string noRunNote(const std::string& loadError) {
  return loadError.empty() ? std::string() : " (" + loadError + ")";
}

// Opening runs, and the script runner's own verb.
std::vector<ScriptVerb> fileVerbs() {
  return {
      {"frames", "N", "draw N frames before the next command", kNoRun, nullptr},
      {"open", "PATH", "open a run file", kNoRun,
       [](ScriptTarget& v, Call& c) {
         std::string p;
         c.in >> p;
         v.open(p);
         return c.need(!p.empty(), "expected a path");
       }},
      {"open-compare", "PATH", "open a second run and align it with the open run", kNoRun,
       [](ScriptTarget& v, Call& c) {
         std::string p;
         if (!readPath(c, &p)) return false;
         if (!c.need(v.run() || v.loading(),
                     "no run is open to compare with" + noRunNote(v.loadError())))
           return false;
         v.openCompare(p);
         return true;
       }},
  };
}

// The replay and the timeline's range.
std::vector<ScriptVerb> navigationVerbs() {
  return {
      {"step", "N", "move the replay", kRun,
       [](ScriptTarget& v, Call& c) {
         int64_t n = 0;
         return c.need(static_cast<bool>(c.in >> n), "expected a step number") &&
                (v.navigator().stepTo(n), true);
       }},
      {"next-mb", "", "move the replay", kRun,
       [](ScriptTarget& v, Call& c) {
         return v.navigator().stepTo(c.run->replay.nextMicrobatch(v.state().step)), true;
       }},
      {"next-iter", "", "move the replay", kRun,
       [](ScriptTarget& v, Call& c) {
         return v.navigator().stepTo(c.run->replay.nextIteration(v.state().step)), true;
       }},
      {"first", "", "move the replay", kRun,
       [](ScriptTarget& v, Call&) { return v.navigator().stepTo(0), true; }},
      {"last", "", "move the replay", kRun,
       [](ScriptTarget& v, Call& c) {
         return v.navigator().stepTo(static_cast<int64_t>(c.run->replay.size())), true;
       }},
      {"play", "", "replay playback", kRun,
       [](ScriptTarget& v, Call&) { return v.state().playing = true, true; }},
      {"pause", "", "replay playback", kRun,
       [](ScriptTarget& v, Call&) { return v.state().playing = false, true; }},
      {"zoom-fit", "", "timeline range (A, B in ms from the run's start)", kRun,
       [](ScriptTarget& v, Call&) { return v.navigator().zoomFit(), true; }},
      {"zoom", "A B", "timeline range (A, B in ms from the run's start)", kRun,
       [](ScriptTarget& v, Call& c) {
         double t0 = 0, t1 = 0;
         if (!c.need(static_cast<bool>(c.in >> t0 >> t1), "expected start and end in ms"))
           return false;
         const double base = static_cast<double>(c.run->model.minTimeNs);
         v.navigator().zoomTo(base + t0 * 1e6, base + t1 * 1e6);
         return true;
       }},
      {"plan", "", "planned-schedule overlay, follow the replay", kRun,
       [](ScriptTarget& v, Call&) { return v.state().showPlan = true, true; }},
      {"follow", "", "planned-schedule overlay, follow the replay", kRun,
       [](ScriptTarget& v, Call&) { return v.state().followReplay = true, true; }},
  };
}

// Selecting a record.
std::vector<ScriptVerb> selectionVerbs() {
  // Selects `s`, moving the view to it (`navigate`); always succeeds.
  static constexpr auto pick = [](ScriptTarget& v, const Selection& s, bool navigate) {
    v.navigator().select(s, navigate);
    return true;
  };
  return {
      {"select-action", "RANK I", "select action I of RANK (and zoom to it)", kRun,
       [](ScriptTarget& v, Call& c) {
         int rank = -1;
         int64_t i = -1;
         c.in >> rank >> i;
         const auto& actions = c.run->model.actions;
         return c.need(rank >= 0 && rank < static_cast<int>(actions.size()) && i >= 0 &&
                           i < static_cast<int64_t>(actions[rank].size()),
                       "no such action") &&
                pick(v, {Selection::Kind::Action, rank, i}, true);
       }},
      {"select-transfer", "I", "select a record by index", kRun,
       [](ScriptTarget& v, Call& c) {
         int64_t i = -1;
         c.in >> i;
         const auto& transfers = c.run->model.transfers;
         return c.need(i >= 0 && i < static_cast<int64_t>(transfers.size()), "no such transfer") &&
                pick(v, {Selection::Kind::Transfer, transfers[i].rank, i}, true);
       }},
      {"select-gradient", "I", "select a record by index", kRun,
       [](ScriptTarget& v, Call& c) {
         int64_t i = -1;
         c.in >> i;
         const auto& gradients = c.run->model.gradients;
         return c.need(i >= 0 && i < static_cast<int64_t>(gradients.size()), "no such gradient") &&
                pick(v, {Selection::Kind::Gradient, gradients[i].rank, i}, false);
       }},
      {"select-collective", "I",
       "select collective instance I (captured runs; order:\n"
       "iteration, group, members, number) and zoom to it",
       kRun,
       [](ScriptTarget& v, Call& c) {
         int64_t i = -1;
         c.in >> i;
         const auto& all = c.run->collectives.instances;
         if (!c.need(i >= 0 && i < static_cast<int64_t>(all.size()), "no such collective"))
           return false;
         const auto& first = c.run->model.collectives[all[static_cast<size_t>(i)].members.front()];
         return pick(v, {Selection::Kind::Collective, first.rank, i}, true);
       }},
      {"select-mismatch", "", "select the first transfer whose checksums differ", kRun,
       [](ScriptTarget& v, Call& c) {
         for (const auto& p : c.run->model.pairs)
           if (p.recv >= 0 && !p.checksumMatches)
             return pick(
                 v, {Selection::Kind::Transfer, c.run->model.transfers[p.recv].rank, p.recv}, true);
         return c.need(false, "no transfer with mismatching checksums");
       }},
      {"select-local", "[N]", "select the N-th (default 0) local hand-off (colocated modules)",
       kRun,
       [](ScriptTarget& v, Call& c) {
         // A local hand-off: a send between two modules of one colocated rank.
         int64_t n = 0;
         c.in >> n;
         const auto& transfers = c.run->model.transfers;
         for (size_t i = 0; i < transfers.size(); ++i) {
           const auto& t = transfers[i];
           if (t.side != events::Side::Send || !model::isLocalHandOff(t) || n-- > 0) continue;
           return pick(v, {Selection::Kind::Transfer, t.rank, static_cast<int64_t>(i)}, true);
         }
         return c.need(false, "no such local hand-off");
       }},
  };
}

// Jumping to a problem, or listing problems in Find.
std::vector<ScriptVerb> jumpVerbs() {
  static constexpr auto findWith = [](ScriptTarget& v, FindQuery query, bool replace) {
    if (replace) {
      v.state().find = query;
      v.state().findDirty = true;
    }
    v.navigator().showTab(BottomTab::Find);
    return true;
  };
  return {
      {"jump-nonfinite", "", "select the causally first NaN/Inf record", kRun,
       [](ScriptTarget& v, Call& c) {
         return c.need(v.navigator().showNonFinite(), "the run has no NaN/Inf record");
       }},
      {"jump-divergence", "", "select the first divergence from the compare run", kRun,
       [](ScriptTarget& v, Call& c) {
         return c.need(v.navigator().showDivergence(), "no compare run or no divergence");
       }},
      {"jump-stuck", "",
       "select the stuck operation of the root rank (a killed rank\n"
       "first) and explain it in the inspector",
       kRun,
       [](ScriptTarget& v, Call& c) {
         return c.need(v.navigator().showStuck(), "no rank is stuck or unfinished");
       }},
      {"find", "", "open Find (with that filter)", kRun,
       [](ScriptTarget& v, Call&) { return findWith(v, FindQuery{}, false); }},
      {"find-mismatch", "", "open Find (with that filter)", kRun,
       [](ScriptTarget& v, Call&) {
         FindQuery q;
         q.mismatch = true;
         return findWith(v, q, true);
       }},
      {"find-nonfinite", "", "open Find (with that filter)", kRun,
       [](ScriptTarget& v, Call&) {
         FindQuery q;
         q.nanInf = true;
         return findWith(v, q, true);
       }},
  };
}

// The window: its tabs, screenshots, closing it.
std::vector<ScriptVerb> windowVerbs() {
  static constexpr auto showTab = [](ScriptTarget& v, BottomTab tab) {
    v.navigator().showTab(tab);
    return true;
  };
  return {
      {"tab", "grid|plots|compare|find|info", "show a bottom tab", kNoRun,
       [](ScriptTarget& v, Call& c) {
         std::string t;
         c.in >> t;
         static const char* names[] = {"grid", "plots", "compare", "find", "info"};
         for (int i = 0; i < 5; ++i)
           if (t == names[i]) return showTab(v, static_cast<BottomTab>(i));
         return c.need(false, "tab is one of grid, plots, compare, find, info");
       }},
      {"screenshot", "PATH", "write a PNG of the window (and PATH.probes)", kNoRun,
       [](ScriptTarget& v, Call& c) {
         std::string p;
         c.in >> p;
         v.requestScreenshot(p);
         return c.need(!p.empty(), "expected a path");
       }},
      {"quit", "", "close the viewer", kNoRun,
       [](ScriptTarget& v, Call&) {
         v.quit();
         return true;
       }},
  };
}

}  // namespace

const std::vector<ScriptVerb>& scriptVerbs() {
  static const std::vector<ScriptVerb> verbs = [] {
    std::vector<ScriptVerb> all;
    for (auto group : {fileVerbs, navigationVerbs, selectionVerbs, jumpVerbs, windowVerbs}) {
      const std::vector<ScriptVerb> rows = group();
      all.insert(all.end(), rows.begin(), rows.end());
    }
    return all;
  }();
  return verbs;
}

bool runScriptCommand(ScriptTarget& target, const std::string& command, std::string* error) {
  std::istringstream in(command);
  std::string verb;
  in >> verb;
  ScriptCall call{in, command, error, target.run()};
  const auto& verbs = scriptVerbs();
  const auto it = std::find_if(verbs.begin(), verbs.end(),
                               [&](const ScriptVerb& v) { return v.run && verb == v.name; });
  const ScriptVerb* v = it == verbs.end() ? nullptr : &*it;
  if (v && !v->needsRun) return v->run(target, call);
  if (!call.need(call.run != nullptr, "no run is open" + noRunNote(target.loadError())))
    return false;
  if (v) return v->run(target, call);
  return call.need(false, "unknown command");
}

const char* scriptCommandHelp() {
  static const std::string help = [] {
    std::string out =
        "script commands (--script CMD, repeatable; each waits until loading has finished):\n";
    const auto& verbs = scriptVerbs();
    for (size_t i = 0; i < verbs.size();) {
      // Consecutive verbs with the same help: one line, "a ARGS | b | c".
      std::string usage;
      size_t j = i;
      for (; j < verbs.size() && std::string_view(verbs[j].help) == verbs[i].help; ++j) {
        if (!usage.empty()) usage += " | ";
        usage += verbs[j].name;
        if (*verbs[j].args) usage += std::string(" ") + verbs[j].args;
      }
      // The help in a column: at 27 after one verb, at 42 (3 blanks at least) after several.
      usage.resize(usage.size() < 24 ? 25 : std::max<size_t>(40, usage.size() + 3), ' ');
      std::string text = verbs[i].help;
      for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 1))
        text.insert(at + 1, 27, ' ');
      out += "  " + usage + text + "\n";
      i = j;
    }
    return out;
  }();
  return help.c_str();
}

}  // namespace stagescope::ui

// The script verbs' table (ScriptVerbs.h): App::runCommand dispatches through it and
// scriptCommandHelp() is written from it.
#include "ui/ScriptVerbs.h"

#include <algorithm>
#include <string_view>

#include "ui/App.h"
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

}  // namespace

// Opening runs, and the script runner's own verb.
std::vector<ScriptVerb> App::fileVerbs() {
  return {
      {"frames", "N", "draw N frames before the next command", kNoRun, nullptr},
      {"open", "PATH", "open a run file", kNoRun,
       [](App& a, Call& c) {
         std::string p;
         c.in >> p;
         a.open(p);
         return c.need(!p.empty(), "expected a path");
       }},
      {"open-compare", "PATH", "open a second run and align it with the open run", kNoRun,
       [](App& a, Call& c) {
         std::string p;
         if (!readPath(c, &p)) return false;
         if (!c.need(a.main_.run || a.main_.loading(),
                     "no run is open to compare with" + noRunNote(a.main_.error)))
           return false;
         a.openCompare(p);
         return true;
       }},
  };
}

// The replay and the timeline's range.
std::vector<ScriptVerb> App::navigationVerbs() {
  return {
      {"step", "N", "move the replay", kRun,
       [](App& a, Call& c) {
         int64_t n = 0;
         return c.need(static_cast<bool>(c.in >> n), "expected a step number") &&
                (a.nav_.stepTo(n), true);
       }},
      {"next-mb", "", "move the replay", kRun,
       [](App& a, Call& c) {
         return a.nav_.stepTo(c.run->replay.nextMicrobatch(a.view_.step)), true;
       }},
      {"next-iter", "", "move the replay", kRun,
       [](App& a, Call& c) {
         return a.nav_.stepTo(c.run->replay.nextIteration(a.view_.step)), true;
       }},
      {"first", "", "move the replay", kRun, [](App& a, Call&) { return a.nav_.stepTo(0), true; }},
      {"last", "", "move the replay", kRun,
       [](App& a, Call& c) {
         return a.nav_.stepTo(static_cast<int64_t>(c.run->replay.size())), true;
       }},
      {"play", "", "replay playback", kRun,
       [](App& a, Call&) { return a.view_.playing = true, true; }},
      {"pause", "", "replay playback", kRun,
       [](App& a, Call&) { return a.view_.playing = false, true; }},
      {"zoom-fit", "", "timeline range (A, B in ms from the run's start)", kRun,
       [](App& a, Call&) { return a.nav_.zoomFit(), true; }},
      {"zoom", "A B", "timeline range (A, B in ms from the run's start)", kRun,
       [](App& a, Call& c) {
         double t0 = 0, t1 = 0;
         if (!c.need(static_cast<bool>(c.in >> t0 >> t1), "expected start and end in ms"))
           return false;
         const double base = static_cast<double>(c.run->model.minTimeNs);
         a.nav_.zoomTo(base + t0 * 1e6, base + t1 * 1e6);
         return true;
       }},
      {"plan", "", "planned-schedule overlay, follow the replay", kRun,
       [](App& a, Call&) { return a.view_.showPlan = true, true; }},
      {"follow", "", "planned-schedule overlay, follow the replay", kRun,
       [](App& a, Call&) { return a.view_.followReplay = true, true; }},
  };
}

// Selecting a record.
std::vector<ScriptVerb> App::selectionVerbs() {
  // Selects `s`, moving the view to it (`navigate`); always succeeds.
  static constexpr auto pick = [](App& a, const Selection& s, bool navigate) {
    a.nav_.select(s, navigate);
    return true;
  };
  return {
      {"select-action", "RANK I", "select action I of RANK (and zoom to it)", kRun,
       [](App& a, Call& c) {
         int rank = -1;
         int64_t i = -1;
         c.in >> rank >> i;
         const auto& actions = c.run->model.actions;
         return c.need(rank >= 0 && rank < static_cast<int>(actions.size()) && i >= 0 &&
                           i < static_cast<int64_t>(actions[rank].size()),
                       "no such action") &&
                pick(a, {Selection::Kind::Action, rank, i}, true);
       }},
      {"select-transfer", "I", "select a record by index", kRun,
       [](App& a, Call& c) {
         int64_t i = -1;
         c.in >> i;
         const auto& transfers = c.run->model.transfers;
         return c.need(i >= 0 && i < static_cast<int64_t>(transfers.size()), "no such transfer") &&
                pick(a, {Selection::Kind::Transfer, transfers[i].rank, i}, true);
       }},
      {"select-gradient", "I", "select a record by index", kRun,
       [](App& a, Call& c) {
         int64_t i = -1;
         c.in >> i;
         const auto& gradients = c.run->model.gradients;
         return c.need(i >= 0 && i < static_cast<int64_t>(gradients.size()), "no such gradient") &&
                pick(a, {Selection::Kind::Gradient, gradients[i].rank, i}, false);
       }},
      {"select-collective", "I",
       "select collective instance I (captured runs; order:\n"
       "iteration, group, members, number) and zoom to it",
       kRun,
       [](App& a, Call& c) {
         int64_t i = -1;
         c.in >> i;
         const auto& all = c.run->collectives.instances;
         if (!c.need(i >= 0 && i < static_cast<int64_t>(all.size()), "no such collective"))
           return false;
         const auto& first = c.run->model.collectives[all[static_cast<size_t>(i)].members.front()];
         return pick(a, {Selection::Kind::Collective, first.rank, i}, true);
       }},
      {"select-mismatch", "", "select the first transfer whose checksums differ", kRun,
       [](App& a, Call& c) {
         for (const auto& p : c.run->model.pairs)
           if (p.recv >= 0 && !p.checksumMatches)
             return pick(
                 a, {Selection::Kind::Transfer, c.run->model.transfers[p.recv].rank, p.recv}, true);
         return c.need(false, "no transfer with mismatching checksums");
       }},
      {"select-local", "[N]", "select the N-th (default 0) local hand-off (colocated modules)",
       kRun,
       [](App& a, Call& c) {
         // A local hand-off: a send between two modules of one colocated rank.
         int64_t n = 0;
         c.in >> n;
         const auto& transfers = c.run->model.transfers;
         for (size_t i = 0; i < transfers.size(); ++i) {
           const auto& t = transfers[i];
           if (t.side != events::Side::Send || !model::isLocalHandOff(t) || n-- > 0) continue;
           return pick(a, {Selection::Kind::Transfer, t.rank, static_cast<int64_t>(i)}, true);
         }
         return c.need(false, "no such local hand-off");
       }},
  };
}

// Jumping to a problem, or listing problems in Find.
std::vector<ScriptVerb> App::jumpVerbs() {
  static constexpr auto findWith = [](App& a, FindQuery query, bool replace) {
    if (replace) {
      a.view_.find = query;
      a.view_.findDirty = true;
    }
    a.view_.tab = BottomTab::Find;
    a.view_.tabRequested = true;
    return true;
  };
  return {
      {"jump-nonfinite", "", "select the causally first NaN/Inf record", kRun,
       [](App& a, Call& c) {
         return c.need(a.nav_.showNonFinite(), "the run has no NaN/Inf record");
       }},
      {"jump-divergence", "", "select the first divergence from the compare run", kRun,
       [](App& a, Call& c) {
         return c.need(a.nav_.showDivergence(), "no compare run or no divergence");
       }},
      {"jump-stuck", "",
       "select the stuck operation of the root rank (a killed rank\n"
       "first) and explain it in the inspector",
       kRun,
       [](App& a, Call& c) {
         return c.need(a.nav_.showStuck(), "no rank is stuck or unfinished");
       }},
      {"find", "", "open Find (with that filter)", kRun,
       [](App& a, Call&) { return findWith(a, FindQuery{}, false); }},
      {"find-mismatch", "", "open Find (with that filter)", kRun,
       [](App& a, Call&) {
         FindQuery q;
         q.mismatch = true;
         return findWith(a, q, true);
       }},
      {"find-nonfinite", "", "open Find (with that filter)", kRun,
       [](App& a, Call&) {
         FindQuery q;
         q.nanInf = true;
         return findWith(a, q, true);
       }},
  };
}

// The window: its tabs, screenshots, closing it.
std::vector<ScriptVerb> App::windowVerbs() {
  static constexpr auto showTab = [](App& a, BottomTab tab) {
    a.view_.tab = tab;
    a.view_.tabRequested = true;
    return true;
  };
  return {
      {"tab", "grid|plots|compare|find|info", "show a bottom tab", kNoRun,
       [](App& a, Call& c) {
         std::string t;
         c.in >> t;
         static const char* names[] = {"grid", "plots", "compare", "find", "info"};
         for (int i = 0; i < 5; ++i)
           if (t == names[i]) return showTab(a, static_cast<BottomTab>(i));
         return c.need(false, "tab is one of grid, plots, compare, find, info");
       }},
      {"screenshot", "PATH", "write a PNG of the window (and PATH.probes)", kNoRun,
       [](App& a, Call& c) {
         std::string p;
         c.in >> p;
         a.screenshotRequest_ = p;
         return c.need(!p.empty(), "expected a path");
       }},
      {"quit", "", "close the viewer", kNoRun,
       [](App& a, Call&) {
         a.quit_ = true;
         return true;
       }},
  };
}

const std::vector<ScriptVerb>& App::scriptVerbs() {
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

bool App::runCommand(const std::string& command, std::string* error) {
  std::istringstream in(command);
  std::string verb;
  in >> verb;
  ScriptCall call{in, command, error, main_.run.get()};
  const auto& verbs = scriptVerbs();
  const auto it = std::find_if(verbs.begin(), verbs.end(),
                               [&](const ScriptVerb& v) { return v.run && verb == v.name; });
  const ScriptVerb* v = it == verbs.end() ? nullptr : &*it;
  if (v && !v->needsRun) return v->run(*this, call);
  if (!call.need(call.run != nullptr, "no run is open" + noRunNote(main_.error))) return false;
  if (v) return v->run(*this, call);
  return call.need(false, "unknown command");
}

const char* scriptCommandHelp() {
  static const std::string help = [] {
    std::string out =
        "script commands (--script CMD, repeatable; each waits until loading has finished):\n";
    const auto& verbs = App::scriptVerbs();
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

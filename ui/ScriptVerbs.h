// The viewer's script verbs (`gui --script CMD`) in one table: each verb's name, arguments,
// help line and handler.  runScriptCommand looks the verb up in it, and scriptCommandHelp()
// (ui/Viewer.h: `gui --help`) is written from it.  The verbs act on a ScriptTarget
// (ui/ScriptTarget.h), never on the App itself.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace stagescope::ui {

class ScriptTarget;
struct LoadedRun;

// One command being run: its words after the verb, and where a failure is reported.
struct ScriptCall {
  std::istringstream& in;
  const std::string& command;
  std::string* error;
  const LoadedRun* run;  // the open run (never null for a verb that needs one)
  // `ok`; when false, sets *error to "script: 'COMMAND': what".
  bool need(bool ok, const std::string& what) const {
    if (!ok && error) *error = "script: '" + command + "': " + what;
    return ok;
  }
};

struct ScriptVerb {
  const char* name;  // "select-action"
  const char* args;  // "RANK I" ("" when none)
  // What it does, for --help; consecutive verbs with the same help share one line, and a
  // "\n" continues it on the next line.
  const char* help;
  bool needsRun;                                        // fails with "no run is open" without one
  bool (*run)(ScriptTarget& target, ScriptCall& call);  // null: the ScriptRunner's own ("frames N")
};

// The script verbs, in --help order.
const std::vector<ScriptVerb>& scriptVerbs();
// Runs one script command (its verb and arguments) on `target`: false with *error set to one
// line when the verb is unknown, needs a run and none is open, or fails.
bool runScriptCommand(ScriptTarget& target, const std::string& command, std::string* error);

}  // namespace stagescope::ui

#include "core/engine/RunIdentity.h"

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

namespace stagescope::engine {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// "0-2,5" for {0,1,2,5}.
std::string rankRanges(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(ranks[i]);
    if (j > i) s += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

// "seed = 1234 on ranks 0-1, 99 on rank 2", or "" when every rank holds one value.
std::string describeField(const std::string& key, const std::vector<std::string>& values) {
  std::map<std::string, std::vector<int>> who;
  std::vector<std::string> order;  // values in order of the first rank holding them
  for (size_t r = 0; r < values.size(); ++r) {
    auto& ranks = who[values[r]];
    if (ranks.empty()) order.push_back(values[r]);
    ranks.push_back(static_cast<int>(r));
  }
  if (who.size() < 2) return "";
  std::string s = key + " = ";
  for (size_t i = 0; i < order.size(); ++i) {
    const auto& ranks = who[order[i]];
    s += (i ? ", " : "") + (order[i].empty() ? std::string("(absent)") : order[i]) +
         (ranks.size() == 1 ? " on rank " : " on ranks ") + rankRanges(ranks);
  }
  return s;
}

std::string joinFields(const std::vector<std::string>& parts, size_t limit) {
  std::string s;
  for (size_t i = 0; i < parts.size() && i < limit; ++i) s += (i ? "; " : "") + parts[i];
  if (parts.size() > limit) s += "; and " + std::to_string(parts.size() - limit) + " more field(s)";
  return s;
}

}  // namespace

std::string runIdFor(const std::string& out) {
  if (const char* id = env("STAGESCOPE_RUN_ID")) return id;
  std::string id = std::filesystem::path(out).stem().string();
  const char* elastic = env("TORCHELASTIC_RUN_ID");
  if (elastic && std::string(elastic) != "none") return id + "@" + elastic;
  if (const char* job = env("SLURM_JOB_ID")) {
    id += std::string("@") + job;
    if (const char* step = env("SLURM_STEP_ID")) id += std::string(".") + step;
  }
  return id;
}

std::string encodeIdentity(const RunIdentity& id) {
  std::string s = "run_id\t" + id.runId + "\nconfig_hash\t" + id.configHash + "\nformat_version\t" +
                  std::to_string(id.formatVersion) + "\nversion_stagescope\t" +
                  id.stagescopeVersion + "\nversion_torch\t" + id.torchVersion + "\n";
  s += "host\t" + id.host + "\ngloo_address\t" + id.glooAddress + "\ngloo_loopback\t" +
       (id.glooLoopback ? "1" : "0") + "\n";
  for (const auto& [k, v] : id.config) s += "config." + k + "\t" + v + "\n";
  return s;
}

namespace {
// A peer's format version: a whole number 0..INT_MAX, else -1 (shown as such in the mismatch
// line; std::atoi would read garbage as 0 and overflow as undefined behaviour).
int formatVersionOf(const std::string& v) {
  int n = -1;
  const auto [at, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  return ec == std::errc() && at == v.data() + v.size() && n >= 0 ? n : -1;
}
}  // namespace

RunIdentity decodeIdentity(const std::string& text) {
  RunIdentity id;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    const std::string k = line.substr(0, tab), v = line.substr(tab + 1);
    if (k == "run_id")
      id.runId = v;
    else if (k == "config_hash")
      id.configHash = v;
    else if (k == "format_version")
      id.formatVersion = formatVersionOf(v);
    else if (k == "version_stagescope")
      id.stagescopeVersion = v;
    else if (k == "version_torch")
      id.torchVersion = v;
    else if (k == "host")
      id.host = v;
    else if (k == "gloo_address")
      id.glooAddress = v;
    else if (k == "gloo_loopback")
      id.glooLoopback = v == "1";
    else if (k.rfind("config.", 0) == 0)
      id.config.emplace_back(k.substr(7), v);
  }
  return id;
}

std::string identityMismatch(const std::vector<RunIdentity>& byRank) {
  const size_t n = byRank.size();
  auto column = [&](auto get) {
    std::vector<std::string> v;
    for (const auto& id : byRank) v.push_back(get(id));
    return v;
  };
  std::vector<std::string> sentences;

  // Config fields: the union of keys in first-seen order (structurally different configs
  // have different keys; a key a rank lacks reads "(absent)").
  std::vector<std::string> keys;
  std::set<std::string> seen;
  std::vector<std::map<std::string, std::string>> maps(n);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& [k, v] : byRank[r].config) {
      maps[r][k] = v;
      if (seen.insert(k).second) keys.push_back(k);
    }
  }
  std::vector<std::string> configParts;
  for (const auto& k : keys) {
    std::vector<std::string> values;
    for (size_t r = 0; r < n; ++r) {
      auto it = maps[r].find(k);
      values.push_back(it == maps[r].end() ? "" : it->second);
    }
    if (auto d = describeField(k, values); !d.empty()) configParts.push_back(d);
  }
  if (configParts.empty()) {  // same fields but another hash: report the hash itself
    if (auto d = describeField("config_hash", column([](auto& i) { return i.configHash; }));
        !d.empty())
      configParts.push_back(d);
  }
  if (!configParts.empty())
    sentences.push_back("ranks run different configs: " + joinFields(configParts, 4));

  if (auto d = describeField("run_id", column([](auto& i) { return i.runId; })); !d.empty())
    sentences.push_back("ranks belong to different runs: " + d);

  std::vector<std::string> build;
  for (auto& d :
       {describeField("format_version",
                      column([](auto& i) { return std::to_string(i.formatVersion); })),
        describeField("version_stagescope", column([](auto& i) { return i.stagescopeVersion; })),
        describeField("version_torch", column([](auto& i) { return i.torchVersion; }))})
    if (!d.empty()) build.push_back(d);
  if (!build.empty()) sentences.push_back("ranks run different builds: " + joinFields(build, 3));

  std::string line;
  for (size_t i = 0; i < sentences.size(); ++i) line += (i ? "; also " : "") + sentences[i];
  return line;
}

std::string addressProblem(const std::vector<RunIdentity>& byRank) {
  for (size_t r = 0; r < byRank.size(); ++r) {
    if (!byRank[r].glooLoopback) continue;
    std::vector<int> remote;
    std::string otherHost;
    for (size_t q = 0; q < byRank.size(); ++q) {
      if (byRank[q].host != byRank[r].host || !byRank[q].glooLoopback) {
        remote.push_back(static_cast<int>(q));
        if (otherHost.empty() && byRank[q].host != byRank[r].host) otherHost = byRank[q].host;
      }
    }
    if (remote.empty()) continue;
    return "rank " + std::to_string(r) + " on host " + byRank[r].host +
           " advertises the loopback address " + byRank[r].glooAddress +
           " to its Gloo peers, but rank(s) " + rankRanges(remote) + " run elsewhere" +
           (otherHost.empty() ? "" : " (" + otherHost + ")") +
           ": set GLOO_SOCKET_IFNAME=<interface> or STAGESCOPE_GLOO_HOST=<this host's address> "
           "on " +
           byRank[r].host + ", or a MASTER_ADDR other hosts reach";
  }
  return "";
}

}  // namespace stagescope::engine

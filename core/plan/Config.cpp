// TOML parsing and validation of the run configuration (see Config.h for the contract).
//
// Every failure is a ConfigError whose message is one line:
//   "<source>: <field> = <value>: <what was expected>"
#include "core/plan/Config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <type_traits>

#include "core/events/Printable.h"
#include "core/events/Suggest.h"
#include "core/plan/Colocation.h"
#include "core/plan/FaultCheck.h"
#include "core/plan/Plan.h"
#include "core/plan/Topology.h"

namespace stagescope::plan {
namespace {

// ---- formatting helpers ------------------------------------------------------------------

// One-line rendering of a TOML node for messages: strings double-quoted, floats in the
// shortest usual form (0.1, not 0.10000000000000001), tables and arrays as TOML; truncated.
std::string show(const toml::node& node) {
  std::ostringstream os;
  node.visit([&](const auto& v) {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, toml::value<std::string>>) {
      os << '"' << v.get() << '"';
    } else if constexpr (std::is_same_v<T, toml::value<double>>) {
      os << v.get();
    } else {
      os << v;
    }
  });
  std::string text = os.str();
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > 60) {
    size_t cut = 57;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
    text = text.substr(0, cut) + "...";
  }
  return text;
}

// The message as one printable line (events::printableLine): a hostile key or value can
// neither break the line nor drive the terminal.
std::string oneLine(const std::string& s) {
  return events::printableLine(s);
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// A value quoted in a message, capped (events::shownValue: the size is the value's own).
std::string quote(const std::string& s) {
  return "\"" + events::shownValue(s) + "\"";
}

// Throws the one-line ConfigError of this file.
class Failer {
 public:
  explicit Failer(std::string source) : source_(std::move(source)) {}
  // The source, field and value are quoted as events::shownValue shows them (a 120 kB --set
  // value is not echoed whole).
  [[noreturn]] void operator()(const std::string& field, const std::string& value,
                               const std::string& expected) const {
    throw ConfigError(oneLine(field),
                      oneLine(events::shownValue(source_) + ": " + events::shownValue(field) +
                              " = " + events::shownValue(value) + ": " + expected));
  }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

// Typed access to one TOML table, with the dotted prefix used in messages.
class Section {
 public:
  Section(const toml::table& table, std::string prefix, const Failer& fail)
      : table_(table), prefix_(std::move(prefix)), fail_(fail) {}

  std::string field(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }

  // Rejects every key not in `allowed`, listing the allowed ones.
  void allowOnly(const std::vector<std::string>& allowed) const {
    for (const auto& [key, node] : table_) {
      std::string k(key.str());
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        fail_(
            field(k), show(node),
            "unknown key (allowed: " + join(allowed, ", ") + ")" + events::didYouMean(k, allowed));
      }
    }
  }

  const toml::node* get(const std::string& key) const { return table_.get(key); }

  void readInt(const std::string& key, int* out) const {
    int64_t v = 0;
    if (readInt64(key, &v)) {
      if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
        fail_(field(key), std::to_string(v), "expected an integer in 32-bit range");
      }
      *out = static_cast<int>(v);
    }
  }

  bool readInt64(const std::string& key, int64_t* out) const {
    const toml::node* node = get(key);
    if (!node) return false;
    if (!node->is_integer()) fail_(field(key), show(*node), "expected an integer");
    *out = node->as_integer()->get();
    return true;
  }

  void readDouble(const std::string& key, double* out) const {
    const toml::node* node = get(key);
    if (!node) return;
    if (node->is_integer()) {
      *out = static_cast<double>(node->as_integer()->get());
    } else if (node->is_floating_point()) {
      *out = node->as_floating_point()->get();
    } else {
      fail_(field(key), show(*node), "expected a number");
    }
    if (!std::isfinite(*out)) fail_(field(key), show(*node), "expected a finite number");
  }

  void readBool(const std::string& key, bool* out) const {
    const toml::node* node = get(key);
    if (!node) return;
    if (!node->is_boolean()) fail_(field(key), show(*node), "expected true or false");
    *out = node->as_boolean()->get();
  }

  void readString(const std::string& key, std::string* out) const {
    const toml::node* node = get(key);
    if (!node) return;
    if (!node->is_string()) fail_(field(key), show(*node), "expected a string");
    *out = node->as_string()->get();
  }

  void readIntArray(const std::string& key, std::vector<int>* out) const {
    const toml::node* node = get(key);
    if (!node) return;
    if (!node->is_array()) fail_(field(key), show(*node), "expected an array of integers");
    out->clear();
    for (const toml::node& item : *node->as_array()) {
      if (!item.is_integer()) fail_(field(key), show(*node), "expected an array of integers");
      int64_t v = item.as_integer()->get();
      if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
        fail_(field(key), show(*node), "expected integers in 32-bit range");
      }
      out->push_back(static_cast<int>(v));
    }
  }

  void readStringArray(const std::string& key, std::vector<std::string>* out) const {
    const toml::node* node = get(key);
    if (!node) return;
    if (!node->is_array()) fail_(field(key), show(*node), "expected an array of strings");
    out->clear();
    for (const toml::node& item : *node->as_array()) {
      if (!item.is_string()) fail_(field(key), show(*node), "expected an array of strings");
      out->push_back(item.as_string()->get());
    }
  }

  // A sub-table; nullptr when absent; fails when present but not a table.
  const toml::table* subTable(const std::string& key) const {
    const toml::node* node = get(key);
    if (!node) return nullptr;
    if (!node->is_table()) fail_(field(key), show(*node), "expected a table ([" + key + "])");
    return node->as_table();
  }

  // An array of tables; empty when absent.
  std::vector<const toml::table*> tableArray(const std::string& key) const {
    std::vector<const toml::table*> out;
    const toml::node* node = get(key);
    if (!node) return out;
    if (!node->is_array()) {
      fail_(field(key), show(*node), "expected an array of tables ([[" + key + "]])");
    }
    for (const toml::node& item : *node->as_array()) {
      if (!item.is_table()) {
        fail_(field(key), show(*node), "expected an array of tables ([[" + key + "]])");
      }
      out.push_back(item.as_table());
    }
    return out;
  }

 private:
  const toml::table& table_;
  std::string prefix_;
  const Failer& fail_;
};

void requireOneOf(const Failer& fail, const std::string& field, const std::string& value,
                  const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
    fail(field, quote(value), "expected one of " + join(allowed, ", "));
  }
}

// The value of a closed vocabulary named by `text`, among `values` (in the order the message
// lists them): the one parse of each such config field; anything else is the one-line
// "expected one of a, b" error.
template <typename Enum>
Enum parseOneOf(const Failer& fail, const std::string& field, const std::string& text,
                std::initializer_list<Enum> values) {
  std::vector<std::string> names;
  for (Enum v : values) {
    if (text == toString(v)) return v;
    names.emplace_back(toString(v));
  }
  fail(field, quote(text), "expected one of " + join(names, ", "));
}

// value in [lo, hi]; `why` says where hi comes from (e.g. "the most ranks of one run").
void requireInRange(const Failer& fail, const std::string& field, int64_t value, int64_t lo,
                    int64_t hi, const std::string& why = "") {
  if (value < lo || value > hi) {
    fail(field, std::to_string(value),
         "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
             (why.empty() ? "" : " (" + why + ")"));
  }
}

// One named factor of a product that must stay under a limit.
struct Factor {
  const char* name;
  int64_t value;  // >= 1 (validated before)
};

// The product of `factors`, or limit + 1 when it exceeds `limit` (never overflows).
int64_t cappedProduct(const std::vector<Factor>& factors, int64_t limit) {
  int64_t product = 1;
  for (const Factor& f : factors) {
    if (f.value > 0 && product > limit / f.value) return limit + 1;
    product *= f.value;
  }
  return product;
}

// Fails when the product of `factors` exceeds `limit`, naming every factor:
//   "<field> = 65536: tp*cp*pp*dp = 65536*1*1*65536 exceeds 4096 (the most ranks of one run)"
void requireProductAtMost(const Failer& fail, const std::string& field, const std::string& value,
                          const std::vector<Factor>& factors, int64_t limit,
                          const std::string& what) {
  if (cappedProduct(factors, limit) <= limit) return;
  std::string names, values;
  for (size_t i = 0; i < factors.size(); ++i) {
    names += (i ? "*" : "") + std::string(factors[i].name);
    values += (i ? "*" : "") + std::to_string(factors[i].value);
  }
  fail(field, value,
       names + " = " + values + " exceeds " + std::to_string(limit) + " (" + what + ")");
}

// A number of seconds in [lo, hi], shown as the config wrote it.
void requireSecondsInRange(const Failer& fail, const std::string& field, const std::string& shown,
                           double value, double lo, double hi) {
  if (!(value >= lo && value <= hi)) {
    fail(field, shown, "expected a number of seconds in [0.001, 86400] (1 ms to 1 day)");
  }
}

// ---- nesting -----------------------------------------------------------------------------

// The TOML library nests a table per dotted-key part recursively, without a limit (arrays and
// inline tables it limits itself): a key of 50 000 parts overflows the stack.  So, before
// parsing, no stretch of text between TOML's separators (= { } [ ] , newline), outside
// strings and comments, may hold more than kMaxKeyParts dots.  (A value with that many dots is
// not valid TOML either.)
constexpr int kMaxKeyParts = 128;

void checkKeyDepth(const std::string& text, const std::string& source) {
  int dots = 0, line = 1;
  char quote = 0;  // the open string's quote, or 0
  bool comment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '\n') {
      ++line;
      comment = false;
      dots = 0;
      continue;
    }
    if (comment) continue;
    if (quote) {
      if (quote == '"' && ch == '\\')
        ++i;  // an escape in a basic string
      else if (ch == quote)
        quote = 0;
      continue;
    }
    if (ch == '#')
      comment = true;
    else if (ch == '"' || ch == '\'')
      quote = ch;
    else if (ch == '=' || ch == '{' || ch == '}' || ch == '[' || ch == ']' || ch == ',')
      dots = 0;
    else if (ch == '.' && ++dots > kMaxKeyParts) {
      throw ConfigError("", oneLine(source + ":" + std::to_string(line) + ": a key of more than " +
                                    std::to_string(kMaxKeyParts) +
                                    " dotted parts; expected a config key such as "
                                    "optimizer.lr"));
    }
  }
}

// ---- overrides ---------------------------------------------------------------------------

std::vector<std::string> splitDots(const std::string& key) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : key) {
    if (c == '.') {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Finds the [[modules]] table whose name is `name`; nullptr if none.
toml::table* findModule(toml::table& root, const std::string& name) {
  toml::array* modules = root["modules"].as_array();
  if (!modules) return nullptr;
  for (toml::node& item : *modules) {
    toml::table* t = item.as_table();
    if (t && t->get("name") && t->get("name")->value<std::string>() == name) return t;
  }
  return nullptr;
}

// Applies one "key=value" override to `root`.  The value is parsed as a TOML value and
// falls back to a bare string.
void applyOverride(toml::table& root, const std::string& item, const Failer& fail) {
  size_t eq = item.find('=');
  if (eq == std::string::npos) fail("--set", quote(item), "expected key=value");
  std::string key = trim(item.substr(0, eq));
  std::string text = trim(item.substr(eq + 1));
  std::vector<std::string> parts = splitDots(key);
  if (parts.size() > 4) {  // the deepest config key is modules.<name>.<key>
    fail("--set", quote(item.substr(0, 60) + (item.size() > 60 ? "..." : "")),
         "a key of " + std::to_string(parts.size()) +
             " dotted parts; expected a config key such as optimizer.lr (at most 4 parts)");
  }
  checkKeyDepth(text, "--set " + key.substr(0, 60));
  for (const auto& p : parts) {
    if (p.empty()) fail("--set", quote(item), "expected a dotted key like optimizer.lr=0.1");
  }
  toml::table* target = &root;
  size_t first = 0;
  if (parts.size() == 3 && parts[0] == "modules") {
    target = findModule(root, parts[1]);
    if (!target) {
      std::vector<std::string> names;
      if (const toml::array* modules = root["modules"].as_array()) {
        for (const toml::node& m : *modules) {
          if (const toml::table* t = m.as_table(); t && t->get("name"))
            names.push_back(t->get("name")->value_or(std::string()));
        }
      }
      fail("--set " + key, quote(parts[1]),
           "no module with this name" + events::didYouMean(parts[1], names));
    }
    first = 2;
  }
  for (size_t i = first; i + 1 < parts.size(); ++i) {
    toml::node* child = target->get(parts[i]);
    if (!child) {
      target->insert_or_assign(parts[i], toml::table{});
      child = target->get(parts[i]);
    }
    if (!child->is_table()) fail("--set " + key, show(*child), "is not a table");
    target = child->as_table();
  }
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + text);
  } catch (const toml::parse_error&) {
    parsed.insert_or_assign("v", text);  // bare string
  }
  if (!parsed.get("v") || parsed.size() != 1) {
    parsed = toml::table{};
    parsed.insert_or_assign("v", text);
  }
  parsed.get("v")->visit([&](const auto& v) { target->insert_or_assign(parts.back(), v); });
}

// ---- sections ----------------------------------------------------------------------------

// The texts of the top-level vocabularies, parsed by validateTopLevel after the numbers were
// checked (the order of the messages).
struct TopLevelText {
  std::string dtype, device, backend;
};

void readTopLevel(const Section& s, RunConfig* c, TopLevelText* text) {
  s.allowOnly({"seed", "iterations", "microbatches", "micro_batch_size", "dtype", "device",
               "backend", "timeout_seconds", "loss_scale", "forward_only", "world_size",
               "optimizer", "record", "modules", "faults"});
  int64_t seed = static_cast<int64_t>(c->seed);
  s.readInt64("seed", &seed);
  c->seed = static_cast<uint64_t>(seed);
  s.readInt("iterations", &c->iterations);
  s.readInt("microbatches", &c->microbatches);
  s.readInt("micro_batch_size", &c->microBatchSize);
  text->dtype = events::toString(c->dtype);
  text->device = toString(c->device);
  text->backend = toString(c->backend);
  s.readString("dtype", &text->dtype);
  s.readString("device", &text->device);
  s.readString("backend", &text->backend);
  s.readDouble("timeout_seconds", &c->timeoutSeconds);
  s.readDouble("loss_scale", &c->lossScale);
  s.readBool("forward_only", &c->forwardOnly);
}

void validateTopLevel(const Failer& fail, const Section& s, const TopLevelText& text,
                      RunConfig* out) {
  RunConfig& c = *out;
  if (const toml::node* n = s.get("seed"); n && n->as_integer()->get() < 0) {
    fail("seed", show(*n), "expected an integer >= 0");
  }
  requireInRange(fail, "iterations", c.iterations, 1, limits::kMaxIterations);
  requireInRange(fail, "microbatches", c.microbatches, 1, limits::kMaxMicrobatches);
  requireInRange(fail, "micro_batch_size", c.microBatchSize, 1, limits::kMaxMicroBatchSize);
  c.dtype =
      parseOneOf(fail, "dtype", text.dtype, {events::Dtype::Float32, events::Dtype::BFloat16});
  c.device = parseOneOf(fail, "device", text.device, {Device::Cpu, Device::Cuda});
  c.backend = parseOneOf(fail, "backend", text.backend, {Backend::Gloo, Backend::Nccl});
  if (c.backend == Backend::Nccl && c.device != Device::Cuda) {
    fail("backend", quote(toString(c.backend)),
         "nccl requires device = \"cuda\" (device is " + quote(toString(c.device)) + ")");
  }
  if (const toml::node* n = s.get("timeout_seconds")) {
    requireSecondsInRange(fail, "timeout_seconds", show(*n), c.timeoutSeconds,
                          limits::kMinTimeoutSeconds, limits::kMaxTimeoutSeconds);
  }
  if (c.lossScale <= 0) fail("loss_scale", show(*s.get("loss_scale")), "expected a number > 0");
}

// Module names appear in edge names, group names and every message line: short and plain.
constexpr size_t kMaxNameLength = 64;

bool validName(const std::string& name) {
  if (name.size() > kMaxNameLength) return false;
  if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
  });
}

const std::vector<std::string> kModuleKeys = {
    "name",         "kind",   "tp",    "cp",  "pp",      "dp",        "offset", "layers",
    "stage_layers", "hidden", "heads", "ffn", "patches", "patch_dim", "vocab",  "text_len"};

// Reads one [[modules]] table; `index` names it in messages until its name is known.
ModuleConfig readModule(const toml::table& table, size_t index, const Failer& fail) {
  ModuleConfig m;
  std::string prefix = "modules[" + std::to_string(index) + "]";
  Section pre(table, prefix, fail);
  if (!pre.get("name")) fail(prefix + ".name", "(missing)", "every module needs a name");
  pre.readString("name", &m.name);
  if (!validName(m.name)) {
    const std::string shown =
        m.name.size() > kMaxNameLength
            ? quote(m.name.substr(0, 32)) + "... (" + std::to_string(m.name.size()) + " characters)"
            : quote(m.name);
    fail(prefix + ".name", shown,
         "expected a non-empty name of at most 64 letters, digits, '_' or '-' starting with a "
         "letter");
  }
  Section s(table, "modules." + m.name, fail);
  s.allowOnly(kModuleKeys);
  if (!s.get("kind")) fail(s.field("kind"), "(missing)", "expected \"encoder\" or \"llm\"");
  std::string kind;
  s.readString("kind", &kind);
  s.readInt("tp", &m.tp);
  s.readInt("cp", &m.cp);
  s.readInt("pp", &m.pp);
  s.readInt("dp", &m.dp);
  s.readInt("offset", &m.offset);
  s.readInt("layers", &m.layers);
  s.readIntArray("stage_layers", &m.stageLayers);
  s.readInt("hidden", &m.hidden);
  s.readInt("heads", &m.heads);
  s.readInt("ffn", &m.ffn);
  s.readInt("patches", &m.patches);
  s.readInt("patch_dim", &m.patchDim);
  s.readInt("vocab", &m.vocab);
  s.readInt("text_len", &m.textLen);
  // The first check of validateModule, as before the kind was typed.
  m.kind = parseOneOf(fail, s.field("kind"), kind,
                      {events::ModuleKind::Encoder, events::ModuleKind::Llm});
  return m;
}

void validateStageLayers(const Failer& fail, const Section& s, const ModuleConfig& m) {
  if (m.stageLayers.empty()) {
    if (m.layers % m.pp != 0) {
      fail(s.field("layers"), std::to_string(m.layers),
           "expected a multiple of pp (" + std::to_string(m.pp) +
               "), or give stage_layers to split unevenly");
    }
    return;
  }
  const std::string field = s.field("stage_layers");
  const std::string value = show(*s.get("stage_layers"));
  if (static_cast<int>(m.stageLayers.size()) != m.pp) {
    fail(field, value, "expected " + std::to_string(m.pp) + " entries (one per pp stage)");
  }
  int64_t sum = 0;
  for (int n : m.stageLayers) {
    if (n < 1) fail(field, value, "every stage needs at least 1 layer");
    sum += n;
  }
  if (sum != m.layers) {
    fail(field, value,
         "entries sum to " + std::to_string(sum) +
             ", expected layers = " + std::to_string(m.layers));
  }
}

// The grid of one module: every dimension, the offset and their product within the world
// limit, checked in 64-bit before ModuleConfig::size() (an int product) is ever used.
void validateGrid(const Failer& fail, const Section& s, const ModuleConfig& m) {
  const std::string ranks = "the most ranks of one run";
  requireInRange(fail, s.field("tp"), m.tp, 1, limits::kMaxWorldSize, ranks);
  requireInRange(fail, s.field("pp"), m.pp, 1, limits::kMaxWorldSize, ranks);
  requireInRange(fail, s.field("dp"), m.dp, 1, limits::kMaxWorldSize, ranks);
  if (m.cp != 1) {
    fail(s.field("cp"), std::to_string(m.cp),
         "context parallelism is not supported; expected cp = 1");
  }
  requireInRange(fail, s.field("offset"), m.offset, 0, limits::kMaxWorldSize - 1, ranks);
  const std::vector<Factor> grid = {{"tp", m.tp}, {"cp", m.cp}, {"pp", m.pp}, {"dp", m.dp}};
  requireProductAtMost(fail, s.field("dp"), std::to_string(m.dp), grid, limits::kMaxWorldSize,
                       ranks);
  const int64_t end = int64_t{m.offset} + cappedProduct(grid, limits::kMaxWorldSize);
  if (end > limits::kMaxWorldSize) {
    fail(s.field("offset"), std::to_string(m.offset),
         "offset + tp*cp*pp*dp = " + std::to_string(end) + " exceeds " +
             std::to_string(limits::kMaxWorldSize) + " (" + ranks + ")");
  }
}

// Sizes of one module's tensors: each within its limit, and the weight matrices' element
// counts (layers*hidden^2, layers*hidden*ffn, vocab*hidden) within limits::kMaxElements.
void validateSizes(const Failer& fail, const Section& s, const ModuleConfig& m) {
  requireInRange(fail, s.field("layers"), m.layers, 1, limits::kMaxLayers);
  requireInRange(fail, s.field("hidden"), m.hidden, 1, limits::kMaxWidth);
  requireInRange(fail, s.field("heads"), m.heads, 1, limits::kMaxWidth);
  requireInRange(fail, s.field("ffn"), m.ffn, 1, limits::kMaxWidth);
  requireInRange(fail, s.field("patches"), m.patches, 1, limits::kMaxWidth);
  requireInRange(fail, s.field("patch_dim"), m.patchDim, 1, limits::kMaxWidth);
  requireInRange(fail, s.field("vocab"), m.vocab, 2, limits::kMaxVocab);
  requireInRange(fail, s.field("text_len"), m.textLen, 1, limits::kMaxWidth);
  const std::string elements = "the most elements of one module's weights";
  requireProductAtMost(fail, s.field("hidden"), std::to_string(m.hidden),
                       {{"layers", m.layers}, {"hidden", m.hidden}, {"hidden", m.hidden}},
                       limits::kMaxElements, elements);
  requireProductAtMost(fail, s.field("ffn"), std::to_string(m.ffn),
                       {{"layers", m.layers}, {"hidden", m.hidden}, {"ffn", m.ffn}},
                       limits::kMaxElements, elements);
  if (m.isLlm()) {
    requireProductAtMost(fail, s.field("vocab"), std::to_string(m.vocab),
                         {{"vocab", m.vocab}, {"hidden", m.hidden}}, limits::kMaxElements,
                         elements);
  } else {
    requireProductAtMost(fail, s.field("patch_dim"), std::to_string(m.patchDim),
                         {{"patch_dim", m.patchDim}, {"hidden", m.hidden}}, limits::kMaxElements,
                         elements);
  }
}

void validateModule(const Failer& fail, const Section& s, const ModuleConfig& m) {
  validateGrid(fail, s, m);
  validateSizes(fail, s, m);
  auto tpStr = std::to_string(m.tp);
  if (m.heads % m.tp != 0) {
    fail(s.field("heads"), std::to_string(m.heads), "expected a multiple of tp (" + tpStr + ")");
  }
  if (m.ffn % m.tp != 0) {
    fail(s.field("ffn"), std::to_string(m.ffn), "expected a multiple of tp (" + tpStr + ")");
  }
  if (m.hidden % m.heads != 0) {
    fail(s.field("hidden"), std::to_string(m.hidden),
         "expected a multiple of heads (" + std::to_string(m.heads) + ")");
  }
  if (m.layers < m.pp) {
    fail(s.field("layers"), std::to_string(m.layers),
         "expected at least one layer per pp stage (pp = " + std::to_string(m.pp) + ")");
  }
  validateStageLayers(fail, s, m);
}

// The batch and the tensors it makes: the global batch (an int), the llm's sequence, and the
// largest activation of one microbatch (sequence x batch x width, and the attention scores).
void validateBatch(const Failer& fail, const RunConfig& c, const ModuleConfig& llm) {
  const std::string mbs = std::to_string(c.microBatchSize);
  requireProductAtMost(fail, "micro_batch_size", mbs,
                       {{"microbatches", c.microbatches},
                        {"micro_batch_size", c.microBatchSize},
                        {"llm dp", llm.dp}},
                       limits::kMaxGlobalBatch, "the largest global batch per iteration");
  int64_t sequence = llm.textLen;
  for (const auto& m : c.modules) {
    if (m.isEncoder()) sequence += m.patches;
  }
  if (sequence > limits::kMaxSequence) {
    fail("modules." + llm.name + ".text_len", std::to_string(llm.textLen),
         "text_len + encoder patches = " + std::to_string(sequence) + " exceeds " +
             std::to_string(limits::kMaxSequence) + " (the longest llm sequence)");
  }
  const std::string activation = "the most elements of one activation tensor";
  for (const auto& m : c.modules) {
    const int64_t rows = m.isLlm() ? sequence : m.patches;
    const int64_t batch = m.isLlm() ? c.microBatchSize : int64_t{c.microBatchSize} * llm.dp / m.dp;
    const int64_t width = std::max(m.hidden, m.ffn);
    requireProductAtMost(fail, "micro_batch_size", mbs,
                         {{"sequence", rows},
                          {"micro_batch_size", std::max<int64_t>(1, batch)},
                          {"max(hidden, ffn)", width}},
                         limits::kMaxElements, activation + " of " + m.name);
    requireProductAtMost(fail, "micro_batch_size", mbs,
                         {{"sequence", rows},
                          {"sequence", rows},
                          {"micro_batch_size", std::max<int64_t>(1, batch)},
                          {"heads", m.heads}},
                         limits::kMaxElements, "the most attention scores of " + m.name);
  }
}

// One llm; encoder DP compatible with the llm's; grids cover [0, world), overlapping only as
// colocated whole stages (Colocation.h).
void validateModuleSet(const Failer& fail, RunConfig* c, const toml::table& root) {
  if (c->modules.empty()) {
    fail("modules", "(none)", "expected at least one [[modules]] table with kind = \"llm\"");
  }
  std::set<std::string> names;
  const ModuleConfig* llm = nullptr;
  for (const auto& m : c->modules) {
    if (!names.insert(m.name).second) {
      fail("modules.name", quote(m.name), "duplicate module name; names must be unique");
    }
    if (m.isLlm()) {
      if (llm) {
        fail("modules." + m.name + ".kind", quote(events::toString(m.kind)),
             "only one module may be the llm (\"" + llm->name + "\" already is)");
      }
      llm = &m;
    }
  }
  if (!llm) fail("modules", "(no llm)", "expected exactly one module with kind = \"llm\"");
  validateBatch(fail, *c, *llm);
  for (const auto& m : c->modules) {
    if (!m.isEncoder()) continue;
    const std::string f = "modules." + m.name + ".dp";
    if (llm->dp % m.dp != 0 && m.dp % llm->dp != 0) {
      fail(f, std::to_string(m.dp),
           "the llm dp (" + std::to_string(llm->dp) + ") and this dp must divide one another");
    }
    const int64_t numerator = int64_t{c->microBatchSize} * llm->dp;
    if (numerator % m.dp != 0 || numerator / m.dp < 1) {
      fail(f, std::to_string(m.dp),
           "encoder micro-batch size micro_batch_size*llm.dp/dp = " +
               std::to_string(c->microBatchSize) + "*" + std::to_string(llm->dp) + "/" +
               std::to_string(m.dp) + " must be an integer >= 1");
    }
  }
  int world = 0;  // validateGrid bounded every offset + size by limits::kMaxWorldSize
  for (const auto& m : c->modules) world = std::max(world, m.offset + m.size());
  requireProductAtMost(fail, "microbatches", std::to_string(c->microbatches),
                       {{"world_size", world}, {"microbatches", c->microbatches}},
                       limits::kMaxPlannedMicrobatches, "the most microbatches planned per run");
  std::vector<const ModuleConfig*> owner(static_cast<size_t>(world), nullptr);
  for (const auto& m : c->modules) {
    for (int r = m.offset; r < m.offset + m.size(); ++r) owner[r] = &m;
  }
  for (int r = 0; r < world; ++r) {
    if (!owner[r]) {
      fail("modules", "(gap at rank " + std::to_string(r) + ")",
           "rank " + std::to_string(r) + " belongs to no module; grids must tile ranks 0.." +
               std::to_string(world - 1));
    }
  }
  if (const toml::node* n = root.get("world_size")) {
    if (!n->is_integer()) fail("world_size", show(*n), "expected an integer");
    if (n->as_integer()->get() != world) {
      fail("world_size", show(*n),
           "expected " + std::to_string(world) + " (max offset + tp*cp*pp*dp over modules)");
    }
  }
  c->worldSize = world;
  // Grids may overlap when whole stages share ranks and the slots they form have an order
  // (Colocation.h); this throws a one-line ConfigError naming the rank and stages otherwise.
  analyzeColocation(*c);
}

// A colocated layout must also pass the plan's static progress proof: every colocated config
// that parses has a 1F1B order that cannot deadlock.
void requireColocatedProgress(const RunConfig& c) {
  const Topology topology(c);
  if (!topology.colocation().any()) return;
  const PlanProgress progress = analyzePlanProgress(makePlan(c, topology));
  if (progress.ok) return;
  throw ConfigError("modules", c.sourceName +
                                   ": modules: the colocated layout has no "
                                   "deadlock-free 1F1B order: " +
                                   progress.text);
}

void readOptimizer(const Failer& fail, const toml::table* table, OptimizerConfig* o) {
  if (!table) return;
  Section s(*table, "optimizer", fail);
  s.allowOnly({"kind", "lr", "momentum", "beta1", "beta2", "eps", "weight_decay"});
  std::string kind = events::toString(o->kind);
  s.readString("kind", &kind);
  s.readDouble("lr", &o->lr);
  s.readDouble("momentum", &o->momentum);
  s.readDouble("beta1", &o->beta1);
  s.readDouble("beta2", &o->beta2);
  s.readDouble("eps", &o->eps);
  s.readDouble("weight_decay", &o->weightDecay);
  o->kind = parseOneOf(fail, "optimizer.kind", kind,
                       {events::OptimizerKind::Sgd, events::OptimizerKind::Adam});
  auto num = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  if (o->lr <= 0) fail("optimizer.lr", num(o->lr), "expected a number > 0");
  if (o->momentum < 0 || o->momentum >= 1) {
    fail("optimizer.momentum", num(o->momentum), "expected a number in [0, 1)");
  }
  if (o->beta1 < 0 || o->beta1 >= 1) {
    fail("optimizer.beta1", num(o->beta1), "expected a number in [0, 1)");
  }
  if (o->beta2 < 0 || o->beta2 >= 1) {
    fail("optimizer.beta2", num(o->beta2), "expected a number in [0, 1)");
  }
  if (o->eps <= 0) fail("optimizer.eps", num(o->eps), "expected a number > 0");
  if (o->weightDecay < 0) {
    fail("optimizer.weight_decay", num(o->weightDecay), "expected a number >= 0");
  }
}

void readRecord(const Failer& fail, const toml::table* table, RunConfig* c) {
  if (!table) return;
  RecordConfig& r = c->record;
  Section s(*table, "record", fail);
  s.allowOnly({"level", "iterations", "modules", "ranks"});
  std::string level = events::toString(r.level);
  s.readString("level", &level);
  s.readIntArray("iterations", &r.iterations);
  s.readStringArray("modules", &r.modules);
  s.readIntArray("ranks", &r.ranks);
  requireOneOf(fail, "record.level", level, {"off", "meta", "stats", "full"});
  events::parseRecordLevel(level, &r.level);
  for (int it : r.iterations) {
    if (it < 0 || it >= c->iterations) {
      fail("record.iterations", std::to_string(it),
           "expected iterations in 0.." + std::to_string(c->iterations - 1));
    }
  }
  for (const auto& name : r.modules) {
    bool known = std::any_of(c->modules.begin(), c->modules.end(),
                             [&](const ModuleConfig& m) { return m.name == name; });
    if (!known) fail("record.modules", quote(name), "no module with this name");
  }
  for (int rank : r.ranks) {
    if (rank < 0 || rank >= c->worldSize) {
      fail("record.ranks", std::to_string(rank),
           "expected ranks in 0.." + std::to_string(c->worldSize - 1));
    }
  }
}

FaultConfig readFault(const Failer& fail, const toml::table& table, size_t index,
                      const RunConfig& c) {
  FaultConfig f;
  Section s(table, "faults[" + std::to_string(index) + "]", fail);
  s.allowOnly(
      {"kind", "iteration", "microbatch", "module", "stage", "direction", "rank", "delay_seconds"});
  std::string kind, direction = events::toString(f.direction);
  s.readString("kind", &kind);
  s.readInt("iteration", &f.iteration);
  s.readInt("microbatch", &f.microbatch);
  s.readString("module", &f.module);
  s.readInt("stage", &f.stage);
  s.readString("direction", &direction);
  s.readInt("rank", &f.rank);
  s.readDouble("delay_seconds", &f.delaySeconds);
  f.kind = parseOneOf(fail, s.field("kind"), kind,
                      {FaultKind::Delay, FaultKind::Drop, FaultKind::Corrupt, FaultKind::Shape,
                       FaultKind::Nan, FaultKind::Inf, FaultKind::Kill});
  if (f.iteration < 0 || f.iteration >= c.iterations) {
    fail(s.field("iteration"), std::to_string(f.iteration),
         "expected 0.." + std::to_string(c.iterations - 1) +
             " (iterations = " + std::to_string(c.iterations) + ")");
  }
  if (f.microbatch < 0 || f.microbatch >= c.microbatches) {
    fail(s.field("microbatch"), std::to_string(f.microbatch),
         "expected 0.." + std::to_string(c.microbatches - 1) +
             " (microbatches = " + std::to_string(c.microbatches) + ")");
  }
  f.direction = parseOneOf(fail, s.field("direction"), direction,
                           {events::Direction::Activation, events::Direction::Gradient});
  if (f.rank < -1 || f.rank >= c.worldSize) {
    fail(s.field("rank"), std::to_string(f.rank),
         "expected -1 (none) or a rank in 0.." + std::to_string(c.worldSize - 1));
  }
  if (f.delaySeconds < 0 || f.delaySeconds > limits::kMaxTimeoutSeconds) {
    fail(s.field("delay_seconds"), show(*s.get("delay_seconds")),
         "expected a number of seconds in [0, 86400] (at most 1 day)");
  }
  if (f.kind == FaultKind::Delay && f.delaySeconds <= 0) {
    fail(s.field("delay_seconds"), s.get("delay_seconds") ? show(*s.get("delay_seconds")) : "0",
         "a delay fault needs delay_seconds > 0");
  }
  if (f.rank >= 0 && !f.module.empty()) {
    const auto owners = c.modulesOfRank(f.rank);
    const bool owned = std::any_of(owners.begin(), owners.end(),
                                   [&](const ModuleConfig* m) { return m->name == f.module; });
    if (!owners.empty() && !owned) {
      fail(s.field("rank"), std::to_string(f.rank),
           "rank " + std::to_string(f.rank) + " belongs to module \"" + owners.front()->name +
               "\", not \"" + f.module + "\"; give one of rank or module");
    }
  }
  bool byRank = f.kind == FaultKind::Kill && f.rank >= 0;
  if (!byRank) {
    const ModuleConfig* m = nullptr;
    for (const auto& mod : c.modules) {
      if (mod.name == f.module) m = &mod;
    }
    if (!m) {
      fail(s.field("module"), quote(f.module),
           "no module with this name" +
               std::string(f.kind == FaultKind::Kill ? " (or give rank)" : ""));
    }
    if (f.stage < -1 || f.stage >= m->pp) {
      fail(s.field("stage"), std::to_string(f.stage),
           "expected -1 (last) or a pp index in 0.." + std::to_string(m->pp - 1));
    }
  }
  return f;
}

}  // namespace

// ---- vocabularies ------------------------------------------------------------------------

namespace {
constexpr std::array<const char*, 2> kDeviceNames = {"cpu", "cuda"};
constexpr std::array<const char*, 2> kBackendNames = {"gloo", "nccl"};
constexpr std::array<const char*, 7> kFaultKindNames = {"delay", "drop", "corrupt", "shape",
                                                        "nan",   "inf",  "kill"};
}  // namespace

const char* toString(Device d) {
  return kDeviceNames[static_cast<size_t>(d)];
}
const char* toString(Backend b) {
  return kBackendNames[static_cast<size_t>(b)];
}
const char* toString(FaultKind k) {
  return kFaultKindNames[static_cast<size_t>(k)];
}
bool parseFaultKind(const std::string& text, FaultKind* out) {
  for (size_t i = 0; i < kFaultKindNames.size(); ++i) {
    if (text == kFaultKindNames[i]) {
      *out = static_cast<FaultKind>(i);
      return true;
    }
  }
  return false;
}

// ---- ModuleConfig / RecordConfig / RunConfig ----------------------------------------------

int ModuleConfig::layersOfStage(int stage) const {
  if (stage < 0 || stage >= pp) return 0;
  if (!stageLayers.empty()) return stageLayers[stage];
  return layers / pp;
}

int ModuleConfig::firstLayerOfStage(int stage) const {
  int first = 0;
  for (int s = 0; s < stage && s < pp; ++s) first += layersOfStage(s);
  return first;
}

bool RecordConfig::wants(int iteration, const std::string& module, int rank) const {
  return level != events::RecordLevel::Off && filter().keeps(iteration, module, rank);
}

const ModuleConfig& RunConfig::module(const std::string& name) const {
  for (const auto& m : modules) {
    if (m.name == name) return m;
  }
  throw ConfigError("modules", events::shownValue(sourceName) + ": modules = " + quote(name) +
                                   ": no such module");
}

const ModuleConfig& RunConfig::llm() const {
  for (const auto& m : modules) {
    if (m.isLlm()) return m;
  }
  throw ConfigError("modules", sourceName + ": modules = (no llm): expected one llm module");
}

std::vector<const ModuleConfig*> RunConfig::encoders() const {
  std::vector<const ModuleConfig*> out;
  for (const auto& m : modules) {
    if (m.isEncoder()) out.push_back(&m);
  }
  return out;
}

std::vector<const ModuleConfig*> RunConfig::modulesOfRank(int rank) const {
  std::vector<const ModuleConfig*> out;
  for (const auto& m : modules) {
    if (m.contains(rank)) out.push_back(&m);
  }
  return out;
}

int RunConfig::encoderMicroBatchSize(const ModuleConfig& enc) const {
  return microBatchSize * llm().dp / enc.dp;
}

// ---- entry points --------------------------------------------------------------------------

RunConfig parseConfig(const std::string& text, const std::string& sourceName,
                      const std::vector<std::string>& overrides) {
  Failer fail(sourceName);
  checkKeyDepth(text, sourceName);
  toml::table root;
  try {
    root = toml::parse(text, sourceName);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw ConfigError("", sourceName + ":" + std::to_string(b.line) + ":" +
                              std::to_string(b.column) +
                              ": not valid TOML: " + std::string(e.description()));
  }
  for (const auto& item : overrides) applyOverride(root, item, fail);

  RunConfig c;
  c.sourceName = sourceName;
  std::ostringstream os;
  os << root << "\n";
  c.text = os.str();

  Section top(root, "", fail);
  TopLevelText topText;
  readTopLevel(top, &c, &topText);
  validateTopLevel(fail, top, topText, &c);
  std::vector<const toml::table*> moduleTables = top.tableArray("modules");
  for (size_t i = 0; i < moduleTables.size(); ++i) {
    c.modules.push_back(readModule(*moduleTables[i], i, fail));
    const ModuleConfig& m = c.modules.back();
    validateModule(fail, Section(*moduleTables[i], "modules." + m.name, fail), m);
  }
  validateModuleSet(fail, &c, root);
  readOptimizer(fail, top.subTable("optimizer"), &c.optimizer);
  readRecord(fail, top.subTable("record"), &c);
  std::vector<const toml::table*> faultTables = top.tableArray("faults");
  for (size_t i = 0; i < faultTables.size(); ++i) {
    c.faults.push_back(readFault(fail, *faultTables[i], i, c));
  }
  requireColocatedProgress(c);
  if (!c.faults.empty()) checkFaultsCanFire(c, makePlan(c, Topology(c)));
  return c;
}

std::string readConfigFile(const std::string& path) {
  const std::string name = events::shownValue(path);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw ConfigError("", name + ": cannot open the config file (missing or not a regular file)");
  }
  const auto bytes = std::filesystem::file_size(path, ec);
  if (!ec && bytes > static_cast<uintmax_t>(limits::kMaxConfigBytes)) {
    throw ConfigError("", name + ": the config file is " + std::to_string(bytes) +
                              " bytes; expected at most " +
                              std::to_string(limits::kMaxConfigBytes) + " (16 MiB)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("", name + ": cannot open the config file (missing or unreadable)");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  // A run file (or a shard) where a config belongs: say what it is and what reads it, instead of
  // a TOML parse error about its binary header.
  static constexpr std::string_view kSqliteHeader{"SQLite format 3\0", 16};
  if (std::string_view(buffer.str()).substr(0, kSqliteHeader.size()) == kSqliteHeader) {
    throw ConfigError(
        "", name + ": an SQLite file (a run file?), not a config; `stagescope check " + name +
                "` or `gui` read run files, and the config a run ran is in "
                "it: sqlite3 " +
                name + " 'select config_text from run'");
  }
  return buffer.str();
}

RunConfig loadConfig(const std::string& path, const std::vector<std::string>& overrides) {
  return parseConfig(readConfigFile(path), path, overrides);
}

}  // namespace stagescope::plan

// Every flag that `--help` shows, on every verb and sub-verb, parses: the help text is read from the
// real binary, each flag is given a value that its own help line admits (first choice of a set, the
// low end of a range, an existing file/dir), and the parse must succeed (exit 0 with --help last, so no
// verb runs and nothing is changed). A flag that the help lists but the parser rejects fails the test.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/run_binary.h"

namespace {

using spk::test::Run;

Run run(const std::string& args) {
  return spk::test::run_sparkctl(args, "SPARKCTL_STATE_DIR=/tmp/spk-help-state ");
}

struct Flag {
  std::vector<std::string> names;  // "-v", "--log-level"
  std::string type;                // "" for a flag without a value, else "TEXT:{a,b}=x", "INT:INT in [1 - 9]"
};

struct Help {
  std::vector<Flag> flags;
  std::vector<std::string> subcommands;
};

// Parses CLI11's help layout: sections "Options:" and "Subcommands:", entries indented by two spaces.
Help parse_help(const std::string& text) {
  Help h;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != ' ') {
      section = line;
      continue;
    }
    if (line.size() < 3 || line[0] != ' ' || line[1] != ' ' || line[2] == ' ') continue;
    std::string entry = line.substr(2);
    if (section.rfind("Options", 0) == 0 && entry[0] == '-') {
      Flag f;
      size_t sp = entry.find(' ');
      std::string names = entry.substr(0, sp);
      std::stringstream ns(names);
      for (std::string n; std::getline(ns, n, ',');) f.names.push_back(n);
      if (sp != std::string::npos && sp + 1 < entry.size() &&
          std::isupper(static_cast<unsigned char>(entry[sp + 1]))) {
        // Type runs to the " (Env:" / " Needs:" / long gap that follows it.
        std::string rest = entry.substr(sp + 1);
        size_t end = rest.find("  ");
        size_t env = rest.find(" (Env:");
        if (env != std::string::npos && env < end) end = env;
        size_t dots = rest.find(" ...");
        if (dots != std::string::npos && dots < end) end = dots;
        f.type = rest.substr(0, end);
      }
      h.flags.push_back(f);
    } else if (section.rfind("Subcommands", 0) == 0) {
      h.subcommands.push_back(entry.substr(0, entry.find(' ')));
    }
  }
  return h;
}

// A value the flag's own help line admits.
std::string sample_value(const std::string& type) {
  std::smatch m;
  if (std::regex_search(type, m, std::regex(R"(\{([^,}]+))"))) return m[1];
  if (std::regex_search(type, m, std::regex(R"(in \[(-?[0-9.]+) - )"))) return m[1];
  if (type.find("FILE") != std::string::npos) return SPARKCTL_BINARY;
  if (type.find("DIR") != std::string::npos || type.find("PATH") != std::string::npos) return "/tmp";
  if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) return "1";
  if (type.rfind("FLOAT", 0) == 0 || type.rfind("NUMBER", 0) == 0) return "0.5";
  if (std::regex_search(type, m, std::regex(R"(=([^ \[\]]+))"))) return m[1];  // its own default
  return "x";
}

struct Checked {
  std::vector<std::string> jobs;  // argument lists that must parse (run with --help appended)
  std::set<std::string> verbs;
  std::vector<std::string> failures;
};

void walk(const std::string& path, int depth, Checked& c) {
  auto help = run(path + " --help");
  if (help.code != 0) {
    c.failures.push_back("`sparkctl" + path + " --help` exited " + std::to_string(help.code) + ": " +
                         help.out);
    return;
  }
  Help h = parse_help(help.out);
  for (const auto& f : h.flags) {
    for (const auto& name : f.names) {
      std::string args = path + " " + name;
      if (!f.type.empty()) args += " '" + sample_value(f.type) + "'";
      c.jobs.push_back(args);
    }
  }
  if (depth >= 3) return;
  for (const auto& s : h.subcommands) {
    if (depth == 0) c.verbs.insert(s);
    walk(path + " " + s, depth + 1, c);
  }
}

// Runs every job, 8 processes at a time (each is a process start; the walk has ~150 of them).
void run_jobs(Checked& c) {
  std::vector<std::string> fails(c.jobs.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < c.jobs.size(); i = next++) {
        auto r = run(c.jobs[i] + " --help");
        if (r.code != 0)
          fails[i] = "`sparkctl" + c.jobs[i] + " --help` exited " + std::to_string(r.code) + ": " + r.out;
      }
    });
  for (auto& th : pool) th.join();
  for (auto& f : fails)
    if (!f.empty()) c.failures.push_back(f);
}

TEST(HelpFlags, EveryFlagShownInHelpParses) {
  Checked c;
  walk("", 0, c);
  run_jobs(c);
  std::cout << c.verbs.size() << " verbs, " << c.jobs.size() << " flag spellings parsed\n";
  for (const auto& f : c.failures) ADD_FAILURE() << f;
  // The walk itself must have found the verbs and the global flags, or it proved nothing.
  for (const char* v : {"recipe", "cluster", "plan", "up"}) EXPECT_TRUE(c.verbs.count(v)) << v;
  EXPECT_GE(c.jobs.size(), 8u) << "too few flags found in the help output";
}

TEST(HelpFlags, HelpParserReadsCli11Layout) {
  auto h = parse_help(
      "Usage: x\n\nOptions:\n  -h,--help                   Print\n"
      "  -v,--log-level TEXT:{trace,debug}=info (Env:X)\n                              level\n"
      "  --mtu INT:INT in [68 - 65535]=9000\n"
      "  --ip TEXT ...                 ips\n\nSubcommands:\n  show                        s\n");
  ASSERT_EQ(h.flags.size(), 4u);
  EXPECT_EQ(h.flags[1].names, (std::vector<std::string>{"-v", "--log-level"}));
  EXPECT_EQ(sample_value(h.flags[1].type), "trace");
  EXPECT_EQ(sample_value(h.flags[2].type), "68");
  EXPECT_EQ(h.flags[3].type, "TEXT");
  EXPECT_TRUE(h.flags[0].type.empty());
  EXPECT_EQ(h.subcommands, std::vector<std::string>{"show"});
}

TEST(HelpFlags, GlobalFlagsWorkOnARealVerb) {
  auto r = run("--json -v debug --state-dir /tmp/spk-help-state recipe list");
  EXPECT_EQ(r.code, 0) << r.out;
  auto a = run("recipe list --json --log-level warn");  // globals after the verb too
  EXPECT_EQ(a.code, 0) << a.out;
  EXPECT_EQ(run("--log-level loud recipe list").code, 2);
  // The walk's mechanism detects a rejected value even with --help last (what makes it able to fail).
  EXPECT_EQ(run("--log-level loud recipe list --help").code, 2);
}

}  // namespace

// The command line on CLI11: the program's commands and help (dispatch) and each command's
// flags (Args). The only file of the app that includes CLI11, a header-only library that costs
// each file including it seconds to compile.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>

#include "common/command.h"
#include "common/dispatch.h"

namespace ps::cli {

Args::Args(const std::vector<std::string>& args, const std::vector<std::string>& valueFlags,
           const std::vector<std::string>& boolFlags)
    : given_(args) {
  // Spellings CLI11 would take but the command line never did: a boolean flag with a value.
  for (const auto& a : args)
    for (const auto& f : boolFlags)
      if (a.rfind(f + "=", 0) == 0) {
        error_ = "flag " + f + " takes no value";
        return;
      }
  if (args.empty()) return;  // nothing to scan (CLI11 expects at least one argument)
  CLI::App app;
  app.set_help_flag();  // --help is the dispatcher's (it prints the command's usage text)
  app.allow_extras();   // unknown flags, reported below by name
  std::map<std::string, std::vector<std::string>> given;
  std::map<std::string, std::int64_t> counts;
  for (const auto& f : valueFlags)
    app.add_option(f, given[f])
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  for (const auto& f : boolFlags) app.add_flag(f, counts[f]);
  app.add_option("positionals", positionals_);                    // every other argument, in order
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    // "--flag: 1 required TEXT missing" and the like: name the flag the way the usage does.
    const std::string what = e.what();
    const std::string flag = what.substr(0, what.find(':'));
    error_ = flag.rfind('-', 0) == 0 ? "flag " + flag + " needs a value" : what;
    return;
  }
  for (const auto& a : app.remaining()) {
    if (a.size() > 1 && a[0] == '-') {
      // A value flag left over is one CLI11 found no value for.
      const std::string name = a.substr(0, a.find('='));
      const bool valueFlag = std::find(valueFlags.begin(), valueFlags.end(), name) != valueFlags.end();
      error_ = valueFlag ? "flag " + name + " needs a value" : "unknown flag " + name;
      return;
    }
    positionals_.push_back(a);
  }
  for (auto& [flag, vs] : given)
    if (!vs.empty()) values_[flag] = std::move(vs);
  for (const auto& [flag, n] : counts)
    if (n > 0) values_[flag].assign(static_cast<size_t>(n), std::string());
}

bool Args::has(const std::string& flag) const {
  return values_.count(flag) > 0;
}

std::string Args::value(const std::string& flag, const std::string& fallback) const {
  auto it = values_.find(flag);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> Args::values(const std::string& flag) const {
  auto it = values_.find(flag);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

namespace {

// Help in the programs' own layout: the description, the usage line, the options, the
// commands in name order, the footer.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string) const override {
    return "usage: " + app->get_name() + " COMMAND [ARGS...]\n";
  }
  std::string make_description(const CLI::App* app) const override { return app->get_description() + "\n\n"; }
  std::string make_subcommand(const CLI::App* sub) const override {
    const std::string& name = sub->get_name();
    return "  " + name + std::string(name.size() < 14 ? 14 - name.size() : 1, ' ') + sub->get_description() +
           "\n";
  }
  std::string make_subcommands(const CLI::App* app, CLI::AppFormatMode) const override {
    auto subs = app->get_subcommands({});
    std::sort(subs.begin(), subs.end(), [](auto* a, auto* b) { return a->get_name() < b->get_name(); });
    std::string out = "\ncommands:\n";
    for (const CLI::App* sub : subs) out += make_subcommand(sub);
    return out;
  }
  std::string make_footer(const CLI::App* app) const override {
    return app->get_footer().empty() ? std::string() : app->get_footer() + "\n";
  }
};

}  // namespace

int dispatch(const Program& program, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CLI::App app(program.description, program.name);
  app.formatter(std::make_shared<HelpFormatter>());
  app.footer(program.footer);
  app.set_help_flag();
  app.allow_extras();
  app.require_subcommand(0, 1);
  bool help = false, version = false;
  app.add_flag("-h,--help", help, "print this help (also: help)")->group("options");
  app.add_flag("--version", version, "print the version (also: version)")->group("options");
  for (const Command& c : registry()) {
    // Everything after the command's name is the command's, passed on verbatim (the engine's
    // handoff execs with it): CLI11 reads only the name.
    app.add_subcommand(c.name, c.summary)->set_help_flag();
  }
  // `help` and `version` as words, as the programs always took them.
  if (!args.empty() && (args[0] == "help" || args[0] == "version")) args[0] = "--" + args[0];
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << app.help();
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "--version") return program.version();
  if (program.beforeCommand)
    if (auto refused = program.beforeCommand(); refused) return *refused;
  std::vector<std::string> name{args[0]};
  try {
    app.parse(name);
  } catch (const CLI::ParseError&) {
    return program.unknownCommand(args[0]);
  }
  auto chosen = app.get_subcommands();
  if (chosen.empty() || !app.remaining().empty()) return program.unknownCommand(args[0]);
  const CLI::App* sub = chosen.front();
  for (const Command& c : registry()) {
    if (c.name != sub->get_name()) continue;
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    // Commands without usage text here are handed on: the program that runs them answers --help.
    if (!c.usage.empty() &&
        std::any_of(rest.begin(), rest.end(), [](auto& a) { return a == "--help" || a == "-h"; })) {
      std::cout << c.usage;
      return kExitOk;
    }
    try {
      return c.run(rest);
    } catch (const std::exception& e) {
      std::cerr << "pipestudio-cli " << c.name << ": internal error: " << e.what() << "\n";
      return kExitInternal;
    }
  }
  return program.unknownCommand(args[0]);
}

}  // namespace ps::cli

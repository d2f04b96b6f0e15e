// The command-line parser every torchnative program shares: a program declares its flags (and
// positional arguments, and subcommands with flags of their own), and gets from the declarations
// its --help text, --version, `--flag value` and `--flag=value`, strict numbers and errors that
// name the flag and the reason.
//
//   tn::cli::Command command("torchnative-device", "Takes part in federated rounds.");
//   command.flag("--server", "HOST:PORT", "the coordinator's gRPC address").required().into(options.server);
//   command.flag("--devices", "N", "devices this process runs").into(options.devices, 1);
//   command.parse_or_exit(argc, argv);
//
// A flag's default, as --help shows it, is its target's value when into() is called.
#pragma once

#include <concepts>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tn::cli {

// What was typed wrong. Thrown by a flag's handler it is the reason alone ("expected an integer,
// got 'x'"), which the parser prefixes with the flag's name.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// "a, b or c": how an error lists the words it would have accepted.
std::string one_of(const std::vector<std::string>& words);

// A flag (--name VALUE) or a positional argument (NAME), as declared; set up by chaining.
class Flag {
 public:
  Flag(std::string name, std::string placeholder, std::string meaning);

  Flag& required();
  // May be given more than once, each value handled in order; other flags may be given once.
  Flag& repeatable();
  // What --help shows as the default when the target's value does not say it (or there is none).
  Flag& default_text(std::string text);

  // Where the value goes. Numbers take the whole text, within [min, max].
  Flag& into(std::string& target);
  Flag& into(std::optional<std::string>& target);
  template <std::integral T>
  Flag& into(T& target, T min = std::numeric_limits<T>::lowest(), T max = std::numeric_limits<T>::max());
  Flag& into(double& target);
  // The value is one of `names`' words; target takes the value paired with it.
  template <typename T>
  Flag& choice(T& target, std::vector<std::pair<std::string, T>> names);
  // Anything else: `handle` gets the text as given, and may throw UsageError with the reason.
  Flag& handle(std::function<void(const std::string&)> handle);

 private:
  friend class Command;
  void set(const std::string& text) const;  // UsageError prefixed with the flag's name

  std::string name_, placeholder_, meaning_, default_text_;
  bool required_ = false;
  bool repeatable_ = false;
  std::function<void(const std::string&)> handle_;
};

// A program, or one of its subcommands: its flags, positional arguments and subcommands. Neither
// copied nor moved, since its subcommands point back at it.
class Command {
 public:
  Command(std::string name, std::string summary, const Command* parent = nullptr);
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  Flag& flag(std::string name, std::string placeholder, std::string meaning);
  // Positional arguments are required, in the order declared.
  Flag& positional(std::string placeholder, std::string meaning);
  Command& subcommand(std::string name, std::string summary);

  enum class Outcome { Run, Help, Version };
  struct Parsed {
    Outcome outcome = Outcome::Run;
    std::string subcommand;  // the one chosen; empty for a program without subcommands
    std::string text;        // Help or Version: what to print
  };
  // `words` are argv without the program's name. Throws UsageError.
  Parsed parse(const std::vector<std::string>& words);
  // For main(): prints help or the version to stdout and exits 0, or an error and the usage to
  // stderr and exits 2; otherwise returns the chosen subcommand's name.
  std::string parse_or_exit(int argc, char** argv);
  // A usage error found after parsing (flags that do not go together), reported as parse_or_exit
  // reports its own: exit status 2.
  [[noreturn]] void fail(const std::string& problem) const;

  std::string help() const;
  std::string usage() const;  // "usage: PROGRAM REQUIRED... [options] [SUBCOMMAND ...]\n"
  std::string version() const;

 private:
  struct Seen;
  const Command& root() const;
  std::string path() const;      // "torchnative-admin create-task"
  std::string synopsis() const;  // the usage line without "usage: " and COMMAND
  std::string flag_rows() const;
  const Flag* find_flag(const std::string& name) const;
  std::vector<std::string> subcommand_names() const;
  Command& subcommand_named(const std::string& name);
  void take_flag(const std::string& word, const std::vector<std::string>& words, size_t& next,
                 Seen& seen) const;
  void take_positional(const std::string& word, Seen& seen) const;
  void check_complete(const Seen& seen) const;

  std::string name_, summary_;
  const Command* parent_;
  std::deque<Flag> flags_, positionals_;
  std::list<Command> subcommands_;
  const Command* chosen_ = this;  // the command whose usage an error shows
};

namespace detail {
// The integer of `text`, all of it, within [min, max]; UsageError with the reason otherwise.
template <std::integral T>
T parse_integer(const std::string& text, T min, T max);
}  // namespace detail

template <std::integral T>
Flag& Flag::into(T& target, T min, T max) {
  default_text_ = std::to_string(target);
  return handle(
      [&target, min, max](const std::string& text) { target = detail::parse_integer(text, min, max); });
}

template <typename T>
Flag& Flag::choice(T& target, std::vector<std::pair<std::string, T>> names) {
  std::vector<std::string> words;
  for (const auto& [word, value] : names) {
    words.push_back(word);
    if (value == target) default_text_ = word;
  }
  return handle([&target, names = std::move(names), words = std::move(words)](const std::string& text) {
    for (const auto& [word, value] : names)
      if (word == text) {
        target = value;
        return;
      }
    throw UsageError("expected " + one_of(words) + ", got '" + text + "'");
  });
}

}  // namespace tn::cli

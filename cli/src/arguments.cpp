#include "cli/arguments.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>

namespace tn::cli {

namespace {

constexpr size_t kWidth = 100;         // help text is wrapped to this many columns
constexpr size_t kMeaningColumn = 30;  // where a flag's meaning starts

// `text` word-wrapped to kWidth, continuation lines indented by `indent` (the first line is
// taken to start there already).
std::string wrap(const std::string& text, size_t indent) {
  std::string out;
  size_t column = indent;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const size_t length = end - start;
    if (column > indent && column + 1 + length > kWidth) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    out += text.substr(start, length);
    column += length;
    start = end + 1;
  }
  return out;
}

// One line (or more) of a help table: the name in the left column, the meaning wrapped on the right.
std::string row(const std::string& left, const std::string& meaning) {
  std::string out = "  " + left;
  if (out.size() + 1 < kMeaningColumn)
    out += std::string(kMeaningColumn - out.size(), ' ');
  else
    out += "\n" + std::string(kMeaningColumn, ' ');
  return out + wrap(meaning, kMeaningColumn) + "\n";
}

}  // namespace

std::string one_of(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i)
    out += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return out;
}

namespace detail {

template <std::integral T>
T parse_integer(const std::string& text, T min, T max) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (stop != end || error == std::errc::invalid_argument)
    throw UsageError(std::string("expected ") +
                     (std::is_signed_v<T> ? "an integer" : "a non-negative integer") + ", got '" + text +
                     "'");
  if (error == std::errc::result_out_of_range || value < min || value > max)
    throw UsageError("expected an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                     ", got '" + text + "'");
  return value;
}

template int32_t parse_integer(const std::string&, int32_t, int32_t);
template uint32_t parse_integer(const std::string&, uint32_t, uint32_t);
template int64_t parse_integer(const std::string&, int64_t, int64_t);
template uint64_t parse_integer(const std::string&, uint64_t, uint64_t);

}  // namespace detail

Flag::Flag(std::string name, std::string placeholder, std::string meaning)
    : name_(std::move(name)), placeholder_(std::move(placeholder)), meaning_(std::move(meaning)) {}

Flag& Flag::required() {
  required_ = true;
  return *this;
}

Flag& Flag::repeatable() {
  repeatable_ = true;
  return *this;
}

Flag& Flag::default_text(std::string text) {
  default_text_ = std::move(text);
  return *this;
}

Flag& Flag::into(std::string& target) {
  default_text_ = target;
  return handle([&target](const std::string& text) { target = text; });
}

Flag& Flag::into(std::optional<std::string>& target) {
  default_text_ = target.value_or("");
  return handle([&target](const std::string& text) { target = text; });
}

Flag& Flag::into(double& target) {
  char shortest[32];
  default_text_.assign(shortest, std::to_chars(shortest, shortest + sizeof shortest, target).ptr);
  return handle([&target](const std::string& text) {
    double value = 0;
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, value);
    if (stop != end || error != std::errc() || !std::isfinite(value))
      throw UsageError("expected a finite number, got '" + text + "'");
    target = value;
  });
}

Flag& Flag::handle(std::function<void(const std::string&)> handle) {
  handle_ = std::move(handle);
  return *this;
}

void Flag::set(const std::string& text) const {
  try {
    handle_(text);
  } catch (const UsageError& error) {
    throw UsageError(name_ + ": " + error.what());
  }
}

// What one command of the command line was given: how often each of its flags, and how many of
// its positional arguments.
struct Command::Seen {
  Command* command;
  std::map<const Flag*, int> counts = {};
  size_t positionals = 0;
};

Command::Command(std::string name, std::string summary, const Command* parent)
    : name_(std::move(name)), summary_(std::move(summary)), parent_(parent) {}

Flag& Command::flag(std::string name, std::string placeholder, std::string meaning) {
  return flags_.emplace_back(std::move(name), std::move(placeholder), std::move(meaning));
}

Flag& Command::positional(std::string placeholder, std::string meaning) {
  return positionals_.emplace_back(std::move(placeholder), "", std::move(meaning)).required();
}

Command& Command::subcommand(std::string name, std::string summary) {
  return subcommands_.emplace_back(std::move(name), std::move(summary), this);
}

const Command& Command::root() const { return parent_ ? parent_->root() : *this; }

std::string Command::path() const { return parent_ ? parent_->path() + " " + name_ : name_; }

const Flag* Command::find_flag(const std::string& name) const {
  for (const Flag& flag : flags_)
    if (flag.name_ == name) return &flag;
  return nullptr;
}

std::vector<std::string> Command::subcommand_names() const {
  std::vector<std::string> names;
  for (const Command& command : subcommands_) names.push_back(command.name_);
  return names;
}

Command& Command::subcommand_named(const std::string& name) {
  for (Command& command : subcommands_)
    if (command.name_ == name) return command;
  throw UsageError("unknown command " + name + ": expected " + one_of(subcommand_names()));
}

Command::Parsed Command::parse(const std::vector<std::string>& words) {
  std::vector<Seen> levels{{this}};  // this command, then the subcommand chosen
  Parsed parsed;
  chosen_ = this;
  for (size_t next = 0; next < words.size();) {
    const std::string& word = words[next++];
    Command& current = *levels.back().command;
    if (word == "-h" || word == "--help") return {Outcome::Help, parsed.subcommand, current.help()};
    if (word == "--version") return {Outcome::Version, parsed.subcommand, version()};
    if (word.starts_with("-") && word != "-") {
      current.take_flag(word, words, next, levels.back());
    } else if (current.subcommands_.empty()) {
      current.take_positional(word, levels.back());
    } else if (word == "help") {
      const Command& about = next < words.size() ? current.subcommand_named(words[next]) : current;
      return {Outcome::Help, "", about.help()};
    } else {
      Command& chosen = current.subcommand_named(word);
      levels.push_back({&chosen});
      chosen_ = &chosen;
      parsed.subcommand = word;
    }
  }
  for (const Seen& level : levels) level.command->check_complete(level);
  if (!levels.back().command->subcommands_.empty())
    throw UsageError("no command given: expected " + one_of(levels.back().command->subcommand_names()));
  return parsed;
}

// `word` is a flag; its value is after '=' or is the next word (words[next], then consumed).
void Command::take_flag(const std::string& word, const std::vector<std::string>& words, size_t& next,
                        Seen& seen) const {
  const size_t equals = word.find('=');
  const std::string name = word.substr(0, equals);
  const Flag* flag = find_flag(name);
  if (!flag && parent_ && parent_->find_flag(name)) throw UsageError(name + " goes before " + name_);
  if (!flag) throw UsageError("unknown flag " + name);
  std::string value;
  if (equals != std::string::npos)
    value = word.substr(equals + 1);
  else if (next < words.size() && !words[next].starts_with("--"))
    value = words[next++];
  else
    throw UsageError("missing value after " + name);
  if (++seen.counts[flag] > 1 && !flag->repeatable_) throw UsageError(name + " is given more than once");
  flag->set(value);
}

void Command::take_positional(const std::string& word, Seen& seen) const {
  if (seen.positionals == positionals_.size()) throw UsageError("unexpected argument '" + word + "'");
  positionals_[seen.positionals++].set(word);
}

void Command::check_complete(const Seen& seen) const {
  for (const Flag& flag : flags_)
    if (flag.required_ && !seen.counts.contains(&flag)) throw UsageError(flag.name_ + " is required");
  if (seen.positionals < positionals_.size())
    throw UsageError(name_ + " needs " + positionals_[seen.positionals].name_);
}

std::string Command::parse_or_exit(int argc, char** argv) {
  Parsed parsed;
  try {
    parsed = parse({argv + 1, argv + argc});
  } catch (const UsageError& error) {
    fail(error.what());
  }
  if (parsed.outcome == Outcome::Run) return parsed.subcommand;
  std::cout << parsed.text;
  std::exit(0);
}

void Command::fail(const std::string& problem) const {
  const Command& context = *root().chosen_;
  std::cerr << root().name_ << ": " << problem << "\n"
            << context.usage() << "'" << context.path() << " --help' lists every flag.\n";
  std::exit(2);
}

// This command's part of the synopsis: its name, its required flags, [options] when it has
// others, its positional arguments.
std::string Command::synopsis() const {
  std::string text = name_;
  bool optional = false;
  for (const Flag& flag : flags_) {
    if (flag.required_)
      text += " " + flag.name_ + " " + flag.placeholder_;
    else
      optional = true;
  }
  if (optional) text += " [options]";
  for (const Flag& positional : positionals_) text += " " + positional.name_;
  return parent_ ? parent_->synopsis() + " " + text : text;
}

std::string Command::usage() const {
  return "usage: " + synopsis() + (subcommands_.empty() ? "" : " COMMAND ...") + "\n";
}

std::string Command::version() const { return root().name_ + " " TORCHNATIVE_VERSION "\n"; }

std::string Command::flag_rows() const {
  std::string out;
  for (const Flag& positional : positionals_) out += row(positional.name_, positional.meaning_);
  for (const Flag& flag : flags_) {
    std::string meaning = flag.meaning_;
    if (flag.required_)
      meaning += " (required)";
    else if (!flag.default_text_.empty())
      meaning += " (default: " + flag.default_text_ + ")";
    if (flag.repeatable_) meaning += " (repeatable)";
    out += row(flag.name_ + " " + flag.placeholder_, meaning);
  }
  return out;
}

std::string Command::help() const {
  std::string out = usage() + "\n" + wrap(summary_, 0) + "\n\n";
  out += flag_rows();
  out += row("-h, --help", "prints this help and exits");
  out += row("--version", "prints the version and exits");
  if (subcommands_.empty()) return out;
  out += "\ncommands:\n";
  for (const Command& command : subcommands_) out += row(command.name_, command.summary_);
  return out + "\n'" + path() + " help COMMAND' or '" + path() +
         " COMMAND --help' tells a command's flags.\n";
}

}  // namespace tn::cli

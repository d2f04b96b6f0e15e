// The shared command-line parser (cli/arguments.h) and file reader (cli/read_file.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "cli/arguments.h"
#include "cli/read_file.h"

namespace {

using tn::cli::Command;
using tn::cli::UsageError;

// A program as the device CLI declares one: a required text flag, numbers with defaults, a choice.
struct Device {
  std::string server;
  int devices = 1;
  int64_t examples = 0;
  uint64_t seed = 7;
  double step = 0.25;
  std::string transport = "data-plane";
  std::vector<std::string> labels;
  Command command{"tool", "Does things."};

  Device() {
    command.flag("--server", "HOST:PORT", "where to connect").required().into(server);
    command.flag("--devices", "N", "how many").into(devices, 1);
    command.flag("--examples", "N", "examples each").into(examples);
    command.flag("--seed", "S", "the seed").into(seed);
    command.flag("--step", "X", "the step").into(step);
    command.flag("--transport", "data-plane|grpc", "how")
        .choice(transport, {{"data-plane", "data-plane"}, {"grpc", "grpc"}});
    command.flag("--label", "K=V", "a label").repeatable().handle([this](const std::string& label) {
      labels.push_back(label);
    });
  }
};

// The message of the UsageError parsing `words` throws.
std::string error_of(Command& command, const std::vector<std::string>& words) {
  try {
    command.parse(words);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "no error";
}

TEST(CliTest, FlagsTakeTheNextWordOrWhatFollowsTheEqualsSign) {
  Device device;
  const Command::Parsed parsed = device.command.parse({"--server", "host:1", "--devices=12", "--examples",
                                                       "-3", "--seed=18446744073709551615", "--step", "1e-3",
                                                       "--transport=grpc", "--label", "a=b", "--label=c=d"});
  EXPECT_EQ(parsed.outcome, Command::Outcome::Run);
  EXPECT_EQ(parsed.subcommand, "");
  EXPECT_EQ(device.server, "host:1");
  EXPECT_EQ(device.devices, 12);
  EXPECT_EQ(device.examples, -3);
  EXPECT_EQ(device.seed, UINT64_MAX);
  EXPECT_EQ(device.step, 1e-3);
  EXPECT_EQ(device.transport, "grpc");
  EXPECT_EQ(device.labels, (std::vector<std::string>{"a=b", "c=d"}));
}

TEST(CliTest, DefaultsStayWhenAFlagIsNotGiven) {
  Device device;
  device.command.parse({"--server", "h"});
  EXPECT_EQ(device.devices, 1);
  EXPECT_EQ(device.seed, 7u);
  EXPECT_EQ(device.transport, "data-plane");
}

TEST(CliTest, ErrorsNameTheFlagAndTheReason) {
  Device device;
  EXPECT_EQ(error_of(device.command, {"--server", "h", "--devices", "x"}),
            "--devices: expected an integer, got 'x'");
  EXPECT_EQ(error_of(device.command, {"--server", "h", "--foo", "1"}), "unknown flag --foo");
  EXPECT_EQ(error_of(device.command, {"--devices", "2"}), "--server is required");
  EXPECT_EQ(error_of(device.command, {"--server"}), "missing value after --server");
  EXPECT_EQ(error_of(device.command, {"--server", "--devices", "2"}), "missing value after --server");
  EXPECT_EQ(error_of(device.command, {"--server", "h", "--server", "i"}), "--server is given more than once");
  EXPECT_EQ(error_of(device.command, {"--server", "h", "--transport", "tcp"}),
            "--transport: expected data-plane or grpc, got 'tcp'");
  EXPECT_EQ(error_of(device.command, {"--server", "h", "stray"}), "unexpected argument 'stray'");
}

TEST(CliTest, NumbersAreTheWholeWordWithinRange) {
  Device device;
  auto devices = [&](const std::string& value) {
    return error_of(device.command, {"--server=h", "--devices", value});
  };
  EXPECT_EQ(devices("12abc"), "--devices: expected an integer, got '12abc'");
  EXPECT_EQ(devices(" 12"), "--devices: expected an integer, got ' 12'");
  EXPECT_EQ(devices("+12"), "--devices: expected an integer, got '+12'");
  EXPECT_EQ(devices(""), "--devices: expected an integer, got ''");
  EXPECT_EQ(devices("0"), "--devices: expected an integer from 1 to 2147483647, got '0'");
  EXPECT_EQ(devices("2147483648"), "--devices: expected an integer from 1 to 2147483647, got '2147483648'");
  EXPECT_EQ(error_of(device.command, {"--server=h", "--seed", "-1"}),
            "--seed: expected a non-negative integer, got '-1'");
  EXPECT_EQ(error_of(device.command, {"--server=h", "--seed", "18446744073709551616"}),
            "--seed: expected an integer from 0 to 18446744073709551615, got '18446744073709551616'");
  EXPECT_EQ(error_of(device.command, {"--server=h", "--step", "0.5x"}),
            "--step: expected a finite number, got '0.5x'");
  EXPECT_EQ(error_of(device.command, {"--server=h", "--step", "nan"}),
            "--step: expected a finite number, got 'nan'");
}

TEST(CliTest, HelpListsEveryFlagWithItsMeaningAndDefault) {
  Device device;
  for (const char* flag : {"-h", "--help"}) {
    const Command::Parsed parsed = device.command.parse({flag});  // --server is not needed for help
    EXPECT_EQ(parsed.outcome, Command::Outcome::Help);
    EXPECT_EQ(parsed.text, device.command.help());
  }
  const std::string help = device.command.help();
  EXPECT_TRUE(help.starts_with("usage: tool --server HOST:PORT [options]\n\nDoes things.\n\n")) << help;
  for (const char* line :
       {"  --server HOST:PORT          where to connect (required)\n",
        "  --devices N                 how many (default: 1)\n",
        "  --examples N                examples each (default: 0)\n",
        "  --seed S                    the seed (default: 7)\n",
        "  --step X                    the step (default: 0.25)\n",
        "  --transport data-plane|grpc\n                              how (default: data-plane)\n",
        "  --label K=V                 a label (repeatable)\n",
        "  -h, --help                  prints this help and exits\n",
        "  --version                   prints the version and exits\n"})
    EXPECT_NE(help.find(line), std::string::npos) << line << help;
}

TEST(CliTest, VersionIsTheProgramsNameAndTheProjectsVersion) {
  Device device;
  const Command::Parsed parsed = device.command.parse({"--version"});
  EXPECT_EQ(parsed.outcome, Command::Outcome::Version);
  EXPECT_EQ(parsed.text, device.command.version());
  EXPECT_TRUE(parsed.text.starts_with("tool ") && parsed.text.ends_with("\n")) << parsed.text;
  EXPECT_GT(parsed.text.size(), std::string("tool \n").size());
}

// A program as the admin CLI declares one: flags of its own, then subcommands with theirs.
struct Admin {
  std::string key, server, task, reason, out;
  uint32_t rounds = 0;
  Command command{"admin", "Administers."};

  Admin() {
    command.flag("--key", "FILE", "the key").required().into(key);
    command.flag("--server", "HOST:PORT", "where").into(server);
    Command& create = command.subcommand("create-task", "creates a task");
    create.flag("--rounds", "N", "how many rounds").required().into(rounds);
    Command& stop = command.subcommand("stop-task", "stops a task");
    stop.positional("TASK", "the task's id").into(task);
    stop.flag("--reason", "TEXT", "why").into(reason);
  }
};

TEST(CliTest, SubcommandsHaveFlagsAndPositionalArgumentsOfTheirOwn) {
  Admin admin;
  Command::Parsed parsed = admin.command.parse({"--key", "k", "stop-task", "--reason", "done", "t-1"});
  EXPECT_EQ(parsed.subcommand, "stop-task");
  EXPECT_EQ(admin.task, "t-1");
  EXPECT_EQ(admin.reason, "done");
  parsed = admin.command.parse({"--key=k", "create-task", "--rounds=3"});
  EXPECT_EQ(parsed.subcommand, "create-task");
  EXPECT_EQ(admin.rounds, 3u);
}

TEST(CliTest, SubcommandErrorsNameTheFlagAndTheCommand) {
  Admin admin;
  EXPECT_EQ(error_of(admin.command, {"--key", "k"}), "no command given: expected create-task or stop-task");
  EXPECT_EQ(error_of(admin.command, {"--key", "k", "frob"}),
            "unknown command frob: expected create-task or stop-task");
  EXPECT_EQ(error_of(admin.command, {"create-task", "--rounds", "1"}), "--key is required");
  EXPECT_EQ(error_of(admin.command, {"--key", "k", "create-task"}), "--rounds is required");
  EXPECT_EQ(error_of(admin.command, {"--key", "k", "create-task", "--rounds", "4294967296"}),
            "--rounds: expected an integer from 0 to 4294967295, got '4294967296'");
  EXPECT_EQ(error_of(admin.command, {"--key", "k", "stop-task"}), "stop-task needs TASK");
  EXPECT_EQ(error_of(admin.command, {"--key", "k", "stop-task", "a", "b"}), "unexpected argument 'b'");
  EXPECT_EQ(error_of(admin.command, {"--key", "k", "stop-task", "a", "--server", "s"}),
            "--server goes before stop-task");
  EXPECT_EQ(error_of(admin.command, {"--key", "k", "stop-task", "a", "--rounds", "1"}),
            "unknown flag --rounds");
}

TEST(CliTest, SubcommandsHaveHelpOfTheirOwn) {
  Admin admin;
  const std::string help = admin.command.help();
  EXPECT_TRUE(help.starts_with("usage: admin --key FILE [options] COMMAND ...\n")) << help;
  EXPECT_NE(help.find("  create-task                 creates a task\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  stop-task                   stops a task\n"), std::string::npos) << help;
  EXPECT_NE(help.find("'admin help COMMAND' or 'admin COMMAND --help'"), std::string::npos) << help;

  const Command::Parsed by_word = admin.command.parse({"help", "stop-task"});
  const Command::Parsed by_flag = admin.command.parse({"stop-task", "--help"});
  EXPECT_EQ(by_word.outcome, Command::Outcome::Help);
  EXPECT_EQ(by_word.text, by_flag.text);
  EXPECT_TRUE(by_word.text.starts_with(
      "usage: admin --key FILE [options] stop-task [options] TASK\n\nstops a task\n"))
      << by_word.text;
  EXPECT_NE(by_word.text.find("  TASK                        the task's id\n"), std::string::npos)
      << by_word.text;
  EXPECT_NE(by_word.text.find("  --reason TEXT               why\n"), std::string::npos) << by_word.text;
  EXPECT_EQ(admin.command.parse({"help"}).text, help);
}

TEST(CliTest, ReadFileReturnsEveryByte) {
  const std::filesystem::path path = std::filesystem::path(testing::TempDir()) / "cli_test_bytes";
  const std::string bytes = std::string("a\0b", 3) + std::string(200'000, 'x');
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(tn::cli::read_file(path.string()), bytes);
  std::filesystem::remove(path);
}

TEST(CliTest, ReadFileNamesThePathAndTheOperatingSystemsReason) {
  auto error_reading = [](const std::string& path, const std::string& what) {
    try {
      tn::cli::read_file(path, what);
    } catch (const std::runtime_error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_reading("/nonexistent/cli_test", ""),
            "cannot read /nonexistent/cli_test: No such file or directory");
  EXPECT_EQ(error_reading("/nonexistent/cli_test", "model"),
            "cannot read the model file /nonexistent/cli_test: No such file or directory");
  EXPECT_EQ(error_reading(testing::TempDir(), ""), "cannot read " + testing::TempDir() + ": Is a directory");
}

}  // namespace

// torchnative-admin: the operators' client of the coordinator's AdminService. Every call is
// signed with the administrator's Ed25519 key (created on first use; give its public key to the
// coordinator's admin_public_keys). Results are JSON on stdout; errors go to stderr, status 1.
//
//   torchnative-admin --key FILE public-key
//   torchnative-admin --server HOST:PORT --key FILE [--tls-ca FILE] COMMAND ...
//     create-task --strategy NAME [--params JSON] --rounds N --devices-per-round N --min-updates N
//                 --round-timeout-ms MS [--min-available N] [--deadline-unix-ms MS] [--label K=V]...
//                 [--min-memory-bytes N] (--model FILE.safetensors | --stored-model VERSION [--digest HEX])
//     stop-task TASK [--reason TEXT]
//     devices
//     rounds TASK
//     fetch-model VERSION --out FILE.safetensors [--digest HEX]
//     events [--task TASK] [--count N]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "proto/model_transfer.h"
#include "proto/signing.h"
#include "server/hex.h"
#include "server/read_file.h"
#include "server/safetensors.h"
#include "torchnative/federated/v1/admin.grpc.pb.h"

namespace {

namespace v1 = ::torchnative::federated::v1;
using nlohmann::json;
using tn::server::read_file;

constexpr const char* kUsage =
    "usage: torchnative-admin --key FILE public-key\n"
    "       torchnative-admin --server HOST:PORT --key FILE [--tls-ca FILE] COMMAND ...\n"
    "  create-task --strategy NAME [--params JSON] --rounds N --devices-per-round N --min-updates N\n"
    "              --round-timeout-ms MS [--min-available N] [--deadline-unix-ms MS] [--label K=V]...\n"
    "              [--min-memory-bytes N] (--model FILE.safetensors | --stored-model VERSION [--digest "
    "HEX])\n"
    "  stop-task TASK [--reason TEXT]\n"
    "  devices\n"
    "  rounds TASK\n"
    "  fetch-model VERSION --out FILE.safetensors [--digest HEX]\n"
    "  events [--task TASK] [--count N]\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RpcFailed : std::runtime_error {
  RpcFailed(const std::string& method, const grpc::Status& status)
      : std::runtime_error(method + " failed with status " + std::to_string(int(status.error_code())) + ": " +
                           status.error_message()) {}
};

// A command's words: positional arguments in order, and --flag values (repeatable ones in order).
struct Arguments {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> flags;

  std::optional<std::string> optional(const std::string& flag) const {
    auto found = flags.find(flag);
    return found == flags.end() ? std::nullopt : std::optional(found->second);
  }
  std::string required(const std::string& flag) const {
    auto value = optional(flag);
    if (!value) throw UsageError("missing " + flag);
    return *value;
  }
  uint64_t count(const std::string& flag, uint64_t fallback) const {
    auto value = optional(flag);
    if (!value) return fallback;
    size_t used = 0;
    try {
      uint64_t number = std::stoull(*value, &used);
      if (used == value->size() && value->front() != '-') return number;
    } catch (const std::logic_error&) {
    }
    throw UsageError(flag + " needs a non-negative integer, not '" + *value + "'");
  }
  uint64_t required_count(const std::string& flag) const {
    required(flag);
    return count(flag, 0);
  }
};

Arguments split_arguments(const std::vector<std::string>& words) {
  Arguments arguments;
  for (size_t i = 0; i < words.size(); ++i) {
    if (!words[i].starts_with("--")) {
      arguments.positional.push_back(words[i]);
      continue;
    }
    if (i + 1 >= words.size()) throw UsageError(words[i] + " needs a value");
    arguments.flags.emplace(words[i], words[i + 1]);
    ++i;
  }
  return arguments;
}

std::string digest_argument(const Arguments& arguments) {
  auto hex = arguments.optional("--digest");
  if (!hex) return {};
  auto digest = tn::server::from_hex(*hex, 32);
  if (!digest) throw UsageError("--digest needs a BLAKE2b-256 digest in hex (64 digits)");
  return *digest;
}

class Admin {
 public:
  Admin(const std::string& server, const std::string& key_file, const std::optional<std::string>& tls_ca)
      : key_(tn::proto::SigningKey::load_or_create(key_file)),
        key_id_(tn::server::to_hex(key_.public_key())) {
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (tls_ca) {
      grpc::SslCredentialsOptions tls;
      tls.pem_root_certs = read_file(*tls_ca);
      credentials = grpc::SslCredentials(tls);
    }
    stub_ = v1::AdminService::NewStub(grpc::CreateChannel(server, credentials));
  }

  json create_task(const Arguments& arguments) {
    v1::CreateTaskHeader header;
    header.set_strategy(arguments.required("--strategy"));
    header.set_strategy_parameters_json(arguments.optional("--params").value_or("{}"));
    header.set_rounds(uint32_t(arguments.required_count("--rounds")));
    header.mutable_selection()->set_devices_per_round(
        uint32_t(arguments.required_count("--devices-per-round")));
    header.mutable_selection()->set_min_memory_bytes(arguments.count("--min-memory-bytes", 0));
    auto [labels_begin, labels_end] = arguments.flags.equal_range("--label");
    for (auto label = labels_begin; label != labels_end; ++label) {
      const size_t equals = label->second.find('=');
      if (equals == std::string::npos)
        throw UsageError("--label needs KEY=VALUE, not '" + label->second + "'");
      (*header.mutable_selection()->mutable_required_labels())[label->second.substr(0, equals)] =
          label->second.substr(equals + 1);
    }
    header.set_min_updates(uint32_t(arguments.required_count("--min-updates")));
    header.set_min_available_devices(uint32_t(arguments.count("--min-available", 0)));
    header.set_round_timeout_ms(arguments.required_count("--round-timeout-ms"));
    header.set_deadline_unix_ms(arguments.count("--deadline-unix-ms", 0));

    std::optional<tn::proto::ModelChunker> chunker;
    if (auto path = arguments.optional("--model")) {
      auto bytes = read_file(*path);
      auto file = std::make_shared<std::vector<std::byte>>(
          reinterpret_cast<const std::byte*>(bytes.data()),
          reinterpret_cast<const std::byte*>(bytes.data()) + bytes.size());
      chunker.emplace(tn::server::decode_safetensors(file, *path).model,
                      std::filesystem::path(*path).filename().string());
      *header.mutable_streamed_model() = chunker->header();
    } else if (auto version = arguments.optional("--stored-model")) {
      header.mutable_stored_model()->set_model_version(*version);
      header.mutable_stored_model()->set_blake2b_256(digest_argument(arguments));
    } else {
      throw UsageError("create-task needs --model FILE or --stored-model VERSION");
    }

    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    v1::CreateTaskResponse response;
    auto writer = stub_->CreateTask(&context, &response);
    v1::CreateTaskRequest message;
    sign(*message.mutable_signed_header(), "CreateTask", header);
    bool sent = writer->Write(message);
    if (chunker) {
      message.Clear();
      while (sent && chunker->next_chunk(*message.mutable_chunk())) sent = writer->Write(message);
    }
    writer->WritesDone();  // when the server refused early, Finish says why
    check("CreateTask", writer->Finish());
    return {{"task_id", response.task_id()}, {"initial_model_version", response.initial_model_version()}};
  }

  json stop_task(const Arguments& arguments) {
    if (arguments.positional.size() != 1) throw UsageError("stop-task takes one task id");
    v1::StopTaskPayload payload;
    payload.set_task_id(arguments.positional[0]);
    payload.set_reason(arguments.optional("--reason").value_or(""));
    call("StopTask", payload, &v1::AdminService::Stub::StopTask);
    return {{"stopping", arguments.positional[0]}};
  }

  json devices() {
    const v1::ListDevicesResponse response =
        call("ListDevices", v1::ListDevicesPayload(), &v1::AdminService::Stub::ListDevices);
    json out = json::array();
    for (const v1::DeviceInfo& device : response.devices())
      out.push_back({{"device_id", device.device_id()},
                     {"public_key", tn::server::to_hex(device.public_key())},
                     {"platform", device.metadata().platform()},
                     {"registered_unix_ms", device.registered_unix_ms()},
                     {"last_seen_unix_ms", device.last_seen_unix_ms()},
                     {"last_state", v1::DeviceState_Name(device.last_state())},
                     {"alive", device.alive()}});
    return out;
  }

  json rounds(const Arguments& arguments) {
    if (arguments.positional.size() != 1) throw UsageError("rounds takes one task id");
    v1::ListRoundsPayload payload;
    payload.set_task_id(arguments.positional[0]);
    const v1::ListRoundsResponse response = call("ListRounds", payload, &v1::AdminService::Stub::ListRounds);
    json out = json::array();
    auto list = [](const auto& ids) { return std::vector<std::string>(ids.begin(), ids.end()); };
    for (const v1::RoundInfo& round : response.rounds())
      out.push_back({{"round_id", round.round_id()},
                     {"state", v1::RoundState_Name(round.state())},
                     {"input_model_version", round.input_model_version()},
                     {"output_model_version", round.output_model_version()},
                     {"selected", list(round.selected_devices())},
                     {"contributors", list(round.contributors())},
                     {"missing", list(round.missing())},
                     {"started_unix_ms", round.started_unix_ms()},
                     {"closed_unix_ms", round.closed_unix_ms()}});
    return out;
  }

  json fetch_model(const Arguments& arguments) {
    if (arguments.positional.size() != 1) throw UsageError("fetch-model takes one model version");
    const std::string out_path = arguments.required("--out");
    v1::FetchModelVersionPayload payload;
    payload.set_model_version(arguments.positional[0]);
    payload.set_blake2b_256(digest_argument(arguments));
    v1::FetchModelVersionRequest request;
    sign(request, "FetchModelVersion", payload);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    auto reader = stub_->FetchModelVersion(&context, request);
    tn::proto::ModelAssembler assembler;
    v1::ModelStream message;
    std::optional<std::string> refusal;
    while (reader->Read(&message)) {
      try {
        assembler.accept(message);
      } catch (const tn::proto::TransferError& error) {
        refusal = error.what();
        context.TryCancel();
        break;
      }
    }
    grpc::Status status = reader->Finish();
    if (refusal) throw std::runtime_error("FetchModelVersion: the stream was refused: " + *refusal);
    check("FetchModelVersion", status);
    tn::federated::Model model = assembler.finish();
    // Written aside and renamed, so a reader never sees half a file.
    const std::string temporary = out_path + ".partial";
    std::ofstream(temporary, std::ios::binary | std::ios::trunc) << tn::server::encode_safetensors(model);
    std::filesystem::rename(temporary, out_path);
    return {{"model_version", assembler.header().model_version()},
            {"blake2b_256", tn::server::to_hex(assembler.header().blake2b_256())},
            {"path", out_path}};
  }

  void events(const Arguments& arguments) {
    v1::StreamEventsPayload payload;
    payload.set_task_id(arguments.optional("--task").value_or(""));
    const uint64_t limit = arguments.count("--count", 0);
    v1::StreamEventsRequest request;
    sign(request, "StreamEvents", payload);
    grpc::ClientContext context;
    auto reader = stub_->StreamEvents(&context, request);
    v1::Event event;
    uint64_t shown = 0;
    while ((limit == 0 || shown < limit) && reader->Read(&event)) {
      std::cout << json{{"sequence", event.sequence()},
                        {"time_unix_ms", event.time_unix_ms()},
                        {"kind", v1::EventKind_Name(event.kind())},
                        {"task_id", event.task_id()},
                        {"round_id", event.round_id()},
                        {"device_id", event.device_id()},
                        {"message", event.message()}}
                       .dump()
                << std::endl;
      ++shown;
    }
    if (limit != 0 && shown == limit) {
      context.TryCancel();
      reader->Finish();
      return;
    }
    check("StreamEvents", reader->Finish());
  }

 private:
  static constexpr std::chrono::seconds kCallTimeout{60};

  template <typename Request>
  void sign(Request& request, const char* method, const google::protobuf::Message& payload) {
    std::string bytes;
    payload.SerializeToString(&bytes);
    const std::string path = "/" + std::string(v1::AdminService::service_full_name()) + "/" + method;
    *request.mutable_auth() = tn::proto::sign_request(path, key_id_, bytes, key_);
    request.set_payload(std::move(bytes));
  }

  // One signed unary call, with the admin CLI's deadline; a refusal is thrown as RpcFailed.
  template <typename Request, typename Response>
  Response call(const char* method, const google::protobuf::Message& payload,
                grpc::Status (v1::AdminService::Stub::*rpc)(grpc::ClientContext*, const Request&,
                                                            Response*)) {
    Request request;
    sign(request, method, payload);
    Response response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
    check(method, (stub_.get()->*rpc)(&context, request, &response));
    return response;
  }

  static void check(const char* method, const grpc::Status& status) {
    if (!status.ok()) throw RpcFailed(method, status);
  }

  tn::proto::SigningKey key_;
  std::string key_id_;
  std::unique_ptr<v1::AdminService::Stub> stub_;
};

int run(const std::vector<std::string>& words) {
  if (std::ranges::find_if(words, [](const std::string& word) { return word == "--help" || word == "-h"; }) !=
      words.end()) {
    std::cout << kUsage;
    return 0;
  }
  Arguments global;
  size_t i = 0;
  for (; i < words.size() && words[i].starts_with("--"); i += 2) {
    if (i + 1 >= words.size()) throw UsageError(words[i] + " needs a value");
    if (words[i] != "--server" && words[i] != "--key" && words[i] != "--tls-ca")
      throw UsageError("unknown option " + words[i]);
    global.flags.emplace(words[i], words[i + 1]);
  }
  if (i >= words.size()) throw UsageError("no command");
  const std::string command = words[i];
  const Arguments arguments = split_arguments({words.begin() + long(i) + 1, words.end()});
  const std::string key_file = global.required("--key");
  if (command == "public-key") {
    std::cout << tn::server::to_hex(tn::proto::SigningKey::load_or_create(key_file).public_key()) << "\n";
    return 0;
  }
  Admin admin(global.required("--server"), key_file, global.optional("--tls-ca"));
  json result;
  if (command == "create-task")
    result = admin.create_task(arguments);
  else if (command == "stop-task")
    result = admin.stop_task(arguments);
  else if (command == "devices")
    result = admin.devices();
  else if (command == "rounds")
    result = admin.rounds(arguments);
  else if (command == "fetch-model")
    result = admin.fetch_model(arguments);
  else if (command == "events") {
    admin.events(arguments);
    return 0;
  } else
    throw UsageError("unknown command " + command);
  std::cout << result.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run({argv + 1, argv + argc});
  } catch (const UsageError& error) {
    std::cerr << "torchnative-admin: " << error.what() << "\n" << kUsage;
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "torchnative-admin: " << error.what() << "\n";
    return 1;
  }
}

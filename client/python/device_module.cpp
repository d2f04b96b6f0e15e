// torchnative._device: the device client for Python. Models cross as dicts of numpy arrays
// (name -> array), so any torch (ours or upstream) converts them with torch.from_numpy and
// Tensor.numpy(); the C++ client does the rest with the GIL released.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "client/device.h"
#include "proto/model_transfer.h"

namespace py = pybind11;

namespace {

using tn::ScalarType;
using tn::federated::Model;

py::dtype numpy_dtype(ScalarType type) {
  switch (type) {
    case ScalarType::Float:
      return py::dtype("float32");
    case ScalarType::Double:
      return py::dtype("float64");
    case ScalarType::Half:
      return py::dtype("float16");
    case ScalarType::Long:
      return py::dtype("int64");
    case ScalarType::Int:
      return py::dtype("int32");
    case ScalarType::Short:
      return py::dtype("int16");
    case ScalarType::Char:
      return py::dtype("int8");
    case ScalarType::Byte:
      return py::dtype("uint8");
    case ScalarType::Bool:
      return py::dtype("bool");
    default:
      throw py::type_error(std::string("torchnative._device: ") + tn::upstream_type_name(type) +
                           " tensors have no numpy dtype (bfloat16 models need the torch API)");
  }
}

ScalarType scalar_type(const py::dtype& dtype) {
  static const std::pair<const char*, ScalarType> known[] = {
      {"float32", ScalarType::Float}, {"float64", ScalarType::Double}, {"float16", ScalarType::Half},
      {"int64", ScalarType::Long},    {"int32", ScalarType::Int},      {"int16", ScalarType::Short},
      {"int8", ScalarType::Char},     {"uint8", ScalarType::Byte},     {"bool", ScalarType::Bool}};
  for (const auto& [name, type] : known)
    if (dtype.equal(py::dtype(name))) return type;
  throw py::type_error("torchnative._device: numpy dtype " +
                       py::str(static_cast<const py::handle&>(dtype)).cast<std::string>() +
                       " is not a model dtype");
}

py::dict to_numpy(const Model& model) {
  py::dict out;
  for (const auto& tensor : model.tensors) {
    std::vector<py::ssize_t> shape(tensor.shape.begin(), tensor.shape.end());
    py::array array(numpy_dtype(tensor.dtype), shape);
    std::memcpy(array.mutable_data(), tensor.data.get(), tensor.nbytes);
    out[py::str(tensor.name)] = array;
  }
  return out;
}

// The trained state: every entry of the global model, as arrays (or anything with .numpy()).
Model from_numpy(const py::dict& state) {
  Model model;
  for (const auto& [key, value] : state) {
    py::object item = py::reinterpret_borrow<py::object>(value);
    if (py::hasattr(item, "numpy")) item = item.attr("detach")().attr("numpy")();
    auto array = py::array::ensure(item, py::array::c_style);
    if (!array)
      throw py::type_error("torchnative._device: '" + std::string(py::str(key)) + "' is not an array");
    tn::Shape shape(array.shape(), array.shape() + array.ndim());
    auto bytes = std::span(reinterpret_cast<const std::byte*>(array.data()), size_t(array.nbytes()));
    model.tensors.push_back(
        tn::federated::copy_tensor(py::str(key), scalar_type(array.dtype()), shape, bytes));
  }
  return model;
}

py::dict round_config(const tn::client::v1::RoundConfig& round) {
  py::dict config;
  for (const auto& [name, value] : round.fit_config()) {
    using V = tn::client::v1::ConfigValue;
    switch (value.value_case()) {
      case V::kBoolValue:
        config[py::str(name)] = value.bool_value();
        break;
      case V::kIntValue:
        config[py::str(name)] = value.int_value();
        break;
      case V::kDoubleValue:
        config[py::str(name)] = value.double_value();
        break;
      case V::kStringValue:
        config[py::str(name)] = value.string_value();
        break;
      case V::kBytesValue:
        config[py::str(name)] = py::bytes(value.bytes_value());
        break;
      default:
        break;
    }
  }
  config["task_id"] = round.task_id();
  config["round_id"] = round.round_id();
  // The round closes by then, so its aggregate, if it has one, is stored soon after.
  config["deadline_unix_ms"] = round.deadline_unix_ms();
  return config;
}

// Device(min_noise_multiplier=Z, max_noise_devices=M): the noise floor of torchnative-device's
// --min-noise-multiplier Z --max-noise-devices M, both or neither, Z positive and finite, M from
// 1 to 2^32 - 1. Signed M, so that a negative one is refused by name rather than by pybind11.
std::optional<tn::client::NoiseFloor> noise_floor(std::optional<double> multiplier,
                                                  std::optional<long long> devices) {
  if (multiplier.has_value() != devices.has_value())
    throw py::value_error(
        "torchnative._device: min_noise_multiplier and max_noise_devices make the noise floor together: "
        "give both");
  if (!multiplier) return std::nullopt;
  if (!(*multiplier > 0) || !std::isfinite(*multiplier))
    throw py::value_error("torchnative._device: min_noise_multiplier must be positive and finite, not " +
                          py::str(py::float_(*multiplier)).cast<std::string>());
  if (*devices < 1 || *devices > (long long)UINT32_MAX)
    throw py::value_error("torchnative._device: max_noise_devices must be from 1 to " +
                          std::to_string(UINT32_MAX) + ", not " + std::to_string(*devices));
  return tn::client::NoiseFloor{*multiplier, uint32_t(*devices)};
}

}  // namespace

PYBIND11_MODULE(_device, m) {
  py::class_<tn::client::RoundReport>(m, "RoundReport")
      .def_readonly("task_id", &tn::client::RoundReport::task_id)
      .def_readonly("round_id", &tn::client::RoundReport::round_id)
      .def_readonly("contributed", &tn::client::RoundReport::contributed)
      .def_readonly("error", &tn::client::RoundReport::error)
      .def_property_readonly("num_examples",
                             [](const tn::client::RoundReport& r) { return r.result.num_examples; })
      // A secure round's quantised update (the words this device masked, the last its capped
      // example count) as a uint32 array, empty otherwise: what torchnative-device's --report-dir
      // writes, for a test to recompute the round's sum.
      .def_property_readonly("quantised", [](const tn::client::RoundReport& r) {
        return py::array_t<uint32_t>(py::ssize_t(r.quantised.size()), r.quantised.data());
      });

  // torchnative-device's --max-model-bytes default, from the one place that sets it.
  m.attr("DEFAULT_MAX_MODEL_BYTES") = tn::proto::TransferLimits{}.max_total_bytes;

  py::class_<tn::client::Device>(m, "Device")
      .def(py::init([](const std::string& server, const std::string& key_file,
                       std::optional<std::string> tls_ca, double check_in_wait_seconds,
                       long long max_model_bytes, const std::string& round_transport,
                       const std::string& when_no_task, std::optional<double> min_noise_multiplier,
                       std::optional<long long> max_noise_devices) {
             // Signed, so that a negative limit is refused by name rather than by pybind11's
             // conversion to an unsigned type.
             if (max_model_bytes <= 0)
               throw py::value_error("torchnative._device: max_model_bytes must be positive, not " +
                                     std::to_string(max_model_bytes));
             tn::client::DeviceOptions options;
             if (round_transport == "grpc")
               options.round_transport = tn::client::v1::ROUND_TRANSPORT_GRPC;
             else if (round_transport != "data_plane")
               throw py::value_error("torchnative._device: round_transport is 'data_plane' or 'grpc', not '" +
                                     round_transport + "'");
             if (when_no_task != "wait" && when_no_task != "exit")
               throw py::value_error("torchnative._device: when_no_task is 'wait' or 'exit', not '" +
                                     when_no_task + "'");
             options.wait_for_next_task = when_no_task == "wait";
             options.noise_floor = noise_floor(min_noise_multiplier, max_noise_devices);
             options.server_address = server;
             options.key_file = key_file;
             options.tls_root_certificates_file = std::move(tls_ca);
             options.check_in_wait = tn::client::Milliseconds(int64_t(check_in_wait_seconds * 1000));
             options.limits.max_total_bytes = uint64_t(max_model_bytes);
             options.metadata.set_platform("python");
             return std::make_unique<tn::client::Device>(std::move(options));
           }),
           py::arg("server"), py::arg("key_file"), py::kw_only(), py::arg("tls_ca") = py::none(),
           py::arg("check_in_wait") = 20.0,
           py::arg("max_model_bytes") = (long long)(tn::proto::TransferLimits{}.max_total_bytes),
           py::arg("round_transport") = "data_plane", py::arg("when_no_task") = "wait",
           py::arg("min_noise_multiplier") = py::none(), py::arg("max_noise_devices") = py::none())
      .def_property_readonly("device_id",
                             [](tn::client::Device& device) {
                               py::gil_scoped_release released;
                               return device.device_id();
                             })
      .def(
          "fetch_model",
          [](tn::client::Device& device, const std::string& version) -> py::object {
            std::optional<Model> model;
            {
              py::gil_scoped_release released;
              model = device.fetch_model(version);
            }
            if (!model) return py::none();
            return to_numpy(*model);
          },
          py::arg("version"),
          "The coordinator's stored model version ('<task id>/<number>') as a dict of arrays, or None "
          "while it has none by that name.")
      // train(state: dict[str, ndarray], config: dict) -> (dict[str, ndarray|Tensor], num_examples)
      .def(
          "run",
          [](tn::client::Device& device, const py::function& train, int rounds) {
            std::vector<tn::client::RoundReport> reports;
            auto trainer = [&train](const Model& global, const tn::client::v1::RoundConfig& round) {
              py::gil_scoped_acquire gil;
              py::tuple result = train(to_numpy(global), round_config(round));
              if (result.size() < 2) throw py::value_error("train must return (state, num_examples)");
              tn::client::TrainResult trained;
              trained.model = from_numpy(result[0].cast<py::dict>());
              trained.num_examples = result[1].cast<int64_t>();
              return trained;
            };
            // The loop runs on a thread of its own while this one, Python's, looks for signals
            // every 100 ms: Ctrl-C must stop a device that is waiting for work or backing off,
            // not only one that just finished a round.
            std::stop_source stop;
            std::mutex mutex;
            std::condition_variable ended;
            bool done = false;
            std::exception_ptr failure;
            std::thread loop([&] {
              try {
                device.run(trainer, stop.get_token(), [&](const tn::client::RoundReport& report) {
                  std::lock_guard lock(mutex);
                  reports.push_back(report);
                  if (rounds > 0 && int(reports.size()) >= rounds) stop.request_stop();
                });
              } catch (...) {
                failure = std::current_exception();
              }
              std::lock_guard lock(mutex);
              done = true;
              ended.notify_all();
            });
            std::optional<py::error_already_set> interrupted;  // raised once the loop has ended
            for (bool finished = false; !finished;) {
              {
                py::gil_scoped_release released;
                std::unique_lock lock(mutex);
                finished = ended.wait_for(lock, std::chrono::milliseconds(100), [&] { return done; });
              }
              if (!finished && !interrupted && PyErr_CheckSignals() != 0) {
                interrupted.emplace();
                stop.request_stop();
              }
            }
            loop.join();
            if (interrupted) throw *interrupted;
            if (failure) std::rethrow_exception(failure);
            return reports;
          },
          py::arg("train"), py::kw_only(), py::arg("rounds"),
          "Takes part in `rounds` rounds: train(state, config) -> (state, num_examples).");
}

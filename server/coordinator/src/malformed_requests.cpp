#include "malformed_requests.h"

#include <google/protobuf/descriptor.h>

#include <string>

namespace tn::server {

namespace {

using grpc::experimental::InterceptionHookPoints;

// "torchnative.federated.v1.RegisterRequest" for "/torchnative.federated.v1.DeviceService/Register".
std::string request_type_of(const std::string& method) {
  std::string dotted = method.substr(1);
  if (auto slash = dotted.rfind('/'); slash != std::string::npos) dotted[slash] = '.';
  const google::protobuf::MethodDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(dotted);
  return descriptor ? descriptor->input_type()->full_name() : "its request type";
}

class MalformedRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  MalformedRequestInterceptor(Metrics& metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    // gRPC hands interceptors no message when the request failed to parse.
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr)
      malformed_ = true;
    if (malformed_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS))
      methods->ModifySendStatus(refuse_malformed_request(metrics_, method_));
    methods->Proceed();
  }

 private:
  Metrics& metrics_;
  const std::string method_;
  bool malformed_ = false;
};

}  // namespace

grpc::Status refuse_malformed_request(Metrics& metrics, const std::string& method) {
  metrics.count_refusal("malformed_request");
  return {grpc::StatusCode::INVALID_ARGUMENT,
          method + ": the request could not be parsed as a " + request_type_of(method)};
}

int method_index(std::string_view service, std::string_view name) {
  const google::protobuf::ServiceDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(std::string(service));
  const google::protobuf::MethodDescriptor* method =
      descriptor ? descriptor->FindMethodByName(std::string(name)) : nullptr;
  if (!method)
    throw std::logic_error("no method " + std::string(name) + " in service " + std::string(service));
  return method->index();
}

grpc::experimental::Interceptor* MalformedRequestInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  using Type = grpc::experimental::ServerRpcInfo::Type;
  if (info->type() != Type::UNARY && info->type() != Type::SERVER_STREAMING) return nullptr;
  return new MalformedRequestInterceptor(metrics_, info->method());
}

}  // namespace tn::server

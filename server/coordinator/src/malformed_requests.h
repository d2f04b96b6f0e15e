// Requests whose message does not parse as their method's request type, refused as
// INVALID_ARGUMENT "<method>: the request could not be parsed as a <type>" and counted
// ("malformed_request").
//
// Unary and server-streaming methods: gRPC's generated code refuses such a request before any
// handler runs, with an empty message and a code that depends on how the method is served
// (INTERNAL from a synchronous one, UNIMPLEMENTED from a callback one); an interceptor notices the
// failed parse and answers the refusal instead. One interceptor object per call, on the thread
// serving it: no thread of its own.
//
// Client-streaming methods: gRPC's typed ServerReader::Read answers false alike for a message
// that does not parse, for the end of the stream and for a caller that went away (its
// CallOpRecvMessage drops the parse status), and an interceptor is handed no message in all three
// cases, so neither can tell a malformed message from a finished stream. Those methods read their
// stream as bytes instead and parse each message themselves (ClientStream).
#pragma once

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/method_handler.h>
#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/sync_stream.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "metrics.h"

namespace tn::server {

class MalformedRequestInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MalformedRequestInterceptorFactory(Metrics& metrics) : metrics_(metrics) {}

  // Null for methods whose requests stream in: they are served over ClientStream (gRPC reports
  // them as bidirectional, see byte_stream_handler).
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  Metrics& metrics_;
};

// The refusal of a request of `method` ("/package.Service/Method") that does not parse as its
// request type, counted.
grpc::Status refuse_malformed_request(Metrics& metrics, const std::string& method);

// Thrown by ClientStream::read; status() is the refusal, already counted, which
// status_from_current_exception answers as it is.
class MalformedRequest : public std::runtime_error {
 public:
  explicit MalformedRequest(grpc::Status status)
      : std::runtime_error(status.error_message()), status_(std::move(status)) {}
  const grpc::Status& status() const { return status_; }

 private:
  grpc::Status status_;
};

// A client stream of `Request`s, received as bytes and parsed here so that a message that does
// not parse is told apart from the end of the stream.
template <class Request>
class ClientStream {
 public:
  ClientStream(grpc::ServerReader<grpc::ByteBuffer>& reader, Metrics& metrics, std::string method)
      : reader_(reader), metrics_(metrics), method_(std::move(method)) {}

  // The next message into `message`; false at the end of the stream or when the caller went away.
  // Throws MalformedRequest for a message that does not parse.
  bool read(Request& message) {
    grpc::ByteBuffer bytes;
    if (!reader_.Read(&bytes)) return false;
    if (!grpc::SerializationTraits<Request>::Deserialize(&bytes, &message).ok())
      throw MalformedRequest(refuse_malformed_request(metrics_, method_));
    return true;
  }

 private:
  grpc::ServerReader<grpc::ByteBuffer>& reader_;
  Metrics& metrics_;
  const std::string method_;
};

// The index of `service`'s method `name` among the methods of its generated grpc::Service, which
// adds them in the order the .proto declares them.
int method_index(std::string_view service, std::string_view name);

// A handler for a client-streaming method whose member `serve` reads the stream as bytes, for
// grpc::Service::MarkMethodStreamed (protected: the service calls it on itself). gRPC's
// synchronous API has no public raw variant of a method, so this is gRPC's own client-streaming
// handler, the one the generated code installs, over grpc::ByteBuffer; MarkMethodStreamed
// registers the method as bidirectional, which the server runs exactly as a client stream (no
// request read ahead of the handler, one response).
template <class Service, class Response>
grpc::internal::MethodHandler* byte_stream_handler(
    Service* service,
    grpc::Status (Service::*serve)(grpc::ServerContext*, grpc::ServerReader<grpc::ByteBuffer>*, Response*)) {
  return new grpc::internal::ClientStreamingHandler<Service, grpc::ByteBuffer, Response>(
      [serve](Service* self, grpc::ServerContext* context, grpc::ServerReader<grpc::ByteBuffer>* reader,
              Response* response) { return (self->*serve)(context, reader, response); },
      service);
}

}  // namespace tn::server

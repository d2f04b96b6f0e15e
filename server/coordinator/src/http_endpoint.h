// A minimal HTTP/1.1 server for the health and metrics endpoints: GET only, one request per
// connection, on its own I/O thread. Not a general web server: requests with bodies, headers
// over 8 KiB or clients slower than 5 s are dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tn::server {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// The response for a GET of `path`, or nothing for 404.
using HttpHandler = std::function<std::optional<HttpResponse>(const std::string& path)>;

class HttpEndpoint {
 public:
  // Listens on "host:port" (port 0: any free one). Throws std::runtime_error naming the address
  // when it cannot.
  HttpEndpoint(const std::string& address, HttpHandler handler);
  ~HttpEndpoint();
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tn::server

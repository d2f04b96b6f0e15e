#include "http_endpoint.h"

#include <asio.hpp>
#include <charconv>
#include <stdexcept>
#include <thread>

namespace tn::server {

namespace {

constexpr size_t kMaxRequestBytes = 8192;
constexpr std::chrono::seconds kClientTimeout{5};

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 500:
      return "Internal Server Error";
    default:
      return "Bad Request";
  }
}

std::string serialize(const HttpResponse& response) {
  return "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) +
         "\r\nContent-Type: " + response.content_type +
         "\r\nContent-Length: " + std::to_string(response.body.size()) + "\r\nConnection: close\r\n\r\n" +
         response.body;
}

// "host:port" split at the last colon ("[::1]:80" loses its brackets); nothing when malformed.
std::optional<std::pair<std::string, uint16_t>> split_host_port(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port_text = address.substr(colon + 1);
  unsigned port = 0;
  auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (error != std::errc() || end != port_text.data() + port_text.size() || port > 65535 || port_text.empty())
    return std::nullopt;
  return std::pair{host, uint16_t(port)};
}

}  // namespace

struct HttpEndpoint::Impl {
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io};
  HttpHandler handler;
  std::thread thread;

  struct Exchange {
    explicit Exchange(asio::io_context& io) : socket(io), timer(io), request(kMaxRequestBytes) {}
    asio::ip::tcp::socket socket;
    asio::steady_timer timer;
    asio::streambuf request;
    std::string response;
  };

  void accept_next() {
    auto exchange = std::make_shared<Exchange>(io);
    acceptor.async_accept(exchange->socket, [this, exchange](const asio::error_code& error) {
      if (error == asio::error::operation_aborted) return;
      if (!error) serve(exchange);
      accept_next();
    });
  }

  void serve(const std::shared_ptr<Exchange>& exchange) {
    exchange->timer.expires_after(kClientTimeout);
    exchange->timer.async_wait([exchange](const asio::error_code& error) {
      asio::error_code ignored;
      if (!error) exchange->socket.close(ignored);
    });
    asio::async_read_until(exchange->socket, exchange->request, "\r\n\r\n",
                           [this, exchange](const asio::error_code& error, size_t) {
                             if (!error) return respond(exchange);
                             asio::error_code ignored;
                             exchange->socket.close(ignored);
                             exchange->timer.cancel();
                           });
  }

  void respond(const std::shared_ptr<Exchange>& exchange) {
    std::istream in(&exchange->request);
    std::string method, target;
    in >> method >> target;
    HttpResponse response{404, "text/plain; charset=utf-8", "not found\n"};
    if (method != "GET") {
      response = {405, "text/plain; charset=utf-8", "only GET is served\n"};
    } else {
      try {
        if (auto found = handler(target.substr(0, target.find('?')))) response = std::move(*found);
      } catch (const std::exception& error) {
        response = {500, "text/plain; charset=utf-8", std::string(error.what()) + "\n"};
      }
    }
    exchange->response = serialize(response);
    asio::async_write(exchange->socket, asio::buffer(exchange->response),
                      [exchange](const asio::error_code&, size_t) {
                        asio::error_code ignored;
                        exchange->socket.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
                        exchange->socket.close(ignored);
                        exchange->timer.cancel();
                      });
  }
};

HttpEndpoint::HttpEndpoint(const std::string& address, HttpHandler handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->handler = std::move(handler);
  auto host_port = split_host_port(address);
  if (!host_port) throw std::runtime_error("http_listen '" + address + "' is not host:port");
  try {
    asio::ip::tcp::endpoint endpoint(asio::ip::make_address(host_port->first), host_port->second);
    impl_->acceptor.open(endpoint.protocol());
    impl_->acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true));
    impl_->acceptor.bind(endpoint);
    impl_->acceptor.listen();
  } catch (const std::system_error& error) {
    throw std::runtime_error("cannot listen for HTTP on " + address + ": " + error.what());
  }
  impl_->accept_next();
  impl_->thread = std::thread([impl = impl_.get()] { impl->io.run(); });
}

HttpEndpoint::~HttpEndpoint() {
  impl_->io.stop();
  impl_->thread.join();
}

uint16_t HttpEndpoint::port() const { return impl_->acceptor.local_endpoint().port(); }

}  // namespace tn::server

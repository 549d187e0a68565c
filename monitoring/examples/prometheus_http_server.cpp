// Serves a pool's metrics over HTTP with plain POSIX sockets, for a
// demonstration (one request at a time, no keep-alive, no TLS):
//
//   GET /metrics   Prometheus text exposition 0.0.4
//   GET /json      the full monitor report as JSON
//   GET /health    {"status": "ok" | "warning" | "critical", "checks": [...]}
//
//   thread_system_monitoring_http_example [--port 9464] [--requests N]
//   (--port 0: any free port; the first line printed names it)
//   curl -s localhost:9464/metrics
//
// A load thread keeps the pool busy with short jobs (1 in 50 fails) so the
// numbers move. --requests N exits after N requests (0: serve forever).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "thread_system/monitoring/monitoring.hpp"
#include "thread_system/thread_system.hpp"

namespace {

using namespace std::chrono_literals;
namespace mon = thread_system::monitoring;

bool send_all(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

void respond(int fd, int status, const char* reason, std::string_view content_type, const std::string& body) {
  std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                     "\r\nContent-Type: " + std::string(content_type) +
                     "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  if (send_all(fd, head)) (void)send_all(fd, body);
}

// Reads the request head (up to 8 KB) and returns the path of a GET, or "".
// A client gets 2 s to send it: this server answers one request at a time,
// and a client that connects and sends nothing must not stall the others.
std::string read_get_path(int fd) {
  timeval limit{};
  limit.tv_sec = 2;
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  std::string req;
  char buf[1024];
  while (req.find("\r\n\r\n") == std::string::npos && req.size() < 8192) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    req.append(buf, static_cast<std::size_t>(n));
  }
  if (req.rfind("GET ", 0) != 0) return {};
  const auto end = req.find(' ', 4);
  return end == std::string::npos ? std::string{} : req.substr(4, end - 4);
}

}  // namespace

int main(int argc, char** argv) {
  int port = 9464;
  long max_requests = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--port") == 0) port = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--requests") == 0) max_requests = std::atol(argv[i + 1]);
  }

  thread_system::pool_options options;
  options.name = "demo";
  options.on_error = [](std::exception_ptr) {};  // counted in `failed`; the demo stays quiet
  thread_system::thread_pool pool{2, options};

  mon::monitor_options mo;
  mo.interval = 1s;
  mo.window_samples = 30;  // rates over the last 29 s
  mon::pool_monitor monitor{pool, mo};
  if (auto r = monitor.start(); !r) {
    std::fprintf(stderr, "monitor: %s\n", r.error().to_string().c_str());
    return 1;
  }

  std::atomic<bool> stop{false};
  std::thread load([&] {
    std::uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {  // a flag only; no data travels with it
      for (int i = 0; i < 20; ++i, ++n) {
        (void)pool.enqueue([n] {
          volatile std::uint64_t x = n;
          for (int k = 0; k < 200; ++k) x = x * 6364136223846793005u + 1;
          if (n % 50 == 0) throw std::runtime_error("demo failure");
        });
      }
      std::this_thread::sleep_for(1ms);
    }
  });

  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) {
    std::perror("socket");
    return 1;
  }
  const int yes = 1;
  (void)::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener, 16) != 0) {
    std::perror("bind/listen");
    stop.store(true, std::memory_order_relaxed);
    load.join();
    ::close(listener);
    return 1;
  }
  // --port 0 lets the system pick a free port; report the one bound.
  sockaddr_in bound{};
  socklen_t bound_len = sizeof bound;
  if (::getsockname(listener, reinterpret_cast<sockaddr*>(&bound), &bound_len) == 0) port = ntohs(bound.sin_port);
  std::printf("serving http://127.0.0.1:%d/metrics (/json, /health)\n", port);
  std::fflush(stdout);

  for (long served = 0; max_requests == 0 || served < max_requests; ++served) {
    const int client = ::accept(listener, nullptr, nullptr);
    if (client < 0) continue;
    const std::string path = read_get_path(client);
    // The background sampler's latest report; a sample only before its first
    // (value_or(monitor.sample()) would sample on every request).
    std::optional<mon::monitor_report> latest = monitor.latest();
    const mon::monitor_report report = latest ? std::move(*latest) : monitor.sample();
    if (path == "/metrics") {
      respond(client, 200, "OK", mon::prometheus_content_type, mon::to_prometheus(report));
    } else if (path == "/json") {
      respond(client, 200, "OK", "application/json", mon::to_json(report));
    } else if (path == "/health") {
      const bool critical = report.health.status == mon::health_status::critical;
      respond(client, critical ? 503 : 200, critical ? "Service Unavailable" : "OK", "application/json",
              mon::to_json(report.health));
    } else {
      respond(client, 404, "Not Found", "text/plain", "try /metrics, /json or /health\n");
    }
    ::close(client);
  }

  ::close(listener);
  stop.store(true, std::memory_order_relaxed);
  load.join();
  monitor.stop();
  return 0;
}

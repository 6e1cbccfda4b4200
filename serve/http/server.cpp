#include "serve/http/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/api/common/json_text.h"
#include "serve/http/router.h"
#include "serve/webui/webui.h"
#include "support/error.h"
namespace vtc::serve {

using nlohmann::json;
using namespace std::chrono_literals;

// ---------------------------------------------------------------------------
// The connection layer. httplib's accept loop calls process_and_close_socket
// for each accepted socket (on the accept thread: the task queue runs it
// inline); vtc hands the socket to a thread of its own, which reads each
// request into a buffer under deadlines and limits, rejects what it can
// before reading a body, and only then lets httplib parse and route the
// request from that buffer.

namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  int fd = -1;
  std::string in;   // bytes read and not yet consumed by httplib, from pos
  size_t pos = 0;
  bool close_after = false;  // close once this response is written
  bool peer_eof = false;     // the client half-closed (FIN seen)
  int last_status = 0;
};

// The connection the calling thread serves (handlers run on it).
thread_local Conn* tl_conn = nullptr;

// True when the client has closed its sending side (it may still read).
bool peer_read_closed() {
  Conn* c = tl_conn;
  if (!c) return false;
  if (c->peer_eof) return true;
  pollfd p{c->fd, short(POLLRDHUP), 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

}  // namespace

namespace http {
bool peer_read_closed() { return vtc::serve::peer_read_closed(); }
void close_after_response() {
  if (tl_conn) tl_conn->close_after = true;
}
void record_status(int status) {
  if (tl_conn) tl_conn->last_status = status;
}
}  // namespace http

namespace {

int ms_until(Clock::time_point deadline) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return d <= 0 ? 0 : int(std::min<int64_t>(d, 1 << 30));
}

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::microseconds(int64_t(seconds * 1e6));
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && (s[a] == ' ' || s[a] == '\t')) ++a;
  while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t' || s[b - 1] == '\r')) --b;
  return s.substr(a, b - a);
}

bool equal_ct(const std::string& a, const std::string& b) {  // constant time in the length of b
  unsigned char d = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < b.size(); ++i) d |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ b[i]);
  return d == 0;
}

// A parsed request head (the view vtc needs before httplib parses it).
struct Head {
  std::string method, path, version;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  const std::string* get(const char* name) const {
    for (const auto& [k, v] : headers)
      if (k == name) return &v;
    return nullptr;
  }
};

bool parse_head(const std::string& text, Head& h, size_t& expect_at) {
  size_t at = 0;
  bool first = true;
  expect_at = std::string::npos;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(at, nl - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t line_at = at;
    at = nl + 1;
    if (line.empty()) break;
    if (first) {
      first = false;
      const size_t a = line.find(' '), b = line.rfind(' ');
      if (a == std::string::npos || b == a) return false;
      h.method = line.substr(0, a);
      std::string target = line.substr(a + 1, b - a - 1);
      h.path = target.substr(0, target.find('?'));
      h.version = line.substr(b + 1);
      if (h.version.rfind("HTTP/1.", 0) != 0) return false;
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) return false;
    std::string name = lower(line.substr(0, colon));
    if (name == "expect") expect_at = line_at;
    h.headers.emplace_back(std::move(name), trim(line.substr(colon + 1)));
  }
  return !first;
}

class InlineQueue : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

}  // namespace

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  enum class Fill { Data, Eof, Timeout, Stopped, Error };

  class Server : public httplib::Server {
   public:
    explicit Server(Impl& impl) : impl_(impl) {}
    bool serve(httplib::Stream& s, bool close_connection, bool& closed) {
      return process_request(s, close_connection, closed, nullptr);
    }
    int listen_socket() const { return int(svr_sock_); }

   private:
    bool process_and_close_socket(socket_t sock) override {
      impl_.accept(int(sock));
      return true;
    }
    Impl& impl_;
  };

  // httplib's view of a connection: reads come from the buffer first.
  class Stream : public httplib::Stream {
   public:
    Stream(Impl& impl, Conn& c) : impl_(impl), c_(c) {}
    bool is_readable() const override {
      if (c_.pos < c_.in.size()) return true;
      pollfd p{c_.fd, POLLIN, 0};
      return ::poll(&p, 1, 0) > 0;
    }
    bool is_writable() const override { return impl_.wait_writable(c_); }
    ssize_t read(char* ptr, size_t size) override {
      if (c_.pos >= c_.in.size()) {
        c_.in.clear();
        c_.pos = 0;
        const Fill f = impl_.fill(c_, after(impl_.opt.read_timeout));
        if (f == Fill::Eof) return 0;
        if (f != Fill::Data) return -1;
      }
      const size_t k = std::min(size, c_.in.size() - c_.pos);
      std::memcpy(ptr, c_.in.data() + c_.pos, k);
      c_.pos += k;
      return ssize_t(k);
    }
    ssize_t write(const char* ptr, size_t size) override { return impl_.send_all(c_, ptr, size) ? ssize_t(size) : -1; }
    void get_remote_ip_and_port(std::string& ip, int& port) const override { address(true, ip, port); }
    void get_local_ip_and_port(std::string& ip, int& port) const override { address(false, ip, port); }
    socket_t socket() const override { return c_.fd; }

   private:
    void address(bool peer, std::string& ip, int& port) const {
      sockaddr_storage a{};
      socklen_t len = sizeof(a);
      if ((peer ? getpeername(c_.fd, reinterpret_cast<sockaddr*>(&a), &len) : getsockname(c_.fd, reinterpret_cast<sockaddr*>(&a), &len)) != 0)
        return;
      char buf[INET6_ADDRSTRLEN] = {};
      if (a.ss_family == AF_INET) {
        auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
        inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
        port = ntohs(v4->sin_port);
      } else if (a.ss_family == AF_INET6) {
        auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
        inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
        port = ntohs(v6->sin6_port);
      }
      ip = buf;
    }
    Impl& impl_;
    Conn& c_;
  };

  Impl(HttpServer& owner, const HttpOptions& o) : owner(owner), opt(o) {
    if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("serve: pipe failed");
  }
  ~Impl() {
    ::close(stop_pipe[0]);
    ::close(stop_pipe[1]);
  }

  // --- the accept thread --------------------------------------------------
  void accept(int fd) {
    const int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    bool admitted = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!stopping && active < opt.max_connections) ++active, admitted = true;
    }
    if (admitted) {
      try {
        std::thread([self = shared_from_this(), fd] { self->connection(fd); }).detach();
        return;
      } catch (const std::exception&) {
        done_one();
      }
    }
    // Over --max-connections (or out of threads): a short 503, then close.
    const std::string body = error_body(fmt::format("Too many open connections (--max-connections {}); retry later.", opt.max_connections),
                                        "unavailable_error").dump();
    const std::string resp = fmt::format("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
                                         "Retry-After: 1\r\nConnection: close\r\n\r\n{}", body.size(), body);
    (void)!::send(fd, resp.data(), resp.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
    owner.metrics_.request_done("other", 503);
  }

  void done_one() {
    std::lock_guard<std::mutex> lock(mutex);
    --active;
    idle.notify_all();
  }

  // --- I/O under deadlines --------------------------------------------------
  // Reads what is there into c.in, waiting until `deadline` (or stop()).
  Fill fill(Conn& c, Clock::time_point deadline) {
    char buf[16384];
    for (;;) {
      const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        c.in.append(buf, size_t(n));
        return Fill::Data;
      }
      if (n == 0) {
        c.peer_eof = true;
        return Fill::Eof;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return Fill::Error;
      if (stopping) return Fill::Stopped;
      const int ms = ms_until(deadline);
      if (ms <= 0) return Fill::Timeout;
      pollfd p[2] = {{c.fd, POLLIN, 0}, {stop_pipe[0], POLLIN, 0}};
      const int r = ::poll(p, 2, ms);
      if (r < 0 && errno != EINTR) return Fill::Error;
      if (r > 0 && p[1].revents) return Fill::Stopped;
    }
  }

  // Waits until the socket takes more bytes: false when the client is gone,
  // after --write-timeout, or once stop() has run out of grace.
  bool wait_writable(const Conn& c) {
    const auto deadline = after(opt.write_timeout);
    for (;;) {
      pollfd p{c.fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, std::min(100, ms_until(deadline)));
      if (r > 0) return (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
      if (r < 0 && errno != EINTR) return false;
      if (hard_stop || ms_until(deadline) <= 0) return false;
    }
  }

  bool send_all(Conn& c, const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::send(c.fd, p, n, MSG_NOSIGNAL);
      if (w > 0) {
        p += w, n -= size_t(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!wait_writable(c)) return false;
        continue;
      }
      return false;
    }
    return true;
  }

  // A complete small answer from vtc's layer, then a lingering close (the
  // client may still be sending a body it was told not to).
  void reject(Conn& c, const std::string& path, int status, const std::string& message, const std::string& type,
              const std::string& code = {}, const std::string& extra_headers = {}) {
    const std::string body = http::error_json(path, status, message, type, {}, code).dump();
    const std::string resp = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n{}",
                                         status, reason_phrase(status), body.size(), extra_headers, body);
    send_all(c, resp.data(), resp.size());
    owner.metrics_.request_done(endpoint_label_of(path), status);
    c.close_after = true;
  }

  static const char* endpoint_label_of(const std::string& path);

  void close_connection(Conn& c, bool linger) {
    ::shutdown(c.fd, SHUT_WR);
    if (linger) {
      // Discard what the client still sends, up to 1 s, so our answer is
      // not lost to a reset.
      const auto deadline = after(1.0);
      for (;;) {
        c.in.clear();
        c.pos = 0;
        if (fill(c, deadline) != Fill::Data) break;
      }
    }
    ::close(c.fd);
  }

  // --- one connection, one thread ------------------------------------------
  void connection(int fd) {
    Conn c;
    c.fd = fd;
    tl_conn = &c;
    bool linger = false;
    try {
      linger = serve_connection(c);
    } catch (const std::exception& e) {
      fmt::print(stderr, "serve: connection error: {}\n", e.what());
    }
    tl_conn = nullptr;
    close_connection(c, linger);
    done_one();
  }

  // Returns whether to linger (an answer was sent before the body was read).
  bool serve_connection(Conn& c) {
    Server& server = *static_cast<Server*>(owner.server_.get());
    for (int served = 0; !stopping; ++served) {
      // Wait for the next request (an idle connection is closed after
      // --keep-alive-timeout).
      if (c.pos > 0) {
        c.in.erase(0, c.pos);
        c.pos = 0;
      }
      while (!c.in.empty() && (c.in[0] == '\r' || c.in[0] == '\n')) c.in.erase(0, 1);
      if (c.in.empty() && fill(c, after(opt.keep_alive_timeout)) != Fill::Data) return false;
      // The head: within --header-timeout, at most --max-headers lines and
      // --max-header-size bytes.
      const auto head_deadline = after(opt.header_timeout);
      size_t head_len = std::string::npos, scanned = 0, lines = 0;
      for (;;) {
        for (; scanned < c.in.size(); ++scanned) {
          if (c.in[scanned] != '\n') continue;
          ++lines;
          if (scanned >= 1 && c.in[scanned - 1] == '\n') head_len = scanned + 1;
          else if (scanned >= 2 && c.in[scanned - 1] == '\r' && c.in[scanned - 2] == '\n') head_len = scanned + 1;
          if (head_len != std::string::npos) break;
        }
        if (head_len != std::string::npos && head_len <= opt.max_header_bytes && lines <= size_t(opt.max_headers) + 2) break;
        if ((head_len == std::string::npos ? c.in.size() : head_len) > opt.max_header_bytes || lines > size_t(opt.max_headers) + 2) {
          reject(c, {}, 431,
                 fmt::format("Request header fields too large: at most {} headers and {} bytes (--max-headers, --max-header-size).",
                             opt.max_headers, opt.max_header_bytes),
                 "invalid_request_error");
          return true;
        }
        const Fill f = fill(c, head_deadline);
        if (f == Fill::Timeout) {
          reject(c, {}, 408, fmt::format("The request head did not arrive within {} s (--header-timeout).", opt.header_timeout),
                 "invalid_request_error");
          return false;
        }
        if (f != Fill::Data) return false;
      }
      Head h;
      size_t expect_at = std::string::npos;
      if (!parse_head(c.in.substr(0, head_len), h, expect_at)) {
        reject(c, {}, 400, "Malformed HTTP request.", "invalid_request_error");
        return true;
      }
      if (const char* why = early_reject(c, h)) {
        (void)why;
        return true;
      }
      // The body: Content-Length bytes within --read-timeout, or chunked
      // (read by httplib under --max-body-size; the connection then closes).
      const std::string* te = h.get("transfer-encoding");
      const std::string* cl = h.get("content-length");
      size_t body_len = 0;
      if (te) {
        if (lower(*te) != "chunked" || cl) {
          reject(c, h.path, te && lower(*te) != "chunked" ? 501 : 400, "Unsupported Transfer-Encoding.", "invalid_request_error");
          return true;
        }
        c.close_after = true;
      } else if (cl) {
        if (cl->empty() || cl->size() > 18 || cl->find_first_not_of("0123456789") != std::string::npos) {
          reject(c, h.path, 400, "Invalid Content-Length.", "invalid_request_error");
          return true;
        }
        body_len = std::stoull(*cl);
        if (body_len > opt.max_body_bytes) {
          reject(c, h.path, 413,
                 fmt::format("Request body too large: {} bytes; the limit is {} bytes (--max-body-size).", body_len, opt.max_body_bytes),
                 "invalid_request_error");
          return true;
        }
      }
      if (expect_at != std::string::npos) {
        // Answer 100-continue here (httplib would, after vtc waited for the
        // body); hide the header from httplib, keeping the byte count.
        c.in[expect_at] = 'X';
        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (body_len > 0 && lower(*h.get("expect")) == "100-continue" && !send_all(c, kContinue, sizeof(kContinue) - 1)) return false;
      }
      const auto body_deadline = after(opt.read_timeout);
      while (c.in.size() < head_len + body_len) {
        const Fill f = fill(c, body_deadline);
        if (f == Fill::Timeout) {
          reject(c, h.path, 408, fmt::format("The request body did not arrive within {} s (--read-timeout).", opt.read_timeout),
                 "invalid_request_error");
          return false;
        }
        if (f != Fill::Data) return false;
      }
      // httplib parses and routes the buffered request.
      Stream stream(*this, c);
      const bool last = served + 1 >= opt.keep_alive_max || owner.draining_ || owner.out_of_rotation_ || stopping;
      bool closed = false;
      const bool ok = server.serve(stream, last, closed);
      if (!ok || closed || last || c.close_after) return false;
    }
    return false;
  }

  // Checks that need only the head, in order: Host, API key, readiness,
  // Content-Type. Answers and returns non-null when the request is refused.
  const char* early_reject(Conn& c, const Head& h) {
    const bool health = h.path == "/health";
    // The web chat page needs neither the key nor the model (webui.h).
    const bool page = is_webui_request(opt.webui, h.method, h.path);
    if (!health && !host_allowed(h)) {
      reject(c, h.path, 403, "Host not allowed (--allowed-hosts).", "invalid_request_error");
      return "host";
    }
    if (!health && !page && !opt.api_key.empty()) {
      const std::string* auth = h.get("authorization");
      const std::string* x_api_key = h.get("x-api-key");
      if (!(auth && equal_ct(*auth, "Bearer " + opt.api_key)) && !(x_api_key && equal_ct(*x_api_key, opt.api_key))) {
        reject(c, h.path, 401, !auth && !x_api_key ? http::kNoKeyMessage : "Incorrect API key provided.",
               "invalid_request_error", "invalid_api_key", "WWW-Authenticate: Bearer\r\n");
        return "key";
      }
    }
    if (!health && !page && (owner.engine_.load() == nullptr || owner.draining_)) {
      reject(c, h.path, 503, owner.draining_ ? "The server is shutting down." : "Loading model", "unavailable_error", {},
             "Retry-After: 1\r\n");
      return "unavailable";
    }
    if (h.method == "POST") {
      const std::string* ct = h.get("content-type");
      const std::string type = ct ? lower(trim(ct->substr(0, ct->find(';')))) : std::string();
      if (type != "application/json") {
        reject(c, h.path, 415,
               ct ? fmt::format("Unsupported Content-Type '{}': send 'application/json'.", *ct)
                  : std::string("Missing Content-Type: send 'application/json'."),
               "invalid_request_error");
        return "type";
      }
    }
    return nullptr;
  }

  bool host_allowed(const Head& h) const {
    if (opt.allowed_hosts.empty()) return true;
    const std::string* host = h.get("host");
    if (!host) return false;
    std::string name = lower(*host);
    if (!name.empty() && name[0] == '[') name = name.substr(0, name.find(']') + 1);  // [::1]:8080
    else if (name.find(':') != std::string::npos) name = name.substr(0, name.find(':'));
    for (const std::string& a : opt.allowed_hosts)
      if (a == "*" || lower(a) == name) return true;
    return false;
  }

  void stop(int grace_ms) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    const char b = 1;
    (void)!::write(stop_pipe[1], &b, 1);  // wakes every connection waiting to read
    std::unique_lock<std::mutex> lock(mutex);
    if (!idle.wait_for(lock, std::chrono::milliseconds(grace_ms), [&] { return active == 0; })) {
      hard_stop = true;  // writes still blocked give up within 100 ms
      idle.wait_for(lock, std::chrono::seconds(2), [&] { return active == 0; });
    }
  }

  HttpServer& owner;
  HttpOptions opt;
  int stop_pipe[2] = {-1, -1};
  std::mutex mutex;
  std::condition_variable idle;
  int active = 0;
  std::atomic<bool> stopping{false}, hard_stop{false};
};

const char* HttpServer::Impl::endpoint_label_of(const std::string& path) { return http::endpoint_label(path); }

HttpServer::HttpServer(const HttpOptions& o, Metrics& metrics)
    : options_(o), metrics_(metrics), impl_(std::make_shared<Impl>(*this, o)) {
  auto server = std::make_unique<Impl::Server>(*impl_);
  server->new_task_queue = [] { return new InlineQueue; };
  // SO_REUSEADDR (restart over TIME_WAIT) but not SO_REUSEPORT: a second
  // server on a busy port must fail, not share its traffic.
  server->set_socket_options([](socket_t sock) {
    const int on = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  });
  server->set_tcp_nodelay(true);
  server->set_payload_max_length(o.max_body_bytes);  // chunked bodies
  server->set_keep_alive_max_count(size_t(std::max(1, o.keep_alive_max)));
  server->set_keep_alive_timeout(time_t(std::max(1.0, o.keep_alive_timeout)));
  server_ = std::move(server);
  routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  // One descriptor per open connection: take the hard limit.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  int port = options_.port;
  errno = 0;
  if (options_.port == 0) {
    port = server_->bind_to_any_port(options_.host);
    if (port < 0) throw Error(fmt::format("serve: cannot bind {}: {}", options_.host, std::strerror(errno ? errno : EINVAL)));
  } else if (!server_->bind_to_port(options_.host, options_.port)) {
    const int e = errno;
    throw Error(fmt::format("serve: cannot listen on {}:{}: {}", options_.host, options_.port,
                            e == EADDRINUSE ? "the port is already in use (is another server running on it?)"
                            : e != 0        ? std::strerror(e)
                                            : "in use, or not a local address"));
  }
  // httplib listens with a backlog of 5: raise it.
  ::listen(static_cast<Impl::Server*>(server_.get())->listen_socket(), std::max(16, options_.listen_backlog));
  return port;
}

// httplib's stop() closes the listening socket only once its accept loop
// runs (is_running()); a stop() that came earlier would leave a listen()
// that starts later blocked in accept for ever. So stop() records itself
// first: a listen() that has not begun returns at once, and one that has
// begun is waited for until its loop runs, then stopped.
void HttpServer::listen() {
  {
    std::lock_guard<std::mutex> lock(listen_mutex_);
    if (stop_requested_) return;
    listen_entered_ = true;
  }
  server_->listen_after_bind();
  listen_returned_ = true;
}
void HttpServer::leave_rotation() { out_of_rotation_ = true; }
void HttpServer::drain() { out_of_rotation_ = draining_ = true; }
void HttpServer::stop(int grace_ms) {
  bool entered = false;
  {
    std::lock_guard<std::mutex> lock(listen_mutex_);
    stop_requested_ = true;
    entered = listen_entered_;
  }
  // Between listen_entered_ and is_running() lie a few instructions of
  // httplib's; this wait is that long (bounded, in case the loop failed).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (entered && !server_->is_running() && !listen_returned_ && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_->stop();  // closes the listening socket: listen() returns
  impl_->stop(grace_ms);
}
void HttpServer::set_engine(Engine* engine, std::shared_ptr<const PromptTemplate> chat_template) {
  chat_template_ = std::move(chat_template);
  engine_ = engine;
}

}  // namespace vtc::serve

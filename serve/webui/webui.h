// The built-in web chat that `vtc serve` answers at GET / (index.html in
// this folder, embedded into the binary at build time by
// cmake/embed_file.cmake; docs/serving.md, "Web chat").
#pragma once

#include <string>
#include <string_view>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace vtc::serve {

// The page's bytes and their SHA-256 (hex).
std::string_view webui_page();
std::string_view webui_page_sha256();

// True for the requests the page itself is: GET or HEAD of "/". The page
// is static and holds no secret, so, as llama-server does, it is served
// without the API key and while the model is still loading; the page asks
// for the key and sends it with its own API calls.
bool is_webui_request(bool webui_enabled, const std::string& method, const std::string& path);

// Answers GET /: the page, with its Content-Type, a Content-Security-Policy
// that allows no load from anywhere but this origin, and an ETag (a
// matching If-None-Match gets 304, so a reload costs no body).
void serve_webui(const httplib::Request& req, httplib::Response& res);

}  // namespace vtc::serve

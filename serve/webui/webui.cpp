#include "serve/webui/webui.h"

#include <httplib.h>

namespace vtc::serve {

// Defined by the source that cmake/embed_file.cmake generates.
extern const unsigned char webui_index_html[];
extern const size_t webui_index_html_size;
extern const char webui_index_html_sha256[];

std::string_view webui_page() {
  return {reinterpret_cast<const char*>(webui_index_html), webui_index_html_size};
}

std::string_view webui_page_sha256() { return webui_index_html_sha256; }

bool is_webui_request(bool webui_enabled, const std::string& method, const std::string& path) {
  return webui_enabled && path == "/" && (method == "GET" || method == "HEAD");
}

void serve_webui(const httplib::Request& req, httplib::Response& res) {
  // The page's script and style are inline; everything it fetches is this
  // server's API (connect-src 'self'). Nothing else may load or embed it.
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                 "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  // Revalidate on every load: a new vtc build serves its own page at once,
  // an unchanged one answers 304.
  const std::string etag = "\"" + std::string(webui_page_sha256()) + "\"";
  res.set_header("ETag", etag);
  res.set_header("Cache-Control", "no-cache");
  if (req.get_header_value("If-None-Match") == etag) {
    res.status = 304;
    return;
  }
  const std::string_view page = webui_page();
  res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
}

}  // namespace vtc::serve

// What the HTTP layer's two halves share (serve/http only): the router
// (router.cpp: the endpoint table, auth and readiness checks, and the
// answers) asks the connection layer (server.cpp) about the connection the
// calling handler serves, and the connection layer asks the router how a
// path is labelled and how its errors are shaped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace vtc::serve::http {

// --- The connection the calling thread serves (server.cpp) -------------------
// The client has closed its sending side (it may still read).
bool peer_read_closed();
// Close the connection once this response is written.
void close_after_response();
// The status of the answer just written (for the connection's log).
void record_status(int status);

// --- The endpoint table (router.cpp) -----------------------------------------
// The 401 a request without a key gets (either layer may answer it).
inline constexpr const char* kNoKeyMessage =
    "You didn't provide an API key (Authorization: Bearer KEY, or x-api-key: KEY).";

// The path's metrics label: the path of a registered endpoint, else "other".
const char* endpoint_label(const std::string& path);
// An error body in the shape the path's API uses (Anthropic's on /v1/messages).
nlohmann::json error_json(const std::string& path, int status, const std::string& message, const std::string& type,
                          const std::string& param = {}, const std::string& code = {});

}  // namespace vtc::serve::http

// Layering guard (serve/CMakeLists.txt, docs/architecture.md): this folder
// is first on the include path of every serve layer but serve/http, the
// only one that speaks HTTP. Whatever included httplib.h, directly or
// through a header, belongs in serve/http.
#error "serve layering: only serve/http may include httplib.h (serve/api builds bodies, serve/http sends them)"

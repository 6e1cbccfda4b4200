// Layering guard (serve/CMakeLists.txt, docs/architecture.md): this folder
// is first on the include path of serve/engine and serve/constraints,
// which know no JSON. Whatever included nlohmann/json.hpp, directly or
// through a header, belongs in serve/api (or must stop including it).
#error "serve layering: serve/engine and serve/constraints must not include nlohmann/json.hpp (JSON belongs in serve/api)"

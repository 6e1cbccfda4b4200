// vtc-tap: runs a model's prefill on the CPU interpreter and writes every
// op's f32 results to a directory, for layer-by-layer comparison with
// `vtc-ref logits --dump` (see docs/numerics-parity.md).
//
//   vtc-tap MODEL.gguf --tokens 1,2,3 OUT_DIR [--threads N] [-ctk T] [-ctv T] [--prompt-batch P]
//
// --prompt-batch P: prefill the first P tokens, then decode the others one
// at a time and write only the last step's ops (as `vtc-ref logits
// --prompt-batch P --dump-at <its position>`).
//
// OUT_DIR/<seq>_<op>.f32 holds raw floats; OUT_DIR/index.json lists
// {"file", "op", "name", "shape"} in execution order.
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "support/kv_cache_type.h"

int main(int argc, char** argv) {
  std::string model, tokens_arg, dir;
  int threads = 2, prompt_batch = 0;
  vtc::GgmlType cache_k = vtc::GgmlType::F16, cache_v = vtc::GgmlType::F16;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--tokens" && i + 1 < argc)
      tokens_arg = argv[++i];
    else if (a == "--threads" && i + 1 < argc)
      threads = std::stoi(argv[++i]);
    else if (a == "--prompt-batch" && i + 1 < argc)
      prompt_batch = std::stoi(argv[++i]);
    else if (a == "-ctk" && i + 1 < argc)
      cache_k = vtc::parse_kv_cache_type(argv[++i], "-ctk");
    else if (a == "-ctv" && i + 1 < argc)
      cache_v = vtc::parse_kv_cache_type(argv[++i], "-ctv");
    else if (model.empty())
      model = a;
    else
      dir = a;
  }
  if (model.empty() || dir.empty() || tokens_arg.empty()) {
    std::fprintf(stderr, "usage: vtc-tap MODEL.gguf --tokens 1,2,3 OUT_DIR [--threads N] [-ctk T] [-ctv T]\n");
    return 2;
  }
  std::vector<int32_t> tokens;
  std::stringstream ss(tokens_arg);
  for (std::string item; std::getline(ss, item, ',');) tokens.push_back(std::stoi(item));

  vtc::SessionOptions so{.threads = threads, .n_ctx = 256};
  so.cache_type_k = cache_k;
  so.cache_type_v = cache_v;
  vtc::Session s(model, so);
  nlohmann::json index = nlohmann::json::array();
  int seq = 0;
  bool tapping = prompt_batch <= 0;
  s.backend().set_observer([&](const vtc::ir::Op& op, const std::vector<std::optional<vtc::HostTensor>>& results) {
    if (!tapping) return;
    for (size_t r = 0; r < results.size(); ++r) {
      const auto& t = results[r].value();  // the CPU interpreter materializes every result
      nlohmann::json e;
      e["op"] = std::string(op.mnemonic());
      e["name"] = r < op.results.size() ? op.results[r]->name : "";
      e["shape"] = t.shape;
      if (t.elem == vtc::ir::ElemType::F32) {
        std::string file = fmt::format("{:04d}_{}.f32", seq, op.mnemonic());
        std::ofstream(dir + "/" + file, std::ios::binary)
            .write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
        e["file"] = file;
      }
      index.push_back(std::move(e));
      ++seq;
    }
  });
  if (prompt_batch <= 0 || prompt_batch >= int(tokens.size())) {
    s.prefill(0, tokens, 0, true);
  } else {
    s.prefill(0, std::vector<int32_t>(tokens.begin(), tokens.begin() + prompt_batch), 0, true);
    for (int i = prompt_batch; i < int(tokens.size()); ++i) {
      tapping = i + 1 == int(tokens.size());
      s.decode(std::vector<int32_t>{0}, std::vector<int32_t>{tokens[size_t(i)]}, std::vector<int32_t>{i});
    }
  }
  std::ofstream(dir + "/index.json") << index.dump(1) << "\n";
  return 0;
}

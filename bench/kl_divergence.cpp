// kl_divergence BASE.f32 OTHER.f32 N_VOCAB: the KL divergence of OTHER's
// next-token distributions from BASE's, row by row (raw f32 logits, N_VOCAB
// per row, as `vtc run --dump-logits` and `vtc-ref logits --logits-file`
// write them), as llama-perplexity --kl-divergence reports it: the mean and
// the maximum over the rows of sum_i p_i (log p_i - log q_i), and how often
// the two agree on the most likely token. One JSON line on stdout.
// bench/kv-cache-kl.sh runs it over the KV cache types.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::vector<float> read_floats(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}", path));
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (raw.size() % sizeof(float) != 0) throw std::runtime_error(fmt::format("{} is not whole f32 values", path));
  std::vector<float> v(raw.size() / sizeof(float));
  std::copy(raw.begin(), raw.end(), reinterpret_cast<char*>(v.data()));
  return v;
}

// log softmax of one row, in double.
std::vector<double> log_softmax(const float* row, size_t n) {
  const double max = *std::max_element(row, row + n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(double(row[i]) - max);
  const double log_z = max + std::log(sum);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = double(row[i]) - log_z;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: kl_divergence BASE.f32 OTHER.f32 N_VOCAB\n");
    return 2;
  }
  try {
    const std::vector<float> base = read_floats(argv[1]), other = read_floats(argv[2]);
    const size_t n_vocab = std::strtoul(argv[3], nullptr, 10);
    if (n_vocab == 0 || base.size() % n_vocab != 0 || base.size() != other.size())
      throw std::runtime_error(fmt::format("{} and {} must hold the same whole rows of {} logits", argv[1], argv[2], n_vocab));
    const size_t rows = base.size() / n_vocab;
    double sum = 0, max = 0;
    size_t same_top1 = 0;
    for (size_t r = 0; r < rows; ++r) {
      const float* b = base.data() + r * n_vocab;
      const float* o = other.data() + r * n_vocab;
      const auto lp = log_softmax(b, n_vocab), lq = log_softmax(o, n_vocab);
      double kl = 0;
      for (size_t i = 0; i < n_vocab; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
      sum += kl;
      max = std::max(max, kl);
      same_top1 += std::max_element(b, b + n_vocab) - b == std::max_element(o, o + n_vocab) - o;
    }
    fmt::print("{{\"rows\": {}, \"mean_kld\": {:.6g}, \"max_kld\": {:.6g}, \"same_top1\": {:.6g}}}\n", rows,
               sum / double(rows), max, double(same_top1) / double(rows));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kl_divergence: %s\n", e.what());
    return 1;
  }
}

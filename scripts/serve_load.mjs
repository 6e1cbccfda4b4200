// A bounded load run against a running `vtc serve`: C connections issue
// non-streaming completions back to back for D seconds on keep-alive
// connections. Prints requests/s, p50/p99 latency, generated tokens/s and
// the error count as one JSON line.
//   node scripts/serve_load.mjs URL [seconds=60] [connections=16] [max_tokens=16]
// VTC_LOAD_TEMPERATURE (default 0.8; 0 = greedy) sets the requests' temperature.
import http from 'node:http';

const [, , url, seconds = '60', connections = '16', maxTokens = '16'] = process.argv;
const target = new URL('/v1/completions', url);
const temperature = Number(process.env.VTC_LOAD_TEMPERATURE ?? '0.8');
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(connections) });
const deadline = Date.now() + Number(seconds) * 1000;
const latencies = [];
let errors = 0, tokens = 0;

function once(i) {
  const body = JSON.stringify({ prompt: `Request ${i}: once upon a time`, max_tokens: Number(maxTokens), temperature, seed: i });
  return new Promise((resolve) => {
    const t0 = performance.now();
    const req = http.request(target, { method: 'POST', agent, headers: { 'Content-Type': 'application/json' } }, (res) => {
      let data = '';
      res.on('data', (d) => (data += d));
      res.on('end', () => {
        if (res.statusCode !== 200) errors++;
        else {
          latencies.push(performance.now() - t0);
          try { tokens += JSON.parse(data).usage.completion_tokens; } catch { errors++; }
        }
        resolve();
      });
    });
    req.on('error', () => { errors++; resolve(); });
    req.end(body);
  });
}

async function worker(w) {
  for (let i = 0; Date.now() < deadline; i++) await once(w * 1000000 + i);
}
const start = performance.now();
await Promise.all(Array.from({ length: Number(connections) }, (_, w) => worker(w)));
const elapsed = (performance.now() - start) / 1000;
latencies.sort((a, b) => a - b);
const pct = (p) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : 0);
console.log(JSON.stringify({
  seconds: +elapsed.toFixed(1), connections: Number(connections), requests: latencies.length, errors,
  requests_per_s: +(latencies.length / elapsed).toFixed(2), p50_ms: +pct(0.5).toFixed(1), p99_ms: +pct(0.99).toFixed(1),
  generated_tokens_per_s: +(tokens / elapsed).toFixed(1),
}));
agent.destroy();

// scripts/cluster-check.sh's body: 3 `vtc serve` replicas behind HAProxy
// (deploy/haproxy.cfg) on loopback, checked as docs/serving.md ("Running
// more than one replica") describes:
//   1. reference: each distinct request's greedy answer from one replica alone;
//   2. no faults: N mixed requests (chat and completions, streamed and not),
//      C at a time, through the proxy;
//   3. faults: the same N requests; at request N/5 the replica home to
//      system prompt 0 gets SIGKILL while 4 long non-streamed requests on
//      that prompt run (the proxy must answer them from another), at 2N/5
//      another gets SIGTERM (its drain is probed directly: drainAndRestart)
//      and is started again; from 2N/3 on the load waits for it to be back
//      in the proxy;
//   4. prefix affinity: 8 shared system prompts x many users on cold
//      replicas with small KV pools, routed by prefix hash, then by least
//      connections: each replica's /metrics (through the proxy) gives the
//      prefix-cache hit rate, the answers' X-Vtc-Replica header the spread;
//   5. every replica start answered /health 503 "Loading model" before 200.
// Exit 0 when everything expected holds, 1 otherwise (each failure named).
//   node scripts/cluster_check.mjs VTC MODEL HAPROXY_CFG WORK_DIR
// CLUSTER_CHECK_REQUESTS (300) and CLUSTER_CHECK_CONCURRENCY (16) size the load.
import http from 'node:http';
import { Proxy, Replica, freePort, get, sleep } from './cluster_fleet.mjs';

const [, , vtc, model, configPath, workDir] = process.argv;
const N = Number(process.env.CLUSTER_CHECK_REQUESTS ?? 300);
const C = Number(process.env.CLUSTER_CHECK_CONCURRENCY ?? 16);
const MAX_TOKENS = 12;
const failures = [];
const expect = (ok, what) => { if (!ok) failures.push(what); return ok; };

// --- the workload -----------------------------------------------------------------
const TOPICS = ['weather', 'cooking', 'travel', 'finance', 'gardening', 'music', 'chess', 'astronomy'];
// Long enough to fill several KV pages of 16 positions, distinct from the first word.
const SYSTEM_PROMPTS = TOPICS.map((t, k) =>
  `${t[0].toUpperCase()}${t.slice(1)} desk ${k}. You are the ${t} assistant of a small company. Answer questions ` +
  `about ${t} briefly, politely and accurately. When a question is not about ${t}, say so and suggest where to ` +
  `ask. Never invent facts about ${t}; when unsure, say that you are unsure. Keep every answer under fifty ` +
  `words, use plain language, avoid jargon, and end with one short follow-up question about ${t} that helps ` +
  `the user go further.`);
const userMessage = (u) => `User ${u} asks: what should I know first, and why does it matter to me today?`;

// Request i of the mixed load: one of 8 x 5 conversations, as a chat or a
// completion, streamed or not. Its key names its reference answer.
function mixedRequest(i) {
  const conversation = (i * 7) % 40, system = conversation % 8, user = Math.floor(conversation / 8);
  const kind = (i + Math.floor(i / 40)) % 4, chat = kind < 2, stream = kind % 2 === 1;
  const body = chat
    ? { messages: [{ role: 'system', content: SYSTEM_PROMPTS[system] }, { role: 'user', content: userMessage(user) }] }
    : { prompt: `${SYSTEM_PROMPTS[system]}\n${userMessage(user)}\n` };
  Object.assign(body, { max_tokens: MAX_TOKENS, temperature: 0, stream });
  return { key: `${chat ? 'chat' : 'completion'} ${conversation}`, path: chat ? '/v1/chat/completions' : '/v1/completions', body };
}

// --- one request --------------------------------------------------------------------
// Resolves with {status, replica, text, complete, cut, error, ms}: complete
// when a body parsed (or a stream reached [DONE]); cut when a 200 stream ended
// without it.
function send(port, { path, body }, agent, onResponse = () => {}) {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const out = { status: 0, replica: null, text: '', complete: false, cut: false, error: null, finish: null };
    const done = () => resolve({ ...out, ms: performance.now() - t0 });
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', agent,
                               headers: { 'Content-Type': 'application/json' } }, (res) => {
      out.status = res.statusCode;
      out.replica = res.headers['x-vtc-replica'] ?? null;
      out.retryAfter = res.headers['retry-after'] ?? null;
      onResponse();
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (data += d));
      res.on('error', (e) => (out.error = e.message));
      res.on('close', () => {
        parseAnswer(out, data, body.stream);
        if (out.status === 200 && body.stream && !out.complete) out.cut = true;
        done();
      });
    });
    req.setTimeout(60000, () => req.destroy(new Error('no answer within 60 s')));
    req.on('error', (e) => { out.error = e.message; done(); });
    req.end(JSON.stringify(body));
  });
}

function parseAnswer(out, data, stream) {
  if (out.status !== 200) return;
  const take = (choice) => {
    out.text += choice?.delta?.content ?? choice?.message?.content ?? choice?.text ?? '';
    if (choice?.finish_reason) out.finish = choice.finish_reason;
  };
  try {
    if (!stream) {
      take(JSON.parse(data).choices[0]);
      out.complete = true;
      return;
    }
    for (const line of data.split('\n')) {
      if (line === 'data: [DONE]') out.complete = true;
      else if (line.startsWith('data: ')) take(JSON.parse(line.slice(6)).choices?.[0]);
    }
  } catch (e) {
    out.error = `unparsable answer: ${e.message}`;
    out.complete = false;
  }
}

// Requests 0..n-1, `concurrency` at a time; gate(i) runs before request i is sent.
async function runLoad(port, n, concurrency, requestOf, gate = async () => {}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const results = new Array(n);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) {
      await gate(i);
      results[i] = { i, ...requestOf(i), ...(await send(port, requestOf(i), agent)) };
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return results;
}

// --- the report ---------------------------------------------------------------------
const percentile = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] : NaN);

function causeOf(r, reference) {
  if (r.error && !r.status) return 'connection error';
  if (r.status !== 200) return `HTTP ${r.status}`;
  if (r.cut) return `stream cut on ${r.replica}`;
  if (!r.complete) return r.error ?? 'incomplete';
  if (reference.get(r.key) !== r.text) return 'answer differs from the single server';
  return null;
}

function summarize(name, results, reference, retried) {
  const causes = {};
  const latencies = [];
  for (const r of results) {
    r.cause = causeOf(r, reference);
    if (r.cause) causes[r.cause] = (causes[r.cause] ?? 0) + 1;
    else latencies.push(r.ms);
  }
  latencies.sort((a, b) => a - b);
  const failed = results.length - latencies.length;
  console.log(`cluster-check: ${name}: sent ${results.length}, completed ${latencies.length}, ` +
              `retried ${retried.retries} (redispatched ${retried.redispatches}), failed ${failed}` +
              `${failed ? ` (${Object.entries(causes).map(([c, k]) => `${k} ${c}`).join(', ')})` : ''}; ` +
              `latency p50 ${percentile(latencies, 0.5).toFixed(0)} ms, p99 ${percentile(latencies, 0.99).toFixed(0)} ms`);
  return causes;
}

async function retriesDuring(proxy, body) {
  const before = await proxy.retries();
  const value = await body();
  const after = await proxy.retries();
  return [value, { retries: after.retries - before.retries, redispatches: after.redispatches - before.redispatches }];
}

// --- phases -------------------------------------------------------------------------
async function referenceAnswers(replica) {
  const distinct = new Map();
  for (let i = 0; i < N; ++i) {
    const r = mixedRequest(i);
    if (!distinct.has(r.key)) distinct.set(r.key, { ...r, body: { ...r.body, stream: false } });
  }
  const list = [...distinct.values()];
  const results = await runLoad(replica.port, list.length, 4, (i) => list[i]);
  const reference = new Map();
  for (const r of results) {
    if (expect(r.status === 200 && r.complete, `reference ${r.key} on ${replica.name} alone: ${r.status} ${r.error ?? ''}`))
      reference.set(r.key, r.text);
  }
  console.log(`cluster-check: reference: ${reference.size} distinct requests answered by ${replica.name} alone`);
  return reference;
}

// The drain of `replica`, probed directly. SIGTERM: /health must say 503
// "draining" at once while requests are still served (--drain-delay), and
// the proxy must take the replica out on that 503 (check L7STS), before
// anything is refused. Then a stream starts, a second SIGTERM ends the
// delay: a new request must get 503 + Retry-After, the stream must finish,
// the replica must exit 0. Then it is started again; returns when it is.
async function drainAndRestart(replica, proxy) {
  const logBefore = replica.log().length;
  const logged = async (text) => {
    while (!replica.log().slice(logBefore).includes(text) && replica.proc.exitCode === null) await sleep(5);
  };
  replica.signal('SIGTERM');
  await logged('draining');
  const health = await get(replica.port, '/health');
  const served = await send(replica.port, mixedRequest(0));
  const out = await untilStatus(proxy, replica.name, (s) => s.startsWith('DOWN'), 8000).catch((e) => ({ error: e.message }));
  let streaming;
  const started = new Promise((resolve) => (streaming = resolve));
  const long = send(replica.port, { path: '/v1/completions', body: { prompt: 'Once upon a time', max_tokens: 480,
                                                                      ignore_eos: true, temperature: 0, stream: true } },
                    undefined, streaming);
  await started;
  replica.signal('SIGTERM');
  await logged('refusing new requests');
  const refused = await send(replica.port, mixedRequest(0));
  const stream = await long;
  const code = await replica.exited;
  console.log(`cluster-check: drain of ${replica.name}: /health ${health.status} ${health.body ?? health.error}; ` +
              `during --drain-delay a new request got ${served.status} and HAProxy took ${replica.name} out ` +
              `${out.error ? `never (${out.error})` : `after ${out.seconds.toFixed(2)} s (${out.status}, check ${out.check})`}; after it a new request ` +
              `got ${refused.status} (Retry-After ${refused.retryAfter}); the stream in flight ` +
              `${stream.complete ? `finished (${stream.finish})` : 'was cut'}; exit ${code}`);
  expect(health.status === 503 && /"draining"/.test(health.body ?? ''), `/health while draining: ${health.status}, not 503 "draining"`);
  expect(served.status === 200 && served.complete, `a request during --drain-delay: ${served.status}, not served`);
  expect(!out.error && out.check === 'L7STS', `HAProxy did not take ${replica.name} out on its /health 503 while it drained: ` +
         `${out.error ?? `check ${out.check}`}`);
  expect(refused.status === 503 && refused.retryAfter !== null, `a new request while draining: ${refused.status}, not 503 with Retry-After`);
  expect(stream.complete && stream.finish === 'length', `the stream in flight during the drain did not finish: ${JSON.stringify(stream).slice(0, 200)}`);
  expect(code === 0, `${replica.name} exited ${code} after its drain, not 0`);
  await replica.start();
  return performance.now();
}

async function statusOf(proxy, name) {
  const row = (await proxy.stats()).find((r) => r.svname === name);
  return { status: row?.status, check: row?.check_status };
}

async function untilStatus(proxy, name, test, timeoutMs = 30000) {
  const t0 = performance.now();
  while (performance.now() - t0 < timeoutMs) {
    const s = await statusOf(proxy, name);
    if (test(s.status ?? '')) return { ...s, seconds: (performance.now() - t0) / 1000 };
    await sleep(20);
  }
  throw new Error(`HAProxy's state of ${name} did not change within ${timeoutMs / 1000} s`);
}

// Non-streamed requests long enough to be generating when their replica is
// killed: system prompt 0 (its home replica is the one killed) and a user
// of their own each.
const heldRequest = (u) => ({ key: `held ${u}`, path: '/v1/chat/completions', body: {
  messages: [{ role: 'system', content: SYSTEM_PROMPTS[0] }, { role: 'user', content: userMessage(200 + u) }],
  max_tokens: 160, ignore_eos: true, temperature: 0 } });

// The replica that answered most chat requests on system prompt 0.
function homeOfPrompt0(results, replicas) {
  const count = (r) => results.filter((x) => x.replica === r.name && x.path === '/v1/chat/completions' &&
                                           x.body.messages[0].content === SYSTEM_PROMPTS[0]).length;
  return replicas.reduce((best, r) => (count(r) > count(best) ? r : best));
}

async function faultPhase(proxy, [killed, drained], reference) {
  const killAt = Math.floor(N / 5), drainAt = Math.floor((2 * N) / 5), backAt = Math.floor((2 * N) / 3);
  let down, drainDone, back, held;
  const gate = async (i) => {
    if (i === killAt) {
      const agent = new http.Agent({ keepAlive: false });
      held = Promise.all([0, 1, 2, 3].map(async (u) => ({ ...heldRequest(u), ...(await send(proxy.port, heldRequest(u), agent)) })));
      await sleep(150);  // admitted and generating (160 tokens take longer)
      killed.signal('SIGKILL');
      down = untilStatus(proxy, killed.name, (s) => s.startsWith('DOWN'));
    }
    if (i === drainAt) drainDone = drainAndRestart(drained, proxy);
    if (i >= backAt) {
      back ??= drainDone.then(async (restartedAt) => {
        const up = await untilStatus(proxy, drained.name, (s) => s === 'UP');
        return { ...up, seconds: (performance.now() - restartedAt) / 1000 };
      });
      await back;
    }
  };
  const [results, retried] = await retriesDuring(proxy, () => runLoad(proxy.port, N, C, mixedRequest, gate));
  const causes = summarize(`with faults (SIGKILL ${killed.name} at request ${killAt}, SIGTERM ${drained.name} at ${drainAt})`,
                           results, reference, retried);
  const d = await down, b = await back, h = await held;
  console.log(`cluster-check: 4 long non-streamed requests on ${killed.name}'s prompt, sent just before its SIGKILL: ` +
              h.map((r) => (r.status === 200 && r.complete ? `answered by ${r.replica}` : `failed (${r.status} ${r.error ?? ''})`)).join(', '));
  for (const r of h)
    expect(r.status === 200 && r.complete && r.finish === 'length', `${r.key} (not streamed) around the SIGKILL: ${r.status} ${r.error ?? r.finish}`);
  const servedAfter = results.filter((r) => r.i >= backAt && r.replica === drained.name).length;
  console.log(`cluster-check: ${killed.name} out of the proxy ${d.seconds.toFixed(2)} s after SIGKILL (${d.status}, check ${d.check}; ` +
              `checks every 1 s, 2 failures); ${drained.name} back ${b.seconds.toFixed(2)} s after its restart, then answered ` +
              `${servedAfter} of the last ${N - backAt} requests`);
  for (const r of results) {
    if (!r.cause) continue;
    const allowed = r.body.stream && r.cut && r.replica === killed.name;
    expect(allowed, `request ${r.i} (${r.key}, ${r.body.stream ? 'streamed' : 'not streamed'}): ${r.cause}`);
  }
  expect(!Object.keys(causes).some((c) => c.startsWith('HTTP') || c.startsWith('connection')), 'a request failed outright');
  expect(servedAfter > 0, `${drained.name} answered none of the requests after it came back`);
}

// Cold replicas with small KV pools, then 8 system prompts x `users` users
// in a shuffled order: the cluster's prefix-cache hit rate and each
// replica's share of the requests.
async function affinityPhase(proxy, replicas, balance, users) {
  await Promise.all(replicas.map((r) => r.stop()));
  for (const r of replicas) await r.start();
  await proxy.start(replicas, balance);
  const order = Array.from({ length: 8 * users }, (_, i) => i);
  let seed = 12345;
  for (let i = order.length - 1; i > 0; --i) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    const j = seed % (i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  const requestOf = (i) => ({ key: `affinity ${order[i]}`, path: '/v1/chat/completions', body: {
    messages: [{ role: 'system', content: SYSTEM_PROMPTS[order[i] % 8] },
               { role: 'user', content: userMessage(100 + Math.floor(order[i] / 8)) }],
    max_tokens: 4, temperature: 0 } });
  const results = await runLoad(proxy.port, order.length, C, requestOf);
  const perReplica = [];
  let prompt = 0, cached = 0;
  for (const r of replicas) {
    const text = (await get(proxy.port, `/replica/${r.name}/metrics`)).body ?? '';
    const metric = (name) => Number(text.match(new RegExp(`^${name} (\\S+)$`, 'm'))?.[1]);
    const p = metric('vtc_prompt_tokens_total'), c = metric('vtc_prompt_tokens_cached_total');
    const ratio = metric('vtc_prefix_cache_hit_ratio');
    expect(Number.isFinite(ratio) && Math.abs(ratio - c / p) < 1e-3,
           `${r.name}'s vtc_prefix_cache_hit_ratio (${ratio}) is not its cached / prompt tokens (${c} / ${p})`);
    prompt += p, cached += c;
    perReplica.push({ name: r.name, requests: results.filter((x) => x.replica === r.name).length, ratio });
  }
  await proxy.stop();
  const failed = results.filter((r) => r.status !== 200 || !r.complete).length;
  expect(failed === 0, `${balance}: ${failed} requests failed`);
  const rate = cached / prompt;
  console.log(`cluster-check: ${balance === 'leastconn' ? 'least-connections' : 'prefix-affine'} routing, 8 system prompts x ` +
              `${users} users (${results.length} requests): prefix-cache hit rate ${(100 * rate).toFixed(1)}% ` +
              `(${cached} of ${prompt} prompt tokens); per replica: ` +
              perReplica.map((x) => `${x.name} ${x.requests} requests, hit rate ${(100 * x.ratio).toFixed(1)}%`).join('; '));
  return { rate, perReplica };
}

// --- main ---------------------------------------------------------------------------
const common = ['-t', '1', '--parallel', '4', '--chat-template', 'chatml', '--shutdown-timeout', '20', '--drain-delay', '10',
                '--no-webui'];
const replicas = [];
for (const name of ['r1', 'r2', 'r3'])
  replicas.push(new Replica(name, { vtc, model, args: [...common, '-c', '512'], port: await freePort(), logDir: workDir }));
const proxy = new Proxy({ configPath, workDir, port: await freePort(), statsPort: await freePort() });
const cleanup = () => { for (const p of [...replicas.map((r) => r.proc), proxy.proc]) if (p && p.exitCode === null) p.kill('SIGKILL'); };
process.on('exit', cleanup);
const t0 = performance.now();
// Bounded in time as in count: a run that hangs ends here, named, before ctest's timeout.
setTimeout(() => {
  console.log(`cluster-check: FAIL: not done within 150 s (logs in ${workDir})`);
  process.exit(1);
}, 150000).unref();
try {
  await Promise.all(replicas.map((r) => r.start()));
  const reference = await referenceAnswers(replicas[0]);
  await proxy.start(replicas, 'affinity');
  const [calm, calmRetried] = await retriesDuring(proxy, () => runLoad(proxy.port, N, C, mixedRequest));
  const calmCauses = summarize('without faults', calm, reference, calmRetried);
  expect(Object.keys(calmCauses).length === 0, `without faults: ${JSON.stringify(calmCauses)}`);
  const killed = homeOfPrompt0(calm, replicas), drained = replicas.find((r) => r !== killed);
  await faultPhase(proxy, [killed, drained], reference);
  await proxy.stop();
  await killed.start();  // for the affinity runs
  // Small pools: the 8 prompts' pages do not all fit in one replica's cache.
  for (const r of replicas) r.args = [...common, '-c', '256', '--kv-pages', '48'];
  const affine = await affinityPhase(proxy, replicas, 'affinity', 24);
  const least = await affinityPhase(proxy, replicas, 'leastconn', 24);
  expect(affine.rate > least.rate, `prefix-affine hit rate ${affine.rate} is not above least-connections' ${least.rate}`);
  for (const x of affine.perReplica) expect(x.requests > 0, `prefix-affine routing left ${x.name} idle`);
  const starts = Replica.starts, loading = starts.filter((answers) => answers.length > 0).length;
  console.log(`cluster-check: replica starts: ${starts.length}; /health answered 503 "Loading model" before 200 in ${loading}`);
  for (const answer of starts.flat())
    expect(/^503 .*Loading model/.test(answer), `/health while a replica started: ${answer.slice(0, 120)}`);
  expect(loading > 0, 'no replica start showed /health 503 "Loading model" before 200');
} catch (e) {
  failures.push(`aborted: ${e.stack ?? e}`);
}
cleanup();
console.log(`cluster-check: ${((performance.now() - t0) / 1000).toFixed(1)} s`);
for (const f of failures) console.log(`cluster-check: FAIL: ${f}`);
console.log(failures.length ? `cluster-check: FAIL (${failures.length}; logs in ${workDir})` : 'cluster-check: PASS');
process.exitCode = failures.length ? 1 : 0;

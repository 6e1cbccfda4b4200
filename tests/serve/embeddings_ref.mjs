// One `vtc serve --embeddings` against llama.cpp's embeddings of the same
// file (vtc-ref embeddings: llama_get_embeddings_seq / _ith, same pooling).
//   node embeddings_ref.mjs BASE_URL REFERENCE.json POOLING SERVER_NORMALIZE LABEL [OPENAI_INDEX_MJS]
// REFERENCE.json is vtc-ref's answer for INPUTS (below, in this order).
// Every vector must have cosine >= 0.9999 with the reference's, and its
// scale must follow the normalisation rule (llama.cpp's
// common_embd_normalize, applied here to the reference's raw vector):
// relative error of the whole vector <= 1e-3. Prints one table row per
// comparison; exits 1 on the first failure after printing the table.
import { readFileSync } from 'node:fs';

const [base, refPath, pooling, serverNormArg, label, openaiPath] = process.argv.slice(2);
const ref = JSON.parse(readFileSync(refPath, 'utf8'));
const serverNorm = Number(serverNormArg);
export const INPUTS = JSON.parse(readFileSync(new URL('./embeddings_inputs.json', import.meta.url), 'utf8'));

const rows = [];
let failed = false;

function cosine(a, b) {
  let ab = 0, aa = 0, bb = 0;
  for (let i = 0; i < a.length; i++) { ab += a[i] * b[i]; aa += a[i] * a[i]; bb += b[i] * b[i]; }
  return ab / Math.sqrt(aa * bb);
}

// llama.cpp's rule (common/common.cpp, common_embd_normalize), on a copy.
function normalized(v, mode) {
  let sum = 0;
  if (mode === -1) sum = 1;
  else if (mode === 0) { for (const x of v) sum = Math.max(sum, Math.abs(x)); sum /= 32760; }
  else if (mode === 2) { for (const x of v) sum += x * x; sum = Math.sqrt(sum); }
  else { for (const x of v) sum += Math.abs(x) ** mode; sum = sum ** (1 / mode); }
  const k = sum > 0 ? 1 / sum : 0;
  return v.map((x) => x * k);
}

function relErr(got, want) {
  let d = 0, w = 0;
  for (let i = 0; i < want.length; i++) { d += (got[i] - want[i]) ** 2; w += want[i] ** 2; }
  return Math.sqrt(d / w);
}

function compare(what, got, want) {
  if (got.length !== want.length) {
    rows.push(`${label} | ${what} | width ${got.length} != ${want.length} | FAIL`);
    failed = true;
    return;
  }
  const c = cosine(got, want), e = relErr(got, want);
  const ok = c >= 0.9999 && e <= 1e-3;
  failed ||= !ok;
  rows.push(`${label} | ${what} | cosine ${c.toFixed(8)} | rel.err ${e.toExponential(2)} | ${ok ? 'ok' : 'FAIL'}`);
}

function fromBase64(s) {
  const buf = Buffer.from(s, 'base64');
  const out = [];
  for (let i = 0; i < buf.length; i += 4) out.push(buf.readFloatLE(i));
  return out;
}

async function post(path, body) {
  const r = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

function expect(cond, what) {
  rows.push(`${label} | ${what} | ${cond ? 'ok' : 'FAIL'}`);
  failed ||= !cond;
}

const tokensTotal = ref.tokens.reduce((n, t) => n + t.length, 0);

if (pooling === 'none') {
  // Not OpenAI-compatible, as in llama-server: a 400 naming the cause.
  const oai = await post('/v1/embeddings', { input: INPUTS });
  expect(oai.status === 400 && /Pooling type 'none'/.test(oai.body.error?.message), `/v1/embeddings with pooling none: ${oai.status}`);
  const r = await post('/embeddings', { content: INPUTS });
  expect(r.status === 200 && r.body.length === INPUTS.length, `/embeddings status ${r.status}`);
  r.body.forEach((item, i) => {
    expect(item.index === i && item.embedding.length === ref.tokens[i].length, `input ${i}: one vector per token (${item.embedding.length})`);
    // One row per input: the worst token.
    let worst = null;
    item.embedding.forEach((v, t) => {
      const c = cosine(v, ref.embeddings[i][t]);
      if (worst === null || c < worst.c) worst = { c, t, v };
    });
    compare(`/embeddings input ${i}, ${item.embedding.length} tokens, worst token ${worst.t} (unnormalised)`, worst.v,
            ref.embeddings[i][worst.t]);
  });
} else {
  const want = (i, mode) => normalized(ref.embeddings[i], mode);
  // float, the server's normalisation
  const f = await post('/v1/embeddings', { input: INPUTS, model: 'm' });
  expect(f.status === 200 && f.body.object === 'list' && f.body.model === 'm' && f.body.data.length === INPUTS.length,
         `/v1/embeddings float: status ${f.status}, shape`);
  expect(f.body.usage?.prompt_tokens === tokensTotal && f.body.usage?.total_tokens === tokensTotal,
         `usage ${JSON.stringify(f.body.usage)} = ${tokensTotal} reference tokens`);
  f.body.data.forEach((d, i) => {
    expect(d.object === 'embedding' && d.index === i, `data[${i}] object and index`);
    compare(`float input ${i} normalize ${serverNorm}`, d.embedding, want(i, serverNorm));
  });
  // base64, unnormalised and euclidean (the request's embd_normalize)
  for (const mode of [-1, 2]) {
    const b = await post('/v1/embeddings', { input: INPUTS, encoding_format: 'base64', embd_normalize: mode });
    b.body.data.forEach((d, i) => compare(`base64 input ${i} normalize ${mode}`, fromBase64(d.embedding), want(i, mode)));
  }
  // the other rules once, on the first input: max-abs int16, taxicab, p = 3
  for (const mode of [0, 1, 3]) {
    const r = await post('/v1/embeddings', { input: INPUTS[0], embd_normalize: mode });
    compare(`float input 0 normalize ${mode}`, r.body.data[0].embedding, want(0, mode));
  }
  // /embeddings: llama-server's own shape, one pooled vector per input
  const n = await post('/embeddings', { input: INPUTS });
  n.body.forEach((item, i) => compare(`/embeddings input ${i}`, item.embedding[0], want(i, serverNorm)));
  // The official openai client (base64 on the wire, decoded by the client).
  if (openaiPath) {
    const { default: OpenAI } = await import(openaiPath);
    const client = new OpenAI({ baseURL: base + '/v1', apiKey: 'none' });
    const r = await client.embeddings.create({ model: 'm', input: INPUTS });
    r.data.forEach((d, i) => compare(`openai npm client input ${i}`, Array.from(d.embedding), want(i, serverNorm)));
  }
}

console.log(rows.join('\n'));
process.exit(failed ? 1 : 0);

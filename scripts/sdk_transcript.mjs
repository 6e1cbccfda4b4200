// Greedy SDK transcript (scripts/sdk-transcript.sh): the official openai and
// @anthropic-ai/sdk clients against a running vtc serve; prints what each
// call returns, minus ids and timestamps, so two builds can be diffed.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
const base = process.argv[2];
const openai = new OpenAI({ baseURL: base + '/v1', apiKey: 'x' });
const anthropic = new Anthropic({ baseURL: base, apiKey: 'x' });
const scrub = (o) => JSON.stringify(o, (k, v) => (['id', 'created', 'created_at', 'timings', 'system_fingerprint', 'call_id', 'item_id'].includes(k) ? undefined : v));
const out = [];
const prompts = ['Once upon a time', 'The capital of France is', 'def fib(n):'];
for (const p of prompts) {
  out.push(scrub(await openai.completions.create({ model: 'm', prompt: p, max_tokens: 24, temperature: 0 })));
  out.push(scrub(await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: p }], max_tokens: 24, temperature: 0 })));
  const stream = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: p }], max_tokens: 24, temperature: 0, stream: true });
  let s = ''; for await (const ch of stream) s += (ch.choices[0]?.delta?.content ?? '') + '|' + (ch.choices[0]?.finish_reason ?? '');
  out.push(s);
  out.push(scrub(await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: p }], max_tokens: 24, temperature: 0, stop: ['e'] })));
  out.push(scrub(await openai.responses.create({ model: 'm', input: p, max_output_tokens: 24, temperature: 0 })));
  out.push(scrub(await anthropic.messages.create({ model: 'm', max_tokens: 24, temperature: 0, messages: [{ role: 'user', content: p }], stop_sequences: ['a'] })));
}
console.log(out.join('\n'));

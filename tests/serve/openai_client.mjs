// The official openai client against vtc serve: completions (plain and
// streamed) and chat (plain and streamed). Exits non-zero on any mismatch.
//   node openai_client.mjs BASE_URL PATH_TO_openai/index.mjs
const [, , baseURL, modulePath] = process.argv;
const { default: OpenAI } = await import(modulePath);
const client = new OpenAI({ baseURL, apiKey: 'test-key', maxRetries: 0 });
const check = (cond, what) => {
  if (!cond) { console.error('FAIL:', what); process.exit(1); }
  console.log('ok:', what);
};

for (let i = 0; i < 100; i++) {
  try { await client.models.list(); break; } catch { await new Promise((r) => setTimeout(r, 100)); }
}
const models = await client.models.list();
const model = models.data[0].id;
check(typeof model === 'string' && model.length > 0, `models.list gives ${model}`);

const c = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
check(c.choices[0].finish_reason === 'length' && c.usage.completion_tokens === 12, 'completions.create');

let text = '';
let usage = null;
const s = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0,
                                            stream: true, stream_options: { include_usage: true } });
for await (const chunk of s) {
  if (chunk.choices.length) text += chunk.choices[0].text;
  if (chunk.usage) usage = chunk.usage;
}
check(text === c.choices[0].text, 'streamed completion equals the plain one');
check(usage && usage.completion_tokens === 12, 'stream_options.include_usage');

const chat = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8,
                                                    temperature: 0 });
check(chat.choices[0].message.role === 'assistant', 'chat.completions.create');
let chatText = '';
const cs = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8,
                                                  temperature: 0, stream: true });
for await (const chunk of cs) chatText += chunk.choices[0]?.delta?.content ?? '';
check(chatText === chat.choices[0].message.content, 'streamed chat equals the plain one');

try {
  await client.completions.create({ model, prompt: 'x', max_tokens: 0 });
  check(false, 'max_tokens 0 is rejected');
} catch (e) {
  check(e.status === 400 && /max_tokens/.test(e.message), `max_tokens 0 -> ${e.status}`);
}

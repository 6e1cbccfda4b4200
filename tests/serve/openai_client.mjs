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

// Issue 17: n, structured output, and a tool-call round trip (the server
// runs a Qwen3 template: openai_client_test.sh).
const two = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 6,
                                                   temperature: 1, seed: 5, n: 2 });
check(two.choices.length === 2 && two.choices[1].index === 1, 'n: 2 gives two choices');

const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer' } },
                 required: ['name', 'age'], additionalProperties: false };
const parsed = await client.chat.completions.parse({
  model, messages: [{ role: 'user', content: 'A person, as JSON' }], max_tokens: 80, temperature: 1, seed: 2,
  response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } } });
const person = parsed.choices[0].message.parsed;
check(person && typeof person.name === 'string' && Number.isInteger(person.age) && Object.keys(person).length === 2,
      `json_schema response parsed by the client: ${JSON.stringify(person)}`);

const tools = [{ type: 'function', function: { name: 'get_weather', strict: true,
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'],
                additionalProperties: false } } }];
const messages = [{ role: 'user', content: 'Weather in Paris?' }];
const toolChoice = { type: 'function', function: { name: 'get_weather' } };
const called = await client.chat.completions.parse({ model, messages, tools, tool_choice: toolChoice, max_tokens: 200,
                                                          parallel_tool_calls: false,
                                                          temperature: 0, chat_template_kwargs: { enable_thinking: false } });
const msg = called.choices[0].message;
check(called.choices[0].finish_reason === 'tool_calls' && msg.tool_calls.length === 1, 'tool call: finish_reason tool_calls');
const call = msg.tool_calls[0];
check(call.function.name === 'get_weather' && typeof call.function.parsed_arguments.city === 'string',
      `tool call parsed by the client: ${call.function.arguments}`);

// Streamed: the client's own stream helper accumulates the deltas.
const stream = client.chat.completions.stream({ model, messages, tools, tool_choice: toolChoice, max_tokens: 200,
                                                     parallel_tool_calls: false,
                                                     temperature: 0, chat_template_kwargs: { enable_thinking: false } });
const final = await stream.finalChatCompletion();
const streamedCall = final.choices[0].message.tool_calls[0];
check(streamedCall.function.name === 'get_weather' && streamedCall.function.arguments === call.function.arguments,
      'streamed tool call equals the plain one');

const answer = await client.chat.completions.create({ model, max_tokens: 6, temperature: 0, tools,
  messages: [...messages, msg, { role: 'tool', tool_call_id: call.id, content: '18 C, clear' }] });
check(answer.choices[0].message.role === 'assistant', 'the tool result goes back in: round trip done');

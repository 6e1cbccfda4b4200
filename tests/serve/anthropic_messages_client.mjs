// The official @anthropic-ai/sdk client against vtc serve's Messages API:
// create (plain and streamed: the event sequence, stop_reason, usage, and
// the client's own stream accumulator), stop_sequences, a tool_use round
// trip (tool_choice any), count_tokens, x-api-key auth, and an
// Anthropic-shaped error for a bad body. Exits non-zero on any mismatch.
//   node anthropic_messages_client.mjs SERVER_URL PATH_TO_@anthropic-ai/sdk/index.mjs THINKING_SERVER_URL
// (the second server's template opens a think block: its output is thinking)
const [, , server, modulePath, thinkingServer] = process.argv;
const { default: Anthropic } = await import(modulePath);
const client = new Anthropic({ baseURL: server, apiKey: 'test-key', maxRetries: 0 });  // sends x-api-key
const check = (cond, what) => {
  if (!cond) { console.error('FAIL:', what); process.exit(1); }
  console.log('ok:', what);
};
const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

for (let i = 0; i < 100; i++) {
  try { await client.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'x' }] }); break; } catch {
    await new Promise((r) => setTimeout(r, 100));
  }
}
const model = 'tiny-llama';
const hello = { model, max_tokens: 16, temperature: 0, messages: [{ role: 'user', content: 'Once upon a time' }] };

// Plain.
const plain = await client.messages.create(hello);
check(plain.type === 'message' && plain.role === 'assistant' && plain.id.length > 0, 'messages.create');
check(plain.stop_reason === 'max_tokens' && plain.stop_sequence === null, `stop_reason ${plain.stop_reason}`);
check(plain.usage.output_tokens === 16 && plain.usage.input_tokens > 0, 'usage');
const text = textOf(plain);
check(text.length > 0 && plain.content.every((b) => b.type === 'text' || b.type === 'thinking'), `text: ${JSON.stringify(text)}`);

// Streamed, raw events.
const events = [];
for await (const e of await client.messages.create({ ...hello, stream: true })) events.push(e);
const types = events.map((e) => e.type);
check(types[0] === 'message_start' && events[0].message.usage.input_tokens === plain.usage.input_tokens,
      'message_start first, with input_tokens');
check(types.at(-1) === 'message_stop' && types.at(-2) === 'message_delta', 'message_delta, then message_stop, last');
const delta = events.at(-2);
check(delta.delta.stop_reason === 'max_tokens' && delta.usage.output_tokens === 16, 'message_delta: stop_reason and usage');
let open = -1, blocks = 0, ordered = true;
for (const e of events) {
  if (e.type === 'content_block_start') { ordered &&= open === -1 && e.index === blocks; open = e.index; }
  if (e.type === 'content_block_delta') ordered &&= e.index === open;
  if (e.type === 'content_block_stop') { ordered &&= e.index === open; open = -1; blocks++; }
}
check(ordered && blocks > 0 && open === -1, `content_block_start/delta/stop nest, indices 0..${blocks - 1}`);
const streamed = events.filter((e) => e.type === 'content_block_delta' && e.delta.type === 'text_delta')
  .map((e) => e.delta.text).join('');
check(streamed === text, 'streamed text equals the plain one');
const final = await client.messages.stream(hello).finalMessage();
check(textOf(final) === text && final.stop_reason === 'max_tokens', 'messages.stream accumulates the same message');

// stop_sequences: a piece of the text above ends the message there.
const stop = text.slice(3, 6);
const stopped = await client.messages.create({ ...hello, stop_sequences: [stop] });
check(stopped.stop_reason === 'stop_sequence' && stopped.stop_sequence === stop && !textOf(stopped).includes(stop),
      `stop_sequences ${JSON.stringify(stop)}: stop_reason stop_sequence`);

// tool_use round trip: tool_choice any forces a call.
const tools = [{ name: 'get_weather', description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'],
                  additionalProperties: false } }];
const ask = { model, max_tokens: 200, temperature: 0, tools, tool_choice: { type: 'any', disable_parallel_tool_use: true },
              thinking: { type: 'disabled' }, messages: [{ role: 'user', content: 'Weather in Paris?' }] };
const called = await client.messages.create(ask);
const use = called.content.find((b) => b.type === 'tool_use');
check(called.stop_reason === 'tool_use' && use && use.name === 'get_weather' && typeof use.input.city === 'string',
      `a tool_use block: ${JSON.stringify(use && use.input)}`);
const streamedUse = (await client.messages.stream(ask).finalMessage()).content.find((b) => b.type === 'tool_use');
check(streamedUse && JSON.stringify(streamedUse.input) === JSON.stringify(use.input),
      'streamed: input_json_delta accumulates the same input');
const answer = await client.messages.create({ ...ask, max_tokens: 6, tool_choice: { type: 'auto' },
  messages: [...ask.messages, { role: 'assistant', content: called.content },
             { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '18 C, clear' }] }] });
check(answer.role === 'assistant' && answer.usage.input_tokens > called.usage.input_tokens,
      'the tool_result goes back in: round trip done');

// count_tokens: the prompt create rendered.
const counted = await client.messages.countTokens({ model, messages: hello.messages });
check(counted.input_tokens === plain.usage.input_tokens, `count_tokens ${counted.input_tokens} = create's input_tokens`);
const withTools = await client.messages.countTokens({ model, messages: hello.messages, tools });
check(withTools.input_tokens > counted.input_tokens, 'count_tokens counts the tools');

// Auth: x-api-key is checked.
try {
  await new Anthropic({ baseURL: server, apiKey: 'wrong-key', maxRetries: 0 }).messages.create(hello);
  check(false, 'a wrong x-api-key is rejected');
} catch (e) {
  check(e.status === 401 && e.error?.type === 'error' && e.error?.error?.type === 'authentication_error',
        `wrong x-api-key -> ${e.status} ${e.error?.error?.type}`);
}

// A bad body: an Anthropic-shaped 400 naming the field.
try {
  await client.messages.create({ model, messages: hello.messages });
  check(false, 'a body without max_tokens is rejected');
} catch (e) {
  check(e.status === 400 && e.error?.type === 'error' && e.error?.error?.type === 'invalid_request_error' &&
        /max_tokens/.test(e.error.error.message), `no max_tokens -> ${e.status}: ${e.error?.error?.message}`);
}

// Thinking: a template whose generation prompt opens a think block.
const thinker = new Anthropic({ baseURL: thinkingServer, apiKey: 'test-key', maxRetries: 0 });
const think = { ...hello, max_tokens: 6, thinking: { type: 'enabled', budget_tokens: 1024 } };
const thought = await thinker.messages.create(think);
check(thought.content[0].type === 'thinking' && thought.content[0].thinking.length > 0,
      `a thinking block: ${JSON.stringify(thought.content[0].thinking)}`);
const thinkEvents = [];
for await (const e of await thinker.messages.create({ ...think, stream: true })) thinkEvents.push(e);
check(thinkEvents.find((e) => e.type === 'content_block_start').content_block.type === 'thinking' &&
      thinkEvents.filter((e) => e.delta?.type === 'thinking_delta').map((e) => e.delta.thinking).join('') ===
      thought.content[0].thinking, 'streamed: a thinking block of thinking_delta events, the same thinking');
const accumulated = await thinker.messages.stream(think).finalMessage();
check(accumulated.content[0].thinking === thought.content[0].thinking, 'messages.stream accumulates the same thinking');
const plainAgain = await thinker.messages.create({ ...think, thinking: { type: 'disabled' } });
check(plainAgain.content.every((b) => b.type === 'text') && textOf(plainAgain).length > 0, 'thinking disabled: text only');

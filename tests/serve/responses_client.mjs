// The official openai client's Responses API against vtc serve: create
// (plain and streamed, raw events and the client's own stream accumulator,
// which validates every event's item ids and indices), a function-tool
// round trip, text.format json_schema, and the stateless 400s. Exits
// non-zero on any mismatch.
//   node responses_client.mjs SERVER_URL PATH_TO_openai/index.mjs THINKING_SERVER_URL
// (the second server's template opens a think block: its output is reasoning)
const [, , server, modulePath, thinkingServer] = process.argv;
const { default: OpenAI } = await import(modulePath);
const client = new OpenAI({ baseURL: `${server}/v1`, apiKey: 'test-key', maxRetries: 0 });
const check = (cond, what) => {
  if (!cond) { console.error('FAIL:', what); process.exit(1); }
  console.log('ok:', what);
};

for (let i = 0; i < 100; i++) {
  try { await client.models.list(); break; } catch { await new Promise((r) => setTimeout(r, 100)); }
}
const model = (await client.models.list()).data[0].id;

// Plain.
const plain = await client.responses.create({ model, input: 'Once upon a time', max_output_tokens: 12, temperature: 0 });
check(plain.object === 'response' && plain.status === 'incomplete' && plain.incomplete_details.reason === 'max_output_tokens',
      `responses.create: status ${plain.status}`);
const message = plain.output.find((o) => o.type === 'message');
check(message && message.role === 'assistant' && message.content[0].type === 'output_text', 'a message item with output_text');
check(plain.output_text === message.content[0].text && plain.output_text.length > 0, `output_text: ${JSON.stringify(plain.output_text)}`);
check(plain.usage.output_tokens === 12 && plain.usage.input_tokens > 0 &&
      plain.usage.total_tokens === plain.usage.input_tokens + 12, 'usage');

// Streamed, raw events: the sequence, and the same text (greedy).
const events = [];
for await (const e of await client.responses.create({ model, input: 'Once upon a time', max_output_tokens: 12,
                                                      temperature: 0, stream: true })) events.push(e);
const types = events.map((e) => e.type);
const first = (t) => types.indexOf(t);
check(types[0] === 'response.created' && types[1] === 'response.in_progress', 'stream starts: created, in_progress');
check(types.at(-1) === 'response.incomplete' && events.at(-1).response.status === 'incomplete',
      'stream ends: response.incomplete (max_output_tokens)');
check(first('response.output_item.added') < first('response.content_part.added') &&
      first('response.content_part.added') < first('response.output_text.delta') &&
      types.lastIndexOf('response.output_text.delta') < first('response.output_text.done') &&
      first('response.output_text.done') < first('response.content_part.done') &&
      first('response.content_part.done') < first('response.output_item.done'),
      'item events in order: output_item.added, content_part.added, output_text.delta*, .done, content_part.done, output_item.done');
check(events.every((e, i) => e.sequence_number === i), 'sequence_number counts from 0');
const streamed = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
check(streamed === plain.output_text, 'streamed deltas equal the plain output_text');
check(events.at(-1).response.usage.output_tokens === 12, 'usage in the last event');

// The client's stream helper accumulates (and validates) the events.
const helper = await client.responses.stream({ model, input: 'Once upon a time', max_output_tokens: 12, temperature: 0 })
  .finalResponse();
check(helper.status === 'incomplete' && helper.output_text === plain.output_text,
      'responses.stream accepts the events and accumulates the same response');

// A function tool: tool_choice required forces a call; its output goes back.
const tools = [{ type: 'function', name: 'get_weather', description: 'The weather in a city', strict: true,
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'],
                additionalProperties: false } }];
const ask = { model, input: 'Weather in Paris?', tools, tool_choice: 'required', parallel_tool_calls: false,
              max_output_tokens: 200, temperature: 0, reasoning: { effort: 'none' } };
const called = await client.responses.create(ask);
const fc = called.output.find((o) => o.type === 'function_call');
check(called.status === 'completed' && fc && fc.name === 'get_weather' && fc.call_id && fc.id,
      `a function_call item: ${fc && fc.arguments}`);
check(typeof JSON.parse(fc.arguments).city === 'string', 'its arguments hold to the schema');

const toolEvents = [];
for await (const e of await client.responses.create({ ...ask, stream: true })) toolEvents.push(e);
const argsDone = toolEvents.find((e) => e.type === 'response.function_call_arguments.done');
check(toolEvents.some((e) => e.type === 'response.function_call_arguments.delta') && argsDone &&
      argsDone.arguments === fc.arguments, 'streamed: function_call_arguments.delta and .done, the same arguments');
check(toolEvents.at(-1).type === 'response.completed', 'streamed tool call ends with response.completed');
const streamedCall = (await client.responses.stream(ask).finalResponse()).output.find((o) => o.type === 'function_call');
check(streamedCall && streamedCall.arguments === fc.arguments, 'responses.stream accumulates the same call');

const answer = await client.responses.create({ model, tools, max_output_tokens: 6, temperature: 0,
  input: [{ role: 'user', content: 'Weather in Paris?' }, fc,
          { type: 'function_call_output', call_id: fc.call_id, output: '18 C, clear' }] });
check(answer.output.some((o) => o.type === 'message' || o.type === 'function_call'),
      'function_call and function_call_output go back in: round trip done');

// text.format json_schema: the output parses and holds to the schema.
const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer' } },
                 required: ['name', 'age'], additionalProperties: false };
const structured = await client.responses.create({ model, input: 'A person, as JSON', max_output_tokens: 80,
  temperature: 1, seed: 2, text: { format: { type: 'json_schema', name: 'person', strict: true, schema } } });
const person = JSON.parse(structured.output_text);
check(typeof person.name === 'string' && person.name.length <= 8 && Number.isInteger(person.age) &&
      Object.keys(person).length === 2, `json_schema output: ${structured.output_text}`);

// Stateless: store and previous_response_id are a clear 400.
for (const [extra, field] of [[{ store: true }, 'store'], [{ previous_response_id: plain.id }, 'previous_response_id']]) {
  try {
    await client.responses.create({ model, input: 'x', max_output_tokens: 2, ...extra });
    check(false, `${field} is rejected`);
  } catch (e) {
    check(e.status === 400 && e.param === field && /stateless/.test(e.message), `${field} -> ${e.status}: ${e.message}`);
  }
}

// Reasoning: a template whose generation prompt opens a think block.
const thinker = new OpenAI({ baseURL: `${thinkingServer}/v1`, apiKey: 'test-key', maxRetries: 0 });
const think = { model, input: 'Hello', max_output_tokens: 6, temperature: 0 };
const reasoned = await thinker.responses.create(think);
const reasoning = reasoned.output[0];
check(reasoning.type === 'reasoning' && reasoning.content[0].type === 'reasoning_text' && reasoning.content[0].text.length > 0,
      `a reasoning item: ${JSON.stringify(reasoning.content[0].text)}`);
const thinkEvents = [];
for await (const e of await thinker.responses.create({ ...think, stream: true })) thinkEvents.push(e);
check(thinkEvents.filter((e) => e.type === 'response.reasoning_text.delta').map((e) => e.delta).join('') ===
      reasoning.content[0].text, 'streamed: response.reasoning_text.delta events, the same reasoning');
const thought = await thinker.responses.stream(think).finalResponse();
check(thought.output[0].type === 'reasoning' && thought.output[0].content[0].text === reasoning.content[0].text,
      'responses.stream accumulates the same reasoning item');
const noThinking = await thinker.responses.create({ ...think, reasoning: { effort: 'none' } });
check(noThinking.output[0].type === 'message' && noThinking.output_text.length > 0,
      'reasoning.effort none: thinking off, a message');

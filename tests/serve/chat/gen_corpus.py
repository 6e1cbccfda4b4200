#!/usr/bin/env python3
# Writes corpus.json, the model outputs of test_chat_parse: per chat template
# of the llama.cpp bundle (models/templates), outputs written the way that
# template renders tool calls (plain content, one and two calls, reasoning
# with content or a call, content around calls, malformed and truncated
# calls), each under several request shapes. Run it after editing:
#   python3 tests/serve/chat/gen_corpus.py
import json
import os
TOOLS = [{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":{"type":"object","properties":{"location":{"type":"string"},"days":{"type":"integer"}},"required":["location"]}}},
         {"type":"function","function":{"name":"get_time","description":"Get the time","parameters":{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}}}]
REQ = {"messages":[{"role":"user","content":"What is the weather in Paris?"}],"tools":TOOLS}
W = '{"location": "Paris", "days": 3}'
T = '{"timezone": "Europe/Paris"}'
fams = []
def fam(template, fmt, outputs, request="tools"):
    fams.append({"template": template, "format": fmt, "request": request, "outputs": outputs})

def hermes(think=None):
    o = {
      "plain": "The weather in Paris is sunny.",
      "one_call": '<tool_call>\n{"name": "get_weather", "arguments": %s}\n</tool_call>' % W,
      "two_calls": '<tool_call>\n{"name": "get_weather", "arguments": %s}\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": %s}\n</tool_call>' % (W, T),
      "content_before_call": 'Let me look that up.\n<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>',
      "content_after_call": '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>\nDone.',
      "unknown_tool": '<tool_call>\n{"name": "get_stock", "arguments": {"symbol": "X"}}\n</tool_call>',
      "bad_json": '<tool_call>\n{"name": "get_weather", "arguments": {location: Paris}}\n</tool_call>',
      "truncated_call": '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Pa',
      "unicode_content": "Il fait 20\u00b0C \u00e0 Paris \u2600\ufe0f",
      "json_in_content": 'Use {"a": 1} as input.',
    }
    if think:
        s, e = think
        o["reasoning_content"] = s + "The user wants weather." + e + "It is sunny in Paris."
        o["reasoning_call"] = s + "I should call the tool." + e + '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'
        o["unclosed_reasoning"] = s + "Still thinking about"
        o["empty_reasoning"] = s.rstrip("\n") + "\n\n</think>\n\nHello."
    return o

fam("Qwen-Qwen2.5-7B-Instruct.jinja", "hermes", hermes())
fam("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "hermes", hermes())
fam("NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "hermes", hermes())
fam("ibm-granite-granite-4.0.jinja", "hermes", hermes())
fam("Qwen-Qwen3-0.6B.jinja", "qwen3", hermes(("<think>\n", "\n</think>\n\n")))
fam("Qwen-QwQ-32B.jinja", "qwq", hermes(("", "\n</think>\n\n")))

def llama3():
    return {
      "plain": "The weather in Paris is sunny.",
      "one_call": '{"name": "get_weather", "parameters": %s}' % W,
      "typed_call": '{"type": "function", "name": "get_weather", "parameters": %s}' % W,
      "two_calls": '{"name": "get_weather", "parameters": %s}, {"name": "get_time", "parameters": %s}' % (W, T),
      "content_before_call": 'Checking. {"name": "get_weather", "parameters": {"location": "Paris"}}',
      "unknown_tool": '{"name": "get_stock", "parameters": {"symbol": "X"}}',
      "bad_json": '{"name": "get_weather", "parameters": {location}}',
      "truncated_call": '{"name": "get_weather", "parameters": {"location": "Pa',
      "json_in_content": 'Use {"a": 1} as input.',
    }
for t in ["meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.2-3B-Instruct.jinja", "meta-llama-Llama-3.3-70B-Instruct.jinja"]:
    fam(t, "llama3", llama3())

fam("mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral-nemo", {
    "plain": "The weather in Paris is sunny.",
    "one_call": '[TOOL_CALLS][{"name": "get_weather", "arguments": %s, "id": "abcDEF123"}]' % W,
    "two_calls": '[TOOL_CALLS][{"name": "get_weather", "arguments": %s, "id": "abcDEF123"}, {"name": "get_time", "arguments": %s, "id": "xyzXYZ789"}]' % (W, T),
    "call_without_id": '[TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Paris"}}]',
    "content_before_call": 'Sure. [TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Paris"}, "id": "abcDEF123"}]',
    "unknown_tool": '[TOOL_CALLS][{"name": "get_stock", "arguments": {}, "id": "abcDEF123"}]',
    "truncated_call": '[TOOL_CALLS][{"name": "get_weather", "arguments": {"loc',
})
fam("Mistral-Small-3.2-24B-Instruct-2506.jinja", "mistral-small-3.2", {
    "plain": "The weather in Paris is sunny.",
    "one_call": '[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]%s' % W,
    "two_calls_with_ids": '[TOOL_CALLS]get_weather[CALL_ID]000000001[ARGS]%s[TOOL_CALLS]get_time[CALL_ID]000000002[ARGS]%s' % (W, T),
    "one_call_no_id": '[TOOL_CALLS]get_weather[ARGS]%s' % W,
    "two_calls": '[TOOL_CALLS]get_weather[ARGS]%s[TOOL_CALLS]get_time[ARGS]%s' % (W, T),
    "content_before_call": 'Sure. [TOOL_CALLS]get_weather[ARGS]{"location": "Paris"}',
})

def deepseek_r1():
    b, e = "<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>"
    cb, ce, sep = "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>", "<\uff5ctool\u2581sep\uff5c>"
    call = lambda n, a: cb + "function" + sep + n + "\n```json\n" + a + "\n```" + ce
    return {
      "plain": "The weather in Paris is sunny.",
      "reasoning_content": "The user wants weather.\n</think>\n\nIt is sunny in Paris.",
      "explicit_think": "<think>\nThe user wants weather.\n</think>\n\nIt is sunny.",
      "one_call": "Thinking.\n</think>\n\n" + b + call("get_weather", W) + e,
      "two_calls": "Thinking.\n</think>\n\n" + b + call("get_weather", W) + "\n" + call("get_time", T) + e,
      "content_before_call": "Thinking.\n</think>\n\nLet me check." + b + call("get_weather", '{"location": "Paris"}') + e,
      "unclosed_reasoning": "Still thinking about",
      "unknown_tool": "Hmm.</think>" + b + call("get_stock", "{}") + e,
      "truncated_call": "Hmm.</think>" + b + cb + "function" + sep + "get_weather\n```json\n{\"loc",
    }
fam("llama-cpp-deepseek-r1.jinja", "deepseek-r1", deepseek_r1())
fam("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek-r1", deepseek_r1())
fam("deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "reasoning-only", {k: v for k, v in deepseek_r1().items() if k in ("plain", "reasoning_content", "explicit_think", "unclosed_reasoning", "one_call")})

def v31():
    b, e = "<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>"
    cb, ce, sep = "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>", "<\uff5ctool\u2581sep\uff5c>"
    call = lambda n, a: cb + n + sep + a + ce
    return {
      "plain": "The weather in Paris is sunny.",
      "reasoning_content": "The user wants weather.</think>It is sunny in Paris.",
      "one_call": "Thinking.</think>" + b + call("get_weather", W) + e,
      "two_calls": "Thinking.</think>" + b + call("get_weather", W) + call("get_time", T) + e,
      "content_before_call": "Thinking.</think>Let me check." + b + call("get_weather", '{"location": "Paris"}') + e,
      "truncated_call": "Thinking.</think>" + b + cb + "get_weather" + sep + '{"loc',
    }
fam("deepseek-ai-DeepSeek-V3.1.jinja", "deepseek-v3.1", v31())

def qwen3_coder(think):
    c1 = '<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>'
    c2 = '<tool_call>\n<function=get_time>\n<parameter=timezone>\nEurope/Paris\n</parameter>\n</function>\n</tool_call>'
    o = {
      "plain": "The weather in Paris is sunny.",
      "one_call": c1,
      "two_calls": c1 + "\n" + c2,
      "content_before_call": "Let me check.\n\n" + c1,
      "multiline_string_arg": '<tool_call>\n<function=get_weather>\n<parameter=location>\nParis,\nFrance "center"\n</parameter>\n</function>\n</tool_call>',
      "unknown_tool": '<tool_call>\n<function=get_stock>\n<parameter=symbol>\nX\n</parameter>\n</function>\n</tool_call>',
      "truncated_call": '<tool_call>\n<function=get_weather>\n<parameter=location>\nPar',
    }
    if think:
        o["reasoning_call"] = "I should call the tool.\n</think>\n\n" + c1
        o["reasoning_content"] = "The user wants weather.\n</think>\n\nSunny."
    else:
        o["missing_tool_call_tag"] = '<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>'
    return o
fam("Qwen3-Coder.jinja", "qwen3-coder", qwen3_coder(False))
fam("Qwen3.5-4B.jinja", "qwen3.5", qwen3_coder(True))

def gptoss():
    return {
      "final_only": "<|channel|>final<|message|>It is sunny in Paris.",
      "reasoning_final": "<|channel|>analysis<|message|>The user wants weather.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny.",
      "reasoning_call": "<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + W,
      "call_in_role": " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>" + W,
      "preamble_call": "<|channel|>commentary<|message|>Checking now.<|end|><|start|>assistant<|channel|>commentary to=functions.get_time<|message|>" + T,
      "unknown_tool": "<|channel|>commentary to=functions.get_stock<|message|>{}",
      "truncated_call": "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{\"loc",
      "plain_text": "It is sunny.",
    }
fam("openai-gpt-oss-120b.jinja", "gpt-oss", gptoss())

def glm(nl):
    n = "\n" if nl else ""
    c1 = "<tool_call>get_weather" + n + "<arg_key>location</arg_key>" + n + "<arg_value>Paris</arg_value>" + n + "<arg_key>days</arg_key>" + n + "<arg_value>3</arg_value>" + n + "</tool_call>"
    c2 = "<tool_call>get_time" + n + "<arg_key>timezone</arg_key>" + n + "<arg_value>Europe/Paris</arg_value>" + n + "</tool_call>"
    return {
      "plain": "The weather in Paris is sunny.",
      "reasoning_content": "<think>The user wants weather.</think>" + n + "It is sunny.",
      "one_call": c1,
      "two_calls": c1 + "\n" + c2,
      "reasoning_call": "<think>Need the tool.</think>" + n + "Checking." + c1,
      "content_before_call": "Let me check." + c1,
      "unknown_tool": "<tool_call>get_stock" + n + "<arg_key>symbol</arg_key>" + n + "<arg_value>X</arg_value>" + n + "</tool_call>",
      "truncated_call": "<tool_call>get_weather" + n + "<arg_key>location</arg_key>" + n + "<arg_value>Par",
    }
fam("GLM-4.6.jinja", "glm-4.5", glm(True))
fam("GLM-4.7-Flash.jinja", "glm-4.7", {k: (v[len("<think>"):] if v.startswith("<think>") else v) for k, v in glm(False).items()})

def kimi():
    sb, se, cb, ce, ab = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_call_argument_begin|>"
    return {
      "plain": "The weather in Paris is sunny.",
      "one_call": sb + cb + "functions.get_weather:0" + ab + W + ce + se,
      "two_calls": sb + cb + "functions.get_weather:0" + ab + W + ce + cb + "functions.get_time:1" + ab + T + ce + se,
      "content_before_call": "Let me check." + sb + cb + "functions.get_weather:0" + ab + '{"location": "Paris"}' + ce + se,
      "reasoning_call": "<think>Need the tool." + sb + cb + "functions.get_weather:0" + ab + '{"location": "Paris"}' + ce + se,
      "reasoning_content": "<think>The user wants weather.</think>It is sunny.",
      "unknown_tool": sb + cb + "functions.get_stock:0" + ab + "{}" + ce + se,
      "truncated_call": sb + cb + "functions.get_weather:0" + ab + '{"loc',
    }
fam("moonshotai-Kimi-K2.jinja", "kimi-k2", kimi())
fam("Kimi-K2-Thinking.jinja", "kimi-k2", kimi())
fam("Kimi-K2-Instruct.jinja", "kimi-k2", kimi())

fam("CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "command-r7b", {
    "response": "<|START_RESPONSE|>It is sunny.<|END_RESPONSE|>",
    "thinking_response": "<|START_THINKING|>The user wants weather.<|END_THINKING|><|START_RESPONSE|>It is sunny.<|END_RESPONSE|>",
    "thinking_call": '<|START_THINKING|>Need the tool.<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": %s}\n]<|END_ACTION|>' % W,
    "two_calls": '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": %s},\n    {"tool_call_id": "1", "tool_name": "get_time", "parameters": %s}\n]<|END_ACTION|>' % (W, T),
    "truncated_call": '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"loc',
})
fam("meetkai-functionary-medium-v3.1.jinja", "functionary-v3.1-llama-3.1", {
    "plain": "The weather in Paris is sunny.",
    "one_call": "<function=get_weather>" + W + "</function>",
    "two_calls": "<function=get_weather>" + W + "</function>\n<function=get_time>" + T + "</function>",
    "content_before_call": "Checking.<function=get_weather>{\"location\": \"Paris\"}</function>",
    "truncated_call": "<function=get_weather>{\"loc",
})
fam("fireworks-ai-llama-3-firefunction-v2.jinja", "firefunction-v2", {
    "plain": "The weather in Paris is sunny.",
    "one_call": ' functools[{"name": "get_weather", "arguments": %s}]' % W,
    "two_calls": ' functools[{"name": "get_weather", "arguments": %s}, {"name": "get_time", "arguments": %s}]' % (W, T),
    "content_before_call": 'Checking. functools[{"name": "get_weather", "arguments": {"location": "Paris"}}]',
})
def magistral():
    return {
      "plain": "The weather in Paris is sunny.",
      "reasoning_content": "[THINK]The user wants weather.[/THINK]It is sunny.",
      "one_call": "[TOOL_CALLS]get_weather[ARGS]" + W,
      "two_calls": "[TOOL_CALLS]get_weather[ARGS]" + W + "[TOOL_CALLS]get_time[ARGS]" + T,
      "reasoning_call": "[THINK]Need the tool.[/THINK]Checking.[TOOL_CALLS]get_weather[ARGS]" + W,
      "unknown_tool": "[TOOL_CALLS]get_stock[ARGS]{}",
      "truncated_call": "[TOOL_CALLS]get_weather[ARGS]{\"loc",
      "unclosed_reasoning": "[THINK]Still thinking",
    }
fam("mistralai-Ministral-3-14B-Reasoning-2512.jinja", "magistral", magistral())
fam("unsloth-mistral-Devstral-Small-2507.jinja", "magistral", magistral())
fam("meetkai-functionary-medium-v3.2.jinja", "functionary-v3.2", {
    "plain": "all\nThe weather in Paris is sunny.",
    "one_call": "get_weather\n" + W,
    "two_calls": "get_weather\n" + W + "get_time\n" + T,
    "two_calls_with_marker": "get_weather\n" + W + ">>>get_time\n" + T,
    "content_then_call": "all\nLet me check.>>>get_weather\n" + W,
    "unknown_tool": "get_stock\n{}",
    "truncated_call": "get_weather\n{\"loc",
})
fam("ibm-granite-granite-3.3-2B-Instruct.jinja", "reasoning-only", {
    "plain": "It is sunny.",
    "reasoning_content": "<think>The user wants weather.</think>It is sunny.",
    "unclosed_reasoning": "<think>Still thinking",
})
fam("microsoft-Phi-3.5-mini-instruct.jinja", "content-only", {"plain": "It is sunny.", "leading_space": "\n  It is sunny.", "markup": "<tool_call>{}</tool_call>"})


# Other templates of the bundle that the same families cover.
for t, f in [("MiMo-VL.jinja", "hermes"), ("ibm-granite-granite-4.1.jinja", "hermes"),
             ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja", "qwen3.5"), ("StepFun3.5-Flash.jinja", "qwen3.5"),
             ("HuggingFaceTB-SmolLM3-3B.jinja", "reasoning-only"), ("llama-cpp-rwkv-world.jinja", "reasoning-only")]:
    src = {"hermes": hermes(), "qwq": hermes(("", "\n</think>\n\n")), "qwen3.5": qwen3_coder(True),
           "reasoning-only": {"plain": "It is sunny.", "reasoning_content": "<think>The user wants weather.</think>It is sunny.", "unclosed_reasoning": "<think>Still thinking"}}[f]
    fam(t, f, src)

# The same outputs under other request shapes: no tools, thinking disabled,
# reasoning left inline, one call at most.
REQS = {"tools": REQ,
        "no_tools": {k: v for k, v in REQ.items() if k != "tools"},
        "no_think": dict(REQ, enable_thinking=False),
        "no_reasoning": dict(REQ, reasoning_format="none"),
        "serial": dict(REQ, parallel_tool_calls=False)}
base = list(fams)
for f in base:
    for req in ("no_tools", "no_think", "no_reasoning", "serial"):
        fams.append(dict(f, request=req))
# Edge cases of marker handling, for the main families.
extra = {
  "hermes": {"partial_marker_at_end": "Hello <tool_ca", "marker_prefix_in_text": "Use <tool> tags.", "leading_newlines": "\n\nHello.",
             "nested_args": '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris", "opts": {"a": [1, 2.5e3, null, true], "b": "\\u00e9\\n"}}}\n</tool_call>',
             "spaces_in_call": '<tool_call>  {  "name" :  "get_time" , "arguments" : { "timezone" : "UTC" }  }  </tool_call>'},
  "glm-4.5": {"escaped_string": "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Pa\"ris\\ \u00e9\n2</arg_value>\n</tool_call>",
              "python_value": "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>{'a': True, 'b': None}</arg_value>\n</tool_call>"},
  "qwen3-coder": {"json_value_arg": "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n<parameter=days>\n[1, 2]\n</parameter>\n</function>\n</tool_call>",
                  "args_out_of_order": "<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>"},
}
for f in base:
    if f["format"] in extra and f["template"] in ("Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "GLM-4.6.jinja", "Qwen3-Coder.jinja"):
        f["outputs"].update(extra[f["format"]])
json.dump({"requests": REQS, "families": fams}, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.json"), "w"), indent=1, ensure_ascii=False)
print(sum(len(f["outputs"]) for f in fams), "outputs in", len(fams), "templates")

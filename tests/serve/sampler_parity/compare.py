#!/usr/bin/env python3
"""The comparisons of sampler_parity_test.sh (issue 41).

  compare.py pick-stop ORACLE.json
      A stop string from the oracle's text that first occurs mid-way: 3 to 5
      ASCII letters starting in the second third of the text, not earlier.
  compare.py run LABEL ORACLE.json RUN.json STDOUT_TEXT_FILE
      `vtc run --dump-logits` (RUN.json: prompt, generated, and text and
      finish_reason when vtc writes them; else the text vtc printed) against
      `vtc-chat-ref sample` on the same rows: ids, text, finish reason.
  compare.py serve LABEL ORACLE.json RESPONSE.json
      A /v1/completions response against the oracle: text, finish reason.

Each prints one line per check, `LABEL | what | ok` or `... | FAIL: why`
with the first differing token index, and exits 1 when one failed.
"""
import json
import re
import sys


def load(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return json.load(f)


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else -1


def token_at_byte(oracle, offset):
    """The oracle token whose piece holds byte `offset` of the text."""
    for i, end in enumerate(oracle["text_end"]):
        if offset < end:
            return i
    return len(oracle["text_end"])


def text_check(label, oracle, got, failures):
    want = oracle["text"]
    if got == want:
        print(f"{label} | text ({len(want.encode())} bytes) | ok")
        return
    wb, gb = want.encode("utf-8", "replace"), got.encode("utf-8", "replace")
    d = first_diff(wb, gb)
    print(f"{label} | text | FAIL: first difference at byte {d}, in token {token_at_byte(oracle, d)}:"
          f"\n    llama.cpp: {want!r}\n    vtc:       {got!r}")
    failures.append("text")


def finish_check(label, oracle, got, failures):
    want = oracle["finish_reason"]
    if got == want:
        print(f"{label} | finish_reason {got} | ok")
    else:
        print(f"{label} | finish_reason | FAIL: llama.cpp {want} ({oracle['stop_type']}), vtc {got}")
        failures.append("finish")


def pick_stop(oracle):
    text = oracle["text"]
    n = len(text)
    for m in re.finditer(r"[A-Za-z]{3,}", text):
        if m.start() < n // 3:
            continue
        for length in (5, 4, 3):
            word = m.group(0)[:length]
            if len(word) == length and text.find(word) == m.start():
                return word
    return None


def main():
    cmd = sys.argv[1]
    if cmd == "pick-stop":
        word = pick_stop(load(sys.argv[2]))
        if word is None:
            return 1
        print(word)
        return 0
    label, oracle = sys.argv[2], load(sys.argv[3])
    failures = []
    if oracle.get("diverged_at", -1) >= 0:
        print(f"{label} | ids | FAIL: llama.cpp picks a different token at index {oracle['diverged_at']}")
        failures.append("diverged")
    if cmd == "run":
        run = load(sys.argv[4])
        ids, want = run["generated"], oracle["ids"]
        d = first_diff(want, ids)
        if d < 0:
            print(f"{label} | ids ({len(ids)} tokens) | ok")
        else:
            print(f"{label} | ids | FAIL: first difference at token {d}: llama.cpp {want[d] if d < len(want) else '(end)'}, "
                  f"vtc {ids[d] if d < len(ids) else '(end)'}\n    llama.cpp: {want}\n    vtc:       {ids}")
            failures.append("ids")
        if "text" in run:
            text = run["text"]
        else:  # an older vtc run: what it printed after the prompt
            with open(sys.argv[5], encoding="utf-8", errors="replace") as f:
                text = f.read()
            text = text[:-1] if text.endswith("\n") else text
        text_check(label, oracle, text, failures)
        if "finish_reason" in run:
            finish_check(label, oracle, run["finish_reason"], failures)
    elif cmd == "serve":
        try:
            resp = load(sys.argv[4])
        except ValueError:
            with open(sys.argv[4], encoding="utf-8", errors="replace") as f:
                body = f.read()
            print(f"{label} | response | FAIL: not JSON: {body[:400]!r}")
            return 1
        if "choices" not in resp:
            print(f"{label} | response | FAIL: {json.dumps(resp)[:400]}")
            return 1
        choice = resp["choices"][0]
        text_check(label, oracle, choice.get("text", ""), failures)
        finish_check(label, oracle, choice.get("finish_reason"), failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""The official openai-python client against `iris serve`: every OpenAI parameter Iris added for
issue 16 (system messages, stop, image_url.detail, logprobs / top_logprobs) and the Iris
extensions (min_pixels / max_pixels through extra_body), streamed and not, plus the refusals a
client sees as openai.BadRequestError. Run by scripts/openai/ci.sh against the demo bundle (the
tiny random-weight Qwen2.5-VL: its answers are meaningless words, but deterministic under greedy
decoding, which is what the checks below rely on).

Usage: e2e.py URL MODEL IMAGE
"""

import base64
import math
import sys

import openai

URL, MODEL, IMAGE = sys.argv[1:4]
QUESTION = "What is the main object in this image? Answer in one word."
DATA_URL = "data:image/png;base64," + base64.b64encode(open(IMAGE, "rb").read()).decode()
client = openai.OpenAI(base_url=URL + "/v1", api_key="unused", max_retries=0, timeout=120)
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    checks += 1


def user(detail=None):
    image_url = {"url": DATA_URL}
    if detail is not None:
        image_url["detail"] = detail
    return {"role": "user", "content": [{"type": "image_url", "image_url": image_url}, {"type": "text", "text": QUESTION}]}


def ask(messages=None, stream=False, **kw):
    """A greedy request: the completion, or for a stream (text, finish_reason, logprobs, chunks)."""
    extra = kw.pop("extra_body", {})
    args = dict(model=MODEL, messages=messages or [user()], max_tokens=kw.pop("max_tokens", 12),
                temperature=0, extra_body={"ignore_eos": True, **extra}, **kw)
    if not stream:
        return client.chat.completions.create(**args)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **args))
    text, finish, lps = "", None, []
    for c in chunks:
        for ch in c.choices:
            text += ch.delta.content or ""
            finish = ch.finish_reason or finish
            if ch.logprobs is not None:
                lps += ch.logprobs.content
    return text, finish, lps, chunks


def refused(code, param, **kw):
    try:
        ask(**kw)
    except openai.BadRequestError as e:
        err = e.body if isinstance(e.body, dict) else {}
        check(e.status_code == 400 and err.get("code") == code and err.get("param") == param,
              f"{kw}: got {e.status_code} {err}, want 400 {code} ({param})")
        return
    raise SystemExit(f"FAIL: {kw} was accepted, want 400 {code}")


base = ask()
text = base.choices[0].message.content
usage = base.usage
check(base.choices[0].finish_reason == "length" and usage.completion_tokens == 12 and len(text) >= 12,
      f"baseline answer {text!r} ({base.choices[0].finish_reason}, {usage})")
check(base.choices[0].logprobs is None, "logprobs sent unasked")

# System messages: Qwen2.5-VL's default system turn sent explicitly is the same prompt and
# answer; "Hi." (2 tokens) replaces its 6 tokens; "developer" is the same role.
same = ask([{"role": "system", "content": "You are a helpful assistant."}, user()])
check(same.choices[0].message.content == text and same.usage.prompt_tokens == usage.prompt_tokens,
      "the default system prompt sent explicitly changed the answer")
short = ask([{"role": "developer", "content": "Hi."}, user()])
check(short.usage.prompt_tokens == usage.prompt_tokens - 4, f"system 'Hi.': {short.usage.prompt_tokens} prompt tokens")
refused("unsupported_role", "messages[1].role", messages=[{"role": "system", "content": "x"}, {"role": "assistant", "content": "y"}])
refused("unsupported_message_count", "messages",
        messages=[{"role": "system", "content": "x"}, user(), {"role": "assistant", "content": "y"}])

# stop: cut the baseline answer in the middle, across tokens; non-streamed and streamed agree.
mid = len(text) // 2
stop = text[mid:mid + 5]
want = text[:text.index(stop)]
cut = ask(stop=[stop, "\x01never"])
check(cut.choices[0].message.content == want and cut.choices[0].finish_reason == "stop"
      and cut.usage.completion_tokens < 12, f"stop {stop!r}: {cut.choices[0].message.content!r} ({cut.choices[0].finish_reason})")
s_text, s_finish, _, _ = ask(stop=stop, stream=True)
check(s_text == want and s_finish == "stop", f"streamed stop {stop!r}: {s_text!r} ({s_finish})")
absent = ask(stop="\x01never")
check(absent.choices[0].message.content == text and absent.choices[0].finish_reason == "length", "an absent stop string changed the answer")
refused("invalid_value", "stop", stop=["a", "b", "c", "d", "e"])
refused("invalid_type", "stop[1]", stop=["a", 1])

# logprobs: one entry per token, log-probabilities <= 0, top_logprobs sorted, bytes that join to
# the answer, and the streamed entries equal to the non-streamed ones. A token's bytes need not be
# whole UTF-8 (byte-level BPE: random weights pick such tokens, e.g. b"\xe6\x91"), and the answer
# shows an incomplete sequence as U+FFFD, as a lossy decode of the joined bytes does.
lp = ask(logprobs=True, top_logprobs=5)
content = lp.choices[0].logprobs.content
check(lp.choices[0].message.content == text and len(content) == 12, f"logprobs: {len(content)} entries")
for e in content:
    check(e.logprob <= 0 and len(e.top_logprobs) == 5 and e.top_logprobs[0].logprob >= e.top_logprobs[-1].logprob
          and e.top_logprobs[0].logprob >= e.logprob - 1e-6, f"entry {e}")
check(b"".join(bytes(e.bytes) for e in content).decode(errors="replace") == text, "the entries' bytes do not join to the answer")
check(abs(sum(math.exp(t.logprob) for t in content[0].top_logprobs)) <= 1 + 1e-5, "top probabilities sum over 1")
s_text, _, s_lps, chunks = ask(logprobs=True, top_logprobs=5, stream=True)
check(s_text == text and [(e.token, e.logprob, e.bytes) for e in s_lps] == [(e.token, e.logprob, e.bytes) for e in content],
      "streamed logprobs differ from the non-streamed ones")
check(all(c.choices[0].logprobs is not None for c in chunks if c.choices and c.choices[0].delta.content),
      "a streamed content chunk without its logprobs")
refused("invalid_value", "top_logprobs", logprobs=True, top_logprobs=21)
refused("invalid_value", "top_logprobs", top_logprobs=2)

# image_url.detail and min_pixels/max_pixels: fewer or more image tokens, the budget in the iris
# extension, the bundle's bounds never exceeded.
def budget(resp):
    return resp.model_extra["iris"]["image"]["budget"]


low = ask([user("low")])
high = ask([user("high")])
auto = ask([user("auto")])
check(budget(auto) == {"detail": "auto", "min_pixels": 3136, "max_pixels": 12845056}
      and auto.choices[0].message.content == text and auto.usage.prompt_tokens == usage.prompt_tokens, f"auto {budget(auto)}")
check(budget(low)["detail"] == "low" and budget(low)["max_pixels"] == 200704 and budget(high)["detail"] == "high", "low/high budgets")
small = ask(extra_body={"max_pixels": 3136})
check(budget(small)["max_pixels"] == 3136 and small.usage.prompt_tokens < usage.prompt_tokens,
      f"max_pixels 3136: {small.usage.prompt_tokens} prompt tokens, {budget(small)}")
huge = ask(extra_body={"max_pixels": 1 << 40})
check(budget(huge)["max_pixels"] == 12845056, f"max_pixels not clamped: {budget(huge)}")
big = ask(extra_body={"min_pixels": 200000})
check(big.usage.prompt_tokens > usage.prompt_tokens, "min_pixels 200000 did not add image tokens")
refused("invalid_value", "messages[0].content[0].image_url.detail", messages=[user("ultra")])
refused("conflicting_parameters", "max_pixels", extra_body={"min_pixels": 5000, "max_pixels": 4000})
refused("invalid_type", "min_pixels", extra_body={"min_pixels": "5000"})

print(f"openai-python {openai.__version__}: {checks} passed, 0 failed")

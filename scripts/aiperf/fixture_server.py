"""A scripted OpenAI chat server for recording real AIPerf 0.13 artifacts as golden files.

Answers depend only on the question, so the recorded runs are reproducible in shape: a question
containing "FAIL" gets HTTP 500, others get one to five words, streamed one word per chunk with
a small pause. Run with the aiperf venv's python: fixture_server.py PORT
"""

import asyncio
import json
import sys

from aiohttp import web

ANSWERS = {"cat": ["Cat", "."], "dog": ["A", " dog", " on", " the", " grass"], "car": ["Car"]}


def question(body):
    for part in body["messages"][0]["content"]:
        if isinstance(part, dict) and part.get("type") == "text":
            return part["text"]
    return body["messages"][0]["content"]


async def chat(req):
    body = await req.json()
    q = question(body)
    if "FAIL" in q:
        return web.json_response(
            {"error": {"message": "image decode failed", "type": "invalid_request_error", "param": None, "code": "image_corrupt"}},
            status=500,
        )
    words = next((w for k, w in ANSWERS.items() if k in q.lower()), ["Thing"])
    usage = {"prompt_tokens": 90 + len(q), "completion_tokens": len(words), "total_tokens": 90 + len(q) + len(words)}
    if not body.get("stream"):
        await asyncio.sleep(0.02)
        return web.json_response(
            {"id": "r", "object": "chat.completion", "created": 1, "model": body["model"],
             "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "".join(words)}}],
             "usage": usage}
        )
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(req)
    for i, w in enumerate(words):
        await asyncio.sleep(0.005 * (i + 1))
        delta = {"role": "assistant", "content": w} if i == 0 else {"content": w}
        chunk = {"id": "r", "object": "chat.completion.chunk", "created": 1, "model": body["model"],
                 "choices": [{"index": 0, "delta": delta, "finish_reason": "stop" if i == len(words) - 1 else None}]}
        await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
    tail = {"id": "r", "object": "chat.completion.chunk", "created": 1, "model": body["model"], "choices": [], "usage": usage}
    await resp.write(f"data: {json.dumps(tail)}\n\n".encode())
    await resp.write(b"data: [DONE]\n\n")
    return resp


app = web.Application(client_max_size=64 << 20)
app.router.add_post("/v1/chat/completions", chat)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None)

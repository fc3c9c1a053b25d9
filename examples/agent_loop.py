#!/usr/bin/env python3
"""An agent loop on toolcage, with the Python client (pip install ./clients/python).

    TOOLCAGE_URL=http://127.0.0.1:8080 TOOLCAGE_KEY=tc_... python3 examples/agent_loop.py

The model is handed toolcage's tools as function definitions (GET /v1/tools?format=openai),
answers with tool calls, and every call runs in a toolcage sandbox; its result goes back to
the model until the model answers in words. The model here is a scripted stand-in, so the
loop runs without a network model: replace ScriptedModel.respond with your model's API call
(it takes the messages and the tools, and returns the same shape as OpenAI's chat message).
"""
import json
import os
import sys

try:
    import toolcage
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "clients", "python"))
    import toolcage


class ScriptedModel:
    """Asks for one computation in whichever code tool the policy has, then reports it."""

    def respond(self, messages, tools):
        names = {t["function"]["name"] for t in tools}
        if messages[-1]["role"] == "user":
            if "python" in names:
                call = {"name": "python", "arguments": {"code": "print(sum(range(1, 101)))"}}
            else:
                call = {"name": "shell", "arguments": {"code": "echo $(( $(seq -s+ 1 100) ))"}}
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}]}
        result = json.loads(messages[-1]["content"])
        return {"role": "assistant",
                "content": f"The sum of 1..100 is {result['stdout'].strip()}."}


def run_tool(tc, call):
    """One tool call in toolcage; what goes back to the model (errors included)."""
    args = json.loads(call["function"]["arguments"])
    try:
        e = tc.execute(call["function"]["name"], args.pop("code"), **args)
    except toolcage.ProblemError as p:  # refused: the model learns why and may retry
        return {"error": p.type, "detail": p.detail, "errors": p.errors}
    if e["status"] == "pending_approval":
        e = tc.wait(e["id"], timeout=300)  # a human decides; the loop waits
    return {k: e.get(k) for k in ("status", "exit_code", "stdout", "stderr")}


def main():
    tc = toolcage.Client(os.environ.get("TOOLCAGE_URL", "http://127.0.0.1:8080"),
                         os.environ["TOOLCAGE_KEY"])
    tools = tc.tools(format="openai")
    model = ScriptedModel()
    messages = [{"role": "user", "content": "What is the sum of the numbers from 1 to 100?"}]
    for _ in range(8):  # a bound on the turns
        reply = model.respond(messages, tools)
        messages.append(reply)
        if not reply.get("tool_calls"):
            print(reply["content"])
            return 0
        for call in reply["tool_calls"]:
            out = run_tool(tc, call)
            print(f"tool {call['function']['name']}: {json.dumps(out)}", file=sys.stderr)
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": json.dumps(out)})
    print("no answer within 8 turns", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())

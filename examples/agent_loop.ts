// An agent loop on toolcage with the TypeScript client (npm install ./clients/typescript), in
// the shape of Anthropic's Messages API: the model is handed toolcage's tools
// (GET /v1/tools?format=anthropic), answers with tool_use blocks, and every call runs in a
// toolcage sandbox, its output streamed as it comes; the result goes back as a tool_result
// until the model answers in words. The model is a scripted stand-in, so the loop runs
// without a network model: replace ScriptedModel.respond with your model's API call.
//
//   npx tsc examples/agent_loop.ts ... or see tests/integration/client-typescript.test.mjs
//   TOOLCAGE_URL=http://127.0.0.1:8080 TOOLCAGE_KEY=tc_... node agent_loop.js
import { Client, ProblemError, type Execution } from 'toolcage';

type Tool = { name: string; description?: string; input_schema: Record<string, unknown> };
type Block =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: { code: string } & Record<string, unknown> }
  | { type: 'tool_result'; tool_use_id: string; content: string; is_error?: boolean };
type Message = { role: 'user' | 'assistant'; content: string | Block[] };

class ScriptedModel {
  /** Asks for one computation in whichever code tool the policy has, then reports it. */
  respond(messages: Message[], tools: Tool[]): Message {
    const last = messages[messages.length - 1];
    if (typeof last.content === 'string') {
      const python = tools.some((t) => t.name === 'python');
      const input = python ? { code: 'print(sum(range(1, 101)))' } : { code: 'echo $(( $(seq -s+ 1 100) ))' };
      return { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: python ? 'python' : 'shell', input }] };
    }
    const result = last.content.find((b): b is Extract<Block, { type: 'tool_result' }> => b.type === 'tool_result');
    const out = JSON.parse(result?.content ?? '{}') as { stdout?: string };
    return { role: 'assistant', content: [{ type: 'text', text: `The sum of 1..100 is ${(out.stdout ?? '').trim()}.` }] };
  }
}

/** One tool call in toolcage, streamed; what goes back to the model (refusals included). */
async function runTool(tc: Client, use: Extract<Block, { type: 'tool_use' }>): Promise<Block> {
  const { code, ...rest } = use.input;
  try {
    let result: Execution | undefined;
    for await (const ev of tc.stream({ tool: use.name, code, ...rest })) {
      if (ev.event === 'stdout' || ev.event === 'stderr') process.stderr.write(`[${use.name} ${ev.event}] ${ev.data.text}`);
      else if (ev.event === 'held') process.stderr.write(`[${use.name}] held for approval ${ev.data.approval_id}\n`);
      else if (ev.event === 'result') result = ev.data;
      else if (ev.event === 'error') throw new Error(ev.data.detail ?? 'error');
    }
    if (!result) throw new Error('the stream ended without a result');
    const { status, exit_code, stdout, stderr } = result;
    return { type: 'tool_result', tool_use_id: use.id, content: JSON.stringify({ status, exit_code, stdout, stderr }), is_error: status !== 'completed' };
  } catch (e) {
    const content = e instanceof ProblemError ? JSON.stringify({ error: e.type, detail: e.detail }) : String(e);
    return { type: 'tool_result', tool_use_id: use.id, content, is_error: true };
  }
}

async function main(): Promise<number> {
  const tc = new Client(process.env.TOOLCAGE_URL ?? 'http://127.0.0.1:8080', process.env.TOOLCAGE_KEY ?? '');
  const tools = (await tc.tools('anthropic')) as Tool[];
  const model = new ScriptedModel();
  const messages: Message[] = [{ role: 'user', content: 'What is the sum of the numbers from 1 to 100?' }];
  for (let turn = 0; turn < 8; turn++) { // a bound on the turns
    const reply = model.respond(messages, tools);
    messages.push(reply);
    const uses = typeof reply.content === 'string' ? [] : reply.content.filter((b): b is Extract<Block, { type: 'tool_use' }> => b.type === 'tool_use');
    if (uses.length === 0) {
      const text = typeof reply.content === 'string' ? reply.content : reply.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      console.log(text);
      return 0;
    }
    messages.push({ role: 'user', content: await Promise.all(uses.map((u) => runTool(tc, u))) });
  }
  console.error('no answer within 8 turns');
  return 1;
}

process.exitCode = await main();

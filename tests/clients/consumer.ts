// Type-checked by tests/integration/client-typescript.test.mjs (tsc --noEmit, strict): the
// client's types are the contract's. A field the contract does not have must not compile.
import { Client, ProblemError, type Execution, type HeldExecution } from '../../clients/typescript/dist/index.js';

export async function use(tc: Client): Promise<string> {
  const e: Execution | HeldExecution = await tc.execute({ tool: 'shell', code: 'echo', limits: { timeout_ms: 1000 } });
  if (e.status === 'pending_approval') return e.approval_id ?? '';
  const done: Execution = await tc.wait(e.id);
  const code: number | null | undefined = done.exit_code;
  // @ts-expect-error: not a field of ExecuteRequest
  await tc.execute({ tool: 'shell', code: 'x', timeout: 5 });
  // @ts-expect-error: limits are integers
  await tc.execute({ tool: 'shell', code: 'x', limits: { timeout_ms: 'long' } });
  // @ts-expect-error: not an execution status
  for await (const s of tc.executions({ status: 'finished' })) void s;
  for await (const ev of tc.stream({ tool: 'shell', code: 'echo' })) {
    if (ev.event === 'stdout') {
      // @ts-expect-error: an output event carries text, not an Execution
      void ev.data.stdout;
      return ev.data.text;
    }
    if (ev.event === 'result') return ev.data.stdout;
  }
  const s = await tc.openSession({ tool: 'shell', ttl_seconds: 60 });
  // @ts-expect-error: not a field of SessionRequest
  await tc.openSession({ tool: 'shell', ttl: 60 });
  const inSession: Execution = await tc.runInSession(s.id, { code: 'echo', timeout_ms: 1000 });
  const value: string | null | undefined = inSession.result;
  // @ts-expect-error: a session's status is active or ended
  if (s.status === 'open') return '';
  await tc.closeSession(s.id);
  void value;
  try {
    await tc.execute({ tool: 'nosuch', code: '' });
  } catch (err) {
    if (err instanceof ProblemError && err.type === 'unknown-tool') return err.detail;
  }
  return `${done.stdout}${code ?? ''}`;
}

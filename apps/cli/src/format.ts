import type { ChatMessage, RunRecord, TraceEvent } from '@arcflow/core';

/** One event as a line for people: seq, kind, then its fields (ids and numbers only, as recorded). */
export function formatEvent(event: TraceEvent): string {
  const { kind, seq, run_id: _run, ts: _ts, step_id, iteration, ...fields } = event as TraceEvent & Record<string, unknown>;
  const where = iteration === undefined ? step_id : `${step_id}#${iteration}`;
  const details = Object.entries(fields)
    .map(([key, value]) => `${key}=${typeof value === 'object' ? compact(value) : String(value)}`)
    .join(' ');
  return printable(`${String(seq).padStart(4)}  ${kind.padEnd(26)} ${where.padEnd(6)} ${details}`);
}

/**
 * Text made safe for a terminal: control characters (newlines, escape sequences, C1 codes) are
 * shown as `\xNN` / `\uNNNN`, so a name or message from outside cannot forge or colour lines.
 */
export function printable(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (char) => {
    const code = char.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/**
 * A text meant to be read as text (a model's answer, a message): its line breaks and tabs are kept,
 * every other control character is escaped as `printable` does (a carriage return, an escape
 * sequence or a C1 code could still overwrite or colour what the terminal shows).
 */
export function printableText(text: string): string {
  return text
    .split(/(\r?\n|\t)/)
    .map((piece, at) => (at % 2 === 1 ? (piece === '\t' ? piece : '\n') : printable(piece)))
    .join('');
}

function compact(value: unknown): string {
  if (value && typeof value === 'object' && 'total' in value) {
    const tokens = value as { input: number; output: number; total: number };
    return `${tokens.input}/${tokens.output}/${tokens.total}`;
  }
  return JSON.stringify(value);
}

/** A message of a conversation for people: `role: text` (parts as their text, images as [image], tool calls by name). */
export function formatMessage(message: ChatMessage): string {
  const text = messageText(message);
  const calls = message.role === 'assistant' && message.tool_calls?.length ? ` [calls ${message.tool_calls.map((call) => call.function.name).join(', ')}]` : '';
  return `${message.role}: ${printableText(text)}${calls}`;
}

/** A message's content as text: parts as their text, images as [image]. */
function messageText(message: ChatMessage): string {
  const content = message.content;
  return typeof content === 'string' ? content : content === null ? '' : content.map((part) => (part.type === 'text' ? part.text : '[image]')).join(' ');
}

/**
 * A run's conversation for people (`arcflow inspect --messages`): a message a block, `role:` then
 * its text; an assistant turn's tool calls each on a line with their id and arguments, as the
 * model wrote them; a tool result named by the call it answers. Continuation lines are indented.
 */
export function formatConversation(messages: readonly ChatMessage[]): string {
  const indent = (text: string) => printableText(text).replace(/\n(?=.)/g, '\n    ');
  return messages
    .map((message, index) => {
      const head = `[${index}] ${message.role === 'tool' ? `tool ${printable(message.tool_call_id)}` : message.role}:`;
      const text = messageText(message);
      const lines = [text ? `${head} ${indent(text)}` : head];
      if (message.role === 'assistant') {
        for (const call of message.tool_calls ?? []) lines.push(`    → ${printable(call.function.name)} ${printable(call.id)} ${indent(call.function.arguments)}`);
      }
      return lines.join('\n');
    })
    .join('\n');
}

/** A run record for people. */
export function formatRun(run: RunRecord): string {
  const lines = [
    `run        ${run.run_id}`,
    ...(run.workflow ? [`workflow   ${run.workflow}`] : []),
    ...(run.parent_run_id ? [`parent     ${run.parent_run_id} (call ${run.parent_tool_call_id})`] : []),
    // A fork (SPEC §15): where it began; a retried run: its retry.
    ...(run.forked_from ? [`forked     from ${run.forked_from.run_id}, step ${run.forked_from.step_id}, iteration ${run.forked_from.iteration}`] : []),
    ...(run.retried_by ? [`retried    by ${run.retried_by}`] : []),
    // A steering run (SPEC §11, on_busy: steer) ends at once: say where its input went.
    `status     ${run.status}${run.steered_into ? ` (steered into ${run.steered_into}: its input joined that run's conversation)` : ''}`,
    `iterations ${run.iterations}`,
    `tokens     ${run.usage.input} in / ${run.usage.output} out / ${run.usage.total} total`,
  ];
  if (run.finished_at) lines.push(`duration   ${run.finished_at - run.created_at} ms`);
  const outputAt = lines.length;
  if (run.error) lines.push(`error      ${run.error.code} (${run.error.error_code}): ${run.error.message}`);
  for (const call of run.pending_approvals ?? []) {
    lines.push(
      `waiting    ${call.tool_call_id}  ${call.tool_name} ${JSON.stringify(call.arguments)}  (step ${call.step_id}, iteration ${call.iteration}; expires ${new Date(call.expires_at).toISOString()})`,
    );
  }
  for (const call of run.pending_tool_results ?? []) {
    lines.push(
      `awaiting   ${call.tool_call_id}  ${call.tool_name} ${JSON.stringify(call.arguments)}  (a result from outside; step ${call.step_id}, iteration ${call.iteration}; expires ${new Date(call.expires_at).toISOString()})`,
    );
  }
  for (const [id, step] of Object.entries(run.steps ?? {})) lines.push(`step       ${id}  ${step.status}${step.error ? `  ${step.error.error_code}` : ''}`);
  if (run.state) lines.push(...formatState(run.state));
  const text = lines.map(printable);
  // The output is text to read: its lines stay lines, aligned under the first.
  if (run.output !== undefined) text.splice(outputAt, 0, `output     ${printableText(run.output).replaceAll('\n', `\n${' '.repeat(11)}`)}`);
  return text.join('\n');
}

/** A run's state (SPEC §17) for people: a key a line, sorted, with its value as compact JSON; `{}` when empty. */
function formatState(state: Readonly<Record<string, unknown>>): string[] {
  const keys = Object.keys(state).sort();
  if (keys.length === 0) return ['state      {}'];
  return keys.map((key, index) => `${(index === 0 ? 'state' : '').padEnd(11)}${/^[\w.-]+$/.test(key) ? key : JSON.stringify(key)}: ${JSON.stringify(state[key])}`);
}

/** Runs as a table for people: id, status, agent, when created, how long, iterations, tokens. */
export function formatRunList(runs: readonly RunRecord[]): string {
  if (runs.length === 0) return 'no runs';
  const rows = runs.map((run) => [
    run.run_id,
    run.status,
    run.agent ?? '',
    new Date(run.created_at).toISOString().replace('T', ' ').slice(0, 19),
    run.finished_at ? `${run.finished_at - run.created_at} ms` : '-',
    String(run.iterations),
    String(run.usage.total),
  ]);
  const header = ['RUN', 'STATUS', 'AGENT', 'CREATED (UTC)', 'DURATION', 'ITER', 'TOKENS'];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  return [header, ...rows]
    .map((row) =>
      printable(
        row
          .map((cell, column) => cell.padEnd(widths[column]!))
          .join('  ')
          .trimEnd(),
      ),
    )
    .join('\n');
}
